/* quantize_util.c: the scale searches shared by the k-quant (and i-quant) quantizers, and the
 * row/block driver every quantizer runs through. */
#include "quant/quantize_util.h"

#include <assert.h>
#include <math.h>

/* Every expression below keeps ggml's operand order and float types: a reordered sum or a
 * double intermediate changes the chosen levels for some inputs and so the output bytes. */

static inline int clamp_int(int v, int lo, int hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* The signed element of largest magnitude (the first one on ties) and that magnitude. */
static float signed_absmax(int n, const float *x, float *amax_out) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    *amax_out = amax;
    return max;
}

/* Levels q = clamp(round(iscale * x), -nmax, nmax - 1) into Lq (offset by nmax), with the
 * weighted sums sum w*x*q and sum w*q^2 that the best scale sumlx/suml2 comes from. */
static void qx_fit(int n, int nmax, const float *x, const float *weights, float iscale, int8_t *Lq,
                   float *sumlx_out, float *suml2_out) {
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        Lq[i] = (int8_t)(l + nmax);
        const float w = weights ? weights[i] : x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    *sumlx_out = sumlx;
    *suml2_out = suml2;
}

float make_qx_quants(int n, int nmax, const float *x, int8_t *L, const float *weights) {
    assert(n <= QUANT_MAX_GROUP);
    float amax;
    const float max = signed_absmax(n, x, &amax);
    if (amax < QUANT_GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float sumlx, suml2;
    qx_fit(n, nmax, x, weights, -nmax / max, L, &sumlx, &suml2);
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx; /* = sumlx^2 / suml2, the error reduction to maximise */
    int8_t Ltry[QUANT_MAX_GROUP];
    for (int is = -9; is <= 9; is++) {
        if (is == 0)
            continue;
        qx_fit(n, nmax, x, weights, -(nmax + 0.1f * is) / max, Ltry, &sumlx, &suml2);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            memcpy(L, Ltry, (size_t)n);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* One round of make_q3_quants' refinement: move each level to the one the current fit of the
 * others suggests when that raises sumlx^2 / suml2. Returns how many levels moved. */
static int q3_refine(int n, int nmax, const float *x, int8_t *L, float *sumlx, float *suml2) {
    int n_changed = 0;
    for (int i = 0; i < n; i++) {
        const float w = x[i] * x[i];
        float slx = *sumlx - w * x[i] * L[i];
        if (slx > 0) {
            float sl2 = *suml2 - w * L[i] * L[i];
            const int new_l = clamp_int(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (new_l != L[i]) {
                slx += w * x[i] * new_l;
                sl2 += w * new_l * new_l;
                if (sl2 > 0 && slx * slx * *suml2 > *sumlx * *sumlx * sl2) {
                    L[i] = (int8_t)new_l;
                    *sumlx = slx;
                    *suml2 = sl2;
                    n_changed++;
                }
            }
        }
    }
    return n_changed;
}

float make_q3_quants(int n, int nmax, const float *x, int8_t *L) {
    float amax;
    const float max = signed_absmax(n, x, &amax);
    if (amax < QUANT_GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    const float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) { /* signed levels while refining, offset at the end */
        const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)l;
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; itry++) {
        if (!q3_refine(n, nmax, x, L, &sumlx, &suml2))
            break;
    }
    for (int i = 0; i < n; i++)
        L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Weighted error of levels L under scale and (negative) min: |diff| or diff^2 per element. */
static float qkx_error(int n, const float *x, const float *weights, const uint8_t *L, float scale,
                       float min, bool use_mad) {
    float err = 0;
    for (int i = 0; i < n; i++) {
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        const float w = weights ? weights[i] : x[i] * x[i];
        err += w * diff;
    }
    return err;
}

/* One trial grid of make_qkx_quants: levels for iscale into Laux, then the least-squares scale
 * and min for them (min clamped to <= 0). Returns false when the fit is degenerate (D <= 0). */
static bool qkx_trial(int n, int nmax, const float *x, const float *weights, float iscale,
                      float min, float sum_w, float sum_x, uint8_t *Laux, float *scale_out,
                      float *min_out) {
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; i++) {
        const int l = clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
        Laux[i] = (uint8_t)l;
        const float w = weights ? weights[i] : x[i] * x[i];
        sum_l += w * l;
        sum_l2 += w * l * l;
        sum_xl += w * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (!(D > 0))
        return false;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
    if (this_min > 0) { /* the offset may only shift values down: refit the scale alone */
        this_min = 0;
        this_scale = sum_xl / sum_l2;
    }
    *scale_out = this_scale;
    *min_out = this_min;
    return true;
}

float make_qkx_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                      float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                      bool use_mad) {
    float min = x[0], max = x[0];
    float sum_w = weights ? weights[0] : x[0] * x[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min)
            min = x[i];
        if (x[i] > max)
            max = x[i];
        const float w = weights ? weights[i] : x[i] * x[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) /* zero must stay representable */
        min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    for (int i = 0; i < n; i++)
        L[i] = (uint8_t)clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
    float best_error = qkx_error(n, x, weights, L, scale, min, use_mad);
    for (int is = 0; nstep >= 1 && is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float this_scale, this_min;
        if (!qkx_trial(n, nmax, x, weights, iscale, min, sum_w, sum_x, Laux, &this_scale,
                       &this_min))
            continue;
        const float cur_error = qkx_error(n, x, weights, Laux, this_scale, this_min, use_mad);
        if (cur_error < best_error) {
            memcpy(L, Laux, (size_t)n);
            best_error = cur_error;
            scale = this_scale;
            min = this_min;
        }
    }
    *the_min = -min;
    return scale;
}

/* Weighted squared error of levels min(nmax, round(iscale * x)) with scale 1/iscale. */
static float qp_error(int n, int nmax, const float *x, const float *weights, float iscale) {
    const float scale = 1 / iscale;
    float mse = 0;
    for (int i = 0; i < n; i++) {
        int l = nearest_int(iscale * x[i]);
        l = l < nmax ? l : nmax;
        const float diff = x[i] - scale * l;
        mse += weights[i] * diff * diff;
    }
    return mse;
}

/* Like q3_refine, for make_qp_quants' unsigned levels (capped at nmax, not below 0). L holds
 * bytes, so the sums read a negative level back as its byte value, as ggml's code does. */
static int qp_refine(int n, int nmax, const float *x, uint8_t *L, const float *weights,
                     float *sumlx, float *suml2) {
    int n_changed = 0;
    for (int i = 0; i < n; i++) {
        const float w = weights[i];
        float slx = *sumlx - w * x[i] * L[i];
        float sl2 = *suml2 - w * L[i] * L[i];
        if (slx > 0 && sl2 > 0) {
            int new_l = nearest_int(x[i] * sl2 / slx);
            new_l = new_l < nmax ? new_l : nmax;
            if (new_l != L[i]) {
                slx += w * x[i] * new_l;
                sl2 += w * new_l * new_l;
                if (slx * slx * *suml2 > *sumlx * *sumlx * sl2) {
                    L[i] = (uint8_t)new_l;
                    *sumlx = slx;
                    *suml2 = sl2;
                    n_changed++;
                }
            }
        }
    }
    return n_changed;
}

float make_qp_quants(int n, int nmax, const float *x, uint8_t *L, const float *weights) {
    float max = 0;
    for (int i = 0; i < n; i++)
        max = max > x[i] ? max : x[i];
    if (max < QUANT_GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    /* pick the best of 9 scales around nmax/max by weighted error, unrounded sums */
    float iscale = nmax / max;
    for (int i = 0; i < n; i++)
        L[i] = (uint8_t)nearest_int(iscale * x[i]);
    const float scale0 = 1 / iscale;
    float best_mse = 0;
    for (int i = 0; i < n; i++) { /* the first guess is scored without the nmax cap */
        const float diff = x[i] - scale0 * L[i];
        best_mse += weights[i] * diff * diff;
    }
    for (int is = -4; is <= 4; is++) {
        if (is == 0)
            continue;
        const float iscale_is = (0.1f * is + nmax) / max;
        const float mse = qp_error(n, nmax, x, weights, iscale_is);
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = nearest_int(iscale * x[i]);
        l = l < nmax ? l : nmax;
        L[i] = (uint8_t)l;
        sumlx += weights[i] * x[i] * l;
        suml2 += weights[i] * l * l;
    }
    for (int itry = 0; itry < 5; itry++) {
        if (!qp_refine(n, nmax, x, L, weights, &sumlx, &suml2))
            break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

size_t quant_rows(const float *src, void *dst, int64_t n_rows, int64_t n_per_row,
                  const float *imatrix, int64_t block_size, size_t type_size, quant_block_fn fn) {
    uint8_t *out = dst;
    const int64_t nb = n_per_row / block_size;
    for (int64_t r = 0; r < n_rows; r++) {
        const float *row = src + r * n_per_row;
        float sigma2 = 0;
        if (imatrix) { /* ggml's legacy impl functions scale weights by the row's mean x^2 */
            float sum_x2 = 0;
            for (int64_t j = 0; j < n_per_row; j++)
                sum_x2 += row[j] * row[j];
            sigma2 = sum_x2 / n_per_row;
        }
        for (int64_t b = 0; b < nb; b++, out += type_size)
            fn(row + b * block_size, imatrix ? imatrix + b * block_size : NULL, sigma2, out);
    }
    return (size_t)(out - (uint8_t *)dst);
}
