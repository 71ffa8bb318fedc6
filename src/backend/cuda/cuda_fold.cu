/* cuda_fold.cu: an RMSNorm's weight multiplied into the f16 matrices that read the norm's output,
 * once at load, so a decode step's GEMV can take the norm in without reading it. */
#include "backend/cuda/cuda_common.cuh"

/* Sets *overflow when some w[r][c] * g[c] is beyond f16's range (it would round to infinity). */
__global__ static void fold_check_kernel(const __half *w, int64_t n_rows, int64_t n_cols,
                                         size_t row_halves, const float *g, int *overflow) {
    for (int64_t r = blockIdx.x; r < n_rows; r += gridDim.x)
        for (int64_t c = threadIdx.x; c < n_cols; c += blockDim.x)
            if (__hisinf(__float2half_rn(__half2float(w[r * row_halves + c]) * g[c])))
                *overflow = 1;
}

/* w[r][c] = f16(w[r][c] * g[c]), rounded to nearest. */
__global__ static void fold_kernel(__half *w, int64_t n_rows, int64_t n_cols, size_t row_halves,
                                   const float *g) {
    for (int64_t r = blockIdx.x; r < n_rows; r += gridDim.x)
        for (int64_t c = threadIdx.x; c < n_cols; c += blockDim.x)
            w[r * row_halves + c] = __float2half_rn(__half2float(w[r * row_halves + c]) * g[c]);
}

static enum ox_status fold_failed(cudaError_t e) {
    cudaGetLastError();
    return ox_fail(OX_ERR_DEVICE, "cuda: cannot fold a norm into its matrices: %s",
                   cudaGetErrorString(e));
}

static unsigned fold_blocks(int64_t n_rows) {
    return n_rows < 4096 ? (unsigned)n_rows : 4096;
}

enum ox_status backend_cuda_fold_fits(const void *w, int64_t n_rows, int64_t n_cols,
                                      size_t row_bytes, const float *g, bool *fits) {
    *fits = true;
    if (n_rows <= 0 || n_cols <= 0)
        return OX_OK;
    int *overflow = nullptr, host = 0;
    cudaError_t e = cudaMalloc(&overflow, sizeof *overflow);
    if (e == cudaSuccess)
        e = cudaMemset(overflow, 0, sizeof *overflow);
    if (e == cudaSuccess) {
        fold_check_kernel<<<fold_blocks(n_rows), 256>>>((const __half *)w, n_rows, n_cols,
                                                        row_bytes / sizeof(__half), g, overflow);
        e = cudaMemcpy(&host, overflow, sizeof host, cudaMemcpyDeviceToHost);
    }
    cudaFree(overflow);
    *fits = !host;
    return e == cudaSuccess ? OX_OK : fold_failed(e);
}

enum ox_status backend_cuda_fold_columns(void *w, int64_t n_rows, int64_t n_cols, size_t row_bytes,
                                         const float *g) {
    if (n_rows <= 0 || n_cols <= 0)
        return OX_OK;
    fold_kernel<<<fold_blocks(n_rows), 256>>>((__half *)w, n_rows, n_cols,
                                              row_bytes / sizeof(__half), g);
    cudaError_t e = cudaDeviceSynchronize();
    return e == cudaSuccess ? OX_OK : fold_failed(e);
}
