/* qkernels_block32_neon.c: matmul kernels for the 32-block types on AArch64, the shapes of the x86
 * sets: a row tile for any shape, 16 rows repacked for batches, and q4_0 / q8_0 in the load-time
 * layout (qpack16.c) for single tokens. Weights are unpacked to signed bytes (offsets subtracted;
 * q4_1/q5_1 keep their 0..31 levels and return the min through the activation block sum).
 * Built three times (level_neon.h): plain NEON (byte products widened with SMULL), +dotprod
 * (SDOT; 4 rows x 4 bytes against one 4-byte activation chunk by lane in the 16-row layouts)
 * and +i8mm (batches on SMMLA: 2 rows x 8 bytes by 2 tokens x 8 bytes). */
#include <arm_neon.h>
#include <string.h>

#include "backend/cpu/arm/level_neon.h"
#include "backend/cpu/qkernels.h"
#include "quant/blocks.h"
#include "quant/iq_tables.h"

enum { NR = 4, NC = 4 };

/* 32 signed weights as two halves, the scale, and the term that multiplies the block sum. */
struct wblock {
    int8x16_t lo, hi;
    float d, bias;
};

static inline void nibbles(const uint8_t *qs, uint8x16_t *lo, uint8x16_t *hi) {
    uint8x16_t b = vld1q_u8(qs);
    *lo = vandq_u8(b, vdupq_n_u8(0x0F)); /* elements 0..15 */
    *hi = vshrq_n_u8(b, 4);              /* elements 16..31 */
}

/* Bit j of qh as 0x10 in byte j, for j < 32. */
static inline void fifth_bits(const uint8_t *qh, uint8x16_t *lo, uint8x16_t *hi) {
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    uint32_t bits;
    memcpy(&bits, qh, 4);
    uint8x16_t sel = vld1q_u8(bit);
    uint8x16_t b0 = vcombine_u8(vdup_n_u8((uint8_t)bits), vdup_n_u8((uint8_t)(bits >> 8)));
    uint8x16_t b1 = vcombine_u8(vdup_n_u8((uint8_t)(bits >> 16)), vdup_n_u8((uint8_t)(bits >> 24)));
    *lo = vandq_u8(vtstq_u8(b0, sel), vdupq_n_u8(0x10));
    *hi = vandq_u8(vtstq_u8(b1, sel), vdupq_n_u8(0x10));
}

static inline struct wblock unpack_q4_0(const uint8_t *p) {
    const struct block_q4_0 *b = (const struct block_q4_0 *)p;
    uint8x16_t lo, hi;
    nibbles(b->qs, &lo, &hi);
    int8x16_t eight = vdupq_n_s8(8);
    return (struct wblock){vsubq_s8(vreinterpretq_s8_u8(lo), eight),
                           vsubq_s8(vreinterpretq_s8_u8(hi), eight), f16(b->d), 0.0f};
}
static inline struct wblock unpack_q4_1(const uint8_t *p) {
    const struct block_q4_1 *b = (const struct block_q4_1 *)p;
    uint8x16_t lo, hi;
    nibbles(b->qs, &lo, &hi);
    return (struct wblock){vreinterpretq_s8_u8(lo), vreinterpretq_s8_u8(hi), f16(b->d), f16(b->m)};
}
static inline struct wblock unpack_q5_0(const uint8_t *p) {
    const struct block_q5_0 *b = (const struct block_q5_0 *)p;
    uint8x16_t lo, hi, flo, fhi;
    nibbles(b->qs, &lo, &hi);
    fifth_bits(b->qh, &flo, &fhi);
    int8x16_t sixteen = vdupq_n_s8(16);
    return (struct wblock){vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, flo)), sixteen),
                           vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(hi, fhi)), sixteen), f16(b->d),
                           0.0f};
}
static inline struct wblock unpack_q5_1(const uint8_t *p) {
    const struct block_q5_1 *b = (const struct block_q5_1 *)p;
    uint8x16_t lo, hi, flo, fhi;
    nibbles(b->qs, &lo, &hi);
    fifth_bits(b->qh, &flo, &fhi);
    return (struct wblock){vreinterpretq_s8_u8(vorrq_u8(lo, flo)),
                           vreinterpretq_s8_u8(vorrq_u8(hi, fhi)), f16(b->d), f16(b->m)};
}
static inline struct wblock unpack_q8_0(const uint8_t *p) {
    const struct block_q8_0 *b = (const struct block_q8_0 *)p;
    return (struct wblock){vld1q_s8(b->qs), vld1q_s8(b->qs + 16), f16(b->d), 0.0f};
}
static inline struct wblock unpack_iq4_nl(const uint8_t *p) {
    const struct block_iq4_nl *b = (const struct block_iq4_nl *)p;
    uint8x16_t lo, hi;
    nibbles(b->qs, &lo, &hi);
    int8x16_t levels = vld1q_s8(iq4nl_values);
    return (struct wblock){vqtbl1q_s8(levels, lo), vqtbl1q_s8(levels, hi), f16(b->d), 0.0f};
}

/* ---- the row tile and the batch repack (qkernels_block32_drivers.h) -------------------------
 * A row's block against a token's: both as two halves of 16 bytes. */
struct wtype {
    struct wblock (*unpack)(const uint8_t *);
    size_t block_bytes;
};
/* Only one token (decoding) gets a constant-bound instantiation here: NEON never had the x86
 * levels' full 4 x 4 one, and adding it unmeasured (qemu only) is no part of sharing the loops. */
enum { B32_FULL_TILE = 0 };
#define B32_ACC float32x4_t
#define B32_I   int32x4_t
#define B32_X   int8x16x2_t
static inline ALWAYS_INLINE float32x4_t b32_zero(void) {
    return vdupq_n_f32(0.0f);
}
static inline ALWAYS_INLINE int8x16x2_t b32_x(const struct xq8_32 *xb) {
    return (int8x16x2_t){{vld1q_s8(xb->q), vld1q_s8(xb->q + 16)}};
}
static inline ALWAYS_INLINE int32x4_t b32_dot(const struct wtype *t, const struct wblock *wb,
                                              int8x16x2_t x) {
    (void)t;
    return dot_pair(vdupq_n_s32(0), wb->lo, x.val[0], wb->hi, x.val[1]);
}
static inline ALWAYS_INLINE float32x4_t b32_fma(float32x4_t acc, int32x4_t dot, float scale) {
    return vfmaq_n_f32(acc, vcvtq_f32_s32(dot), scale);
}
static inline ALWAYS_INLINE float b32_sum(float32x4_t acc) {
    return vaddvq_f32(acc);
}

/* ---- 16 rows at a time ----------------------------------------------------------------------
 * The scratch layout of the batch path (repack16), per block of 32: 512 bytes of signed levels,
 * then the 16 rows' scales and biases as floats (PACK_BLOCK bytes). The levels are chunk-major
 * (4 bytes of row 0, of row 1, ... row 15, then the next 4 elements) below i8mm, so one SDOT by
 * lane takes 4 rows against a chunk of one token; with i8mm they are pair-major (rows 2p and
 * 2p + 1, 8 bytes each, per 16 bytes: chunk k of pair p at 64 p + 16 k), SMMLA's operand. The
 * load-time layout (qpack16.c) is chunk-major too, so single tokens read it in place. */
enum { PACK_BLOCK = 16 * 32 + 16 * 8, PACK_D = 512, PACK_BIAS = 576, B32_PAIR_MAJOR = I8MM };

/* The repack's hooks: signed levels in element order; nothing else to add. */
static inline ALWAYS_INLINE void b32_store_levels(uint8_t row[32], const struct wblock *wb) {
    vst1q_s8((int8_t *)row, wb->lo), vst1q_s8((int8_t *)row + 16, wb->hi);
}
static inline ALWAYS_INLINE void b32_repacked(const struct wtype *t, uint8_t *out) {
    (void)t, (void)out;
}

#include "backend/cpu/qkernels_block32_drivers.h"

/* Where a chunk-major layout keeps chunk k (elements 4k..4k+3) of rows 4q..4q+3, and their
 * factors (the bias multiplies the activation block sum). */
struct layout {
    int8x16_t (*chunk)(const uint8_t *blk, int k, int q);
    void (*factors)(const uint8_t *blk, int q, float32x4_t *d, float32x4_t *bias);
    size_t block_bytes;
};

static inline int8x16_t chunk_scratch(const uint8_t *blk, int k, int q) {
    return vld1q_s8((const int8_t *)blk + 64 * k + 16 * q);
}
static inline void factors_scratch(const uint8_t *blk, int q, float32x4_t *d, float32x4_t *bias) {
    *d = vld1q_f32((const float *)(blk + PACK_D) + 4 * q);
    *bias = vld1q_f32((const float *)(blk + PACK_BIAS) + 4 * q);
}

/* q4_0's load-time layout: chunk k < 4 in the low nibbles of stored chunk k, k >= 4 in the high
 * nibbles of chunk k - 4; levels 0..15, the offset 8 returns through the activation sums. */
static inline int8x16_t chunk_g4(const uint8_t *blk, int k, int q) {
    uint8x16_t v = vld1q_u8(blk + 32 + 64 * (k & 3) + 16 * q);
    return vreinterpretq_s8_u8(k < 4 ? vandq_u8(v, vdupq_n_u8(0x0F)) : vshrq_n_u8(v, 4));
}
static inline void factors_g4(const uint8_t *blk, int q, float32x4_t *d, float32x4_t *bias) {
    *d = f16x4(blk + 8 * q);
    *bias = vmulq_n_f32(*d, -8.0f);
}

/* q5_0's: q4_0's nibbles with the chunk's fifth bits, 16 for these 4 rows (bit i for byte i)
 * spread to 0x10 per byte. */
static inline int8x16_t chunk_g5(const uint8_t *blk, int k, int q) {
    uint16_t bits;
    memcpy(&bits, blk + QPACK16_Q5_0_BITS + 8 * k + 2 * q, 2);
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    uint8x16_t spread = vcombine_u8(vdup_n_u8((uint8_t)bits), vdup_n_u8((uint8_t)(bits >> 8)));
    uint8x16_t fifth = vandq_u8(vtstq_u8(spread, vld1q_u8(bit)), vdupq_n_u8(0x10));
    return vorrq_s8(chunk_g4(blk, k, q), vreinterpretq_s8_u8(fifth));
}
static inline void factors_g5(const uint8_t *blk, int q, float32x4_t *d, float32x4_t *bias) {
    *d = f16x4(blk + 8 * q);
    *bias = vmulq_n_f32(*d, -16.0f);
}

static inline int8x16_t chunk_g8(const uint8_t *blk, int k, int q) {
    return vld1q_s8((const int8_t *)blk + 32 + 64 * k + 16 * q);
}
static inline void factors_g8(const uint8_t *blk, int q, float32x4_t *d, float32x4_t *bias) {
    *d = f16x4(blk + 8 * q);
    *bias = vdupq_n_f32(0.0f);
}

static const struct layout g4_layout = {chunk_g4, factors_g4, QPACK16_Q4_0_BLOCK};
static const struct layout g5_layout = {chunk_g5, factors_g5, QPACK16_Q5_0_BLOCK};
static const struct layout g8_layout = {chunk_g8, factors_g8, QPACK16_Q8_0_BLOCK};

/* The 8 chunks of a block for 4 rows against one token's 32 activations (x0: chunks 0..3,
 * x1: 4..7), by lane: the lane numbers must be constants. */
static inline ALWAYS_INLINE int32x4_t dot_chunks(const int8x16_t w[8], int8x16_t x0, int8x16_t x1) {
    int32x4_t d = vdupq_n_s32(0);
    d = dot_lane(d, w[0], x0, 0), d = dot_lane(d, w[1], x0, 1);
    d = dot_lane(d, w[2], x0, 2), d = dot_lane(d, w[3], x0, 3);
    d = dot_lane(d, w[4], x1, 0), d = dot_lane(d, w[5], x1, 1);
    d = dot_lane(d, w[6], x1, 2), d = dot_lane(d, w[7], x1, 3);
    return d;
}

/* Rows 4 q0 .. 4 (q0 + nq) - 1 (nq quads of 4) x nc tokens over every block of a chunk-major
 * layout; nq and nc are constants where it matters, so the accumulators stay in registers. */
static inline ALWAYS_INLINE void quads(const struct layout *l, int64_t n, const uint8_t *packed,
                                       int q0, int nq, int nr, const uint8_t *x, size_t x_stride,
                                       int nc, float *y, size_t y_stride) {
    float32x4_t acc[4][PACK_NC];
#pragma GCC unroll 16
    for (int q = 0; q < nq; q++)
#pragma GCC unroll 16
        for (int c = 0; c < nc; c++)
            acc[q][c] = vdupq_n_f32(0.0f);
    const uint8_t *blk = packed;
    for (int64_t b = 0; b < n / 32; b++, blk += l->block_bytes) {
        const struct xq8_32 *xb[PACK_NC] = {NULL};
        int8x16_t x0[PACK_NC], x1[PACK_NC];
#pragma GCC unroll 16
        for (int c = 0; c < nc; c++) {
            xb[c] = (const struct xq8_32 *)(x + (size_t)c * x_stride) + b;
            x0[c] = vld1q_s8(xb[c]->q), x1[c] = vld1q_s8(xb[c]->q + 16);
        }
#pragma GCC unroll 16
        for (int q = 0; q < nq; q++) {
            int8x16_t w[8];
#pragma GCC unroll 16
            for (int k = 0; k < 8; k++)
                w[k] = l->chunk(blk, k, q0 + q);
            float32x4_t d, bias;
            l->factors(blk, q0 + q, &d, &bias);
#pragma GCC unroll 16
            for (int c = 0; c < nc; c++) {
                int32x4_t dot = dot_chunks(w, x0[c], x1[c]);
                acc[q][c] = vfmaq_f32(acc[q][c], vcvtq_f32_s32(dot), vmulq_n_f32(d, xb[c]->d));
                acc[q][c] = vfmaq_n_f32(acc[q][c], bias, xb[c]->s);
            }
        }
    }
    store_quads(acc, q0, nq, nr, nc, y, y_stride);
}

/* 16 rows (nr of them real) x up to PACK_NC tokens in quads of 4 (qkernels_block32_drivers.h). */
static inline ALWAYS_INLINE void rows16(const struct layout *l, int64_t n, const void *packed,
                                        int nr, const uint8_t *x, size_t x_stride, int nc, float *y,
                                        size_t y_stride) {
    B32_ROWS16_BODY(4, quads, l);
}

#if defined(OX_NEON_I8MM)
/* Rows 2 p0 .. 2 p0 + 7 x up to PACK_NC tokens (ntp pairs, the last one's second token a copy
 * of its first when nc is odd). Per block and pair of tokens, the 8-byte chunks of both tokens
 * side by side, then 4 SMMLA per pair of rows. */
static inline ALWAYS_INLINE void pairs(int64_t n, const uint8_t *packed, int p0, int nr,
                                       const uint8_t *x, size_t x_stride, int nc, int ntp, float *y,
                                       size_t y_stride) {
    float32x4_t acc[4][PACK_NC / 2];
#pragma GCC unroll 16
    for (int p = 0; p < 4; p++)
#pragma GCC unroll 16
        for (int tp = 0; tp < ntp; tp++)
            acc[p][tp] = vdupq_n_f32(0.0f);
    const uint8_t *blk = packed;
    for (int64_t b = 0; b < n / 32; b++, blk += PACK_BLOCK) {
        int8x16_t xi[PACK_NC / 2][4];
        float32x4_t xd[PACK_NC / 2], xs[PACK_NC / 2];
#pragma GCC unroll 16
        for (int tp = 0; tp < ntp; tp++) {
            int c1 = 2 * tp + 1 < nc ? 2 * tp + 1 : 2 * tp;
            const struct xq8_32 *a = (const struct xq8_32 *)(x + (size_t)(2 * tp) * x_stride) + b;
            const struct xq8_32 *e = (const struct xq8_32 *)(x + (size_t)c1 * x_stride) + b;
#pragma GCC unroll 16
            for (int k = 0; k < 4; k++)
                xi[tp][k] = vcombine_s8(vld1_s8(a->q + 8 * k), vld1_s8(e->q + 8 * k));
            float32x2_t d2 = vset_lane_f32(e->d, vdup_n_f32(a->d), 1);
            float32x2_t s2 = vset_lane_f32(e->s, vdup_n_f32(a->s), 1);
            xd[tp] = vcombine_f32(d2, d2), xs[tp] = vcombine_f32(s2, s2);
        }
#pragma GCC unroll 16
        for (int p = 0; p < 4; p++) {
            const uint8_t *wp = blk + 64 * (p0 + p);
            int8x16_t w[4];
#pragma GCC unroll 16
            for (int k = 0; k < 4; k++)
                w[k] = vld1q_s8((const int8_t *)wp + 16 * k);
            float32x4_t d = dup_pairs(vld1_f32((const float *)(blk + PACK_D) + 2 * (p0 + p)));
            float32x4_t bias = dup_pairs(vld1_f32((const float *)(blk + PACK_BIAS) + 2 * (p0 + p)));
#pragma GCC unroll 16
            for (int tp = 0; tp < ntp; tp++) {
                int32x4_t dot = vdupq_n_s32(0);
#pragma GCC unroll 16
                for (int k = 0; k < 4; k++)
                    dot = vmmlaq_s32(dot, w[k], xi[tp][k]);
                acc[p][tp] = vfmaq_f32(acc[p][tp], vcvtq_f32_s32(dot), vmulq_f32(d, xd[tp]));
                acc[p][tp] = vfmaq_f32(acc[p][tp], bias, xs[tp]);
            }
        }
    }
    store_pairs(acc, p0, nr, nc, y, y_stride);
}

static void tile16_scratch(int64_t n, const void *packed, int nr, const uint8_t *x, size_t x_stride,
                           int nc, float *y, size_t y_stride) {
    for (int p0 = 0; p0 < 8 && 2 * p0 < nr; p0 += 4) {
        if (nc > 2)
            pairs(n, packed, p0, nr, x, x_stride, nc, 2, y, y_stride);
        else
            pairs(n, packed, p0, nr, x, x_stride, nc, 1, y, y_stride);
    }
}
#else
static const struct layout scratch_layout = {chunk_scratch, factors_scratch, PACK_BLOCK};

static void tile16_scratch(int64_t n, const void *packed, int nr, const uint8_t *x, size_t x_stride,
                           int nc, float *y, size_t y_stride) {
    rows16(&scratch_layout, n, packed, nr, x, x_stride, nc, y, y_stride);
}
#endif

/* Each type's struct wtype, row tile and repack (qkernels_block32_drivers.h). */
B32_DEFINE_ROWS(q4_0, )
B32_DEFINE_ROWS(q4_1, )
B32_DEFINE_ROWS(q5_0, )
B32_DEFINE_ROWS(q5_1, )
B32_DEFINE_ROWS(q8_0, )
B32_DEFINE_ROWS(iq4_nl, )

/* q4_0, q5_0 and q8_0 in the load-time layout: single tokens straight from it (chunk-major at
 * every level), batches through the scratch layout it unpacks to. */
#define DEFINE_GROUP(type, layout)                                                                 \
    static void gemv16_##type(int64_t n, const void *group, const uint8_t *x, size_t x_stride,     \
                              int nc, float *y, size_t y_stride) {                                 \
        rows16(&layout, n, group, 16, x, x_stride, nc, y, y_stride);                               \
    }                                                                                              \
    static void unpack16_##type(int64_t n, const void *group, void *dst) {                         \
        const uint8_t *blk = group;                                                                \
        uint8_t *out = dst;                                                                        \
        for (int64_t b = 0; b < n / 32; b++, blk += layout.block_bytes, out += PACK_BLOCK) {       \
            uint8_t rows[16][32];                                                                  \
            for (int q = 0; q < 4; q++) {                                                          \
                for (int k = 0; k < 8; k++) {                                                      \
                    uint8_t v[16];                                                                 \
                    vst1q_s8((int8_t *)v, layout.chunk(blk, k, q));                                \
                    for (int r = 0; r < 4; r++)                                                    \
                        memcpy(rows[4 * q + r] + 4 * k, v + 4 * r, 4);                             \
                }                                                                                  \
                float32x4_t dq, bq;                                                                \
                layout.factors(blk, q, &dq, &bq);                                                  \
                vst1q_f32((float *)(out + PACK_D) + 4 * q, dq);                                    \
                vst1q_f32((float *)(out + PACK_BIAS) + 4 * q, bq);                                 \
            }                                                                                      \
            b32_scratch_levels((const uint8_t(*)[32])rows, out);                                   \
        }                                                                                          \
    }

DEFINE_GROUP(q4_0, g4_layout)
DEFINE_GROUP(q5_0, g5_layout)
DEFINE_GROUP(q8_0, g8_layout)

/* The kernels of this level's table (qkernels.c); q4_1 and q5_1 meet activations as ggml's q8_1
 * (their min term reads its f16 sum). */
DEFINE_BLOCK32_KERNEL(QK_LEVEL, LEVEL_NAME, q4_0, xq8_32_quantize_neon, tile16_scratch,
                      QPACK16_LAYOUT(q4_0))
DEFINE_BLOCK32_KERNEL(QK_LEVEL, LEVEL_NAME, q4_1, xq8_1_quantize_neon, tile16_scratch, )
DEFINE_BLOCK32_KERNEL(QK_LEVEL, LEVEL_NAME, q5_0, xq8_32_quantize_neon, tile16_scratch,
                      QPACK16_LAYOUT(q5_0))
DEFINE_BLOCK32_KERNEL(QK_LEVEL, LEVEL_NAME, q5_1, xq8_1_quantize_neon, tile16_scratch, )
DEFINE_BLOCK32_KERNEL(QK_LEVEL, LEVEL_NAME, q8_0, xq8_32_quantize_neon, tile16_scratch,
                      QPACK16_LAYOUT(q8_0))
DEFINE_BLOCK32_KERNEL(QK_LEVEL, LEVEL_NAME, iq4_nl, xq8_32_quantize_neon, tile16_scratch, )
