/* test_threadpool.c: every thread runs each job exactly once, runs don't overlap, pools of
 * any size start and stop cleanly. */
#include <stdatomic.h>

#include "core/threadpool.h"
#include "test.h"

struct job {
    atomic_int calls;
    atomic_int seen_mask;
    long long partial[64];
    const int *data;
    int n;
};

/* Each thread sums its own stripe of data and marks itself present. */
static void sum_stripe(void *arg, int ith, int nth) {
    struct job *j = arg;
    long long s = 0;
    for (int i = ith; i < j->n; i += nth)
        s += j->data[i];
    j->partial[ith] = s;
    atomic_fetch_add(&j->calls, 1);
    atomic_fetch_or(&j->seen_mask, 1 << ith);
}

static void check_pool(int n_threads, int runs) {
    static int data[10007];
    for (int i = 0; i < 10007; i++)
        data[i] = i % 97;
    long long expect = 0;
    for (int i = 0; i < 10007; i++)
        expect += data[i];
    struct threadpool *pool = NULL;
    CHECK_EQ(threadpool_create(n_threads, &pool), OX_OK);
    CHECK_EQ(threadpool_size(pool), n_threads);
    int good = 0;
    for (int r = 0; r < runs; r++) {
        struct job j = {.data = data, .n = 10007};
        atomic_init(&j.calls, 0);
        atomic_init(&j.seen_mask, 0);
        threadpool_run(pool, sum_stripe, &j);
        long long total = 0;
        for (int t = 0; t < n_threads; t++)
            total += j.partial[t];
        good += total == expect && atomic_load(&j.calls) == n_threads &&
                atomic_load(&j.seen_mask) == (1 << n_threads) - 1;
    }
    CHECK_EQ(good, runs);
    threadpool_free(pool);
}

int main(void) {
    check_pool(1, 100);
    check_pool(2, 5000); /* back-to-back runs: the spin path */
    check_pool(7, 500);  /* more threads than cores: the sleep path */
    struct threadpool *pool = NULL;
    CHECK_EQ(threadpool_create(0, &pool), OX_ERR_INVALID_ARG);
    CHECK(pool == NULL);
    threadpool_free(NULL);
    CHECK(threadpool_cpu_count() >= 1);
    return test_finish("test_threadpool");
}
