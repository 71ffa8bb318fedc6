/* attention_wasm.c: attention_neon.c's two kernels in WebAssembly SIMD128. Small batches (decode)
 * run the f16-cache attention of attention_ref.c with its operations in its order (q rounded to
 * f16, ggml's 4 x 16-lane dot product as quarters of 4 lanes, the online softmax, the value
 * accumulator rounded to f16 after every step), except that SIMD128 has no fused multiply-add:
 * products are rounded before they are added, so results are within float rounding of the
 * reference's, not bit for bit. Large batches take the tiled f32 kernel (scores of 4 cells at a
 * time from a transposed k, an exact softmax with the vector exp, then the weighted values). */
#include <math.h>
#include <string.h>

#include "backend/cpu/attention.h"
#include "backend/cpu/wasm/level_wasm.h"
#include "backend/cpu/wasm/vexp_wasm.h"
#include "core/cpu_features.h"

enum { MAX_VEC = 64 }; /* head sizes up to 256, in vectors of 4 */

/* Each lane rounded to the nearest f16 (ties to even) and back, as a hardware conversion does:
 * normal halves by rounding the float's bits to 10 mantissa bits, subnormal ones (below 2^-14)
 * to multiples of 2^-24 by adding and taking away 0.75 (whose ulp is 2^-24), past 65504
 * (rounding to 65536 or more) infinity, NaN as it came; the sign is put back last. (Checked
 * against the conversion for all 2^32 floats.) */
static inline v128_t round_f16(v128_t x) {
    v128_t ax = wasm_f32x4_abs(x);
    v128_t lsb = wasm_v128_and(wasm_u32x4_shr(ax, 13), wasm_i32x4_splat(1));
    v128_t normal = wasm_v128_and(wasm_i32x4_add(ax, wasm_i32x4_add(wasm_i32x4_splat(0xFFF), lsb)),
                                  wasm_i32x4_splat(~0x1FFF));
    v128_t sub =
        wasm_f32x4_sub(wasm_f32x4_add(ax, wasm_f32x4_splat(0.75f)), wasm_f32x4_splat(0.75f));
    v128_t r = wasm_v128_bitselect(sub, normal, wasm_f32x4_lt(ax, wasm_f32x4_splat(0x1p-14f)));
    r = wasm_v128_bitselect(wasm_f32x4_splat(INFINITY), r,
                            wasm_f32x4_ge(r, wasm_f32x4_splat(65536.0f)));
    r = wasm_v128_or(r, wasm_v128_and(x, wasm_i32x4_splat((int32_t)0x80000000u)));
    return wasm_v128_bitselect(x, r, wasm_i32x4_gt(ax, wasm_i32x4_splat(0x7F800000)));
}

/* The reduction tree of ggml_numerics.c's reduce_lanes over 16 lanes held as quarters q[0..3]:
 * 16 -> 8 -> 4 lanes, then (0+2) + (1+3). */
static inline float reduce16(const v128_t q[4]) {
    v128_t r = wasm_f32x4_add(wasm_f32x4_add(q[3], q[1]), wasm_f32x4_add(q[2], q[0]));
    v128_t h = wasm_f32x4_add(r, wasm_i32x4_shuffle(r, r, 2, 3, 0, 1));
    return wasm_f32x4_extract_lane(h, 0) + wasm_f32x4_extract_lane(h, 1);
}

/* ggml_dot_f16's 64-element steps (np % 64 == 0): four 16-lane accumulators, folded (0+2) +
 * (1+3), reduced; the tail is attention_items.h's. */
static inline float dot_f16_steps(const float *x, const float *y, int np) {
    v128_t a[4][4]; /* [accumulator][quarter] */
    for (int j = 0; j < 4; j++)
        for (int q = 0; q < 4; q++)
            a[j][q] = wasm_f32x4_splat(0.0f);
    for (int i = 0; i < np; i += 64)
        for (int j = 0; j < 4; j++)
            for (int q = 0; q < 4; q++) {
                int e = i + 16 * j + 4 * q;
                a[j][q] = fmadd(a[j][q], wasm_v128_load(x + e), wasm_v128_load(y + e));
            }
    v128_t r[4];
    for (int q = 0; q < 4; q++)
        r[q] = wasm_f32x4_add(wasm_f32x4_add(a[0][q], a[2][q]), wasm_f32x4_add(a[1][q], a[3][q]));
    return reduce16(r);
}

#define ATT_V            v128_t
#define ATT_LANES        4
#define att_zero()       wasm_f32x4_splat(0.0f)
#define att_load(p)      wasm_v128_load(p)
#define att_store(p, v)  wasm_v128_store(p, v)
#define att_set1(x)      wasm_f32x4_splat(x)
#define att_mul(a, b)    wasm_f32x4_mul(a, b)
#define att_fma(a, b, c) fmadd(c, a, b)
#include "backend/cpu/attention_items.h"

/* ---- large batches ------------------------------------------------------------------------ */

/* -inf where cells c0 .. c0 + 3 are hidden. */
static inline v128_t scaled_or_hidden(v128_t acc, float scale, const uint8_t *vis, int c0) {
    v128_t shown = wasm_i32x4_ne(wasm_u32x4_make(vis[c0], vis[c0 + 1], vis[c0 + 2], vis[c0 + 3]),
                                 wasm_i32x4_splat(0));
    return wasm_v128_bitselect(wasm_f32x4_mul(acc, wasm_f32x4_splat(scale)),
                               wasm_f32x4_splat(-INFINITY), shown);
}

/* The scores of NH heads of one kv head, from head h0 of token t, against cells [lo, hi), 8
 * cells at a time (then 4, then the last few one by one); invisible cells get -inf. NH is a
 * constant at every call, so the accumulators stay in registers. */
static inline ALWAYS_INLINE void scores_heads(const struct attn_args *a, int t, int h0, int NH,
                                              const uint8_t *vis, int lo, int hi, float *sc) {
    int kvh = h0 / (a->n_head / a->n_head_kv), hd = a->hd_k, n = a->n_cells;
    const float *q = a->q + ((size_t)t * a->n_head + h0) * hd;
    const float *kt = a->k_t + (size_t)kvh * hd * n;
    int c0 = lo;
    for (; c0 + 8 <= hi; c0 += 8) {
        v128_t acc0[ATTN_HEADS_AT_ONCE], acc1[ATTN_HEADS_AT_ONCE];
        for (int j = 0; j < NH; j++)
            acc0[j] = acc1[j] = wasm_f32x4_splat(0.0f);
        for (int d = 0; d < hd; d++) {
            const float *k = kt + (size_t)d * n + c0;
            v128_t k0 = wasm_v128_load(k), k1 = wasm_v128_load(k + 4);
            for (int j = 0; j < NH; j++) {
                v128_t qv = wasm_f32x4_splat(q[j * hd + d]);
                acc0[j] = fmadd(acc0[j], k0, qv);
                acc1[j] = fmadd(acc1[j], k1, qv);
            }
        }
        for (int j = 0; j < NH; j++) {
            wasm_v128_store(sc + (size_t)j * n + c0, scaled_or_hidden(acc0[j], a->scale, vis, c0));
            wasm_v128_store(sc + (size_t)j * n + c0 + 4,
                            scaled_or_hidden(acc1[j], a->scale, vis, c0 + 4));
        }
    }
    for (; c0 + 4 <= hi; c0 += 4) {
        v128_t acc[ATTN_HEADS_AT_ONCE];
        for (int j = 0; j < NH; j++)
            acc[j] = wasm_f32x4_splat(0.0f);
        for (int d = 0; d < hd; d++) {
            v128_t kv = wasm_v128_load(kt + (size_t)d * n + c0);
            for (int j = 0; j < NH; j++)
                acc[j] = fmadd(acc[j], kv, wasm_f32x4_splat(q[j * hd + d]));
        }
        for (int j = 0; j < NH; j++)
            wasm_v128_store(sc + (size_t)j * n + c0, scaled_or_hidden(acc[j], a->scale, vis, c0));
    }
    for (; c0 < hi; c0++)
        for (int j = 0; j < NH; j++) {
            float s = 0.0f;
            for (int d = 0; d < hd; d++)
                s += q[j * hd + d] * kt[(size_t)d * n + c0];
            sc[(size_t)j * n + c0] = vis[c0] ? s * a->scale : -INFINITY;
        }
}

/* Heads h0 .. h0+nh-1: all ATTN_HEADS_AT_ONCE in one pass, or one at a time. */
static void scores(const struct attn_args *a, int t, int h0, int nh, const uint8_t *vis, int lo,
                   int hi, float *sc) {
    if (nh == ATTN_HEADS_AT_ONCE) {
        scores_heads(a, t, h0, ATTN_HEADS_AT_ONCE, vis, lo, hi, sc);
        return;
    }
    for (int j = 0; j < nh; j++)
        scores_heads(a, t, h0 + j, 1, vis, lo, hi, sc + (size_t)j * a->n_cells);
}

/* One row of scores over [lo, hi) to exp(s - max) in place; returns their sum. */
static float softmax_row(float *s, int lo, int hi) {
    float max = -INFINITY;
    for (int c = lo; c < hi; c++)
        max = s[c] > max ? s[c] : max;
    v128_t vsum = wasm_f32x4_splat(0.0f);
    float tail = 0.0f;
    int c0 = lo;
    for (; c0 + 4 <= hi; c0 += 4) { /* invisible cells: exp(-inf) = 0 */
        v128_t e = expf4(wasm_f32x4_sub(wasm_v128_load(s + c0), wasm_f32x4_splat(max)));
        wasm_v128_store(s + c0, e);
        vsum = wasm_f32x4_add(vsum, e);
    }
    for (; c0 < hi; c0++)
        tail += s[c0] = ggml_expf(s[c0] - max);
    return hsum_f32(vsum) + tail;
}

/* out[0 .. NV) (NV vectors of 4 value dims, from dims i0 of the kv head's rows) = the sum over
 * cells [lo, hi) of s[c] v[c]; cells whose weight is 0 (hidden) are skipped. */
static inline ALWAYS_INLINE void weighted_values(const struct attn_args *a, int kvh, int i0, int NV,
                                                 const float *s, int lo, int hi, v128_t *out) {
    size_t stride = (size_t)a->n_head_kv * a->hd_v;
    const float *v = a->v + (size_t)kvh * a->hd_v + i0;
    for (int i = 0; i < NV; i++)
        out[i] = wasm_f32x4_splat(0.0f);
    for (int c = lo; c < hi; c++) {
        if (s[c] == 0.0f)
            continue;
        const float *vc = v + (size_t)c * stride;
        v128_t w = wasm_f32x4_splat(s[c]);
        for (int i = 0; i < NV; i++)
            out[i] = fmadd(out[i], wasm_v128_load(vc + 4 * i), w);
    }
}

static void attend_tiled(const struct attn_args *a, int t, int h0, int nh, const uint8_t *vis,
                         int lo, int hi, float *sc) {
    int kvh = h0 / (a->n_head / a->n_head_kv), n = a->n_cells;
    scores(a, t, h0, nh, vis, lo, hi, sc);
    for (int j = 0; j < nh; j++) {
        float *s = sc + (size_t)j * n, sum = softmax_row(s, lo, hi);
        float *y = a->y + ((size_t)t * a->n_head + h0 + j) * a->hd_v;
        v128_t inv = wasm_f32x4_splat(sum == 0.0f ? 0.0f : 1.0f / sum);
        int i0 = 0; /* 16 vectors (64 dims) at a time where they fit, else 4 (hd_v % 16 == 0) */
        for (; i0 + 64 <= a->hd_v; i0 += 64) {
            v128_t out[16];
            weighted_values(a, kvh, i0, 16, s, lo, hi, out);
            for (int i = 0; i < 16; i++)
                wasm_v128_store(y + i0 + 4 * i, wasm_f32x4_mul(out[i], inv));
        }
        for (; i0 < a->hd_v; i0 += 16) {
            v128_t out[4];
            weighted_values(a, kvh, i0, 4, s, lo, hi, out);
            for (int i = 0; i < 4; i++)
                wasm_v128_store(y + i0 + 4 * i, wasm_f32x4_mul(out[i], inv));
        }
    }
}

bool attention_wasm(struct backend *b, const struct attn_args *a) {
    if (!cpu_features_get()->wasm_simd || !a->f16_cache || a->hd_k % 16 || a->hd_v % 16 ||
        a->hd_v > 4 * MAX_VEC)
        return false;
    static const struct attention_kernels kernels = {attend_items, attend_tiled};
    attention_run(b, a, &kernels);
    return true;
}
