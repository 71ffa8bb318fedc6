/* qkernels_float_avx512.c: f32, f16 and bf16 matmul kernels for AVX-512. They run the
 * summation orders that ggml_numerics.c emulates (ggml's tinyBLAS GEMM for batches, its vec_dot
 * for single tokens) with real vectors, so they give the scalar reference's results bit for
 * bit, an order of magnitude faster. Activations are rounded to the weight's dot type first,
 * as the reference does: kept as f32, f16 or bf16 values. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "backend/cpu/qkernels.h"
#include "core/fp16.h"

enum { NR = 4, NC = 4, LANES = 16 };

/* The tree of ggml_numerics.c's reduce_lanes: 512 -> 256 -> 128 bits, then (0+2) + (1+3). */
static inline float reduce(__m512 v) {
    __m256 h = _mm256_add_ps(_mm512_extractf32x8_ps(v, 1), _mm512_castps512_ps256(v));
    __m128 q = _mm_add_ps(_mm256_extractf128_ps(h, 1), _mm256_castps256_ps128(h));
    float r[4];
    _mm_storeu_ps(r, q);
    return (r[0] + r[2]) + (r[1] + r[3]);
}

/* 16 consecutive values as floats, from each storage type. */
static inline __m512 load_f32(const void *p, int64_t i) {
    return _mm512_loadu_ps((const float *)p + i);
}
static inline __m512 load_f16(const void *p, int64_t i) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i)));
}

/* ---- activations: xf32/xf16/xbf16 in qmatmul.c ---- */

/* ---- single tokens: ggml's vec_dot orders ---- */

/* Four accumulators over 64-element steps, folded (0+2) + (1+3), reduced; sets *done. */
#define VEC_BODY(load_w, load_x)                                                                   \
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),                  \
                   _mm512_setzero_ps()};                                                           \
    int64_t np = n - n % 64;                                                                       \
    for (int64_t i = 0; i < np; i += 64)                                                           \
        for (int j = 0; j < 4; j++)                                                                \
            a[j] = _mm512_fmadd_ps(load_w(w, i + 16 * j), load_x(x, i + 16 * j), a[j]);            \
    float body = reduce(_mm512_add_ps(_mm512_add_ps(a[0], a[2]), _mm512_add_ps(a[1], a[3])));

static float vec_f32(const void *w, const void *x, int64_t n) {
    VEC_BODY(load_f32, load_f32)
    const float *wf = w, *xf = x;
    for (int64_t i = np; i < n; i++) /* fused, as ggml-cpu compiles its tail */
        body = fmaf(wf[i], xf[i], body);
    return body;
}

static float vec_f16(const void *w, const void *x, int64_t n) {
    VEC_BODY(load_f16, load_f32)
    double sum = (double)body;
    const uint16_t *wh = w;
    const float *xf = x;
    for (int64_t i = np; i < n; i++)
        sum += (double)(fp16_to_fp32(wh[i]) * xf[i]);
    return (float)sum;
}

/* One VDPBF16PS step in its documented order: per 32-bit lane, the odd product, then the even
 * one (bf16 products are exact in f32). */
static inline __m512 dpbf16(__m512 acc, const uint16_t *w, const uint16_t *x) {
    __m512i wv = _mm512_loadu_si512(w), xv = _mm512_loadu_si512(x);
    __m512i hi = _mm512_set1_epi32((int)0xFFFF0000u);
    __m512 w_odd = _mm512_castsi512_ps(_mm512_and_si512(wv, hi));
    __m512 x_odd = _mm512_castsi512_ps(_mm512_and_si512(xv, hi));
    __m512 w_even = _mm512_castsi512_ps(_mm512_slli_epi32(wv, 16));
    __m512 x_even = _mm512_castsi512_ps(_mm512_slli_epi32(xv, 16));
    acc = _mm512_add_ps(acc, _mm512_mul_ps(w_odd, x_odd));
    return _mm512_add_ps(acc, _mm512_mul_ps(w_even, x_even));
}

static float vec_bf16(const void *w, const void *x, int64_t n) {
    const uint16_t *wh = w, *xh = x;
    __m512 c1 = _mm512_setzero_ps(), c2 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        c1 = dpbf16(c1, wh + i, xh + i);
        c2 = dpbf16(c2, wh + i + 32, xh + i + 32);
    }
    double sum = (double)reduce(c1);
    sum += (double)reduce(c2);
    for (; i < n; i++)
        sum += (double)(bf16_to_fp32(wh[i]) * bf16_to_fp32(xh[i]));
    return (float)sum;
}

DEFINE_VEC_TILE(f32)
DEFINE_VEC_TILE(f16)
DEFINE_VEC_TILE(bf16)

/* ---- batches: tinyBLAS's order, one 16-lane accumulator per output, in 4x4 register tiles.
 * "Repacking" only records where the 16 rows are (float_rows_record): these types are read in
 * place. ---- */

#define DEFINE_GEMM(name, step, update, w_bytes, x_bytes, vec)                                     \
    static void name(int64_t n, const void *packed, int nr, const uint8_t *x, size_t x_stride,     \
                     int nc, float *y, size_t y_stride) {                                          \
        const struct float_rows *p = packed;                                                       \
        if (n % (step)) { /* tinyBLAS takes whole steps only; ggml uses vec_dot then */            \
            for (int c = 0; c < nc; c++)                                                           \
                for (int r = 0; r < nr; r++)                                                       \
                    y[(size_t)c * y_stride + (size_t)r] =                                          \
                        vec(p->w + (size_t)r * p->w_stride, x + (size_t)c * x_stride, n);          \
            return;                                                                                \
        }                                                                                          \
        for (int r0 = 0; r0 < nr; r0 += NR) {                                                      \
            int mr = nr - r0 < NR ? nr - r0 : NR;                                                  \
            __m512 acc[NR][NC];                                                                    \
            for (int r = 0; r < NR; r++)                                                           \
                for (int c = 0; c < NC; c++)                                                       \
                    acc[r][c] = _mm512_setzero_ps();                                               \
            for (int64_t i = 0; i < n; i += (step))                                                \
                for (int r = 0; r < mr; r++) {                                                     \
                    const void *wr = p->w + (size_t)(r0 + r) * p->w_stride + (size_t)i * w_bytes;  \
                    for (int c = 0; c < nc; c++)                                                   \
                        acc[r][c] =                                                                \
                            update(acc[r][c], wr, x + (size_t)c * x_stride + (size_t)i * x_bytes); \
                }                                                                                  \
            for (int c = 0; c < nc; c++)                                                           \
                for (int r = 0; r < mr; r++)                                                       \
                    y[(size_t)c * y_stride + (size_t)(r0 + r)] = reduce(acc[r][c]);                \
        }                                                                                          \
    }

static inline __m512 fma_f32(__m512 acc, const void *w, const void *x) {
    return _mm512_fmadd_ps(load_f32(w, 0), load_f32(x, 0), acc);
}
static inline __m512 fma_f16(__m512 acc, const void *w, const void *x) {
    return _mm512_fmadd_ps(load_f16(w, 0), load_f32(x, 0), acc);
}
static inline __m512 step_bf16(__m512 acc, const void *w, const void *x) {
    return dpbf16(acc, w, x);
}

DEFINE_GEMM(gemm_f32, LANES, fma_f32, 4, 4, vec_f32)
DEFINE_GEMM(gemm_f16, LANES, fma_f16, 2, 4, vec_f16)
DEFINE_GEMM(gemm_bf16, 2 * LANES, step_bf16, 2, 2, vec_bf16)

/* The float kernels of the AVX-512 table (qkernels.c). */
DEFINE_FLOAT_KERNEL(avx512, "avx512", f32, xf32_row_bytes, xf32_to_float, gemm_f32, NC)
DEFINE_FLOAT_KERNEL(avx512, "avx512", f16, xf32_row_bytes, xf32_to_float, gemm_f16, NC)
DEFINE_FLOAT_KERNEL(avx512, "avx512", bf16, xhalf_row_bytes, xbf16_to_float, gemm_bf16, NC)
