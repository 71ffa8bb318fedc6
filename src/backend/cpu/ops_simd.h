/* ops_simd.h: SIMD versions of reference ops, each false (or the scalar version) where the CPU
 * or build lacks them; the reference op calls them first. */
#ifndef OX_BACKEND_CPU_OPS_SIMD_H
#define OX_BACKEND_CPU_OPS_SIMD_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

/* y = act(gate) * up, bit-identical to the reference. */
bool glu_avx512(enum glu_kind kind, const float *gate, const float *up, float *y, size_t n);

/* The same with AVX2 + FMA (ops_avx2.c). */
bool glu_avx2(enum glu_kind kind, const float *gate, const float *up, float *y, size_t n);

/* The same with NEON (arm/ops_neon.c; every AArch64 level). */
bool glu_neon(enum glu_kind kind, const float *gate, const float *up, float *y, size_t n);

/* f16 values to floats, exactly (F16C / NEON); false where the CPU lacks it (n = 0 only asks). */
typedef bool (*f16_rows_fn)(const uint16_t *x, float *y, size_t n);
bool f16_to_f32_avx2(const uint16_t *x, float *y, size_t n);
bool f16_to_f32_neon(const uint16_t *x, float *y, size_t n);
/* The same in WebAssembly SIMD128 (wasm/ops_wasm.c). */
bool glu_wasm(enum glu_kind kind, const float *gate, const float *up, float *y, size_t n);
bool f16_to_f32_wasm(const uint16_t *x, float *y, size_t n);

/* xq8_32_quantize with AVX-512 (same results); only for kernels chosen on such CPUs. */
void xq8_32_quantize_avx512(const float *x, void *xq, int64_t n);
void xq8_1_quantize_avx512(const float *x, void *xq, int64_t n); /* s as ggml's q8_1 has it */

#endif
