/* quantize_k.c: k-quant quantizers from float (q2_K, q3_K, q4_K, q5_K, q6_K and the activation
 * type q8_K), byte-identical with ggml's quantize_row_*_ref and, given an importance matrix,
 * its quantize_row_*_impl. */
#include <math.h>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/quantize.h"
#include "quant/quantize_util.h"

/* Every type works the same way on a super-block of 256: search levels and a float scale (and
 * min) per sub-block, quantize those sub-block scales against one fp16 super-scale, then
 * requantize each element against the scale a dequantizer will actually see. Only the scale
 * search differs between the reference path and the imatrix path, so each type has two
 * "choose scales" functions and one "finish" (requantize + pack). The float arithmetic follows
 * ggml's operand order exactly, because the output must match llama.cpp byte for byte. */

static inline int clampi(int v, int lo, int hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

static float sum_sq(const float *x, int n) {
    float s = 0;
    for (int j = 0; j < n; j++)
        s += x[j] * x[j];
    return s;
}

/* ggml's imatrix weights for k-quants: imatrix times sqrt(sigma2 + x^2); returns their sum. */
static float imatrix_weights(const float *x, const float *qw, float sigma2, int n, float *w) {
    float sumw = 0;
    for (int l = 0; l < n; l++)
        w[l] = qw[l] * sqrtf(sigma2 + x[l] * x[l]);
    for (int l = 0; l < n; l++)
        sumw += w[l];
    return sumw;
}

/* Two-bit planes of q2_K and q3_K: in each half of 128, byte l holds elements l, l + 32,
 * l + 64, l + 96 from the low bits up. */
static void pack_2bit(const uint8_t L[QK_SUPER], uint8_t qs[QK_SUPER / 4]) {
    for (int j = 0; j < QK_SUPER; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] =
                (uint8_t)(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 | L[j + l + 96] << 6);
}

/* ---- q2_K: 16 x 16, 4-bit scale and min per sub-block ------------------------------------- */

static void q2_K_ref_scales(const float *x, uint8_t L[QK_SUPER], struct block_q2_K *y) {
    uint8_t Laux[16];
    float weights[16], mins[16], scales[16];
    float max_scale = 0, max_min = 0; /* the min is subtracted, so scales are positive */
    for (int j = 0; j < 16; j++) {
        for (int l = 0; l < 16; l++)
            weights[l] = fabsf(x[16 * j + l]);
        scales[j] = make_qkx_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f,
                                    0.1f, 15, true);
        if (scales[j] > max_scale)
            max_scale = scales[j];
        if (mins[j] > max_min)
            max_min = mins[j];
    }
    memset(y->scales, 0, sizeof y->scales);
    y->d = fp32_to_fp16(max_scale > 0 ? max_scale / 15.f : 0.f);
    if (max_scale > 0) {
        const float iscale = 15.f / max_scale;
        for (int j = 0; j < 16; j++) /* a negative fit wraps as ggml's byte store does */
            y->scales[j] = (uint8_t)nearest_int(iscale * scales[j]);
    }
    y->dmin = fp32_to_fp16(max_min > 0 ? max_min / 15.f : 0.f);
    if (max_min > 0) {
        const float iscale = 15.f / max_min;
        for (int j = 0; j < 16; j++)
            y->scales[j] |= (uint8_t)(nearest_int(iscale * mins[j]) << 4);
    }
}

static void q2_K_imatrix_scales(const float *x, const float *qw, uint8_t L[QK_SUPER],
                                struct block_q2_K *y) {
    uint8_t Laux[16], Ls[16], Lm[16];
    float weight[16], sw[16], mins[16], scales[16];
    const float sigma2 = sum_sq(x, QK_SUPER) / QK_SUPER;
    for (int j = 0; j < 16; j++) {
        sw[j] = imatrix_weights(x + 16 * j, qw + 16 * j, sigma2, 16, weight);
        scales[j] = make_qkx_quants(16, 3, x + 16 * j, weight, L + 16 * j, &mins[j], Laux, -0.9f,
                                    0.05f, 36, false);
    }
    /* the 4-bit sub-block scales and mins are themselves fitted under the summed weights */
    y->d = fp32_to_fp16(make_qp_quants(16, 15, scales, Ls, sw));
    y->dmin = fp32_to_fp16(make_qp_quants(16, 15, mins, Lm, sw));
    for (int j = 0; j < 16; j++)
        y->scales[j] = (uint8_t)(Ls[j] | Lm[j] << 4);
}

/* Requantize against the stored scales and pack; a sub-block whose scale rounded to zero keeps
 * the levels of the search (ggml does the same). */
static void q2_K_finish(const float *x, uint8_t L[QK_SUPER], struct block_q2_K *y) {
    const float d_all = fp16_to_fp32(y->d), m_all = fp16_to_fp32(y->dmin);
    for (int j = 0; j < 16; j++) {
        const float d = d_all * (y->scales[j] & 0xF);
        if (!d)
            continue;
        const float dm = m_all * (y->scales[j] >> 4);
        for (int ii = 0; ii < 16; ii++)
            L[16 * j + ii] = (uint8_t)clampi(nearest_int((x[16 * j + ii] + dm) / d), 0, 3);
    }
    pack_2bit(L, y->qs);
}

static void q2_K_block(const float *x, const float *qw, float sigma2, void *out) {
    (void)sigma2;
    struct block_q2_K y;
    uint8_t L[QK_SUPER];
    if (qw)
        q2_K_imatrix_scales(x, qw, L, &y);
    else
        q2_K_ref_scales(x, L, &y);
    q2_K_finish(x, L, &y);
    memcpy(out, &y, sizeof y);
}

/* ---- q3_K: 16 x 16, signed 6-bit scales, levels -4..3 with the high bit in hmask ---------- */

/* Scale j biased by 32: its low nibble in byte j (j < 8) or the high nibble of byte j - 8, its
 * top two bits in byte 8 + j % 4 at bit 2 * (j / 4). sc must start zeroed. */
static void q3_K_set_scale(uint8_t sc[12], int j, int l) {
    if (j < 8)
        sc[j] = (uint8_t)(l & 0xF);
    else
        sc[j - 8] |= (uint8_t)((l & 0xF) << 4);
    sc[8 + j % 4] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
}

static int q3_K_get_scale(const uint8_t sc[12], int j) {
    const int lo = j < 8 ? sc[j] & 0xF : sc[j - 8] >> 4;
    return (lo | ((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32;
}

static void q3_K_ref_scales(const float *x, int8_t L[QK_SUPER], struct block_q3_K *y) {
    float scales[16], max_scale = 0, amax = 0;
    for (int j = 0; j < 16; j++) {
        scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
        if (fabsf(scales[j]) > amax) {
            amax = fabsf(scales[j]);
            max_scale = scales[j];
        }
    }
    memset(y->scales, 0, sizeof y->scales);
    if (!max_scale) {
        y->d = fp32_to_fp16(0.f);
        return;
    }
    const float iscale = -32.f / max_scale; /* the largest scale maps to -32 */
    for (int j = 0; j < 16; j++)
        q3_K_set_scale(y->scales, j, clampi(nearest_int(iscale * scales[j]), -32, 31) + 32);
    y->d = fp32_to_fp16(1 / iscale);
}

static void q3_K_imatrix_scales(const float *x, const float *qw, int8_t L[QK_SUPER],
                                struct block_q3_K *y) {
    float weight[16], sw[16], scales[16];
    int8_t Ls[16];
    const float sigma2 = 2 * sum_sq(x, QK_SUPER) / QK_SUPER;
    for (int j = 0; j < 16; j++) {
        sw[j] = imatrix_weights(x + 16 * j, qw + 16 * j, sigma2, 16, weight);
        scales[j] = make_qx_quants(16, 4, x + 16 * j, L + 16 * j, weight);
    }
    memset(y->scales, 0, sizeof y->scales);
    const float d_block = make_qx_quants(16, 32, scales, Ls, sw); /* Ls already biased by 32 */
    for (int j = 0; j < 16; j++)
        q3_K_set_scale(y->scales, j, Ls[j]);
    y->d = fp32_to_fp16(d_block);
}

static void q3_K_finish(const float *x, int8_t L[QK_SUPER], struct block_q3_K *y) {
    const float d_all = fp16_to_fp32(y->d);
    for (int j = 0; j < 16; j++) {
        const float d = d_all * q3_K_get_scale(y->scales, j);
        if (!d)
            continue;
        for (int ii = 0; ii < 16; ii++)
            L[16 * j + ii] = (int8_t)(clampi(nearest_int(x[16 * j + ii] / d), -4, 3) + 4);
    }
    /* level bit 2 of element j goes to hmask[j % 32] at bit j / 32; bits 0-1 as q2_K */
    uint8_t low[QK_SUPER];
    memset(y->hmask, 0, sizeof y->hmask);
    for (int j = 0; j < QK_SUPER; j++) {
        int l = L[j];
        if (l > 3) {
            y->hmask[j % 32] |= (uint8_t)(1u << (j / 32));
            l -= 4;
        }
        low[j] = (uint8_t)l;
    }
    pack_2bit(low, y->qs);
}

static void q3_K_block(const float *x, const float *qw, float sigma2, void *out) {
    (void)sigma2;
    struct block_q3_K y;
    int8_t L[QK_SUPER];
    if (qw)
        q3_K_imatrix_scales(x, qw, L, &y);
    else
        q3_K_ref_scales(x, L, &y);
    q3_K_finish(x, L, &y);
    memcpy(out, &y, sizeof y);
}

/* ---- q4_K / q5_K: 8 x 32, 6-bit scale and min per sub-block ------------------------------- */

/* What q4_K and q5_K share: the scales field and the two fp16 super-scales. */
struct k4_head {
    uint8_t *scales;
    uint16_t *d, *dmin;
};

/* Reference search: per sub-block weights rms(x) + |x|, grids of nmax + rmin + 0.1 k. */
static void k4_ref_scales(const float *x, int nmax, float rmin, int nstep, uint8_t L[QK_SUPER],
                          struct k4_head h) {
    uint8_t Laux[32];
    float weights[32], mins[8], scales[8];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        const float av_x = sqrtf(sum_sq(x + 32 * j, 32) / 32);
        for (int l = 0; l < 32; l++)
            weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = make_qkx_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin,
                                    0.1f, nstep, false);
        if (scales[j] > max_scale)
            max_scale = scales[j];
        if (mins[j] > max_min)
            max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < 8; j++) {
        /* ggml stores to a byte before capping at 63, so a negative value wraps then caps */
        uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)nearest_int(inv_min * mins[j]);
        k4_scale_set(h.scales, j, ls < 63 ? ls : 63, lm < 63 ? lm : 63);
    }
    *h.d = fp32_to_fp16(max_scale / 63.f);
    *h.dmin = fp32_to_fp16(max_min / 63.f);
}

/* Imatrix search; cap63: q5_K caps the fitted 6-bit values at 63, q4_K stores them as they are
 * (they differ only when a fitted scale is negative). */
static void k4_imatrix_scales(const float *x, const float *qw, int nmax, bool cap63,
                              uint8_t L[QK_SUPER], struct k4_head h) {
    uint8_t Laux[32], Ls[8], Lm[8];
    float weights[32], sw[8], mins[8], scales[8];
    const float sigma2 = 2 * sum_sq(x, QK_SUPER) / QK_SUPER;
    for (int j = 0; j < 8; j++) {
        sw[j] = imatrix_weights(x + 32 * j, qw + 32 * j, sigma2, 32, weights);
        scales[j] = make_qkx_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux,
                                    -0.9f, 0.05f, 36, false);
    }
    const float d_block = make_qp_quants(8, 63, scales, Ls, sw);
    const float m_block = make_qp_quants(8, 63, mins, Lm, sw);
    for (int j = 0; j < 8; j++) {
        const uint8_t ls = cap63 && Ls[j] > 63 ? 63 : Ls[j];
        const uint8_t lm = cap63 && Lm[j] > 63 ? 63 : Lm[j];
        k4_scale_set(h.scales, j, ls, lm);
    }
    *h.d = fp32_to_fp16(d_block);
    *h.dmin = fp32_to_fp16(m_block);
}

/* Levels 0..nmax against the stored scale and min of each sub-block. */
static void k4_requantize(const float *x, int nmax, uint8_t L[QK_SUPER], struct k4_head h) {
    const float d_all = fp16_to_fp32(*h.d), m_all = fp16_to_fp32(*h.dmin);
    for (int j = 0; j < 8; j++) {
        int sc, m;
        k4_scale_get(h.scales, j, &sc, &m);
        const float d = d_all * sc;
        if (!d)
            continue;
        const float dm = m_all * m;
        for (int ii = 0; ii < 32; ii++)
            L[32 * j + ii] = (uint8_t)clampi(nearest_int((x[32 * j + ii] + dm) / d), 0, nmax);
    }
}

static void k4_scales(const float *x, const float *qw, int nmax, uint8_t L[QK_SUPER],
                      struct k4_head h) {
    if (qw)
        k4_imatrix_scales(x, qw, nmax, nmax == 31, L, h);
    else if (nmax == 15)
        k4_ref_scales(x, 15, -1.f, 20, L, h);
    else
        k4_ref_scales(x, 31, -0.5f, 15, L, h);
    k4_requantize(x, nmax, L, h);
}

static void q4_K_block(const float *x, const float *qw, float sigma2, void *out) {
    (void)sigma2;
    struct block_q4_K y;
    uint8_t L[QK_SUPER];
    k4_scales(x, qw, 15, L, (struct k4_head){y.scales, &y.d, &y.dmin});
    /* each 64 elements: 32 bytes, sub-block 2k in the low nibbles, 2k + 1 in the high */
    for (int j = 0; j < QK_SUPER; j += 64)
        for (int l = 0; l < 32; l++)
            y.qs[j / 2 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 4);
    memcpy(out, &y, sizeof y);
}

static void q5_K_block(const float *x, const float *qw, float sigma2, void *out) {
    (void)sigma2;
    struct block_q5_K y;
    uint8_t L[QK_SUPER];
    k4_scales(x, qw, 31, L, (struct k4_head){y.scales, &y.d, &y.dmin});
    /* low nibbles as q4_K; the fifth bit of element j + l of each 64 goes to qh[l], bit
     * 2 * (j / 64) for the first 32 and the next bit up for the second 32 */
    memset(y.qh, 0, sizeof y.qh);
    for (int j = 0; j < QK_SUPER; j += 64) {
        const int bit = 2 * (j / 64);
        for (int l = 0; l < 32; l++) {
            const int l1 = L[j + l], l2 = L[j + l + 32];
            y.qh[l] |= (uint8_t)(((l1 >> 4) & 1) << bit | ((l2 >> 4) & 1) << (bit + 1));
            y.qs[j / 2 + l] = (uint8_t)((l1 & 0xF) | (l2 & 0xF) << 4);
        }
    }
    memcpy(out, &y, sizeof y);
}

/* ---- q6_K: 16 x 16, signed 8-bit scales, levels -32..31 ----------------------------------- */

/* Both paths run make_qx_quants per sub-block; ggml's imatrix path passes the raw imatrix as
 * the weights (no sigma factor), the reference path x^2 (qw NULL). */
static void q6_K_block(const float *x, const float *qw, float sigma2, void *out) {
    (void)sigma2;
    struct block_q6_K y;
    int8_t L[QK_SUPER];
    float scales[16], max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < 16; ib++) {
        scales[ib] = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, qw ? qw + 16 * ib : NULL);
        if (fabsf(scales[ib]) > max_abs_scale) {
            max_abs_scale = fabsf(scales[ib]);
            max_scale = scales[ib];
        }
    }
    if (max_abs_scale < QUANT_GROUP_MAX_EPS) { /* an all-zero super-block */
        memset(out, 0, sizeof y);
        return;
    }
    const float iscale = -128.f / max_scale;
    y.d = fp32_to_fp16(1 / iscale);
    for (int ib = 0; ib < 16; ib++) {
        const int s = nearest_int(iscale * scales[ib]);
        y.scales[ib] = (int8_t)(s < 127 ? s : 127);
    }
    const float d_all = fp16_to_fp32(y.d);
    for (int j = 0; j < 16; j++) {
        const float d = d_all * y.scales[j];
        if (!d)
            continue;
        for (int ii = 0; ii < 16; ii++)
            L[16 * j + ii] = (int8_t)(clampi(nearest_int(x[16 * j + ii] / d), -32, 31) + 32);
    }
    /* per half of 128: ql byte l holds the low nibbles of l (low) and l + 64 (high), byte
     * l + 32 those of l + 32 and l + 96; qh byte l the two high bits of all four */
    for (int j = 0; j < QK_SUPER; j += 128) {
        uint8_t *ql = y.ql + j / 2, *qh = y.qh + j / 4;
        for (int l = 0; l < 32; l++) {
            const int q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
            ql[l] = (uint8_t)((q1 & 0xF) | (q3 & 0xF) << 4);
            ql[l + 32] = (uint8_t)((q2 & 0xF) | (q4 & 0xF) << 4);
            qh[l] = (uint8_t)(q1 >> 4 | (q2 >> 4) << 2 | (q3 >> 4) << 4 | (q4 >> 4) << 6);
        }
    }
    memcpy(out, &y, sizeof y);
}

/* ---- q8_K: activations, d = max / -127 in fp32, with sums of 16 for dot products ---------- */

static void q8_K_block(const float *x, const float *qw, float sigma2, void *out) {
    (void)qw, (void)sigma2;
    struct block_q8_K y;
    float max = 0, amax = 0;
    for (int j = 0; j < QK_SUPER; j++) {
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    if (!amax) { /* ggml leaves bsums unwritten here; zero is what a zero block sums to */
        memset(out, 0, sizeof y);
        return;
    }
    /* -127 rather than -128 so that no level is -128 (ggml's choice, for IQ2_XXS dot products) */
    const float iscale = -127.f / max;
    for (int j = 0; j < QK_SUPER; j++) {
        const int v = nearest_int(iscale * x[j]);
        y.qs[j] = (int8_t)(v < 127 ? v : 127);
    }
    for (int j = 0; j < 16; j++) {
        int sum = 0;
        for (int ii = 0; ii < 16; ii++)
            sum += y.qs[16 * j + ii];
        y.bsums[j] = (int16_t)sum;
    }
    y.d = 1 / iscale;
    memcpy(out, &y, sizeof y);
}

/* ---- entry points ---------------------------------------------------------------------------- */

#define K_ENTRY_(name, imx)                                                                        \
    size_t quant_##name(const float *src, void *dst, int64_t n_rows, int64_t n_per_row,            \
                        const float *imatrix) {                                                    \
        (void)imatrix;                                                                             \
        return quant_rows(src, dst, n_rows, n_per_row, imx, QK_SUPER, sizeof(struct block_##name), \
                          name##_block);                                                           \
    }

K_ENTRY_(q2_K, imatrix)
K_ENTRY_(q3_K, imatrix)
K_ENTRY_(q4_K, imatrix)
K_ENTRY_(q5_K, imatrix)
K_ENTRY_(q6_K, imatrix)
K_ENTRY_(q8_K, NULL) /* ggml has no imatrix path for the activation type */
