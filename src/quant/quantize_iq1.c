/* quantize_iq1.c: reference quantizers to iq1_s and iq1_m (ggml's quantize_iq1_s/_m). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/iq_grid_index.h"
#include "quant/quantize.h"
#include "quant/quantize_util.h"

/* Both types code groups of 8 elements as a point of the 2048-point ternary grid (-1, 0, +1 per
 * element, levels 0..2 here), shifted by +-delta per sub-block, times a 3-bit sub-block scale
 * and a super-block fp16 scale. iq1_s: sub-blocks of 32 with one shift each; iq1_m: sub-blocks
 * of 16 whose two groups choose their shifts separately, and the fp16 scale is spread over the
 * top nibbles of the scale words. With 3 values the best split of a sub-block into -1/0/+1 is
 * found exhaustively over the sorted values, then snapped to the grid. Arithmetic as ggml's.
 *
 * iq1_s needs an importance matrix (llama.cpp and ox_quantize refuse without one); called
 * directly with imatrix NULL it weighs every column 1. */

#define IQ1_DELTA 0.125f /* IQ1S_DELTA == IQ1M_DELTA */

/* The three values each level stands for, with the shift +delta or -delta. */
static const float values_plus[3] = {-1 + IQ1_DELTA, IQ1_DELTA, 1 + IQ1_DELTA};
static const float values_minus[3] = {-1 - IQ1_DELTA, -IQ1_DELTA, 1 - IQ1_DELTA};

/* Indices 0..n-1 ordered by x ascending, equal values in index order. ggml sorts (value,
 * index) pairs with qsort comparing values only; glibc's qsort is a stable merge sort for
 * arrays this small, so equal values keep their index order, as this insertion sort does. */
static void sort_by_value(const float *x, int n, int *order) {
    for (int j = 0; j < n; j++) {
        int i = j;
        while (i > 0 && x[order[i - 1]] > x[j]) {
            order[i] = order[i - 1];
            i--;
        }
        order[i] = j;
    }
}

/* The neighbour of key nearest to x at this scale, by sum w * (scale * v[level] - x)^2 (first
 * best wins); levels to L. ggml's iq1_find_best_neighbour2. Only NaN or infinite distances
 * leave no winner: ggml then scans the whole grid (reading past its input) and asserts; here the
 * first neighbour is kept. */
static int nearest_point(const struct iq_grid *g, unsigned key, const float *x, const float *w,
                         float scale, const float *v, int8_t *L) {
    const uint16_t *nb = iq_grid_neighbours(g, key);
    float best_d2 = FLT_MAX;
    int best = nb[1];
    for (int j = 1; j <= nb[0]; j++) {
        const uint8_t *lp = g->levels + 8 * nb[j];
        float d2 = 0;
        for (int i = 0; i < 8; i++) {
            const float q = v[lp[i]];
            const float diff = scale * q - x[i];
            d2 += w[i] * diff * diff;
        }
        if (d2 < best_d2) {
            best_d2 = d2;
            best = nb[j];
        }
    }
    for (int i = 0; i < 8; i++)
        L[i] = (int8_t)g->levels[8 * best + i];
    return best;
}

/* Grid point of each group of 8 levels, or the nearest neighbour for the shift values v[g] of
 * group g; returns whether all groups were grid points. */
static bool snap_groups(const struct iq_grid *g, int n_groups, const float *xb, const float *w,
                        float scale, const float *const *v, int8_t *L, uint16_t *points) {
    bool all_on_grid = true;
    for (int k = 0; k < n_groups; k++) {
        const unsigned key = iq_grid_key(g, L + 8 * k);
        int p = iq_grid_point(g, key);
        if (p < 0) {
            all_on_grid = false;
            p = nearest_point(g, key, xb + 8 * k, w + 8 * k, scale, v[k], L + 8 * k);
        }
        points[k] = (uint16_t)p;
    }
    return all_on_grid;
}

/* Least-squares scale of the chosen points (sum w*q*x / sum w*q^2), or scale unchanged when
 * either sum is not positive. */
static float refit_scale(const struct iq_grid *g, int n_groups, const float *xb, const float *w,
                         const float *const *v, const uint16_t *points, float scale) {
    float sumqx = 0, sumq2 = 0;
    for (int k = 0; k < n_groups; k++) {
        const uint8_t *lp = g->levels + 8 * points[k];
        for (int j = 0; j < 8; j++) {
            const float wj = w[8 * k + j];
            const float q = v[k][lp[j]];
            sumqx += wj * q * xb[8 * k + j];
            sumq2 += wj * q * q;
        }
    }
    return sumqx > 0 && sumq2 > 0 ? sumqx / sumq2 : scale;
}

/* Levels from a split of the sorted order: the first i1 elements -1, up to i2 0, the rest +1. */
static void levels_from_split(const int *order, int n, int i1, int i2, int8_t *L) {
    for (int j = 0; j < n; j++)
        L[order[j]] = (int8_t)(j < i1 ? 0 : j < i2 ? 1 : 2);
}

/* Mean square of a super-block, doubled: the sigma2 of the imatrix weights. */
static float super_sigma2(const float *x) {
    float sumx2 = 0;
    for (int i = 0; i < QK_SUPER; i++)
        sumx2 += x[i] * x[i];
    return 2 * sumx2 / QK_SUPER;
}

/* ---- iq1_s ------------------------------------------------------------------------------- */

/* The best split of one sub-block of 32 and its shift (+1: values_plus, -1: values_minus),
 * using prefix sums over the sorted order: for a split (i1, i2) the sums are linear in the
 * three groups' sums of w*x and w. Returns false when no split has a positive sum w*q^2. */
static bool best_split_iq1_s(const float *xb, const float *w, const int *order, float *scale,
                             int *i1_out, int *i2_out, int *shift) {
    float sumx[33], sumw[33];
    sumx[0] = sumw[0] = 0;
    for (int j = 0; j < 32; j++) {
        const int i = order[j];
        sumx[j + 1] = sumx[j] + w[i] * xb[i];
        sumw[j + 1] = sumw[j] + w[i];
    }
    float best = -FLT_MAX;
    *shift = 0;
    for (int i1 = 0; i1 <= 32; i1++) {
        for (int i2 = i1; i2 <= 32; i2++) {
            for (int s = 1; s >= -1; s -= 2) {
                const float *v = s == 1 ? values_plus : values_minus;
                const float sumqx = (sumx[i1] - sumx[0]) * v[0] + (sumx[i2] - sumx[i1]) * v[1] +
                                    (sumx[32] - sumx[i2]) * v[2];
                const float sumq2 = (sumw[i1] - sumw[0]) * v[0] * v[0] +
                                    (sumw[i2] - sumw[i1]) * v[1] * v[1] +
                                    (sumw[32] - sumw[i2]) * v[2] * v[2];
                if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                    *scale = sumqx / sumq2;
                    best = *scale * sumqx;
                    *i1_out = i1;
                    *i2_out = i2;
                    *shift = s;
                }
            }
        }
    }
    return *shift != 0;
}

/* One sub-block of 32: grid points into points[4], the scale and shift; false to leave it
 * empty (scale and shift untouched: the caller's 0 and +1, as ggml stores). */
static bool fit_iq1_s(const struct iq_grid *g, const float *xb, const float *w, float *scale,
                      int *shift, uint16_t *points) {
    float max = fabsf(xb[0]);
    for (int i = 1; i < 32; i++)
        max = max > fabsf(xb[i]) ? max : fabsf(xb[i]);
    if (max < 1e-12f) /* ggml's GROUP_MAX_EPS_IQ1_S */
        return false;
    int order[32], i1 = -1, i2 = -1, sh;
    int8_t L[32];
    float s = max;
    sort_by_value(xb, 32, order);
    if (!best_split_iq1_s(xb, w, order, &s, &i1, &i2, &sh))
        return false;
    levels_from_split(order, 32, i1, i2, L);
    if (s < 0) { /* mirror the levels so the scale is positive */
        for (int j = 0; j < 32; j++)
            L[j] = (int8_t)(2 - L[j]);
        s = -s;
        sh = -sh;
    }
    const float *v = sh == 1 ? values_plus : values_minus;
    const float *const vs[4] = {v, v, v, v};
    if (!snap_groups(g, 4, xb, w, s, vs, L, points))
        s = refit_scale(g, 4, xb, w, vs, points, s);
    *scale = s;
    *shift = sh;
    return true;
}

/* qs: low 8 bits of the 32 grid points; qh per sub-block: the top 3 bits of its 4 points,
 * the 3-bit scale at bit 12 and the shift's sign (set for -delta) at bit 15. */
static void quantize_superblock_iq1_s(const struct iq_grid *g, const float *x, const float *qw,
                                      struct block_iq1_s *y) {
    float w[32], scales[QK_SUPER / 32], max_scale = 0;
    int shifts[QK_SUPER / 32];
    const float sigma2 = super_sigma2(x);
    memset(y, 0, sizeof *y);
    for (int ib = 0; ib < QK_SUPER / 32; ib++) {
        const float *xb = x + 32 * ib;
        uint16_t points[4];
        for (int i = 0; i < 32; i++)
            w[i] = (qw ? qw[32 * ib + i] : 1.0f) * sqrtf(sigma2 + xb[i] * xb[i]);
        scales[ib] = 0;
        shifts[ib] = 1;
        if (!fit_iq1_s(g, xb, w, &scales[ib], &shifts[ib], points))
            continue;
        uint16_t h = 0;
        for (int k = 0; k < 4; k++) {
            y->qs[4 * ib + k] = (uint8_t)points[k];
            h |= (uint16_t)((points[k] >> 8) << 3 * k);
        }
        y->qh[ib] = h;
        max_scale = max_scale > scales[ib] ? max_scale : scales[ib];
    }
    if (!max_scale)
        return;
    const float d = max_scale / 15;
    y->d = fp32_to_fp16(d * 1.125f);
    const float id = 1 / d;
    for (int ib = 0; ib < QK_SUPER / 32; ib++) {
        const int l = iq_scale_code(id, scales[ib], 7) | (shifts[ib] == -1 ? 8 : 0);
        y->qh[ib] |= (uint16_t)(l << 12);
    }
}

/* One block for quant_rows (the grid lookup is a pthread_once check after the first). */
static void block_iq1_s(const float *x, const float *qw, float row_sigma2, void *out) {
    (void)row_sigma2;
    struct block_iq1_s y;
    quantize_superblock_iq1_s(iq_grid_get(IQ_GRID_IQ1S), x, qw, &y);
    memcpy(out, &y, sizeof y);
}

size_t quant_iq1_s(const float *src, void *dst, int64_t n_rows, int64_t n_per_row,
                   const float *imatrix) {
    return quant_rows(src, dst, n_rows, n_per_row, imatrix, QK_SUPER, sizeof(struct block_iq1_s),
                      block_iq1_s);
}

/* ---- iq1_m ------------------------------------------------------------------------------- */

/* The values group k (0 or 1) of an iq1_m sub-block uses under shift code c: bit 1 of c is the
 * first group's shift, bit 0 the second's (clear: +delta). */
static const float *iq1_m_values(int c, int k) {
    const bool minus = k == 0 ? c >= 2 : c % 2 == 1;
    return minus ? values_minus : values_plus;
}

/* The best split of one sub-block of 16 over the 4 shift codes. The sums are accumulated
 * afresh for every split in sorted order (not from prefix sums): ggml's rounding. */
static bool best_split_iq1_m(const float *xb, const float *w, const int *order, float *scale,
                             int *i1_out, int *i2_out, int *code) {
    float best = -FLT_MAX;
    *code = -1;
    for (int i1 = 0; i1 <= 16; i1++) {
        for (int i2 = i1; i2 <= 16; i2++) {
            float sumqx[4] = {0}, sumq2[4] = {0};
            for (int j = 0; j < 16; j++) {
                const int i = order[j], level = j < i1 ? 0 : j < i2 ? 1 : 2;
                for (int c = 0; c < 4; c++) {
                    const float v = iq1_m_values(c, i >= 8)[level];
                    sumqx[c] += w[i] * v * xb[i];
                    sumq2[c] += w[i] * v * v;
                }
            }
            for (int c = 0; c < 4; c++) {
                if (sumq2[c] > 0 && sumqx[c] * sumqx[c] > best * sumq2[c]) {
                    *scale = sumqx[c] / sumq2[c];
                    best = *scale * sumqx[c];
                    *i1_out = i1;
                    *i2_out = i2;
                    *code = c;
                }
            }
        }
    }
    return *code >= 0;
}

/* One sub-block of 16: grid points into points[2], the scale and shift code; false to leave
 * it empty (scale and code untouched: the caller's 0 and 0, as ggml stores). */
static bool fit_iq1_m(const struct iq_grid *g, const float *xb, const float *w, float *scale,
                      int *code, uint16_t *points) {
    float max = fabsf(xb[0]);
    for (int i = 1; i < 16; i++)
        max = max > fabsf(xb[i]) ? max : fabsf(xb[i]);
    if (max < 1e-7f) /* ggml's GROUP_MAX_EPS_IQ1_M */
        return false;
    int order[16], i1 = -1, i2 = -1, c;
    int8_t L[16];
    float s = max;
    sort_by_value(xb, 16, order);
    if (!best_split_iq1_m(xb, w, order, &s, &i1, &i2, &c))
        return false;
    levels_from_split(order, 16, i1, i2, L);
    if (s < 0) { /* mirror levels and both shifts */
        for (int j = 0; j < 16; j++)
            L[j] = (int8_t)(2 - L[j]);
        s = -s;
        c = 3 - c;
    }
    const float *const vs[2] = {iq1_m_values(c, 0), iq1_m_values(c, 1)};
    if (!snap_groups(g, 2, xb, w, s, vs, L, points))
        s = refit_scale(g, 2, xb, w, vs, points, s);
    *scale = s;
    *code = c;
    return true;
}

static void iq1_m_weights(const float *xb, const float *qw, float sigma2, float *w) {
    for (int i = 0; i < 16; i++)
        w[i] = qw ? qw[i] * sqrtf(sigma2 + xb[i] * xb[i]) : xb[i] * xb[i];
}

/* With every sub-block coded, the 3-bit scale codes l go into the scale words (4 per 16-bit
 * word) and the shift codes into qh; the super-scale is then refitted by least squares over
 * the whole super-block as coded (values * (2l+1)), times ggml's 1.1125 fudge factor, and its
 * fp16 bits spread over the top nibbles of the 4 scale words. */
static void finish_iq1_m(const struct iq_grid *g, const float *x, const float *qw, float sigma2,
                         const float *scales, const int *codes, float max_scale,
                         struct block_iq1_m *y) {
    static const uint8_t code_bits[4] = {0x00, 0x80, 0x08, 0x88};
    uint16_t sc[4] = {0};
    float d = max_scale / 15;
    const float id = 1 / d;
    float sumqx = 0, sumq2 = 0, w[16];
    for (int ib = 0; ib < QK_SUPER / 16; ib++) {
        const float *xb = x + 16 * ib;
        const int l = iq_scale_code(id, scales[ib], 7);
        sc[ib / 4] |= (uint16_t)(l << 3 * (ib % 4));
        y->qh[ib] |= code_bits[codes[ib]];
        iq1_m_weights(xb, qw ? qw + 16 * ib : NULL, sigma2, w);
        for (int k = 0; k < 2; k++) {
            const float *v = iq1_m_values(codes[ib], k);
            const int p = y->qs[2 * ib + k] | ((y->qh[ib] << (8 - 4 * k)) & 0x700);
            for (int j = 0; j < 8; j++) {
                const float q = v[g->levels[8 * p + j]] * (2 * l + 1);
                sumqx += w[8 * k + j] * q * xb[8 * k + j];
                sumq2 += w[8 * k + j] * q * q;
            }
        }
    }
    if (sumq2 > 0)
        d = sumqx / sumq2;
    const uint16_t h = fp32_to_fp16(d * 1.1125f);
    sc[0] |= (uint16_t)((h & 0x000f) << 12);
    sc[1] |= (uint16_t)((h & 0x00f0) << 8);
    sc[2] |= (uint16_t)((h & 0x0f00) << 4);
    sc[3] |= (uint16_t)(h & 0xf000);
    for (int i = 0; i < 4; i++) { /* little-endian words */
        y->scales[2 * i] = (uint8_t)sc[i];
        y->scales[2 * i + 1] = (uint8_t)(sc[i] >> 8);
    }
}

/* qs: low 8 bits of the 32 grid points; qh per sub-block: the top 3 bits of its two points
 * (bits 0-2, 4-6) and the two shift bits (3, 7). */
static void quantize_superblock_iq1_m(const struct iq_grid *g, const float *x, const float *qw,
                                      struct block_iq1_m *y) {
    float w[16], scales[QK_SUPER / 16], max_scale = 0;
    int codes[QK_SUPER / 16];
    const float sigma2 = super_sigma2(x);
    memset(y, 0, sizeof *y);
    for (int ib = 0; ib < QK_SUPER / 16; ib++) {
        const float *xb = x + 16 * ib;
        uint16_t points[2];
        iq1_m_weights(xb, qw ? qw + 16 * ib : NULL, sigma2, w);
        scales[ib] = 0;
        codes[ib] = 0;
        if (!fit_iq1_m(g, xb, w, &scales[ib], &codes[ib], points))
            continue;
        y->qs[2 * ib] = (uint8_t)points[0];
        y->qs[2 * ib + 1] = (uint8_t)points[1];
        y->qh[ib] = (uint8_t)((points[0] >> 8) | (points[1] >> 8) << 4);
        max_scale = max_scale > scales[ib] ? max_scale : scales[ib];
    }
    if (max_scale)
        finish_iq1_m(g, x, qw, sigma2, scales, codes, max_scale, y);
}

/* One block for quant_rows (the grid lookup is a pthread_once check after the first). */
static void block_iq1_m(const float *x, const float *qw, float row_sigma2, void *out) {
    (void)row_sigma2;
    struct block_iq1_m y;
    quantize_superblock_iq1_m(iq_grid_get(IQ_GRID_IQ1S), x, qw, &y);
    memcpy(out, &y, sizeof y);
}

size_t quant_iq1_m(const float *src, void *dst, int64_t n_rows, int64_t n_per_row,
                   const float *imatrix) {
    return quant_rows(src, dst, n_rows, n_per_row, imatrix, QK_SUPER, sizeof(struct block_iq1_m),
                      block_iq1_m);
}
