/* threadpool.h: persistent worker threads that run one function on all threads at a time. */
#ifndef OX_CORE_THREADPOOL_H
#define OX_CORE_THREADPOOL_H

#include "core/status.h"

struct threadpool;

/* fn runs once on each of nth threads; ith is 0..nth-1 (0 is the calling thread). */
typedef void (*threadpool_fn)(void *arg, int ith, int nth);

/* A pool of n_threads in all (the caller counts as one, so n_threads - 1 are started). */
enum ox_status threadpool_create(int n_threads, struct threadpool **out);
void threadpool_free(struct threadpool *pool);
int threadpool_size(const struct threadpool *pool);

/* Run fn(arg, ith, nth) on every thread and return when all have finished. Workers spin
 * briefly for new work, then sleep, so back-to-back calls are cheap and idle pools cost
 * nothing. Not reentrant: one run at a time per pool. */
void threadpool_run(struct threadpool *pool, threadpool_fn fn, void *arg);

/* Online CPUs (at least 1). */
int threadpool_cpu_count(void);
/* Physical cores (distinct package/core pairs), the default worker count. */
int threadpool_default_threads(void);

#endif
