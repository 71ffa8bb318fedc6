/* attention_avx2.c: attention_avx512.c's two kernels on 8-lane registers. Small batches (decode)
 * run the f16-cache attention of attention_ref.c with the same operations in the same order: q
 * rounded to f16, ggml's 4 x 16-lane dot product kept as pairs of 8-lane halves lane for lane,
 * the online softmax, the value accumulator rounded to f16 after every step; its results are
 * the reference's bit for bit. Large batches take the tiled f32 kernel (scores of 16 cells at a
 * time from a transposed k, an exact softmax with the vector exp, then the weighted values). */
#include <immintrin.h>
#include <string.h>

#include "backend/cpu/attention.h"
#include "backend/cpu/x86/simd_x86.h"
#include "backend/cpu/x86/vexp_avx2.h"
#include "core/cpu_features.h"

enum { MAX_VEC = 32 }; /* head sizes up to 256, in vectors of 8 */

static inline __m256 round_f16(__m256 v) {
    return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

/* The reduction tree of ggml_numerics.c's reduce_lanes over 16 lanes held as halves lo, hi:
 * 16 -> 8 -> 4 lanes, then pairs. */
static inline float reduce16(__m256 lo, __m256 hi) {
    __m256 h = _mm256_add_ps(hi, lo);
    __m128 q = _mm_add_ps(_mm256_extractf128_ps(h, 1), _mm256_castps256_ps128(h));
    float r[4];
    _mm_storeu_ps(r, q);
    return (r[0] + r[2]) + (r[1] + r[3]);
}

/* ggml_dot_f16's 64-element steps (np % 64 == 0): four 16-lane accumulators, folded (0+2) +
 * (1+3), reduced; the tail of 16..48 elements, summed in double, is attention_items.h's. */
static inline float dot_f16_steps(const float *x, const float *y, int np) {
    __m256 a[8];
    for (int j = 0; j < 8; j++)
        a[j] = _mm256_setzero_ps();
    for (int i = 0; i < np; i += 64)
        for (int j = 0; j < 8; j++)
            a[j] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8 * j), _mm256_loadu_ps(y + i + 8 * j),
                                   a[j]);
    /* accumulator j of the 16-lane form is the halves a[2j], a[2j + 1] */
    __m256 lo = _mm256_add_ps(_mm256_add_ps(a[0], a[4]), _mm256_add_ps(a[2], a[6]));
    __m256 hi = _mm256_add_ps(_mm256_add_ps(a[1], a[5]), _mm256_add_ps(a[3], a[7]));
    return reduce16(lo, hi);
}

#define ATT_V            __m256
#define ATT_LANES        8
#define att_zero()       _mm256_setzero_ps()
#define att_load(p)      _mm256_loadu_ps(p)
#define att_store(p, v)  _mm256_storeu_ps(p, v)
#define att_set1(x)      _mm256_set1_ps(x)
#define att_mul(a, b)    _mm256_mul_ps(a, b)
#define att_fma(a, b, c) _mm256_fmadd_ps(a, b, c)
#include "backend/cpu/attention_items.h"

/* ---- large batches ------------------------------------------------------------------------ */

/* Lanes c0 .. c0 + 7 that lie below hi, as a mask for the masked loads and stores. */
static inline __m256i lanes_below(int c0, int hi) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(hi - c0),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Cells c0 .. c0 + 15 of the scores of NH heads (q: their queries, hd apart) against kt (the kv
 * head's transposed keys, rows n apart), as two 8-lane halves, in0 and in1 their lanes below
 * hi. NH is a constant at every call, so the 2 NH accumulators stay in registers (8 chains of
 * FMAs for 4 heads: enough to hide the FMA latency); full blocks load without masks. */
static inline __attribute__((always_inline)) void scores16(const float *q, int hd, const float *kt,
                                                           size_t n, int c0, int NH, bool full,
                                                           __m256i in0, __m256i in1, __m256 *acc0,
                                                           __m256 *acc1) {
    for (int j = 0; j < NH; j++)
        acc0[j] = _mm256_setzero_ps(), acc1[j] = _mm256_setzero_ps();
    for (int d = 0; d < hd; d++) {
        const float *k = kt + (size_t)d * n + c0;
        __m256 k0 = full ? _mm256_loadu_ps(k) : _mm256_maskload_ps(k, in0);
        __m256 k1 = full ? _mm256_loadu_ps(k + 8) : _mm256_maskload_ps(k + 8, in1);
        for (int j = 0; j < NH; j++) {
            __m256 qd = _mm256_set1_ps(q[(size_t)j * hd + d]);
            acc0[j] = _mm256_fmadd_ps(qd, k0, acc0[j]);
            acc1[j] = _mm256_fmadd_ps(qd, k1, acc1[j]);
        }
    }
}

/* -inf where a cell is hidden, 8 lanes from vis. */
static inline __m256 hidden8(const uint8_t *vis, int c0, int hi) {
    uint8_t seen[8] = {0};
    if (hi > c0)
        memcpy(seen, vis + c0, (size_t)(hi - c0 < 8 ? hi - c0 : 8));
    __m256i v8 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)seen));
    return _mm256_castsi256_ps(_mm256_cmpeq_epi32(v8, _mm256_setzero_si256()));
}

/* The scores of NH heads of one kv head, from head h0 of token t, against cells [lo, hi), 16
 * cells at a time; invisible cells get -inf. */
static inline __attribute__((always_inline)) void scores_heads(const struct attn_args *a, int t,
                                                               int h0, int NH, const uint8_t *vis,
                                                               int lo, int hi, float *sc) {
    int kvh = h0 / (a->n_head / a->n_head_kv), hd = a->hd_k, n = a->n_cells;
    const float *q = a->q + ((size_t)t * a->n_head + h0) * hd;
    const float *kt = a->k_t + (size_t)kvh * hd * n;
    __m256 scale = _mm256_set1_ps(a->scale), ninf = _mm256_set1_ps(-INFINITY);
    for (int c0 = lo; c0 < hi; c0 += 16) {
        __m256i in0 = lanes_below(c0, hi), in1 = lanes_below(c0 + 8, hi);
        __m256 acc0[ATTN_HEADS_AT_ONCE], acc1[ATTN_HEADS_AT_ONCE];
        if (c0 + 16 <= hi)
            scores16(q, hd, kt, (size_t)n, c0, NH, true, in0, in1, acc0, acc1);
        else
            scores16(q, hd, kt, (size_t)n, c0, NH, false, in0, in1, acc0, acc1);
        __m256 hid0 = hidden8(vis, c0, hi), hid1 = hidden8(vis, c0 + 8, hi);
        for (int j = 0; j < NH; j++) {
            float *row = sc + (size_t)j * n + c0;
            __m256 s0 = _mm256_blendv_ps(_mm256_mul_ps(acc0[j], scale), ninf, hid0);
            __m256 s1 = _mm256_blendv_ps(_mm256_mul_ps(acc1[j], scale), ninf, hid1);
            _mm256_maskstore_ps(row, in0, s0);
            _mm256_maskstore_ps(row + 8, in1, s1);
        }
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
    __m256 vmax = _mm256_set1_ps(-INFINITY), vsum = _mm256_setzero_ps();
    for (int c0 = lo; c0 < hi; c0 += 8) {
        __m256 v = _mm256_maskload_ps(s + c0, lanes_below(c0, hi));
        __m256 keep = _mm256_castsi256_ps(lanes_below(c0, hi));
        vmax = _mm256_max_ps(vmax, _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), v, keep));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    __m256 max = _mm256_set1_ps(_mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4))));
    for (int c0 = lo; c0 < hi; c0 += 8) { /* invisible cells: exp(-inf) = 0 */
        __m256i in = lanes_below(c0, hi);
        __m256 e = expf8(_mm256_sub_ps(_mm256_maskload_ps(s + c0, in), max));
        e = _mm256_and_ps(e, _mm256_castsi256_ps(in));
        _mm256_maskstore_ps(s + c0, in, e);
        vsum = _mm256_add_ps(vsum, e);
    }
    return hsum(vsum);
}

/* out[0 .. NV) (NV vectors of 8 value dims, from dims i0 of the kv head's rows) = the sum over
 * cells [lo, hi) of s[c] v[c]; cells whose weight is 0 (hidden) are skipped. NV is a constant,
 * so the accumulators stay in registers. */
static inline __attribute__((always_inline)) void weighted_values(const struct attn_args *a,
                                                                  int kvh, int i0, int NV,
                                                                  const float *s, int lo, int hi,
                                                                  __m256 *out) {
    size_t stride = (size_t)a->n_head_kv * a->hd_v;
    const float *v = a->v + (size_t)kvh * a->hd_v + i0;
    for (int i = 0; i < NV; i++)
        out[i] = _mm256_setzero_ps();
    for (int c = lo; c < hi; c++) {
        if (s[c] == 0.0f)
            continue;
        const float *vc = v + (size_t)c * stride;
        __m256 w = _mm256_set1_ps(s[c]);
        for (int i = 0; i < NV; i++)
            out[i] = _mm256_fmadd_ps(w, _mm256_loadu_ps(vc + 8 * i), out[i]);
    }
}

static void attend_tiled(const struct attn_args *a, int t, int h0, int nh, const uint8_t *vis,
                         int lo, int hi, float *sc) {
    int kvh = h0 / (a->n_head / a->n_head_kv), n = a->n_cells;
    scores(a, t, h0, nh, vis, lo, hi, sc);
    for (int j = 0; j < nh; j++) {
        float *s = sc + (size_t)j * n, sum = softmax_row(s, lo, hi);
        float *y = a->y + ((size_t)t * a->n_head + h0 + j) * a->hd_v;
        __m256 inv = _mm256_set1_ps(sum == 0.0f ? 0.0f : 1.0f / sum);
        /* 8 vectors (64 dims) at a time: 8 chains of FMAs; hd_v % 16 == 0 leaves pairs */
        int i0 = 0;
        for (; i0 + 64 <= a->hd_v; i0 += 64) {
            __m256 out[8];
            weighted_values(a, kvh, i0, 8, s, lo, hi, out);
            for (int i = 0; i < 8; i++)
                _mm256_storeu_ps(y + i0 + 8 * i, _mm256_mul_ps(out[i], inv));
        }
        for (; i0 < a->hd_v; i0 += 16) {
            __m256 out[2];
            weighted_values(a, kvh, i0, 2, s, lo, hi, out);
            for (int i = 0; i < 2; i++)
                _mm256_storeu_ps(y + i0 + 8 * i, _mm256_mul_ps(out[i], inv));
        }
    }
}

bool attention_avx2(struct backend *b, const struct attn_args *a) {
    const struct cpu_features *f = cpu_features_get();
    if (!f->avx2 || !f->f16c || !f->fma || !a->f16_cache || a->hd_k % 16 || a->hd_v % 16 ||
        a->hd_v > 8 * MAX_VEC)
        return false;
    static const struct attention_kernels kernels = {attend_items, attend_tiled};
    attention_run(b, a, &kernels);
    return true;
}
