/* quantize_legacy.c: quantizers from float for the one-scale-per-block types (q1_0, q2_0, q4_0,
 * q4_1, q5_0, q5_1, q8_0, q8_1), byte-identical with ggml's quantize_row_*_ref and, with an
 * importance matrix, its quantize_row_*_impl. */
#include <float.h>
#include <math.h>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/quantize.h"
#include "quant/quantize_util.h"

/* Each block is built in a local struct and copied out, so dst needs no alignment. The float
 * expressions follow ggml's exactly (operand order, float division by integer constants,
 * truncating casts after adding 0.5) because any other rounding changes some bytes. */

/* The element of largest magnitude, with its sign (the first one on ties). */
static float block_signed_max(const float *x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

static float block_absmax(const float *x, int n) {
    float amax = 0.0f;
    for (int j = 0; j < n; j++)
        amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
    return amax;
}

static void block_min_max(const float *x, int n, float *min_out, float *max_out) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < min)
            min = x[j];
        if (x[j] > max)
            max = x[j];
    }
    *min_out = min;
    *max_out = max;
}

/* 32 five-bit levels: low nibbles of j and j + 16 share byte j, the fifth bits go to qh. */
static void pack_5bit(const uint8_t *L, uint8_t qs[16], uint8_t qh[4]) {
    uint32_t bits = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((L[j] & 0x0f) | (L[j + 16] & 0x0f) << 4);
        bits |= (uint32_t)((L[j] >> 4) & 1) << j;
        bits |= (uint32_t)((L[j + 16] >> 4) & 1) << (j + 16);
    }
    for (int k = 0; k < 4; k++) /* the file format is little-endian */
        qh[k] = (uint8_t)(bits >> (8 * k));
}

static void pack_4bit(const uint8_t *L, uint8_t qs[16]) {
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)(L[j] | L[j + 16] << 4);
}

/* ggml's importance weights for the legacy types: imatrix times the element's rms scale. */
static void legacy_weights(const float *x, const float *qw, float sigma2, float w[32]) {
    for (int j = 0; j < 32; j++)
        w[j] = qw[j] * sqrtf(sigma2 + x[j] * x[j]);
}

/* ---- q1_0: sign bits, scale = mean |x| ---------------------------------------------------- */

static void q1_0_block(const float *x, const float *qw, float sigma2, void *out) {
    (void)qw, (void)sigma2; /* ggml ignores the imatrix for q1_0 */
    struct block_q1_0 y;
    float sum_abs = 0.0f;
    for (int j = 0; j < 128; j++)
        sum_abs += fabsf(x[j]);
    y.d = fp32_to_fp16(sum_abs / 128);
    memset(y.qs, 0, sizeof y.qs);
    for (int j = 0; j < 128; j++)
        if (x[j] >= 0.0f)
            y.qs[j / 8] |= (uint8_t)(1u << (j % 8));
    memcpy(out, &y, sizeof y);
}

/* ---- q2_0: levels -1..2 of scale amax ------------------------------------------------------ */

static void q2_0_block(const float *x, const float *qw, float sigma2, void *out) {
    (void)qw, (void)sigma2; /* ggml ignores the imatrix for q2_0 */
    struct block_q2_0 y;
    float amax = 0.0f;
    for (int j = 0; j < 64; j++)
        if (fabsf(x[j]) > amax)
            amax = fabsf(x[j]);
    const float id = amax > 0.0f ? 1.0f / amax : 0.0f;
    y.d = fp32_to_fp16(amax);
    memset(y.qs, 0, sizeof y.qs);
    for (int j = 0; j < 64; j++) {
        int q = (int)roundf(x[j] * id) + 1; /* roundf: ties away from zero, as ggml */
        q = q < 0 ? 0 : q > 3 ? 3 : q;
        y.qs[j / 4] |= (uint8_t)(q << (2 * (j % 4)));
    }
    memcpy(out, &y, sizeof y);
}

/* ---- q4_0 / q5_0: symmetric, the extreme element maps to the lowest level ----------------- */

/* Levels of the reference path: d = max / -half, q = min(top, trunc(x/d + half + 0.5)). */
static float sym_ref_levels(const float *x, int half, uint8_t L[32]) {
    const float d = block_signed_max(x, 32) / -half;
    const float id = d ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; j++) {
        const int q = (int)(x[j] * id + ((float)half + 0.5f));
        L[j] = (uint8_t)(q < 2 * half - 1 ? q : 2 * half - 1);
    }
    return d;
}

/* Levels of the imatrix path: make_qx_quants under the weighted error. */
static float sym_imatrix_levels(const float *x, const float *qw, float sigma2, int half,
                                uint8_t L[32]) {
    float w[32];
    int8_t Ls[32];
    legacy_weights(x, qw, sigma2, w);
    const float d = make_qx_quants(32, half, x, Ls, w);
    for (int j = 0; j < 32; j++)
        L[j] = (uint8_t)Ls[j];
    return d;
}

static void q4_0_block(const float *x, const float *qw, float sigma2, void *out) {
    struct block_q4_0 y;
    uint8_t L[32];
    const float d = qw ? sym_imatrix_levels(x, qw, sigma2, 8, L) : sym_ref_levels(x, 8, L);
    y.d = fp32_to_fp16(d);
    pack_4bit(L, y.qs);
    memcpy(out, &y, sizeof y);
}

static void q5_0_block(const float *x, const float *qw, float sigma2, void *out) {
    struct block_q5_0 y;
    uint8_t L[32];
    const float d = qw ? sym_imatrix_levels(x, qw, sigma2, 16, L) : sym_ref_levels(x, 16, L);
    y.d = fp32_to_fp16(d);
    pack_5bit(L, y.qs, y.qh);
    memcpy(out, &y, sizeof y);
}

/* ---- q4_1 / q5_1: scale and offset -------------------------------------------------------- */

/* Reference: min..max split into nmax steps, q = trunc((x - min)/d + 0.5); q4_1 caps at 15
 * while q5_1 keeps ggml's uncapped byte (masked to 5 bits when packed). Returns d, sets *m. */
static float affine_ref_levels(const float *x, int nmax, bool cap, uint8_t L[32], float *m) {
    float min, max;
    block_min_max(x, 32, &min, &max);
    const float d = (max - min) / nmax;
    const float id = d ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; j++) {
        const int q = (int)((x[j] - min) * id + 0.5f);
        L[j] = (uint8_t)(cap && q > nmax ? nmax : q);
    }
    *m = min;
    return d;
}

/* Imatrix path: make_qkx_quants (ggml's make_qkx3_quants) on the weighted error. */
static float affine_imatrix_levels(const float *x, const float *qw, float sigma2, int nmax,
                                   uint8_t L[32], float *m) {
    float w[32], min;
    uint8_t Laux[32];
    legacy_weights(x, qw, sigma2, w);
    const float d = make_qkx_quants(32, nmax, x, w, L, &min, Laux, -0.9f, 0.05f, 36, false);
    *m = -min;
    return d;
}

static void q4_1_block(const float *x, const float *qw, float sigma2, void *out) {
    struct block_q4_1 y;
    uint8_t L[32];
    float m;
    const float d = qw ? affine_imatrix_levels(x, qw, sigma2, 15, L, &m)
                       : affine_ref_levels(x, 15, true, L, &m);
    y.d = fp32_to_fp16(d);
    y.m = fp32_to_fp16(m);
    pack_4bit(L, y.qs);
    memcpy(out, &y, sizeof y);
}

static void q5_1_block(const float *x, const float *qw, float sigma2, void *out) {
    struct block_q5_1 y;
    uint8_t L[32];
    float m;
    const float d = qw ? affine_imatrix_levels(x, qw, sigma2, 31, L, &m)
                       : affine_ref_levels(x, 31, false, L, &m);
    y.d = fp32_to_fp16(d);
    y.m = fp32_to_fp16(m);
    pack_5bit(L, y.qs, y.qh);
    memcpy(out, &y, sizeof y);
}

/* ---- q8_0 / q8_1: d = amax / 127, q = roundf(x / d) --------------------------------------- */

static float q8_levels(const float *x, int8_t qs[32]) {
    const float d = block_absmax(x, 32) / 127;
    const float id = d ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; j++)
        qs[j] = (int8_t)roundf(x[j] * id);
    return d;
}

static void q8_0_block(const float *x, const float *qw, float sigma2, void *out) {
    (void)qw, (void)sigma2; /* ggml ignores the imatrix for q8_0 */
    struct block_q8_0 y;
    y.d = fp32_to_fp16(q8_levels(x, y.qs));
    memcpy(out, &y, sizeof y);
}

static void q8_1_block(const float *x, const float *qw, float sigma2, void *out) {
    (void)qw, (void)sigma2;
    struct block_q8_1 y;
    const float d = q8_levels(x, y.qs);
    int sum = 0;
    for (int j = 0; j < 32; j++)
        sum += y.qs[j];
    y.d = fp32_to_fp16(d);
    y.s = fp32_to_fp16(sum * d); /* d * sum(q), for dot products with q4_1 / q5_1 */
    memcpy(out, &y, sizeof y);
}

/* ---- entry points ---------------------------------------------------------------------------- */

#define LEGACY_ENTRY_(name, block_size, imx)                                                       \
    size_t quant_##name(const float *src, void *dst, int64_t n_rows, int64_t n_per_row,            \
                        const float *imatrix) {                                                    \
        (void)imatrix;                                                                             \
        return quant_rows(src, dst, n_rows, n_per_row, imx, block_size,                            \
                          sizeof(struct block_##name), name##_block);                              \
    }

/* The imatrix is passed on only where ggml's quantize_<type> uses it. */
LEGACY_ENTRY_(q1_0, 128, NULL)
LEGACY_ENTRY_(q2_0, 64, NULL)
LEGACY_ENTRY_(q4_0, 32, imatrix)
LEGACY_ENTRY_(q4_1, 32, imatrix)
LEGACY_ENTRY_(q5_0, 32, imatrix)
LEGACY_ENTRY_(q5_1, 32, imatrix)
LEGACY_ENTRY_(q8_0, 32, NULL)
LEGACY_ENTRY_(q8_1, 32, NULL)
