/* qkernels_kquant_drivers.h: the loops of the k-quant and iq4_xs kernels that no instruction set
 * changes (the row tile, the batch repack, the single-token dispatch), written once for every
 * qkernels_kquant_<isa>.c, which includes this after its intrinsics.
 *
 * They are templates: always inlined into each type's kernel (DEFINE_KQUANT_KERNEL, qkernels.h)
 * with the type's struct ktype, so its decoder and the ISA's products meet in one function and
 * stay in registers as if written there. The ISA file defines before including:
 *   struct kdec, struct ktype   a decoded super-block; a type: .decode, .block_bytes, own fields
 *   NC                          the row tile's most tokens
 *   struct kq_acc               one row's float accumulators for up to NC tokens; it goes in and
 *                               out of the hooks by value, which keeps it in registers (GCC 12
 *                               spilled more of it when a hook took its address)
 *   kq_acc_zero(nc)             the accumulators of tokens 0 .. nc - 1 at zero
 *   kq_block_tokens(t, k, x, x_stride, b, nc, acc)
 *                               acc plus the decoded block k . block b of each token c < nc's
 *                               q8_K row (x + c x_stride), in the ISA's own order over chunks and
 *                               tokens
 *   kq_acc_sum(&acc, c)         token c's dot product from its accumulators
 *   KQ_PACK_BLOCK               bytes of a super-block of 16 rows in the batch scratch layout
 *   struct kq_repack            what a scratch block gathers from its 16 rows before it is laid out
 *   kq_repack_row(t, rp, k, r, out), kq_repack_block(rp, out)
 *                               row r's decoded block into rp or out; rp's rows into out
 *   gemv_<type>_nc, GEMV_NC     (only with KQ_GEMV_BY_NC) the load-time layout's single-token tile
 *                               for a constant token count up to GEMV_NC
 *   rows8, PACK_NC              (only with KQ_TILE16_BY_HALVES) the batch tile of 8 rows */
#ifndef OX_BACKEND_CPU_QKERNELS_KQUANT_DRIVERS_H
#define OX_BACKEND_CPU_QKERNELS_KQUANT_DRIVERS_H

#include <stdint.h>
#include <string.h>

#include "quant/blocks.h"

/* ---- the row tile: nr rows x nc tokens ----------------------------------------------------
 * Rows one at a time, even in generation: a single sequential stream of weights measured about
 * 3x faster from memory than four rows interleaved (AMD EPYC). Each super-block is decoded once
 * and meets every token while it sits in registers; nc is a constant in every instantiation
 * (tile_k), so the token loops unroll and the accumulators stay in registers. */
static inline __attribute__((always_inline)) void kq_rows(const struct ktype *t, int64_t n,
                                                          const uint8_t *w, size_t w_stride, int nr,
                                                          const uint8_t *x, size_t x_stride, int nc,
                                                          float *y, size_t y_stride) {
    for (int r = 0; r < nr; r++, w += w_stride) {
        struct kq_acc acc = kq_acc_zero(nc);
        for (int64_t b = 0; b < n / QK_SUPER; b++) {
            struct kdec k = t->decode(w + (size_t)b * t->block_bytes);
            acc = kq_block_tokens(t, &k, x, x_stride, b, nc, acc);
        }
#pragma GCC unroll 16
        for (int c = 0; c < nc; c++)
            y[(size_t)c * y_stride + (size_t)r] = kq_acc_sum(&acc, c);
    }
}

#define KQ_ROWS_CASE(nc_)                                                                          \
    case nc_: kq_rows(t, n, w, w_stride, nr, x, x_stride, nc_, y, y_stride); break;

/* One instantiation per token count (qmatmul.c passes at most NC). */
static inline __attribute__((always_inline)) void tile_k(const struct ktype *t, int64_t n,
                                                         const uint8_t *w, size_t w_stride, int nr,
                                                         const uint8_t *x, size_t x_stride, int nc,
                                                         float *y, size_t y_stride) {
    _Static_assert(NC == 4, "tile_k instantiates 1 .. 4 tokens");
    switch (nc) {
        KQ_ROWS_CASE(1)
        KQ_ROWS_CASE(2)
        KQ_ROWS_CASE(3)
    default: kq_rows(t, n, w, w_stride, nr, x, x_stride, NC, y, y_stride);
    }
}

/* ---- batches: 16 rows repacked per super-block into the ISA's scratch layout ----------------
 * Rows past nr decode as zero, so the batch tiles need no edge cases. */
static inline __attribute__((always_inline)) void repack_rows(const struct ktype *t, int64_t n,
                                                              const uint8_t *w, size_t w_stride,
                                                              int nr, void *dst) {
    uint8_t *out = dst;
    for (int64_t b = 0; b < n / QK_SUPER; b++, out += KQ_PACK_BLOCK) {
        struct kq_repack rp;
        for (int r = 0; r < 16; r++) {
            struct kdec k; /* rows past nr: zero */
            memset(&k, 0, sizeof k);
            if (r < nr)
                k = t->decode(w + (size_t)r * w_stride + (size_t)b * t->block_bytes);
            kq_repack_row(t, &rp, &k, r, out);
        }
        kq_repack_block(&rp, out);
    }
}

/* tile16_k over a batch tile of 8 rows, rows8(t, n, packed, half, nr, x, x_stride, nc, y,
 * y_stride), for the ISAs whose registers hold 8 rows: each half of the 16 that has rows, with a
 * constant full count of tokens (registers allow no more tokens at once). */
#define KQ_TILE16_BY_HALVES()                                                                      \
    static inline __attribute__((always_inline)) void tile16_k(                                    \
        const struct ktype *t, int64_t n, const void *packed, int nr, const uint8_t *x,            \
        size_t x_stride, int nc, float *y, size_t y_stride) {                                      \
        for (int half = 0; half < 2 && 8 * half < nr; half++) {                                    \
            if (nc == PACK_NC)                                                                     \
                rows8(t, n, packed, half, nr, x, x_stride, PACK_NC, y, y_stride);                  \
            else                                                                                   \
                rows8(t, n, packed, half, nr, x, x_stride, nc, y, y_stride);                       \
        }                                                                                          \
    }

/* ---- single tokens and small batches over the load-time layouts (kpack16.c) ----------------
 * gemv16_<type>: passes of up to GEMV_NC tokens, one instantiation per token count so each loop
 * over tokens unrolls. */
#define KQ_GEMV_BY_NC(type)                                                                        \
    static void gemv16_##type(int64_t n, const void *group, const uint8_t *x, size_t x_stride,     \
                              int nc, float *y, size_t y_stride) {                                 \
        _Static_assert(GEMV_NC == 3 || GEMV_NC == 4, "gemv16 instantiates 1 .. GEMV_NC tokens");   \
        for (int c = 0; c < nc; c += GEMV_NC) {                                                    \
            const uint8_t *xc = x + (size_t)c * x_stride;                                          \
            float *yc = y + (size_t)c * y_stride;                                                  \
            switch (nc - c) {                                                                      \
            case 1: gemv_##type##_nc(n, group, xc, x_stride, 1, yc, y_stride); break;              \
            case 2: gemv_##type##_nc(n, group, xc, x_stride, 2, yc, y_stride); break;              \
            case 3:                                                                                \
                if (GEMV_NC > 3) {                                                                 \
                    gemv_##type##_nc(n, group, xc, x_stride, 3, yc, y_stride);                     \
                    break;                                                                         \
                }                                                                                  \
                __attribute__((fallthrough)); /* 3 is GEMV_NC */                                   \
            default: gemv_##type##_nc(n, group, xc, x_stride, GEMV_NC, yc, y_stride);              \
            }                                                                                      \
        }                                                                                          \
    }

#endif
