/* quantize_fp4.c: quantizers from float for the fp4 (e2m1) types mxfp4 (power-of-two scale per
 * 32) and nvfp4 (ue4m3 scale per 16), byte-identical with ggml's quantize_row_*_ref. */
#include <math.h>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/iq_tables.h"
#include "quant/quantize.h"
#include "quant/quantize_util.h"

/* Both formats store e2m1 codes; fp4_e2m1_values holds their values doubled (0, 1, 2, 3, 4, 6,
 * 8, 12 and negatives), so the scales below are the halved ones ggml uses. ggml ignores any
 * importance matrix for these types. */

/* The code whose value times d is nearest to x: an exhaustive scan in code order, the first
 * of equal errors winning (so +0 beats -0), as ggml's best_index_mxfp4. */
static uint8_t nearest_e2m1(float x, float d) {
    int best = 0;
    float best_err = fabsf(fp4_e2m1_values[0] * d - x);
    for (int i = 1; i < 16; i++) {
        const float err = fabsf(fp4_e2m1_values[i] * d - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return (uint8_t)best;
}

static float absmax(const float *x, int n) {
    float amax = 0.0f;
    for (int j = 0; j < n; j++)
        if (amax < fabsf(x[j]))
            amax = fabsf(x[j]);
    return amax;
}

/* 2^(e - 128): the e8m0 scale 2^(e - 127) halved; subnormal for e < 2. */
static float e8m0_half(uint8_t e) {
    return fp32_from_bits(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
}

/* mxfp4: e = floor(log2(amax)) - 2 + 127, so amax lands in the top codes (6 or 8 times the
 * halved scale is 3..4 times 2^floor). The float -> byte conversion goes through int, as the
 * x86 code ggml compiles to does (it only matters for amax < 2^-125). */
static void mxfp4_block(const float *x, const float *qw, float sigma2, void *out) {
    (void)qw, (void)sigma2;
    struct block_mxfp4 y;
    const float amax = absmax(x, 32);
    y.e = amax > 0.0f ? (uint8_t)(int)(floorf(log2f(amax)) - 2 + 127) : 0;
    const float d = e8m0_half(y.e);
    for (int j = 0; j < 16; j++)
        y.qs[j] = (uint8_t)(nearest_e2m1(x[j], d) | nearest_e2m1(x[j + 16], d) << 4);
    memcpy(out, &y, sizeof y);
}

/* ggml_fp32_to_ue4m3: x > 0 to an unsigned e4m3 byte (bias 7), capped at 448 (0x7e); the
 * mantissa rounds half up on its fourth bit; below 2^-6 the subnormal codes 1..7 of 2^-9. */
static uint8_t fp32_to_ue4m3(float x) {
    if (!(x > 0.0f))
        return 0;
    if (x > 448.0f)
        x = 448.0f;
    const uint32_t bits = fp32_bits(x);
    int exp = (int)((bits >> 23) & 0xFF) - 127 + 7;
    if (exp <= 0) {
        const int man = (int)(x * 512.0f + 0.5f);
        return (uint8_t)(man < 1 ? 0 : man > 7 ? 7 : man);
    }
    if (exp >= 15)
        return 0x7E;
    int man = (int)((bits >> 20) & 7) + (int)((bits >> 19) & 1);
    if (man > 7) { /* the mantissa carried into the exponent */
        man = 0;
        if (++exp >= 15)
            return 0x7E;
    }
    return (uint8_t)(exp << 3 | man);
}

/* The ue4m3 value halved (ggml_ue4m3_to_fp32); every value is exact in float. */
static float ue4m3_half(uint8_t u) {
    if (u == 0 || u == 0x7F)
        return 0.0f;
    const int exp = (u >> 3) & 0xF, man = u & 7;
    const float raw = exp == 0 ? ldexpf((float)man, -9) : ldexpf(1.0f + (float)man / 8.0f, exp - 7);
    return raw * 0.5f;
}

/* nvfp4: per 16 elements, scale = ue4m3(amax / 6) (6 is the largest e2m1 value); byte j of a
 * group holds elements j (low nibble) and j + 8. */
static void nvfp4_block(const float *x, const float *qw, float sigma2, void *out) {
    (void)qw, (void)sigma2;
    struct block_nvfp4 y;
    for (int s = 0; s < 4; s++) {
        const float *xb = x + 16 * s;
        y.d[s] = fp32_to_ue4m3(absmax(xb, 16) / 6.0f);
        const float d = ue4m3_half(y.d[s]);
        for (int j = 0; j < 8; j++)
            y.qs[8 * s + j] = (uint8_t)(nearest_e2m1(xb[j], d) | nearest_e2m1(xb[j + 8], d) << 4);
    }
    memcpy(out, &y, sizeof y);
}

size_t quant_mxfp4(const float *src, void *dst, int64_t n_rows, int64_t n_per_row,
                   const float *imatrix) {
    (void)imatrix;
    return quant_rows(src, dst, n_rows, n_per_row, NULL, 32, sizeof(struct block_mxfp4),
                      mxfp4_block);
}

size_t quant_nvfp4(const float *src, void *dst, int64_t n_rows, int64_t n_per_row,
                   const float *imatrix) {
    (void)imatrix;
    return quant_rows(src, dst, n_rows, n_per_row, NULL, 64, sizeof(struct block_nvfp4),
                      nvfp4_block);
}
