/* ops_memory.c: the CPU backend's memory ops: allocation, host copies (the host's memory is the
 * backend's, so these are plain copies or nothing), row copies, and the KV cache's rows. */
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_ops.h"
#include "core/alloc.h"
#include "quant/dtype.h"

void *cpu_alloc(struct backend *b, size_t bytes) {
    (void)b;
    return ox_aligned_alloc(OX_ALIGN, bytes ? bytes : 1);
}

void cpu_free(struct backend *b, void *p) {
    (void)b;
    ox_aligned_free(p);
}

/* The forward pass hands the same pointer for both sides: nothing to copy then. */
void cpu_upload(struct backend *b, void *dst, const void *src, size_t bytes) {
    (void)b;
    if (dst != src)
        memmove(dst, src, bytes);
}

enum ox_status cpu_download(struct backend *b, void *dst, const void *src, size_t bytes) {
    cpu_upload(b, dst, src, bytes);
    return OX_OK;
}

void cpu_copy_rows(struct backend *b, float *dst, size_t dst_stride, const float *src,
                   size_t src_stride, int rows, int cols) {
    (void)b;
    for (int r = 0; r < rows; r++)
        memmove(dst + (size_t)r * dst_stride, src + (size_t)r * src_stride,
                (size_t)cols * sizeof(float));
}

void cpu_axpy(struct backend *b, float *y, const float *x, float w, size_t n) {
    (void)b;
    for (size_t i = 0; i < n; i++)
        y[i] += w * x[i];
}

void cpu_zero(struct backend *b, float *y, size_t n) {
    (void)b;
    memset(y, 0, n * sizeof *y);
}

void cpu_cache_store(struct backend *b, enum ox_dtype type, const float *x, int n, int dim,
                     uint8_t *base, size_t row_bytes, const int32_t *cells) {
    (void)b;
    const struct dtype_traits *tr = dtype_get((int)type);
    for (int t = 0; t < n; t++)
        tr->from_float(x + (size_t)t * (size_t)dim, base + (size_t)cells[t] * row_bytes, 1, dim,
                       NULL);
}

void cpu_cache_load(struct backend *b, enum ox_dtype type, const uint8_t *base, size_t row_bytes,
                    float *y, int n_cells, int dim, const int32_t *cell_pos) {
    (void)b;
    const struct dtype_traits *tr = dtype_get((int)type);
    for (int c = 0; c < n_cells; c++)
        if (!cell_pos || cell_pos[c] >= 0)
            tr->to_float(base + (size_t)c * row_bytes, y + (size_t)c * (size_t)dim, dim);
}
