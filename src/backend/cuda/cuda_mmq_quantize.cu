/* cuda_mmq_quantize.cu: the int8 tensor-core matmul's activations (cuda_mmq.cu): rows quantized
 * to q8_K or q8_1, levels and scale words in separate planes, through an RMSNorm first where
 * the matmuls that read them take their input normed (the normed floats are never stored). */
#include "backend/cuda/cuda_mmq_quantize.cuh"
#include "backend/cuda/cuda_ops.cuh"

/* q8_K: a warp per block of 256. */
__global__ static void mqq_k_kernel(const float *__restrict__ x, uint8_t *__restrict__ lv,
                                    uint32_t *__restrict__ sc, int64_t n_blocks) {
    const int64_t blk = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = (int)threadIdx.x % 32;
    if (blk >= n_blocks) /* whole warps */
        return;
    float v[8];
    mqq_load8(v, x + 256 * blk + 8 * lane);
    mqq_put_k(v, lane, lv + 256 * blk, sc + 16 * blk);
}

/* q8_1: four lanes per group of 32. */
__global__ static void mqq_1_kernel(const float *__restrict__ x, uint8_t *__restrict__ lv,
                                    uint32_t *__restrict__ sc, int64_t n_groups) {
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const bool live = t / 4 < n_groups; /* all lanes shuffle; the dead ones store nothing */
    const int64_t grp = live ? t / 4 : 0;
    const int part = (int)(t % 4);
    float v[8];
    mqq_load8(v, x + 32 * grp + 8 * part);
    mqq_put_1(v, part, live, lv + 32 * grp, sc + grp);
}

/* Chunks of 8 values a thread of mqq_norm_kernel holds: rows up to 32 * 1024 wide. */
constexpr int MQQ_CHUNKS = 4;

/* One block per row: the row's values loaded at once (chunk c = j blockDim + thread, so a
 * warp's 32 chunks are a q8_K block or 8 q8_1 groups), their sum of squares, the RMSNorm's
 * scale (as cuda_norm.cu's kernels compute it: x * scale * g), then quantized as above. g
 * NULL: no weight (a norm folded into the matrices). */
template <bool Q8K>
__global__ static void mqq_norm_kernel(const float *__restrict__ x, const float *__restrict__ g,
                                       float eps, int n_cols, uint8_t *__restrict__ lv,
                                       uint32_t *__restrict__ sc) {
    __shared__ float part[32];
    const int chunks = n_cols / 8, lane = (int)threadIdx.x % 32;
    const size_t row = blockIdx.x;
    const float *xr = x + row * (size_t)n_cols;
    /* the weights' loads sent with the row's, not a round trip after the sum */
    float v[MQQ_CHUNKS][8], gv[MQQ_CHUNKS][8], sum = 0.f;
#pragma unroll
    for (int j = 0; j < MQQ_CHUNKS; j++) {
        const int c = j * (int)blockDim.x + (int)threadIdx.x;
        if (c < chunks) {
            mqq_load8(v[j], xr + 8 * c);
        } else {
#pragma unroll
            for (int e = 0; e < 8; e++)
                v[j][e] = 0.f;
        }
        if (g && c < chunks) {
            mqq_load8(gv[j], g + 8 * c);
        } else {
#pragma unroll
            for (int e = 0; e < 8; e++)
                gv[j][e] = 1.f;
        }
    }
#pragma unroll
    for (int j = 0; j < MQQ_CHUNKS; j++)
#pragma unroll
        for (int e = 0; e < 8; e++)
            sum += v[j][e] * v[j][e];
    const float scale = rsqrtf(cuda_block_sum(sum, part) / (float)n_cols + eps);
#pragma unroll
    for (int j = 0; j < MQQ_CHUNKS; j++) {
        const int c = j * (int)blockDim.x + (int)threadIdx.x;
        if (c - lane >= chunks) /* the whole warp is past the row */
            break;
#pragma unroll
        for (int e = 0; e < 8; e++)
            v[j][e] = v[j][e] * scale * gv[j][e];
        if constexpr (Q8K) { /* n_cols a multiple of 256: whole warps live */
            const size_t blk = row * (size_t)(n_cols / 256) + (size_t)(c - lane) / 32;
            mqq_put_k(v[j], lane, lv + 256 * blk, sc + 16 * blk);
        } else {
            const bool live = c < chunks;
            const size_t grp = row * (size_t)(n_cols / 32) + (size_t)(live ? c : 0) / 4;
            mqq_put_1(v[j], lane % 4, live, lv + 32 * grp, sc + grp);
        }
    }
}

/* The threads of mqq_norm_kernel for rows of n_cols (whole warps), 0 where it does not take
 * them: too wide, or x and g not 16-byte aligned (its loads are float4s). */
static unsigned mqq_norm_threads(const float *x, const float *g, int64_t n_cols) {
    const int64_t chunks = n_cols / 8;
    const int64_t threads = (chunks + 32 * MQQ_CHUNKS - 1) / (32 * MQQ_CHUNKS) * 32;
    if (threads > 1024 || ((uintptr_t)x | (uintptr_t)g) & 15)
        return 0;
    return (unsigned)threads;
}

bool cuda_mmq_norm_takes(const float *x, const struct norm_in *norm, int64_t n_cols) {
    return !norm || mqq_norm_threads(x, norm->w, n_cols) > 0;
}

void cuda_mmq_quantize(struct backend *b, const float *x, const struct norm_in *norm, int n,
                       int64_t n_cols, bool q8k, uint8_t *lv, uint32_t *sc) {
    cudaStream_t stream = cuda_of(b)->stream;
    const int64_t n_groups = (int64_t)n * (n_cols / 32);
    if (norm) {
        const unsigned threads = mqq_norm_threads(x, norm->w, n_cols);
        if (q8k)
            mqq_norm_kernel<true><<<(unsigned)n, threads, 0, stream>>>(x, norm->w, norm->eps,
                                                                     (int)n_cols, lv, sc);
        else
            mqq_norm_kernel<false><<<(unsigned)n, threads, 0, stream>>>(x, norm->w, norm->eps,
                                                                      (int)n_cols, lv, sc);
    } else if (q8k) {
        const int64_t blocks = n_groups / 8;
        mqq_k_kernel<<<cuda_blocks((size_t)blocks * 32, 256), 256, 0, stream>>>(x, lv, sc, blocks);
    } else {
        mqq_1_kernel<<<cuda_blocks((size_t)n_groups * 4, 256), 256, 0, stream>>>(x, lv, sc,
                                                                                  n_groups);
    }
    CUDA_LAUNCHED(b, "cuda_mmq: quantizing activations");
}
