/* vk_ops.h: the Vulkan backend's ops, as vk_backend.c puts them in the table. */
#ifndef OX_BACKEND_VK_OPS_H
#define OX_BACKEND_VK_OPS_H

#include "backend/vulkan/vk_internal.h"

bool vk_supports(enum backend_op op, enum ox_dtype type);
/* The device's lookup tables for the table-coded weight types, uploaded through b the first
 * time (every context's set-up calls it). */
enum ox_status vk_tables_ready(struct backend *b);
enum ox_status vk_prepare_weight(struct backend_weights *bw, const struct backend_tensor *t,
                                 const void **copy);
void vk_release_weight(const void *copy);
/* An RMSNorm's weights into the f16 matrices after it (vk_fold_norm.c; backend.h's fold_norm). */
enum ox_status vk_fold_norm(struct backend_weights *bw, const float *g, const struct mat *mats,
                            int count, bool *folded);
/* The loader's stream (weights go up through it), held until vk_loader_end; *st says whether it
 * could be made. */
struct backend *vk_loader_begin(enum ox_status *st);
void vk_loader_end(void);
void vk_matmul(struct backend *b, const struct mat *w, const float *x, float *y, int n);
bool vk_matmul_add(struct backend *b, const struct mat *w, const float *x, float *y, int n);
bool vk_matmul_multi(struct backend *b, int count, const struct mat *w, const float *x,
                     const struct norm_in *norm, float *const *y, int n);
bool vk_matmul_glu(struct backend *b, enum glu_kind kind, const struct mat *gate,
                   const struct mat *up, const float *x, const struct norm_in *norm, float *y,
                   int n);
void vk_get_rows(struct backend *b, const struct mat *w, const int32_t *ids, float *y, int n);
void vk_add(struct backend *b, float *y, const float *x, size_t n);
void vk_scale(struct backend *b, float *y, float s, size_t n);
void vk_zero(struct backend *b, float *y, size_t n);
void vk_axpy(struct backend *b, float *y, const float *x, float w, size_t n);
void vk_gelu(struct backend *b, const float *x, float *y, size_t n);
void vk_softcap(struct backend *b, float *y, float cap, size_t n);
void vk_glu(struct backend *b, enum glu_kind kind, const float *gate, const float *up, float *y,
            size_t n);
void vk_rms_norm(struct backend *b, const float *x, const float *g, float *y, int n, int dim,
                 float eps);
/* RMSNorm of n rows (up to 8) into the int8 groups matvec.comp's integer form reads: q the rows'
 * bytes, then their groups' (d, sums) (quantize_group.glsl). */
void vk_rms_norm_bytes(struct vk_state *s, const float *x, const float *g, float eps, int n,
                       int dim, uint8_t *q);
/* RMSNorm of n rows (up to 8) into f16, to nearest (what f16 weights' matvec.comp reads). */
void vk_rms_norm_halves(struct vk_state *s, const float *x, const float *g, float eps, int n,
                        int dim, void *y);
void vk_layer_norm(struct backend *b, const float *x, const float *g, const float *bias, float *y,
                   int n, int dim, float eps);
void vk_softmax(struct backend *b, float *x, int n, int dim);
void vk_add_row(struct backend *b, float *y, const float *row, int n, int dim);
void vk_copy_rows(struct backend *b, float *dst, size_t dst_stride, const float *src,
                  size_t src_stride, int rows, int cols);
void vk_sigmoid_scale_rows(struct backend *b, float *y, const float *g, int n, int dim);
void vk_rope(struct backend *b, float *x, const int32_t *pos, int n, int n_heads, int head_dim,
             const struct rope_params *p);
bool vk_rope_store(struct backend *b, const struct rope_store_args *a);

void vk_cache_store(struct backend *b, enum ox_dtype type, const float *x, int n, int dim,
                    uint8_t *base, size_t row_bytes, const int32_t *cells);
void vk_cache_load(struct backend *b, enum ox_dtype type, const uint8_t *base, size_t row_bytes,
                   float *y, int n_cells, int dim, const int32_t *cell_pos);
void vk_attention(struct backend *b, const struct attn_args *a);
/* The context's memory for decode attention split among workgroups (at vk_init). */
void vk_attention_parts_ready(struct backend *b);

void vk_delta_net(struct backend *b, const struct delta_net_args *a);
void vk_mamba2(struct backend *b, const struct mamba2_args *a);

#endif
