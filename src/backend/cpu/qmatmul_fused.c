/* qmatmul_fused.c: matmuls that read the same tokens, run as one job: q, k and v, and a GLU's
 * gate and up with the activation applied as their rows come out.
 *
 * A decode step of a small model is a few hundred short ops, and each threaded one costs a
 * hand-off and an end where the first thread done waits for the last chunk of the other. Here
 * the activations are quantized once for all the matrices and the threads claim chunks of all
 * their 16-row groups in turn: one hand-off and one end instead of three (q, k, v) or three
 * (gate, up, glu). Only single tokens and small batches over the load-time layout (gemv16)
 * take this path; batches, whose matmuls are long, gain nothing from it. Every row comes from
 * the same kernel call as in the separate matmuls, so the results are the same bits. */
#include <stdatomic.h>

#include "backend/cpu/qmatmul.h"
#include "backend/cpu/cpu_ops.h"
#include "core/threadpool.h"

enum { MAX_MATS = 3 };

struct fused_job {
    const struct qkernel *k[MAX_MATS];
    const struct mat *w[MAX_MATS];
    float *y[MAX_MATS];
    int count;
    int64_t end[MAX_MATS]; /* the groups of matrix m end at end[m] of all groups */
    const uint8_t *xq;
    size_t xq_row;
    int n;
    struct backend *b;
    enum glu_kind kind;
    bool glu; /* w[0] gate, w[1] up, y[0] the GLU's output: their groups go in pairs */
    /* the chunk claims, on a line of their own (as in qmatmul.c) */
    _Alignas(64) atomic_int next_chunk;
};

static void gemv_group(const struct fused_job *j, int m, int64_t g, float *y, size_t y_stride) {
    const struct qkernel *k = j->k[m];
    const struct mat *w = j->w[m];
    k->gemv16(w->n_cols, (const uint8_t *)w->packed + (size_t)g * k->packed_group_bytes(w->n_cols),
              j->xq, j->xq_row, j->n, y, y_stride);
}

/* Group g of all into its matrix's output. */
static void run_group(const struct fused_job *j, int64_t g) {
    int m = 0;
    while (g >= j->end[m])
        m++;
    int64_t local = g - (m ? j->end[m - 1] : 0);
    gemv_group(j, m, local, j->y[m] + (size_t)local * 16, (size_t)j->w[m]->n_rows);
}

/* A GLU's groups g0 .. g1 - 1: gate's and up's rows a span of SPAN_GROUPS groups at a time into
 * buffers, then act(gate) * up per token into the output, one glu call a span and token. A
 * span of gate streams whole before up's: taking the two matrices group by group in turn made
 * decode slower than the separate matmuls (Llama-3.2-1B Q4_K_M, 2 threads), span by span it is
 * 1-3% faster (tokens alternating between the two paths in one process). */
enum { SPAN_GROUPS = 16, SPAN_ROWS = 16 * SPAN_GROUPS };
static void run_glu_groups(const struct fused_job *j, int64_t g0, int64_t g1) {
    float gate[QMATMUL_FUSED_MAX_N * SPAN_ROWS], up[QMATMUL_FUSED_MAX_N * SPAN_ROWS];
    for (int64_t s = g0; s < g1; s += SPAN_GROUPS) {
        int64_t end = s + SPAN_GROUPS < g1 ? s + SPAN_GROUPS : g1;
        for (int64_t g = s; g < end; g++)
            gemv_group(j, 0, g, gate + (g - s) * 16, SPAN_ROWS);
        for (int64_t g = s; g < end; g++)
            gemv_group(j, 1, g, up + (g - s) * 16, SPAN_ROWS);
        for (int t = 0; t < j->n; t++)
            j->b->ops->glu(j->b, j->kind, gate + t * SPAN_ROWS, up + t * SPAN_ROWS,
                           j->y[0] + (size_t)t * (size_t)j->w[0]->n_rows + (size_t)s * 16,
                           (size_t)(end - s) * 16);
    }
}

static void run_chunks(void *arg, int ith, int nth) {
    struct fused_job *j = arg;
    (void)ith; /* chunks are claimed, not assigned */
    int64_t groups = j->end[j->count - 1];
    double macs = 16.0 * (double)j->w[0]->n_cols * (double)j->n * (j->glu ? 2.0 : 1.0);
    int64_t chunks = qmatmul_chunk_count(macs, groups, nth);
    int64_t g0, g1;
    while (qmatmul_claim(&j->next_chunk, groups, chunks, &g0, &g1)) {
        if (j->glu)
            run_glu_groups(j, g0, g1);
        else
            for (int64_t g = g0; g < g1; g++)
                run_group(j, g);
    }
}

/* The job for count matrices over x, or false when they cannot share one: a matrix without the
 * load-time layout or a fast kernel, too many tokens for gemv16, different widths, or
 * activation formats that differ (one quantized row must serve them all). */
static bool fused_job_init(struct fused_job *j, struct backend *b, int count,
                           const struct mat *const *w, int n) {
    if (count < 1 || count > MAX_MATS || n < 1 || n > QMATMUL_FUSED_MAX_N)
        return false;
    for (int m = 0; m < count; m++) {
        const struct qkernel *k = qkernel_for(w[m]->type);
        if (!k || !k->gemv16 || !w[m]->packed || n >= k->pack_nc || w[m]->n_rows % 16 ||
            w[m]->n_cols != w[0]->n_cols ||
            (m && (k->quantize_x != j->k[0]->quantize_x || k->x_row_bytes != j->k[0]->x_row_bytes)))
            return false;
        j->k[m] = k, j->w[m] = w[m];
        j->end[m] = (m ? j->end[m - 1] : 0) + w[m]->n_rows / 16;
    }
    j->count = count, j->n = n, j->b = b, j->glu = false;
    j->xq = (const uint8_t *)cpu_of(b)->x_rounded;
    j->xq_row = j->k[0]->x_row_bytes(w[0]->n_cols);
    atomic_init(&j->next_chunk, 0);
    return true;
}

/* The tokens' activations in the kernels' format (once), then the job on the pool. */
static void fused_run(struct fused_job *j, const float *x) {
    int64_t cols = j->w[0]->n_cols;
    for (int t = 0; t < j->n; t++)
        j->k[0]->quantize_x(x + (size_t)t * (size_t)cols, (uint8_t *)j->xq + (size_t)t * j->xq_row,
                            cols);
    double macs = (double)cols * (double)j->n * 16.0 * (double)j->end[j->count - 1];
    threadpool_run_n(cpu_of(j->b)->pool, run_chunks, j,
                     threadpool_parts(cpu_of(j->b)->pool, j->glu ? 2.0 * macs : macs,
                                      QMATMUL_MIN_MACS_PER_PART));
}

bool qmatmul_multi(struct backend *b, int count, const struct mat *w, const float *x,
                   const struct norm_in *norm, float *const *y, int n) {
    struct fused_job j;
    const struct mat *ws[MAX_MATS];
    for (int m = 0; m < count && m < MAX_MATS; m++)
        ws[m] = &w[m];
    if (norm || !fused_job_init(&j, b, count, ws, n))
        return false;
    for (int m = 0; m < count; m++)
        j.y[m] = y[m];
    fused_run(&j, x);
    return true;
}

bool qmatmul_glu(struct backend *b, enum glu_kind kind, const struct mat *gate,
                 const struct mat *up, const float *x, const struct norm_in *norm, float *y,
                 int n) {
    struct fused_job j;
    const struct mat *ws[2] = {gate, up};
    if (norm || gate->n_rows != up->n_rows || !fused_job_init(&j, b, 2, ws, n))
        return false;
    /* the pairs: gate's groups alone count, each claim running up's matching group too */
    j.glu = true, j.kind = kind, j.count = 1, j.y[0] = y;
    fused_run(&j, x);
    return true;
}
