/* bench_cuda_matmul.c: the CUDA matmul op alone on Llama-3-8B's weight shapes, per type and
 * batch size: microseconds per call, and for one token the weight bytes read per second beside
 * a device-to-device copy (the ceiling). Random weight bytes (timing does not depend on them).
 *
 *   bench_cuda_matmul [--1b] [-n LIST] [TYPE ...]   (default: q4_0 q8_0 q4_K q6_K f16)
 *
 * --1b: Llama-3.2-1B's shapes instead; -n: the batch sizes, 1 to 512 (default 1,2,8,32,64,512).
 * OX_CUDA_MMQ_MAX_N=0 in the environment times the dequantize + cuBLAS path where the int8
 * tensor-core matmul would take the batch.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static struct backend gpu;

static void *device_random(size_t bytes, uint64_t seed) {
    uint8_t *h = malloc(bytes);
    for (size_t i = 0; i < bytes; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        h[i] = (uint8_t)(seed >> 56);
    }
    void *d = gpu.ops->alloc(&gpu, bytes);
    gpu.ops->upload(&gpu, d, h, bytes);
    gpu.ops->download(&gpu, NULL, NULL, 0);
    free(h);
    return d;
}

/* Seconds per call of fn over reps calls after a warm-up, synchronised at both ends. */
static double time_matmul(const struct mat *m, const float *x, float *y, int n, int reps) {
    for (int i = 0; i < 3; i++)
        gpu.ops->matmul(&gpu, m, x, y, n);
    gpu.ops->download(&gpu, NULL, NULL, 0);
    double t0 = now_s();
    for (int i = 0; i < reps; i++)
        gpu.ops->matmul(&gpu, m, x, y, n);
    if (gpu.ops->download(&gpu, NULL, NULL, 0) != OX_OK) {
        fprintf(stderr, "%s\n", ox_last_error());
        exit(1);
    }
    return (now_s() - t0) / reps;
}

int main(int argc, char **argv) {
    const char *def[] = {"q4_0", "q8_0", "q4_K", "q6_K", "f16"};
    const char *types[64];
    int n_types = 0;
    int shapes[][2] = {{4096, 4096}, {14336, 4096}, {4096, 14336}, {128256, 4096}};
    const int shapes_1b[][2] = {{2048, 2048}, {8192, 2048}, {2048, 8192}, {128256, 2048}};
    int batches[16] = {1, 2, 8, 32, 64, 512}, n_batches = 6;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--1b")) {
            memcpy(shapes, shapes_1b, sizeof shapes);
        } else if (!strcmp(argv[i], "-n") && i + 1 < argc) {
            n_batches = 0;
            for (char *p = argv[++i]; *p;) {
                long v = strtol(p, &p, 10);
                if (v < 1 || v > 512 || n_batches == 16 || (*p && *p != ',')) {
                    fprintf(stderr, "bench_cuda_matmul: -n takes up to 16 sizes, 1 to 512\n");
                    return 1;
                }
                batches[n_batches++] = (int)v;
                p += *p == ',';
            }
        } else if (n_types < 64) {
            types[n_types++] = argv[i];
        }
    }
    if (!n_types)
        for (; n_types < 5; n_types++)
            types[n_types] = def[n_types];
    /* sized as for an 8B model: its kernels launch early, with room to dequantize */
    struct backend_weights w8b = {.bytes = (uint64_t)8 << 30, .converts = true};
    struct backend_sizes sizes = {
        .n_batch = 512, .max_cols = 14336, .batch_cols = 14336, .weights = &w8b};
    gpu.ops = &backend_cuda_ops;
    if (!gpu.ops->available() || gpu.ops->init(&gpu, &sizes) != OX_OK) {
        fprintf(stderr, "bench_cuda_matmul: no CUDA GPU (%s)\n", ox_last_error());
        return 1;
    }
    size_t big = (size_t)1 << 30; /* the copy ceiling: 1 GiB read + 1 GiB written */
    float *a = device_random(big, 1), *b = gpu.ops->alloc(&gpu, big);
    gpu.ops->copy_rows(&gpu, b, 0, a, 0, 1, (int)(big / 4));
    gpu.ops->download(&gpu, NULL, NULL, 0);
    double t0 = now_s();
    for (int i = 0; i < 10; i++)
        gpu.ops->copy_rows(&gpu, b, 0, a, 0, 1, (int)(big / 4));
    gpu.ops->download(&gpu, NULL, NULL, 0);
    double copy_gbs = 2.0 * big * 10 / (now_s() - t0) / 1e9;
    printf("device-to-device copy: %.0f GB/s (read + write)\n", copy_gbs);
    gpu.ops->free(&gpu, a), gpu.ops->free(&gpu, b);
    float *x = device_random((size_t)512 * 14336 * 4, 2),
          *y = device_random((size_t)512 * 128256 * 4, 3);
    /* x as random bytes may hold NaNs: make it small floats instead */
    float *xh = malloc((size_t)512 * 14336 * 4);
    for (size_t i = 0; i < (size_t)512 * 14336; i++)
        xh[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    gpu.ops->upload(&gpu, x, xh, (size_t)512 * 14336 * 4);
    free(xh);
    printf("| type | rows x cols | n | us/call | weight GB/s | %% of copy |\n");
    printf("| --- | --- | ---: | ---: | ---: | ---: |\n");
    for (int ti = 0; ti < n_types; ti++) {
        int type = -1;
        for (int t = 0; t < 64; t++)
            if (ox_dtype_valid(t) && !strcmp(ox_dtype_name((enum ox_dtype)t), types[ti]))
                type = t;
        if (type < 0 || !gpu.ops->supports(BACKEND_OP_MATMUL, (enum ox_dtype)type)) {
            fprintf(stderr, "bench_cuda_matmul: unknown or unsupported type %s\n", types[ti]);
            continue;
        }
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            int rows = shapes[si][0], cols = shapes[si][1];
            size_t row_bytes = (size_t)cols / ox_dtype_block_size((enum ox_dtype)type) *
                               ox_dtype_type_size((enum ox_dtype)type);
            void *w = device_random(row_bytes * rows, 4 + si);
            struct mat m = {(enum ox_dtype)type, w, rows, cols, row_bytes, NULL, NULL};
            for (int bi = 0; bi < n_batches; bi++) {
                int n = batches[bi];
                double s = time_matmul(&m, x, y, n, n >= 512 ? 5 : 50);
                double gbs = (double)(row_bytes * rows) / s / 1e9;
                printf("| %s | %d x %d | %d | %.1f | %.0f | %.0f%% |\n", types[ti], rows, cols, n,
                       s * 1e6, gbs, 100.0 * gbs / copy_gbs);
            }
            gpu.ops->free(&gpu, w);
        }
    }
    gpu.ops->release(&gpu);
    return 0;
}
