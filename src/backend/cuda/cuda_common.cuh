/* cuda_common.cuh: what every CUDA op file shares: the backend's per-context state, error
 * recording, and launch helpers. */
#ifndef OX_BACKEND_CUDA_COMMON_CUH
#define OX_BACKEND_CUDA_COMMON_CUH

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

extern "C" {
#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "core/status.h"
}

/* The CUDA backend's state for one context (struct backend's impl). */
struct cuda_state {
    int device;
    int n_sm;            /* multiprocessors: how many blocks fill the chip */
    cudaStream_t stream; /* every op of the context runs on it, in order */
    cublasHandle_t blas; /* bound to stream */
    float *scratch;      /* weights dequantized (to f16) for cuBLAS GEMMs */
    size_t scratch_floats;
    void *xh; /* a batch of activations in f16 or bf16 for the GEMMs */
    size_t xh_halves;
    uint8_t *staging; /* pinned host memory: uploads copy through it, so they are async */
    size_t staging_size, staging_used; /* reset at each download, which waits for the copies */
    cudaGraphExec_t graph;             /* the recorded decode step, and its key */
    uint64_t graph_key;
    bool capturing;
    enum ox_status err; /* the first failure since the last download, which reports it */
    char msg[256];
};

/* ggml's block_q8_0 (x = d * q), as the KV cache may hold it. */
struct kv_q8_0 {
    __half d;
    int8_t q[32];
};
static_assert(sizeof(kv_q8_0) == 34, "q8_0 layout");

/* Element i of row r of a KV cache of type T (OX_DTYPE_F32, F16 or Q8_0), rows row_bytes
 * apart: what attention reads in place of a float copy of the cache. */
template <int T>
__device__ __forceinline__ float kv_elem(const uint8_t *base, size_t row_bytes, size_t r, int i) {
    const uint8_t *row = base + r * row_bytes;
    if constexpr (T == OX_DTYPE_F16) {
        return __half2float(((const __half *)row)[i]);
    } else if constexpr (T == OX_DTYPE_Q8_0) {
        const kv_q8_0 *blk = (const kv_q8_0 *)row + i / 32;
        return __half2float(blk->d) * (float)blk->q[i % 32];
    } else {
        return ((const float *)row)[i];
    }
}

static inline cuda_state *cuda_of(struct backend *b) {
    return (cuda_state *)b->impl;
}

/* Record a failed CUDA call (the first one wins; download turns it into ox_last_error). */
void cuda_note(struct backend *b, cudaError_t e, const char *what);
void cuda_note_blas(struct backend *b, cublasStatus_t e, const char *what);
/* After a kernel launch: a bad configuration shows up here. */
#define CUDA_LAUNCHED(b, what) cuda_note((b), cudaGetLastError(), (what))

static inline unsigned cuda_blocks(size_t n, unsigned threads) {
    return (unsigned)((n + threads - 1) / threads);
}

#endif
