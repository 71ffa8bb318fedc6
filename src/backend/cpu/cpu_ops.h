/* cpu_ops.h: the CPU backend's per-context state and the ops its table (cpu_backend.c) wires
 * in: the scalar reference ops (ops_ref.c), memory ops (ops_memory.c), recurrences. */
#ifndef OX_BACKEND_CPU_CPU_OPS_H
#define OX_BACKEND_CPU_CPU_OPS_H

#include "backend/backend.h"

/* The CPU backend's state of a context (backend.impl): made by init, freed by release. */
struct cpu_state {
    struct threadpool *pool;
    float *scratch; /* pool threads x scratch_per_thread floats */
    size_t scratch_per_thread;
    float *x_rounded;  /* activations as the weights' dot-product type sees them:
                          n_batch x the widest row, floats */
    uint8_t *x_packed; /* one packed activation row (the widest row x 4 bytes) */
};

static inline struct cpu_state *cpu_of(const struct backend *b) {
    return (struct cpu_state *)b->impl;
}

/* Scratch floats a matmul needs per thread for rows of n_cols elements. */
size_t cpu_scratch_floats(int64_t max_cols);

/* The scalar reference ops (ops_ref.c); matmul prefers the SIMD kernels where this CPU has
 * them for the type. */
void cpu_matmul(struct backend *b, const struct mat *w, const float *x, float *y, int n);
void cpu_get_rows(struct backend *b, const struct mat *w, const int32_t *ids, float *y, int n);
void cpu_rms_norm(struct backend *b, const float *x, const float *g, float *y, int n, int dim,
                  float eps);
void cpu_layer_norm(struct backend *b, const float *x, const float *g, const float *bias, float *y,
                    int n, int dim, float eps);
void cpu_rope(struct backend *b, float *x, const int32_t *pos, int n, int n_heads, int head_dim,
              const struct rope_params *p);
void cpu_glu(struct backend *b, enum glu_kind kind, const float *gate, const float *up, float *y,
             size_t n);
void cpu_sigmoid_scale_rows(struct backend *b, float *y, const float *g, int n, int dim);
void cpu_gelu(struct backend *b, const float *x, float *y, size_t n);
void cpu_add(struct backend *b, float *y, const float *x, size_t n);
void cpu_add_row(struct backend *b, float *y, const float *row, int n, int dim);
void cpu_scale(struct backend *b, float *y, float s, size_t n);
void cpu_softmax(struct backend *b, float *x, int n, int dim);
void cpu_softcap(struct backend *b, float *y, float cap, size_t n);

void *cpu_alloc(struct backend *b, size_t bytes);
void cpu_free(struct backend *b, void *p);
/* upload and download: host memory is the backend's, so a copy (nothing for the same buffer) */
void cpu_upload(struct backend *b, void *dst, const void *src, size_t bytes);
enum ox_status cpu_download(struct backend *b, void *dst, const void *src, size_t bytes);
void cpu_copy_rows(struct backend *b, float *dst, size_t dst_stride, const float *src,
                   size_t src_stride, int rows, int cols);
void cpu_axpy(struct backend *b, float *y, const float *x, float w, size_t n);
void cpu_zero(struct backend *b, float *y, size_t n);
/* cpu_group.c: the ranks of a split model on threads of this process, summing their rows */
enum ox_status cpu_all_reduce(struct backend *b, struct backend_group *g, int rank, float *x,
                              size_t n, float *to);
void cpu_group_abort(struct backend_group *g);
enum ox_status cpu_send(struct backend *b, struct backend_group *g, int rank, int to,
                        const float *x, size_t n);
enum ox_status cpu_recv(struct backend *b, struct backend_group *g, int rank, int from, float *x,
                        size_t n);
struct backend_group *cpu_group_create(int world, const int *devices);
enum ox_status cpu_group_enter(struct backend_group *g, int rank);
int cpu_devices(void);
void cpu_cache_store(struct backend *b, enum ox_dtype type, const float *x, int n, int dim,
                     uint8_t *base, size_t row_bytes, const int32_t *cells);
void cpu_cache_load(struct backend *b, enum ox_dtype type, const uint8_t *base, size_t row_bytes,
                    float *y, int n_cells, int dim, const int32_t *cell_pos);
void cpu_delta_net(struct backend *b, const struct delta_net_args *a);
void cpu_mamba2(struct backend *b, const struct mamba2_args *a);

#endif
