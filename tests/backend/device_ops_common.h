/* device_ops_common.h: what the device backends' op tests share (test_cuda_ops.c,
 * test_cuda_matmul.c through cuda_ops_common.h, test_vulkan_ops.c): the CPU backend and the
 * device's, random inputs, device copies, the relative error and the double-precision matmul
 * reference. */
#ifndef OX_TESTS_DEVICE_OPS_COMMON_H
#define OX_TESTS_DEVICE_OPS_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "oxidize.h"
#include "quant/dtype.h"
#include "test.h"

static struct backend cpu, gpu;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static inline float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static inline float *random_floats(size_t n, float scale) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = frand() * scale;
    return x;
}

/* The CPU backend on 2 threads and a device backend (dev, named name): 0 to go on, 77
 * (skipped) where it has no device, 1 on a failure. */
static inline int device_open(const struct backend_ops *dev, const char *name) {
    if (!dev->available()) { /* OX_TEST_DEVICE_REQUIRED: a failure, not a skip (mesa_next.sh) */
        bool required = getenv("OX_TEST_DEVICE_REQUIRED") != NULL;
        printf("no %s device usable here (%s): %s\n", name, ox_last_error(),
               required ? "failed" : "skipped");
        return required ? 1 : 77;
    }
    cpu.ops = &backend_cpu_ops, gpu.ops = dev;
    struct backend_sizes z = {.n_batch = 64, .n_threads = 2, .max_cols = 8192};
    if (cpu.ops->init(&cpu, &z) != OX_OK || gpu.ops->init(&gpu, &z) != OX_OK) {
        fprintf(stderr, "setup: %s\n", ox_last_error());
        return 1;
    }
    return 0;
}

/* Device copy of host bytes. */
static inline void *up(const void *host, size_t bytes) {
    void *d = gpu.ops->alloc(&gpu, bytes);
    if (d && bytes)
        gpu.ops->upload(&gpu, d, host, bytes);
    return d;
}

static inline float *down(const float *d, size_t n) {
    float *h = malloc((n ? n : 1) * sizeof *h);
    CHECK_MSG(gpu.ops->download(&gpu, h, d, n * sizeof *h) == OX_OK, "download: %s",
              ox_last_error());
    return h;
}

/* A random weight of a type on the host and the device. */
static inline struct mat random_weight(enum ox_dtype type, int rows, int cols, uint8_t **host) {
    size_t row_bytes = (size_t)cols / ox_dtype_block_size(type) * ox_dtype_type_size(type);
    float *wf = random_floats((size_t)rows * cols, 1.0f);
    *host = malloc(row_bytes * rows);
    CHECK(ox_quantize(type, wf, *host, rows, cols, NULL) == OX_OK);
    free(wf);
    return (struct mat){type, up(*host, row_bytes * rows), rows, cols, row_bytes, NULL, NULL};
}

/* ||got - want|| / ||want||; NaN anywhere counts as infinitely wrong. */
static inline double rel_err(const float *got, const float *want, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(got[i]) != isnan(want[i]))
            return INFINITY;
        double d = (double)got[i] - want[i];
        num += d * d, den += (double)want[i] * want[i];
    }
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

#define CHECK_CLOSE(got, want, n, tol, ...)                                                        \
    do {                                                                                           \
        double e_ = rel_err((got), (want), (n));                                                   \
        CHECK_MSG(e_ <= (tol), __VA_ARGS__);                                                       \
        if (e_ > (tol))                                                                            \
            fprintf(stderr, "  relative error %.3g, allowed %.3g\n", e_, (double)(tol));           \
    } while (0)

/* y = W x in double from the dequantized rows: what every matmul path must approach. */
static inline void matmul_ref(enum ox_dtype type, const void *w, int rows, int cols, const float *x,
                              int n, float *y) {
    float *row = malloc((size_t)cols * sizeof *row);
    size_t row_bytes = (size_t)cols / ox_dtype_block_size(type) * ox_dtype_type_size(type);
    for (int r = 0; r < rows; r++) {
        ox_dequantize(type, (const uint8_t *)w + (size_t)r * row_bytes, row, cols);
        for (int t = 0; t < n; t++) {
            double s = 0.0;
            for (int c = 0; c < cols; c++)
                s += (double)row[c] * x[(size_t)t * cols + c];
            y[(size_t)t * rows + r] = (float)s;
        }
    }
    free(row);
}

/* Rows of a weight on the device (m; w: its host bytes) against the CPU's dequantization, bit
 * for bit: the last, the first, one twice and the middle. */
static inline void check_get_rows(const struct mat *m, const uint8_t *w) {
    int rows = (int)m->n_rows, cols = (int)m->n_cols;
    int32_t ids[5] = {0, rows - 1, 3, 3, rows / 2};
    int32_t *dids = up(ids, sizeof ids);
    float *dy = gpu.ops->alloc(&gpu, 5 * (size_t)cols * 4), *want = malloc(5 * (size_t)cols * 4);
    gpu.ops->get_rows(&gpu, m, dids, dy, 5);
    float *got = down(dy, 5 * (size_t)cols);
    for (int t = 0; t < 5; t++)
        ox_dequantize(m->type, w + (size_t)ids[t] * m->row_bytes, want + (size_t)t * cols, cols);
    CHECK_MSG(!memcmp(got, want, 5 * (size_t)cols * 4), "get_rows %s", ox_dtype_name(m->type));
    free(got), free(want);
    gpu.ops->free(&gpu, dids), gpu.ops->free(&gpu, dy);
}

#endif
