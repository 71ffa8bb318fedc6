/* cuda_group_sum.cu: a split model's small sums (a token's rows, a batch's) in one kernel per rank
 * through NCCL's symmetric memory (windows every rank maps over NVLink), added in rank order and,
 * where the caller wants, onto the residual at once. A token's rows (a few thousand floats) go
 * as NCCL's LL protocol sends them, each float stored in the peers' windows beside the number of
 * the sum it belongs to, so a reader that sees the number has the float: one write's latency,
 * no fence or flag. A batch's rows (up to SUM_CAP floats) are copied into the rank's own window
 * and read from the peers' after a flag: half the bytes over NVLink. Past that, and where the
 * ranks are not all on one node with CUDA P2P between them, the sums are NCCL's all-reduce. */
#ifdef OX_HAVE_NCCL
#include <nccl.h>
#include <nccl_device.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/cuda/cuda_group.cuh"

/* The window: the flags peers raise, then two slots of rows (a sum uses the slot of its parity:
 * a rank may write the next sum's rows while a slower peer still reads this one's). Each block
 * of the kernel keeps a count of the sums it has seen, so blocks and ranks agree on the parity
 * and on the flag value that means "this sum's rows are there". */
enum {
    SUM_BLOCKS = 64, /* every kernel launches them all: their counts move in step */
    SUM_THREADS = 256,
    SUM_PEERS = 8,      /* the most ranks this path takes */
    SUM_HEADER = 4096,  /* bytes: flags [SUM_BLOCKS][SUM_PEERS] */
    SUM_MIN_SPAN = 1024 /* floats a block adds at least: 4 a thread */
};
static const size_t SUM_CAP = (size_t)1 << 20; /* floats a slot holds: 256 tokens of 4096 */
static const size_t LL_CAP = (size_t)1 << 17;  /* floats an LL slot holds: 32 tokens of 4096 */
static const size_t LL_SPAN = SUM_THREADS;     /* floats an LL block takes at least */
static_assert(SUM_BLOCKS * SUM_PEERS * sizeof(uint32_t) <= SUM_HEADER, "the flags fit");

struct group_sum {
    ncclComm_t comm;
    ncclWindow_t win;
    void *base;       /* the window's memory (ncclMemAlloc) */
    uint32_t *counts; /* by block: the sums it has taken part in, then the LL sums */
    const volatile int *stop;
    int rank, world, device;
    size_t ll_max; /* sums of up to this many floats as LL words (0: none; the group agrees) */
};

static __device__ uint32_t load_acquire(const uint32_t *p) {
    uint32_t v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

static __device__ void store_release(uint32_t *p, uint32_t v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

/* Raises this block's flag in every peer's window, then waits for theirs (or for the group's
 * end, checked every 1024 polls). False when the group was ended. */
static __device__ bool meet_peers(ncclWindow_t win, int me, int world, uint32_t sum,
                                  const volatile int *stop) {
    __shared__ int ended;
    int peer = threadIdx.x;
    if (peer == 0)
        ended = 0;
    __syncthreads();
    if (peer < world && peer != me) {
        size_t flag = ((size_t)blockIdx.x * SUM_PEERS + (size_t)me) * sizeof(uint32_t);
        __threadfence_system(); /* the block's rows before the flag that says they are there */
        store_release((uint32_t *)ncclGetPeerPointer(win, flag, peer), sum);
        const uint32_t *mine = (const uint32_t *)ncclGetLocalPointer(
            win, ((size_t)blockIdx.x * SUM_PEERS + (size_t)peer) * sizeof(uint32_t));
        for (unsigned polls = 1; (int32_t)(load_acquire(mine) - sum) < 0; polls++)
            if (polls % 1024 == 0 && *stop) {
                ended = 1;
                break;
            }
    }
    __syncthreads();
    return !ended;
}

/* x[lo, hi) of every rank added in rank order (the same floats on every rank) into x, or onto to,
 * 4 floats a thread where both are aligned for it; peers' rows are read past the L1 cache
 * (__ldcv), fresh each sum. */
static __device__ void add_ranks(ncclWindow_t win, size_t slot, float *x, float *to, size_t lo,
                                 size_t hi, int me, int world) {
    const float *rows[SUM_PEERS];
    for (int r = 0; r < world; r++)
        rows[r] = r == me ? x : (const float *)ncclGetPeerPointer(win, slot, r);
    size_t tail = lo;
    if ((((uintptr_t)x | (uintptr_t)to) & 15) == 0) {
        for (size_t i = lo + 4 * threadIdx.x; i + 4 <= hi; i += 4 * SUM_THREADS) {
            float4 s = __ldcv((const float4 *)(rows[0] + i));
            for (int r = 1; r < world; r++) {
                float4 v = __ldcv((const float4 *)(rows[r] + i));
                s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
            }
            if (to) {
                float4 t = *(float4 *)(to + i);
                s.x = t.x + s.x, s.y = t.y + s.y, s.z = t.z + s.z, s.w = t.w + s.w;
            }
            *(float4 *)((to ? to : x) + i) = s;
        }
        tail = hi - (hi - lo) % 4;
    }
    for (size_t i = tail + threadIdx.x; i < hi; i += SUM_THREADS) {
        float s = __ldcv(rows[0] + i);
        for (int r = 1; r < world; r++)
            s += __ldcv(rows[r] + i);
        if (to)
            to[i] += s;
        else
            x[i] = s;
    }
}

/* One block's share of a sum of n floats: blocks past the rows only count the sum. */
static __global__ void __launch_bounds__(SUM_THREADS)
    one_shot_sum(ncclWindow_t win, uint32_t *counts, const volatile int *stop, float *x, float *to,
                 size_t n, size_t span, int me, int world) {
    uint32_t sum = counts[blockIdx.x] + 1;
    size_t lo = blockIdx.x * span, hi = lo + span < n ? lo + span : n;
    if (lo < n) {
        size_t slot = SUM_HEADER + (size_t)(sum & 1) * SUM_CAP * sizeof(float);
        float *mine = (float *)ncclGetLocalPointer(win, slot);
        for (size_t i = lo + threadIdx.x; i < hi; i += SUM_THREADS)
            mine[i] = x[i];
        if (!meet_peers(win, me, world, sum, stop))
            return; /* the group was ended: x is not the sum, and the caller says so */
        add_ranks(win, slot, x, to, lo, hi, me, world);
    }
    __syncthreads(); /* every thread's count read before it moves on */
    if (threadIdx.x == 0)
        counts[blockIdx.x] = sum;
}

/* The LL slots: by parity, by the rank that wrote them, LL_CAP words of {float, sum number}. */
static __host__ __device__ size_t ll_word(int parity, int from, int world, size_t i) {
    return SUM_HEADER + 2 * SUM_CAP * sizeof(float) +
           (((size_t)parity * (size_t)world + (size_t)from) * LL_CAP + i) * sizeof(uint64_t);
}

/* An LL word: the float in the low half, the sum's tag in the high, stored and loaded as one
 * 64-bit access (single-copy atomic, where two 32-bit halves of a v2 access need not be). */
static __device__ void ll_store(uint64_t *p, float v, uint32_t tag) {
    uint64_t w = (uint64_t)tag << 32 | __float_as_uint(v);
    asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(p), "l"(w) : "memory");
}

static __device__ uint64_t ll_load(const uint64_t *p) {
    uint64_t w;
    asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(w) : "l"(p) : "memory");
    return w;
}

/* A sum of n floats as LL words: each thread stores its floats into every peer's slot for this
 * rank, then waits for each peer's word to carry this sum's tag (or for the group's end), adds
 * in rank order, and clears the word: a word is zero but between a peer's store and its reading,
 * so any tag but zero is this sum's (a 32-bit sum number would come round again). A slot of one
 * parity is written again two sums later, when every peer has read and cleared it (it sent its
 * own words of the sum between, from a later kernel, after this one's clears were done). */
static __global__ void __launch_bounds__(SUM_THREADS)
    ll_sum(ncclWindow_t win, uint32_t *counts, const volatile int *stop, float *x, float *to,
           size_t n, size_t span, int me, int world) {
    uint32_t sum = counts[SUM_BLOCKS + blockIdx.x] + 1, tag = sum ? sum : 1;
    int parity = (int)(sum & 1);
    size_t lo = blockIdx.x * span, hi = lo + span < n ? lo + span : n;
    for (size_t i = lo + threadIdx.x; i < hi; i += SUM_THREADS)
        for (int r = 0; r < world; r++)
            if (r != me)
                ll_store((uint64_t *)ncclGetPeerPointer(win, ll_word(parity, me, world, i), r),
                         x[i], tag);
    bool ended = false;
    for (size_t i = lo + threadIdx.x; i < hi && !ended; i += SUM_THREADS) {
        float s = 0.0f;
        for (int r = 0; r < world && !ended; r++) {
            float v = x[i];
            if (r != me) {
                uint64_t *p = (uint64_t *)ncclGetLocalPointer(win, ll_word(parity, r, world, i));
                uint64_t w = ll_load(p);
                for (unsigned polls = 1; (uint32_t)(w >> 32) != tag && !ended;
                     polls++, w = ll_load(p))
                    ended = polls % 1024 == 0 && *stop;
                v = __uint_as_float((uint32_t)w);
                if (!ended)
                    ll_store(p, 0.0f, 0); /* read: zero until the peer's next store */
            }
            s = r == 0 ? v : s + v;
        }
        if (to)
            to[i] += s;
        else
            x[i] = s;
    }
    __syncthreads(); /* every thread's count read before it moves on */
    if (threadIdx.x == 0)
        counts[SUM_BLOCKS + blockIdx.x] = sum;
}

static size_t window_bytes(int world) {
    return ll_word(0, 0, world, 2 * (size_t)world * LL_CAP);
}

static void sum_free(struct group_sum *s, bool comm_gone) {
    if (!s)
        return;
    if (s->win && !comm_gone) /* an aborted communicator took its windows with it */
        ncclCommWindowDeregister(s->comm, s->win);
    if (s->base)
        ncclMemFree(s->base);
    cudaFree(s->counts);
    free(s);
}

/* One rank's memory, zeroed (its flags down) before any peer can see it: on the rank's device. */
static struct group_sum *sum_alloc(ncclComm_t comm, int device, const volatile int *stop) {
    struct group_sum *s = (struct group_sum *)calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->comm = comm, s->stop = stop, s->device = device;
    if (cudaSetDevice(device) != cudaSuccess || ncclCommUserRank(comm, &s->rank) != ncclSuccess ||
        ncclCommCount(comm, &s->world) != ncclSuccess ||
        ncclMemAlloc(&s->base, window_bytes(s->world)) != ncclSuccess ||
        cudaMalloc(&s->counts, 2 * SUM_BLOCKS * sizeof(uint32_t)) != cudaSuccess ||
        cudaMemset(s->base, 0, window_bytes(s->world)) != cudaSuccess ||
        cudaMemset(s->counts, 0, 2 * SUM_BLOCKS * sizeof(uint32_t)) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess) {
        sum_free(s, false);
        return NULL;
    }
    return s;
}

/* A rank may take one-shot sums when every rank of its group is on its node (NCCL's LSA team
 * is the whole group) and this NCCL has windows (2.28); OX_SPLIT_ONE_SHOT=0 says no. Whether
 * NCCL can map the peers' windows (CUDA P2P between every pair, cuMem) only registering tells. */
struct group_sum *group_sum_alloc(ncclComm_t comm, int device, const volatile int *stop) {
    int version = 0, world = 0;
    const char *env = getenv("OX_SPLIT_ONE_SHOT");
    if ((env && env[0] == '0') || ncclGetVersion(&version) != ncclSuccess || version < 22800 ||
        ncclCommCount(comm, &world) != ncclSuccess || world > SUM_PEERS ||
        ncclTeamLsa(comm).nRanks != world)
        return NULL;
    return sum_alloc(comm, device, stop);
}

/* OX_SPLIT_LL=0: none; OX_SPLIT_LL_MAX: fewer than LL_CAP (a measuring knob). */
size_t group_sum_ll_wanted(void) {
    const char *env = getenv("OX_SPLIT_LL"), *most = getenv("OX_SPLIT_LL_MAX");
    if (env && env[0] == '0')
        return 0;
    size_t n = most ? (size_t)strtoull(most, NULL, 10) : LL_CAP;
    return n < LL_CAP ? n : LL_CAP;
}

size_t group_sum_ll_cap(void) {
    return LL_CAP;
}

void group_sums_set_ll(struct group_sum **sums, int n_local, size_t ll_max) {
    for (int i = 0; i < n_local; i++)
        sums[i]->ll_max = ll_max;
}

/* A window NCCL really made symmetric: without the peers mapped (no CUDA P2P between some pair,
 * NCCL_CUMEM_ENABLE=0, NCCL_WIN_ENABLE=0) registering still succeeds, handing back NULL or a
 * host handle of a local registration, which the kernels must never read as a window. A
 * symmetric one lives in device memory and names this rank. */
static bool window_made(const struct group_sum *s) {
    struct cudaPointerAttributes at;
    struct ncclWindow_vidmem w; /* its first fields, up to those read here */
    size_t head = offsetof(struct ncclWindow_vidmem, worldRank) + sizeof w.worldRank;
    if (!s->win || cudaPointerGetAttributes(&at, s->win) != cudaSuccess ||
        at.type != cudaMemoryTypeDevice || cudaDeviceSynchronize() != cudaSuccess ||
        cudaMemcpy(&w, s->win, head, cudaMemcpyDeviceToHost) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return w.lsaFlatBase && w.worldRank == s->rank && w.lsaRank >= 0 && w.lsaRank < s->world;
}

/* Registering a window is collective: every rank of the group, in every process, at once,
 * after all have agreed to (cuda_group.cu, which agrees again on the answer). False where this
 * process's windows were not all made: they are freed. */
bool group_sums_register(struct group_sum **sums, int n_local) {
    ncclResult_t e = ncclGroupStart();
    for (int i = 0; i < n_local && e == ncclSuccess; i++)
        e = ncclCommWindowRegister(sums[i]->comm, sums[i]->base, window_bytes(sums[i]->world),
                                   &sums[i]->win, NCCL_WIN_COLL_SYMMETRIC);
    ncclResult_t end = ncclGroupEnd();
    cudaGetLastError();
    bool made = e == ncclSuccess && end == ncclSuccess;
    for (int i = 0; i < n_local && made; i++)
        made = cudaSetDevice(sums[i]->device) == cudaSuccess && window_made(sums[i]);
    if (!made)
        group_sums_free(sums, n_local, false);
    return made;
}

void group_sums_free(struct group_sum **sums, int n_local, bool comm_gone) {
    for (int i = 0; i < n_local; i++)
        sum_free(sums[i], comm_gone), sums[i] = NULL;
}

bool group_sum_takes(const struct group_sum *s, size_t n) {
    return s && n <= SUM_CAP;
}

bool group_sum(struct group_sum *s, float *x, float *to, size_t n, cudaStream_t stream) {
    if (!group_sum_takes(s, n))
        return false;
    if (n <= s->ll_max) {
        size_t span = (n + SUM_BLOCKS - 1) / SUM_BLOCKS;
        span = (span + LL_SPAN - 1) / LL_SPAN * LL_SPAN;
        ll_sum<<<SUM_BLOCKS, SUM_THREADS, 0, stream>>>(s->win, s->counts, s->stop, x, to, n, span,
                                                       s->rank, s->world);
        return true;
    }
    size_t span = (n + SUM_BLOCKS - 1) / SUM_BLOCKS;
    span = span < (size_t)SUM_MIN_SPAN ? (size_t)SUM_MIN_SPAN : (span + 3) / 4 * 4;
    one_shot_sum<<<SUM_BLOCKS, SUM_THREADS, 0, stream>>>(s->win, s->counts, s->stop, x, to, n, span,
                                                         s->rank, s->world);
    return true;
}
#endif
