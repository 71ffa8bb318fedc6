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
/* The per-context state: a stream, cuBLAS, and scratch for batches of n_batch rows of up to
 * max_cols values; dequant: weights must be dequantized for cuBLAS (a scratch buffer for
 * chunks of them; models of f16 / bf16 / f32 weights need none). Decode kernels start during
 * the previous one's tail (programmatic dependent launch) where the GPU can; early_launch (big
 * models) lets each integer GEMV's successor launch as the GEMV starts rather than after its
 * dot products. */
enum ox_status backend_cuda_init(struct backend *b, uint32_t n_batch, int64_t max_cols,
                                 bool early_launch, bool dequant);
/* Page-lock host memory that downloads fill often (the logits), so they copy straight into it
 * rather than through the staging buffer; nothing happens if the system refuses. One range per
 * context; unpin before freeing it. */
void backend_cuda_pin(struct backend *b, void *host, size_t bytes);
void backend_cuda_unpin(struct backend *b);
void backend_cuda_release(struct backend *b);

#endif
