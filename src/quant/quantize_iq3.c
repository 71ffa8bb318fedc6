/* quantize_iq3.c: reference quantizers to iq3_xxs and iq3_s (ggml's quantize_iq3_xxs/_s). */
#include <math.h>
#include <string.h>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/iq_grid_index.h"
#include "quant/quantize.h"
#include "quant/quantize_util.h"

/* Both types cut a super-block of 256 into 8 sub-blocks of 32 = 8 groups of 4 elements. Each
 * group is a point of a 3-bit grid (256 points for iq3_xxs, 512 for iq3_s) times signs, each
 * sub-block has a 4-bit scale, the super-block an fp16 one. iq3_xxs stores 7 sign bits per 8
 * elements (even parity implied), iq3_s all 8. The fits run in iq_fit_subblock; the constants
 * are ggml's. */

#define IQ3_SUB 32

static const struct iq_fit fit_iq3_xxs = {
    .n = IQ3_SUB,
    .kmax = 8,
    .even_parity = true,
    .zero_below = 1e-8f,
    .try_lo = -15,
    .try_hi = 15,
    .step = 0.2f,
    .refit = IQ_REFIT_OFF_GRID,
    .start_on_grid = true,
};

/* ggml's iq3_s skips only an exactly-zero sub-block (!max): below the smallest subnormal. */
static const struct iq_fit fit_iq3_s = {
    .n = IQ3_SUB,
    .kmax = 8,
    .even_parity = false,
    .zero_below = 0x1p-149f,
    .try_lo = -9,
    .try_hi = 9,
    .step = 0.2f,
    .refit = IQ_REFIT_ALL_IF_OFF,
    .start_on_grid = false,
};

/* Twice the mean square of a super-block: the sigma2 of the imatrix weights. */
static float super_sigma2(const float *x) {
    float sumx2 = 0;
    for (int i = 0; i < QK_SUPER; i++)
        sumx2 += x[i] * x[i];
    return 2 * sumx2 / QK_SUPER;
}

/* Error weights of one sub-block: imatrix * sqrt(sigma2 + x^2), or x^2 without an imatrix. */
static void sub_weights(const float *xb, const float *qw, float sigma2, float *weight) {
    for (int i = 0; i < IQ3_SUB; i++)
        weight[i] = qw ? qw[i] * sqrtf(sigma2 + xb[i] * xb[i]) : xb[i] * xb[i];
}

static void put_le32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* iq3_xxs qs: 64 grid-point bytes, then per sub-block a 32-bit word of 4x7 sign bits with the
 * 4-bit scale on top. The fp16 scale is max_scale/31 with ggml's 1.0125 fudge factor. */
static void quantize_superblock_iq3_xxs(const struct iq_grid *g, const float *x, const float *qw,
                                        struct block_iq3_xxs *y) {
    float weight[IQ3_SUB], scales[QK_SUPER / IQ3_SUB], max_scale = 0;
    uint32_t words[QK_SUPER / IQ3_SUB] = {0};
    const float sigma2 = super_sigma2(x);
    memset(y, 0, sizeof *y);
    for (int ib = 0; ib < QK_SUPER / IQ3_SUB; ib++) {
        uint16_t points[IQ3_SUB / 4];
        uint8_t signs[IQ3_SUB / 8];
        const float *xb = x + IQ3_SUB * ib;
        sub_weights(xb, qw ? qw + IQ3_SUB * ib : NULL, sigma2, weight);
        scales[ib] = 0;
        if (!iq_fit_subblock(g, &fit_iq3_xxs, xb, weight, &scales[ib], points, signs))
            continue;
        for (int k = 0; k < IQ3_SUB / 4; k++)
            y->qs[8 * ib + k] = (uint8_t)points[k];
        for (int k = 0; k < IQ3_SUB / 8; k++)
            words[ib] |= (uint32_t)(signs[k] & 127) << (7 * k);
        max_scale = max_scale > scales[ib] ? max_scale : scales[ib];
    }
    if (!max_scale) { /* nothing but empty or zero-scale sub-blocks: ggml stores all zeros */
        memset(y->qs, 0, sizeof y->qs);
        return;
    }
    const float d = max_scale / 31;
    y->d = fp32_to_fp16(d * 1.0125f);
    const float id = 1 / d;
    for (int ib = 0; ib < QK_SUPER / IQ3_SUB; ib++) {
        words[ib] |= (uint32_t)iq_scale_code(id, scales[ib], 15) << 28;
        put_le32(y->qs + QK_SUPER / 4 + 4 * ib, words[ib]);
    }
}

/* iq3_s: qs holds the low 8 bits of each grid point, qh the 9th bits (a byte per sub-block),
 * signs 8 bits per 8 elements, scales two 4-bit codes per byte; fudge factor 1.033.
 * ggml advances its qs and signs write positions only past sub-blocks it stored, so each
 * all-zero sub-block shifts the later ones' points and signs down by one slot (qh and scales
 * stay indexed by sub-block). Files depend on those bytes, so the same happens here. */
static void quantize_superblock_iq3_s(const struct iq_grid *g, const float *x, const float *qw,
                                      struct block_iq3_s *y) {
    float weight[IQ3_SUB], scales[QK_SUPER / IQ3_SUB], max_scale = 0;
    const float sigma2 = super_sigma2(x);
    int slot = 0; /* sub-blocks stored so far */
    memset(y, 0, sizeof *y);
    for (int ib = 0; ib < QK_SUPER / IQ3_SUB; ib++) {
        uint16_t points[IQ3_SUB / 4];
        uint8_t signs[IQ3_SUB / 8];
        const float *xb = x + IQ3_SUB * ib;
        sub_weights(xb, qw ? qw + IQ3_SUB * ib : NULL, sigma2, weight);
        scales[ib] = 0;
        if (!iq_fit_subblock(g, &fit_iq3_s, xb, weight, &scales[ib], points, signs))
            continue;
        for (int k = 0; k < IQ3_SUB / 4; k++) {
            y->qs[8 * slot + k] = (uint8_t)points[k];
            y->qh[ib] |= (uint8_t)((points[k] >> 8) << k);
        }
        memcpy(y->signs + 4 * slot, signs, sizeof signs);
        slot++;
        max_scale = max_scale > scales[ib] ? max_scale : scales[ib];
    }
    if (!max_scale)
        return;
    const float d = max_scale / 31;
    y->d = fp32_to_fp16(d * 1.033f);
    const float id = 1 / d;
    for (int ib = 0; ib < QK_SUPER / IQ3_SUB; ib += 2)
        y->scales[ib / 2] = (uint8_t)(iq_scale_code(id, scales[ib], 15) |
                                      iq_scale_code(id, scales[ib + 1], 15) << 4);
}

/* One block for quant_rows (the grid lookup is a pthread_once check after the first). */
static void block_iq3_xxs(const float *x, const float *qw, float row_sigma2, void *out) {
    (void)row_sigma2;
    struct block_iq3_xxs y;
    quantize_superblock_iq3_xxs(iq_grid_get(IQ_GRID_IQ3XXS), x, qw, &y);
    memcpy(out, &y, sizeof y);
}

size_t quant_iq3_xxs(const float *src, void *dst, int64_t n_rows, int64_t n_per_row,
                     const float *imatrix) {
    return quant_rows(src, dst, n_rows, n_per_row, imatrix, QK_SUPER, sizeof(struct block_iq3_xxs),
                      block_iq3_xxs);
}

/* One block for quant_rows (the grid lookup is a pthread_once check after the first). */
static void block_iq3_s(const float *x, const float *qw, float row_sigma2, void *out) {
    (void)row_sigma2;
    struct block_iq3_s y;
    quantize_superblock_iq3_s(iq_grid_get(IQ_GRID_IQ3S), x, qw, &y);
    memcpy(out, &y, sizeof y);
}

size_t quant_iq3_s(const float *src, void *dst, int64_t n_rows, int64_t n_per_row,
                   const float *imatrix) {
    return quant_rows(src, dst, n_rows, n_per_row, imatrix, QK_SUPER, sizeof(struct block_iq3_s),
                      block_iq3_s);
}
