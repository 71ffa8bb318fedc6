/* vk_backend.h: the Vulkan backend as the rest of the library sees it: its op table (registry.c
 * registers it). Built only with -DOX_VULKAN=ON (OX_HAVE_VULKAN). */
#ifndef OX_BACKEND_VK_BACKEND_H
#define OX_BACKEND_VK_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"

extern const struct backend_ops backend_vulkan_ops;

/* Whether the process's device runs prompts' products on cooperative matrices (gemm_cm.comp:
 * weights and activations as f16, summed in f32), and their attention over f16 cache rows
 * (attention_cm.comp); false where there is no device. */
bool vk_backend_coopmat(void);
/* Whether f16 and q4_K weights' prompt products run on workgroup-wide matrices (gemm_cm2.comp:
 * the same f16 products, in tiles of 64 or 128 rows and tokens). */
bool vk_backend_coopmat2(void);
/* Whether it runs decode's products (up to 8 tokens) of vk_backend_q8_type's weights on integer
 * dot products: x as groups of 32 int8 levels, each with the scale max|x| / 127. */
bool vk_backend_dot8(void);
bool vk_backend_q8_type(enum ox_dtype type);
/* The tokens from which products take quantized weights made f16 first, then the f16 weights'
 * tiled product (0: none); for tests, that number set. */
uint32_t vk_backend_dequant_tokens(void);
void vk_backend_set_dequant_tokens(uint32_t tokens);
/* Whether decode's q, k and v products rotate q and k and store k and v into the cache
 * themselves (normal RoPE, f32 or f16 rows), rather than rope_store.comp after them; for tests,
 * that turned on or off. */
bool vk_backend_folds(void);
void vk_backend_set_folds(bool on);
/* How many rope_store calls q, k and v's products have taken so far (for tests). */
uint64_t vk_backend_rope_folds(void);
/* Whether decode's products make the int8 groups the product after them takes (y += W x those of
 * the RMSNorm of y, a GLU those of its output), so that no op runs between them; for tests, that
 * turned on or off; how many outputs were taken that way so far. */
bool vk_backend_group_folds(void);
void vk_backend_set_group_folds(bool on);
uint64_t vk_backend_group_folds_taken(void);
/* The widest y += W x that makes them (OX_VK_GROUP_COLS; 4096). */
int64_t vk_backend_group_cols(void);
/* Whether the RMSNorms before f16 matrices go into them at load and a decode step's product of
 * one token takes the norm in (OX_VK_NORM_IN=0: not); for tests, that turned on or off (for the
 * models loaded after). */
bool vk_backend_norm_in(void);
void vk_backend_set_norm_in(bool on);
/* How many products took their norm in so far (for tests). */
uint64_t vk_backend_norm_ins_taken(void);
/* Whether a decode step's q, k and v products of two or three weight types run with no barrier
 * between their dispatches (OX_VK_JOIN=0: not); for tests, that turned on or off; how many
 * barriers were left out that way so far. */
bool vk_backend_joins(void);
void vk_backend_set_joins(bool on);
uint64_t vk_backend_joins_taken(void);
/* How many f16 prompt products were cut into column slices on gemm_cm2.comp so far (for tests;
 * OX_VK_CM2_SLICES=0: none). */
uint64_t vk_backend_cm2_cuts_taken(void);
/* Whether a decode step's attention over f16 cache rows runs on attention_decode.comp
 * (OX_VK_DECODE_ATTN=0: attention.comp); for tests, that turned on or off; how many dispatches
 * took it so far. */
bool vk_backend_decode_attention(void);
void vk_backend_set_decode_attention(bool on);
uint64_t vk_backend_decode_attentions_taken(void);
/* Whether decode attention over 512 cells or more is split among workgroups
 * (OX_VK_DECODE_SPLIT=0: not); how many dispatches were so far. */
bool vk_backend_decode_split(void);
uint64_t vk_backend_decode_splits_taken(void);

#endif
