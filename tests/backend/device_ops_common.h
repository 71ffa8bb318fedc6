/* device_ops_common.h: what the device backends' op tests share (test_cuda_ops.c,
 * test_cuda_matmul.c through cuda_ops_common.h, test_vulkan_ops.c): the CPU backend and the
 * device's, random inputs, device copies and the relative error. */
#ifndef OX_TESTS_DEVICE_OPS_COMMON_H
#define OX_TESTS_DEVICE_OPS_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/backend.h"
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

#endif
