/* cuda_group.cu: the ranks of a split model (model/shard.c) as GPUs, those of this process each
 * with a thread of its own: all of them here (one communicator each, ncclCommInitAll), or one
 * here and the others in other processes (ncclCommInitRank with the unique id rank 0 made and
 * handed out). Their partial rows are summed by NCCL's all-reduce on each rank's stream.
 * Without NCCL in the build a group cannot be made. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cuda/cuda_group.cuh"
#include "backend/cuda/cuda_ops.cuh"

enum { CUDA_GROUP_MAX = 16 };

struct backend_group {
    int world, first, n_local; /* this process's ranks: first .. first + n_local - 1 */
    bool aborted;
    int device[CUDA_GROUP_MAX]; /* by local rank, as comm */
#ifdef OX_HAVE_NCCL
    ncclComm_t comm[CUDA_GROUP_MAX];
    struct group_sum *sum[CUDA_GROUP_MAX]; /* one-shot sums, where all ranks took them */
    volatile int *stop;                    /* mapped: the one-shot kernels see the group end */
    cudaStream_t stream[CUDA_GROUP_MAX];   /* each local rank's, as its last sum or hand-over
                                              named it: an abort lets it drain first */
#endif
};

extern "C" int cuda_devices(void) {
    int gpus = 0;
    if (cudaGetDeviceCount(&gpus) != cudaSuccess)
        gpus = 0;
    cudaGetLastError(); /* "no device" is an answer, not an error to keep */
    return gpus;
}

#ifdef OX_HAVE_NCCL
enum { QUESTIONS = 8 }; /* the most count_yes asks at once */

/* How many ranks of the group say yes to each of n questions (yes[i][q] for local rank i),
 * through a sum in buf: every rank of every process gets the same counts. */
static ncclResult_t count_yes(struct backend_group *g, float **buf, float (*yes)[QUESTIONS],
                              int n) {
    ncclResult_t e = ncclGroupStart();
    for (int i = 0; i < g->n_local && e == ncclSuccess; i++) {
        cudaSetDevice(g->device[i]);
        if (cudaMemcpy(buf[i], yes[i], n * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess)
            e = ncclUnhandledCudaError;
        else
            e = ncclAllReduce(buf[i], buf[i], n, ncclFloat, ncclSum, g->comm[i], 0);
    }
    ncclResult_t end = ncclGroupEnd();
    e = e == ncclSuccess ? end : e;
    for (int i = 0; i < g->n_local && e == ncclSuccess; i++) {
        cudaSetDevice(g->device[i]);
        if (cudaMemcpy(yes[i], buf[i], n * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess)
            e = ncclUnhandledCudaError;
    }
    return e;
}

/* The one-shot sums (cuda_group_sum.cu) where every rank of every process can take them: the
 * ranks agree that each has its memory (and up to which size all ask for the LL form: the cap,
 * halved up to 6 times, or none), register their windows collectively, then agree that every
 * window was made; any no, and all go to NCCL. */
static ncclResult_t take_one_shot(struct backend_group *g, float **buf) {
    float yes[CUDA_GROUP_MAX][QUESTIONS];
    const size_t cap = group_sum_ll_cap(), wanted = group_sum_ll_wanted();
    for (int i = 0; i < g->n_local; i++) {
        g->sum[i] = g->stop ? group_sum_alloc(g->comm[i], g->device[i], g->stop) : NULL;
        yes[i][0] = g->sum[i] ? 1.0f : 0.0f;
        for (int q = 1; q < QUESTIONS; q++) /* up to cap >> (q - 1) floats */
            yes[i][q] = wanted >= cap >> (q - 1) ? 1.0f : 0.0f;
    }
    ncclResult_t e = count_yes(g, buf, yes, QUESTIONS);
    bool all = e == ncclSuccess && yes[0][0] == (float)g->world;
    size_t ll = 0;
    for (int q = QUESTIONS - 1; q >= 1 && e == ncclSuccess; q--)
        ll = yes[0][q] == (float)g->world ? cap >> (q - 1) : ll;
    if (all) { /* every process registers, or none */
        yes[0][0] = group_sums_register(g->sum, g->n_local) ? 1.0f : 0.0f;
        for (int i = 1; i < g->n_local; i++)
            yes[i][0] = yes[0][0];
        e = count_yes(g, buf, yes, 1);
        all = e == ncclSuccess && yes[0][0] == (float)g->world;
    }
    if (all)
        group_sums_set_ll(g->sum, g->n_local, ll);
    else
        group_sums_free(g->sum, g->n_local, false);
    return e;
}

/* NCCL connects its ranks lazily, at a communicator's first sum or hand-over of a kind
 * (NCCL_RUNTIME_CONNECT), and connecting cannot happen inside a CUDA graph's recording (a split
 * model's decode step): one sum of each size class a step uses (a token's row, a batch's, a
 * prompt's) and one hand-over round the ring (rank r to r + 1, the last to 0: a pipeline's)
 * right after the group is made, on every rank of this process at once. */
static ncclResult_t warm_up(struct backend_group *g) {
    static const size_t counts[] = {1024, 64 * 1024, 2 * 1024 * 1024};
    enum { MOST = 2 * 1024 * 1024 };
    float *buf[CUDA_GROUP_MAX] = {0};
    int current = 0;
    cudaGetDevice(&current);
    ncclResult_t e = ncclSuccess;
    for (int i = 0; i < g->n_local && e == ncclSuccess; i++)
        if (cudaSetDevice(g->device[i]) != cudaSuccess ||
            cudaMalloc(&buf[i], 2 * MOST * sizeof(float)) != cudaSuccess ||
            cudaMemset(buf[i], 0, 2 * MOST * sizeof(float)) != cudaSuccess)
            e = ncclUnhandledCudaError;
    for (size_t k = 0; k < sizeof counts / sizeof counts[0] && e == ncclSuccess; k++) {
        e = ncclGroupStart();
        for (int i = 0; i < g->n_local && e == ncclSuccess; i++)
            e = ncclAllReduce(buf[i], buf[i], counts[k], ncclFloat, ncclSum, g->comm[i], 0);
        ncclResult_t end = ncclGroupEnd();
        e = e == ncclSuccess ? end : e;
        if (e != ncclSuccess || g->world < 2)
            continue;
        e = ncclGroupStart();
        for (int i = 0; i < g->n_local && e == ncclSuccess; i++) {
            int rank = g->first + i;
            e = ncclSend(buf[i], counts[k], ncclFloat, (rank + 1) % g->world, g->comm[i], 0);
            if (e == ncclSuccess)
                e = ncclRecv(buf[i] + MOST, counts[k], ncclFloat, (rank + g->world - 1) % g->world,
                             g->comm[i], 0);
        }
        end = ncclGroupEnd();
        e = e == ncclSuccess ? end : e;
    }
    if (e == ncclSuccess)
        e = take_one_shot(g, buf);
    for (int i = 0; i < g->n_local; i++) {
        if (!buf[i])
            continue;
        cudaSetDevice(g->device[i]);
        if (cudaDeviceSynchronize() != cudaSuccess && e == ncclSuccess)
            e = ncclUnhandledCudaError;
        cudaFree(buf[i]);
    }
    cudaGetLastError();
    cudaSetDevice(current);
    return e;
}

/* The group's memory and its end flag (mapped host memory the one-shot kernels poll; without
 * it the sums are NCCL's). */
static struct backend_group *group_alloc(void) {
    struct backend_group *g = (struct backend_group *)calloc(1, sizeof *g);
    void *stop = NULL;
    if (g && cudaHostAlloc(&stop, sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable) ==
                 cudaSuccess) {
        *(int *)stop = 0;
        g->stop = (volatile int *)stop;
    }
    cudaGetLastError();
    return g;
}

/* Everything the group holds: the windows, then the communicators (n_local of them once made;
 * an abort freed both), then the end flag. */
static void group_release(struct backend_group *g) {
    if (!g)
        return;
    group_sums_free(g->sum, g->n_local, g->aborted);
    for (int i = 0; i < g->n_local && !g->aborted; i++)
        ncclCommDestroy(g->comm[i]);
    if (g->stop)
        cudaFreeHost((void *)g->stop);
    free(g);
}
#endif

extern "C" struct backend_group *backend_cuda_group_create(int world, const int *devices) {
#ifdef OX_HAVE_NCCL
    int gpus = cuda_devices();
    if (world < 1 || world > CUDA_GROUP_MAX || world > gpus) {
        ox_fail(OX_ERR_INVALID_ARG, "cuda: a group of %d ranks, but %d GPUs", world, gpus);
        return NULL;
    }
    for (int r = 0; devices && r < world; r++)
        for (int q = 0; q < r; q++)
            if (devices[r] < 0 || devices[r] >= gpus || devices[q] == devices[r]) {
                ox_fail(OX_ERR_INVALID_ARG, "cuda: rank %d's GPU %d is not one of %d, or taken", r,
                        devices[r], gpus);
                return NULL;
            }
    struct backend_group *g = group_alloc();
    for (int r = 0; g && r < world; r++)
        g->device[r] = devices ? devices[r] : r;
    ncclResult_t e = g ? ncclCommInitAll(g->comm, world, g->device) : ncclSystemError;
    if (e == ncclSuccess) {
        g->world = world, g->n_local = world;
        e = warm_up(g);
    }
    if (e != ncclSuccess) {
        group_release(g);
        ox_fail(OX_ERR_DEVICE, "cuda: NCCL's communicators for %d GPUs: %s", world,
                ncclGetErrorString(e));
        return NULL;
    }
    return g;
#else
    (void)devices;
    ox_fail(OX_ERR_UNSUPPORTED, "cuda: this build has no NCCL to sum a split model's %d ranks",
            world);
    return NULL;
#endif
}

extern "C" enum ox_status backend_cuda_group_id(bool make, void *id, size_t *len) {
#ifdef OX_HAVE_NCCL
    static_assert(sizeof(ncclUniqueId) <= GROUP_ID_MAX, "NCCL's id fits the bytes ranks share");
    *len = sizeof(ncclUniqueId);
    ncclResult_t e = make ? ncclGetUniqueId((ncclUniqueId *)id) : ncclSuccess;
    return e == ncclSuccess
               ? OX_OK
               : ox_fail(OX_ERR_DEVICE, "cuda: NCCL's unique id: %s", ncclGetErrorString(e));
#else
    (void)make, (void)id, (void)len;
    return ox_fail(OX_ERR_UNSUPPORTED, "cuda: this build has no NCCL to join ranks across "
                                       "processes");
#endif
}

extern "C" struct backend_group *backend_cuda_group_join(int world, int rank, int device,
                                                         const void *id) {
#ifdef OX_HAVE_NCCL
    int gpus = cuda_devices();
    if (device < 0 || device >= gpus) {
        ox_fail(OX_ERR_INVALID_ARG, "cuda: GPU %d for rank %d, but this host has %d", device, rank,
                gpus);
        return NULL;
    }
    cudaError_t ce = cudaSetDevice(device);
    struct backend_group *g = group_alloc();
    ncclUniqueId uid;
    memcpy(&uid, id, sizeof uid);
    ncclResult_t e = !g                  ? ncclSystemError
                     : ce != cudaSuccess ? ncclUnhandledCudaError
                                         : ncclCommInitRank(&g->comm[0], world, uid, rank);
    if (e == ncclSuccess) {
        g->world = world, g->first = rank, g->n_local = 1, g->device[0] = device;
        e = warm_up(g);
    }
    if (e != ncclSuccess) {
        group_release(g);
        ox_fail(OX_ERR_DEVICE, "cuda: NCCL's communicator for rank %d of %d on GPU %d: %s", rank,
                world, device, ncclGetErrorString(e));
        return NULL;
    }
    return g;
#else
    (void)world, (void)rank, (void)device, (void)id;
    ox_fail(OX_ERR_UNSUPPORTED, "cuda: this build has no NCCL to join ranks across processes");
    return NULL;
#endif
}

extern "C" enum ox_status backend_cuda_group_enter(struct backend_group *g, int rank) {
    int i = rank - g->first;
    cudaError_t e = i >= 0 && i < g->n_local ? cudaSetDevice(g->device[i]) : cudaErrorInvalidDevice;
    return e == cudaSuccess
               ? OX_OK
               : ox_fail(OX_ERR_DEVICE, "cuda: rank %d's GPU: %s", rank, cudaGetErrorString(e));
}

extern "C" void backend_cuda_group_free(struct backend_group *g) {
    if (!g)
        return;
#ifdef OX_HAVE_NCCL
    group_release(g);
#else
    free(g);
#endif
}

#ifdef OX_HAVE_NCCL
/* Waits (2 s at most) for local rank i's stream to empty once the end flag is up: the one-shot
 * kernels queued on it see the flag and return, and ncclCommAbort, which unmaps the peers'
 * windows, must not pull them from under a kernel still reading them. A stream held by an NCCL
 * kernel (a prompt's sum, a pipeline's hand-over) only empties with the abort: the wait ends. */
static void drain(struct backend_group *g, int i) {
    cudaStream_t s = __atomic_load_n(&g->stream[i], __ATOMIC_ACQUIRE);
    if (!s || !g->sum[i] || cudaSetDevice(g->device[i]) != cudaSuccess)
        return;
    struct timespec pause = {0, 1000000}; /* 1 ms */
    for (int t = 0; t < 2000 && cudaStreamQuery(s) == cudaErrorNotReady; t++)
        nanosleep(&pause, NULL);
    cudaGetLastError();
}

static void note_stream(struct backend_group *g, int rank, cudaStream_t s) {
    __atomic_store_n(&g->stream[rank - g->first], s, __ATOMIC_RELEASE);
}
#endif

/* ncclCommAbort ends a communicator whose peer is gone, from any thread: the kernels waiting in
 * it return, and it is freed. Later sums fail at once. */
extern "C" void backend_cuda_group_abort(struct backend_group *g) {
    if (__atomic_exchange_n(&g->aborted, true, __ATOMIC_ACQ_REL))
        return;
#ifdef OX_HAVE_NCCL
    if (g->stop) /* the one-shot kernels waiting for a peer give up */
        *g->stop = 1;
    for (int i = 0; i < g->n_local; i++)
        drain(g, i);
    for (int i = 0; i < g->n_local; i++)
        ncclCommAbort(g->comm[i]);
#endif
}

/* Sums the one-shot kernels take (each rank of the group takes them, or none does) end with the
 * end flag, also recorded in a graph; NCCL's all-reduce there hung a lost rank's peer (2 H100s,
 * OX_SPLIT_ONE_SHOT=0: the decode never returned, where unrecorded it failed in 2 s). */
extern "C" bool backend_cuda_group_recordable(struct backend_group *g, size_t n) {
#ifdef OX_HAVE_NCCL
    return g->sum[0] && group_sum_takes(g->sum[0], n);
#else
    (void)g, (void)n;
    return false;
#endif
}

/* The one-shot kernels where they take n (cuda_group_sum.cu), else NCCL's all-reduce (and the
 * backend's add, for `to`). Either may write rows a matmul's q8_1 copy was made of. */
enum ox_status cuda_all_reduce(struct backend *b, struct backend_group *g, int rank, float *x,
                               size_t n, float *to) {
    char msg[160];
#ifdef OX_HAVE_NCCL
    cuda_forget_xq(cuda_of(b));
    bool ended = __atomic_load_n(&g->aborted, __ATOMIC_ACQUIRE);
    cudaStream_t stream = cuda_of(b)->stream;
    note_stream(g, rank, stream);
    if (!ended && group_sum(g->sum[rank - g->first], x, to, n, stream)) {
        CUDA_LAUNCHED(b, "cuda: a split's one-shot sum"); /* the batch's download reports it */
        return OX_OK;
    }
    ncclResult_t e =
        ended ? ncclRemoteError
              : ncclAllReduce(x, x, n, ncclFloat, ncclSum, g->comm[rank - g->first], stream);
    if (e == ncclSuccess && to)
        b->ops->add(b, to, x, n);
    if (e == ncclSuccess)
        return OX_OK;
    snprintf(msg, sizeof msg, "cuda: NCCL all-reduce of rank %d: %s", rank,
             g->aborted ? "the group was ended (a rank is gone)" : ncclGetErrorString(e));
#else
    (void)g, (void)rank, (void)x, (void)n, (void)to;
    snprintf(msg, sizeof msg, "cuda: this build has no NCCL");
#endif
    cuda_note_again(b, msg);
    return ox_fail(OX_ERR_DEVICE, "%s", msg);
}

/* A pipeline's hand-over: NCCL's point-to-point calls on the rank's stream. */
static enum ox_status p2p(struct backend *b, struct backend_group *g, int rank, int peer, float *x,
                          size_t n, bool send) {
    char msg[160];
#ifdef OX_HAVE_NCCL
    ncclComm_t c = g->comm[rank - g->first];
    cudaStream_t st = cuda_of(b)->stream;
    note_stream(g, rank, st);
    ncclResult_t e = __atomic_load_n(&g->aborted, __ATOMIC_ACQUIRE) ? ncclRemoteError
                     : send ? ncclSend(x, n, ncclFloat, peer, c, st)
                            : ncclRecv(x, n, ncclFloat, peer, c, st);
    if (e == ncclSuccess)
        return OX_OK;
    snprintf(msg, sizeof msg, "cuda: NCCL %s of rank %d (rank %d): %s", send ? "send" : "receive",
             rank, peer,
             g->aborted ? "the group was ended (a rank is gone)" : ncclGetErrorString(e));
#else
    (void)g, (void)rank, (void)peer, (void)x, (void)n, (void)send;
    snprintf(msg, sizeof msg, "cuda: this build has no NCCL");
#endif
    cuda_note_again(b, msg);
    return ox_fail(OX_ERR_DEVICE, "%s", msg);
}

enum ox_status cuda_send(struct backend *b, struct backend_group *g, int rank, int to,
                         const float *x, size_t n) {
    return p2p(b, g, rank, to, (float *)x, n, true);
}

enum ox_status cuda_recv(struct backend *b, struct backend_group *g, int rank, int from, float *x,
                         size_t n) {
    return p2p(b, g, rank, from, x, n, false);
}

extern "C" int cuda_device_get(void) {
    int d = 0;
    return cudaGetDevice(&d) == cudaSuccess ? d : 0;
}

extern "C" void cuda_device_set(int device) {
    cudaSetDevice(device);
}
