/* qkernels_block32_wasm.c: matmul kernels for the 32-block types in WebAssembly SIMD128, the
 * shapes of the x86 and NEON sets: a row tile for any shape, 16 rows repacked for batches, and
 * q4_0 / q5_0 / q8_0 in the load-time layout (qpack16.c) for single tokens. Weights are unpacked
 * to signed bytes (offsets subtracted; q4_1/q5_1 keep their 0..31 levels and return the min
 * through the activation block sum); byte products are widened to 16 bits (level_wasm.h). */
#include <string.h>

#include "backend/cpu/qkernels.h"
#include "backend/cpu/wasm/level_wasm.h"
#include "quant/blocks.h"
#include "quant/iq_tables.h"

enum { NR = 4, NC = 4 };

/* 32 signed weights as two halves, the scale, and the term that multiplies the block sum. */
struct wblock {
    v128_t lo, hi;
    float d, bias;
};

static inline void nibbles(const uint8_t *qs, v128_t *lo, v128_t *hi) {
    v128_t b = wasm_v128_load(qs);
    *lo = wasm_v128_and(b, wasm_i8x16_splat(0x0F)); /* elements 0..15 */
    *hi = wasm_u8x16_shr(b, 4);                     /* elements 16..31 */
}

/* The 16 bits of `bits` as 0x10 in bytes 0..15 (bit j to byte j). */
static inline v128_t bits_to_0x10(uint32_t bits) {
    const v128_t sel = wasm_u8x16_make(1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128);
    v128_t spread = wasm_u64x2_make((bits & 0xFF) * 0x0101010101010101ull,
                                    ((bits >> 8) & 0xFF) * 0x0101010101010101ull);
    v128_t set = wasm_i8x16_ne(wasm_v128_and(spread, sel), wasm_i8x16_splat(0));
    return wasm_v128_and(set, wasm_i8x16_splat(0x10));
}

/* Bit j of qh as 0x10 in byte j, for j < 32. */
static inline void fifth_bits(const uint8_t *qh, v128_t *lo, v128_t *hi) {
    uint32_t bits;
    memcpy(&bits, qh, 4);
    *lo = bits_to_0x10(bits);
    *hi = bits_to_0x10(bits >> 16);
}

static inline struct wblock unpack_q4_0(const uint8_t *p) {
    const struct block_q4_0 *b = (const struct block_q4_0 *)p;
    v128_t lo, hi;
    nibbles(b->qs, &lo, &hi);
    v128_t eight = wasm_i8x16_splat(8);
    return (struct wblock){wasm_i8x16_sub(lo, eight), wasm_i8x16_sub(hi, eight), f16(b->d), 0.0f};
}
static inline struct wblock unpack_q4_1(const uint8_t *p) {
    const struct block_q4_1 *b = (const struct block_q4_1 *)p;
    v128_t lo, hi;
    nibbles(b->qs, &lo, &hi);
    return (struct wblock){lo, hi, f16(b->d), f16(b->m)};
}
static inline struct wblock unpack_q5_0(const uint8_t *p) {
    const struct block_q5_0 *b = (const struct block_q5_0 *)p;
    v128_t lo, hi, flo, fhi;
    nibbles(b->qs, &lo, &hi);
    fifth_bits(b->qh, &flo, &fhi);
    v128_t sixteen = wasm_i8x16_splat(16);
    return (struct wblock){wasm_i8x16_sub(wasm_v128_or(lo, flo), sixteen),
                           wasm_i8x16_sub(wasm_v128_or(hi, fhi), sixteen), f16(b->d), 0.0f};
}
static inline struct wblock unpack_q5_1(const uint8_t *p) {
    const struct block_q5_1 *b = (const struct block_q5_1 *)p;
    v128_t lo, hi, flo, fhi;
    nibbles(b->qs, &lo, &hi);
    fifth_bits(b->qh, &flo, &fhi);
    return (struct wblock){wasm_v128_or(lo, flo), wasm_v128_or(hi, fhi), f16(b->d), f16(b->m)};
}
static inline struct wblock unpack_q8_0(const uint8_t *p) {
    const struct block_q8_0 *b = (const struct block_q8_0 *)p;
    return (struct wblock){wasm_v128_load(b->qs), wasm_v128_load(b->qs + 16), f16(b->d), 0.0f};
}
static inline struct wblock unpack_iq4_nl(const uint8_t *p) {
    const struct block_iq4_nl *b = (const struct block_iq4_nl *)p;
    v128_t lo, hi;
    nibbles(b->qs, &lo, &hi);
    v128_t levels = wasm_v128_load(iq4nl_values);
    return (struct wblock){wasm_i8x16_swizzle(levels, lo), wasm_i8x16_swizzle(levels, hi),
                           f16(b->d), 0.0f};
}

/* ---- the row tile and the batch repack (qkernels_block32_drivers.h) -------------------------
 * A row's block against a token's: both as two halves of 16 bytes. */
struct wtype {
    struct wblock (*unpack)(const uint8_t *);
    size_t block_bytes;
};
enum { B32_FULL_TILE = 0 };
struct x32 {
    v128_t lo, hi;
};
#define B32_ACC v128_t
#define B32_I   v128_t
#define B32_X   struct x32
static inline ALWAYS_INLINE v128_t b32_zero(void) {
    return wasm_f32x4_splat(0.0f);
}
static inline ALWAYS_INLINE struct x32 b32_x(const struct xq8_32 *xb) {
    return (struct x32){wasm_v128_load(xb->q), wasm_v128_load(xb->q + 16)};
}
static inline ALWAYS_INLINE v128_t b32_dot(const struct wtype *t, const struct wblock *wb,
                                           struct x32 x) {
    (void)t;
    return dot_pair(wasm_i32x4_splat(0), wb->lo, x.lo, wb->hi, x.hi);
}
static inline ALWAYS_INLINE v128_t b32_fma(v128_t acc, v128_t dot, float scale) {
    return fmadd(acc, wasm_f32x4_convert_i32x4(dot), wasm_f32x4_splat(scale));
}
static inline ALWAYS_INLINE float b32_sum(v128_t acc) {
    return hsum_f32(acc);
}

/* ---- 16 rows at a time ----------------------------------------------------------------------
 * The scratch layout of the batch path (repack16), per block of 32: 512 bytes of signed levels,
 * chunk-major (4 bytes of row 0, of row 1, ... row 15, then the next 4 elements), then the 16
 * rows' scales and biases as floats (PACK_BLOCK bytes). The load-time layout (qpack16.c) is
 * chunk-major too, so single tokens read it in place. */
enum { PACK_BLOCK = 16 * 32 + 16 * 8, PACK_D = 512, PACK_BIAS = 576, B32_PAIR_MAJOR = 0 };

static inline ALWAYS_INLINE void b32_store_levels(uint8_t row[32], const struct wblock *wb) {
    wasm_v128_store(row, wb->lo), wasm_v128_store(row + 16, wb->hi);
}
static inline ALWAYS_INLINE void b32_repacked(const struct wtype *t, uint8_t *out) {
    (void)t, (void)out;
}

#include "backend/cpu/qkernels_block32_drivers.h"

/* Where a chunk-major layout keeps chunk k (elements 4k..4k+3) of rows 4q..4q+3, and their
 * factors (the bias multiplies the activation block sum). */
struct layout {
    v128_t (*chunk)(const uint8_t *blk, int k, int q);
    void (*factors)(const uint8_t *blk, int q, v128_t *d, v128_t *bias);
    size_t block_bytes;
};

static inline v128_t chunk_scratch(const uint8_t *blk, int k, int q) {
    return wasm_v128_load(blk + 64 * k + 16 * q);
}
static inline void factors_scratch(const uint8_t *blk, int q, v128_t *d, v128_t *bias) {
    *d = wasm_v128_load((const float *)(blk + PACK_D) + 4 * q);
    *bias = wasm_v128_load((const float *)(blk + PACK_BIAS) + 4 * q);
}

/* q4_0's load-time layout: chunk k < 4 in the low nibbles of stored chunk k, k >= 4 in the high
 * nibbles of chunk k - 4; levels 0..15, the offset 8 returns through the activation sums. */
static inline v128_t chunk_g4(const uint8_t *blk, int k, int q) {
    v128_t v = wasm_v128_load(blk + 32 + 64 * (k & 3) + 16 * q);
    return k < 4 ? wasm_v128_and(v, wasm_i8x16_splat(0x0F)) : wasm_u8x16_shr(v, 4);
}
static inline void factors_g4(const uint8_t *blk, int q, v128_t *d, v128_t *bias) {
    *d = f16x4(blk + 8 * q);
    *bias = wasm_f32x4_mul(*d, wasm_f32x4_splat(-8.0f));
}

/* q5_0's: q4_0's nibbles with the chunk's fifth bits, 16 for these 4 rows (bit i for byte i). */
static inline v128_t chunk_g5(const uint8_t *blk, int k, int q) {
    uint16_t bits;
    memcpy(&bits, blk + QPACK16_Q5_0_BITS + 8 * k + 2 * q, 2);
    return wasm_v128_or(chunk_g4(blk, k, q), bits_to_0x10(bits));
}
static inline void factors_g5(const uint8_t *blk, int q, v128_t *d, v128_t *bias) {
    *d = f16x4(blk + 8 * q);
    *bias = wasm_f32x4_mul(*d, wasm_f32x4_splat(-16.0f));
}

static inline v128_t chunk_g8(const uint8_t *blk, int k, int q) {
    return wasm_v128_load(blk + 32 + 64 * k + 16 * q);
}
static inline void factors_g8(const uint8_t *blk, int q, v128_t *d, v128_t *bias) {
    *d = f16x4(blk + 8 * q);
    *bias = wasm_f32x4_splat(0.0f);
}

static const struct layout g4_layout = {chunk_g4, factors_g4, QPACK16_Q4_0_BLOCK};
static const struct layout g5_layout = {chunk_g5, factors_g5, QPACK16_Q5_0_BLOCK};
static const struct layout g8_layout = {chunk_g8, factors_g8, QPACK16_Q8_0_BLOCK};

/* The 8 chunks of a block for 4 rows against one token's 32 activations (x0: chunks 0..3, x1:
 * 4..7): two chunks' 16-bit products are added before widening (each fits twice), and the pair
 * sums are folded to each row's 4-byte groups once at the end. */
static inline ALWAYS_INLINE v128_t dot_chunks(const v128_t w[8], v128_t x0, v128_t x1) {
    v128_t lo = wasm_i32x4_splat(0), hi = wasm_i32x4_splat(0);
#define TWO_CHUNKS(k, x, l0, l1)                                                                   \
    {                                                                                              \
        v128_t a = splat_lane(x, l0), b = splat_lane(x, l1);                                       \
        lo = wasm_i32x4_add(lo, wasm_i32x4_extadd_pairwise_i16x8(                                  \
                                    wasm_i16x8_add(wasm_i16x8_extmul_low_i8x16(w[k], a),           \
                                                   wasm_i16x8_extmul_low_i8x16(w[k + 1], b))));    \
        hi = wasm_i32x4_add(hi, wasm_i32x4_extadd_pairwise_i16x8(                                  \
                                    wasm_i16x8_add(wasm_i16x8_extmul_high_i8x16(w[k], a),          \
                                                   wasm_i16x8_extmul_high_i8x16(w[k + 1], b))));   \
    }
    TWO_CHUNKS(0, x0, 0, 1)
    TWO_CHUNKS(2, x0, 2, 3)
    TWO_CHUNKS(4, x1, 0, 1)
    TWO_CHUNKS(6, x1, 2, 3)
#undef TWO_CHUNKS
    return fold_quads(lo, hi);
}

/* Rows 4 q0 .. 4 (q0 + nq) - 1 (nq quads of 4) x nc tokens over every block of a chunk-major
 * layout; nq and nc are constants where it matters, so the accumulators stay in registers. */
static inline ALWAYS_INLINE void quads(const struct layout *l, int64_t n, const uint8_t *packed,
                                       int q0, int nq, int nr, const uint8_t *x, size_t x_stride,
                                       int nc, float *y, size_t y_stride) {
    v128_t acc[4][PACK_NC];
    for (int q = 0; q < nq; q++)
        for (int c = 0; c < nc; c++)
            acc[q][c] = wasm_f32x4_splat(0.0f);
    const uint8_t *blk = packed;
    for (int64_t b = 0; b < n / 32; b++, blk += l->block_bytes) {
        const struct xq8_32 *xb[PACK_NC] = {NULL};
        v128_t x0[PACK_NC], x1[PACK_NC];
        for (int c = 0; c < nc; c++) {
            xb[c] = (const struct xq8_32 *)(x + (size_t)c * x_stride) + b;
            x0[c] = wasm_v128_load(xb[c]->q), x1[c] = wasm_v128_load(xb[c]->q + 16);
        }
        for (int q = 0; q < nq; q++) {
            v128_t w[8];
            for (int k = 0; k < 8; k++)
                w[k] = l->chunk(blk, k, q0 + q);
            v128_t d, bias;
            l->factors(blk, q0 + q, &d, &bias);
            for (int c = 0; c < nc; c++) {
                v128_t dot = dot_chunks(w, x0[c], x1[c]);
                acc[q][c] = fmadd(acc[q][c], wasm_f32x4_convert_i32x4(dot),
                                  wasm_f32x4_mul(d, wasm_f32x4_splat(xb[c]->d)));
                acc[q][c] = fmadd(acc[q][c], bias, wasm_f32x4_splat(xb[c]->s));
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

static const struct layout scratch_layout = {chunk_scratch, factors_scratch, PACK_BLOCK};

static void tile16_scratch(int64_t n, const void *packed, int nr, const uint8_t *x, size_t x_stride,
                           int nc, float *y, size_t y_stride) {
    rows16(&scratch_layout, n, packed, nr, x, x_stride, nc, y, y_stride);
}

/* Each type's struct wtype, row tile and repack (qkernels_block32_drivers.h). */
B32_DEFINE_ROWS(q4_0, )
B32_DEFINE_ROWS(q4_1, )
B32_DEFINE_ROWS(q5_0, )
B32_DEFINE_ROWS(q5_1, )
B32_DEFINE_ROWS(q8_0, )
B32_DEFINE_ROWS(iq4_nl, )

/* q4_0, q5_0 and q8_0 in the load-time layout: single tokens straight from it, batches through
 * the scratch layout it unpacks to. */
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
                    wasm_v128_store(v, layout.chunk(blk, k, q));                                   \
                    for (int r = 0; r < 4; r++)                                                    \
                        memcpy(rows[4 * q + r] + 4 * k, v + 4 * r, 4);                             \
                }                                                                                  \
                v128_t dq, bq;                                                                     \
                layout.factors(blk, q, &dq, &bq);                                                  \
                wasm_v128_store((float *)(out + PACK_D) + 4 * q, dq);                              \
                wasm_v128_store((float *)(out + PACK_BIAS) + 4 * q, bq);                           \
            }                                                                                      \
            b32_scratch_levels((const uint8_t(*)[32])rows, out);                                   \
        }                                                                                          \
    }

DEFINE_GROUP(q4_0, g4_layout)
DEFINE_GROUP(q5_0, g5_layout)
DEFINE_GROUP(q8_0, g8_layout)

/* q4_1's and q5_1's activations: xq8_32 with s as ggml's q8_1 has it (their min term reads its
 * f16 sum). */
static void xq8_1_quantize(const float *x, void *xq, int64_t n) {
    xq8_32_quantize(x, xq, n);
    xq8_32_sums_as_q8_1(x, xq, n);
}

/* The kernels of this level's table (qkernels.c). */
DEFINE_BLOCK32_KERNEL(QK_LEVEL, LEVEL_NAME, q4_0, xq8_32_quantize, tile16_scratch,
                      QPACK16_LAYOUT(q4_0))
DEFINE_BLOCK32_KERNEL(QK_LEVEL, LEVEL_NAME, q4_1, xq8_1_quantize, tile16_scratch, )
DEFINE_BLOCK32_KERNEL(QK_LEVEL, LEVEL_NAME, q5_0, xq8_32_quantize, tile16_scratch,
                      QPACK16_LAYOUT(q5_0))
DEFINE_BLOCK32_KERNEL(QK_LEVEL, LEVEL_NAME, q5_1, xq8_1_quantize, tile16_scratch, )
DEFINE_BLOCK32_KERNEL(QK_LEVEL, LEVEL_NAME, q8_0, xq8_32_quantize, tile16_scratch,
                      QPACK16_LAYOUT(q8_0))
DEFINE_BLOCK32_KERNEL(QK_LEVEL, LEVEL_NAME, iq4_nl, xq8_32_quantize, tile16_scratch, )
