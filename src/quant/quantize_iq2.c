/* quantize_iq2.c: reference quantizers to iq2_xxs, iq2_xs and iq2_s (ggml's quantize_iq2_*). */
#include <math.h>
#include <string.h>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/iq_grid_index.h"
#include "quant/quantize.h"

/* The three types code groups of 8 elements as a point of a 2-bit grid (256, 512 or 1024
 * points) times signs, with 4-bit sub-block scales (per 32 for iq2_xxs, per 16 for the others)
 * under an fp16 super-block scale. iq2_xxs and iq2_xs store 7 sign bits per group (even
 * parity implied), iq2_s all 8. The fits run in iq_fit_subblock; the constants are ggml's.
 *
 * iq2_xxs and iq2_xs are only defined with an importance matrix (llama.cpp refuses to make
 * them without one, and so does ox_quantize); called directly with imatrix NULL they weigh
 * every column 1. */

static const struct iq_fit fit_iq2_xxs = {
    .n = 32,
    .kmax = 3,
    .even_parity = true,
    .zero_below = 1e-15f,
    .start_qp = true,
    .try_lo = -6,
    .try_hi = 6,
    .step = 0.1f,
    .refit = IQ_REFIT_ALWAYS,
    .start_on_grid = true,
};

static const struct iq_fit fit_iq2_xs = {
    .n = 16,
    .kmax = 3,
    .even_parity = true,
    .zero_below = 1e-15f,
    .try_lo = -9,
    .try_hi = 9,
    .step = 0.1f,
    .refit = IQ_REFIT_OFF_GRID,
    .start_on_grid = true,
};

static const struct iq_fit fit_iq2_s = {
    .n = 16,
    .kmax = 3,
    .even_parity = false,
    .zero_below = 1e-8f,
    .try_lo = -9,
    .try_hi = 9,
    .step = 0.1f,
    .refit = IQ_REFIT_OFF_GRID,
    .start_on_grid = true,
};

static float sum_squares(const float *x) {
    float sumx2 = 0;
    for (int i = 0; i < QK_SUPER; i++)
        sumx2 += x[i] * x[i];
    return sumx2;
}

/* iq2_xxs / iq2_xs error weights: imatrix * sqrt(sigma2 + x^2), sigma2 the super-block's
 * mean square (not twice it, unlike the other i-quants). */
static void imatrix_weights(const float *xb, const float *qw, int n, float sigma2, float *weight) {
    for (int i = 0; i < n; i++)
        weight[i] = (qw ? qw[i] : 1.0f) * sqrtf(sigma2 + xb[i] * xb[i]);
}

static void put_le32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* iq2_xxs qs, per sub-block of 32: a word of 4 grid-point bytes, then a word of 4x7 sign bits
 * with the 4-bit scale on top. */
static void quantize_superblock_iq2_xxs(const struct iq_grid *g, const float *x, const float *qw,
                                        struct block_iq2_xxs *y) {
    float weight[32], scales[QK_SUPER / 32], max_scale = 0;
    uint32_t words[2 * (QK_SUPER / 32)] = {0};
    const float sigma2 = sum_squares(x) / QK_SUPER;
    memset(y, 0, sizeof *y);
    for (int ib = 0; ib < QK_SUPER / 32; ib++) {
        uint16_t points[4];
        uint8_t signs[4];
        const float *xb = x + 32 * ib;
        imatrix_weights(xb, qw ? qw + 32 * ib : NULL, 32, sigma2, weight);
        scales[ib] = 0;
        if (!iq_fit_subblock(g, &fit_iq2_xxs, xb, weight, &scales[ib], points, signs))
            continue;
        for (int k = 0; k < 4; k++) {
            words[2 * ib] |= (uint32_t)points[k] << (8 * k);
            words[2 * ib + 1] |= (uint32_t)(signs[k] & 127) << (7 * k);
        }
        max_scale = max_scale > scales[ib] ? max_scale : scales[ib];
    }
    if (!max_scale)
        return; /* all zero, d = 0 */
    const float d = max_scale / 31;
    y->d = fp32_to_fp16(d);
    const float id = 1 / d;
    for (int ib = 0; ib < QK_SUPER / 32; ib++)
        words[2 * ib + 1] |= (uint32_t)iq_scale_code(id, scales[ib], 15) << 28;
    for (int i = 0; i < 2 * (QK_SUPER / 32); i++)
        put_le32((uint8_t *)y->qs + 4 * i, words[i]);
}

/* iq2_xs: per group a 16-bit word, 9-bit grid point | 7 sign bits << 9; scales two 4-bit
 * codes per byte (sub-blocks of 16). */
static void quantize_superblock_iq2_xs(const struct iq_grid *g, const float *x, const float *qw,
                                       struct block_iq2_xs *y) {
    float weight[16], scales[QK_SUPER / 16], max_scale = 0;
    const float sigma2 = sum_squares(x) / QK_SUPER;
    memset(y, 0, sizeof *y);
    for (int ib = 0; ib < QK_SUPER / 16; ib++) {
        uint16_t points[2];
        uint8_t signs[2];
        const float *xb = x + 16 * ib;
        imatrix_weights(xb, qw ? qw + 16 * ib : NULL, 16, sigma2, weight);
        scales[ib] = 0;
        if (!iq_fit_subblock(g, &fit_iq2_xs, xb, weight, &scales[ib], points, signs))
            continue;
        for (int k = 0; k < 2; k++)
            y->qs[2 * ib + k] = (uint16_t)(points[k] | (signs[k] & 127) << 9);
        max_scale = max_scale > scales[ib] ? max_scale : scales[ib];
    }
    if (!max_scale) { /* ggml clears the grid words; d and scales stay 0 */
        memset(y->qs, 0, sizeof y->qs);
        return;
    }
    const float d = max_scale / 31;
    y->d = fp32_to_fp16(d);
    const float id = 1 / d;
    for (int ib = 0; ib < QK_SUPER / 16; ib++)
        y->scales[ib / 2] |= (uint8_t)(iq_scale_code(id, scales[ib], 15) << 4 * (ib % 2));
}

/* iq2_s error weights: imatrix * sqrt(sigma2 + x^2), or sigma2/4 + x^2 without an imatrix;
 * sigma2 is twice the super-block's mean square. */
static void iq2_s_weights(const float *xb, const float *qw, float sigma2, float *weight) {
    for (int i = 0; i < 16; i++)
        weight[i] = qw ? qw[i] * sqrtf(sigma2 + xb[i] * xb[i]) : 0.25f * sigma2 + xb[i] * xb[i];
}

/* iq2_s: qs holds the low 8 bits of the 32 grid points, then 32 sign bytes; qh the top 2 bits
 * of each point (4 per byte); scales two 4-bit codes per byte; fudge factor 0.9875. */
static void quantize_superblock_iq2_s(const struct iq_grid *g, const float *x, const float *qw,
                                      struct block_iq2_s *y) {
    float weight[16], scales[QK_SUPER / 16], max_scale = 0;
    const float sigma2 = 2 * sum_squares(x) / QK_SUPER;
    memset(y, 0, sizeof *y);
    for (int ib = 0; ib < QK_SUPER / 16; ib++) {
        uint16_t points[2];
        uint8_t signs[2];
        const float *xb = x + 16 * ib;
        iq2_s_weights(xb, qw ? qw + 16 * ib : NULL, sigma2, weight);
        scales[ib] = 0;
        if (!iq_fit_subblock(g, &fit_iq2_s, xb, weight, &scales[ib], points, signs))
            continue;
        for (int k = 0; k < 2; k++) {
            const int i8 = 2 * ib + k;
            y->qs[i8] = (uint8_t)points[k];
            y->qh[i8 / 4] |= (uint8_t)((points[k] >> 8) << 2 * (i8 % 4));
            y->qs[QK_SUPER / 8 + i8] = signs[k];
        }
        max_scale = max_scale > scales[ib] ? max_scale : scales[ib];
    }
    if (!max_scale)
        return;
    const float d = max_scale / 31;
    y->d = fp32_to_fp16(d * 0.9875f);
    const float id = 1 / d;
    for (int ib = 0; ib < QK_SUPER / 16; ib++)
        y->scales[ib / 2] |= (uint8_t)(iq_scale_code(id, scales[ib], 15) << 4 * (ib % 2));
}

/* One function per type over rows of super-blocks; the imatrix is per column, so every row
 * reads the same weights. */
#define IQ2_ROWS_(name, grid_id)                                                                   \
    size_t quant_##name(const float *src, void *dst, int64_t n_rows, int64_t n_per_row,            \
                        const float *imatrix) {                                                    \
        const struct iq_grid *g = iq_grid_get(grid_id);                                            \
        uint8_t *out = dst;                                                                        \
        for (int64_t r = 0; r < n_rows; r++) {                                                     \
            for (int64_t b = 0; b < n_per_row / QK_SUPER; b++) {                                   \
                struct block_##name y;                                                             \
                quantize_superblock_##name(g, src + r * n_per_row + b * QK_SUPER,                  \
                                           imatrix ? imatrix + b * QK_SUPER : NULL, &y);           \
                memcpy(out, &y, sizeof y);                                                         \
                out += sizeof y;                                                                   \
            }                                                                                      \
        }                                                                                          \
        return (size_t)(out - (uint8_t *)dst);                                                     \
    }
IQ2_ROWS_(iq2_xxs, IQ_GRID_IQ2XXS)
IQ2_ROWS_(iq2_xs, IQ_GRID_IQ2XS)
IQ2_ROWS_(iq2_s, IQ_GRID_IQ2S)
#undef IQ2_ROWS_
