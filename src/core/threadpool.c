/* threadpool.c: persistent workers that claim the parts of a job, woken by a generation
 * counter (spin, then condvar sleep). */
#define _POSIX_C_SOURCE 200809L
#include "core/threadpool.h"

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

/* How long a thread spins before it sleeps: long enough to catch the next op of a decode loop
 * (a small model's token is hundreds of ops a few microseconds apart, and every wake from sleep
 * costs tens of microseconds on a VM), short enough not to burn a core when the pool idles. */
#define SPIN_NS 2000000
/* After this long a spinning thread yields its core on every turn: when more threads than
 * cores are runnable (two processes at once), the thread it waits for gets to run. */
#define YIELD_AFTER_NS 50000

/* A hint to the core that this is a spin loop (frees the sibling hardware thread's resources). */
static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* A job is published as one 64-bit word: generation << 32 | parts << 16 | next unclaimed part.
 * Threads claim parts with a compare-exchange on the whole word, so a claim can only succeed
 * for the job it read, and a late worker cannot take a part of a job that has moved on. */
#define JOB(gen, parts, next)                                                                      \
    (((unsigned long long)(gen) << 32) | ((unsigned long long)(parts) << 16) |                     \
     (unsigned long long)(next))
static unsigned job_gen(unsigned long long v) {
    return (unsigned)(v >> 32);
}
static int job_parts(unsigned long long v) {
    return (int)((v >> 16) & 0xffff);
}
static int job_next(unsigned long long v) {
    return (int)(v & 0xffff);
}

struct threadpool {
    int n_threads;
    pthread_t *threads;
    pthread_mutex_t mutex;
    pthread_cond_t wake, done_cv;
    _Atomic unsigned long long job; /* see JOB */
    atomic_int done;                /* parts of the current job finished */
    atomic_int sleepers;            /* workers asleep (or about to be) on wake */
    atomic_int waiting;             /* the caller asleep (or about to be) on done_cv */
    atomic_bool stop;
    /* written by the caller before it publishes a job and read only after a part of that job
     * was claimed, so the job cannot change while a thread uses them */
    threadpool_fn fn;
    void *arg;
};

struct worker_start {
    struct threadpool *pool;
    int ith;
};

/* One turn of a wait loop started at *start (0: not yet read): a pause, the clock every 256
 * turns, past YIELD_AFTER_NS a yield of the core; false once SPIN_NS has passed. */
static bool spin_turn(unsigned i, long long *start, bool *yield) {
    if (*yield)
        sched_yield();
    else
        cpu_relax();
    if (i % 256 == 0 || *yield) {
        long long t = now_ns();
        if (!*start)
            *start = t;
        *yield = t - *start > YIELD_AFTER_NS;
        return t - *start <= SPIN_NS;
    }
    return true;
}

/* Spins while the job's generation is seen, for up to SPIN_NS; false if it still is. */
static bool spin_while_gen(struct threadpool *p, unsigned seen) {
    long long start = 0;
    bool yield = false;
    for (unsigned i = 1;; i++) {
        if (job_gen(atomic_load_explicit(&p->job, memory_order_acquire)) != seen)
            return true;
        if (!spin_turn(i, &start, &yield))
            return false;
    }
}

/* A worker sleeps only after announcing it (sleepers), and the publisher takes the mutex only
 * when someone announced: with both sides' sequentially consistent operations, at least one
 * sees the other, so no wake is lost and a busy pool makes no system calls. Returns the
 * generation of the job that ended the wait. */
static unsigned wait_for_job(struct threadpool *p, unsigned seen) {
    if (!spin_while_gen(p, seen)) {
        atomic_fetch_add(&p->sleepers, 1);
        pthread_mutex_lock(&p->mutex);
        while (job_gen(atomic_load(&p->job)) == seen)
            pthread_cond_wait(&p->wake, &p->mutex);
        pthread_mutex_unlock(&p->mutex);
        atomic_fetch_sub(&p->sleepers, 1);
    }
    return job_gen(atomic_load(&p->job));
}

/* The next unclaimed part of job generation gen (its part count in *parts), or -1 when all
 * are taken or a newer job has begun. */
static int claim(struct threadpool *p, unsigned gen, int *parts) {
    unsigned long long v = atomic_load(&p->job);
    while (job_gen(v) == gen && job_next(v) < job_parts(v)) {
        if (atomic_compare_exchange_weak(&p->job, &v, v + 1)) {
            *parts = job_parts(v);
            return job_next(v);
        }
    }
    return -1;
}

/* Runs parts of job gen until none is left; whoever finishes the last one wakes the caller. */
static void run_parts(struct threadpool *p, unsigned gen) {
    int part, parts;
    while ((part = claim(p, gen, &parts)) >= 0) {
        p->fn(p->arg, part, parts);
        if (atomic_fetch_add(&p->done, 1) + 1 == parts && atomic_load(&p->waiting)) {
            pthread_mutex_lock(&p->mutex);
            pthread_cond_signal(&p->done_cv);
            pthread_mutex_unlock(&p->mutex);
        }
    }
}

static void *worker_main(void *argp) {
    struct worker_start start = *(struct worker_start *)argp;
    free(argp);
    struct threadpool *p = start.pool;
    unsigned seen = 0;
    for (;;) {
        seen = wait_for_job(p, seen);
        if (atomic_load(&p->stop))
            return NULL;
        run_parts(p, seen);
    }
}

/* Publish a new job of the given parts (0: only wakes the workers, to see stop). */
static unsigned publish(struct threadpool *p, int parts) {
    unsigned gen = job_gen(atomic_load(&p->job)) + 1;
    atomic_store(&p->done, 0);
    atomic_store(&p->job, JOB(gen, parts, 0));
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mutex);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mutex);
    }
    return gen;
}

enum ox_status threadpool_create(int n_threads, struct threadpool **out) {
    *out = NULL;
    if (n_threads < 1 || n_threads > 1024)
        return ox_fail(OX_ERR_INVALID_ARG, "threadpool: %d threads (must be 1..1024)", n_threads);
    struct threadpool *p = calloc(1, sizeof *p);
    if (!p || !(p->threads = calloc((size_t)n_threads, sizeof *p->threads))) {
        free(p);
        return ox_fail(OX_ERR_OOM, "threadpool: out of memory");
    }
    p->n_threads = 1;
    pthread_mutex_init(&p->mutex, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    for (int i = 1; i < n_threads; i++) {
        struct worker_start *s = malloc(sizeof *s);
        if (s)
            *s = (struct worker_start){p, i};
        if (!s || pthread_create(&p->threads[i], NULL, worker_main, s) != 0) {
            free(s);
            threadpool_free(p);
            return ox_fail(OX_ERR_OOM, "threadpool: cannot start thread %d of %d", i, n_threads);
        }
        p->n_threads = i + 1; /* threads[1..i] are running */
    }
    *out = p;
    return OX_OK;
}

/* Waits until all parts of the job are done: spinning, then asleep on done_cv. */
static void wait_done(struct threadpool *p, int parts) {
    long long start = 0;
    bool yield = false;
    for (unsigned i = 1; atomic_load_explicit(&p->done, memory_order_acquire) < parts; i++)
        if (!spin_turn(i, &start, &yield))
            break;
    if (atomic_load(&p->done) < parts) {
        atomic_store(&p->waiting, 1);
        pthread_mutex_lock(&p->mutex);
        while (atomic_load(&p->done) < parts)
            pthread_cond_wait(&p->done_cv, &p->mutex);
        pthread_mutex_unlock(&p->mutex);
        atomic_store(&p->waiting, 0);
    }
}

/* The caller works on the job too, taking whatever part no worker has claimed: when a worker is
 * slow to wake or descheduled (more runnable threads than cores), the caller runs its part
 * instead of waiting for it, so a second thread costs at most one part's wait. */
void threadpool_run_n(struct threadpool *p, threadpool_fn fn, void *arg, int parts) {
    parts = parts < p->n_threads ? parts : p->n_threads;
    if (parts <= 1) {
        fn(arg, 0, 1);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    unsigned gen = publish(p, parts);
    run_parts(p, gen);
    wait_done(p, parts);
}

void threadpool_run(struct threadpool *p, threadpool_fn fn, void *arg) {
    threadpool_run_n(p, fn, arg, p->n_threads);
}

int threadpool_parts(const struct threadpool *p, double work, double min_work_per_part) {
    double n = min_work_per_part > 0 ? work / min_work_per_part : p->n_threads;
    return n >= p->n_threads ? p->n_threads : n < 1 ? 1 : (int)n;
}

void threadpool_free(struct threadpool *p) {
    if (!p)
        return;
    atomic_store(&p->stop, true);
    publish(p, 0);
    for (int i = 1; i < p->n_threads; i++)
        pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mutex);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done_cv);
    free(p->threads);
    free(p);
}

int threadpool_size(const struct threadpool *p) {
    return p->n_threads;
}

int threadpool_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 1024 ? 1024 : (int)n;
}

/* A number from /sys/devices/system/cpu/cpu<cpu>/topology/<field>, or -1. */
static long read_topology(int cpu, const char *field) {
    char path[128];
    long v = -1;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/%s", cpu, field);
    FILE *f = fopen(path, "r");
    if (f && fscanf(f, "%ld", &v) != 1)
        v = -1;
    if (f)
        fclose(f);
    return v;
}

/* Cores, not hardware threads: like llama.cpp, one worker per core is the default, since SMT
 * siblings share the vector units the kernels saturate. Counts distinct (package, core) pairs
 * in sysfs, or online CPUs when that is unreadable. */
int threadpool_default_threads(void) {
    static long seen[1024][2]; /* (package, core) pairs found so far */
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int n = 0, cpu;
    char rest;
    DIR *d = opendir("/sys/devices/system/cpu");
    for (struct dirent *e; d && (e = readdir(d));) {
        if (sscanf(e->d_name, "cpu%d%c", &cpu, &rest) != 1) /* cpu12, not cpufreq */
            continue;
        long pkg = read_topology(cpu, "physical_package_id");
        long core = read_topology(cpu, "core_id");
        int k = 0;
        while (k < n && (seen[k][0] != pkg || seen[k][1] != core))
            k++;
        if (pkg >= 0 && core >= 0 && k == n && n < 1024)
            seen[n][0] = pkg, seen[n][1] = core, n++;
    }
    if (d)
        closedir(d);
    if (n < 1 || (online > 0 && n > online)) /* offline CPUs can keep a topology folder */
        n = online > 0 ? (int)online : 1;
    return n > 1024 ? 1024 : n;
}

int ox_default_threads(void) {
    return threadpool_default_threads();
}
