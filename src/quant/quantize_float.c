/* quantize_float.c: the float "quantizers" f32 (copy), f16 and bf16 (round to nearest even),
 * as ggml_quantize_chunk does them. */
#include <string.h>

#include "core/fp16.h"
#include "quant/quantize.h"

/* Elements are written byte by byte (little-endian, the file format's order), so dst needs no
 * alignment. The imatrix does not apply to float types. */

size_t quant_f32(const float *src, void *dst, int64_t n_rows, int64_t n_per_row,
                 const float *imatrix) {
    (void)imatrix;
    const size_t n_bytes = (size_t)(n_rows * n_per_row) * sizeof(float);
    memcpy(dst, src, n_bytes);
    return n_bytes;
}

/* ggml_quantize_chunk converts with ggml's portable converter (ggml_compute_fp32_to_fp16),
 * which turns every NaN into 0x7e00 with its sign and drops the payload; fp32_to_fp16 keeps
 * payload bits like the F16C instruction, so NaN is handled here. Other values agree. */
static uint16_t fp16_like_ggml(float f) {
    const uint32_t u = fp32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16 & 0x8000u) | 0x7e00u);
    return fp32_to_fp16(f);
}

size_t quant_f16(const float *src, void *dst, int64_t n_rows, int64_t n_per_row,
                 const float *imatrix) {
    (void)imatrix;
    const int64_t n = n_rows * n_per_row;
    uint8_t *out = dst;
    for (int64_t i = 0; i < n; i++) {
        const uint16_t h = fp16_like_ggml(src[i]);
        out[2 * i] = (uint8_t)h;
        out[2 * i + 1] = (uint8_t)(h >> 8);
    }
    return (size_t)n * 2;
}

size_t quant_bf16(const float *src, void *dst, int64_t n_rows, int64_t n_per_row,
                  const float *imatrix) {
    (void)imatrix;
    const int64_t n = n_rows * n_per_row;
    uint8_t *out = dst;
    for (int64_t i = 0; i < n; i++) {
        const uint16_t h = fp32_to_bf16(src[i]);
        out[2 * i] = (uint8_t)h;
        out[2 * i + 1] = (uint8_t)(h >> 8);
    }
    return (size_t)n * 2;
}
