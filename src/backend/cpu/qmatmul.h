/* qmatmul.h: the fast CPU matmul: activations quantized once per call into the kernel's block
 * format, then integer (or SIMD float) dot products over tiles of weight rows x tokens. */
#ifndef OX_BACKEND_CPU_QMATMUL_H
#define OX_BACKEND_CPU_QMATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

/* Activations for the 32-element block families: q = round(x / d) in [-127, 127], d rounded
 * through f16 as ggml's q8_0, and s = d * sum(q) so that offset and min terms of the weights
 * cost one multiply-add per block. */
struct xq8_32 {
    float d, s;
    int8_t q[32];
};

/* One kernel: y[c * y_stride + r] = row r of w . column c of the quantized activations, for
 * r < nr rows (w_stride bytes apart) and c < nc columns (x_stride bytes apart). */
typedef void (*qtile_fn)(int64_t n, const uint8_t *w, size_t w_stride, int nr, const uint8_t *x,
                         size_t x_stride, int nc, float *y, size_t y_stride);

struct qkernel {
    const char *name;                 /* "q4_0 avx512-vnni" */
    size_t (*x_row_bytes)(int64_t n); /* bytes of one quantized activation row */
    void (*quantize_x)(const float *x, void *xq, int64_t n);
    void (*x_to_float)(const void *xq, float *x, int64_t n); /* the values the kernel sees */
    qtile_fn tile;
    int max_nr, max_nc; /* the largest tile the kernel takes in one call */
    /* Optional batch path: 16 rows repacked into a scratch layout once (at most
     * PACK16_BYTES(n) bytes), then tiles of those 16 rows x up to pack_nc tokens over it. */
    void (*repack16)(int64_t n, const uint8_t *w, size_t w_stride, int nr, void *dst);
    void (*tile16)(int64_t n, const void *packed, int nr, const uint8_t *x, size_t x_stride, int nc,
                   float *y, size_t y_stride);
    int pack_nc;
    int min_pack_n; /* batches from this size take the packed path (0: pack_nc) */
    /* Optional load-time layout (struct mat.packed): groups of 16 rows, each made by pack()
     * from the file's rows; gemv16 runs up to pack_nc tokens over one group, and unpack16
     * turns a group into repack16's scratch layout for the batch path. */
    size_t (*packed_group_bytes)(int64_t n);
    void (*pack)(int64_t n, const uint8_t *w, size_t w_stride, void *dst);
    void (*gemv16)(int64_t n, const void *group, const uint8_t *x, size_t x_stride, int nc,
                   float *y, size_t y_stride);
    void (*unpack16)(int64_t n, const void *group, void *dst);
    /* Row `lane` of a group back in the file's block layout (for embedding lookups). */
    void (*file_row)(int64_t n, const void *group, int lane, void *dst);
};

/* Row r of a packed matrix in the file's layout into dst (row_bytes); false if the kernel
 * cannot give it back (the caller reads w->data). */
bool qmatmul_file_row(const struct mat *w, int64_t r, void *dst);

#define PACK16_BYTES(n) ((size_t)(n) / 32 * (16 * 32 + 16 * 8) + 64)

/* The best kernel for weights of this type on this CPU, or NULL (the reference path runs). */
const struct qkernel *qkernel_for(enum ox_dtype type);

/* y = W x with the fast kernel; false when there is none for w's type (nothing was done). */
bool qmatmul(struct backend *b, const struct mat *w, const float *x, float *y, int n);

/* Kernel tables per instruction set (NULL entries: not provided). */
const struct qkernel *qkernels_avx512(enum ox_dtype type);
const struct qkernel *qkernels_kquant_avx512(enum ox_dtype type); /* k-quants, iq4_xs */
const struct qkernel *qkernels_generic(enum ox_dtype type);
const struct qkernel *qkernels_avx2(enum ox_dtype type);
const struct qkernel *qkernels_kquant_avx2(enum ox_dtype type); /* k-quants, iq4_xs */
const struct qkernel *qkernels_float_avx2(enum ox_dtype type);
const struct qkernel *qkernels_avx2vnni(enum ox_dtype type); /* qkernels_avx2.c with AVX-VNNI */
const struct qkernel *qkernels_kquant_avx2vnni(enum ox_dtype type);
const struct qkernel *qkernels_neon(enum ox_dtype type);
const struct qkernel *qkernels_kquant_neon(enum ox_dtype type); /* k-quants, iq4_xs */
const struct qkernel *qkernels_float_neon(enum ox_dtype type);
const struct qkernel *qkernels_float_avx512(enum ox_dtype type);

/* The load-time layout of q4_0 and q8_0 shared by the x86 levels (qpack16.c): per block of
 * 32, 16 f16 scales, then the rows' quants in chunks of 4 bytes, chunk-major. */
enum { QPACK16_Q4_0_BLOCK = 32 + 16 * 16, QPACK16_Q8_0_BLOCK = 32 + 16 * 32 };
size_t qpack16_group_bytes_q4_0(int64_t n);
size_t qpack16_group_bytes_q8_0(int64_t n);
void qpack16_pack_q4_0(int64_t n, const uint8_t *w, size_t w_stride, void *dst);
void qpack16_pack_q8_0(int64_t n, const uint8_t *w, size_t w_stride, void *dst);
void qpack16_file_row_q4_0(int64_t n, const void *group, int lane, void *dst);
void qpack16_file_row_q8_0(int64_t n, const void *group, int lane, void *dst);

/* Shared activation quantizer for the xq8_32 format (scalar; vectorized by the compiler). */
size_t xq8_32_row_bytes(int64_t n);
void xq8_32_quantize(const float *x, void *xq, int64_t n);
void xq8_32_to_float(const void *xq, float *x, int64_t n);
void xq8_32_quantize_avx2(const float *x, void *xq, int64_t n); /* the same, with AVX2 */

/* Activations of the f32/f16/bf16 kernels, shared by every instruction set (qmatmul.c). */
size_t xf32_row_bytes(int64_t n);
size_t xhalf_row_bytes(int64_t n);
void xf32_quantize(const float *x, void *xq, int64_t n);
void xf32_to_float(const void *xq, float *x, int64_t n);
void xf16_quantize(const float *x, void *xq, int64_t n); /* f16-rounded, stored as f32 */
void xbf16_quantize(const float *x, void *xq, int64_t n);
void xbf16_to_float(const void *xq, float *x, int64_t n);

#endif
