/* dequant_iq4_fp4.c: reference dequantization of the table-coded 4-bit types (iq4_nl, iq4_xs,
 * mxfp4, nvfp4). */
#include <string.h>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/iq_tables.h"

/* Each 4-bit code indexes a 16-entry level table; in a run of 32 elements byte j holds element
 * j in its low nibble and element j + 16 in its high one (nvfp4: runs of 16, j and j + 8).
 * Each function mirrors ggml's dequantize_row_<type>: one fp32 scale times the integer level. */

void dequant_iq4_nl(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / 32; b++, p += sizeof(struct block_iq4_nl), dst += 32) {
        struct block_iq4_nl blk;
        memcpy(&blk, p, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        for (int j = 0; j < 16; j++) {
            dst[j] = d * iq4nl_values[blk.qs[j] & 0x0f];
            dst[j + 16] = d * iq4nl_values[blk.qs[j] >> 4];
        }
    }
}

void dequant_iq4_xs(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / QK_SUPER; b++, p += sizeof(struct block_iq4_xs)) {
        struct block_iq4_xs blk;
        memcpy(&blk, p, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        for (int ib = 0; ib < 8; ib++, dst += 32) {
            /* 6-bit scale: low nibble from scales_l, top two bits from scales_h */
            const int ls = ((blk.scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0f) |
                           ((blk.scales_h >> (2 * ib)) & 3) << 4;
            const float dl = d * (ls - 32);
            const uint8_t *qs = blk.qs + 16 * ib;
            for (int j = 0; j < 16; j++) {
                dst[j] = dl * iq4nl_values[qs[j] & 0x0f];
                dst[j + 16] = dl * iq4nl_values[qs[j] >> 4];
            }
        }
    }
}

/* The e8m0 scale 2^(e - 127), halved because the e2m1 table is doubled. Built from bits: it is
 * a power of two, subnormal for e < 2 (ggml's ggml_e8m0_to_fp32_half; e = 255 is not NaN). */
static float e8m0_half_to_fp32(uint8_t e) {
    return fp32_from_bits(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
}

void dequant_mxfp4(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / 32; b++, p += sizeof(struct block_mxfp4), dst += 32) {
        struct block_mxfp4 blk;
        memcpy(&blk, p, sizeof blk);
        const float d = e8m0_half_to_fp32(blk.e);
        for (int j = 0; j < 16; j++) {
            dst[j] = fp4_e2m1_values[blk.qs[j] & 0x0f] * d;
            dst[j + 16] = fp4_e2m1_values[blk.qs[j] >> 4] * d;
        }
    }
}

/* The ue4m3 group scale (4 exponent bits, bias 7, 3 mantissa bits; bit 7 ignored), halved for
 * the doubled e2m1 table, as ggml's ggml_ue4m3_to_fp32. 0x7f (NaN in e4m3) decodes to 0 there,
 * and so here. Every value is exact in fp32: (8 + m) * 2^(e - 11), or m * 2^-10 when e = 0. */
static float ue4m3_half_to_fp32(uint8_t x) {
    if (x == 0x7f)
        return 0.0f;
    const int e = (x >> 3) & 0x0f;
    const int m = x & 7;
    const int mant = e ? 8 + m : m;    /* integer significand, exact */
    const int pow2 = (e ? e : 1) - 11; /* -10 .. 4 */
    /* mant * 2^pow2: both factors exact and the product has at most 4 significant bits */
    return (float)mant * fp32_from_bits((uint32_t)(pow2 + 127) << 23);
}

void dequant_nvfp4(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / 64; b++, p += sizeof(struct block_nvfp4)) {
        struct block_nvfp4 blk;
        memcpy(&blk, p, sizeof blk);
        for (int s = 0; s < 4; s++, dst += 16) {
            const float d = ue4m3_half_to_fp32(blk.d[s]);
            const uint8_t *qs = blk.qs + 8 * s;
            for (int j = 0; j < 8; j++) {
                dst[j] = fp4_e2m1_values[qs[j] & 0x0f] * d;
                dst[j + 8] = fp4_e2m1_values[qs[j] >> 4] * d;
            }
        }
    }
}
