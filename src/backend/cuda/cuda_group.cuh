/* cuda_group.cuh: one-shot sums through NCCL's windows (cuda_group_sum.cu), as the group
 * (cuda_group.cu) makes, uses and ends them. */
#pragma once
#ifdef OX_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

struct group_sum; /* one rank's window and counts */

/* NULL where this rank cannot take them (a rank on another node, an NCCL before 2.28,
 * OX_SPLIT_ONE_SHOT=0, no memory); stop is the group's end flag, mapped host memory. */
struct group_sum *group_sum_alloc(ncclComm_t comm, int device, const volatile int *stop);
/* Collective over the group, once every rank has its group_sum: false where this process's
 * windows were not all made symmetric (they are freed; the group must agree on it). */
bool group_sums_register(struct group_sum **sums, int n_local);
/* The most floats this process asks to sum in the LL form (0: none; OX_SPLIT_LL, OX_SPLIT_LL_MAX),
 * at most group_sum_ll_cap(); the group agrees on a size, then sets it. */
size_t group_sum_ll_wanted(void);
size_t group_sum_ll_cap(void);
void group_sums_set_ll(struct group_sum **sums, int n_local, size_t ll_max);
/* Whether group_sum takes n floats (not NCCL's all-reduce). */
bool group_sum_takes(const struct group_sum *s, size_t n);
/* comm_gone: the communicators were aborted, and their windows with them. */
void group_sums_free(struct group_sum **sums, int n_local, bool comm_gone);
/* The rank's n floats x summed over the group on stream, queued, into x, or onto to (to += the
 * sum; x then undefined) where to is not NULL; false where n is too many for the windows
 * (NCCL's all-reduce takes those). */
bool group_sum(struct group_sum *s, float *x, float *to, size_t n, cudaStream_t stream);
#endif
