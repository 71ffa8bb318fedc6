/* ops_memory.c: the CPU backend's memory ops: allocation, host copies (the host's memory is the
 * backend's, so these are plain copies or nothing), row copies, and the KV cache's rows. */
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/ops_simd.h"
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

struct load_job {
    const struct dtype_traits *tr;
    f16_rows_fn f16; /* the CPU's f16 conversion for f16 rows, or NULL: tr->to_float */
    const uint8_t *base;
    size_t row_bytes;
    float *y;
    int n_cells, dim;
    const int32_t *cell_pos;
};

/* The f16 conversion through the CPU's instruction where it has one, asked once per load
 * (n = 0 converts nothing): a deep cache has thousands of rows a layer, each too short to pay
 * for looking up the type and the CPU's features again. */
static f16_rows_fn f16_rows(enum ox_dtype type) {
    if (type != OX_DTYPE_F16)
        return NULL;
#ifdef OX_HAVE_X86_KERNELS /* built only for x86-64 */
    if (f16_to_f32_avx2(NULL, NULL, 0))
        return f16_to_f32_avx2;
#endif
#ifdef OX_HAVE_ARM_KERNELS /* built only for AArch64 */
    if (f16_to_f32_neon(NULL, NULL, 0))
        return f16_to_f32_neon;
#endif
#ifdef OX_HAVE_WASM_KERNELS /* built only for WebAssembly */
    if (f16_to_f32_wasm(NULL, NULL, 0))
        return f16_to_f32_wasm;
#endif
    return NULL;
}

static void load_cells(void *arg, int ith, int nth) {
    const struct load_job *j = arg;
    int c0 = (int)((int64_t)j->n_cells * ith / nth);
    int c1 = (int)((int64_t)j->n_cells * (ith + 1) / nth);
    for (int c = c0; c < c1; c++) {
        if (j->cell_pos && j->cell_pos[c] < 0)
            continue;
        const uint8_t *row = j->base + (size_t)c * j->row_bytes;
        float *y = j->y + (size_t)c * (size_t)j->dim;
        if (j->f16)
            j->f16((const uint16_t *)row, y, (size_t)j->dim);
        else
            j->tr->to_float(row, y, j->dim);
    }
}

/* Values converted per part before the load is split across threads: a few microseconds of
 * conversion, well above the cost of a hand-off (about 0.25 us). Every layer of every decode
 * step reads its whole cache back, so this is worth threads once the context grows. */
#define LOAD_MIN_PER_PART 8192.0

void cpu_cache_load(struct backend *b, enum ox_dtype type, const uint8_t *base, size_t row_bytes,
                    float *y, int n_cells, int dim, const int32_t *cell_pos) {
    struct load_job j = {
        dtype_get((int)type), f16_rows(type), base, row_bytes, y, n_cells, dim, cell_pos};
    if (!b->impl || !cpu_of(b)->pool) { /* a backend made without threads (tests) */
        load_cells(&j, 0, 1);
        return;
    }
    threadpool_run_n(cpu_of(b)->pool, load_cells, &j,
                     threadpool_parts(cpu_of(b)->pool, (double)n_cells * dim, LOAD_MIN_PER_PART));
}
