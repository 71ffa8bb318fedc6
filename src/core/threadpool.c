/* threadpool.c: persistent workers woken by a generation counter (spin, then condvar sleep). */
#define _POSIX_C_SOURCE 200809L
#include "core/threadpool.h"

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
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

struct threadpool {
    int n_threads;
    pthread_t *threads;
    pthread_mutex_t mutex;
    pthread_cond_t wake, done;
    atomic_uint generation; /* bumped once per run */
    atomic_int pending;     /* workers still running the current job */
    atomic_int sleepers;    /* workers asleep (or about to be) on wake */
    atomic_int waiting;     /* the caller asleep (or about to be) on done */
    bool stop;
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

/* Spins while *v == value for up to SPIN_NS; false if it still is. */
static bool spin_while(atomic_uint *v, unsigned value) {
    long long start = 0;
    bool yield = false;
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(v, memory_order_acquire) != value)
            return true;
        if (!spin_turn(i, &start, &yield))
            return false;
    }
}

/* A worker sleeps only after announcing it (sleepers), and the publisher takes the mutex only
 * when someone announced: with both sides' sequentially consistent operations, at least one
 * sees the other, so no wake is lost and a busy pool makes no system calls. */
static void wait_for_generation(struct threadpool *p, unsigned seen) {
    if (spin_while(&p->generation, seen))
        return;
    atomic_fetch_add(&p->sleepers, 1);
    pthread_mutex_lock(&p->mutex);
    while (atomic_load(&p->generation) == seen)
        pthread_cond_wait(&p->wake, &p->mutex);
    pthread_mutex_unlock(&p->mutex);
    atomic_fetch_sub(&p->sleepers, 1);
}

static void *worker_main(void *argp) {
    struct worker_start start = *(struct worker_start *)argp;
    free(argp);
    struct threadpool *p = start.pool;
    unsigned seen = 0;
    for (;;) {
        wait_for_generation(p, seen);
        seen = atomic_load(&p->generation);
        if (p->stop)
            return NULL;
        p->fn(p->arg, start.ith, p->n_threads);
        if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->waiting)) {
            pthread_mutex_lock(&p->mutex);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mutex);
        }
    }
}

/* Publish a new job (or the stop flag) to every worker. */
static void bump_generation(struct threadpool *p) {
    atomic_fetch_add(&p->generation, 1);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mutex);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mutex);
    }
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
    pthread_cond_init(&p->done, NULL);
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

void threadpool_run(struct threadpool *p, threadpool_fn fn, void *arg) {
    p->fn = fn;
    p->arg = arg;
    atomic_store(&p->pending, p->n_threads - 1);
    bump_generation(p);
    fn(arg, 0, p->n_threads);
    if (p->n_threads == 1)
        return;
    long long start = 0;
    bool yield = false;
    for (unsigned i = 1; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; i++)
        if (!spin_turn(i, &start, &yield))
            break;
    if (atomic_load(&p->pending) == 0)
        return;
    atomic_store(&p->waiting, 1);
    pthread_mutex_lock(&p->mutex);
    while (atomic_load(&p->pending) > 0)
        pthread_cond_wait(&p->done, &p->mutex);
    pthread_mutex_unlock(&p->mutex);
    atomic_store(&p->waiting, 0);
}

void threadpool_free(struct threadpool *p) {
    if (!p)
        return;
    p->stop = true;
    bump_generation(p);
    for (int i = 1; i < p->n_threads; i++)
        pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mutex);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
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
