/* bench_matmul.c: the CPU matmul on a Llama-3.2-1B FFN-sized matrix (8192 x 2048) per weight
 * type: one token (GEMV, reported as weight GB/s) and 512 tokens (GEMM, reported as GOP/s, two
 * operations per multiply-add), with the fast kernels and with the scalar reference. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "core/alloc.h"
#include "core/threadpool.h"
#include "quant/dtype.h"

#ifndef ROWS /* 8192 x 2048: an FFN matrix; -DROWS=65536 exceeds the L3 cache */
#define ROWS 8192
#endif
#define COLS   2048
#define TOKENS 512

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Seconds per call of the backend's matmul on n tokens, best of a few runs. */
static double time_matmul(struct backend *b, const struct mat *w, const float *x, float *y, int n) {
    double best = 1e9;
    for (int rep = 0; rep < (n == 1 ? 20 : 3); rep++) {
        double t0 = now();
        b->ops->matmul(b, w, x, y, n);
        double t = now() - t0;
        best = t < best ? t : best;
    }
    return best;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    const char *only = argc > 2 ? argv[2] : NULL;
    struct backend b = {.ops = &backend_cpu_ops};
    struct backend_sizes z = {.n_batch = TOKENS, .n_threads = threads, .max_cols = COLS};
    if (b.ops->init(&b, &z) != OX_OK) {
        fprintf(stderr, "bench_matmul: %s\n", ox_last_error());
        return 1;
    }
    float *src = malloc((size_t)ROWS * COLS * sizeof(float));
    float *x = malloc((size_t)TOKENS * COLS * sizeof(float)),
          *y = malloc((size_t)TOKENS * ROWS * 4);
    uint32_t s = 1;
    for (size_t i = 0; i < (size_t)ROWS * COLS; i++)
        s = s * 1664525u + 1013904223u, src[i] = ((float)(s >> 9) / 8388608.0f - 1.0f) * 0.02f;
    for (size_t i = 0; i < (size_t)TOKENS * COLS; i++)
        s = s * 1664525u + 1013904223u, x[i] = (float)(s >> 9) / 8388608.0f - 1.0f;
    printf("%-8s %-9s %12s %12s\n", "type", "path", "tg GB/s", "pp GOP/s");
    const enum ox_dtype types[] = {OX_DTYPE_Q4_0, OX_DTYPE_Q8_0, OX_DTYPE_Q4_K,
                                   OX_DTYPE_Q6_K, OX_DTYPE_Q5_K, OX_DTYPE_F16};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const struct dtype_traits *tr = dtype_get((int)types[ti]);
        if (only && strcmp(only, tr->name))
            continue;
        size_t row = (size_t)(COLS / tr->block_size) * tr->type_size;
        uint8_t *wq = malloc(row * ROWS);
        tr->from_float(src, wq, ROWS, COLS, NULL);
        struct mat w = {types[ti], wq, ROWS, COLS, row, NULL, NULL};
        for (int ref = 0; ref < 2; ref++) {
            if (ref)
                setenv("OX_REFERENCE_MATMUL", "1", 1);
            double tg = time_matmul(&b, &w, x, y, 1);
            double pp = time_matmul(&b, &w, x, y, ref ? 64 : TOKENS) / (ref ? 64 : TOKENS);
            printf("%-8s %-9s %12.2f %12.1f\n", tr->name, ref ? "reference" : "fast",
                   (double)row * ROWS / tg / 1e9, 2.0 * ROWS * COLS / pp / 1e9);
            unsetenv("OX_REFERENCE_MATMUL");
        }
        free(wq);
    }
    b.ops->release(&b);
    return 0;
}
