/* qkernels_float_avx2.c: f32, f16 and bf16 matmul kernels for AVX2 CPUs without AVX-512. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "backend/cpu/qkernels.h"
#include "core/fp16.h"

/* The reference sums in the orders of ggml's AVX-512 build (ggml_numerics.c): its vec_dot for
 * single tokens, tinyBLAS for batches, each over 16-lane registers. Here each of those registers
 * is a pair of 8-lane halves, lane for lane, so the results stay the reference's bit for bit at
 * no cost (the halves are independent accumulators either way). Activations are rounded to the
 * weight's dot type first, as the reference does: kept as f32, f16 or bf16 values. */
struct v16 {
    __m256 lo, hi; /* lanes 0..7, 8..15 */
};

enum { NR = 4, NC = 4, LANES = 16 };

static inline struct v16 v16_zero(void) {
    return (struct v16){_mm256_setzero_ps(), _mm256_setzero_ps()};
}
static inline struct v16 v16_add(struct v16 a, struct v16 b) {
    return (struct v16){_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)};
}
static inline struct v16 v16_fma(struct v16 w, struct v16 x, struct v16 acc) {
    return (struct v16){_mm256_fmadd_ps(w.lo, x.lo, acc.lo), _mm256_fmadd_ps(w.hi, x.hi, acc.hi)};
}

/* The tree of _mm512_reduce_add_ps: 512 -> 256 -> 128 bits, then (0+2) + (1+3). */
static inline float reduce(struct v16 v) {
    __m256 h = _mm256_add_ps(v.hi, v.lo);
    __m128 q = _mm_add_ps(_mm256_extractf128_ps(h, 1), _mm256_castps256_ps128(h));
    float r[4];
    _mm_storeu_ps(r, q);
    return (r[0] + r[2]) + (r[1] + r[3]);
}

/* 16 consecutive values as floats, from each storage type. */
static inline struct v16 load_f32(const void *p, int64_t i) {
    const float *f = (const float *)p + i;
    return (struct v16){_mm256_loadu_ps(f), _mm256_loadu_ps(f + 8)};
}
static inline struct v16 load_f16(const void *p, int64_t i) {
    const uint16_t *h = (const uint16_t *)p + i;
    return (struct v16){_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)),
                        _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + 8)))};
}

/* One VDPBF16PS over 32 elements in its documented order: lane l adds the product of elements
 * 2l + 1, then of 2l (bf16 products are exact in f32, so each step is one rounded add). */
static inline __m256 dpbf16_half(__m256 acc, const uint16_t *w, const uint16_t *x) {
    __m256i wv = _mm256_loadu_si256((const __m256i *)w),
            xv = _mm256_loadu_si256((const __m256i *)x);
    __m256i odd = _mm256_set1_epi32((int)0xFFFF0000u);
    acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_castsi256_ps(_mm256_and_si256(wv, odd)),
                                           _mm256_castsi256_ps(_mm256_and_si256(xv, odd))));
    return _mm256_add_ps(acc, _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(wv, 16)),
                                            _mm256_castsi256_ps(_mm256_slli_epi32(xv, 16))));
}
static inline struct v16 dpbf16(struct v16 acc, const uint16_t *w, const uint16_t *x) {
    return (struct v16){dpbf16_half(acc.lo, w, x), dpbf16_half(acc.hi, w + 16, x + 16)};
}

/* ---- activations: xf32/xf16/xbf16 in qmatmul.c ---- */

/* ---- single tokens: ggml's vec_dot orders, one row and token at a time (the accumulators of
 * one dot product fill half the register file) ---- */

/* Four accumulators over 64-element steps, folded (0+2) + (1+3), reduced. */
#define VEC_BODY(load_w, load_x)                                                                   \
    struct v16 a[4] = {v16_zero(), v16_zero(), v16_zero(), v16_zero()};                            \
    int64_t np = n - n % 64;                                                                       \
    for (int64_t i = 0; i < np; i += 64)                                                           \
        for (int j = 0; j < 4; j++)                                                                \
            a[j] = v16_fma(load_w(w, i + 16 * j), load_x(x, i + 16 * j), a[j]);                    \
    float body = reduce(v16_add(v16_add(a[0], a[2]), v16_add(a[1], a[3])));

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

static float vec_bf16(const void *w, const void *x, int64_t n) {
    const uint16_t *wh = w, *xh = x;
    struct v16 c1 = v16_zero(), c2 = v16_zero();
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

/* ---- batches: tinyBLAS's order, one 16-lane accumulator per output. The batch path is taken
 * from two tokens on, as the reference switches orders there; "repacking" only records where
 * the 16 rows are (float_rows_record): these types are read in place. ---- */

static inline struct v16 fma_f32(struct v16 acc, const void *w, const void *x) {
    return v16_fma(load_f32(w, 0), load_f32(x, 0), acc);
}
static inline struct v16 fma_f16(struct v16 acc, const void *w, const void *x) {
    return v16_fma(load_f16(w, 0), load_f32(x, 0), acc);
}
static inline struct v16 step_bf16(struct v16 acc, const void *w, const void *x) {
    return dpbf16(acc, w, x);
}

/* One row x nc tokens (a constant in every instantiation: 2 nc accumulator registers), so each
 * step of the row is loaded and converted once for all the tokens. */
#define GEMM_ROW(nc_, step, update, w_bytes, x_bytes)                                              \
    case nc_: {                                                                                    \
        struct v16 acc[nc_];                                                                       \
        for (int c = 0; c < nc_; c++)                                                              \
            acc[c] = v16_zero();                                                                   \
        for (int64_t i = 0; i < n; i += (step))                                                    \
            for (int c = 0; c < nc_; c++)                                                          \
                acc[c] = update(acc[c], wr + (size_t)i * (w_bytes),                                \
                                x + (size_t)c * x_stride + (size_t)i * (x_bytes));                 \
        for (int c = 0; c < nc_; c++)                                                              \
            y[(size_t)c * y_stride + (size_t)r] = reduce(acc[c]);                                  \
        break;                                                                                     \
    }

#define DEFINE_GEMM(name, step, update, w_bytes, x_bytes, vec)                                     \
    static void name(int64_t n, const void *packed, int nr, const uint8_t *x, size_t x_stride,     \
                     int nc, float *y, size_t y_stride) {                                          \
        const struct float_rows *p = packed;                                                       \
        for (int r = 0; r < nr; r++) {                                                             \
            const uint8_t *wr = p->w + (size_t)r * p->w_stride;                                    \
            if (n % (step)) { /* tinyBLAS takes whole steps only; ggml uses vec_dot then */        \
                for (int c = 0; c < nc; c++)                                                       \
                    y[(size_t)c * y_stride + (size_t)r] = vec(wr, x + (size_t)c * x_stride, n);    \
                continue;                                                                          \
            }                                                                                      \
            switch (nc) {                                                                          \
                GEMM_ROW(1, step, update, w_bytes, x_bytes)                                        \
                GEMM_ROW(2, step, update, w_bytes, x_bytes)                                        \
                GEMM_ROW(3, step, update, w_bytes, x_bytes)                                        \
                GEMM_ROW(4, step, update, w_bytes, x_bytes)                                        \
            }                                                                                      \
        }                                                                                          \
    }

DEFINE_GEMM(gemm_f32, LANES, fma_f32, 4, 4, vec_f32)
DEFINE_GEMM(gemm_f16, LANES, fma_f16, 2, 4, vec_f16)
DEFINE_GEMM(gemm_bf16, 2 * LANES, step_bf16, 2, 2, vec_bf16)

/* The float kernels of the AVX2 and AVX-VNNI tables (qkernels.c). */
DEFINE_FLOAT_KERNEL(avx2, "avx2", f32, xf32_row_bytes, xf32_to_float, gemm_f32, NC)
DEFINE_FLOAT_KERNEL(avx2, "avx2", f16, xf32_row_bytes, xf32_to_float, gemm_f16, NC)
DEFINE_FLOAT_KERNEL(avx2, "avx2", bf16, xhalf_row_bytes, xbf16_to_float, gemm_bf16, NC)
