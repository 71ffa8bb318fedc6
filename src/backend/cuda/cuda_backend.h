/* cuda_backend.h: the CUDA backend as C code sees it: its op table (registry.c registers it).
 * Built only with -DOX_CUDA=ON (OX_HAVE_CUDA). */
#ifndef OX_BACKEND_CUDA_BACKEND_H
#define OX_BACKEND_CUDA_BACKEND_H

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const struct backend_ops backend_cuda_ops;

/* A group of world ranks in this process, rank r on GPU devices[r] (NULL: GPU r) with a thread
 * of its own, whose all_reduce calls NCCL sums (cuda_group.cu); NULL with the error set where
 * there are fewer GPUs, the build has no NCCL or NCCL fails. */
struct backend_group *backend_cuda_group_create(int world, const int *devices);
/* The calling thread runs rank's GPU from now on (before it makes the rank's shard and
 * context). */
enum ox_status backend_cuda_group_enter(struct backend_group *g, int rank);
void backend_cuda_group_free(struct backend_group *g);
void backend_cuda_group_abort(struct backend_group *g);
bool backend_cuda_group_recordable(struct backend_group *g, size_t n);
/* Ranks in other processes: NCCL's unique id (rank 0 makes it), and this process's rank of a
 * group of world, on GPU device. */
enum ox_status backend_cuda_group_id(bool make, void *id, size_t *len);
struct backend_group *backend_cuda_group_join(int world, int rank, int device, const void *id);

#ifdef __cplusplus
}
#endif

#endif
