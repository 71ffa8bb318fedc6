/* dequant_iq.c: reference dequantization of the grid i-quants (iq2_*, iq3_*, iq1_*). */
#include <string.h>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/iq_tables.h"

/* These formats store, per group of 8 (or 4) elements, an index into a fixed grid of magnitude
 * vectors plus sign bits; a 4- or 3-bit scale per 32 elements multiplies an fp16 super-scale.
 * Each function mirrors ggml's dequantize_row_<type>: the sub-block scale is computed in fp32
 * exactly as there (e.g. (d * (0.5f + s)) * 0.25f), then each element is
 * (scale * magnitude) * (+1 or -1). Keep that association; it decides the rounding. */

/* Byte j of a grid entry (element j of the vector). */
static inline int grid_byte(uint64_t entry, int j) {
    return (int)((entry >> (8 * j)) & 0xff);
}

static inline float sign_of(unsigned signs, int j) {
    return signs >> j & 1 ? -1.f : 1.f;
}

/* Eight elements from a 64-bit grid entry and 8 sign bits. */
static void put8(float *y, float scale, uint64_t entry, unsigned signs) {
    for (int j = 0; j < 8; j++)
        y[j] = scale * grid_byte(entry, j) * sign_of(signs, j);
}

/* Four elements from a 32-bit grid entry; sign bits first..first+3 of signs. */
static void put4(float *y, float scale, uint32_t entry, unsigned signs, int first) {
    for (int j = 0; j < 4; j++)
        y[j] = scale * grid_byte(entry, j) * sign_of(signs, first + j);
}

static uint32_t le32(const uint8_t *b) {
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

void dequant_iq2_xxs(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / QK_SUPER; b++, p += sizeof(struct block_iq2_xxs)) {
        struct block_iq2_xxs blk;
        memcpy(&blk, p, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        const uint8_t *qs = (const uint8_t *)blk.qs;
        /* per 32 elements 8 bytes: 4 grid indices, then a word of 4x7 sign bits + 4-bit scale */
        for (int ib = 0; ib < 8; ib++, qs += 8) {
            const uint32_t aux = le32(qs + 4);
            const float db = d * (0.5f + (aux >> 28)) * 0.25f;
            for (int l = 0; l < 4; l++, dst += 8)
                put8(dst, db, iq2xxs_grid[qs[l]], iq_sign_patterns[(aux >> (7 * l)) & 127]);
        }
    }
}

void dequant_iq2_xs(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / QK_SUPER; b++, p += sizeof(struct block_iq2_xs)) {
        struct block_iq2_xs blk;
        memcpy(&blk, p, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        for (int ib = 0; ib < 8; ib++) {
            /* one 4-bit scale per 16 elements */
            const float db[2] = {d * (0.5f + (blk.scales[ib] & 0x0f)) * 0.25f,
                                 d * (0.5f + (blk.scales[ib] >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++, dst += 8) {
                const uint16_t q = blk.qs[4 * ib + l]; /* 9-bit grid index, 7 sign bits */
                put8(dst, db[l / 2], iq2xs_grid[q & 511], iq_sign_patterns[q >> 9]);
            }
        }
    }
}

void dequant_iq2_s(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / QK_SUPER; b++, p += sizeof(struct block_iq2_s)) {
        struct block_iq2_s blk;
        memcpy(&blk, p, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        const uint8_t *signs = blk.qs + QK_SUPER / 8; /* all 8 sign bits stored */
        for (int ib = 0; ib < 8; ib++) {
            const float db[2] = {d * (0.5f + (blk.scales[ib] & 0x0f)) * 0.25f,
                                 d * (0.5f + (blk.scales[ib] >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++, dst += 8) {
                /* 10-bit index: low byte in qs, top two bits are bit pair l of qh[ib] */
                const int idx = blk.qs[4 * ib + l] | ((blk.qh[ib] >> (2 * l)) & 3) << 8;
                put8(dst, db[l / 2], iq2s_grid[idx], signs[4 * ib + l]);
            }
        }
    }
}

void dequant_iq3_xxs(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / QK_SUPER; b++, p += sizeof(struct block_iq3_xxs)) {
        struct block_iq3_xxs blk;
        memcpy(&blk, p, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        const uint8_t *qs = blk.qs;                          /* 8 grid indices per 32 */
        const uint8_t *scales_signs = blk.qs + QK_SUPER / 4; /* a word per 32 */
        for (int ib = 0; ib < 8; ib++, qs += 8) {
            const uint32_t aux = le32(scales_signs + 4 * ib);
            const float db = d * (0.5f + (aux >> 28)) * 0.5f;
            for (int l = 0; l < 4; l++, dst += 8) {
                const unsigned signs = iq_sign_patterns[(aux >> (7 * l)) & 127];
                put4(dst, db, iq3xxs_grid[qs[2 * l]], signs, 0);
                put4(dst + 4, db, iq3xxs_grid[qs[2 * l + 1]], signs, 4);
            }
        }
    }
}

void dequant_iq3_s(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / QK_SUPER; b++, p += sizeof(struct block_iq3_s)) {
        struct block_iq3_s blk;
        memcpy(&blk, p, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        for (int ib = 0; ib < 8; ib++) {
            /* odd scale 1..31 per 32 elements, two per byte */
            const int sc = (blk.scales[ib / 2] >> (4 * (ib % 2))) & 0x0f;
            const float db = d * (1 + 2 * sc);
            const uint8_t *qs = blk.qs + 8 * ib;
            for (int l = 0; l < 4; l++, dst += 8) {
                /* 9-bit indices: low byte in qs, 9th bit is bit g of qh[ib] */
                for (int half = 0; half < 2; half++) {
                    const int g = 2 * l + half;
                    const int idx = qs[g] | ((blk.qh[ib] >> g) & 1) << 8;
                    put4(dst + 4 * half, db, iq3s_grid[idx], blk.signs[4 * ib + l], 4 * half);
                }
            }
        }
    }
}

/* iq1 grids hold int8 values -1, 0, 1; each group of 8 is shifted by +-IQ1_DELTA before the
 * scale: y = scale * (grid + delta). */
#define IQ1_DELTA 0.125f

static void put8_iq1(float *y, float scale, uint64_t entry, float delta) {
    for (int j = 0; j < 8; j++)
        y[j] = scale * ((int8_t)grid_byte(entry, j) + delta);
}

void dequant_iq1_s(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / QK_SUPER; b++, p += sizeof(struct block_iq1_s)) {
        struct block_iq1_s blk;
        memcpy(&blk, p, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        for (int ib = 0; ib < 8; ib++) {
            /* qh: 4x3 high index bits, bits 12..14 scale, bit 15 delta sign */
            const unsigned qh = blk.qh[ib];
            const float dl = d * (2 * ((qh >> 12) & 7) + 1);
            const float delta = qh & 0x8000 ? -IQ1_DELTA : IQ1_DELTA;
            for (int l = 0; l < 4; l++, dst += 8) {
                const int idx = blk.qs[4 * ib + l] | ((qh >> (3 * l)) & 7) << 8;
                put8_iq1(dst, dl, iq1s_grid[idx], delta);
            }
        }
    }
}

/* iq1_m keeps its fp16 super-scale in the top nibble of each of its four 16-bit scale words. */
static float iq1_m_super_scale(const uint16_t sc[4]) {
    const uint16_t bits = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
                                     ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
    return fp16_to_fp32(bits);
}

void dequant_iq1_m(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / QK_SUPER; b++, p += sizeof(struct block_iq1_m)) {
        struct block_iq1_m blk;
        memcpy(&blk, p, sizeof blk);
        uint16_t sc[4];
        for (int k = 0; k < 4; k++)
            sc[k] = (uint16_t)(blk.scales[2 * k] | blk.scales[2 * k + 1] << 8);
        const float d = iq1_m_super_scale(sc);
        for (int ib = 0; ib < 8; ib++) {
            /* two 3-bit scales per 32 elements, one per 16 */
            const float dl[2] = {d * (2 * ((sc[ib / 2] >> (6 * (ib % 2))) & 7) + 1),
                                 d * (2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 7) + 1)};
            for (int l = 0; l < 4; l++, dst += 8) {
                /* a nibble of qh per group of 8: 3 high index bits + delta sign (bit 3) */
                const int nib = (blk.qh[2 * ib + l / 2] >> (4 * (l % 2))) & 0x0f;
                const int idx = blk.qs[4 * ib + l] | (nib & 7) << 8;
                const float delta = nib & 8 ? -IQ1_DELTA : IQ1_DELTA;
                put8_iq1(dst, dl[l / 2], iq1s_grid[idx], delta);
            }
        }
    }
}
