/* dequant_ternary.c: reference dequantization of the ternary types (tq1_0, tq2_0). */
#include <string.h>

#include "core/fp16.h"
#include "quant/blocks.h"

/* Elements are -1, 0 or +1 times the fp16 scale; y = (float)(t - 1) * d as ggml's
 * dequantize_row_tq*_0. */

/* tq1_0 packs 5 trits per byte as a base-3 fixed-point fraction: byte = ceil(v * 256 / 243)
 * where v is the 5-digit base-3 number. Multiplying by 3^k (mod 256) moves digit k to the top,
 * and (byte * 3) >> 8 reads it out. */
static int trit(uint8_t byte, int k) {
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    const uint8_t shifted = (uint8_t)(byte * pow3[k]);
    return (shifted * 3) >> 8;
}

/* Trit k of bytes q[0..width-1], for k = 0..ntrits-1, in k-major order. */
static float *tq1_run(float *y, const uint8_t *q, int width, int ntrits, float d) {
    for (int k = 0; k < ntrits; k++)
        for (int m = 0; m < width; m++)
            *y++ = (float)(trit(q[m], k) - 1) * d;
    return y;
}

void dequant_tq1_0(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / QK_SUPER; b++, p += sizeof(struct block_tq1_0)) {
        struct block_tq1_0 blk;
        memcpy(&blk, p, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        /* 48 qs bytes: a run of 32 then a run of 16 (5 trits each), then 4 qh bytes (4 each) */
        dst = tq1_run(dst, blk.qs, 32, 5, d);
        dst = tq1_run(dst, blk.qs + 32, 16, 5, d);
        dst = tq1_run(dst, blk.qh, 4, 4, d);
    }
}

void dequant_tq2_0(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / QK_SUPER; b++, p += sizeof(struct block_tq2_0)) {
        struct block_tq2_0 blk;
        memcpy(&blk, p, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        /* per 32 bytes, bit pair l of every byte in turn: codes 0..2 mean -1, 0, +1 */
        for (int j = 0; j < QK_SUPER / 4; j += 32)
            for (int l = 0; l < 4; l++)
                for (int m = 0; m < 32; m++)
                    *dst++ = (float)(((blk.qs[j + m] >> (2 * l)) & 3) - 1) * d;
    }
}
