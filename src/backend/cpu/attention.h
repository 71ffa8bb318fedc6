/* attention.h: what every CPU attention kernel shares: which cells a query sees and how a
 * score is scaled and capped. */
#ifndef OX_BACKEND_CPU_ATTENTION_H
#define OX_BACKEND_CPU_ATTENTION_H

#include <math.h>

#include "backend/backend.h"

/* Whether query t may attend to cache cell c: same sequence, not further ahead than the query
 * sees (causal: not in the future), and inside the sliding window when there is one. */
static inline bool visible(const struct attn_args *a, int t, int c) {
    int32_t qp = a->q_pos[t], kp = a->cell_pos[c];
    return seq_set_has(a->cell_seq + (size_t)c * SEQ_WORDS, a->q_seq[t]) && kp - qp <= a->ahead &&
           (a->window <= 0 || qp - kp < a->window);
}

/* The score of q.k: scaled, then soft-capped as ggml does (the scale divided by the cap
 * first, then cap * tanh). */
static inline float score(const struct attn_args *a, float dot) {
    if (a->softcap == 0.0f)
        return dot * a->scale;
    return a->softcap * tanhf(dot * (a->scale / a->softcap));
}

/* The tiled kernels' helpers (attention_ref.c): k transposed into a->k_t ([n_head_kv * hd_k]
 * rows of n_cells), and which cells token t sees: vis[c] for c in [*lo, *hi), the range outside
 * which none are. */
void attention_transpose_k(const struct attn_args *a);
void attention_visibility(const struct attn_args *a, int t, uint8_t *vis, int *lo, int *hi);

/* What a SIMD attention gives the shared driver: its decode kernel (n <= ATTN_ITEMS_AT_ONCE
 * work items from w0, item w being head w % n_head of token w / n_head, each with the f16-cache
 * reference's operations in order: attention_items.h; scratch holds n rows of hd_k floats) and
 * its tiled kernel for prompts (heads h0 .. h0 + nh - 1 of token t, nh <= ATTN_HEADS_AT_ONCE,
 * sharing one kv head, over the visible cells [lo, hi); scratch holds nh rows of n_cells
 * scores). */
struct attention_kernels {
    void (*attend)(const struct attn_args *a, int w0, int n, float *scratch);
    void (*attend_tiled)(const struct attn_args *a, int t, int h0, int nh, const uint8_t *vis,
                         int lo, int hi, float *scratch);
};
enum { ATTN_HEADS_AT_ONCE = 4, ATTN_TILED_FROM = 64, ATTN_ITEMS_AT_ONCE = 4 };

/* Runs a SIMD attention over every token and head: batches of ATTN_TILED_FROM tokens or more
 * (no soft-cap, room for the scores) take the tiled kernel over a transposed k, the rest the
 * decode kernel; threads split the work (attention_parts). */
void attention_run(struct backend *b, const struct attn_args *a, const struct attention_kernels *k);

/* How many threads a call should split into: one unless each gets enough multiply-adds (n
 * queries x heads x cells x (hd_k + hd_v)) to pay for handing work to another thread. */
int attention_parts(const struct backend *b, const struct attn_args *a);

/* The same with AVX2 + FMA + F16C (x86/attention_avx2.c). */
bool attention_avx2(struct backend *b, const struct attn_args *a);

/* attention_avx2's two kernels on NEON (arm/attention_neon.c; every AArch64 level). */
bool attention_neon(struct backend *b, const struct attn_args *a);
/* The same in WebAssembly SIMD128 (wasm/attention_wasm.c). */
bool attention_wasm(struct backend *b, const struct attn_args *a);

/* The AVX-512 attention (x86/attention_avx512.c); false when it cannot take these args. */
bool attention_avx512(struct backend *b, const struct attn_args *a);

#endif
