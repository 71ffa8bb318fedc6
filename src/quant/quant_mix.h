/* quant_mix.h: which tensor type each tensor gets when a model is quantized to a file type
 * (llama.cpp's per-tensor mixing rules: Q4_K_M gives attn_v/ffn_down more bits, etc.). */
#ifndef OX_QUANT_QUANT_MIX_H
#define OX_QUANT_QUANT_MIX_H

#include <regex.h>
#include <stdbool.h>
#include <stdint.h>

#include "oxidize.h"

/* Facts about the model that the rules look at, from its GGUF hyper-parameters. */
struct quant_mix_model {
    bool is_falcon; /* falcon has its own ffn_down / attn_output rules */
    bool is_70b;    /* llama.cpp's 70B size class: attn_v gets 5 bits */
    int n_layer;    /* blocks */
    int n_gqa;      /* query heads per kv head */
    int n_expert;   /* 0 for dense models */
};

/* Tensor categories the rules distinguish (broad, not per architecture). */
enum quant_category {
    CAT_OTHER, CAT_OUTPUT, CAT_TOKEN_EMBD, CAT_ATTN_QKV, CAT_ATTN_KV_B, CAT_ATTN_V, CAT_ATTN_K,
    CAT_ATTN_Q, CAT_ATTN_OUTPUT, CAT_FFN_UP, CAT_FFN_GATE, CAT_FFN_DOWN,
};

struct quant_mix {
    struct quant_mix_model model;
    enum ox_ftype ftype;
    enum ox_dtype base;          /* the file type's default tensor type */
    bool pure, only_copy, quantize_output, has_imatrix;
    int output_type, token_embd_type; /* an ox_dtype, or -1 */
    regex_t *patterns;           /* compiled overrides, n_overrides of them */
    const struct ox_tensor_type_override *overrides;
    size_t n_overrides;
    /* counters the rules advance as tensors are visited, in file order */
    int n_attn_v, i_attn_v, i_ffn_down, i_ffn_gate, i_ffn_up;
    int n_fallback;
    bool tied_embeddings;        /* no output.weight: token_embd doubles as the output */
};

/* Prepare the rules for a model whose tensors are named names[0..n) (visited later in that
 * order). Compiles the override patterns; OX_ERR_INVALID_ARG for a bad pattern or file type. */
enum ox_status quant_mix_init(struct quant_mix *m, const struct quant_mix_model *model,
                              const struct ox_quantize_params *params, bool has_imatrix,
                              const char *const *names, size_t n);
void quant_mix_free(struct quant_mix *m);

enum quant_category quant_category_of(const char *name);

/* Whether this tensor is quantized at all (matrices named *weight, minus norms, routers, ...). */
bool quant_mix_allows(const struct quant_mix *m, const char *name, int n_dims);

/* The type for the next tensor (call once per tensor, in file order: the rules count layers).
 * OX_ERR_FORMAT when an expert tensor's layer cannot be read from its name. */
enum ox_status quant_mix_choose(struct quant_mix *m, const char *name, int n_dims,
                                const int64_t ne[4], enum ox_dtype current,
                                enum ox_dtype *out);

/* Types so coarse that llama.cpp refuses to produce them without an importance matrix. */
bool quant_mix_requires_imatrix(const char *name, enum ox_dtype type, enum ox_ftype ftype);

#endif
