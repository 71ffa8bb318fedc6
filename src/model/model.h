/* model.h: a loaded model: hyper-parameters, architecture traits and bound weights. */
#ifndef OX_MODEL_MODEL_H
#define OX_MODEL_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "gguf/gguf.h"
#include "oxidize.h"

#define MODEL_MAX_LAYERS 512
#define MODEL_MAX_EXPERTS_USED 64 /* experts one token runs: the router keeps them on the stack */

/* How an architecture differs from Llama (DESIGN.md section 3); llama is all defaults. */
struct arch_desc {
    const char *name;
    bool rope_neox; /* rotate halves instead of adjacent pairs */
};

/* Hyper-parameters from the GGUF keys "<arch>.*". */
struct model_config {
    const struct arch_desc *arch;
    int32_t n_vocab, n_ctx_train, n_embd, n_layer, n_head, n_head_kv, n_ff;
    int32_t head_dim_k, head_dim_v; /* attention.key_length / value_length */
    int32_t n_rot;                  /* rope.dimension_count */
    int32_t n_expert, n_expert_used;
    struct rope_params rope; /* freq_factors is bound with the weights (rope_freqs.weight) */
    float norm_eps;
};

/* A weight: type, shape and its bytes in the mapped file. */
struct weight {
    const char *name;
    enum ox_dtype type;
    int64_t ne[4];
    const uint8_t *data;
    size_t row_bytes; /* bytes of one ne[0] row */
};

struct layer_weights {
    const struct weight *attn_norm, *wq, *wk, *wv, *wo;
    const struct weight *ffn_norm, *ffn_gate, *ffn_up, *ffn_down;
    const struct weight *ffn_gate_inp, *ffn_gate_exps, *ffn_up_exps, *ffn_down_exps; /* MoE */
};

struct ox_model {
    struct ox_gguf *gguf;
    struct ox_vocab *vocab;
    struct model_config cfg;
    struct weight *weights; /* one per tensor of the file */
    const struct weight *tok_embd, *output_norm, *output;
    struct layer_weights *layers;
    uint64_t n_params;
};

enum ox_status model_config_load(const struct ox_gguf *g, struct model_config *cfg);
enum ox_status model_bind_weights(struct ox_model *m);

#endif
