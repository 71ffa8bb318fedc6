/* quantize_util.h: rounding and scale-search helpers shared by the quantizers (ggml's
 * nearest_int, best_index_int8 and make_*_quants), with ggml's exact float arithmetic. */
#ifndef OX_QUANT_QUANTIZE_UTIL_H
#define OX_QUANT_QUANTIZE_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A group whose largest |x| is below this is treated as all zero (ggml's GROUP_MAX_EPS). */
#define QUANT_GROUP_MAX_EPS 1e-15f

/* The largest group (n) the make_*_quants functions accept. */
#define QUANT_MAX_GROUP 256

/* Round to the nearest integer, ties to even. Adding 1.5 * 2^23 leaves the rounded value in the
 * low mantissa bits (the FPU does the rounding); ggml's trick, reproduced because roundf rounds
 * ties away from zero and would give other bytes. Exact for |x| <= 4194303; larger or NaN
 * inputs give ggml's same (meaningless) integer, never undefined behaviour. */
static inline int nearest_int(float x) {
    const float shifted = x + 12582912.0f;
    int32_t bits;
    memcpy(&bits, &shifted, sizeof bits);
    return (bits & 0x007fffff) - 0x00400000;
}

/* Index of the entry of the ascending table levels[0..n-1] nearest to x; a tie goes to the
 * upper entry, as ggml's best_index_int8 (binary search, then compare the two neighbours). */
static inline int best_index_int8(int n, const int8_t *levels, float x) {
    if (x <= levels[0])
        return 0;
    if (x >= levels[n - 1])
        return n - 1;
    int lo = 0, hi = n - 1;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (x < levels[mid])
            hi = mid;
        else
            lo = mid;
    }
    return x - levels[hi - 1] < levels[hi] - x ? hi - 1 : hi;
}

/* Symmetric levels: L[i] in [0, 2*nmax) codes x[i] ~ scale * (L[i] - nmax); returns scale.
 * Minimises sum w[i] * (x[i] - scale*q[i])^2 with w = weights, or x^2 when weights is NULL,
 * trying 19 candidate scales around -nmax/max (ggml's make_qx_quants, rmse_type 1).
 * An all-zero group (max |x| < QUANT_GROUP_MAX_EPS) gives L = 0 and scale 0. */
float make_qx_quants(int n, int nmax, const float *x, int8_t *L, const float *weights);

/* Symmetric levels as make_qx_quants with weights x^2, improved by up to 5 rounds of
 * per-element moves instead of a scale sweep (ggml's make_q3_quants with do_rmse). */
float make_q3_quants(int n, int nmax, const float *x, int8_t *L);

/* Asymmetric levels: L[i] in [0, nmax] codes x[i] ~ scale * L[i] - *the_min (*the_min >= 0).
 * Starts from the min..max grid, then tries nstep + 1 grids of nmax + rmin + rdelta*k steps,
 * fitting scale and min by weighted least squares and keeping the lowest weighted error
 * (|diff| when use_mad, diff^2 otherwise). weights NULL means x^2. Laux is n bytes of scratch.
 * This is both of ggml's make_qkx2_quants and make_qkx3_quants (identical arithmetic). */
float make_qkx_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                      float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                      bool use_mad);

/* Non-negative levels for non-negative x (sub-block scales): L[i] in [0, nmax] codes
 * x[i] ~ scale * L[i] under the weights (never NULL); returns scale (ggml's make_qp_quants). */
float make_qp_quants(int n, int nmax, const float *x, uint8_t *L, const float *weights);

/* Quantizes one block of x (block_size elements) to out (type_size bytes, any alignment).
 * qw: the imatrix entries of the block's columns, or NULL. row_sigma2: the mean of x^2 over the
 * whole row (computed only when an imatrix is given; ggml's legacy impl functions use it). */
typedef void (*quant_block_fn)(const float *x, const float *qw, float row_sigma2, void *out);

/* Runs fn over every block of n_rows rows of n_per_row floats, row after row into dst; the
 * imatrix (NULL or n_per_row weights) is sliced per block. Returns the bytes written. */
size_t quant_rows(const float *src, void *dst, int64_t n_rows, int64_t n_per_row,
                  const float *imatrix, int64_t block_size, size_t type_size, quant_block_fn fn);

#endif
