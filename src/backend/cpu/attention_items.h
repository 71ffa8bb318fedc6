/* attention_items.h: the f16-cache decode attention's loop, written once for every SIMD level
 * (attention_avx512.c, attention_avx2.c, attention_neon.c include it after their intrinsics):
 * the reference's operations (attention_ref.c's attend_f16) in its order for each work item,
 * with up to ATTN_ITEMS_AT_ONCE items side by side. One item's steps are a chain (its dot
 * product, the exp, the accumulator's rounded update) that leaves the core mostly waiting;
 * independent items fill those waits, and no item's arithmetic changes.
 *
 * The ISA file defines before including:
 *   ATT_V, ATT_LANES, MAX_VEC   the vector type, its floats, the most vectors of a value row
 *   att_zero(), att_load(p), att_store(p, v), att_set1(x), att_mul(a, b)
 *   att_fma(a, b, c)            a * b + c, fused
 *   round_f16(v)                each lane rounded through f16
 *   dot_f16_steps(x, y, np)     ggml's f16 dot product over its 64-element steps (np floats,
 *                               np % 64 == 0), reduced in its order (0 when np is 0) */
#ifndef OX_BACKEND_CPU_ATTENTION_ITEMS_H
#define OX_BACKEND_CPU_ATTENTION_ITEMS_H

#include "backend/cpu/attention.h"

/* Items w0 .. w0 + N - 1 (item w: head w % n_head of token w / n_head); N is a constant at
 * every call, so the items' loop unrolls. scratch holds N rows of hd_k floats (the rounded q). */
static inline __attribute__((always_inline)) void attend_items_n(const struct attn_args *a, int w0,
                                                                 int N, float *scratch) {
    int nv = a->hd_v / ATT_LANES, group = a->n_head / a->n_head_kv;
    size_t k_row = (size_t)a->n_head_kv * a->hd_k, v_row = (size_t)a->n_head_kv * a->hd_v;
    int t[ATTN_ITEMS_AT_ONCE];
    const float *kb[ATTN_ITEMS_AT_ONCE], *vb[ATTN_ITEMS_AT_ONCE], *qh[ATTN_ITEMS_AT_ONCE];
    ATT_V acc[ATTN_ITEMS_AT_ONCE][MAX_VEC];
    float m[ATTN_ITEMS_AT_ONCE], sum[ATTN_ITEMS_AT_ONCE];
    for (int j = 0; j < N; j++) {
        int w = w0 + j, kvh = w % a->n_head / group;
        const float *q = a->q + (size_t)w * a->hd_k;
        float *r = scratch + (size_t)j * a->hd_k;
        for (int i = 0; i < a->hd_k; i += ATT_LANES)
            att_store(r + i, round_f16(att_load(q + i)));
        t[j] = w / a->n_head, qh[j] = r;
        kb[j] = a->k + (size_t)kvh * a->hd_k, vb[j] = a->v + (size_t)kvh * a->hd_v;
        for (int i = 0; i < nv; i++)
            acc[j][i] = att_zero();
        m[j] = -INFINITY, sum[j] = 0.0f;
    }
    int np = a->hd_k - a->hd_k % 64;
    for (int c = 0; c < a->n_cells; c++) {
        /* ggml_dot_f16 for every item, hidden cells too (their rows exist; the scores go
         * unused): the 64-element steps, then the tail in double, one element of every item's
         * at a time so that the items' chains of additions interleave */
        double dot[ATTN_ITEMS_AT_ONCE];
        for (int j = 0; j < N; j++)
            dot[j] = (double)dot_f16_steps(qh[j], kb[j] + (size_t)c * k_row, np);
        for (int i = np; i < a->hd_k; i++)
            for (int j = 0; j < N; j++)
                dot[j] += (double)(qh[j][i] * kb[j][(size_t)c * k_row + (size_t)i]);
        for (int j = 0; j < N; j++) {
            if (!visible(a, t[j], c))
                continue;
            const float *v = vb[j] + (size_t)c * v_row;
            float ms = 1.0f, vs = 1.0f, s = score(a, (float)dot[j]);
            if (s > m[j]) {
                ms = expf(m[j] - s);
                m[j] = s;
                for (int i = 0; i < nv; i++)
                    acc[j][i] = round_f16(att_mul(acc[j][i], att_set1(ms)));
            } else {
                vs = expf(s - m[j]);
            }
            ATT_V wv = att_set1(vs);
            for (int i = 0; i < nv; i++)
                acc[j][i] = round_f16(att_fma(att_load(v + ATT_LANES * i), wv, acc[j][i]));
            sum[j] = fmaf(sum[j], ms, vs);
        }
    }
    for (int j = 0; j < N; j++) {
        float *y = a->y + (size_t)(w0 + j) * a->hd_v;
        ATT_V inv = att_set1(sum[j] == 0.0f ? 0.0f : 1.0f / sum[j]);
        for (int i = 0; i < nv; i++)
            att_store(y + ATT_LANES * i, att_mul(acc[j][i], inv));
    }
}

/* The decode kernel of struct attention_kernels: n (1 .. ATTN_ITEMS_AT_ONCE) items from w0. */
static void attend_items(const struct attn_args *a, int w0, int n, float *scratch) {
    _Static_assert(ATTN_ITEMS_AT_ONCE == 4, "attend_items instantiates 1 .. 4 items");
    switch (n) {
    case 1: attend_items_n(a, w0, 1, scratch); break;
    case 2: attend_items_n(a, w0, 2, scratch); break;
    case 3: attend_items_n(a, w0, 3, scratch); break;
    default: attend_items_n(a, w0, ATTN_ITEMS_AT_ONCE, scratch); break;
    }
}

#endif
