/* attention_avx512.c: the f16-cache attention of attention_ref.c with AVX-512 vectors: the same
 * operations in the same order (q rounded to f16, ggml's 4x16-lane dot product and reduction
 * tree, the online softmax, the value accumulator rounded to f16 after every step), so its
 * results are bit-identical to the reference while it runs an order of magnitude faster. */
#include <immintrin.h>
#include <string.h>

#include "backend/cpu/attention.h"
#include "backend/cpu/x86/vexp_avx512.h"
#include "core/cpu_features.h"

enum { MAX_VEC = 16 }; /* head sizes up to 256 */

static inline __m512 round_f16(__m512 v) {
    return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

/* The reduction tree of ggml_numerics.c's reduce_lanes (512 -> 256 -> 128 bits, then pairs),
 * written out so every compiler adds in that order. */
static inline float reduce(__m512 v) {
    __m256 h = _mm256_add_ps(_mm512_extractf32x8_ps(v, 1), _mm512_castps512_ps256(v));
    __m128 q = _mm_add_ps(_mm256_extractf128_ps(h, 1), _mm256_castps256_ps128(h));
    float r[4];
    _mm_storeu_ps(r, q);
    return (r[0] + r[2]) + (r[1] + r[3]);
}

/* ggml_dot_f16's 64-element steps (np % 64 == 0): four 16-lane accumulators, folded (0+2) +
 * (1+3), reduced; the tail of 16..48 elements, summed in double, is attention_items.h's. */
static inline float dot_f16_steps(const float *x, const float *y, int np) {
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
    for (int i = 0; i < np; i += 64)
        for (int j = 0; j < 4; j++)
            a[j] = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16 * j), _mm512_loadu_ps(y + i + 16 * j),
                                   a[j]);
    __m512 r = _mm512_add_ps(_mm512_add_ps(a[0], a[2]), _mm512_add_ps(a[1], a[3]));
    return reduce(r);
}

#define ATT_V            __m512
#define ATT_LANES        16
#define att_zero()       _mm512_setzero_ps()
#define att_load(p)      _mm512_loadu_ps(p)
#define att_store(p, v)  _mm512_storeu_ps(p, v)
#define att_set1(x)      _mm512_set1_ps(x)
#define att_mul(a, b)    _mm512_mul_ps(a, b)
#define att_fma(a, b, c) _mm512_fmadd_ps(a, b, c)
#include "backend/cpu/attention_items.h"

/* ---- large batches: llama.cpp switches to a tiled kernel there too, so this one is free to
 * reorder. Scores of 32 cells at a time from a transposed copy of k (no horizontal sums), an
 * exact softmax over the visible range, then the values weighted. All f32. ---- */

/* Lanes c0 .. c0 + 15 that lie below hi. */
static inline __mmask16 lanes_below(int c0, int hi) {
    return (__mmask16)(hi - c0 >= 16 ? 0xFFFF : hi <= c0 ? 0 : (1u << (hi - c0)) - 1);
}

/* The scores of NH heads of one kv head, from head h0 of token t, against cells [lo, hi), 32
 * cells (two vectors) at a time; invisible cells get -inf. NH is a constant at every call, so
 * the 2 NH accumulators stay in registers (8 chains of FMAs for 4 heads: enough to hide the
 * FMA latency). */
static inline __attribute__((always_inline)) void scores_heads(const struct attn_args *a, int t,
                                                               int h0, int NH, const uint8_t *vis,
                                                               int lo, int hi, float *sc) {
    int kvh = h0 / (a->n_head / a->n_head_kv), hd = a->hd_k, n = a->n_cells;
    const float *q = a->q + ((size_t)t * a->n_head + h0) * hd;
    const float *kt = a->k_t + (size_t)kvh * hd * n;
    __m512 scale = _mm512_set1_ps(a->scale), ninf = _mm512_set1_ps(-INFINITY);
    for (int c0 = lo; c0 < hi; c0 += 32) {
        __mmask16 in0 = lanes_below(c0, hi), in1 = lanes_below(c0 + 16, hi);
        __m512 acc0[ATTN_HEADS_AT_ONCE], acc1[ATTN_HEADS_AT_ONCE];
        for (int j = 0; j < NH; j++)
            acc0[j] = _mm512_setzero_ps(), acc1[j] = _mm512_setzero_ps();
        for (int d = 0; d < hd; d++) {
            const float *k = kt + (size_t)d * n + c0;
            __m512 k0 = _mm512_maskz_loadu_ps(in0, k), k1 = _mm512_maskz_loadu_ps(in1, k + 16);
            for (int j = 0; j < NH; j++) {
                __m512 qd = _mm512_set1_ps(q[(size_t)j * hd + d]);
                acc0[j] = _mm512_fmadd_ps(qd, k0, acc0[j]);
                acc1[j] = _mm512_fmadd_ps(qd, k1, acc1[j]);
            }
        }
        __mmask16 seen0 = _mm_mask_cmpneq_epi8_mask(in0, _mm_maskz_loadu_epi8(in0, vis + c0),
                                                    _mm_setzero_si128());
        __mmask16 seen1 = _mm_mask_cmpneq_epi8_mask(in1, _mm_maskz_loadu_epi8(in1, vis + c0 + 16),
                                                    _mm_setzero_si128());
        for (int j = 0; j < NH; j++) {
            float *row = sc + (size_t)j * n + c0;
            _mm512_mask_storeu_ps(row, in0,
                                  _mm512_mask_blend_ps(seen0, ninf, _mm512_mul_ps(acc0[j], scale)));
            _mm512_mask_storeu_ps(row + 16, in1,
                                  _mm512_mask_blend_ps(seen1, ninf, _mm512_mul_ps(acc1[j], scale)));
        }
    }
}

/* One row of scores over [lo, hi) to exp(s - max) in place; returns their sum. */
static float softmax_row(float *s, int lo, int hi) {
    __m512 vmax = _mm512_set1_ps(-INFINITY), vsum = _mm512_setzero_ps();
    for (int c0 = lo; c0 < hi; c0 += 16) {
        __mmask16 in = lanes_below(c0, hi);
        vmax = _mm512_mask_max_ps(vmax, in, vmax, _mm512_maskz_loadu_ps(in, s + c0));
    }
    __m512 max = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
    for (int c0 = lo; c0 < hi; c0 += 16) { /* masked cells: exp(-inf) = 0 */
        __mmask16 in = lanes_below(c0, hi);
        __m512 e = expf16(_mm512_sub_ps(_mm512_maskz_loadu_ps(in, s + c0), max));
        e = _mm512_maskz_mov_ps(in, e);
        _mm512_mask_storeu_ps(s + c0, in, e);
        vsum = _mm512_add_ps(vsum, e);
    }
    return _mm512_reduce_add_ps(vsum);
}

/* out[0 .. NV) (NV vectors of 16 value dims, from dims i0 of the kv head's rows) = the sum over
 * cells [lo, hi) of s[c] v[c]; cells whose weight is 0 (hidden) are skipped. NV is a constant,
 * so the accumulators stay in registers. */
static inline __attribute__((always_inline)) void weighted_values(const struct attn_args *a,
                                                                  int kvh, int i0, int NV,
                                                                  const float *s, int lo, int hi,
                                                                  __m512 *out) {
    size_t stride = (size_t)a->n_head_kv * a->hd_v;
    const float *v = a->v + (size_t)kvh * a->hd_v + i0;
    for (int i = 0; i < NV; i++)
        out[i] = _mm512_setzero_ps();
    for (int c = lo; c < hi; c++) {
        if (s[c] == 0.0f)
            continue;
        const float *vc = v + (size_t)c * stride;
        __m512 w = _mm512_set1_ps(s[c]);
        for (int i = 0; i < NV; i++)
            out[i] = _mm512_fmadd_ps(w, _mm512_loadu_ps(vc + 16 * i), out[i]);
    }
}

/* Heads h0 .. h0+nh-1 (one kv head) of token t over cells [lo, hi); sc holds nh rows of
 * n_cells scores. */
static void attend_tiled(const struct attn_args *a, int t, int h0, int nh, const uint8_t *vis,
                         int lo, int hi, float *sc) {
    int kvh = h0 / (a->n_head / a->n_head_kv), n = a->n_cells;
    if (nh == ATTN_HEADS_AT_ONCE)
        scores_heads(a, t, h0, ATTN_HEADS_AT_ONCE, vis, lo, hi, sc);
    else
        for (int j = 0; j < nh; j++)
            scores_heads(a, t, h0 + j, 1, vis, lo, hi, sc + (size_t)j * n);
    for (int j = 0; j < nh; j++) {
        float *s = sc + (size_t)j * n, sum = softmax_row(s, lo, hi);
        float *y = a->y + ((size_t)t * a->n_head + h0 + j) * a->hd_v;
        __m512 inv = _mm512_set1_ps(sum == 0.0f ? 0.0f : 1.0f / sum);
        /* 8 vectors (128 dims) at a time where they fit, else 4, else 1 (hd_v % 16 == 0) */
        int i0 = 0;
        for (; i0 + 128 <= a->hd_v; i0 += 128) {
            __m512 out[8];
            weighted_values(a, kvh, i0, 8, s, lo, hi, out);
            for (int i = 0; i < 8; i++)
                _mm512_storeu_ps(y + i0 + 16 * i, _mm512_mul_ps(out[i], inv));
        }
        for (; i0 + 64 <= a->hd_v; i0 += 64) {
            __m512 out[4];
            weighted_values(a, kvh, i0, 4, s, lo, hi, out);
            for (int i = 0; i < 4; i++)
                _mm512_storeu_ps(y + i0 + 16 * i, _mm512_mul_ps(out[i], inv));
        }
        for (; i0 < a->hd_v; i0 += 16) {
            __m512 out[1];
            weighted_values(a, kvh, i0, 1, s, lo, hi, out);
            _mm512_storeu_ps(y + i0, _mm512_mul_ps(out[0], inv));
        }
    }
}

bool attention_avx512(struct backend *b, const struct attn_args *a) {
    const struct cpu_features *f = cpu_features_get();
    if (!f->avx512f || !f->avx512dq || !f->f16c || !f->fma || !a->f16_cache || a->hd_k % 16 ||
        a->hd_v % 16 || a->hd_v > 16 * MAX_VEC)
        return false;
    static const struct attention_kernels kernels = {attend_items, attend_tiled};
    attention_run(b, a, &kernels);
    return true;
}
