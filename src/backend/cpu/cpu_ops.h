/* cpu_ops.h: the CPU backend's memory ops (ops_memory.c) and its delta-net recurrence
 * (delta_net_ref.c), wired into its table in ops_ref.c. */
#ifndef OX_BACKEND_CPU_CPU_OPS_H
#define OX_BACKEND_CPU_CPU_OPS_H

#include "backend/backend.h"

void *cpu_alloc(struct backend *b, size_t bytes);
void cpu_free(struct backend *b, void *p);
/* upload and download: host memory is the backend's, so a copy (nothing for the same buffer) */
void cpu_upload(struct backend *b, void *dst, const void *src, size_t bytes);
enum ox_status cpu_download(struct backend *b, void *dst, const void *src, size_t bytes);
void cpu_copy_rows(struct backend *b, float *dst, size_t dst_stride, const float *src,
                   size_t src_stride, int rows, int cols);
void cpu_axpy(struct backend *b, float *y, const float *x, float w, size_t n);
void cpu_zero(struct backend *b, float *y, size_t n);
void cpu_cache_store(struct backend *b, enum ox_dtype type, const float *x, int n, int dim,
                     uint8_t *base, size_t row_bytes, const int32_t *cells);
void cpu_cache_load(struct backend *b, enum ox_dtype type, const uint8_t *base, size_t row_bytes,
                    float *y, int n_cells, int dim, const int32_t *cell_pos);
void cpu_delta_net(struct backend *b, const struct delta_net_args *a);
void cpu_mamba2(struct backend *b, const struct mamba2_args *a);

#endif
