/* level_wasm.h: the WebAssembly SIMD128 primitives the wasm/ kernel files share: byte dot
 * products (SIMD128 has no 8-bit one: products widened to 16 bits, then summed in pairs), the
 * f16 conversion, horizontal sums and the 16-row tiles' stores. The shapes are NEON's
 * (level_neon.h): both are 128-bit, and the 16-row layouts are chunk-major at every level. */
#ifndef OX_BACKEND_CPU_WASM_LEVEL_WASM_H
#define OX_BACKEND_CPU_WASM_LEVEL_WASM_H

#include <stddef.h>
#include <string.h>
#include <wasm_simd128.h>

#include "core/fp16.h"

#define ALWAYS_INLINE __attribute__((always_inline))
#define QK_LEVEL      wasm_simd
#define LEVEL_NAME    "wasm-simd"

/* Byte products of a and b, pairs of neighbours summed: lane i = a[2i] b[2i] + a[2i+1] b[2i+1]
 * over bytes 0..7 (lo) and 8..15 (hi). |a b| <= 128 * 127, so two products fit 16 bits. */
static inline ALWAYS_INLINE v128_t dot_pairs_lo(v128_t a, v128_t b) {
    return wasm_i32x4_extadd_pairwise_i16x8(wasm_i16x8_extmul_low_i8x16(a, b));
}
static inline ALWAYS_INLINE v128_t dot_pairs_hi(v128_t a, v128_t b) {
    return wasm_i32x4_extadd_pairwise_i16x8(wasm_i16x8_extmul_high_i8x16(a, b));
}

/* acc + a0 . b0 + a1 . b1, summed in some grouping of lanes (only the lane total counts). */
static inline ALWAYS_INLINE v128_t dot_pair(v128_t acc, v128_t a0, v128_t b0, v128_t a1,
                                            v128_t b1) {
    v128_t lo =
        wasm_i16x8_add(wasm_i16x8_extmul_low_i8x16(a0, b0), wasm_i16x8_extmul_low_i8x16(a1, b1));
    v128_t hi =
        wasm_i16x8_add(wasm_i16x8_extmul_high_i8x16(a0, b0), wasm_i16x8_extmul_high_i8x16(a1, b1));
    return wasm_i32x4_add(acc, wasm_i32x4_add(wasm_i32x4_extadd_pairwise_i16x8(lo),
                                              wasm_i32x4_extadd_pairwise_i16x8(hi)));
}

/* The 32-bit lane `lane` of x in every lane. */
#define splat_lane(x, lane) wasm_i32x4_shuffle(x, x, lane, lane, lane, lane)

/* Pair sums (lo: bytes 0..7, hi: 8..15, as dot_pairs_*) folded to sums of 4 bytes: lane i =
 * bytes 4i..4i+3. */
static inline ALWAYS_INLINE v128_t fold_quads(v128_t lo, v128_t hi) {
    return wasm_i32x4_add(wasm_i32x4_shuffle(lo, hi, 0, 2, 4, 6),
                          wasm_i32x4_shuffle(lo, hi, 1, 3, 5, 7));
}

static inline float f16(uint16_t h) {
    return fp16_to_fp32(h);
}

/* 4 f16 values (zero-extended in 32-bit lanes) as floats, exactly: the magnitude's bits moved
 * to a float's places give the value times 2^-112 for normal and subnormal halves alike, so one
 * multiply by 2^112 (exact: a power of two, no overflow) finishes it; infinities and NaNs get
 * the all-ones exponent, then the sign goes back on. */
static inline ALWAYS_INLINE v128_t f16_lanes_to_f32(v128_t h) {
    v128_t mag = wasm_v128_and(h, wasm_i32x4_splat(0x7FFF));
    v128_t f = wasm_f32x4_mul(wasm_i32x4_shl(mag, 13), wasm_f32x4_splat(0x1p112f));
    v128_t special = wasm_i32x4_ge(mag, wasm_i32x4_splat(0x7C00));
    f = wasm_v128_or(f, wasm_v128_and(special, wasm_i32x4_splat(0x7F800000)));
    return wasm_v128_or(f, wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x8000)), 16));
}

/* 4 f16 values (consecutive) as floats. */
static inline ALWAYS_INLINE v128_t f16x4(const void *p) {
    return f16_lanes_to_f32(wasm_u32x4_load16x4(p));
}

static inline ALWAYS_INLINE float hsum_f32(v128_t v) {
    v128_t s = wasm_f32x4_add(v, wasm_i32x4_shuffle(v, v, 2, 3, 0, 1));
    s = wasm_f32x4_add(s, wasm_i32x4_shuffle(s, s, 1, 0, 3, 2));
    return wasm_f32x4_extract_lane(s, 0);
}

static inline ALWAYS_INLINE v128_t fmadd(v128_t acc, v128_t a, v128_t b) {
    return wasm_f32x4_add(acc, wasm_f32x4_mul(a, b));
}

/* ---- what the 16-row batch tiles share ---- */

enum { PACK_NC = 4 }; /* tokens per batch tile */

/* The first nr rows of rows 4 q0 .. 4 (q0 + nq) - 1, token by token, from acc[quad][token]. */
static inline ALWAYS_INLINE void store_quads(v128_t acc[4][PACK_NC], int q0, int nq, int nr, int nc,
                                             float *y, size_t y_stride) {
    for (int q = 0; q < nq; q++) {
        int r = 4 * (q0 + q);
        for (int c = 0; c < nc && r < nr; c++) {
            float *yc = y + (size_t)c * y_stride + r;
            if (nr - r >= 4) {
                wasm_v128_store(yc, acc[q][c]);
            } else {
                float v[4];
                wasm_v128_store(v, acc[q][c]);
                memcpy(yc, v, (size_t)(nr - r) * sizeof *v);
            }
        }
    }
}

#endif
