/* qkernels_avx2.c: matmul tiles for x86 CPUs with AVX2 but no AVX-512 VNNI, for the 32-block
 * types. Without VPDPBUSD the byte products go through VPMADDUBSW, which saturates unless the
 * unsigned side stays below 128: weights are unpacked signed and multiplied as |w| times the
 * activation with w's sign (llama.cpp's trick); q4_1/q5_1 mins return through the block sum. */
#include <immintrin.h>
#include <string.h>

#include "backend/cpu/qmatmul.h"
#include "backend/cpu/x86/simd_x86.h"
#include "quant/blocks.h"
#include "quant/iq_tables.h"

enum { NR = 4, NC = 4 };

/* 32 signed weights, the scale, and the term that multiplies the activation sum. */
struct sblock {
    __m256i s;
    float d, bias;
};

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

static inline struct sblock unpack_q4_0(const uint8_t *p) {
    const struct block_q4_0 *b = (const struct block_q4_0 *)p;
    return (struct sblock){_mm256_sub_epi8(nibbles(b->qs), _mm256_set1_epi8(8)), f16(b->d), 0.0f};
}
static inline struct sblock unpack_q4_1(const uint8_t *p) {
    const struct block_q4_1 *b = (const struct block_q4_1 *)p;
    return (struct sblock){nibbles(b->qs), f16(b->d), f16(b->m)};
}
static inline struct sblock unpack_q5_0(const uint8_t *p) {
    const struct block_q5_0 *b = (const struct block_q5_0 *)p;
    __m256i q = _mm256_or_si256(nibbles(b->qs), fifth_bits(b->qh));
    return (struct sblock){_mm256_sub_epi8(q, _mm256_set1_epi8(16)), f16(b->d), 0.0f};
}
static inline struct sblock unpack_q5_1(const uint8_t *p) {
    const struct block_q5_1 *b = (const struct block_q5_1 *)p;
    return (struct sblock){_mm256_or_si256(nibbles(b->qs), fifth_bits(b->qh)), f16(b->d),
                           f16(b->m)};
}
static inline struct sblock unpack_q8_0(const uint8_t *p) {
    const struct block_q8_0 *b = (const struct block_q8_0 *)p;
    return (struct sblock){_mm256_loadu_si256((const __m256i *)b->qs), f16(b->d), 0.0f};
}
static inline struct sblock unpack_iq4_nl(const uint8_t *p) {
    const struct block_iq4_nl *b = (const struct block_iq4_nl *)p;
    __m256i levels = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)iq4nl_values));
    return (struct sblock){_mm256_shuffle_epi8(levels, nibbles(b->qs)), f16(b->d), 0.0f};
}

/* sum(w * x) of 32 signed bytes each, as 8 int32 lanes. */
static inline __m256i dot_bytes(__m256i w, __m256i x) {
    __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

static inline __attribute__((always_inline)) void
tile_avx2(struct sblock (*unpack)(const uint8_t *), size_t block_bytes, int64_t n, const uint8_t *w,
          size_t w_stride, int nr, const uint8_t *x, size_t x_stride, int nc, float *y,
          size_t y_stride) {
    __m256 acc[NR][NC];
    float corr[NR][NC];
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < NC; c++)
            acc[r][c] = _mm256_setzero_ps(), corr[r][c] = 0.0f;
    for (int64_t b = 0; b < n / 32; b++) {
        struct sblock wb[NR];
        for (int r = 0; r < nr; r++)
            wb[r] = unpack(w + (size_t)r * w_stride + (size_t)b * block_bytes);
        for (int c = 0; c < nc; c++) {
            const struct xq8_32 *xb = (const struct xq8_32 *)(x + (size_t)c * x_stride) + b;
            __m256i xv = _mm256_loadu_si256((const __m256i *)xb->q);
            for (int r = 0; r < nr; r++) {
                __m256 scale = _mm256_set1_ps(wb[r].d * xb->d);
                acc[r][c] =
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_bytes(wb[r].s, xv)), scale, acc[r][c]);
                corr[r][c] += wb[r].bias * xb->s;
            }
        }
    }
    for (int c = 0; c < nc; c++)
        for (int r = 0; r < nr; r++)
            y[(size_t)c * y_stride + (size_t)r] = hsum(acc[r][c]) + corr[r][c];
}

/* One token: each row streams alone (memory serves that fastest), with constant bounds so the
 * accumulator stays in a register; other shapes take the general loop. */
#define DEFINE_TILE_AVX2(name, block_bytes, unpack)                                                \
    static void name(int64_t n, const uint8_t *w, size_t w_stride, int nr, const uint8_t *x,       \
                     size_t x_stride, int nc, float *y, size_t y_stride) {                         \
        if (nc == 1)                                                                               \
            for (int r = 0; r < nr; r++)                                                           \
                tile_avx2(unpack, block_bytes, n, w + (size_t)r * w_stride, w_stride, 1, x,        \
                          x_stride, 1, y + r, y_stride);                                           \
        else                                                                                       \
            tile_avx2(unpack, block_bytes, n, w, w_stride, nr, x, x_stride, nc, y, y_stride);      \
    }

DEFINE_TILE_AVX2(tile_q4_0, sizeof(struct block_q4_0), unpack_q4_0)
DEFINE_TILE_AVX2(tile_q4_1, sizeof(struct block_q4_1), unpack_q4_1)
DEFINE_TILE_AVX2(tile_q5_0, sizeof(struct block_q5_0), unpack_q5_0)
DEFINE_TILE_AVX2(tile_q5_1, sizeof(struct block_q5_1), unpack_q5_1)
DEFINE_TILE_AVX2(tile_q8_0, sizeof(struct block_q8_0), unpack_q8_0)
DEFINE_TILE_AVX2(tile_iq4_nl, sizeof(struct block_iq4_nl), unpack_iq4_nl)

#define KERNEL_AVX2(type)                                                                          \
    static const struct qkernel k_##type = {.name = #type " avx2",                                 \
                                            .x_row_bytes = xq8_32_row_bytes,                       \
                                            .quantize_x = xq8_32_quantize,                         \
                                            .x_to_float = xq8_32_to_float,                         \
                                            .tile = tile_##type,                                   \
                                            .max_nr = NR,                                          \
                                            .max_nc = NC};
KERNEL_AVX2(q4_0)
KERNEL_AVX2(q4_1)
KERNEL_AVX2(q5_0)
KERNEL_AVX2(q5_1)
KERNEL_AVX2(q8_0)
KERNEL_AVX2(iq4_nl)

const struct qkernel *qkernels_avx2(enum ox_dtype type) {
    switch (type) {
    case OX_DTYPE_Q4_0: return &k_q4_0;
    case OX_DTYPE_Q4_1: return &k_q4_1;
    case OX_DTYPE_Q5_0: return &k_q5_0;
    case OX_DTYPE_Q5_1: return &k_q5_1;
    case OX_DTYPE_Q8_0: return &k_q8_0;
    case OX_DTYPE_IQ4_NL: return &k_iq4_nl;
    default:
        return qkernels_kquant_avx2(type) ? qkernels_kquant_avx2(type) : qkernels_float_avx2(type);
    }
}
