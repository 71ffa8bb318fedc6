/* dequant_k.c: reference dequantization of the k-quants (q2_K .. q6_K) and q8_K. */
#include <string.h>

#include "core/fp16.h"
#include "quant/blocks.h"

/* Each function mirrors ggml's dequantize_row_<type> operation for operation: the sub-block
 * scale is formed first (super-scale * integer sub-scale, in fp32), then multiplied by the
 * integer level, then the sub-block min is subtracted. Keep that order; regrouping the products
 * changes rounding. */

/* q2_K / q3_K element order: a super-block is two halves of 128; in half h, bit pair j (0..3) of
 * the 32 bytes qs[32h .. 32h+31] holds elements 128h + 32j .. +31, and each run of 16 of those
 * has its own scale, numbered 8h + 2j + (0 or 1). */

void dequant_q2_K(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / QK_SUPER; b++, p += sizeof(struct block_q2_K)) {
        struct block_q2_K blk;
        memcpy(&blk, p, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        const float dmin = fp16_to_fp32(blk.dmin);
        for (int h = 0; h < 2; h++) {
            for (int j = 0; j < 4; j++) {
                for (int half16 = 0; half16 < 2; half16++) {
                    const uint8_t sc = blk.scales[8 * h + 2 * j + half16];
                    const float dl = d * (sc & 0x0f);  /* sub-block scale */
                    const float ml = dmin * (sc >> 4); /* sub-block min */
                    const uint8_t *q = blk.qs + 32 * h + 16 * half16;
                    for (int l = 0; l < 16; l++)
                        *dst++ = dl * ((q[l] >> (2 * j)) & 3) - ml;
                }
            }
        }
    }
}

/* q3_K's 16 six-bit scales: the low nibbles are bytes 0..7 (scales 0..7 in the low nibbles,
 * 8..15 in the high ones), the top two bits come from bytes 8..11, two bits per scale. */
static int q3_K_scale(const uint8_t packed[12], int s) {
    const int low = s < 8 ? packed[s] & 0x0f : packed[s - 8] >> 4;
    const int high = (packed[8 + s % 4] >> (2 * (s / 4))) & 3;
    return (low | high << 4) - 32;
}

void dequant_q3_K(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / QK_SUPER; b++, p += sizeof(struct block_q3_K)) {
        struct block_q3_K blk;
        memcpy(&blk, p, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        for (int h = 0; h < 2; h++) {
            for (int j = 0; j < 4; j++) {
                /* the high bit of every element of bit pair j of half h is in hmask bit 4h+j */
                const uint8_t hbit = (uint8_t)(1u << (4 * h + j));
                for (int half16 = 0; half16 < 2; half16++) {
                    const float dl = d * q3_K_scale(blk.scales, 8 * h + 2 * j + half16);
                    const uint8_t *q = blk.qs + 32 * h + 16 * half16;
                    const uint8_t *hm = blk.hmask + 16 * half16;
                    for (int l = 0; l < 16; l++) {
                        /* a clear high bit means the level is 4 lower: range -4..3 */
                        const int level = ((q[l] >> (2 * j)) & 3) - (hm[l] & hbit ? 0 : 4);
                        *dst++ = dl * level;
                    }
                }
            }
        }
    }
}

void dequant_q4_K(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / QK_SUPER; b++, p += sizeof(struct block_q4_K)) {
        struct block_q4_K blk;
        memcpy(&blk, p, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        const float dmin = fp16_to_fp32(blk.dmin);
        /* 32 bytes of qs per 64 elements: low nibbles first, then high nibbles */
        for (int j = 0; j < 4; j++) {
            const uint8_t *q = blk.qs + 32 * j;
            for (int nib = 0; nib < 2; nib++) {
                int sc, mn;
                k4_scale_get(blk.scales, 2 * j + nib, &sc, &mn);
                const float dl = d * sc;
                const float ml = dmin * mn;
                for (int l = 0; l < 32; l++)
                    *dst++ = dl * ((q[l] >> (4 * nib)) & 0x0f) - ml;
            }
        }
    }
}

void dequant_q5_K(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / QK_SUPER; b++, p += sizeof(struct block_q5_K)) {
        struct block_q5_K blk;
        memcpy(&blk, p, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        const float dmin = fp16_to_fp32(blk.dmin);
        /* as q4_K; the 5th bit of element l of sub-block s is bit s of qh[l] */
        for (int j = 0; j < 4; j++) {
            const uint8_t *q = blk.qs + 32 * j;
            for (int nib = 0; nib < 2; nib++) {
                const int s = 2 * j + nib;
                int sc, mn;
                k4_scale_get(blk.scales, s, &sc, &mn);
                const float dl = d * sc;
                const float ml = dmin * mn;
                for (int l = 0; l < 32; l++) {
                    const int level = ((q[l] >> (4 * nib)) & 0x0f) + ((blk.qh[l] >> s) & 1) * 16;
                    *dst++ = dl * level - ml;
                }
            }
        }
    }
}

/* q6_K: per half of 128, 64 bytes of low nibbles and 32 bytes of 2-bit high parts; element
 * 32k + l (k = 0..3) of the half takes nibble k/2 of ql[l + 32 (k%2)] and bit pair k of qh[l]. */
void dequant_q6_K(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / QK_SUPER; b++, p += sizeof(struct block_q6_K)) {
        struct block_q6_K blk;
        memcpy(&blk, p, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        for (int h = 0; h < 2; h++, dst += 128) {
            const uint8_t *ql = blk.ql + 64 * h;
            const uint8_t *qh = blk.qh + 32 * h;
            const int8_t *sc = blk.scales + 8 * h;
            for (int k = 0; k < 4; k++) {
                for (int l = 0; l < 32; l++) {
                    const int lo = (ql[l + 32 * (k % 2)] >> (4 * (k / 2))) & 0x0f;
                    const int level = (lo | ((qh[l] >> (2 * k)) & 3) << 4) - 32;
                    /* (d * scale) * level, in that order, as ggml */
                    dst[32 * k + l] = d * sc[2 * k + l / 16] * level;
                }
            }
        }
    }
}

void dequant_q8_K(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / QK_SUPER; b++, p += sizeof(struct block_q8_K)) {
        struct block_q8_K blk;
        memcpy(&blk, p, sizeof blk);
        for (int j = 0; j < QK_SUPER; j++)
            *dst++ = blk.d * blk.qs[j];
    }
}
