/* context.h: an inference context: KV cache, activation buffers and the backend it runs on. */
#ifndef OX_MODEL_CONTEXT_H
#define OX_MODEL_CONTEXT_H

#include "backend/backend.h"
#include "kv/kv_cache.h"
#include "model/delta_net.h"
#include "model/model.h"

_Static_assert(KV_MAX_LAYERS >= MODEL_MAX_LAYERS, "the cache keeps rows for every layer");

/* Activations for up to n_batch tokens (sized once, at creation), in a stage's memory; the b_
 * arrays are the batch's tokens, positions, sequences and cells as its backend reads them (on
 * the CPU the context's own arrays, but for b_tok). */
struct activations {
    float *x, *xn, *qkv, *q, *k, *v, *attn, *proj, *branch, *gate, *up;
    float *qg;           /* gated attention (arch attn_gate): [n_batch][2 q] queries and gates as
                            projected, then [n_batch][q] the gates alone; else NULL */
    float *hidden;       /* the GLU's output; qkv: room only with wqkv. Some of these share
                            memory (context.c's alloc_activations says which, and why they may) */
    int64_t ffn_slice;   /* 0, or the width the FFN of a batch too wide for gate goes by
                            (transformer.c's ffn_sliced): gate and up then hold n_batch rows of
                            it, or of n_embd if wider */
    float *kf, *vf;      /* the cache of one layer as floats [n_cells][kv dim] */
    float *k_t;          /* room for kf transposed, for the attention of large batches */
    float *router;       /* [n_batch][n_expert] */
    float *router_host;  /* the router's probabilities copied back, to pick experts */
    int32_t *expert_ids; /* [n_batch][n_expert_used]: a backend's own choice of experts */
    float *expert_w;     /* and their weights */
    float *moe_out;      /* [n_batch][n_embd] for a backend's MoE (MoE models only) */
    float *mla, *mla_in, *mla_out; /* latent attention's (mla.c): each head's query or output
                                      [n_batch][n_head][its size], and per-head scratch */
    float *ple, *ple_tmp; /* per-layer embeddings: [n_layer][n_batch][n_embd_per_layer], and
                             room to make them (per_layer_embd.c); else NULL */
    float *type_row;      /* an encoder's token-type row 0 [n_embd] (encoder.c); else NULL */
    float *ranks_rows;    /* a rank's shard whose q and k norms span all heads: [n_batch][all
                             heads' q or k] (block_norm_ranks); else NULL */
    int32_t *b_tok, *b_pos, *b_seq, *b_cell;
};

/* A backend and the layers [layer_begin, layer_end) it runs, with their KV rows and its own
 * activations. A context has one stage, or two when only some layers are on the GPU: the CPU
 * runs the embeddings and the first layers, the GPU the rest and the output, and the hidden
 * state crosses once per batch. The forward pass hands the stage it runs to each step as an
 * argument (struct stage *s). */
struct stage {
    struct backend be;
    struct activations act;
    int32_t layer_begin, layer_end;
    uint8_t *k_rows, *v_rows; /* its layers' cached rows, one after another */
    uint8_t *k[MODEL_MAX_LAYERS], *v[MODEL_MAX_LAYERS]; /* layer il's n_cells rows of
                                                           kv.k_row[il] bytes in them, or NULL */
    int32_t *kv_pos;  /* kv.pos, kv.seq and kv.used_end as the backend reads them (uploaded per */
    uint64_t *kv_seq; /* batch) */
    int32_t *kv_used;
    int32_t *kv_span;                  /* kv.span (a device's copy; NULL on the CPU) */
    struct rope_params rope, rope_swa; /* the model's, frequency factors in the stage's memory */
};

/* An adapter a context applies, and its scale (ox_context_set_lora). */
struct context_lora {
    const struct ox_lora *lora;
    float scale;
};

/* The adapters as a stage runs them (lora_bind.c): a delta per adapter and weight, chained per
 * weight slot (the stage's be.lora), in its memory with the room they compute in. */
struct context_lora_stage {
    struct mat_lora *deltas;
    const struct mat_lora **by_slot;
    float *room;   /* A x and B (A x) */
    float *copies; /* a device stage's A and B, or NULL: the adapters' own floats serve */
};

struct ox_context {
    const struct ox_model *model;
    struct ox_context_params params;
    struct stage stages[2];
    int32_t n_stages;
    struct kv_cache kv;        /* the cells; layer il's rows in the stage that runs it (k, v) */
    int32_t *pos, *seq, *cell; /* this batch's positions, sequences and cells */
    float *b_logits;           /* [logit_rows][n_vocab], written by the last stage */
    int32_t logit_rows;        /* n_batch on the CPU (b_logits is logits); fewer on a GPU */
    uint64_t kv_bytes, buffer_bytes; /* backend memory: the KV cache, and everything else */
    float *logits;                   /* [n_batch][n_vocab], copied to the host */
    int32_t *out_row;                /* batch index -> row of logits, or -1 */
    float *embd;      /* [n_batch][n_embd] on the host: the output rows' normed hidden states
                         (params.embeddings only, else NULL), by out_row like logits */
    double *embd_sum; /* [n_embd]: ox_embed's running sum */
    bool *embd_want;  /* [n_batch]: the rows ox_embed asks for in one piece */
    bool embd_only;   /* ox_embed's batches: the hidden states alone, no output matrix */
    int32_t n_batch_last;
    enum ox_status batch_err; /* the first failure a download in the middle of the batch saw */
    bool moe_on_host;   /* this batch took a device stage's router probabilities to the host */
    bool moe_graphable; /* the last single-token batch did not: later ones may be graphs */
    struct delta_net_state *dn; /* recurrent layers' per-sequence state, or NULL (delta_net.h) */
    struct context_lora lora[MAT_LORA_MAX]; /* LoRA adapters applied (lora_bind.c), in order, */
    int n_lora;
    struct context_lora_stage lora_stage[2]; /* as each stage runs them */
    uint32_t lora_gen; /* changes with them: a recorded step holds the old ones */
    /* a rank of a split model (shard.c): the group whose sums join the ranks' partial rows
     * (block_reduce), and this rank's number in it; NULL for a whole model */
    struct backend_group *group;
    int rank;
    /* a rank of a model split by layers (pipeline.c): the group its hidden state goes through
     * to the next rank (and from the last back to rank 0); NULL for any other */
    struct backend_group *pipe;
    /* rank 0's context of a split model (split.c): the other ranks' contexts, which every call
     * that changes this one changes too (split_ops.c); NULL for any other */
    struct split_context *split;
};

/* A batch as the forward pass reads it: decode.c fills it once the batch is checked and its
 * tokens have cells (the arrays are the context's own, valid until the next batch). */
struct batch_view {
    int n;
    const ox_token *tokens;
    const int32_t *pos, *seq, *cell; /* each token's position, sequence and cache cell */
    const int32_t *out_row;          /* each token's row of logits, or -1: none wanted */
    bool one_per_seq; /* no two tokens share a sequence (a decode step of several sequences):
                         their attentions have no cells in common */
};

/* Run the model on the batch; write the logits (and with params.embeddings the hidden states)
 * of the tokens whose out_row >= 0. */
enum ox_status transformer_forward(struct ox_context *ctx, const struct batch_view *batch);

/* The context of a rank's shard (model_shard, model_layer_shard) joins group g as rank: its
 * batches then meet the other ranks' at every attention and FFN output, or pass the hidden
 * state on, so every rank must decode the same batches. OX_ERR_UNSUPPORTED where a stage's
 * backend cannot take part. */
enum ox_status context_join_group(struct ox_context *ctx, struct backend_group *g, int rank);

#endif
