/* dequant_legacy.c: reference dequantization of the one-scale-per-block types (q1_0 .. q8_1). */
#include <string.h>

#include "core/fp16.h"
#include "quant/blocks.h"

/* Each function mirrors ggml's dequantize_row_<type> operation for operation: the integer level
 * is formed first and multiplied by the fp32 scale (int * float), then the min is added. Any
 * regrouping of the float products would change rounding, so keep the order. */

void dequant_q1_0(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / 128; b++, p += sizeof(struct block_q1_0), dst += 128) {
        struct block_q1_0 blk;
        memcpy(&blk, p, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        for (int j = 0; j < 128; j++) /* element j is bit j%8 of byte j/8, LSB first */
            dst[j] = (blk.qs[j / 8] >> (j % 8)) & 1 ? d : -d;
    }
}

void dequant_q2_0(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / 64; b++, p += sizeof(struct block_q2_0), dst += 64) {
        struct block_q2_0 blk;
        memcpy(&blk, p, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        for (int j = 0; j < 64; j++) { /* four 2-bit codes per byte, lowest first: -1 0 1 2 */
            const int q = (blk.qs[j / 4] >> (2 * (j % 4))) & 3;
            dst[j] = (q - 1) * d;
        }
    }
}

void dequant_q4_0(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / 32; b++, p += sizeof(struct block_q4_0), dst += 32) {
        struct block_q4_0 blk;
        memcpy(&blk, p, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        for (int j = 0; j < 16; j++) {
            dst[j] = ((blk.qs[j] & 0x0f) - 8) * d;
            dst[j + 16] = ((blk.qs[j] >> 4) - 8) * d;
        }
    }
}

void dequant_q4_1(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / 32; b++, p += sizeof(struct block_q4_1), dst += 32) {
        struct block_q4_1 blk;
        memcpy(&blk, p, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        const float m = fp16_to_fp32(blk.m);
        for (int j = 0; j < 16; j++) {
            dst[j] = (blk.qs[j] & 0x0f) * d + m;
            dst[j + 16] = (blk.qs[j] >> 4) * d + m;
        }
    }
}

/* The 5th bits of q5_0 / q5_1: bit j of the 32-bit little-endian qh belongs to element j. */
static uint32_t load_le32(const uint8_t b[4]) {
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

void dequant_q5_0(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / 32; b++, p += sizeof(struct block_q5_0), dst += 32) {
        struct block_q5_0 blk;
        memcpy(&blk, p, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        const uint32_t qh = load_le32(blk.qh);
        for (int j = 0; j < 16; j++) {
            const int lo = (blk.qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4;
            const int hi = (blk.qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            dst[j] = (lo - 16) * d;
            dst[j + 16] = (hi - 16) * d;
        }
    }
}

void dequant_q5_1(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / 32; b++, p += sizeof(struct block_q5_1), dst += 32) {
        struct block_q5_1 blk;
        memcpy(&blk, p, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        const float m = fp16_to_fp32(blk.m);
        const uint32_t qh = load_le32(blk.qh);
        for (int j = 0; j < 16; j++) {
            const int lo = (blk.qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4;
            const int hi = (blk.qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            dst[j] = lo * d + m;
            dst[j + 16] = hi * d + m;
        }
    }
}

void dequant_q8_0(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / 32; b++, p += sizeof(struct block_q8_0), dst += 32) {
        struct block_q8_0 blk;
        memcpy(&blk, p, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        for (int j = 0; j < 32; j++)
            dst[j] = blk.qs[j] * d;
    }
}

/* ggml has no dequantize_row_q8_1 (q8_1 only ever holds activations); decoding it like q8_0 is
 * what the format means. The s field is a cached d * sum(q) and plays no part. */
void dequant_q8_1(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / 32; b++, p += sizeof(struct block_q8_1), dst += 32) {
        struct block_q8_1 blk;
        memcpy(&blk, p, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        for (int j = 0; j < 32; j++)
            dst[j] = blk.qs[j] * d;
    }
}
