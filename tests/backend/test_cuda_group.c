/* test_cuda_group.c: a split model's sums on two GPUs (cuda_group.cu, cuda_group_sum.cu) against
 * the sums made on the host, bit for bit (two ranks' floats add the same in either order): every
 * path (a token's LL words, a batch's rows read after a flag, NCCL's all-reduce past 2^20
 * floats), sizes at and past each edge and not a multiple of 4, rows off their 16-byte
 * alignment, onto a residual (`to`) and in place, many sums in a row (the windows' two slots),
 * and the group made again with OX_SPLIT_LL=0 and with OX_SPLIT_ONE_SHOT=0. Needs two GPUs;
 * elsewhere it reports itself skipped (exit 77). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "test.h"

enum { RANKS = 2, ROUNDS = 3 };
static const size_t sizes[] = {
    1, 3, 4096, 4097, 65537, 131072, 131075, (size_t)1 << 20, ((size_t)1 << 20) + 5};
static const size_t MOST = ((size_t)1 << 20) + 5 + 1; /* the largest size, one float off */

struct rank_job {
    struct backend_group *g;
    int rank;
    long sums, wrong; /* sums made, and those with any float unlike the host's */
    char error[256];  /* a call that failed, or setup */
};

/* Rank r's i-th float of a round (r = RANKS: the residual's): spread over 2000 values, none a
 * simple power of two, so the sums round. */
static float value(int r, size_t i, int round) {
    uint32_t h = (uint32_t)(i * 2654435761u) ^ (uint32_t)(r * 40503 + round * 9973);
    return ((float)(h % 2001u) - 1000.0f) / 37.0f;
}

/* One sum of n floats at offset off (0 or 1) onto the residual or in place, against the host. */
static bool one_sum(struct rank_job *j, struct backend *b, float *x, float *to, float *host,
                    float *got, size_t n, size_t off, bool onto, int round) {
    for (size_t i = 0; i < n; i++)
        host[i] = value(j->rank, i, round);
    b->ops->upload(b, x + off, host, n * sizeof *host);
    for (size_t i = 0; onto && i < n; i++)
        host[i] = value(RANKS, i, round);
    if (onto)
        b->ops->upload(b, to + off, host, n * sizeof *host);
    enum ox_status st = b->ops->all_reduce(b, j->g, j->rank, x + off, n, onto ? to + off : NULL);
    if (st == OX_OK)
        st = b->ops->download(b, got, (onto ? to : x) + off, n * sizeof *got);
    if (st != OX_OK) {
        snprintf(j->error, sizeof j->error, "sum of %zu: %s", n, ox_last_error());
        return false;
    }
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        float want = value(0, i, round) + value(1, i, round);
        want = onto ? value(RANKS, i, round) + want : want;
        bad += memcmp(&got[i], &want, sizeof want) != 0;
    }
    j->sums++, j->wrong += bad != 0;
    if (bad)
        fprintf(stderr, "rank %d: sum of %zu at +%zu%s: %zu floats wrong\n", j->rank, n, off,
                onto ? " onto a residual" : "", bad);
    return true;
}

static void *run_rank(void *arg) {
    struct rank_job *j = arg;
    struct backend b = {.ops = &backend_cuda_ops};
    struct backend_sizes z = {.n_batch = 8, .max_cols = 4096, .batch_cols = 4096};
    if (b.ops->group_enter(j->g, j->rank) != OX_OK || b.ops->init(&b, &z) != OX_OK) {
        snprintf(j->error, sizeof j->error, "setup: %s", ox_last_error());
        return NULL;
    }
    float *x = b.ops->alloc(&b, MOST * sizeof(float)), *to = b.ops->alloc(&b, MOST * sizeof(float));
    float *host = malloc(MOST * sizeof *host), *got = malloc(MOST * sizeof *got);
    bool ok = x && to && host && got;
    if (!ok)
        snprintf(j->error, sizeof j->error, "out of memory");
    /* both ranks make the same sums in the same order, as a model's ranks do */
    for (int round = 0; ok && round < ROUNDS; round++)
        for (size_t k = 0; ok && k < sizeof sizes / sizeof *sizes; k++)
            for (int v = 0; ok && v < 4; v++)
                ok = one_sum(j, &b, x, to, host, got, sizes[k], (size_t)(v & 1), v >= 2, round);
    free(host), free(got);
    if (x)
        b.ops->free(&b, x);
    if (to)
        b.ops->free(&b, to);
    b.ops->release(&b);
    return NULL;
}

/* The group made with one environment variable set to 0 (NULL: none), and every sum on both
 * ranks. */
static void test_group(const char *env) {
    if (env)
        setenv(env, "0", 1);
    static const int devices[RANKS] = {0, 1};
    struct backend_group *g = backend_cuda_ops.group_create(RANKS, devices);
    char how[32];
    snprintf(how, sizeof how, "%s%s", env ? env : "defaults", env ? "=0" : "");
    CHECK_MSG(g != NULL, "group (%s): %s", how, ox_last_error());
    if (!g)
        return;
    struct rank_job jobs[RANKS] = {{0}};
    pthread_t t[RANKS];
    for (int r = 0; r < RANKS; r++) {
        jobs[r] = (struct rank_job){.g = g, .rank = r};
        pthread_create(&t[r], NULL, run_rank, &jobs[r]);
    }
    for (int r = 0; r < RANKS; r++) {
        pthread_join(t[r], NULL);
        CHECK_MSG(!jobs[r].error[0], "rank %d (%s): %s", r, how, jobs[r].error);
        CHECK_MSG(jobs[r].wrong == 0, "rank %d (%s): %ld of %ld sums wrong", r, how, jobs[r].wrong,
                  jobs[r].sums);
    }
    printf("%s: %ld sums a rank, %ld and %ld wrong\n", how, jobs[0].sums, jobs[0].wrong,
           jobs[1].wrong);
    backend_cuda_ops.group_free(g);
}

int main(void) {
    if (!backend_cuda_ops.available() || backend_cuda_ops.devices() < RANKS) {
        printf("fewer than %d CUDA GPUs here: skipped\n", RANKS);
        return 77;
    }
    test_group(NULL);
    test_group("OX_SPLIT_LL");
    test_group("OX_SPLIT_ONE_SHOT");
    return test_finish("test_cuda_group");
}
