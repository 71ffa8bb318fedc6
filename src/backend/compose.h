/* compose.h: backend.h's optional ops as plain calls, each the backend's fusion where it has one
 * (and it takes these shapes), else the primitives it stands for. The forward pass calls these
 * and never asks what a backend has. The caller gives the room a composition needs. */
#ifndef OX_BACKEND_COMPOSE_H
#define OX_BACKEND_COMPOSE_H

#include "backend/backend.h"

/* y = W x for n tokens, and W's LoRA deltas (struct mat_lora) added. */
void compose_matmul(struct backend *b, const struct mat *w, const float *x, float *y, int n);
/* Rows ids[0..n) of W (an embedding), and its LoRA deltas' rows (struct mat_lora's rows). */
void compose_get_rows(struct backend *b, const struct mat *w, const int32_t *ids, float *y, int n);
/* y += scale * B (A x) for each LoRA delta W carries (none: nothing). */
void compose_lora_add(struct backend *b, const struct mat *w, const float *x, float *y, int n);

/* The deltas l (a chain of at most MAT_LORA_MAX) as rows [off, off + len) of their matrix take
 * them (rows: B's rows), or as its columns [off, off + len) do (A's columns: the products over
 * the column slices add up to the whole), copied into out; the chain, NULL for none. */
const struct mat_lora *compose_lora_slice(const struct mat_lora *l, bool rows, int64_t off,
                                          int64_t len, struct mat_lora *out);

/* y += W x for n tokens; tmp [n][w->n_rows] holds W x when the backend does not fuse the add. */
void compose_matmul_add(struct backend *b, const struct mat *w, const float *x, float *y, int n,
                        float *tmp);

/* y[m] = w[m] x for count (<= 3) matrices of one width, x taken through the RMSNorm norm first
 * unless that is NULL (the normed rows then land in normed, [n][w->n_cols], unless the backend
 * fuses the norm in: nobody may read normed after). */
void compose_matmul_multi(struct backend *b, int count, const struct mat *w, const float *x,
                          const struct norm_in *norm, float *const *y, int n, float *normed);

/* y = act(gate x) * (up x), x through norm first as for compose_matmul_multi; gate_out and
 * up_out [n][gate->n_rows] hold the two products when the backend does not fuse them. */
void compose_matmul_glu(struct backend *b, enum glu_kind kind, const struct mat *gate,
                        const struct mat *up, const float *x, const struct norm_in *norm, float *y,
                        int n, float *normed, float *gate_out, float *up_out);

/* q and k rotated, then k and v stored into their cache rows. */
void compose_rope_store(struct backend *b, const struct rope_store_args *a);

/* One layer's cache as attention reads it: rows of type, k_row / v_row bytes apart, dk / dv
 * floats each; kf and vf [n_cells][dk or dv] take them as floats where the backend's attention
 * does not read the rows itself; cell_pos skips the free cells when loading. */
struct cache_layer {
    enum ox_dtype type;
    const uint8_t *k, *v;
    size_t k_row, v_row;
    int dk, dv;
    float *kf, *vf;
    const int32_t *cell_pos;
};

/* a->q's attention over the layer's cache: a's k and v (or k_cache and v_cache) are set here. */
void compose_attention(struct backend *b, struct attn_args *a, const struct cache_layer *c);

/* A MoE FFN run where the router's probabilities are: false when the backend has no such op or
 * declines these shapes (the caller chooses the experts on the host). */
bool compose_moe_ffn(struct backend *b, struct moe_args *a);

/* A recording of the ops up to compose_graph_end (backend.h's graph_begin): true when a
 * recording for key was replayed instead (skip the ops then); false with no recording on a
 * backend without graphs (b->ops->graph_max_tokens 0), which then runs the ops as they come. */
bool compose_graph_begin(struct backend *b, uint64_t key);
void compose_graph_end(struct backend *b);

#endif
