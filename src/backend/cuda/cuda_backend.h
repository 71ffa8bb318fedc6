/* cuda_backend.h: the CUDA backend as C code sees it: its op table, context setup, and the
 * device copy of a model's weights. Built only with -DOX_CUDA=ON (OX_HAVE_CUDA). */
#ifndef OX_BACKEND_CUDA_BACKEND_H
#define OX_BACKEND_CUDA_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "backend/backend.h"

extern const struct backend_ops backend_cuda_ops;

/* Whether a usable GPU is present (false, without an error, when there is none). */
bool backend_cuda_available(void);
/* Whether the CUDA kernels handle weights of this type (matmul and get_rows). */
bool backend_cuda_supports(enum ox_dtype type);
/* Device memory outside any context (a model's weights): allocate and copy up, synchronously. */
enum ox_status backend_cuda_upload_weights(const void *host, size_t bytes, void **dev);
void backend_cuda_free_weights(void *dev);
/* Column c of an f16 matrix on the device times g[c] (a device vector), in place (cuda_fold.cu);
 * _fits first says whether every product stays within f16's range. */
enum ox_status backend_cuda_fold_fits(const void *w, int64_t n_rows, int64_t n_cols,
                                      size_t row_bytes, const float *g, bool *fits);
enum ox_status backend_cuda_fold_columns(void *w, int64_t n_rows, int64_t n_cols, size_t row_bytes,
                                         const float *g);
/* What a context's CUDA state is sized for. Decode kernels start during the previous one's
 * tail (programmatic dependent launch) where the GPU can; early_launch (big models) lets each
 * integer GEMV's successor launch as the GEMV starts rather than after its dot products. */
struct cuda_sizes {
    uint32_t n_batch;     /* rows of a batch */
    int64_t max_cols;     /* the widest row a matmul of up to CUDA_MMQ_MAX_N rows may see */
    int64_t batch_cols;   /* the widest of a batch of n_batch rows (n x cols <= n_batch x this) */
    size_t dequant_bytes; /* room for weights dequantized for cuBLAS: 0 when every matrix is
                             read as it is, else at least batch_cols x 2048 (1024 rows) */
    bool early_launch;
};

/* The per-context state: a stream, cuBLAS, and buffers of the sizes asked for. */
enum ox_status backend_cuda_init(struct backend *b, const struct cuda_sizes *z);
/* Page-lock host memory that downloads fill often (the logits), so they copy straight into it
 * rather than through the staging buffer; nothing happens if the system refuses. One range per
 * context; unpin before freeing it. */
void backend_cuda_pin(struct backend *b, void *host, size_t bytes);
void backend_cuda_unpin(struct backend *b);
void backend_cuda_release(struct backend *b);

#endif
