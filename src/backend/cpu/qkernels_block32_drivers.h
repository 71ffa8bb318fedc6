/* qkernels_block32_drivers.h: the loops of the 32-block kernels (q4_0 ... iq4_nl) that no
 * instruction set changes (the row tile and the batch repack), written once for every
 * qkernels_block32_<isa>.c, which includes this after its intrinsics.
 *
 * They are templates: always inlined into each type's kernel with the type's struct wtype, so its
 * unpacker and the ISA's products meet in one function and stay in registers as if written there.
 * The ISA file defines before including:
 *   struct wblock                   an unpacked block: its levels, .d, and .bias (what multiplies
 *                                   the activation block sum: -offset d, or the block's min)
 *   struct wtype                    a type: .unpack (block bytes to struct wblock), .block_bytes,
 *                                   and whatever the ISA's products need to know of it
 *   NR, NC                          the row tile's most rows and tokens
 *   B32_FULL_TILE                   1: a constant-bound instantiation for full NR x NC tiles
 *   B32_ACC, B32_I                  (types) float accumulators of one row and token; the integer
 *                                   lanes of one block's dot product
 *   B32_X                           (type) a token's block of activations as the products take it
 *   b32_zero(), b32_x(xb)
 *   b32_dot(t, wb, x)               the unpacked block wb . x in B32_I lanes
 *   b32_fma(acc, dot, scale)        acc + scale * dot
 *   b32_sum(acc)                    the float sum of an accumulator
 *   PACK_BLOCK                      bytes of a block of 16 rows in the batch scratch layout: the
 *                                   levels (512 bytes), then 16 scales and 16 biases as floats
 *   B32_PAIR_MAJOR                  1: scratch levels pair-major (chunk k, 8 bytes, of rows 2p and
 *                                   2p + 1 at 64 p + 16 k); 0: chunk-major (chunk k, 4 bytes, of
 *                                   row r at 64 k + 4 r)
 *   b32_store_levels(row, wb)       wb's 32 levels, as the scratch layout keeps them, to row
 *   b32_repacked(t, out)            whatever else a scratch block holds, once its levels are in
 *   PACK_NC                         (only with B32_ROWS16_BODY) the batch tiles' most tokens */
#ifndef OX_BACKEND_CPU_QKERNELS_BLOCK32_DRIVERS_H
#define OX_BACKEND_CPU_QKERNELS_BLOCK32_DRIVERS_H

#include <stdint.h>
#include <string.h>

#include "backend/cpu/qmatmul.h"
#include "quant/blocks.h"

/* ---- the row tile: nr rows x nc tokens, each weight block unpacked once per tile ---------- */

static inline __attribute__((always_inline)) void
b32_rows(const struct wtype *t, int64_t n, const uint8_t *w, size_t w_stride, int nr,
         const uint8_t *x, size_t x_stride, int nc, float *y, size_t y_stride) {
    B32_ACC acc[NR][NC];
    float corr[NR][NC];
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < NC; c++)
            acc[r][c] = b32_zero(), corr[r][c] = 0.0f;
    for (int64_t b = 0; b < n / 32; b++) {
        struct wblock wb[NR];
        for (int r = 0; r < nr; r++)
            wb[r] = t->unpack(w + (size_t)r * w_stride + (size_t)b * t->block_bytes);
        for (int c = 0; c < nc; c++) {
            const struct xq8_32 *xb = (const struct xq8_32 *)(x + (size_t)c * x_stride) + b;
            B32_X xv = b32_x(xb);
            for (int r = 0; r < nr; r++) {
                B32_I dot = b32_dot(t, &wb[r], xv);
                acc[r][c] = b32_fma(acc[r][c], dot, wb[r].d * xb->d);
                corr[r][c] += wb[r].bias * xb->s;
            }
        }
    }
    for (int c = 0; c < nc; c++)
        for (int r = 0; r < nr; r++)
            y[(size_t)c * y_stride + (size_t)r] = b32_sum(acc[r][c]) + corr[r][c];
}

/* ---- batches: 16 rows repacked per block into the scratch layout --------------------------- */

/* The levels of 16 rows, each in element order, into the scratch layout's levels. */
static inline void b32_scratch_levels(const uint8_t rows[16][32], uint8_t *out) {
    for (int k = 0; k < 8 && !B32_PAIR_MAJOR; k++)
        for (int r = 0; r < 16; r++)
            memcpy(out + 64 * k + 4 * r, rows[r] + 4 * k, 4);
    for (int p = 0; p < 8 && B32_PAIR_MAJOR; p++)
        for (int k = 0; k < 4; k++) {
            memcpy(out + 64 * p + 16 * k, rows[2 * p] + 8 * k, 8);
            memcpy(out + 64 * p + 16 * k + 8, rows[2 * p + 1] + 8 * k, 8);
        }
}

/* Rows past nr unpack as zero, so the batch tiles need no edge cases. */
static inline __attribute__((always_inline)) void
b32_repack(const struct wtype *t, int64_t n, const uint8_t *w, size_t w_stride, int nr, void *dst) {
    uint8_t *out = dst;
    for (int64_t b = 0; b < n / 32; b++, out += PACK_BLOCK) {
        uint8_t rows[16][32];
        float *d = (float *)(out + 512), *bias = d + 16;
        for (int r = 0; r < 16; r++) {
            struct wblock wb;
            memset(&wb, 0, sizeof wb);
            if (r < nr)
                wb = t->unpack(w + (size_t)r * w_stride + (size_t)b * t->block_bytes);
            b32_store_levels(rows[r], &wb);
            d[r] = wb.d, bias[r] = wb.bias;
        }
        b32_scratch_levels((const uint8_t(*)[32])rows, out);
        b32_repacked(t, out);
    }
}

/* The body (the whole of it: it returns) of a 16-row tile (nr of them real) x up to PACK_NC tokens
 * over passes of `unit` rows per register, pass(args..., n, packed, u0, nu, nr, x, x_stride, nc, y,
 * y_stride) taking units u0 .. u0 + nu - 1: one token over all 16 rows at once (each line of
 * weights streams once), more tokens 8 rows at a time (registers allow no more), with a constant
 * full count of tokens. */
#define B32_ROWS16_BODY(unit, pass, ...)                                                           \
    if (nc == 1) {                                                                                 \
        pass(__VA_ARGS__, n, packed, 0, 16 / (unit), nr, x, x_stride, 1, y, y_stride);             \
        return;                                                                                    \
    }                                                                                              \
    for (int u0 = 0; u0 < 16 / (unit) && u0 * (unit) < nr; u0 += 8 / (unit)) {                     \
        if (nc == PACK_NC)                                                                         \
            pass(__VA_ARGS__, n, packed, u0, 8 / (unit), nr, x, x_stride, PACK_NC, y, y_stride);   \
        else                                                                                       \
            pass(__VA_ARGS__, n, packed, u0, 8 / (unit), nr, x, x_stride, nc, y, y_stride);        \
    }

/* A type's struct wtype wt_<type> (unpack_<type>, its block size, then the ISA's own fields as
 * designated initializers, if any), and its tile_<type> and repack_<type>. The shapes of the row
 * tile that matter get constant bounds, so the accumulators live in registers: one token
 * (decoding), each row streaming alone, which memory serves fastest; with B32_FULL_TILE, full
 * tiles; the edges take the general loop. (A macro, not one more inline function: that level of
 * inlining alone moved GCC 12's register allocation in the AVX-512 tiles.) */
#define B32_DEFINE_ROWS(type, ...)                                                                 \
    static const struct wtype wt_##type = {                                                        \
        .unpack = unpack_##type, .block_bytes = sizeof(struct block_##type), __VA_ARGS__};         \
    static void tile_##type(int64_t n, const uint8_t *w, size_t w_stride, int nr,                  \
                            const uint8_t *x, size_t x_stride, int nc, float *y,                   \
                            size_t y_stride) {                                                     \
        if (nc == 1)                                                                               \
            for (int r = 0; r < nr; r++)                                                           \
                b32_rows(&wt_##type, n, w + (size_t)r * w_stride, w_stride, 1, x, x_stride, 1,     \
                         y + r, y_stride);                                                         \
        else if (B32_FULL_TILE && nr == NR && nc == NC)                                            \
            b32_rows(&wt_##type, n, w, w_stride, NR, x, x_stride, NC, y, y_stride);                \
        else                                                                                       \
            b32_rows(&wt_##type, n, w, w_stride, nr, x, x_stride, nc, y, y_stride);                \
    }                                                                                              \
    static void repack_##type(int64_t n, const uint8_t *w, size_t w_stride, int nr, void *dst) {   \
        b32_repack(&wt_##type, n, w, w_stride, nr, dst);                                           \
    }

#endif
