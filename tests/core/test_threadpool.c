/* test_threadpool.c: every part of a job runs exactly once, runs don't overlap, small jobs stay
 * on the caller's thread, pools of any size start and stop cleanly. */
#include <pthread.h>
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

/* Parts of a job split fewer ways than the pool has threads, and one part: a plain call on the
 * caller's thread. */
struct where {
    atomic_int calls, mask, nth_seen;
    pthread_t caller;
    atomic_int on_caller;
};

static void note_part(void *arg, int ith, int nth) {
    struct where *w = arg;
    atomic_fetch_add(&w->calls, 1);
    atomic_fetch_or(&w->mask, 1 << ith);
    atomic_store(&w->nth_seen, nth);
    if (pthread_equal(pthread_self(), w->caller))
        atomic_fetch_add(&w->on_caller, 1);
}

static void check_run_n(void) {
    struct threadpool *pool = NULL;
    CHECK_EQ(threadpool_create(4, &pool), OX_OK);
    const int asks[] = {1, 3, 4, 9, 0};
    const int split[] = {1, 3, 4, 4, 1}; /* clamped to 1 .. pool size */
    for (int r = 0; r < 200; r++) {
        for (int i = 0; i < 5; i++) {
            struct where w = {.caller = pthread_self()};
            threadpool_run_n(pool, note_part, &w, asks[i]);
            CHECK_EQ(atomic_load(&w.calls), split[i]);
            CHECK_EQ(atomic_load(&w.mask), (1 << split[i]) - 1);
            CHECK_EQ(atomic_load(&w.nth_seen), split[i]);
            if (split[i] == 1)
                CHECK_EQ(atomic_load(&w.on_caller), 1);
        }
    }
    CHECK_EQ(threadpool_parts(pool, 1000.0, 500.0), 2);
    CHECK_EQ(threadpool_parts(pool, 100.0, 500.0), 1);
    CHECK_EQ(threadpool_parts(pool, 1e12, 500.0), 4);
    CHECK_EQ(threadpool_parts(pool, 0.0, 500.0), 1);
    threadpool_free(pool);
}

int main(void) {
    check_pool(1, 100);
    check_pool(2, 5000); /* back-to-back runs: the spin path */
    check_pool(7, 500);  /* more threads than cores: the sleep path */
    check_run_n();
    struct threadpool *pool = NULL;
    CHECK_EQ(threadpool_create(0, &pool), OX_ERR_INVALID_ARG);
    CHECK(pool == NULL);
    threadpool_free(NULL);
    CHECK(threadpool_cpu_count() >= 1);
    return test_finish("test_threadpool");
}
