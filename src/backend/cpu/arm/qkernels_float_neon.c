/* qkernels_float_neon.c: f32, f16 and bf16 matmul kernels for AArch64 NEON. */
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "backend/cpu/qkernels.h"
#include "core/fp16.h"

/* The reference sums float rows in the orders of ggml's AVX-512 kernels (ggml_numerics.c):
 * 16-lane accumulators, then a tree. Here a 16-lane accumulator is four float32x4 (lanes
 * 4q .. 4q + 3 in quarter q) and every lane runs the same operations in the same order, so the
 * results equal the reference's bit for bit; as in qkernels_float_avx512.c, batches take
 * tinyBLAS's GEMM order and single tokens vec_dot's. Activations are rounded to the weight's dot
 * type first, as the reference does: kept as f32, f16 (stored as f32) or bf16 values. */

/* Loops over accumulators carry "#pragma GCC unroll": only unrolled do the accumulators stay in
 * registers, and GCC's -O2 does not unroll them by itself. */
enum { NR = 4, NC = 4, LANES = 16 };

/* The tree of ggml_numerics.c's reduce_lanes: 16 -> 8 -> 4 lanes, then (0+2) + (1+3). */
static inline float reduce(const float32x4_t q[4]) {
    float32x4_t r = vaddq_f32(vaddq_f32(q[3], q[1]), vaddq_f32(q[2], q[0]));
    return vaddv_f32(vadd_f32(vget_low_f32(r), vget_high_f32(r)));
}

/* 4 consecutive values as floats, from each storage type (f16 -> f32 is exact). */
static inline float32x4_t load_f32(const void *p, int64_t i) {
    return vld1q_f32((const float *)p + i);
}
static inline float32x4_t load_f16(const void *p, int64_t i) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)p + i)));
}

/* One VDPBF16PS step over 8 elements (4 lanes), in its documented order: per lane the odd
 * product, then the even one. bf16 values are the top halves of floats, and their products
 * are exact in f32, so each step is one rounded add, as in the reference. */
static inline float32x4_t dpbf16(float32x4_t acc, const void *w, const void *x, int64_t i) {
    uint32x4_t wv = vreinterpretq_u32_u16(vld1q_u16((const uint16_t *)w + i));
    uint32x4_t xv = vreinterpretq_u32_u16(vld1q_u16((const uint16_t *)x + i));
    const uint32x4_t hi = vdupq_n_u32(0xFFFF0000u);
    float32x4_t w_odd = vreinterpretq_f32_u32(vandq_u32(wv, hi));
    float32x4_t x_odd = vreinterpretq_f32_u32(vandq_u32(xv, hi));
    float32x4_t w_even = vreinterpretq_f32_u32(vshlq_n_u32(wv, 16));
    float32x4_t x_even = vreinterpretq_f32_u32(vshlq_n_u32(xv, 16));
    acc = vaddq_f32(acc, vmulq_f32(w_odd, x_odd));
    return vaddq_f32(acc, vmulq_f32(w_even, x_even));
}

/* ---- activations: xf32/xf16/xbf16 in qmatmul.c ---- */

/* ---- single tokens: ggml's vec_dot orders ---- */

/* ggml_vec_dot_f32/f16's body: four 16-lane accumulators of fused multiply-adds over 64-element
 * steps, folded (0+2) + (1+3), reduced. The callers add the tail from n - n % 64. */
static inline __attribute__((always_inline)) float
vec_body(float32x4_t (*load_w)(const void *, int64_t), const void *w, const void *x, int64_t n) {
    float32x4_t a[4][4]; /* [accumulator][quarter] */
#pragma GCC unroll 16
    for (int j = 0; j < 4; j++)
#pragma GCC unroll 16
        for (int q = 0; q < 4; q++)
            a[j][q] = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < n - n % 64; i += 64)
#pragma GCC unroll 16
        for (int j = 0; j < 4; j++)
#pragma GCC unroll 16
            for (int q = 0; q < 4; q++) {
                int64_t e = i + LANES * j + 4 * q;
                a[j][q] = vfmaq_f32(a[j][q], load_w(w, e), load_f32(x, e));
            }
    float32x4_t r[4];
#pragma GCC unroll 16
    for (int q = 0; q < 4; q++)
        r[q] = vaddq_f32(vaddq_f32(a[0][q], a[2][q]), vaddq_f32(a[1][q], a[3][q]));
    return reduce(r);
}

static float vec_f32(const void *w, const void *x, int64_t n) {
    float sum = vec_body(load_f32, w, x, n);
    const float *wf = w, *xf = x;
    for (int64_t i = n - n % 64; i < n; i++) /* fused, as ggml-cpu compiles its tail */
        sum = fmaf(wf[i], xf[i], sum);
    return sum;
}

static float vec_f16(const void *w, const void *x, int64_t n) {
    double sum = (double)vec_body(load_f16, w, x, n);
    const uint16_t *wh = w;
    const float *xf = x;
    for (int64_t i = n - n % 64; i < n; i++)
        sum += (double)(fp16_to_fp32(wh[i]) * xf[i]);
    return (float)sum;
}

/* ggml_vec_dot_bf16: two 16-lane accumulators for the halves of each 64-element step, each
 * reduced on its own; the tail in double. */
static float vec_bf16(const void *w, const void *x, int64_t n) {
    float32x4_t c1[4], c2[4];
#pragma GCC unroll 16
    for (int q = 0; q < 4; q++)
        c1[q] = c2[q] = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
#pragma GCC unroll 16
        for (int q = 0; q < 4; q++) {
            c1[q] = dpbf16(c1[q], w, x, i + 8 * q);
            c2[q] = dpbf16(c2[q], w, x, i + 32 + 8 * q);
        }
    double sum = (double)reduce(c1);
    sum += (double)reduce(c2);
    const uint16_t *wh = w, *xh = x;
    for (; i < n; i++)
        sum += (double)(bf16_to_fp32(wh[i]) * bf16_to_fp32(xh[i]));
    return (float)sum;
}

DEFINE_VEC_TILE(f32)
DEFINE_VEC_TILE(f16)
DEFINE_VEC_TILE(bf16)

/* ---- batches: tinyBLAS's order, one 16-lane accumulator per output. "Repacking" only
 * records where the 16 rows are (float_rows_record): these types are read in place. ---- */

/* Per type: elements per accumulator step (16, bf16 32), the update of one quarter of a 16-lane
 * accumulator with the elements from e on (4, bf16 8), the vec_dot order for widths tinyBLAS
 * does not take, and the tokens per register tile. */
struct ftype {
    int step;
    float32x4_t (*update)(float32x4_t acc, const void *w, const void *x, int64_t e);
    float (*vec)(const void *w, const void *x, int64_t n);
    int ct;
};

static inline float32x4_t fma_f32(float32x4_t acc, const void *w, const void *x, int64_t e) {
    return vfmaq_f32(acc, load_f32(w, e), load_f32(x, e));
}
static inline float32x4_t fma_f16(float32x4_t acc, const void *w, const void *x, int64_t e) {
    return vfmaq_f32(acc, load_f16(w, e), load_f32(x, e));
}

/* Register tiles of RT rows x ct tokens within 32 NEON registers: 2 x 3 is 24 accumulator
 * quarters and 5 operands; bf16 splits each operand in two halves, so it takes 2 x 2. */
enum { RT = 2, CT = 3 };

/* mr rows x mc tokens, both constants in every instantiation. Lanes are independent, so each
 * step runs quarter by quarter: few operands are live besides the accumulators. */
static inline __attribute__((always_inline)) void
gemm_block(const struct ftype *t, int64_t n, const uint8_t *w, size_t w_stride, int mr,
           const uint8_t *x, size_t x_stride, int mc, float *y, size_t y_stride) {
    float32x4_t acc[RT][CT][4];
#pragma GCC unroll 16
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 16
        for (int c = 0; c < mc; c++)
#pragma GCC unroll 16
            for (int q = 0; q < 4; q++)
                acc[r][c][q] = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < n; i += t->step)
#pragma GCC unroll 16
        for (int q = 0; q < 4; q++)
#pragma GCC unroll 16
            for (int r = 0; r < mr; r++)
#pragma GCC unroll 16
                for (int c = 0; c < mc; c++)
                    acc[r][c][q] = t->update(acc[r][c][q], w + (size_t)r * w_stride,
                                             x + (size_t)c * x_stride, i + t->step / 4 * q);
#pragma GCC unroll 16
    for (int c = 0; c < mc; c++)
#pragma GCC unroll 16
        for (int r = 0; r < mr; r++)
            y[(size_t)c * y_stride + (size_t)r] = reduce(acc[r][c]);
}

#define GEMM_CASE(mr_, mc_)                                                                        \
    case (CT + 1) * (mr_) + (mc_):                                                                 \
        gemm_block(t, n, w, p->w_stride, mr_, x, x_stride, mc_, y + r0, y_stride);                 \
        break;

static inline __attribute__((always_inline)) void gemm(const struct ftype *t, int64_t n,
                                                       const void *packed, int nr, const uint8_t *x,
                                                       size_t x_stride, int nc, float *y,
                                                       size_t y_stride) {
    const struct float_rows *p = packed;
    if (n % t->step) { /* tinyBLAS takes whole steps only; ggml uses vec_dot then */
        for (int c = 0; c < nc; c++)
            for (int r = 0; r < nr; r++)
                y[(size_t)c * y_stride + (size_t)r] =
                    t->vec(p->w + (size_t)r * p->w_stride, x + (size_t)c * x_stride, n);
        return;
    }
    for (int r0 = 0; r0 < nr; r0 += RT) {
        const uint8_t *w = p->w + (size_t)r0 * p->w_stride;
        switch ((CT + 1) * (nr - r0 < RT ? nr - r0 : RT) + nc) {
            GEMM_CASE(1, 1)
            GEMM_CASE(1, 2)
            GEMM_CASE(1, 3)
            GEMM_CASE(2, 1)
            GEMM_CASE(2, 2)
        default: gemm_block(t, n, w, p->w_stride, RT, x, x_stride, t->ct, y + r0, y_stride);
        }
    }
}

/* A float type's kernel of the NEON tables (qkernels.c, every level): its struct ftype, and the
 * batch tile over it. */
#define FLOAT_KERNEL(type, step, update, ct, row_bytes, to_float)                                  \
    static const struct ftype ft_##type = {step, update, vec_##type, ct};                          \
    static void gemm_##type(int64_t n, const void *packed, int nr, const uint8_t *x,               \
                            size_t x_stride, int nc, float *y, size_t y_stride) {                  \
        gemm(&ft_##type, n, packed, nr, x, x_stride, nc, y, y_stride);                             \
    }                                                                                              \
    DEFINE_FLOAT_KERNEL(neon, "neon", type, row_bytes, to_float, gemm_##type, ct)

/* Batches (2 or more tokens) take tinyBLAS's order, single tokens vec_dot's, as ggml-cpu. */
FLOAT_KERNEL(f32, LANES, fma_f32, CT, xf32_row_bytes, xf32_to_float)
FLOAT_KERNEL(f16, LANES, fma_f16, CT, xf32_row_bytes, xf32_to_float)
FLOAT_KERNEL(bf16, 2 * LANES, dpbf16, 2, xhalf_row_bytes, xbf16_to_float)
