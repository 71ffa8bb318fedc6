/* cuda_group.cu: the ranks of a split model (model/shard.c) as GPUs of this process, rank r on
 * device r with a thread of its own: their partial rows are summed by NCCL's all-reduce on each
 * rank's stream. Without NCCL in the build a group cannot be made. */
#include <stdio.h>
#include <stdlib.h>

#include "backend/cuda/cuda_ops.cuh"
#ifdef OX_HAVE_NCCL
#include <nccl.h>
#endif

enum { CUDA_GROUP_MAX = 16 };

struct backend_group {
    int world;
#ifdef OX_HAVE_NCCL
    ncclComm_t comm[CUDA_GROUP_MAX];
#endif
};

extern "C" struct backend_group *backend_cuda_group_create(int world) {
#ifdef OX_HAVE_NCCL
    int gpus = 0;
    if (cudaGetDeviceCount(&gpus) != cudaSuccess)
        gpus = 0;
    if (world < 1 || world > CUDA_GROUP_MAX || world > gpus) {
        ox_fail(OX_ERR_INVALID_ARG, "cuda: a group of %d ranks, but %d GPUs", world, gpus);
        return NULL;
    }
    struct backend_group *g = (struct backend_group *)calloc(1, sizeof *g);
    int devices[CUDA_GROUP_MAX];
    for (int r = 0; r < world; r++)
        devices[r] = r;
    ncclResult_t e = g ? ncclCommInitAll(g->comm, world, devices) : ncclSystemError;
    if (e != ncclSuccess) {
        free(g);
        ox_fail(OX_ERR_DEVICE, "cuda: NCCL's communicators for %d GPUs: %s", world,
                ncclGetErrorString(e));
        return NULL;
    }
    g->world = world;
    return g;
#else
    ox_fail(OX_ERR_UNSUPPORTED, "cuda: this build has no NCCL to sum a split model's %d ranks",
            world);
    return NULL;
#endif
}

extern "C" enum ox_status backend_cuda_group_enter(struct backend_group *g, int rank) {
    cudaError_t e = rank >= 0 && rank < g->world ? cudaSetDevice(rank) : cudaErrorInvalidDevice;
    return e == cudaSuccess
               ? OX_OK
               : ox_fail(OX_ERR_DEVICE, "cuda: rank %d's GPU: %s", rank, cudaGetErrorString(e));
}

extern "C" void backend_cuda_group_free(struct backend_group *g) {
    if (!g)
        return;
#ifdef OX_HAVE_NCCL
    for (int r = 0; r < g->world; r++)
        ncclCommDestroy(g->comm[r]);
#endif
    free(g);
}

void cuda_all_reduce(struct backend *b, struct backend_group *g, int rank, float *x, size_t n) {
#ifdef OX_HAVE_NCCL
    ncclResult_t e = ncclAllReduce(x, x, n, ncclFloat, ncclSum, g->comm[rank], cuda_of(b)->stream);
    if (e != ncclSuccess) {
        char msg[160];
        snprintf(msg, sizeof msg, "cuda: NCCL all-reduce of rank %d: %s", rank,
                 ncclGetErrorString(e));
        cuda_note_again(b, msg);
    }
#else
    (void)g, (void)rank, (void)x, (void)n;
    cuda_note_again(b, "cuda: this build has no NCCL");
#endif
}
