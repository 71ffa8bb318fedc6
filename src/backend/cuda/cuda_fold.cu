/* cuda_fold.cu: an RMSNorm's weight multiplied into the f16 matrices that read the norm's output,
 * once at load, so a decode step's GEMV can take the norm in without reading it. */
#include "backend/cuda/cuda_ops.cuh"

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

/* Sets *fits to whether every product of w's columns with g stays within f16's range. */
static enum ox_status fold_fits(const void *w, int64_t n_rows, int64_t n_cols, size_t row_bytes,
                                const float *g, bool *fits) {
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

/* Column c of an f16 matrix times g[c], in place. */
static enum ox_status fold_columns(void *w, int64_t n_rows, int64_t n_cols, size_t row_bytes,
                                   const float *g) {
    if (n_rows <= 0 || n_cols <= 0)
        return OX_OK;
    fold_kernel<<<fold_blocks(n_rows), 256>>>((__half *)w, n_rows, n_cols,
                                              row_bytes / sizeof(__half), g);
    cudaError_t e = cudaDeviceSynchronize();
    return e == cudaSuccess ? OX_OK : fold_failed(e);
}

/* Whether the matrices may take a norm's weight: f16 (whose products with a weight near 1 lose
 * one rounding; bf16's would lose more) in rows the decode GEMV streams (cuda_half_takes). */
static bool foldable(const struct mat *mats, int count) {
    for (int i = 0; i < count; i++)
        if (mats[i].type != OX_DTYPE_F16 || !cuda_half_takes(&mats[i]))
            return false;
    return count > 0;
}

/* A decode step's RMSNorms before the attention and the FFN are a kernel apiece, which the
 * single-token f16 GEMV can take in only if it reads nothing beside x (cuda_gemv_half.cu):
 * so where their weights can go into the f16 matrices that read their output, they do (H200
 * tg128: 8B F16 234 -> 245 t/s, 1B F16 1065 -> 1150). Each weight takes one more rounding to
 * f16: llama-f16's prompt KL to llama.cpp went from 1.45e-6 to 2.1e-6 (the bound is 1e-5). */
enum ox_status cuda_fold_norm(struct backend_weights *bw, const float *g, const struct mat *mats,
                              int count, bool *folded) {
    (void)bw;
    *folded = false;
    if (!foldable(mats, count))
        return OX_OK;
    for (int i = 0; i < count; i++) {
        bool fits = true;
        OX_TRY(fold_fits(mats[i].data, mats[i].n_rows, mats[i].n_cols, mats[i].row_bytes, g, &fits));
        if (!fits)
            return OX_OK;
    }
    for (int i = 0; i < count; i++)
        OX_TRY(fold_columns((void *)mats[i].data, mats[i].n_rows, mats[i].n_cols, mats[i].row_bytes,
                            g));
    *folded = true;
    return OX_OK;
}
