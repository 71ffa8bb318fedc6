/* cuda_norm.cu: RMSNorm and LayerNorm on the GPU, one block per row. */
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/cuda_vecdot.cuh"

/* One block per row, of a shape that depends on the row's width alone, never on how many rows
 * a step has: a token's norm has the same bits in a batch as alone (which one-token order,
 * cuda_one_token, counts on). */

/* The strided fallback, for rows the float4 kernel below does not take. xq: NULL, or where the
 * rows go as q8_1 too (dim a multiple of 32: each warp's lanes hold 32 consecutive values at
 * every step). */
static const unsigned THREADS = 256;
__global__ static void rms_norm_kernel(const float *x, const float *g, float *y, int dim, float eps,
                                       cvd_xq *xq) {
    __shared__ float shared[32];
    cuda_let_next_start();
    cuda_wait_previous();
    const float *xr = x + (size_t)blockIdx.x * (size_t)dim;
    float *yr = y + (size_t)blockIdx.x * (size_t)dim;
    float sum = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x)
        sum += xr[i] * xr[i];
    const float scale = rsqrtf(cuda_block_sum(sum, shared) / (float)dim + eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        const float v = xr[i] * scale * (g ? g[i] : 1.0f); /* times 1: the bits of no weight */
        yr[i] = v;
        if (xq)
            cvd_quantize_warp(v, xq + ((size_t)blockIdx.x * dim + i) / 32, threadIdx.x % 32);
    }
}

/* Four values a lane, eight lanes a block of 32 (lanes 8k .. 8k + 7 of a warp) into blk unless
 * !live (all 32 lanes take part): the levels, scale and sum cvd_quantize_warp gives the same 32
 * values (a maximum and an integer sum, whatever their order). */
__device__ __forceinline__ void quantize_quad(const float4 &v, cvd_xq *blk, int lane, bool live) {
    float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
#pragma unroll
    for (int o = 4; o > 0; o /= 2)
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const int q0 = cvd_q8_level(v.x, amax), q1 = cvd_q8_level(v.y, amax);
    const int q2 = cvd_q8_level(v.z, amax), q3 = cvd_q8_level(v.w, amax);
    int sum = q0 + q1 + q2 + q3;
#pragma unroll
    for (int o = 4; o > 0; o /= 2)
        sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (!live)
        return;
    blk->qs[lane % 8] = (int32_t)((uint32_t)(q0 & 0xff) | (uint32_t)(q1 & 0xff) << 8 |
                                  (uint32_t)(q2 & 0xff) << 16 | (uint32_t)(q3 & 0xff) << 24);
    if (lane % 8 == 0) {
        blk->d = cvd_q8_d_bits(amax);
        blk->sq = (int16_t)sum;
    }
}

/* Rows of dim a multiple of 4 (16-byte aligned), up to RN_VEC float4s a thread: all of a
 * row's loads in flight before the sum (a strided loop waits on them one round trip after
 * another: 32 rows of 4096 took 9.8 us of the 8B's decode steps of 32 sequences, 65 times a
 * step). xq as rms_norm_kernel's, dim a multiple of 32. */
constexpr int RN_VEC = 4;
__global__ static void rms_norm_vec_kernel(const float *x, const float *g, float *y, int dim,
                                           float eps, cvd_xq *xq) {
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
        if (r * blockDim.x >= quads) /* whole warps past the row: a warp's lanes go alike */
            break;
        const float4 o = make_float4(v[r].x * scale * gr[r].x, v[r].y * scale * gr[r].y,
                                     v[r].z * scale * gr[r].z, v[r].w * scale * gr[r].w);
        if (i < quads)
            yr[i] = o;
        if (xq && i - (int)threadIdx.x % 32 < quads) /* quads % 8 == 0: blocks whole */
            quantize_quad(o, xq + ((size_t)blockIdx.x * quads + i) / 8, (int)threadIdx.x % 32,
                          i < quads);
    }
}

/* The threads for rms_norm_vec_kernel (whole warps), or 0 where it does not take the rows: a
 * float4 each up to 1024 values, so a short row's block has lanes to spare (a warp for the kjv
 * model's 288 made its decode 3.5% slower than a float a thread), then up to 256 threads with
 * more float4s each (1024 a float4 each made the 8B's and 1B's prompts 0.8% slower), up to
 * RN_VEC; the shape depends on dim alone. */
static unsigned rms_vec_threads(const float *x, const float *g, const float *y, int dim) {
    const unsigned quads = (unsigned)dim / 4;
    const unsigned per = quads <= 256                    ? 1
                         : (quads + 255) / 256 <= RN_VEC ? (quads + 255) / 256
                                                         : RN_VEC;
    const unsigned threads = ((quads + per - 1) / per + 31) / 32 * 32;
    const bool aligned = !(((uintptr_t)x | (uintptr_t)g | (uintptr_t)y) & 15);
    return dim % 4 == 0 && quads > 0 && aligned && threads <= 1024 ? threads : 0;
}

/* Rows few enough for the integer GEMV are also quantized, for the matmul that reads them next
 * (usually the one after a norm). */
void cuda_rms_norm(struct backend *b, const float *x, const float *g, float *y, int n, int dim,
                   float eps) {
    cuda_state *s = cuda_of(b);
    const bool q8 = cuda_gemv_fits(b, n, dim);
    cuda_forget_xq(s);
    s->xq_src = q8 ? y : nullptr, s->xq_n = n, s->xq_cols = dim;
    cvd_xq *xq = q8 ? (cvd_xq *)s->xq[s->xq_cur] : nullptr;
    const unsigned vec = rms_vec_threads(x, g, y, dim);
    if (n > 0 && vec)
        cuda_note(b,
                  cuda_launch_early(s->pdl, rms_norm_vec_kernel, dim3((unsigned)n), dim3(vec), 0,
                                    s->stream, x, g, y, dim, eps, xq),
                  "rms_norm");
    else if (n > 0)
        cuda_note(b,
                  cuda_launch_early(s->pdl, rms_norm_kernel, dim3((unsigned)n), dim3(THREADS), 0,
                                    s->stream, x, g, y, dim, eps, xq),
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
