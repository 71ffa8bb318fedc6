/* cuda_ops_common.h: what the CUDA op tests share beyond device_ops_common.h: the
 * double-precision matmul reference, the kernels' tolerances and the backends' set-up. Included
 * by one test file each (test_cuda_ops.c, test_cuda_matmul.c). */
#ifndef OX_TESTS_CUDA_OPS_COMMON_H
#define OX_TESTS_CUDA_OPS_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "core/alloc.h"
#include "quant/dtype.h"
#include "device_ops_common.h"
#include "test.h"

/* Types whose batches of up to 8 take the integer GEMV: x is rounded to int8 blocks (q8_1)
 * first, as llama.cpp's kernels do, which leaves 0.4 to 1.2% relative error (the most for the
 * types with an offset, whose levels are all positive); llama.cpp's own test allows 2.2%. */
static inline bool int8_gemv(enum ox_dtype t) {
    switch (t) {
    case OX_DTYPE_Q4_0:
    case OX_DTYPE_Q4_1:
    case OX_DTYPE_Q5_0:
    case OX_DTYPE_Q5_1:
    case OX_DTYPE_Q8_0:
    case OX_DTYPE_Q2_K:
    case OX_DTYPE_Q3_K:
    case OX_DTYPE_Q4_K:
    case OX_DTYPE_Q5_K:
    case OX_DTYPE_Q6_K:
    case OX_DTYPE_IQ4_NL:
    case OX_DTYPE_IQ4_XS: return true;
    default: return false;
    }
}

/* The most tokens the integer GEMV takes in a dense matmul (cuda_common.cuh's CUDA_GEMV_MAX_N,
 * or OX_CUDA_Q8_MAX_N as the backend reads it); the int8 tensor-core matmul takes more. */
static inline int gemv_max_n(void) {
    const char *e = getenv("OX_CUDA_Q8_MAX_N");
    long v = e && *e ? strtol(e, NULL, 10) : 4;
    return v < 1 ? 1 : v > 8 ? 8 : (int)v;
}

/* The most tokens the f16 / bf16 tensor-core kernel takes (cuda_mma_half.cu: 16, or
 * OX_CUDA_HALF_MMA_MAX_N as the backend reads it; 0 turns it off). */
static inline int half_mma_max_n(void) {
    const char *e = getenv("OX_CUDA_HALF_MMA_MAX_N");
    long v = e && *e ? strtol(e, NULL, 10) : 16;
    return v < 0 ? 0 : v > 16 ? 16 : (int)v;
}

/* Whether a batch of n tokens through f16 / bf16 weights of cols columns takes that kernel. */
static inline bool half_mma(enum ox_dtype type, int n, int cols) {
    return (type == OX_DTYPE_F16 || type == OX_DTYPE_BF16) && n >= 2 && n <= half_mma_max_n() &&
           cols % 64 == 0;
}

/* Past one token, the half types' products round x to f16 (bf16): the tensor cores' kernels and
 * cuBLAS alike. */
static inline double half_batch_tol(enum ox_dtype type) {
    return type == OX_DTYPE_BF16 ? 1e-2 : 2e-3;
}

static inline double small_batch_tol(enum ox_dtype type) {
    return int8_gemv(type) ? 2e-2 : 2e-5;
}

enum { CT_COLS = 4096 }; /* the widest row the tests' backends take */

/* The GPU backend for batches of up to 256 rows of CT_COLS (chunks of 1024 rows dequantized),
 * its kernels launching early as for a big model or not; false with a message. */
static inline bool ct_open_gpu(bool early) {
    /* as for a model of 8 GiB (its kernels launch early) or of none, with room to dequantize */
    struct backend_weights w = {.bytes = early ? (uint64_t)8 << 30 : 0, .converts = true};
    struct backend_sizes z = {
        .n_batch = 256, .max_cols = CT_COLS, .batch_cols = CT_COLS, .weights = &w};
    gpu.ops = &backend_cuda_ops;
    if (gpu.ops->init(&gpu, &z) == OX_OK)
        return true;
    fprintf(stderr, "setup: %s\n", ox_last_error());
    return false;
}

/* The CPU backend on 2 threads and the GPU's (ct_open_gpu). Returns 0 to go on, 77 (skipped)
 * without a GPU, 1 on a failure. */
static inline int ct_open(bool early) {
    if (!backend_cuda_ops.available()) {
        printf("no CUDA GPU here: skipped\n");
        return 77;
    }
    cpu.ops = &backend_cpu_ops;
    struct backend_sizes z = {.n_batch = 256, .n_threads = 2, .max_cols = CT_COLS};
    if (cpu.ops->init(&cpu, &z) != OX_OK) {
        fprintf(stderr, "setup: %s\n", ox_last_error());
        return 1;
    }
    return ct_open_gpu(early) ? 0 : 1;
}

static inline void ct_close(void) {
    gpu.ops->release(&gpu);
    cpu.ops->release(&cpu);
}

#endif
