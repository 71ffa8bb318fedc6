/* fp16.h: IEEE half and bfloat16 <-> float conversions, bit-compatible with ggml's. */
#ifndef OX_CORE_FP16_H
#define OX_CORE_FP16_H

#include <stdint.h>
#include <string.h>

static inline uint32_t fp32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float fp32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Exact: every half value is representable as a float. */
static inline float fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    if (exp == 0x1f) /* inf, or NaN made quiet as the FPU (and so ggml) converts it */
        return fp32_from_bits(sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0));
    if (exp != 0)
        return fp32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
    if (mant == 0)
        return fp32_from_bits(sign);
    /* subnormal half: mant * 2^-24, exact in float */
    float f = (float)mant * 0x1p-24f;
    return fp32_from_bits(sign | fp32_bits(f));
}

/* Round to nearest, ties to even; overflow gives inf; NaN stays NaN with its top payload bits
 * (as the F16C instruction does; quant_f16 canonicalises NaN the way llama-quantize does). */
static inline uint16_t fp32_to_fp16(float f) {
    uint32_t u = fp32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) /* NaN: quiet, keep the top payload bits */
        return (uint16_t)(sign | 0x7e00 | ((abs >> 13) & 0x3ff));
    if (abs >= 0x477ff000u) /* rounds to >= 65520: inf */
        return (uint16_t)(sign | 0x7c00);
    if (abs < 0x38800000u) { /* below the smallest normal half (2^-14): subnormal or zero */
        /* adding 0.5 (2^-1) aligns the half subnormal grid with the float's integer bits,
         * so the FPU does the round-to-nearest-even for us */
        float r = fp32_from_bits(abs) + 0.5f;
        return (uint16_t)(sign | (fp32_bits(r) - 0x3f000000u));
    }
    uint32_t odd = (abs >> 13) & 1;
    abs += 0xfff + odd; /* round the 13 dropped bits to nearest even */
    return (uint16_t)(sign | ((abs - 0x38000000u) >> 13));
}

static inline float bf16_to_fp32(uint16_t h) {
    return fp32_from_bits((uint32_t)h << 16);
}

/* ggml_compute_fp32_to_bf16: NaN forced quiet, otherwise round to nearest even. */
static inline uint16_t fp32_to_bf16(float f) {
    uint32_t u = fp32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 64);
    return (uint16_t)((u + (0x7fffu + ((u >> 16) & 1))) >> 16);
}

#endif
