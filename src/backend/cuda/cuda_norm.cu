/* cuda_norm.cu: RMSNorm and LayerNorm on the GPU, one block per row. */
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/cuda_vecdot.cuh"

/* One block per row: a few rows (decode) get all of a row's loads in flight at once, many rows
 * (prompts) smaller blocks. */
static const unsigned THREADS = 256, FEW_ROWS_THREADS = 1024;

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
    float scale = rsqrtf(cuda_block_sum(sum, shared) / (float)dim + eps);
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

/* Rows of dim a multiple of 4 (16-byte aligned), up to RN_VEC float4s a thread: all of a
 * row's loads in flight before the sum. The strided loop above waits on them one round trip
 * after another: 32 rows of 4096 took 9.8 us of the 8B's decode steps of 32 sequences, 65 times
 * a step. */
constexpr int RN_VEC = 4;
__global__ static void rms_norm_vec_kernel(const float *x, const float *g, float *y, int dim,
                                           float eps) {
    __shared__ float shared[32];
    const int quads = dim / 4;
    float4 gr[RN_VEC];
#pragma unroll
    for (int r = 0; r < RN_VEC; r++) {
        const int i = threadIdx.x + r * blockDim.x;
        gr[r] = g && i < quads ? ((const float4 *)g)[i] : make_float4(1.f, 1.f, 1.f, 1.f);
    }
    cuda_let_next_start();
    cuda_wait_previous();
    const float4 *xr = (const float4 *)(x + (size_t)blockIdx.x * (size_t)dim);
    float4 *yr = (float4 *)(y + (size_t)blockIdx.x * (size_t)dim);
    float4 v[RN_VEC];
    float sum = 0.0f;
#pragma unroll
    for (int r = 0; r < RN_VEC; r++) {
        const int i = threadIdx.x + r * blockDim.x;
        v[r] = i < quads ? xr[i] : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int r = 0; r < RN_VEC; r++)
        sum += v[r].x * v[r].x + v[r].y * v[r].y + v[r].z * v[r].z + v[r].w * v[r].w;
    const float scale = rsqrtf(cuda_block_sum(sum, shared) / (float)dim + eps);
#pragma unroll
    for (int r = 0; r < RN_VEC; r++) {
        const int i = threadIdx.x + r * blockDim.x;
        if (i < quads)
            yr[i] = make_float4(v[r].x * scale * gr[r].x, v[r].y * scale * gr[r].y,
                                v[r].z * scale * gr[r].z, v[r].w * scale * gr[r].w);
    }
}

/* The threads for rms_norm_vec_kernel (whole warps), or 0 where it does not take the rows. */
static unsigned rms_vec_threads(const float *x, const float *g, const float *y, int dim) {
    const unsigned threads = (unsigned)(dim / 4 + RN_VEC * 32 - 1) / (RN_VEC * 32) * 32;
    const bool aligned = !(((uintptr_t)x | (uintptr_t)g | (uintptr_t)y) & 15);
    return dim % 4 == 0 && aligned && threads <= 1024 ? threads : 0;
}

/* Rows few enough for the integer GEMV are also quantized, for the matmul that reads them next
 * (usually the one after a norm). */
void cuda_rms_norm(struct backend *b, const float *x, const float *g, float *y, int n, int dim,
                   float eps) {
    cuda_state *s = cuda_of(b);
    const bool q8 = cuda_gemv_fits(b, n, dim);
    cuda_forget_xq(s);
    s->xq_src = q8 ? y : nullptr, s->xq_n = n, s->xq_cols = dim;
    const unsigned vec = q8 ? 0 : rms_vec_threads(x, g, y, dim);
    if (n > 0 && vec)
        cuda_note(b,
                  cuda_launch_early(s->pdl, rms_norm_vec_kernel, dim3((unsigned)n), dim3(vec), 0,
                                    s->stream, x, g, y, dim, eps),
                  "rms_norm");
    else if (n > 0)
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
    float mean = cuda_block_sum(sum, shared) / (float)dim, var = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x)
        var += (xr[i] - mean) * (xr[i] - mean);
    float scale = rsqrtf(cuda_block_sum(var, shared) / (float)dim + eps);
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
