/* context.h: an inference context: KV cache, activation buffers and the backend it runs on. */
#ifndef OX_MODEL_CONTEXT_H
#define OX_MODEL_CONTEXT_H

#include "backend/backend.h"
#include "model/model.h"

/* The KV cache: n_cells slots, each holding one token's keys and values for every layer. The
 * cell bookkeeping lives on the host; the rows and the b_ copies in the backend's memory. */
struct kv_cache {
    enum ox_dtype type;
    int32_t n_cells;
    int32_t *pos;        /* position of the token in the cell, -1 when free */
    uint64_t *seq;       /* [n_cells][SEQ_WORDS]: the cell's sequences (seq_set_has) */
    size_t k_row, v_row; /* bytes of one cell's keys / values in one layer */
    uint8_t *k, *v;      /* [n_layer][n_cells] rows */
    int32_t used_end;    /* cells at or past this index are all free */
    int32_t n_seen;      /* cells this batch's ops look at: used_end, rounded up for graphs */
    int32_t *b_pos;      /* pos and seq as the backend reads them (uploaded per batch) */
    uint64_t *b_seq;
};

/* Activations for up to n_batch tokens (sized once, at creation), in the backend's memory;
 * pos, seq and cell are the host's, b_ arrays their backend copies (the same arrays on the CPU
 * but for b_tok). */
struct activations {
    float *x, *xn, *qkv, *q, *k, *v, *attn, *proj, *branch, *gate, *up, *hidden;
    float *kf, *vf;     /* the cache of one layer as floats [n_cells][kv dim] */
    float *k_t;         /* room for kf transposed, for the attention of large batches */
    float *router;      /* [n_batch][n_expert] */
    float *router_host; /* the router's probabilities copied back, to pick experts */
    int32_t *pos, *seq, *cell;
    int32_t *b_tok, *b_pos, *b_seq, *b_cell;
};

struct ox_context {
    const struct ox_model *model;
    struct ox_context_params params;
    struct backend be;
    struct kv_cache kv;
    struct activations act;
    float *b_logits;    /* [logit_rows][n_vocab], written by the backend */
    int32_t logit_rows; /* n_batch on the CPU (b_logits is logits); fewer on a GPU */
    uint64_t kv_bytes, buffer_bytes; /* backend memory: the KV cache, and everything else */
    float *logits;      /* [n_batch][n_vocab], copied to the host */
    int32_t *out_row; /* batch index -> row of logits, or -1 */
    int32_t n_batch_last;
};

/* Run the model on the tokens in act (already placed in cells); write logits of the tokens
 * whose out_row >= 0. */
enum ox_status transformer_forward(struct ox_context *ctx, const ox_token *tokens, int n);

#endif
