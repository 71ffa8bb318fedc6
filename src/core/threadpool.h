/* threadpool.h: persistent worker threads that run the parts of one function at a time. */
#ifndef OX_CORE_THREADPOOL_H
#define OX_CORE_THREADPOOL_H

#include "core/status.h"

struct threadpool;

/* fn(arg, ith, nth) is one part of a job split nth ways; ith is 0..nth-1. Each part runs
 * exactly once, on whichever thread of the pool claims it first (the caller included), so two
 * parts may run one after the other on the same thread: parts must not wait for each other.
 * Per-thread scratch indexed by ith is still private to the part that uses it. */
typedef void (*threadpool_fn)(void *arg, int ith, int nth);

/* A pool of n_threads in all (the caller counts as one, so n_threads - 1 are started). */
enum ox_status threadpool_create(int n_threads, struct threadpool **out);
void threadpool_free(struct threadpool *pool);
int threadpool_size(const struct threadpool *pool);

/* Run fn as threadpool_size(pool) parts and return when all have finished. Workers spin
 * briefly for new work, then sleep, so back-to-back calls are cheap and idle pools cost
 * nothing. Not reentrant: one run at a time per pool. */
void threadpool_run(struct threadpool *pool, threadpool_fn fn, void *arg);
/* The same split into min(parts, pool size) parts; one part is a plain call on this thread,
 * with no hand-off at all. */
void threadpool_run_n(struct threadpool *pool, threadpool_fn fn, void *arg, int parts);
/* How many parts to split work into (in the caller's units) so that each has at least
 * min_work_per_part: 1 .. pool size. Handing a part to an awake worker costs about 0.25 us
 * (tens of us when it sleeps); callers pick min_work_per_part as about 1 us of their work. */
int threadpool_parts(const struct threadpool *pool, double work, double min_work_per_part);

/* Online CPUs (at least 1). */
int threadpool_cpu_count(void);
/* Physical cores (distinct package/core pairs), the default worker count. */
int threadpool_default_threads(void);

#endif
