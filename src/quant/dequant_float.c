/* dequant_float.c: to-float conversion of the plain (one element per block) types. */
#include <string.h>

#include "core/fp16.h"
#include "quant/blocks.h"

/* Elements are read with memcpy: src carries no alignment promise, and the host is little-endian
 * like the file format. */

void dequant_f32(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void dequant_f16(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        dst[i] = fp16_to_fp32(h);
    }
}

void dequant_bf16(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        dst[i] = bf16_to_fp32(h);
    }
}

/* ggml has no to_float for f64 and the integer types; a C conversion (round to nearest) is the
 * natural meaning. */
#define OX_CAST_DEQUANT_(name, ctype)                                                              \
    void dequant_##name(const void *src, float *dst, int64_t n) {                                  \
        const uint8_t *p = src;                                                                    \
        for (int64_t i = 0; i < n; i++) {                                                          \
            ctype v;                                                                               \
            memcpy(&v, p + (size_t)i * sizeof v, sizeof v);                                        \
            dst[i] = (float)v;                                                                     \
        }                                                                                          \
    }

OX_CAST_DEQUANT_(f64, double)
OX_CAST_DEQUANT_(i8, int8_t)
OX_CAST_DEQUANT_(i16, int16_t)
OX_CAST_DEQUANT_(i32, int32_t)
OX_CAST_DEQUANT_(i64, int64_t)
