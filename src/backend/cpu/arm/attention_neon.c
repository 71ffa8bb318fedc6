/* attention_neon.c: attention_avx2.c's two kernels on 4-lane NEON registers (every AArch64 level).
 * Small batches (decode) run the f16-cache attention of attention_ref.c with the same operations
 * in the same order: q rounded to f16, ggml's 4 x 16-lane dot product kept as quarters of 4 lanes
 * lane for lane, the online softmax, the value accumulator rounded to f16 after every step; its
 * results are the reference's bit for bit. Large batches take the tiled f32 kernel (scores of 4
 * cells at a time from a transposed k, an exact softmax with the vector exp, then the weighted
 * values). */
#include <arm_neon.h>
#include <string.h>

#include "backend/cpu/arm/vexp_neon.h"
#include "backend/cpu/attention.h"
#include "core/cpu_features.h"

enum { MAX_VEC = 64 }; /* head sizes up to 256, in vectors of 4 */

static inline float32x4_t round_f16(float32x4_t v) {
    return vcvt_f32_f16(vcvt_f16_f32(v));
}

/* The reduction tree of ggml_numerics.c's reduce_lanes over 16 lanes held as quarters q[0..3]:
 * 16 -> 8 -> 4 lanes, then (0+2) + (1+3). */
static inline float reduce16(const float32x4_t q[4]) {
    float32x4_t r = vaddq_f32(vaddq_f32(q[3], q[1]), vaddq_f32(q[2], q[0]));
    return vaddv_f32(vadd_f32(vget_low_f32(r), vget_high_f32(r)));
}

/* ggml_dot_f16's 64-element steps (np % 64 == 0): four 16-lane accumulators, folded (0+2) +
 * (1+3), reduced; the tail of 16..48 elements, summed in double, is attention_items.h's. */
static inline float dot_f16_steps(const float *x, const float *y, int np) {
    float32x4_t a[4][4]; /* [accumulator][quarter]; unrolled, so they stay in registers */
#pragma GCC unroll 16
    for (int j = 0; j < 4; j++)
#pragma GCC unroll 16
        for (int q = 0; q < 4; q++)
            a[j][q] = vdupq_n_f32(0.0f);
    for (int i = 0; i < np; i += 64)
#pragma GCC unroll 16
        for (int j = 0; j < 4; j++)
#pragma GCC unroll 16
            for (int q = 0; q < 4; q++) {
                int e = i + 16 * j + 4 * q;
                a[j][q] = vfmaq_f32(a[j][q], vld1q_f32(x + e), vld1q_f32(y + e));
            }
    float32x4_t r[4];
#pragma GCC unroll 16
    for (int q = 0; q < 4; q++)
        r[q] = vaddq_f32(vaddq_f32(a[0][q], a[2][q]), vaddq_f32(a[1][q], a[3][q]));
    return reduce16(r);
}

#define ATT_V            float32x4_t
#define ATT_LANES        4
#define att_zero()       vdupq_n_f32(0.0f)
#define att_load(p)      vld1q_f32(p)
#define att_store(p, v)  vst1q_f32(p, v)
#define att_set1(x)      vdupq_n_f32(x)
#define att_mul(a, b)    vmulq_f32(a, b)
#define att_fma(a, b, c) vfmaq_f32(c, a, b)
#include "backend/cpu/attention_items.h"

/* ---- large batches ------------------------------------------------------------------------ */

/* -inf where cells c0 .. c0 + 3 are hidden (all four below hi). */
static inline float32x4_t scaled_or_hidden(float32x4_t acc, float scale, const uint8_t *vis,
                                           int c0) {
    uint32_t v4;
    memcpy(&v4, vis + c0, 4);
    uint32x4_t shown =
        vtstq_u32(vmovl_u16(vget_low_u16(vmovl_u8(vcreate_u8(v4)))), vdupq_n_u32(0xFF));
    return vbslq_f32(shown, vmulq_n_f32(acc, scale), vdupq_n_f32(-INFINITY));
}

/* The scores of NH heads of one kv head, from head h0 of token t, against cells [lo, hi), 8
 * cells at a time (then 4, then the last few one by one); invisible cells get -inf. NH is a
 * constant at every call, so the accumulators stay in registers (8 chains of FMAs for 4
 * heads: enough to hide the FMA latency). */
static inline __attribute__((always_inline)) void scores_heads(const struct attn_args *a, int t,
                                                               int h0, int NH, const uint8_t *vis,
                                                               int lo, int hi, float *sc) {
    int kvh = h0 / (a->n_head / a->n_head_kv), hd = a->hd_k, n = a->n_cells;
    const float *q = a->q + ((size_t)t * a->n_head + h0) * hd;
    const float *kt = a->k_t + (size_t)kvh * hd * n;
    int c0 = lo;
    for (; c0 + 8 <= hi; c0 += 8) {
        float32x4_t acc0[ATTN_HEADS_AT_ONCE], acc1[ATTN_HEADS_AT_ONCE];
        for (int j = 0; j < NH; j++)
            acc0[j] = vdupq_n_f32(0.0f), acc1[j] = vdupq_n_f32(0.0f);
        for (int d = 0; d < hd; d++) {
            const float *k = kt + (size_t)d * n + c0;
            float32x4_t k0 = vld1q_f32(k), k1 = vld1q_f32(k + 4);
            for (int j = 0; j < NH; j++) {
                acc0[j] = vfmaq_n_f32(acc0[j], k0, q[j * hd + d]);
                acc1[j] = vfmaq_n_f32(acc1[j], k1, q[j * hd + d]);
            }
        }
        for (int j = 0; j < NH; j++) {
            vst1q_f32(sc + (size_t)j * n + c0, scaled_or_hidden(acc0[j], a->scale, vis, c0));
            vst1q_f32(sc + (size_t)j * n + c0 + 4,
                      scaled_or_hidden(acc1[j], a->scale, vis, c0 + 4));
        }
    }
    for (; c0 + 4 <= hi; c0 += 4) {
        float32x4_t acc[ATTN_HEADS_AT_ONCE];
        for (int j = 0; j < NH; j++)
            acc[j] = vdupq_n_f32(0.0f);
        for (int d = 0; d < hd; d++) {
            float32x4_t kv = vld1q_f32(kt + (size_t)d * n + c0);
            for (int j = 0; j < NH; j++)
                acc[j] = vfmaq_n_f32(acc[j], kv, q[j * hd + d]);
        }
        for (int j = 0; j < NH; j++)
            vst1q_f32(sc + (size_t)j * n + c0, scaled_or_hidden(acc[j], a->scale, vis, c0));
    }
    for (; c0 < hi; c0++)
        for (int j = 0; j < NH; j++) {
            float s = 0.0f;
            for (int d = 0; d < hd; d++)
                s = fmaf(q[j * hd + d], kt[(size_t)d * n + c0], s);
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
    float32x4_t vsum = vdupq_n_f32(0.0f);
    float tail = 0.0f;
    int c0 = lo;
    for (; c0 + 4 <= hi; c0 += 4) { /* invisible cells: exp(-inf) = 0 */
        float32x4_t e = expf4(vsubq_f32(vld1q_f32(s + c0), vdupq_n_f32(max)));
        vst1q_f32(s + c0, e);
        vsum = vaddq_f32(vsum, e);
    }
    for (; c0 < hi; c0++)
        tail += s[c0] = ggml_expf(s[c0] - max);
    return vaddvq_f32(vsum) + tail;
}

/* out[0 .. NV) (NV vectors of 4 value dims, from dims i0 of the kv head's rows) = the sum over
 * cells [lo, hi) of s[c] v[c]; cells whose weight is 0 (hidden) are skipped. NV is a constant,
 * so the accumulators stay in registers. */
static inline __attribute__((always_inline)) void weighted_values(const struct attn_args *a,
                                                                  int kvh, int i0, int NV,
                                                                  const float *s, int lo, int hi,
                                                                  float32x4_t *out) {
    size_t stride = (size_t)a->n_head_kv * a->hd_v;
    const float *v = a->v + (size_t)kvh * a->hd_v + i0;
    for (int i = 0; i < NV; i++)
        out[i] = vdupq_n_f32(0.0f);
    for (int c = lo; c < hi; c++) {
        if (s[c] == 0.0f)
            continue;
        const float *vc = v + (size_t)c * stride;
        for (int i = 0; i < NV; i++)
            out[i] = vfmaq_n_f32(out[i], vld1q_f32(vc + 4 * i), s[c]);
    }
}

static void attend_tiled(const struct attn_args *a, int t, int h0, int nh, const uint8_t *vis,
                         int lo, int hi, float *sc) {
    int kvh = h0 / (a->n_head / a->n_head_kv), n = a->n_cells;
    scores(a, t, h0, nh, vis, lo, hi, sc);
    for (int j = 0; j < nh; j++) {
        float *s = sc + (size_t)j * n, sum = softmax_row(s, lo, hi);
        float *y = a->y + ((size_t)t * a->n_head + h0 + j) * a->hd_v;
        float inv = sum == 0.0f ? 0.0f : 1.0f / sum;
        /* 16 vectors (64 dims) at a time where they fit, else 4 (hd_v % 16 == 0) */
        int i0 = 0;
        for (; i0 + 64 <= a->hd_v; i0 += 64) {
            float32x4_t out[16];
            weighted_values(a, kvh, i0, 16, s, lo, hi, out);
            for (int i = 0; i < 16; i++)
                vst1q_f32(y + i0 + 4 * i, vmulq_n_f32(out[i], inv));
        }
        for (; i0 < a->hd_v; i0 += 16) {
            float32x4_t out[4];
            weighted_values(a, kvh, i0, 4, s, lo, hi, out);
            for (int i = 0; i < 4; i++)
                vst1q_f32(y + i0 + 4 * i, vmulq_n_f32(out[i], inv));
        }
    }
}

bool attention_neon(struct backend *b, const struct attn_args *a) {
    if (!cpu_features_get()->neon || !a->f16_cache || a->hd_k % 16 || a->hd_v % 16 ||
        a->hd_v > 4 * MAX_VEC)
        return false;
    static const struct attention_kernels kernels = {attend_items, attend_tiled};
    attention_run(b, a, &kernels);
    return true;
}
