/* quantize_ternary.c: quantizers from float for the ternary types tq1_0 and tq2_0 (levels -1, 0,
 * 1 times the super-block's absolute max), byte-identical with ggml's quantize_row_tq*_ref. */
#include <math.h>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/quantize.h"
#include "quant/quantize_util.h"

/* Shared by both: d = amax of the 256 elements, trit = lroundf(x / d) + 1 in 0..2 (lroundf,
 * ties away from zero, as ggml). ggml ignores any importance matrix for these types. */
static float ternary_scale(const float *x, float *id) {
    float amax = 0.0f;
    for (int j = 0; j < QK_SUPER; j++)
        amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
    *id = amax ? 1.0f / amax : 0.0f;
    return amax;
}

static inline int trit(float x, float id) {
    return (int)lroundf(x * id) + 1;
}

/* n trits t0..t(n-1) as base-3 digits t0 first, scaled from [0, 3^5) to a byte by a ceiling
 * division so that multiplying the byte by 3^k and keeping bits 8.. reads digit k back. With
 * n = 4 (qh) the value is shifted one digit up first, leaving the last digit 0. */
static uint8_t pack_trits(const float *x, int stride, int n, float id) {
    int q = 0;
    for (int k = 0; k < n; k++)
        q = q * 3 + trit(x[k * stride], id);
    if (n == 4)
        q *= 3;
    return (uint8_t)((q * 256 + (243 - 1)) / 243);
}

/* tq1_0: qs[0..31] hold elements m + 32k (k = 0..4) of the first 160, qs[32..47] elements
 * 160 + m + 16k of the next 80, qh[0..3] elements 240 + j + 4k (k = 0..3) of the last 16. */
static void tq1_0_block(const float *x, const float *qw, float sigma2, void *out) {
    (void)qw, (void)sigma2;
    struct block_tq1_0 y;
    float id;
    y.d = fp32_to_fp16(ternary_scale(x, &id));
    for (int m = 0; m < 32; m++)
        y.qs[m] = pack_trits(x + m, 32, 5, id);
    for (int m = 0; m < 16; m++)
        y.qs[32 + m] = pack_trits(x + 160 + m, 16, 5, id);
    for (int j = 0; j < 4; j++)
        y.qh[j] = pack_trits(x + 240 + j, 4, 4, id);
    memcpy(out, &y, sizeof y);
}

/* tq2_0: 2 bits per trit; in each 128, byte m holds elements m + 32k at bits 2k. */
static void tq2_0_block(const float *x, const float *qw, float sigma2, void *out) {
    (void)qw, (void)sigma2;
    struct block_tq2_0 y;
    float id;
    y.d = fp32_to_fp16(ternary_scale(x, &id));
    for (int j = 0; j < QK_SUPER; j += 128) {
        for (int m = 0; m < 32; m++) {
            int q = 0;
            for (int k = 0; k < 4; k++)
                q |= (trit(x[j + m + 32 * k], id) & 3) << (2 * k);
            y.qs[j / 4 + m] = (uint8_t)q;
        }
    }
    memcpy(out, &y, sizeof y);
}

size_t quant_tq1_0(const float *src, void *dst, int64_t n_rows, int64_t n_per_row,
                   const float *imatrix) {
    (void)imatrix;
    return quant_rows(src, dst, n_rows, n_per_row, NULL, QK_SUPER, sizeof(struct block_tq1_0),
                      tq1_0_block);
}

size_t quant_tq2_0(const float *src, void *dst, int64_t n_rows, int64_t n_per_row,
                   const float *imatrix) {
    (void)imatrix;
    return quant_rows(src, dst, n_rows, n_per_row, NULL, QK_SUPER, sizeof(struct block_tq2_0),
                      tq2_0_block);
}
