/* bench_membw.c: the machine's memory read bandwidth, as the ceiling for token generation
 * (which reads every weight once per token): T threads each sum their share of a 1 GiB
 * buffer, best of 5 passes. The buffer asks for huge pages, as the engine's packed weights do
 * (4 KiB pages read about 8% slower on the Zen 4 VM), so this is the ceiling decode can reach.
 * usage: bench_membw [THREADS] */
#define _DEFAULT_SOURCE /* madvise's MADV_HUGEPAGE */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define BYTES ((size_t)1 << 30)

struct share {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
};

static void *read_share(void *arg) {
    struct share *s = arg;
    uint64_t acc[8] = {0}; /* independent chains (vectorized by the compiler) so loads overlap */
    for (size_t i = 0; i + 8 <= s->n; i += 8)
        for (int k = 0; k < 8; k++)
            acc[k] ^= s->p[i + k];
    s->sum = acc[0] ^ acc[1] ^ acc[2] ^ acc[3] ^ acc[4] ^ acc[5] ^ acc[6] ^ acc[7];
    return NULL;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    if (threads < 1 || threads > 256) {
        fprintf(stderr, "bench_membw: threads must be 1..256\n");
        return 2;
    }
    uint64_t *buf = NULL;
    if (posix_memalign((void **)&buf, (size_t)2 << 20, BYTES) != 0)
        buf = NULL;
#ifdef MADV_HUGEPAGE
    if (buf) /* advice: harmless where transparent huge pages are off */
        (void)madvise(buf, BYTES, MADV_HUGEPAGE);
#endif
    if (!buf) {
        fprintf(stderr, "bench_membw: cannot allocate 1 GiB\n");
        return 1;
    }
    memset(buf, 1, BYTES); /* fault every page in before timing */
    size_t words = BYTES / 8;
    double best = 1e9;
    uint64_t check = 0;
    for (int pass = 0; pass < 5; pass++) {
        pthread_t tid[256];
        struct share sh[256];
        double t0 = now();
        for (int t = 0; t < threads; t++) {
            sh[t] = (struct share){buf + words * t / threads,
                                   words * (t + 1) / threads - words * t / threads, 0};
            pthread_create(&tid[t], NULL, read_share, &sh[t]);
        }
        for (int t = 0; t < threads; t++) {
            pthread_join(tid[t], NULL);
            check += sh[t].sum;
        }
        double dt = now() - t0;
        best = dt < best ? dt : best;
    }
    printf("memory read bandwidth, %d threads: %.1f GB/s (checksum %llu)\n", threads,
           (double)BYTES / best / 1e9, (unsigned long long)(check & 0xff));
    free(buf);
    return 0;
}
