/* quantize.h: reference quantizers from float, one per type (ggml's quantize_* functions). */
#ifndef OX_QUANT_QUANTIZE_H
#define OX_QUANT_QUANTIZE_H

#include <stddef.h>
#include <stdint.h>

/* Each has the dtype_from_float_fn contract of quant/dtype.h: n_rows rows of n_per_row floats
 * (a multiple of the block size) -> n_rows packed rows; imatrix NULL or n_per_row importance
 * weights; returns bytes written. Output is byte-identical with llama.cpp's quantizers. */
#define QUANT_DECLARE_(name)                                                               \
    size_t quant_##name(const float *src, void *dst, int64_t n_rows, int64_t n_per_row,    \
                        const float *imatrix);

/* float and legacy block types (quantize_legacy.c, quantize_float.c) */
QUANT_DECLARE_(f32) QUANT_DECLARE_(f16) QUANT_DECLARE_(bf16)
QUANT_DECLARE_(q1_0) QUANT_DECLARE_(q2_0) QUANT_DECLARE_(q4_0) QUANT_DECLARE_(q4_1)
QUANT_DECLARE_(q5_0) QUANT_DECLARE_(q5_1) QUANT_DECLARE_(q8_0) QUANT_DECLARE_(q8_1)
/* k-quants (quantize_k.c); q8_K is the activation type of k-quant dot products */
QUANT_DECLARE_(q2_K) QUANT_DECLARE_(q3_K) QUANT_DECLARE_(q4_K) QUANT_DECLARE_(q5_K)
QUANT_DECLARE_(q6_K) QUANT_DECLARE_(q8_K)
/* ternary and fp4 (quantize_ternary.c, quantize_fp4.c) */
QUANT_DECLARE_(tq1_0) QUANT_DECLARE_(tq2_0) QUANT_DECLARE_(mxfp4) QUANT_DECLARE_(nvfp4)
/* i-quants (quantize_iq*.c) */
QUANT_DECLARE_(iq2_xxs) QUANT_DECLARE_(iq2_xs) QUANT_DECLARE_(iq2_s) QUANT_DECLARE_(iq3_xxs)
QUANT_DECLARE_(iq3_s) QUANT_DECLARE_(iq1_s) QUANT_DECLARE_(iq1_m) QUANT_DECLARE_(iq4_nl)
QUANT_DECLARE_(iq4_xs)

#undef QUANT_DECLARE_

#endif
