/* qkernels_block32_avx2.c: matmul kernels for the 32-block types on x86 CPUs with AVX2, the shapes
 * of the AVX-512 set on 8-lane registers: a row tile for any shape, 16 rows repacked chunk-major
 * for batches, and q4_0 / q8_0 in the load-time layout (qpack16.c) for single tokens. Built a
 * second time as qkernels_block32_avx2vnni.c, where VPDPBUSD (AVX-VNNI) takes the byte products.
 *
 * Without VNNI the byte products go through VPMADDUBSW (unsigned x signed, pairs summed with
 * saturation to int16). Unsigned levels below 16 (q4) leave room to sum 8 chunks of 4 in int16
 * (16 * 15 * 127 < 2^15), below 32 (q5) 4 chunks; signed weights (q8_0, iq4_nl) take |w| times x
 * with w's sign, one chunk at a time. With VNNI every type is unsigned (+128 where signed) and
 * the offsets return through the activation block sums, as on AVX-512. */
#include <immintrin.h>
#include <string.h>

#include "backend/cpu/qkernels.h"
#include "backend/cpu/x86/simd_x86.h"
#include "quant/blocks.h"
#include "quant/iq_tables.h"

#include "backend/cpu/x86/level_avx2.h"

enum { NR = 4, NC = 4, PACK_NC = 4 };

/* 32 weights, the scale, and the term that multiplies the activation sum (-offset * d, or the
 * block's min). */
struct wblock {
    __m256i q;
    float d, bias;
};

/* A type: its unpacker and block size, and how its weights meet the primitives: signed levels
 * (|w| and x with w's sign) and how many chunks of 4 may share one int16 partial sum. VNNI: all
 * unsigned, int32 sums. */
struct wtype {
    struct wblock (*unpack)(const uint8_t *);
    size_t block_bytes;
    int sign, depth;
};
#define WTYPE_SIGNED .sign = !VNNI, .depth = VNNI ? 8 : 1
#define WTYPE_Q4     .sign = 0, .depth = 8
#define WTYPE_Q5     .sign = 0, .depth = VNNI ? 8 : 4

static inline __m256i nibbles(const uint8_t *qs) {
    __m128i b = _mm_loadu_si128((const __m128i *)qs);
    __m128i lo = _mm_and_si128(b, _mm_set1_epi8(0x0F));
    __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(0x0F));
    return _mm256_set_m128i(hi, lo);
}

/* Bit j of qh as 0x10 in byte j. */
static inline __m256i fifth_bits(const uint8_t *qh) {
    uint32_t bits;
    memcpy(&bits, qh, 4);
    __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32((int)bits),
        _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
    __m256i mask = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, mask), mask);
    return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

/* Signed levels as the level stores them: as they are, or + 128 (VNNI, unsigned). */
static inline __m256i signed_levels(__m256i q) {
    return VNNI ? _mm256_xor_si256(q, _mm256_set1_epi8((char)0x80)) : q;
}

static inline struct wblock unpack_q4_0(const uint8_t *p) {
    const struct block_q4_0 *b = (const struct block_q4_0 *)p;
    float d = f16(b->d);
    return (struct wblock){nibbles(b->qs), d, -8.0f * d};
}
static inline struct wblock unpack_q4_1(const uint8_t *p) {
    const struct block_q4_1 *b = (const struct block_q4_1 *)p;
    return (struct wblock){nibbles(b->qs), f16(b->d), f16(b->m)};
}
static inline struct wblock unpack_q5_0(const uint8_t *p) {
    const struct block_q5_0 *b = (const struct block_q5_0 *)p;
    float d = f16(b->d);
    return (struct wblock){_mm256_or_si256(nibbles(b->qs), fifth_bits(b->qh)), d, -16.0f * d};
}
static inline struct wblock unpack_q5_1(const uint8_t *p) {
    const struct block_q5_1 *b = (const struct block_q5_1 *)p;
    return (struct wblock){_mm256_or_si256(nibbles(b->qs), fifth_bits(b->qh)), f16(b->d),
                           f16(b->m)};
}
static inline struct wblock unpack_q8_0(const uint8_t *p) {
    const struct block_q8_0 *b = (const struct block_q8_0 *)p;
    float d = f16(b->d);
    return (struct wblock){signed_levels(_mm256_loadu_si256((const __m256i *)b->qs)), d,
                           VNNI ? -128.0f * d : 0.0f};
}
static inline struct wblock unpack_iq4_nl(const uint8_t *p) {
    const struct block_iq4_nl *b = (const struct block_iq4_nl *)p;
    __m256i levels = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)iq4nl_values));
    float d = f16(b->d);
    return (struct wblock){signed_levels(_mm256_shuffle_epi8(levels, nibbles(b->qs))), d,
                           VNNI ? -128.0f * d : 0.0f};
}

/* The int32 sums of w . x over a block's 8 chunks of 4 bytes, for 8 rows (w: one chunk per
 * call of chunk()) or one row (w: 32 bytes at once); x holds the chunk's activation bytes.
 * What depends on w alone is taken once per chunk of weights (chunk_of), however many tokens
 * meet it: for signed levels |w| (wabs) and the mask of w's negative bytes (neg), which gives x
 * w's sign by an XOR and a subtraction. Those two run on any vector ALU, where VPSIGNB competes
 * with VPMADDUBSW and VPMADDWD for the two multiply pipes on Zen.
 *
 * The XOR alone gives -x - 1 where w < 0, so |w| (-x - 1) = w x - |w|: the products then sum to
 * w . x less the sum of |w| over w's negative levels, a term of the weights alone. Layouts that
 * hold it (corrections) start each block's sum there and skip the subtraction, one of the five
 * vector operations a chunk takes per token. The pairs stay clear of saturation: |w| <= 128 and
 * -x - 1 >= -128, so no pair sum falls below -32768. */
struct wchunk {
    __m256i w, wabs, neg;
};
static inline __attribute__((always_inline)) struct wchunk chunk_of(const struct wtype *t,
                                                                    __m256i w) {
    struct wchunk c = {w, w, w};
    if (t->sign)
        c.wabs = _mm256_sign_epi8(w, w), c.neg = _mm256_cmpgt_epi8(_mm256_setzero_si256(), w);
    return c;
}
static inline __attribute__((always_inline)) __m256i
chunk_products(const struct wtype *t, int corrected, __m256i part, struct wchunk c, __m256i x) {
    if (!t->sign)
        return accumulate(part, c.w, x);
    __m256i flipped = _mm256_xor_si256(x, c.neg); /* where w = 0, |w| = 0 drops it */
    return accumulate(part, c.wabs, corrected ? flipped : _mm256_sub_epi8(flipped, c.neg));
}

/* ---- the row tile and the batch repack (qkernels_block32_drivers.h) ---------------------- */

enum { B32_FULL_TILE = 1, B32_PAIR_MAJOR = 0 };
#define B32_ACC __m256
#define B32_I   __m256i
#define B32_X   __m256i
static inline __attribute__((always_inline)) __m256 b32_zero(void) {
    return _mm256_setzero_ps();
}
static inline __attribute__((always_inline)) __m256i b32_x(const struct xq8_32 *xb) {
    return _mm256_loadu_si256((const __m256i *)xb->q);
}
/* chunk_of's |w| and sign mask depend on the row alone: GCC takes them once per row, not per
 * token. */
static inline __attribute__((always_inline)) __m256i b32_dot(const struct wtype *t,
                                                             const struct wblock *wb, __m256i x) {
    return widen(chunk_products(t, 0, _mm256_setzero_si256(), chunk_of(t, wb->q), x));
}
static inline __attribute__((always_inline)) __m256 b32_fma(__m256 acc, __m256i dot, float scale) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(scale), acc);
}
static inline __attribute__((always_inline)) float b32_sum(__m256 acc) {
    return hsum(acc);
}

/* ---- 16 rows at a time: the batch scratch layout and the load-time layout ------------------
 * Both hold, per block, each chunk of 4 elements for 16 rows (64 bytes: rows 0..7, then 8..15),
 * so one broadcast of 4 activation bytes meets 8 rows in one product. A layout says where a
 * chunk and the factors of 8 rows are, and whether it holds the corrections of signed levels
 * (chunk_products). Scratch (repack16): 8 chunks of levels as the level stores them, then 16
 * scales and 16 biases as floats (PACK_BLOCK bytes); signed levels without VNNI have no bias, and
 * their corrections take its place, as int32. */
enum { PACK_BLOCK = 16 * 32 + 16 * 8 };

struct layout {
    __m256i (*chunk)(const uint8_t *blk, int k, int half);
    void (*factors)(const uint8_t *blk, int half, __m256 *d, __m256 *bias);
    __m256i (*corrections)(const uint8_t *blk, int half);
    size_t block_bytes;
};

static inline __m256i chunk_scratch(const uint8_t *blk, int k, int half) {
    return _mm256_loadu_si256((const __m256i *)(blk + 64 * k + 32 * half));
}
static inline void factors_scratch(const uint8_t *blk, int half, __m256 *d, __m256 *bias) {
    *d = _mm256_loadu_ps((const float *)(blk + 512) + 8 * half);
    *bias = _mm256_loadu_ps((const float *)(blk + 576) + 8 * half);
}
static inline __m256i corrections_scratch(const uint8_t *blk, int half) {
    return _mm256_loadu_si256((const __m256i *)(blk + 576 + 32 * half));
}

/* A scratch block's corrections: per row the sum of |w| over its negative levels. */
static void store_corrections(uint8_t *blk) {
    for (int half = 0; half < 2; half++) {
        __m256i sum = _mm256_setzero_si256();
        for (int k = 0; k < 8; k++) {
            __m256i neg = _mm256_min_epi8(chunk_scratch(blk, k, half), _mm256_setzero_si256());
            __m256i pairs = _mm256_maddubs_epi16(_mm256_set1_epi8(1), neg);
            sum = _mm256_add_epi32(sum, _mm256_madd_epi16(pairs, _mm256_set1_epi16(-1)));
        }
        _mm256_storeu_si256((__m256i *)(blk + 576 + 32 * half), sum);
    }
}

/* The repack's hooks (qkernels_block32_drivers.h): levels as the level stores them, and signed
 * levels' corrections once a scratch block's levels are in. */
static inline __attribute__((always_inline)) void b32_store_levels(uint8_t row[32],
                                                                   const struct wblock *wb) {
    _mm256_storeu_si256((__m256i *)row, wb->q);
}
static inline __attribute__((always_inline)) void b32_repacked(const struct wtype *t,
                                                               uint8_t *out) {
    if (t->sign)
        store_corrections(out);
}

#include "backend/cpu/qkernels_block32_drivers.h"

/* q4_0's load-time layout: chunk k < 4 in the low nibbles of the bytes of chunk k, k >= 4 in
 * the high nibbles of chunk k - 4; the offset 8 returns through the activation sums. */
static inline __m256i chunk_g4(const uint8_t *blk, int k, int half) {
    __m256i v = _mm256_loadu_si256((const __m256i *)(blk + 32 + 64 * (k & 3) + 32 * half));
    return _mm256_and_si256(k < 4 ? v : _mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F));
}
static inline void factors_g4(const uint8_t *blk, int half, __m256 *d, __m256 *bias) {
    *d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16 * half)));
    *bias = _mm256_mul_ps(*d, _mm256_set1_ps(-8.0f));
}

/* q5_0's: q4_0's nibbles with the chunk's fifth bits, 32 for these 8 rows (bit i for byte i)
 * spread to 0x10 per byte: each byte takes its bit's byte, keeps that bit, compares. */
static inline __m256i chunk_g5(const uint8_t *blk, int k, int half) {
    uint32_t bits;
    memcpy(&bits, blk + QPACK16_Q5_0_BITS + 8 * k + 4 * half, 4);
    const __m256i byte_of = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2,
                                             2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i b = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), byte_of), bit);
    __m256i fifth = _mm256_and_si256(_mm256_cmpeq_epi8(b, bit), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(chunk_g4(blk, k, half), fifth);
}
static inline void factors_g5(const uint8_t *blk, int half, __m256 *d, __m256 *bias) {
    *d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16 * half)));
    *bias = _mm256_mul_ps(*d, _mm256_set1_ps(-16.0f));
}

static inline __m256i chunk_g8(const uint8_t *blk, int k, int half) {
    return signed_levels(_mm256_loadu_si256((const __m256i *)(blk + 32 + 64 * k + 32 * half)));
}
static inline void factors_g8(const uint8_t *blk, int half, __m256 *d, __m256 *bias) {
    *d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16 * half)));
    *bias = _mm256_mul_ps(*d, _mm256_set1_ps(VNNI ? -128.0f : 0.0f));
}

/* The first nr of 16 rows from the sums of halves h0 .. h0 + nh - 1, for nc tokens. */
static inline __attribute__((always_inline)) void store_halves(const __m256 (*acc)[PACK_NC], int h0,
                                                               int nh, int nr, int nc, float *y,
                                                               size_t y_stride) {
    for (int h = 0; h < nh; h++) {
        int keep = nr - 8 * (h0 + h);
        __m256i mask =
            _mm256_cmpgt_epi32(_mm256_set1_epi32(keep), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        for (int c = 0; c < nc && keep > 0; c++) {
            float *yc = y + (size_t)c * y_stride + 8 * (h0 + h);
            if (keep >= 8)
                _mm256_storeu_ps(yc, acc[h][c]);
            else
                _mm256_maskstore_ps(yc, mask, acc[h][c]);
        }
    }
}

/* Rows 8 h0 .. 8 (h0 + nh) - 1 (nh halves of 8) x nc tokens (constants where it matters, so
 * the accumulators stay in registers) over every block; stores the first nr rows of the 16.
 * Single tokens take both halves in one pass, so each cache line of weights streams once. */
static inline __attribute__((always_inline)) void
rows8(const struct layout *l, const struct wtype *t, int64_t n, const uint8_t *packed, int h0,
      int nh, int nr, const uint8_t *x, size_t x_stride, int nc, float *y, size_t y_stride) {
    __m256 acc[2][PACK_NC];
#pragma GCC unroll 8
    for (int h = 0; h < nh; h++)
#pragma GCC unroll 8
        for (int c = 0; c < nc; c++)
            acc[h][c] = _mm256_setzero_ps();
    const int corrected = t->sign && l->corrections;
    const uint8_t *blk = packed;
    for (int64_t b = 0; b < n / 32; b++, blk += l->block_bytes) {
        const struct xq8_32 *xb[PACK_NC];
        __m256i dot[2][PACK_NC];
#pragma GCC unroll 8
        for (int h = 0; h < nh; h++) {
            __m256i start = corrected ? l->corrections(blk, h0 + h) : _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int c = 0; c < nc; c++)
                dot[h][c] = start;
        }
#pragma GCC unroll 8
        for (int c = 0; c < nc; c++)
            xb[c] = (const struct xq8_32 *)(x + (size_t)c * x_stride) + b;
#pragma GCC unroll 8
        for (int k0 = 0; k0 < 8; k0 += t->depth) {
            __m256i part[2][PACK_NC];
#pragma GCC unroll 8
            for (int h = 0; h < nh; h++)
#pragma GCC unroll 8
                for (int c = 0; c < nc; c++)
                    part[h][c] = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int k = k0; k < k0 + t->depth; k++)
#pragma GCC unroll 8
                for (int h = 0; h < nh; h++) {
                    struct wchunk w = chunk_of(t, l->chunk(blk, k, h0 + h));
#pragma GCC unroll 8
                    for (int c = 0; c < nc; c++) {
                        int32_t xi;
                        memcpy(&xi, xb[c]->q + 4 * k, 4);
                        part[h][c] =
                            chunk_products(t, corrected, part[h][c], w, _mm256_set1_epi32(xi));
                        PIN(part[h][c]);
                    }
                }
#pragma GCC unroll 8
            for (int h = 0; h < nh; h++)
#pragma GCC unroll 8
                for (int c = 0; c < nc; c++) {
                    dot[h][c] = _mm256_add_epi32(dot[h][c], widen(part[h][c]));
                    PIN(dot[h][c]);
                }
        }
#pragma GCC unroll 8
        for (int h = 0; h < nh; h++) {
            __m256 d, bias;
            l->factors(blk, h0 + h, &d, &bias);
#pragma GCC unroll 8
            for (int c = 0; c < nc; c++) {
                __m256 scale = _mm256_mul_ps(d, _mm256_set1_ps(xb[c]->d));
                acc[h][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[h][c]), scale, acc[h][c]);
                if (!t->sign) /* signed levels taken as they are have no offset to return */
                    acc[h][c] = _mm256_fmadd_ps(bias, _mm256_set1_ps(xb[c]->s), acc[h][c]);
            }
        }
    }
    store_halves((const __m256(*)[PACK_NC])acc, h0, nh, nr, nc, y, y_stride);
}

/* 16 rows (nr of them real) x up to PACK_NC tokens in halves of 8 (qkernels_block32_drivers.h). */
static inline __attribute__((always_inline)) void
rows16(const struct layout *l, const struct wtype *t, int64_t n, const void *packed, int nr,
       const uint8_t *x, size_t x_stride, int nc, float *y, size_t y_stride) {
    B32_ROWS16_BODY(8, rows8, l, t);
}

static const struct layout scratch_layout = {chunk_scratch, factors_scratch, corrections_scratch,
                                             PACK_BLOCK};
static const struct layout g4_layout = {chunk_g4, factors_g4, NULL, QPACK16_Q4_0_BLOCK};
static const struct layout g5_layout = {chunk_g5, factors_g5, NULL, QPACK16_Q5_0_BLOCK};
static const struct layout g8_layout = {chunk_g8, factors_g8, NULL, QPACK16_Q8_0_BLOCK};

/* Each type's struct wtype, its row tile and repack (qkernels_block32_drivers.h), and its tiles of
 * tokens over the scratch layout. */
#define DEFINE_PACKED(type, wt)                                                                    \
    B32_DEFINE_ROWS(type, wt)                                                                      \
    static void tile16_##type(int64_t n, const void *packed, int nr, const uint8_t *x,             \
                              size_t x_stride, int nc, float *y, size_t y_stride) {                \
        rows16(&scratch_layout, &wt_##type, n, packed, nr, x, x_stride, nc, y, y_stride);          \
    }

DEFINE_PACKED(q4_0, WTYPE_Q4)
DEFINE_PACKED(q4_1, WTYPE_Q4)
DEFINE_PACKED(q5_0, WTYPE_Q5)
DEFINE_PACKED(q5_1, WTYPE_Q5)
DEFINE_PACKED(q8_0, WTYPE_SIGNED)
DEFINE_PACKED(iq4_nl, WTYPE_SIGNED)

/* q4_0, q5_0 and q8_0 in the load-time layout: single tokens straight from it, batches through
 * the scratch layout it unpacks to. */
#define DEFINE_GROUP(type, layout)                                                                 \
    static void gemv16_##type(int64_t n, const void *group, const uint8_t *x, size_t x_stride,     \
                              int nc, float *y, size_t y_stride) {                                 \
        rows16(&layout, &wt_##type, n, group, 16, x, x_stride, nc, y, y_stride);                   \
    }                                                                                              \
    static void unpack16_##type(int64_t n, const void *group, void *dst) {                         \
        const uint8_t *blk = group;                                                                \
        uint8_t *out = dst;                                                                        \
        for (int64_t b = 0; b < n / 32; b++, blk += layout.block_bytes, out += PACK_BLOCK) {       \
            for (int half = 0; half < 2; half++) {                                                 \
                for (int k = 0; k < 8; k++)                                                        \
                    _mm256_storeu_si256((__m256i *)(out + 64 * k + 32 * half),                     \
                                        layout.chunk(blk, k, half));                               \
                __m256 d, bias;                                                                    \
                layout.factors(blk, half, &d, &bias);                                              \
                _mm256_storeu_ps((float *)(out + 512) + 8 * half, d);                              \
                _mm256_storeu_ps((float *)(out + 576) + 8 * half, bias);                           \
            }                                                                                      \
            b32_repacked(&wt_##type, out);                                                         \
        }                                                                                          \
    }

DEFINE_GROUP(q4_0, g4_layout)
DEFINE_GROUP(q5_0, g5_layout)
DEFINE_GROUP(q8_0, g8_layout)

/* The kernels of this level's table (qkernels.c); q4_1 and q5_1 meet activations as ggml's q8_1
 * (their min term reads its f16 sum). */
DEFINE_BLOCK32_KERNEL(QK_LEVEL, LEVEL_NAME, q4_0, xq8_32_quantize_avx2, tile16_q4_0,
                      QPACK16_LAYOUT(q4_0))
DEFINE_BLOCK32_KERNEL(QK_LEVEL, LEVEL_NAME, q4_1, xq8_1_quantize_avx2, tile16_q4_1, )
DEFINE_BLOCK32_KERNEL(QK_LEVEL, LEVEL_NAME, q5_0, xq8_32_quantize_avx2, tile16_q5_0,
                      QPACK16_LAYOUT(q5_0))
DEFINE_BLOCK32_KERNEL(QK_LEVEL, LEVEL_NAME, q5_1, xq8_1_quantize_avx2, tile16_q5_1, )
DEFINE_BLOCK32_KERNEL(QK_LEVEL, LEVEL_NAME, q8_0, xq8_32_quantize_avx2, tile16_q8_0,
                      QPACK16_LAYOUT(q8_0))
DEFINE_BLOCK32_KERNEL(QK_LEVEL, LEVEL_NAME, iq4_nl, xq8_32_quantize_avx2, tile16_iq4_nl, )
