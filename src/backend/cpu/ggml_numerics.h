/* ggml_numerics.h: llama.cpp's CPU arithmetic orders (AVX-512 build), reproduced in scalar C so
 * the reference ops give llama.cpp's float results bit for bit. */
#ifndef OX_BACKEND_CPU_GGML_NUMERICS_H
#define OX_BACKEND_CPU_GGML_NUMERICS_H

#include <stdint.h>

#include "oxidize.h"

/* One weight row dotted with one activation row, both already as floats (the activations
 * rounded to the weight's vec_dot_type). `gemm` selects the order of ggml's batched GEMM
 * (tinyBLAS, used for two or more tokens) instead of its one-token vec_dot. Returns false for
 * weight types these orders do not cover; the caller then sums in double. */
bool ggml_float_dot(enum ox_dtype type, bool gemm, const float *w, const float *x, int64_t n,
                    float *out);

/* ggml_vec_dot_f16's order over values already rounded to f16 (attention scores). */
float ggml_dot_f16(const float *x, const float *y, int64_t n);

/* exp(x) as ggml's vectorized ggml_v_expf (used by SiLU and SwiGLU). */
float ggml_expf(float x);

/* GELU (tanh form) as ggml's CPU backend computes it: from a table of f16 inputs and outputs,
 * 0 below -10 and x above 10. */
float ggml_gelu(float x);

/* Softmax of n values in place, as ggml's soft_max op (vector exp over 16-lane blocks, libm
 * exp for the tail, the sum in double). */
void ggml_softmax(float *x, int n);

/* Mean and variance of n values as ggml's LayerNorm computes them. */
void ggml_mean_var(const float *x, int64_t n, float *mean, float *var);

#endif
