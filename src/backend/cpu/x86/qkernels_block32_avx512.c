/* qkernels_block32_avx512.c: matmul tiles for AVX-512 (VL, BW, VNNI) CPUs, built with those flags
 * and chosen at runtime. The 32-element block types share one shape: each weight block is unpacked
 * once to 32 unsigned bytes and reused for every token of the tile; VPDPBUSD multiplies them
 * with the signed activation bytes, and the weights' offset or min comes back through the
 * activation block sum (struct xq8_32). */
#include <immintrin.h>
#include <string.h>

#include "backend/cpu/ops_simd.h"
#include "backend/cpu/qkernels.h"
#include "backend/cpu/x86/simd_x86.h"
#include "quant/blocks.h"
#include "quant/iq_tables.h"

enum { NR = 4, NC = 4 }; /* row tile: weight rows x tokens */

/* A weight block as the tile loop needs it: 32 unsigned bytes, the scale, and the bias that
 * multiplies the activation sum (-offset * d, or the block's min). */
struct wblock {
    __m256i u;
    float d, bias;
};

static inline struct wblock unpack_q8_0(const uint8_t *p) {
    const struct block_q8_0 *b = (const struct block_q8_0 *)p;
    __m256i q = _mm256_loadu_si256((const __m256i *)b->qs);
    float d = f16(b->d); /* q + 128 is unsigned; the 128 comes back through the sum */
    return (struct wblock){_mm256_xor_si256(q, _mm256_set1_epi8((char)0x80)), d, -128.0f * d};
}

/* The low nibbles of 16 bytes as elements 0..15 and the high nibbles as 16..31. */
static inline __m256i nibbles(const uint8_t *qs) {
    __m256i bytes = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    __m256i shifted = _mm256_srlv_epi64(bytes, _mm256_set_epi64x(4, 4, 0, 0));
    return _mm256_and_si256(shifted, _mm256_set1_epi8(0x0F));
}

/* The fifth bits of q5 blocks: bit j of qh, as 0x10 in byte j. */
static inline __m256i fifth_bits(const uint8_t *qh) {
    uint32_t bits;
    memcpy(&bits, qh, 4);
    __mmask32 m = (__mmask32)bits;
    return _mm256_maskz_mov_epi8(m, _mm256_set1_epi8(0x10));
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

/* IQ4_NL's 16 signed levels + 128, looked up by nibble; the 128 returns through the sum. */
static inline struct wblock unpack_iq4_nl(const uint8_t *p) {
    const struct block_iq4_nl *b = (const struct block_iq4_nl *)p;
    __m128i levels =
        _mm_xor_si128(_mm_loadu_si128((const __m128i *)iq4nl_values), _mm_set1_epi8((char)0x80));
    __m256i u = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(levels), nibbles(b->qs));
    float d = f16(b->d);
    return (struct wblock){u, d, -128.0f * d};
}

static inline struct wblock unpack_q4_0(const uint8_t *p) {
    const struct block_q4_0 *b = (const struct block_q4_0 *)p;
    float d = f16(b->d);
    return (struct wblock){nibbles(b->qs), d, -8.0f * d};
}

/* ---- the row tile and the batch repack (qkernels_block32_drivers.h) -------------------------
 * Each row's block as 32 unsigned bytes, one VPDPBUSD against a token's 32 activation bytes. The
 * batch scratch layout, per block of 16 rows: the unsigned bytes chunk-major (4 elements of row 0,
 * of row 1, ... row 15, then the next 4 elements), then the 16 scales and 16 biases as floats.
 * One VPDPBUSD then advances 16 rows by 4 elements with a broadcast of 4 activation bytes, and
 * the scales apply to all 16 rows in one multiply-add. */
struct wtype {
    struct wblock (*unpack)(const uint8_t *);
    size_t block_bytes;
};
enum { B32_FULL_TILE = 1, PACK_BLOCK = 16 * 32 + 16 * 8, B32_PAIR_MAJOR = 0 };
#define B32_ACC __m256
#define B32_X   __m256i
#define B32_I   __m256i
static inline __attribute__((always_inline)) __m256 b32_zero(void) {
    return _mm256_setzero_ps();
}
static inline __attribute__((always_inline)) __m256i b32_x(const struct xq8_32 *xb) {
    return _mm256_loadu_si256((const __m256i *)xb->q);
}
static inline __attribute__((always_inline)) __m256i b32_dot(const struct wtype *t,
                                                             const struct wblock *wb, __m256i x) {
    (void)t;
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), wb->u, x);
}
static inline __attribute__((always_inline)) __m256 b32_fma(__m256 acc, __m256i dot, float scale) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(scale), acc);
}
static inline __attribute__((always_inline)) float b32_sum(__m256 acc) {
    return hsum(acc);
}
static inline __attribute__((always_inline)) void b32_store_levels(uint8_t row[32],
                                                                   const struct wblock *wb) {
    _mm256_storeu_si256((__m256i *)row, wb->u);
}
static inline __attribute__((always_inline)) void b32_repacked(const struct wtype *t,
                                                               uint8_t *out) {
    (void)t, (void)out;
}

#include "backend/cpu/qkernels_block32_drivers.h"

/* Each type's struct wtype, row tile and repack. */
B32_DEFINE_ROWS(q4_0, )
B32_DEFINE_ROWS(q8_0, )
B32_DEFINE_ROWS(q4_1, )
B32_DEFINE_ROWS(q5_0, )
B32_DEFINE_ROWS(q5_1, )
B32_DEFINE_ROWS(iq4_nl, )

/* ---- the batch tile over the scratch layout ---------------------------------------------- */

enum { PACK_NC = 4 };

/* With nc a constant the accumulators stay in registers and the tokens' chains of VPDPBUSD
 * interleave; each chain is split in two so that its latency hides too. */
static inline __attribute__((always_inline)) void tile16_impl(int64_t n, const void *packed, int nr,
                                                              const uint8_t *x, size_t x_stride,
                                                              int nc, float *y, size_t y_stride) {
    __m512 acc[PACK_NC], corr[PACK_NC];
    for (int c = 0; c < PACK_NC; c++)
        acc[c] = _mm512_setzero_ps(), corr[c] = _mm512_setzero_ps();
    const uint8_t *pb = packed;
    for (int64_t b = 0; b < n / 32; b++, pb += PACK_BLOCK) {
        __m512i wv[8];
        for (int k = 0; k < 8; k++)
            wv[k] = _mm512_loadu_si512(pb + k * 64);
        __m512 d = _mm512_loadu_ps(pb + 512), bias = _mm512_loadu_ps(pb + 576);
        for (int c = 0; c < nc; c++) {
            const struct xq8_32 *xb = (const struct xq8_32 *)(x + (size_t)c * x_stride) + b;
            const int32_t *xi = (const int32_t *)xb->q;
            __m512i even = _mm512_setzero_si512(), odd = _mm512_setzero_si512();
            for (int k = 0; k < 8; k += 2) {
                even = _mm512_dpbusd_epi32(even, wv[k], _mm512_set1_epi32(xi[k]));
                odd = _mm512_dpbusd_epi32(odd, wv[k + 1], _mm512_set1_epi32(xi[k + 1]));
            }
            __m512 scale = _mm512_mul_ps(d, _mm512_set1_ps(xb->d));
            acc[c] =
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(even, odd)), scale, acc[c]);
            corr[c] = _mm512_fmadd_ps(bias, _mm512_set1_ps(xb->s), corr[c]);
        }
    }
    __mmask16 rows = (__mmask16)((1u << nr) - 1);
    for (int c = 0; c < nc; c++)
        _mm512_mask_storeu_ps(y + (size_t)c * y_stride, rows, _mm512_add_ps(acc[c], corr[c]));
}

static void tile16_32(int64_t n, const void *packed, int nr, const uint8_t *x, size_t x_stride,
                      int nc, float *y, size_t y_stride) {
    if (nc == PACK_NC)
        tile16_impl(n, packed, nr, x, x_stride, PACK_NC, y, y_stride);
    else
        tile16_impl(n, packed, nr, x, x_stride, nc, y, y_stride);
}

/* ---- the load-time layout of q4_0, q5_0 and q8_0 (qpack16.c): a single token costs one
 * VPDPBUSD per chunk for 16 rows and one multiply-add per block. ---- */

enum {
    G4_BLOCK = QPACK16_Q4_0_BLOCK,
    G5_BLOCK = QPACK16_Q5_0_BLOCK,
    G8_BLOCK = QPACK16_Q8_0_BLOCK
};

/* Block b of a group as 8 chunk vectors of unsigned bytes, the scales, and the offset. */
static inline void chunks_q4_0(const uint8_t *blk, __m512i q[8], __m512 *d, float *offset) {
    __m512i low = _mm512_set1_epi8(0x0F);
    for (int k = 0; k < 4; k++) {
        __m512i v = _mm512_loadu_si512(blk + 32 + 64 * k);
        q[k] = _mm512_and_si512(v, low);
        q[k + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
    }
    *d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
    *offset = -8.0f;
}

/* q4_0's nibbles with each chunk's fifth bits: its 64 bits are a byte mask of the chunk. */
static inline void chunks_q5_0(const uint8_t *blk, __m512i q[8], __m512 *d, float *offset) {
    chunks_q4_0(blk, q, d, offset);
    for (int k = 0; k < 8; k++) {
        uint64_t bits;
        memcpy(&bits, blk + QPACK16_Q5_0_BITS + 8 * k, 8);
        q[k] =
            _mm512_or_si512(q[k], _mm512_maskz_mov_epi8((__mmask64)bits, _mm512_set1_epi8(0x10)));
    }
    *offset = -16.0f;
}

static inline void chunks_q8_0(const uint8_t *blk, __m512i q[8], __m512 *d, float *offset) {
    for (int k = 0; k < 8; k++) /* q + 128 is unsigned; the 128 comes back through the sum */
        q[k] =
            _mm512_xor_si512(_mm512_loadu_si512(blk + 32 + 64 * k), _mm512_set1_epi8((char)0x80));
    *d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
    *offset = -128.0f;
}

static inline __attribute__((always_inline)) void
gemv16_impl(void (*chunks)(const uint8_t *, __m512i *, __m512 *, float *), size_t block_bytes,
            int64_t n, const void *group, const uint8_t *x, size_t x_stride, int nc, float *y,
            size_t y_stride) {
    __m512 acc[PACK_NC], corr[PACK_NC];
    for (int c = 0; c < PACK_NC; c++)
        acc[c] = _mm512_setzero_ps(), corr[c] = _mm512_setzero_ps();
    const uint8_t *blk = group;
    for (int64_t b = 0; b < n / 32; b++, blk += block_bytes) {
        __m512i q[8];
        __m512 d;
        float offset;
        chunks(blk, q, &d, &offset);
        for (int c = 0; c < nc; c++) {
            const struct xq8_32 *xb = (const struct xq8_32 *)(x + (size_t)c * x_stride) + b;
            const int32_t *xi = (const int32_t *)xb->q;
            __m512i dot = _mm512_setzero_si512();
            for (int k = 0; k < 8; k++)
                dot = _mm512_dpbusd_epi32(dot, q[k], _mm512_set1_epi32(xi[k]));
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot),
                                     _mm512_mul_ps(d, _mm512_set1_ps(xb->d)), acc[c]);
            corr[c] = _mm512_fmadd_ps(d, _mm512_set1_ps(offset * xb->s), corr[c]);
        }
    }
    for (int c = 0; c < nc; c++)
        _mm512_storeu_ps(y + (size_t)c * y_stride, _mm512_add_ps(acc[c], corr[c]));
}

/* A group's block b in repack16's scratch layout (unsigned chunks, float scales, biases). */
static inline __attribute__((always_inline)) void
unpack16_impl(void (*chunks)(const uint8_t *, __m512i *, __m512 *, float *), size_t block_bytes,
              int64_t n, const void *group, void *dst) {
    const uint8_t *blk = group;
    uint8_t *out = dst;
    for (int64_t b = 0; b < n / 32; b++, blk += block_bytes, out += PACK_BLOCK) {
        __m512i q[8];
        __m512 d;
        float offset;
        chunks(blk, q, &d, &offset);
        for (int k = 0; k < 8; k++)
            _mm512_storeu_si512(out + 64 * k, q[k]);
        _mm512_storeu_ps(out + 512, d);
        _mm512_storeu_ps(out + 576, _mm512_mul_ps(d, _mm512_set1_ps(offset)));
    }
}

#define DEFINE_GROUP_32(type, block_bytes)                                                         \
    static void gemv16_##type(int64_t n, const void *group, const uint8_t *x, size_t x_stride,     \
                              int nc, float *y, size_t y_stride) {                                 \
        if (nc == 1)                                                                               \
            gemv16_impl(chunks_##type, block_bytes, n, group, x, x_stride, 1, y, y_stride);        \
        else                                                                                       \
            gemv16_impl(chunks_##type, block_bytes, n, group, x, x_stride, nc, y, y_stride);       \
    }                                                                                              \
    static void unpack16_##type(int64_t n, const void *group, void *dst) {                         \
        unpack16_impl(chunks_##type, block_bytes, n, group, dst);                                  \
    }

DEFINE_GROUP_32(q4_0, G4_BLOCK)
DEFINE_GROUP_32(q5_0, G5_BLOCK)
DEFINE_GROUP_32(q8_0, G8_BLOCK)

/* The kernels of the AVX-512 table (qkernels.c); q4_1 and q5_1 meet activations as ggml's q8_1
 * (their min term reads its f16 sum), q4_0, q5_0 and q8_0 also have the load-time layout. */
DEFINE_BLOCK32_KERNEL(avx512, "avx512-vnni", q4_0, xq8_32_quantize_avx512, tile16_32,
                      QPACK16_LAYOUT(q4_0))
DEFINE_BLOCK32_KERNEL(avx512, "avx512-vnni", q4_1, xq8_1_quantize_avx512, tile16_32, )
DEFINE_BLOCK32_KERNEL(avx512, "avx512-vnni", q5_0, xq8_32_quantize_avx512, tile16_32,
                      QPACK16_LAYOUT(q5_0))
DEFINE_BLOCK32_KERNEL(avx512, "avx512-vnni", q5_1, xq8_1_quantize_avx512, tile16_32, )
DEFINE_BLOCK32_KERNEL(avx512, "avx512-vnni", q8_0, xq8_32_quantize_avx512, tile16_32,
                      QPACK16_LAYOUT(q8_0))
DEFINE_BLOCK32_KERNEL(avx512, "avx512-vnni", iq4_nl, xq8_32_quantize_avx512, tile16_32, )
