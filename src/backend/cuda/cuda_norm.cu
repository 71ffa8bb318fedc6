/* cuda_norm.cu: RMSNorm and LayerNorm on the GPU, one block per row. */
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/cuda_vecdot.cuh"

/* One block per row: a few rows (decode) get all of a row's loads in flight at once, many rows
 * (prompts) smaller blocks. */
static const unsigned THREADS = 256, FEW_ROWS_THREADS = 1024;

/* Sum of one value per thread across the block; every thread gets it. */
__device__ static float block_sum(float v, float *shared) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();
    if (lane == 0)
        shared[warp] = v;
    __syncthreads();
    v = lane < (int)(blockDim.x / 32) ? shared[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* xq: NULL, or where the rows go as q8_1 too (dim a multiple of 32: each warp's lanes hold
 * 32 consecutive values at every step). */
__global__ static void rms_norm_kernel(const float *x, const float *g, float *y, int dim, float eps,
                                       cvd_xq *xq) {
    __shared__ float shared[32];
    constexpr int GR = 4; /* weights read before the wait: all of them up to 4 * THREADS dims */
    float gr[GR];
#pragma unroll
    for (int r = 0; r < GR; r++) {
        const int i = threadIdx.x + r * blockDim.x;
        gr[r] = g && i < dim ? g[i] : 1.0f; /* times 1: the same bits as no weight */
    }
    cuda_let_next_start();
    cuda_wait_previous();
    const float *xr = x + (size_t)blockIdx.x * (size_t)dim;
    float *yr = y + (size_t)blockIdx.x * (size_t)dim;
    float sum = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x)
        sum += xr[i] * xr[i];
    float scale = rsqrtf(block_sum(sum, shared) / (float)dim + eps);
    auto put = [&](int i, float gi) {
        const float v = xr[i] * scale * gi;
        yr[i] = v;
        if (xq)
            cvd_quantize_warp(v, xq + ((size_t)blockIdx.x * dim + i) / 32, threadIdx.x % 32);
    };
#pragma unroll
    for (int r = 0; r < GR; r++)
        if (threadIdx.x + r * blockDim.x < dim)
            put(threadIdx.x + r * blockDim.x, gr[r]);
    for (int i = threadIdx.x + GR * blockDim.x; i < dim; i += blockDim.x)
        put(i, g ? g[i] : 1.0f);
}

/* Rows few enough for the integer GEMV are also quantized, for the matmul that reads them next
 * (usually the one after a norm). */
void cuda_rms_norm(struct backend *b, const float *x, const float *g, float *y, int n, int dim,
                   float eps) {
    cuda_state *s = cuda_of(b);
    const bool q8 = cuda_gemv_fits(b, n, dim);
    cuda_forget_xq(s);
    s->xq_src = q8 ? y : nullptr, s->xq_n = n, s->xq_cols = dim;
    if (n > 0)
        cuda_note(b,
                  cuda_launch_early(cuda_of(b)->pdl, rms_norm_kernel, dim3((unsigned)n),
                                    dim3(n <= CUDA_Q8_MAX_N ? FEW_ROWS_THREADS : THREADS), 0,
                                    s->stream, x, g, y, dim, eps,
                                    q8 ? (cvd_xq *)s->xq[s->xq_cur] : nullptr),
                  "rms_norm");
}

/* Mean first, then the variance around it (two passes over the row, which stays in L1). */
__global__ static void layer_norm_kernel(const float *x, const float *g, const float *bias,
                                         float *y, int dim, float eps) {
    __shared__ float shared[32];
    const float *xr = x + (size_t)blockIdx.x * (size_t)dim;
    float *yr = y + (size_t)blockIdx.x * (size_t)dim;
    float sum = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x)
        sum += xr[i];
    float mean = block_sum(sum, shared) / (float)dim, var = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x)
        var += (xr[i] - mean) * (xr[i] - mean);
    float scale = rsqrtf(block_sum(var, shared) / (float)dim + eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = (xr[i] - mean) * scale;
        v = g ? v * g[i] : v;
        yr[i] = bias ? v + bias[i] : v;
    }
}

void cuda_layer_norm(struct backend *b, const float *x, const float *g, const float *bias, float *y,
                     int n, int dim, float eps) {
    if (n > 0)
        layer_norm_kernel<<<n, THREADS, 0, cuda_of(b)->stream>>>(x, g, bias, y, dim, eps);
    CUDA_LAUNCHED(b, "layer_norm");
}
