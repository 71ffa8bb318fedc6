/* qmatmul.c: drives the fast matmul kernels: takes the kernel for the CPU (qkernel_for), quantizes
 * the activations once (threads split the tokens), then walks L2-sized blocks of tokens in the
 * kernel's tiles (threads split the rows; small matmuls stay on one thread). */
#include "backend/cpu/qmatmul.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/qkernels.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core/alloc.h"
#include "core/cpu_features.h"

static const struct qkernel *kernels[OX_DTYPE_COUNT];
static pthread_once_t kernels_once = PTHREAD_ONCE_INIT;

/* Per dtype, the kernel of the best level this CPU (as OX_CPU_ISA leaves it) runs that has one;
 * none: the reference path runs. */
static void pick_kernels(void) {
    const struct cpu_features *f = cpu_features_get();
    const struct qkernel *const *levels[3]; /* the levels this CPU runs, best first */
    int n_levels = 0;
#ifdef OX_HAVE_X86_KERNELS
    bool avx2 = f->avx2 && f->fma && f->f16c;
    if (f->avx512f && f->avx512bw && f->avx512dq && f->avx512vl && f->avx512vnni && f->fma &&
        f->f16c)
        levels[n_levels++] = qkernels_avx512;
    if (avx2 && f->avx_vnni)
        levels[n_levels++] = qkernels_avx2vnni;
    if (avx2)
        levels[n_levels++] = qkernels_avx2;
#endif
#ifdef OX_HAVE_ARM_KERNELS
    if (f->neon && f->dotprod && f->i8mm)
        levels[n_levels++] = qkernels_neon_i8mm;
    if (f->neon && f->dotprod)
        levels[n_levels++] = qkernels_neon_dotprod;
    if (f->neon)
        levels[n_levels++] = qkernels_neon;
#endif
#ifdef OX_HAVE_WASM_KERNELS
    if (f->wasm_simd)
        levels[n_levels++] = qkernels_wasm_simd;
#endif
    (void)f;
    for (int t = 0; t < OX_DTYPE_COUNT; t++)
        for (int l = 0; l < n_levels && !kernels[t]; l++)
            kernels[t] = levels[l][t];
}

const struct qkernel *qkernel_for(enum ox_dtype type) {
    if (getenv("OX_REFERENCE_MATMUL")) /* debugging: the scalar oracle everywhere */
        return NULL;
    pthread_once(&kernels_once, pick_kernels);
    return (unsigned)type < OX_DTYPE_COUNT ? kernels[type] : NULL;
}

struct qjob {
    const struct qkernel *k;
    const struct mat *w;
    const float *x;
    uint8_t *xq;
    size_t xq_row;
    float *y;
    int n;
    uint8_t *scratch; /* per-thread bytes for repacked rows */
    size_t scratch_per_thread;
    bool one_token_order; /* struct backend's */
    /* the 16-row group chunks of the packed paths, claimed in turn; a line of its own, so the
     * claims do not evict the fields above from the other core */
    _Alignas(64) atomic_int next_chunk;
};

/* The packed paths hand out their 16-row groups in chunks that threads claim as they finish
 * the last, not in equal shares up front: on a VM a vCPU loses its core now and then (and two
 * cores never run at quite the same speed), and a thread that had finished its fixed share
 * would wait for the other at the end of every matmul. The wait left is about half a chunk:
 * with 16 chunks a thread, decode spent 3% of its time waiting (perf, Llama-3.2-1B Q4_K_M, 2
 * threads) against 5% with 4; a chunk of an FFN matrix is still ~100 KB, long enough for the
 * prefetchers to ramp up. Which thread computes a group does not change its result. */
#define CHUNKS_PER_THREAD 16
/* About a quarter of a microsecond of single-token work (see QMATMUL_MIN_MACS_PER_PART). */
#define MIN_MACS_PER_CHUNK 8192.0

/* How many chunks groups of 16 rows (macs_per_group multiply-adds each) go in:
 * CHUNKS_PER_THREAD a thread, none below MIN_MACS_PER_CHUNK (a claim moves a cache line between
 * cores), at least one a thread. */
int64_t qmatmul_chunk_count(double macs_per_group, int64_t groups, int nth) {
    double macs = macs_per_group * (double)groups;
    int64_t chunks = (int64_t)nth * CHUNKS_PER_THREAD, least = (int64_t)(macs / MIN_MACS_PER_CHUNK);
    least = least > nth ? least : nth;
    chunks = chunks < least ? chunks : least;
    return chunks < groups ? chunks : groups;
}
static int64_t chunk_count(const struct qjob *j, int64_t groups, int nth) {
    return qmatmul_chunk_count(16.0 * (double)j->w->n_cols * (double)j->n, groups, nth);
}

bool qmatmul_claim(atomic_int *next, int64_t groups, int64_t chunks, int64_t *g0, int64_t *g1) {
    int64_t c = atomic_fetch_add_explicit(next, 1, memory_order_relaxed);
    if (c >= chunks)
        return false;
    *g0 = groups * c / chunks, *g1 = groups * (c + 1) / chunks;
    return true;
}

static void quantize_rows(void *arg, int ith, int nth) {
    struct qjob *j = arg;
    for (int t = ith; t < j->n; t += nth)
        j->k->quantize_x(j->x + (size_t)t * (size_t)j->w->n_cols, j->xq + (size_t)t * j->xq_row,
                         j->w->n_cols);
}

/* Tokens per block of the tile path. The quantized activations of a block stay in this core's L2
 * while every row tile of the thread's share streams past them, so each is read from memory
 * once per block rather than once per row tile: half the L2 of the CPU it runs on
 * (cpu_l2_block). Weight rows need no block of their own: each row tile is read once per token
 * block whatever order the rows go in. */
static int block_tokens(const struct qjob *j) {
    return cpu_l2_block(cpu_caches_get(), j->xq_row, j->k->max_nc, j->n);
}

/* Batches: each group of 16 rows is repacked once into this thread's scratch (from the
 * load-time layout when there is one), then every token of the batch runs over it in tiles of
 * pack_nc. */
static void multiply_rows_packed(struct qjob *j, int ith, int nth) {
    const struct qkernel *k = j->k;
    const struct mat *w = j->w;
    int64_t groups = (w->n_rows + 15) / 16, chunks = chunk_count(j, groups, nth), g0, g1;
    void *pack = j->scratch + (size_t)ith * j->scratch_per_thread;
    while (qmatmul_claim(&j->next_chunk, groups, chunks, &g0, &g1))
        for (int64_t g = g0; g < g1; g++) {
            int64_t r = g * 16;
            int nr = (int)(w->n_rows - r < 16 ? w->n_rows - r : 16);
            if (w->packed)
                k->unpack16(w->n_cols,
                            (const uint8_t *)w->packed +
                                (size_t)g * k->packed_group_bytes(w->n_cols),
                            pack);
            else
                k->repack16(w->n_cols, (const uint8_t *)w->data + (size_t)r * w->row_bytes,
                            w->row_bytes, nr, pack);
            for (int c = 0; c < j->n; c += k->pack_nc) {
                int nc = j->n - c < k->pack_nc ? j->n - c : k->pack_nc;
                k->tile16(w->n_cols, pack, nr, j->xq + (size_t)c * j->xq_row, j->xq_row, nc,
                          j->y + (size_t)c * (size_t)w->n_rows + (size_t)r, (size_t)w->n_rows);
            }
        }
}

/* Single tokens and small batches over the load-time layout: threads split the 16-row groups,
 * each streamed once for up to pack_nc tokens. */
static void multiply_rows_gemv16(struct qjob *j, int ith, int nth) {
    const struct qkernel *k = j->k;
    const struct mat *w = j->w;
    (void)ith; /* chunks are claimed, not assigned */
    int64_t groups = w->n_rows / 16, chunks = chunk_count(j, groups, nth), g0, g1;
    size_t gb = k->packed_group_bytes(w->n_cols);
    while (qmatmul_claim(&j->next_chunk, groups, chunks, &g0, &g1))
        for (int c = 0; c < j->n; c += k->pack_nc) {
            int nc = j->n - c < k->pack_nc ? j->n - c : k->pack_nc;
            for (int64_t g = g0; g < g1; g++)
                k->gemv16(w->n_cols, (const uint8_t *)w->packed + (size_t)g * gb,
                          j->xq + (size_t)c * j->xq_row, j->xq_row, nc,
                          j->y + (size_t)c * (size_t)w->n_rows + (size_t)g * 16, (size_t)w->n_rows);
        }
}

static void multiply_rows(void *arg, int ith, int nth) {
    struct qjob *j = arg;
    const struct qkernel *k = j->k;
    if (j->w->packed && j->n < k->pack_nc) {
        multiply_rows_gemv16(j, ith, nth);
        return;
    }
    /* Over the load-time layout the batch tile sums each token as gemv16 does (the same
     * integers, then the same float steps: test_speculative); from the file's rows it does
     * not, so one_token_order keeps a single token's row tile there. */
    int min_pack = k->min_pack_n ? k->min_pack_n : k->pack_nc;
    if (k->repack16 && j->n >= min_pack && (!j->one_token_order || j->w->packed) &&
        PACK16_BYTES(j->w->n_cols) <= j->scratch_per_thread) {
        multiply_rows_packed(j, ith, nth);
        return;
    }
    const struct mat *w = j->w;
    /* each thread takes a contiguous share of the rows, in whole tiles */
    int64_t tiles = (w->n_rows + k->max_nr - 1) / k->max_nr;
    int64_t r0 = tiles * ith / nth * k->max_nr, r1 = tiles * (ith + 1) / nth * k->max_nr;
    r1 = r1 < w->n_rows ? r1 : w->n_rows;
    int cb = block_tokens(j);
    for (int c0 = 0; c0 < j->n; c0 += cb) {
        int c1 = c0 + cb < j->n ? c0 + cb : j->n;
        for (int64_t r = r0; r < r1; r += k->max_nr) {
            int nr = (int)(r1 - r < k->max_nr ? r1 - r : k->max_nr);
            const uint8_t *wr = (const uint8_t *)w->data + (size_t)r * w->row_bytes;
            for (int c = c0; c < c1; c += k->max_nc) {
                int nc = c1 - c < k->max_nc ? c1 - c : k->max_nc;
                k->tile(w->n_cols, wr, w->row_bytes, nr, j->xq + (size_t)c * j->xq_row, j->xq_row,
                        nc, j->y + (size_t)c * (size_t)w->n_rows + (size_t)r, (size_t)w->n_rows);
            }
        }
    }
}

/* Least activation values per part before their quantization is split across threads: one
 * token's row is a fraction of a microsecond, never worth a hand-off by itself. */
#define MIN_QUANT_PER_PART 16384.0

bool qmatmul(struct backend *b, const struct mat *w, const float *x, float *y, int n) {
    const struct qkernel *k = qkernel_for(w->type);
    if (!k)
        return false;
    /* the activation buffer holds n_batch rows of 4-byte floats; quantized rows are smaller */
    struct qjob j = {.k = k,
                     .w = w,
                     .x = x,
                     .xq = (uint8_t *)cpu_of(b)->x_rounded,
                     .xq_row = k->x_row_bytes(w->n_cols),
                     .y = y,
                     .n = n,
                     .scratch = (uint8_t *)cpu_of(b)->scratch,
                     .scratch_per_thread = cpu_of(b)->scratch_per_thread * sizeof(float),
                     .one_token_order = b->one_token_order};
    atomic_init(&j.next_chunk, 0);
    double cols = (double)w->n_cols;
    int q_parts = threadpool_parts(cpu_of(b)->pool, cols * n, MIN_QUANT_PER_PART);
    threadpool_run_n(cpu_of(b)->pool, quantize_rows, &j, q_parts < n ? q_parts : n);
    threadpool_run_n(
        cpu_of(b)->pool, multiply_rows, &j,
        threadpool_parts(cpu_of(b)->pool, (double)w->n_rows * cols * n, QMATMUL_MIN_MACS_PER_PART));
    return true;
}

void *cpu_pack_rows(enum ox_dtype type, const void *data, int64_t n_rows, int64_t n_cols,
                    size_t row_bytes) {
    const struct qkernel *k = qkernel_for(type);
    /* Any width the type's blocks fill (kjv-15m's 288-column q8_0 output too): over the layout a
     * batch sums each token as a single token does, so which kernel a batch size takes no longer
     * moves a near tie (it did when only the file's rows had a batch tile of their own). */
    if (!k || !k->pack || n_rows % 16 != 0)
        return NULL;
    size_t gb = k->packed_group_bytes(n_cols), bytes = gb * (size_t)(n_rows / 16);
    uint8_t *out = ox_aligned_alloc(64, bytes);
    ox_advise_huge_pages(out, bytes); /* decode streams these every token */
    for (int64_t g = 0; out && g < n_rows / 16; g++)
        k->pack(n_cols, (const uint8_t *)data + (size_t)g * 16 * row_bytes, row_bytes,
                out + (size_t)g * gb);
    return out;
}

void cpu_pack_free(void *packed) {
    ox_aligned_free(packed);
}

bool qmatmul_file_row(const struct mat *w, int64_t r, void *dst) {
    const struct qkernel *k = w->packed ? qkernel_for(w->type) : NULL;
    if (!k || !k->file_row)
        return false;
    size_t gb = k->packed_group_bytes(w->n_cols);
    k->file_row(w->n_cols, (const uint8_t *)w->packed + (size_t)(r / 16) * gb, (int)(r % 16), dst);
    return true;
}
