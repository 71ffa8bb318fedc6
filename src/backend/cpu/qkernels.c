/* qkernels.c: what the matmul kernels of every instruction-set level share: the scalar activation
 * formats, the float kernels' batch "repack", and each level's table of kernels by dtype (data:
 * the structs the level's files export, qkernels.h), among which qkernel_for (qmatmul.c) picks. */
#include "backend/cpu/qkernels.h"

#include <math.h>
#include <string.h>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/quantize.h"

/* ---- activations: xq8_32, q8_K, and the float types' ---------------------------------------- */

size_t xq8_32_row_bytes(int64_t n) {
    return (size_t)(n / 32) * sizeof(struct xq8_32);
}

void xq8_32_quantize(const float *x, void *xq, int64_t n) {
    struct xq8_32 *blk = xq;
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        float amax = 0.0f;
        for (int i = 0; i < 32; i++)
            amax = fmaxf(amax, fabsf(x[i]));
        /* as ggml's x86 quantize_row_q8_0: 127 / amax (not 1 / d), ties to even */
        float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
        int sum = 0;
        for (int i = 0; i < 32; i++) {
            blk[b].q[i] = (int8_t)lrintf(x[i] * id);
            sum += blk[b].q[i];
        }
        blk[b].d = fp16_to_fp32(fp32_to_fp16(d)); /* ggml's q8_0 keeps d as f16 */
        blk[b].s = blk[b].d * (float)sum;
    }
}

/* ggml's q8_1, the activations of q4_1 and q5_1, keeps s = d * sum(q) rounded to f16, with d
 * taken before its own rounding (the q8_0 form above keeps s exact); so the min term m * s of
 * those types' dot products is ggml's to the bit. Rewrites the s of blocks already quantized. */
void xq8_32_sums_as_q8_1(const float *x, void *xq, int64_t n) {
    struct xq8_32 *blk = xq;
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        float amax = 0.0f;
        int sum = 0;
        for (int i = 0; i < 32; i++) /* two loops: one gave gcc 12's AArch64 vectorizer an ICE */
            amax = fmaxf(amax, fabsf(x[i]));
        for (int i = 0; i < 32; i++)
            sum += blk[b].q[i];
        blk[b].s = fp16_to_fp32(fp32_to_fp16(amax / 127.0f * (float)sum));
    }
}

void xq8_32_to_float(const void *xq, float *x, int64_t n) {
    const struct xq8_32 *blk = xq;
    for (int64_t i = 0; i < n; i++)
        x[i] = blk[i / 32].d * (float)blk[i / 32].q[i % 32];
}

size_t xq8_K_row_bytes(int64_t n) {
    return (size_t)(n / QK_SUPER) * sizeof(struct block_q8_K);
}

void xq8_K_quantize(const float *x, void *xq, int64_t n) {
    quant_q8_K(x, xq, 1, n, NULL);
}

/* ---- activations of the float kernels: rounded to the weight's dot type as the reference
 * does (f16 kept as f32 values, so kernels need not convert; bf16 kept as bf16 pairs) ---- */

size_t xf32_row_bytes(int64_t n) {
    return (size_t)n * 4;
}
size_t xhalf_row_bytes(int64_t n) {
    return (size_t)n * 2;
}
void xf32_quantize(const float *x, void *xq, int64_t n) {
    memcpy(xq, x, (size_t)n * sizeof *x);
}
void xf32_to_float(const void *xq, float *x, int64_t n) {
    memcpy(x, xq, (size_t)n * sizeof *x);
}
void xf16_quantize(const float *x, void *xq, int64_t n) {
    float *f = xq;
    for (int64_t i = 0; i < n; i++)
        f[i] = fp16_to_fp32(fp32_to_fp16(x[i]));
}
void xbf16_quantize(const float *x, void *xq, int64_t n) {
    uint16_t *h = xq;
    for (int64_t i = 0; i < n; i++)
        h[i] = fp32_to_bf16(x[i]);
}
void xbf16_to_float(const void *xq, float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        x[i] = bf16_to_fp32(((const uint16_t *)xq)[i]);
}

/* ---- the float kernels' batch path ---------------------------------------------------------- */

void float_rows_record(int64_t n, const uint8_t *w, size_t w_stride, int nr, void *dst) {
    (void)n, (void)nr;
    *(struct float_rows *)dst = (struct float_rows){w, w_stride};
}

/* ---- the tables -----------------------------------------------------------------------------
 * Each level's table holds the structs its files export, at their dtypes: the same dtypes at
 * every level (qkernels.h lists them). */

#ifdef OX_HAVE_X86_KERNELS /* built only for x86-64 */
QKERNEL_TABLE(qkernels_avx512, avx512, avx512);
/* AVX-VNNI changes the byte products only: the float kernels are AVX2's */
QKERNEL_TABLE(qkernels_avx2vnni, avx2vnni, avx2);
QKERNEL_TABLE(qkernels_avx2, avx2, avx2);
#endif

#ifdef OX_HAVE_WASM_KERNELS /* built only for WebAssembly: one level, SIMD128 */
QKERNEL_TABLE(qkernels_wasm_simd, wasm_simd, wasm_simd);
#endif

#ifdef OX_HAVE_ARM_KERNELS /* built only for AArch64; the float kernels are plain NEON's */
QKERNEL_TABLE(qkernels_neon_i8mm, neon_i8mm, neon);
QKERNEL_TABLE(qkernels_neon_dotprod, neon_dotprod, neon);
QKERNEL_TABLE(qkernels_neon, neon, neon);
#endif
