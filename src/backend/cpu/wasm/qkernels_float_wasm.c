/* qkernels_float_wasm.c: f32, f16 and bf16 matmul kernels in WebAssembly SIMD128, the shapes of
 * the NEON file (qkernels_float_neon.c): single tokens in ggml's vec_dot order, batches in
 * tinyBLAS's (16-lane accumulators as four 4-lane quarters, the same reduction tree). SIMD128
 * has no fused multiply-add (a scalar fmaf is a software routine here), so products are rounded
 * before they are added: within float rounding of the reference, not bit for bit. */
#include <math.h>
#include <string.h>

#include "backend/cpu/qkernels.h"
#include "backend/cpu/wasm/level_wasm.h"
#include "core/fp16.h"

enum { NR = 4, NC = 4, LANES = 16 };

/* The tree of ggml_numerics.c's reduce_lanes: 16 -> 8 -> 4 lanes, then (0+2) + (1+3). */
static inline float reduce(const v128_t q[4]) {
    v128_t r = wasm_f32x4_add(wasm_f32x4_add(q[3], q[1]), wasm_f32x4_add(q[2], q[0]));
    v128_t h = wasm_f32x4_add(r, wasm_i32x4_shuffle(r, r, 2, 3, 0, 1));
    return wasm_f32x4_extract_lane(h, 0) + wasm_f32x4_extract_lane(h, 1);
}

/* 4 consecutive values as floats, from each storage type (f16 -> f32 is exact). */
static inline v128_t load_f32(const void *p, int64_t i) {
    return wasm_v128_load((const float *)p + i);
}
static inline v128_t load_f16(const void *p, int64_t i) {
    return f16x4((const uint16_t *)p + i);
}

/* One VDPBF16PS step over 8 elements (4 lanes), in its documented order: per lane the odd
 * product, then the even one (bf16 products are exact in f32). */
static inline v128_t dpbf16(v128_t acc, const void *w, const void *x, int64_t i) {
    v128_t wv = wasm_v128_load((const uint16_t *)w + i);
    v128_t xv = wasm_v128_load((const uint16_t *)x + i);
    const v128_t hi = wasm_i32x4_splat((int32_t)0xFFFF0000u);
    acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_v128_and(wv, hi), wasm_v128_and(xv, hi)));
    return wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_i32x4_shl(wv, 16), wasm_i32x4_shl(xv, 16)));
}

/* ---- single tokens: ggml's vec_dot orders ---- */

/* ggml_vec_dot_f32/f16's body: four 16-lane accumulators over 64-element steps, folded
 * (0+2) + (1+3), reduced. The callers add the tail from n - n % 64. */
static inline ALWAYS_INLINE float vec_body(v128_t (*load_w)(const void *, int64_t), const void *w,
                                           const void *x, int64_t n) {
    v128_t a[4][4]; /* [accumulator][quarter] */
    for (int j = 0; j < 4; j++)
        for (int q = 0; q < 4; q++)
            a[j][q] = wasm_f32x4_splat(0.0f);
    for (int64_t i = 0; i < n - n % 64; i += 64)
        for (int j = 0; j < 4; j++)
            for (int q = 0; q < 4; q++) {
                int64_t e = i + LANES * j + 4 * q;
                a[j][q] = fmadd(a[j][q], load_w(w, e), load_f32(x, e));
            }
    v128_t r[4];
    for (int q = 0; q < 4; q++)
        r[q] = wasm_f32x4_add(wasm_f32x4_add(a[0][q], a[2][q]), wasm_f32x4_add(a[1][q], a[3][q]));
    return reduce(r);
}

static float vec_f32(const void *w, const void *x, int64_t n) {
    float sum = vec_body(load_f32, w, x, n);
    const float *wf = w, *xf = x;
    for (int64_t i = n - n % 64; i < n; i++)
        sum += wf[i] * xf[i];
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
    v128_t c1[4], c2[4];
    for (int q = 0; q < 4; q++)
        c1[q] = c2[q] = wasm_f32x4_splat(0.0f);
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
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

/* ---- batches: tinyBLAS's order, one 16-lane accumulator per output, rows read in place ---- */

struct ftype {
    int step;
    v128_t (*update)(v128_t acc, const void *w, const void *x, int64_t e);
    float (*vec)(const void *w, const void *x, int64_t n);
    int ct;
};

static inline v128_t fma_f32(v128_t acc, const void *w, const void *x, int64_t e) {
    return fmadd(acc, load_f32(w, e), load_f32(x, e));
}
static inline v128_t fma_f16(v128_t acc, const void *w, const void *x, int64_t e) {
    return fmadd(acc, load_f16(w, e), load_f32(x, e));
}

/* Register tiles of RT rows x CT tokens (bf16: 2 x 2), as NEON's. */
enum { RT = 2, CT = 3 };

static inline ALWAYS_INLINE void gemm_block(const struct ftype *t, int64_t n, const uint8_t *w,
                                            size_t w_stride, int mr, const uint8_t *x,
                                            size_t x_stride, int mc, float *y, size_t y_stride) {
    v128_t acc[RT][CT][4];
    for (int r = 0; r < mr; r++)
        for (int c = 0; c < mc; c++)
            for (int q = 0; q < 4; q++)
                acc[r][c][q] = wasm_f32x4_splat(0.0f);
    for (int64_t i = 0; i < n; i += t->step)
        for (int q = 0; q < 4; q++)
            for (int r = 0; r < mr; r++)
                for (int c = 0; c < mc; c++)
                    acc[r][c][q] = t->update(acc[r][c][q], w + (size_t)r * w_stride,
                                             x + (size_t)c * x_stride, i + t->step / 4 * q);
    for (int c = 0; c < mc; c++)
        for (int r = 0; r < mr; r++)
            y[(size_t)c * y_stride + (size_t)r] = reduce(acc[r][c]);
}

#define GEMM_CASE(mr_, mc_)                                                                        \
    case (CT + 1) * (mr_) + (mc_):                                                                 \
        gemm_block(t, n, w, p->w_stride, mr_, x, x_stride, mc_, y + r0, y_stride);                 \
        break;

static inline ALWAYS_INLINE void gemm(const struct ftype *t, int64_t n, const void *packed, int nr,
                                      const uint8_t *x, size_t x_stride, int nc, float *y,
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

#define FLOAT_KERNEL(type, step, update, ct, row_bytes, to_float)                                  \
    static const struct ftype ft_##type = {step, update, vec_##type, ct};                          \
    static void gemm_##type(int64_t n, const void *packed, int nr, const uint8_t *x,               \
                            size_t x_stride, int nc, float *y, size_t y_stride) {                  \
        gemm(&ft_##type, n, packed, nr, x, x_stride, nc, y, y_stride);                             \
    }                                                                                              \
    DEFINE_FLOAT_KERNEL(QK_LEVEL, LEVEL_NAME, type, row_bytes, to_float, gemm_##type, ct)

/* Batches (2 or more tokens) take tinyBLAS's order, single tokens vec_dot's, as ggml-cpu. */
FLOAT_KERNEL(f32, LANES, fma_f32, CT, xf32_row_bytes, xf32_to_float)
FLOAT_KERNEL(f16, LANES, fma_f16, CT, xf32_row_bytes, xf32_to_float)
FLOAT_KERNEL(bf16, 2 * LANES, dpbf16, 2, xhalf_row_bytes, xbf16_to_float)
