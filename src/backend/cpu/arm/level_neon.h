/* level_neon.h: what differs between the three AArch64 builds of the integer kernel files
 * (plain NEON, +dotprod, +dotprod+i8mm): their names and the byte dot-product primitives.
 * qkernels_block32_dotprod.c / qkernels_block32_i8mm.c (and the k-quant pair) define
 * OX_NEON_DOTPROD or OX_NEON_I8MM and include the *_neon.c source; everything else is the same
 * code. Also the small helpers both files share. */
#ifndef OX_BACKEND_CPU_ARM_LEVEL_NEON_H
#define OX_BACKEND_CPU_ARM_LEVEL_NEON_H

#include <arm_neon.h>
#include <stddef.h>
#include <string.h>

#if defined(OX_NEON_I8MM)
enum { DOTPROD = 1, I8MM = 1 };
#define QK_LEVEL   neon_i8mm
#define LEVEL_NAME "neon-i8mm"
#elif defined(OX_NEON_DOTPROD)
enum { DOTPROD = 1, I8MM = 0 };
#define QK_LEVEL   neon_dotprod
#define LEVEL_NAME "neon-dotprod"
#else
enum { DOTPROD = 0, I8MM = 0 };
#define QK_LEVEL   neon
#define LEVEL_NAME "neon"
#endif

#define ALWAYS_INLINE __attribute__((always_inline))

#if defined(OX_NEON_DOTPROD) || defined(OX_NEON_I8MM)
/* acc[i] += a[4i..4i+3] . b[4i..4i+3] (SDOT). */
static inline ALWAYS_INLINE int32x4_t dot4(int32x4_t acc, int8x16_t a, int8x16_t b) {
    return vdotq_s32(acc, a, b);
}
/* acc += a0 . b0 + a1 . b1, summed in some grouping of lanes (only the lane total counts). */
static inline ALWAYS_INLINE int32x4_t dot_pair(int32x4_t acc, int8x16_t a0, int8x16_t b0,
                                               int8x16_t a1, int8x16_t b1) {
    return vdotq_s32(vdotq_s32(acc, a0, b0), a1, b1);
}
/* acc[i] += w[4i..4i+3] . x[4 lane..4 lane+3]: 4 rows of 4 bytes against one chunk of x. */
#define dot_lane(acc, w, x, lane) vdotq_laneq_s32(acc, w, x, lane)
#else
/* Without SDOT: byte products widened to int16 (|w x| <= 128 * 127, so two of them still fit
 * an int16 lane), then pairwise added into int32 lanes. */
static inline ALWAYS_INLINE int32x4_t dot4(int32x4_t acc, int8x16_t a, int8x16_t b) {
    int16x8_t lo = vmull_s8(vget_low_s8(a), vget_low_s8(b)), hi = vmull_high_s8(a, b);
    return vaddq_s32(acc, vpaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi)));
}
static inline ALWAYS_INLINE int32x4_t dot_pair(int32x4_t acc, int8x16_t a0, int8x16_t b0,
                                               int8x16_t a1, int8x16_t b1) {
    int16x8_t lo =
        vmlal_s8(vmull_s8(vget_low_s8(a0), vget_low_s8(b0)), vget_low_s8(a1), vget_low_s8(b1));
    int16x8_t hi = vmlal_high_s8(vmull_high_s8(a0, b0), a1, b1);
    return vpadalq_s16(vpadalq_s16(acc, lo), hi);
}
#define dot_lane(acc, w, x, lane)                                                                  \
    dot4(acc, w, vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(x), lane)))
#endif

/* The hardware conversion: exact, as fp16_to_fp32, without its branches. */
static inline float f16(uint16_t h) {
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

/* 4 f16 values (consecutive) as floats. */
static inline float32x4_t f16x4(const void *p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)p)));
}

/* ---- what the 16-row batch tiles of both kernel files share ---- */

enum { PACK_NC = 4 }; /* tokens per batch tile */

/* The first nr rows of rows 4 q0 .. 4 (q0 + nq) - 1, token by token, from acc[quad][token]. */
static inline ALWAYS_INLINE void store_quads(float32x4_t acc[4][PACK_NC], int q0, int nq, int nr,
                                             int nc, float *y, size_t y_stride) {
    for (int q = 0; q < nq; q++) {
        int r = 4 * (q0 + q);
        for (int c = 0; c < nc && r < nr; c++) {
            float *yc = y + (size_t)c * y_stride + r;
            if (nr - r >= 4) {
                vst1q_f32(yc, acc[q][c]);
            } else {
                float v[4];
                vst1q_f32(v, acc[q][c]);
                memcpy(yc, v, (size_t)(nr - r) * sizeof *v);
            }
        }
    }
}

/* SMMLA's 2 x 2 [r0 c0, r0 c1, r1 c0, r1 c1] of pairs p0 .. p0 + 3 (8 rows) x token pairs,
 * stored for the rows below nr and the tokens below nc. */
static inline ALWAYS_INLINE void store_pairs(float32x4_t acc[4][PACK_NC / 2], int p0, int nr,
                                             int nc, float *y, size_t y_stride) {
    for (int p = 0; p < 4; p++)
        for (int tp = 0; 2 * tp < nc; tp++) {
            float v[4];
            vst1q_f32(v, acc[p][tp]);
            for (int i = 0; i < 4; i++) {
                int r = 2 * (p0 + p) + i / 2, c = 2 * tp + i % 2;
                if (r < nr && c < nc)
                    y[(size_t)c * y_stride + r] = v[i];
            }
        }
}

/* [v0, v0, v1, v1]: the per-row factors of a row pair against a token pair (SMMLA's 2 x 2). */
static inline float32x4_t dup_pairs(float32x2_t v) {
    return vzip1q_f32(vcombine_f32(v, v), vcombine_f32(v, v));
}

#endif
