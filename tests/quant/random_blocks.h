/* random_blocks.h: deterministic pseudo-random blocks of any dtype, with finite scales, for the
 * dequantization tests (golden hashes were computed from ggml's dequantize_row_* on them). */
#ifndef OX_TEST_RANDOM_BLOCKS_H
#define OX_TEST_RANDOM_BLOCKS_H

#include <stdint.h>
#include <string.h>

#include "oxidize.h"

/* splitmix64: the whole sequence follows from the seed, on every platform. */
static inline uint64_t rb_next(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A finite fp16 (exponent field 0..30: subnormals included, inf/NaN never) written at p. */
static inline void rb_put_fp16(uint8_t *p, uint64_t *state) {
    uint64_t r = rb_next(state);
    uint16_t h = (uint16_t)((r & 0x83ff) | ((r >> 16) % 31) << 10);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

/* Byte offsets of the fp16 scale fields of one block (-1 ends the list). Random bits there
 * could be inf/NaN, whose float bit patterns are not worth pinning down; everything else in a
 * block may be any bits. */
static inline const int *rb_fp16_fields(enum ox_dtype type) {
    static const int at0[] = {0, -1}, at0_2[] = {0, 2, -1}, none[] = {-1};
    static const int q2_K[] = {80, 82, -1}, q3_K[] = {108, -1}, q6_K[] = {208, -1};
    static const int tq1_0[] = {52, -1}, tq2_0[] = {64, -1};
    switch (type) {
    case OX_DTYPE_F16:
    case OX_DTYPE_Q1_0:
    case OX_DTYPE_Q2_0:
    case OX_DTYPE_Q4_0:
    case OX_DTYPE_Q5_0:
    case OX_DTYPE_Q8_0:
    case OX_DTYPE_IQ2_XXS:
    case OX_DTYPE_IQ2_XS:
    case OX_DTYPE_IQ2_S:
    case OX_DTYPE_IQ3_XXS:
    case OX_DTYPE_IQ3_S:
    case OX_DTYPE_IQ1_S:
    case OX_DTYPE_IQ4_NL:
    case OX_DTYPE_IQ4_XS: return at0;
    case OX_DTYPE_Q4_1:
    case OX_DTYPE_Q5_1:
    case OX_DTYPE_Q8_1:
    case OX_DTYPE_Q4_K:
    case OX_DTYPE_Q5_K: return at0_2;
    case OX_DTYPE_Q2_K: return q2_K;
    case OX_DTYPE_Q3_K: return q3_K;
    case OX_DTYPE_Q6_K: return q6_K;
    case OX_DTYPE_TQ1_0: return tq1_0;
    case OX_DTYPE_TQ2_0: return tq2_0;
    default: return none;
    }
}

/* Make the float-valued fields of one block finite where random bits could make them inf/NaN:
 * the fp16 scales above, plain float elements, bf16 / q8_K / iq1_m's spread fp16 scale. */
static inline void rb_sanitize(enum ox_dtype type, uint8_t *blk, uint64_t *state) {
    for (const int *f = rb_fp16_fields(type); *f >= 0; f++)
        rb_put_fp16(blk + *f, state);
    switch (type) {
    case OX_DTYPE_BF16: /* exponent byte never all ones */ blk[1] &= 0xbf; break;
    case OX_DTYPE_F32:
    case OX_DTYPE_Q8_K: /* little-endian float: clear the exponent's top bit */
        blk[3] &= 0xbf;
        break;
    case OX_DTYPE_F64: blk[7] &= 0xbf; break;
    case OX_DTYPE_IQ1_M: /* its fp16 scale is the top nibbles of the 4 scale words; bit 14 of
                          * it is the top of byte 55: clearing it keeps the exponent below 31 */
        blk[55] &= 0xbf;
        break;
    default: break;
    }
}

/* nblocks random blocks of type into buf (nblocks * ox_dtype_type_size(type) bytes). */
static inline void rb_fill(enum ox_dtype type, void *buf, int64_t nblocks, uint64_t seed) {
    uint64_t state = seed ^ ((uint64_t)type << 32);
    size_t size = ox_dtype_type_size(type);
    uint8_t *p = buf;
    for (int64_t b = 0; b < nblocks; b++, p += size) {
        for (size_t i = 0; i < size; i++)
            p[i] = (uint8_t)(rb_next(&state) >> 56);
        rb_sanitize(type, p, &state);
    }
}

#endif
