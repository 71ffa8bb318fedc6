/* attention_avx2.c: attention_avx512.c's two kernels on 8-lane registers. Small batches (decode)
 * run the f16-cache attention of attention_ref.c with the same operations in the same order: q
 * rounded to f16, ggml's 4 x 16-lane dot product kept as pairs of 8-lane halves lane for lane,
 * the online softmax, the value accumulator rounded to f16 after every step; its results are
 * the reference's bit for bit. Large batches take the tiled f32 kernel (scores of 8 cells at a
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

/* ggml_dot_f16 (n % 16 == 0): four 16-lane accumulators over 64-element steps, folded 0+2,
 * 1+3, then 0+1, reduced; a tail of 16..48 elements summed in double as products of floats. */
static inline float dot_f16(const float *x, const float *y, int n) {
    __m256 a[8];
    for (int j = 0; j < 8; j++)
        a[j] = _mm256_setzero_ps();
    int np = n - n % 64;
    for (int i = 0; i < np; i += 64)
        for (int j = 0; j < 8; j++)
            a[j] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8 * j), _mm256_loadu_ps(y + i + 8 * j),
                                   a[j]);
    /* accumulator j of the 16-lane form is the halves a[2j], a[2j + 1] */
    __m256 lo = _mm256_add_ps(_mm256_add_ps(a[0], a[4]), _mm256_add_ps(a[2], a[6]));
    __m256 hi = _mm256_add_ps(_mm256_add_ps(a[1], a[5]), _mm256_add_ps(a[3], a[7]));
    double sum = (double)reduce16(lo, hi);
    for (int i = np; i < n; i++)
        sum += (double)(x[i] * y[i]);
    return (float)sum;
}

static void attend(const struct attn_args *a, int t, int h, float *qh) {
    int kvh = h / (a->n_head / a->n_head_kv), nv = a->hd_v / 8;
    const float *q = a->q + ((size_t)t * a->n_head + h) * a->hd_k;
    float *y = a->y + ((size_t)t * a->n_head + h) * a->hd_v;
    for (int i = 0; i < a->hd_k; i += 8)
        _mm256_storeu_ps(qh + i, round_f16(_mm256_loadu_ps(q + i)));
    __m256 acc[MAX_VEC];
    for (int i = 0; i < nv; i++)
        acc[i] = _mm256_setzero_ps();
    float m = -INFINITY, sum = 0.0f;
    for (int c = 0; c < a->n_cells; c++) {
        if (!visible(a, t, c))
            continue;
        const float *k = a->k + ((size_t)c * a->n_head_kv + kvh) * a->hd_k;
        const float *v = a->v + ((size_t)c * a->n_head_kv + kvh) * a->hd_v;
        float ms = 1.0f, vs = 1.0f, s = score(a, dot_f16(qh, k, a->hd_k));
        if (s > m) {
            ms = expf(m - s);
            m = s;
            for (int i = 0; i < nv; i++)
                acc[i] = round_f16(_mm256_mul_ps(acc[i], _mm256_set1_ps(ms)));
        } else {
            vs = expf(s - m);
        }
        __m256 w = _mm256_set1_ps(vs);
        for (int i = 0; i < nv; i++)
            acc[i] = round_f16(_mm256_fmadd_ps(_mm256_loadu_ps(v + 8 * i), w, acc[i]));
        sum = fmaf(sum, ms, vs);
    }
    __m256 inv = _mm256_set1_ps(sum == 0.0f ? 0.0f : 1.0f / sum);
    for (int i = 0; i < nv; i++)
        _mm256_storeu_ps(y + 8 * i, _mm256_mul_ps(acc[i], inv));
}

/* ---- large batches ------------------------------------------------------------------------ */

/* Lanes c0 .. c0 + 7 that lie below hi, as a mask for the masked loads and stores. */
static inline __m256i lanes_below(int c0, int hi) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(hi - c0), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* The scores of heads h0 .. h0+nh-1 (one kv head) of token t against cells [lo, hi), 8 cells
 * at a time; invisible cells get -inf. */
static void scores(const struct attn_args *a, int t, int h0, int nh, const uint8_t *vis, int lo,
                   int hi, float *sc) {
    int kvh = h0 / (a->n_head / a->n_head_kv), hd = a->hd_k, n = a->n_cells;
    const float *q = a->q + ((size_t)t * a->n_head + h0) * hd;
    const float *kt = a->k_t + (size_t)kvh * hd * n;
    for (int c0 = lo; c0 < hi; c0 += 8) {
        __m256i in = lanes_below(c0, hi);
        __m256 acc[ATTN_HEADS_AT_ONCE];
        for (int j = 0; j < nh; j++)
            acc[j] = _mm256_setzero_ps();
        for (int d = 0; d < hd; d++) {
            __m256 kv = _mm256_maskload_ps(kt + (size_t)d * n + c0, in);
            for (int j = 0; j < nh; j++)
                acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(q[j * hd + d]), kv, acc[j]);
        }
        uint8_t seen[8] = {0};
        memcpy(seen, vis + c0, (size_t)(hi - c0 < 8 ? hi - c0 : 8));
        __m256i v8 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)seen));
        __m256 hidden = _mm256_castsi256_ps(_mm256_cmpeq_epi32(v8, _mm256_setzero_si256()));
        for (int j = 0; j < nh; j++) {
            __m256 s = _mm256_mul_ps(acc[j], _mm256_set1_ps(a->scale));
            s = _mm256_blendv_ps(s, _mm256_set1_ps(-INFINITY), hidden);
            _mm256_maskstore_ps(sc + (size_t)j * n + c0, in, s);
        }
    }
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

static void attend_tiled(const struct attn_args *a, int t, int h0, int nh, const uint8_t *vis,
                         int lo, int hi, float *sc) {
    int kvh = h0 / (a->n_head / a->n_head_kv), n = a->n_cells, nv = a->hd_v / 8;
    scores(a, t, h0, nh, vis, lo, hi, sc);
    for (int j = 0; j < nh; j++) {
        float *s = sc + (size_t)j * n, sum = softmax_row(s, lo, hi);
        __m256 out[MAX_VEC];
        for (int i = 0; i < nv; i++)
            out[i] = _mm256_setzero_ps();
        for (int c = lo; c < hi; c++) {
            if (s[c] == 0.0f)
                continue;
            const float *v = a->v + ((size_t)c * a->n_head_kv + kvh) * a->hd_v;
            __m256 w = _mm256_set1_ps(s[c]);
            for (int i = 0; i < nv; i++)
                out[i] = _mm256_fmadd_ps(w, _mm256_loadu_ps(v + 8 * i), out[i]);
        }
        float *y = a->y + ((size_t)t * a->n_head + h0 + j) * a->hd_v;
        __m256 inv = _mm256_set1_ps(sum == 0.0f ? 0.0f : 1.0f / sum);
        for (int i = 0; i < nv; i++)
            _mm256_storeu_ps(y + 8 * i, _mm256_mul_ps(out[i], inv));
    }
}

bool attention_avx2(struct backend *b, const struct attn_args *a) {
    const struct cpu_features *f = cpu_features_get();
    if (!f->avx2 || !f->f16c || !f->fma || !a->f16_cache || a->hd_k % 16 || a->hd_v % 16 ||
        a->hd_v > 8 * MAX_VEC)
        return false;
    static const struct attention_kernels kernels = {attend, attend_tiled};
    attention_run(b, a, &kernels);
    return true;
}
