/* cuda_gemv_q8.cu: weight matmuls of up to 8 tokens on int8 activations. x is quantized to q8_1
 * once (here, or by the RMSNorm that produced it), then each warp streams its weight rows
 * through shared memory and takes integer dot products (cuda_vecdot.cuh): four times fewer
 * instructions per weight than dequantizing to floats, which is what bound the float GEMV. */
#include <cuda_pipeline.h>

#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/cuda_vecdot.cuh"

constexpr int QW = 8; /* warps per block */
/* Tile buffers per warp: QNB - 1 tiles on their way while one is used. 3 measured slower than
 * 2 on the H200 (more shared memory per block, no more bytes in flight that mattered). */
constexpr int QNB = 2;
constexpr int Q_THREADS = 32 * QW;
constexpr int Q_SMEM = 200000; /* the most dynamic shared memory a launch asks for, */
static int q_smem_limit;       /* or what this GPU allows (cuda_gemv_q8_init) */

/* ---- quantizing activations ---- */

/* x[n][n_cols] (n_cols a multiple of 32) to q8_1 blocks, one warp per block. */
__global__ static void q8_quantize_kernel(const float *__restrict__ x, cvd_xq *__restrict__ xq,
                                          int64_t n_blocks) {
    cuda_let_next_start();
    cuda_wait_previous();
    const int64_t blk = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (blk < n_blocks)
        cvd_quantize_warp(__ldg(x + 32 * blk + threadIdx.x % 32), xq + blk, (int)threadIdx.x % 32);
}

bool cuda_q8_room(struct backend *b, int n, int64_t n_cols) {
    return n >= 1 && n_cols % 32 == 0 && (size_t)n * (size_t)(n_cols / 32) <= cuda_of(b)->xq_blocks;
}

int cuda_q8_max_n(void) { /* read once (thread-safe initialisation) */
    static const int v = cuda_env_int("OX_CUDA_Q8_MAX_N", CUDA_GEMV_MAX_N, 1, CUDA_Q8_MAX_N);
    return v;
}

bool cuda_q8_fits(struct backend *b, int n, int64_t n_cols) {
    return n <= CUDA_Q8_MAX_N && cuda_q8_room(b, n, n_cols);
}

bool cuda_gemv_fits(struct backend *b, int n, int64_t n_cols) {
    return n <= (cuda_one_token(b, n) ? CUDA_Q8_MAX_N : cuda_q8_max_n()) &&
           cuda_q8_room(b, n, n_cols);
}

const cvd_xq *cuda_q8_input(struct backend *b, const float *x, int n, int64_t n_cols) {
    cuda_state *s = cuda_of(b);
    if (s->xq_src != x || s->xq_n != n || s->xq_cols != n_cols) {
        const int64_t blocks = (int64_t)n * (n_cols / 32);
        cuda_note(b,
                  cuda_launch_early(cuda_of(b)->pdl, q8_quantize_kernel,
                                    dim3(cuda_blocks((size_t)blocks * 32, 256)), dim3(256), 0,
                                    s->stream, x, (cvd_xq *)s->xq[s->xq_cur], blocks),
                  "quantizing activations");
        s->xq_src = x, s->xq_n = n, s->xq_cols = n_cols;
    }
    return (const cvd_xq *)s->xq[s->xq_cur];
}

/* ---- the GEMV ---- */

/* Groups of 32 per tile of a row: 128 (4 per lane) where two tiles per warp stay small. */
/* The plain types (f32, f16, bf16) take x as floats (XPAD apart per group of 32, so lane l's
 * reads of its group hit bank (l + j) % 32), single tokens only: int8 activations would cost
 * them more accuracy than their references allow. */
template <enum ox_dtype T> constexpr bool q8_float_x() {
    return dq<T>::QK == 1;
}
constexpr int XPAD = 33;

template <enum ox_dtype T> constexpr int q8_groups() {
    if constexpr (q8_float_x<T>())
        return dq<T>::BS == 4 ? 32 : 64; /* 4 KB tiles */
    else
        return 1024 / dq<T>::QK * dq<T>::BS <= 640 ? 128 : 64;
}
/* Bytes of count groups of 32 (count a multiple of the groups per block). */
template <enum ox_dtype T> __host__ __device__ constexpr size_t q8_group_bytes(int64_t count) {
    if constexpr (q8_float_x<T>())
        return (size_t)count * 32 * dq<T>::BS;
    else
        return (size_t)(count / (dq<T>::QK / 32)) * dq<T>::BS;
}

template <enum ox_dtype T> constexpr int q8_tile_bytes() {
    return (int)q8_group_bytes<T>(q8_groups<T>());
}

/* Bytes of shared memory for each block's copy of nt rows of x of n_cols. */
template <enum ox_dtype T> __host__ __device__ constexpr size_t q8_x_bytes(int nt, int64_t n_cols) {
    if constexpr (q8_float_x<T>())
        return ((size_t)(n_cols / 32) * XPAD * sizeof(float) + 15) / 16 * 16;
    else
        return ((size_t)nt * (size_t)(n_cols / 32) * sizeof(cvd_xq) + 15) / 16 * 16;
}

/* What one launch computes: up to three matrices of one type and width sharing x, their rows
 * taken in turn (q, k and v); or, with glu >= 0, a gate and an up matrix whose row pairs make
 * y[0] = act(gate x) * (up x), also quantized to q8_1 into xq_out unless that is NULL (for
 * the down projection next; needs 32 rows per block). accumulate: y += instead of y =.
 * With ids (MoE experts, one token per block), blockIdx.y is a pair p < n_pairs of a token and
 * one of its experts: the matrices are expert ids[p]'s (expert_bytes apart), x is row
 * p / x_div, and y and xq_out move on by p rows. */
struct q8_job {
    const uint8_t *w[3];
    float *y[3];
    int64_t row_end[3]; /* matrix m owns rows [row_end[m - 1], row_end[m]) */
    int64_t items;      /* rows, or row pairs (glu) */
    size_t row_bytes;
    int n_mats, glu, accumulate;
    cvd_xq *xq_out;
    const float *x;      /* x's float rows, for the plain types and with norm_w (then each */
    const float *norm_w; /* block norms them; the xq argument is unused) */
    float norm_eps;
    const int32_t *ids;
    size_t expert_bytes;
    int n_pairs, x_div;
    /* let the next kernel launch as this one starts (its weight requests then overlap this
     * one's tail), else once this block's dot products are done: on an H200 the first gave
     * 8B Q4_0 decode 352 t/s against 339, the second 1B Q4_0 1075 against 1009 (1053 with no
     * early launch at all), the early blocks presumably taking the small kernels' multiprocessors
     */
    bool start_next_early;
};

/* x * scale * w (n_groups groups of 32 floats, 16-byte aligned) to q8_1 blocks, as
 * cvd_quantize_warp makes them, by pairs of lanes: each lane takes half a group in registers,
 * so a group costs one shuffle for its maximum and one for its sum where a warp per group
 * costs ten in a row. Every block of a single-token GEMV with the norm inside does this, so
 * it counts: H200, 8B Q4_0 tg128 379 -> 441 t/s against a warp per group (ncu, us per
 * launch: q, k, v 17.7 -> 12.0, gate and up 34.3 -> 29.3). */
__device__ __forceinline__ void q8_quantize_pairs(const float *__restrict__ x, float scale,
                                                  const float *__restrict__ w,
                                                  cvd_xq *__restrict__ out, int n_groups) {
    const int half = threadIdx.x & 1;
    for (int g0 = 0; g0 < n_groups; g0 += Q_THREADS / 2) { /* the same trips in every lane */
        const int g = g0 + threadIdx.x / 2;
        const bool active = g < n_groups;
        float v[16], amax = 0.f;
        if (active) {
            const float4 *xs = (const float4 *)(x + 32 * g + 16 * half);
            const float4 *ws = (const float4 *)(w + 32 * g + 16 * half);
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const float4 a = xs[k], b = __ldg(ws + k);
                v[4 * k] = a.x * scale * b.x, v[4 * k + 1] = a.y * scale * b.y;
                v[4 * k + 2] = a.z * scale * b.z, v[4 * k + 3] = a.w * scale * b.w;
            }
#pragma unroll
            for (int k = 0; k < 16; k++)
                amax = fmaxf(amax, fabsf(v[k]));
        }
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
        int sum = 0;
        uint32_t q4[4] = {0, 0, 0, 0};
        if (active)
#pragma unroll
            for (int k = 0; k < 16; k++) {
                const int q = cvd_q8_level(v[k], amax);
                sum += q;
                q4[k / 4] |= (uint32_t)(q & 0xff) << (8 * (k % 4));
            }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        if (active) {
            cvd_xq *blk = out + g;
#pragma unroll
            for (int k = 0; k < 4; k++) /* blocks are 36 bytes: 4-byte stores */
                blk->qs[4 * half + k] = (int32_t)q4[k];
            if (!half) {
                blk->d = cvd_q8_d_bits(amax);
                blk->sq = (int16_t)sum;
            }
        }
    }
}

/* Each block's copy of x in shared memory: the n rows of q8_1 blocks at xq, or with
 * job.norm_w, x's rows through the RMSNorm (sums of squares first, a block reduction, then
 * q8_quantize_pairs); for FLOAT_X, x's floats (normed or not), XPAD per group. */
template <int NT, bool FLOAT_X>
__device__ __forceinline__ void q8_stage_x(const q8_job &job, const cvd_xq *__restrict__ xq, int n,
                                           int n_cols, size_t x_row, uint8_t *smem, float *red) {
    const int n_groups = n_cols / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float *xf = (float *)smem;
    if (FLOAT_X && !job.norm_w) {
        for (int i = threadIdx.x; i < n_cols; i += Q_THREADS)
            xf[i / 32 * XPAD + i % 32] = __ldg(job.x + x_row * n_cols + i);
        return;
    }
    xq += x_row * n_groups;
    if (!job.norm_w) {
        const int words = n * n_groups * (int)(sizeof(cvd_xq) / 4);
        for (int i = threadIdx.x; i < words; i += Q_THREADS)
            ((uint32_t *)smem)[i] = __ldg((const uint32_t *)xq + i);
        return;
    }
    float ss[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) {
        ss[t] = 0.f;
        if (t < n)
            for (int i = threadIdx.x; i < n_cols; i += Q_THREADS) {
                const float v = job.x[(size_t)t * n_cols + i];
                ss[t] += v * v;
            }
#pragma unroll
        for (int o = 16; o > 0; o /= 2)
            ss[t] += __shfl_xor_sync(0xffffffffu, ss[t], o);
        if (lane == 0)
            red[t * QW + warp] = ss[t];
    }
    __syncthreads();
#pragma unroll
    for (int t = 0; t < NT; t++) {
        if (t >= n)
            break;
        float sum = 0.f;
        for (int k = 0; k < QW; k++)
            sum += red[t * QW + k];
        const float scale = rsqrtf(sum / (float)n_cols + job.norm_eps);
        if (FLOAT_X) { /* one token */
            for (int i = threadIdx.x; i < n_cols; i += Q_THREADS)
                xf[i / 32 * XPAD + i % 32] =
                    job.x[(size_t)t * n_cols + i] * scale * __ldg(job.norm_w + i);
        } else {
            q8_quantize_pairs(job.x + (size_t)t * n_cols, scale, job.norm_w,
                              (cvd_xq *)smem + (size_t)t * n_groups, n_groups);
        }
    }
}

/* Row seg (0, or 1 for a GLU job's up matrix) of item it. */
__device__ __forceinline__ const uint8_t *q8_row(const q8_job &job, int64_t it, int seg) {
    if (job.glu >= 0)
        return (seg ? job.w[1] : job.w[0]) + it * job.row_bytes;
    if (it < job.row_end[0]) /* selects, not an indexed read of the parameter block */
        return job.w[0] + it * job.row_bytes;
    if (it < job.row_end[1])
        return job.w[1] + (it - job.row_end[0]) * job.row_bytes;
    return job.w[2] + (it - job.row_end[1]) * job.row_bytes;
}

/* Item it's values v[t] (t < n, the same in every lane) to its output row(s), y_off floats on
 * (a MoE pair's row). */
template <int NT>
__device__ __forceinline__ void q8_store(const q8_job &job, int64_t it, const float *v, int n,
                                         int lane, size_t y_off) {
    int m = 0;
    int64_t r0 = 0, rows = job.glu >= 0 ? job.items : job.row_end[0];
    if (job.glu < 0 && it >= job.row_end[0]) {
        m = it < job.row_end[1] ? 1 : 2;
        r0 = m == 1 ? job.row_end[0] : job.row_end[1];
        rows = (m == 1 ? job.row_end[1] : job.row_end[2]) - r0;
    }
    float *y = (m == 0 ? job.y[0] : m == 1 ? job.y[1] : job.y[2]) + y_off + (it - r0);
#pragma unroll
    for (int t = 0; t < NT; t++) {
        if (t < n && lane == t) {
            float *p = y + t * rows;
            *p = job.accumulate ? *p + v[t] : v[t];
        }
    }
}

/* q8_tile_dot for the types whose groups g and g + S share bytes (cvd_pair_stride): a lane
 * takes a pair at a time; tiles hold whole super-blocks, so pairs too. */
template <enum ox_dtype T, int NT>
__device__ __forceinline__ void q8_tile_dot_pairs(const uint8_t *tile, int t_idx, int lane, int n,
                                                  int n_groups, const uint8_t *smem, float *part) {
    constexpr int TG = q8_groups<T>(), S = cvd_pair_stride<T>();
    static_assert(TG % 64 == 0, "whole pairs per lane");
    const int tg = min(TG, n_groups - t_idx * TG);
#pragma unroll
    for (int i = 0; i < NT; i++)
        part[i] = 0.f;
#pragma unroll
    for (int k = 0; k < TG / 64; k++) {
        const int p = lane + 32 * k, g = p / S * 2 * S + p % S;
        if (g >= tg)
            break;
        const cvd_xq *xs = (const cvd_xq *)smem + t_idx * TG + g;
        cvd_w w0, w1;
        vd<T>::template unpack_pair<16>(tile, g, w0, w1);
#pragma unroll
        for (int i = 0; i < NT; i++)
            if (i < n)
                part[i] += cvd_dot_pair<T>(w0, xs[(size_t)i * n_groups]) +
                           cvd_dot_pair<T>(w1, xs[(size_t)i * n_groups + S]);
    }
}

/* part[t] = this lane's share of tile t_idx's dot products with token t (t < n): its groups
 * lane, lane + 32, ... of the tile at tile, against x as q8_gemv stages it in smem. */
template <enum ox_dtype T, int NT>
__device__ __forceinline__ void q8_tile_dot(const uint8_t *tile, int t_idx, int lane, int n,
                                            int n_groups, const uint8_t *smem, float *part) {
    constexpr int TG = q8_groups<T>();
    const int tg = min(TG, n_groups - t_idx * TG);
#pragma unroll
    for (int i = 0; i < NT; i++)
        part[i] = 0.f;
#pragma unroll
    for (int k = 0; k < TG / 32; k++) {
        const int g = lane + 32 * k;
        if (g >= tg)
            break;
        if constexpr (q8_float_x<T>()) { /* one token, floats XPAD per group */
            float v[32];
            dq<T>::template group<16>(tile, g, v);
            const float *xr = (const float *)smem + (size_t)(t_idx * TG + g) * XPAD;
            float d = 0.f;
#pragma unroll
            for (int j = 0; j < 32; j++)
                d += v[j] * xr[j];
            part[0] += d;
        } else {
            const cvd_xq *xs = (const cvd_xq *)smem;
            cvd_w w;
            vd<T>::template unpack<16>(tile, g, w);
#pragma unroll
            for (int i = 0; i < NT; i++)
                if (i < n)
                    part[i] += cvd_dot<T>(w, xs[(size_t)i * n_groups + t_idx * TG + g]);
        }
    }
}

/* Item it's sums are complete in each lane's share: add them up over the lanes, apply the GLU
 * (keeping the row for xq_out), store, and clear the sums for the next item. */
template <int NT>
__device__ __forceinline__ void q8_finish_item(const q8_job &job, int64_t it, float *acc, float *up,
                                               int n, int lane, float *outs, size_t y_off) {
#pragma unroll
    for (int i = 0; i < NT; i++) {
#pragma unroll
        for (int o = 16; o > 0; o /= 2) {
            acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], o);
            up[i] += __shfl_xor_sync(0xffffffffu, up[i], o);
        }
        if (job.glu >= 0) {
            acc[i] = cuda_glu_act(job.glu, acc[i]) * up[i];
            if (job.xq_out && lane == i)
                outs[i * 32 + (int)(it % 32)] = acc[i];
        }
    }
    q8_store<NT>(job, it, acc, n, lane, y_off);
#pragma unroll
    for (int i = 0; i < NT; i++)
        acc[i] = up[i] = 0.f;
}

/* The block's warps take items rpb / QW apart within the block's rpb. Each warp streams the
 * tiles of all its rows (two per item for a GLU job) through its QNB shared buffers with
 * cp.async, the next tiles in flight while the lanes take integer dot products with this one,
 * across row boundaries too: short rows keep as many bytes on their way as long ones. The
 * first tiles are requested before waiting for the previous kernel (weights depend on nothing),
 * then the block stages all of x (n rows of q8_1 blocks) in shared memory. MOE: the job's ids
 * choose the matrices (a template argument, so the dense kernels carry none of it).
 * Single tokens ask for four blocks per multiprocessor (64 registers, no spills): the launches
 * of a decode step then fit in one wave where three blocks left a second of 12-30% (H100,
 * tg128 8B Q4_K_M 328 -> 357 t/s, 1B Q4_0 1358 -> 1377; q4_0's 60 registers fitted four
 * already). Batches keep two: their sums per token take 75-123 registers. */
template <enum ox_dtype T, int NT, bool MOE>
__global__ void __launch_bounds__(Q_THREADS, NT == 1 ? 4 : 2)
    gemv_q8_kernel(const q8_job job, int n_cols, const cvd_xq *__restrict__ xq, int n, int rpb) {
    constexpr int TG = q8_groups<T>(), TB = q8_tile_bytes<T>();
    constexpr bool FX = q8_float_x<T>();
    extern __shared__ __align__(16) uint8_t smem[];
    if (job.start_next_early)
        cuda_let_next_start();
    const int n_groups = n_cols / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const size_t x_bytes = q8_x_bytes<T>(NT, n_cols); /* x first, as q8_stage_x puts it */
    uint8_t *ws = smem + x_bytes + warp * QNB * TB;
    /* [NT][32]: the norm's partial sums, then the rows for xq_out */
    float *outs = (float *)(smem + x_bytes + QW * QNB * TB);

    /* a MoE block's expert is known once the router's kernel is done: only then can the
     * weights be fetched */
    size_t pair = 0, w_off = 0;
    if constexpr (MOE) {
        cuda_wait_previous();
        pair = blockIdx.y;
        w_off = (size_t)job.ids[pair] * job.expert_bytes;
    }
    const int segs = job.glu >= 0 ? 2 : 1, n_tiles = (n_groups + TG - 1) / TG;
    const int64_t end = min(job.items, (int64_t)(blockIdx.x + 1) * rpb);
    const int64_t first = (int64_t)blockIdx.x * rpb + warp;
    const int total = first < end ? (int)((end - first + QW - 1) / QW) * segs * n_tiles : 0;
    /* the stream's position, as (item, segment, tile), for the next fetch and the compute */
    int64_t f_it = first, c_it = first;
    int f_seg = 0, f_t = 0, c_seg = 0, c_t = 0;
    const uint8_t *f_row = total > 0 ? q8_row(job, first, 0) + w_off : nullptr;
    /* the next tile into buffer s % QNB, then step past it */
    auto fetch = [&](int s) {
        const uint8_t *src = f_row + q8_group_bytes<T>((int64_t)f_t * TG);
        const int len = (int)q8_group_bytes<T>(min(TG, n_groups - f_t * TG));
        uint8_t *dst = ws + (s % QNB) * TB;
        for (int i = lane * 16; i < len; i += 32 * 16)
            __pipeline_memcpy_async(dst + i, src + i, 16);
        __pipeline_commit();
        if (++f_t < n_tiles)
            return;
        f_t = 0;
        if (++f_seg == segs)
            f_seg = 0, f_it += QW;
        if (s + 1 < total)
            f_row = q8_row(job, f_it, f_seg) + w_off;
    };
    /* one tile before the wait: both buffers filled then took a decode step longer though
     * the matmul alone ran a little faster (H100 tg128: 8B Q4_K_M 347 against 356 t/s, 1B
     * Q4_0 1305 against 1364) */
    int fetched = 0;
    while (fetched < total && fetched < QNB - 1)
        fetch(fetched++);
    cuda_wait_previous();
    q8_stage_x<NT, FX>(job, xq, n, n_cols, MOE ? pair / job.x_div : 0, smem, outs);
    __syncthreads();

    float acc[NT], up[NT]; /* the item's sums: its row, or its gate and up rows */
#pragma unroll
    for (int t = 0; t < NT; t++)
        acc[t] = up[t] = 0.f;
    for (int s = 0; s < total; s++) {
        if (fetched < total) /* into the buffer tile s - 1 used */
            fetch(fetched++);
        if (fetched - s - 1 >= 2) /* tile s has landed, later ones may not have */
            __pipeline_wait_prior(2);
        else if (fetched - s - 1 == 1)
            __pipeline_wait_prior(1);
        else
            __pipeline_wait_prior(0);
        __syncwarp();
        float part[NT];
        if constexpr (cvd_pair_stride<T>() > 0)
            q8_tile_dot_pairs<T, NT>(ws + (s % QNB) * TB, c_t, lane, n, n_groups, smem, part);
        else
            q8_tile_dot<T, NT>(ws + (s % QNB) * TB, c_t, lane, n, n_groups, smem, part);
        __syncwarp(); /* the buffer is refilled at the next step */
#pragma unroll
        for (int i = 0; i < NT; i++) {
            if (c_seg)
                up[i] += part[i];
            else
                acc[i] += part[i];
        }
        if (++c_t < n_tiles)
            continue;
        c_t = 0;
        if (++c_seg < segs)
            continue;
        c_seg = 0;
        q8_finish_item<NT>(job, c_it, acc, up, n, lane, outs, pair * job.items);
        c_it += QW;
    }
    if (!job.start_next_early)
        cuda_let_next_start();
    if (job.xq_out) { /* the block's 32 rows are block blockIdx.x of each token's q8_1 row */
        __syncthreads();
        if (warp < n)
            cvd_quantize_warp(outs[warp * 32 + lane],
                              job.xq_out + (pair + warp) * (job.items / 32) + blockIdx.x, lane);
    }
}

template <enum ox_dtype T> static size_t q8_smem(int nt, int64_t n_cols) {
    return q8_x_bytes<T>(nt, n_cols) + (size_t)QW * QNB * q8_tile_bytes<T>() +
           (size_t)nt * 32 * sizeof(float);
}

/* Whether the kernel takes matrices of this type and shape: 16-byte aligned rows and tiles
 * (the cp.async copies), x and the tiles within shared memory. */
template <enum ox_dtype T> static bool q8_shape_ok(const struct mat *w, int nt) {
    constexpr int TG = q8_groups<T>();
    const int64_t n_groups = w->n_cols / 32;
    const size_t last = q8_group_bytes<T>(n_groups % TG);
    return (!q8_float_x<T>() || (nt == 1 && w->n_cols % 32 == 0)) && q8_tile_bytes<T>() % 16 == 0 &&
           last % 16 == 0 && (((uintptr_t)w->data | w->row_bytes) & 15) == 0 &&
           w->n_cols <= INT32_MAX / 2 && q8_smem<T>(nt, w->n_cols) <= (size_t)q_smem_limit;
}

template <enum ox_dtype T, int NT>
static void q8_launch(struct backend *b, const q8_job &job, int64_t n_cols, const float *x, int n) {
    const int pairs = job.ids ? job.n_pairs : 1, x_rows = job.ids ? pairs / job.x_div : n;
    const cvd_xq *xq =
        job.norm_w || q8_float_x<T>() ? nullptr : cuda_q8_input(b, x, x_rows, n_cols);
    const int64_t items = job.items;
    const int64_t work = (job.glu >= 0 ? 2 * items : items) * pairs;
    /* one row per warp while that leaves fewer than two blocks per multiprocessor; up to four
     * for big matrices, so x is staged less often (rows spread evenly over exactly one or two
     * waves of two blocks per multiprocessor measured slower: H100 tg128 8B Q4_K_M 284 and
     * 318 against 322 t/s) */
    const int64_t per_warp = work / ((int64_t)QW * 2 * cuda_of(b)->n_sm);
    const int rpb = job.xq_out ? 32 : QW * (int)(per_warp < 1 ? 1 : per_warp > 4 ? 4 : per_warp);
    auto kernel = gemv_q8_kernel<T, NT, false>;
    if constexpr (NT == 1) /* the experts' pairs take one token each */
        if (job.ids)
            kernel = gemv_q8_kernel<T, 1, true>;
    cuda_note(b,
              cuda_launch_early(cuda_of(b)->pdl, kernel,
                                dim3(cuda_blocks((size_t)items, (unsigned)rpb), (unsigned)pairs),
                                dim3(Q_THREADS), q8_smem<T>(NT, n_cols), cuda_of(b)->stream, job,
                                (int)n_cols, xq, n, rpb),
              "q8 gemv kernel");
}

template <enum ox_dtype T>
static bool q8_run_t(struct backend *b, const q8_job &job, const struct mat *w, const float *x,
                     int n) {
    const int nt = n == 1 ? 1 : n == 2 ? 2 : n <= 4 ? 4 : 8;
    if (!q8_shape_ok<T>(w, nt))
        return false;
    if (nt == 1) {
        q8_launch<T, 1>(b, job, w->n_cols, x, n);
    } else if constexpr (q8_float_x<T>()) {
        return false; /* not reached: q8_shape_ok takes single tokens only */
    } else if (nt == 2)
        q8_launch<T, 2>(b, job, w->n_cols, x, n);
    else if (nt == 4)
        q8_launch<T, 4>(b, job, w->n_cols, x, n);
    else
        q8_launch<T, 8>(b, job, w->n_cols, x, n);
    return true;
}

/* The types the kernel takes: integer dot products for CVD_TYPES, float x for these. */
#define Q8_TYPES(X) CVD_TYPES(X) X(F32) X(F16) X(BF16)

/* Runs the job on matrices like w when the kernel takes them; false leaves everything as it
 * was (the caller uses another path). */
static bool q8_run(struct backend *b, q8_job &job, const struct mat *w, const float *x, int n) {
    if (!cuda_q8_fits(b, n, w->n_cols))
        return false;
    job.row_bytes = w->row_bytes;
    job.start_next_early = cuda_of(b)->early;
    if (!job.x)
        job.x = x; /* the float types read it */
    switch (w->type) {
#define CQ_CASE_(name)                                                                             \
    case OX_DTYPE_##name: return q8_run_t<OX_DTYPE_##name>(b, job, w, x, n);
        Q8_TYPES(CQ_CASE_)
#undef CQ_CASE_
    default: return false;
    }
}

/* Whether a matmul of n tokens through w gives each token's row the bits it gives that token
 * alone: the integer GEMV taking w for n tokens and for one (CVD_TYPES), or a quantized type
 * it takes for neither, which both batch sizes then take through cuda_matmul.cu's float GEMV.
 * Either way a lane sums its groups in the same order whatever the tokens. The plain types'
 * single tokens have kernels of their own. */
template <enum ox_dtype T>
static bool q8_rows_alike_t(struct backend *b, const struct mat *w, int n) {
    const int nt = n == 1 ? 1 : n == 2 ? 2 : n <= 4 ? 4 : 8;
    if constexpr (q8_float_x<T>()) {
        return false;
    } else {
        const bool one = cuda_q8_fits(b, 1, w->n_cols) && q8_shape_ok<T>(w, 1);
        const bool many = cuda_q8_fits(b, n, w->n_cols) && q8_shape_ok<T>(w, nt);
        return one == many;
    }
}

static bool q8_rows_alike(struct backend *b, const struct mat *w, int n) {
    switch (w->type) {
#define CQ_CASE_(name)                                                                             \
    case OX_DTYPE_##name: return q8_rows_alike_t<OX_DTYPE_##name>(b, w, n);
        Q8_TYPES(CQ_CASE_)
#undef CQ_CASE_
    default: return ox_dtype_block_size(w->type) > 1; /* the float GEMV's at any size */
    }
}

bool cuda_rows_apart(struct backend *b, const struct mat *w, int n) {
    return cuda_one_token(b, n) && !q8_rows_alike(b, w, n);
}

static bool same_kind(const struct mat *a, const struct mat *c) {
    return a->type == c->type && a->n_cols == c->n_cols && a->row_bytes == c->row_bytes;
}

void cuda_q8_written(struct backend *b, const float *y, int n, int64_t rows) {
    cuda_state *s = cuda_of(b);
    const float *src_end = s->xq_src + (size_t)s->xq_n * (size_t)s->xq_cols;
    if (s->xq_src && y < src_end && s->xq_src < y + (size_t)n * (size_t)rows)
        s->xq_src = nullptr; /* the ranges overlap */
    const float *xm_end = s->xm_src + (size_t)s->xm_n * (size_t)s->xm_cols;
    if (s->xm_src && y < xm_end && s->xm_src < y + (size_t)n * (size_t)rows)
        s->xm_src = nullptr;
    if (s->xh_src && y < s->xh_src + s->xh_count && s->xh_src < y + (size_t)n * (size_t)rows)
        s->xh_src = nullptr;
}

/* Dense matmuls of more than cuda_q8_max_n tokens go to the tensor cores where they are taken. */
static bool q8_leaves_to_mmq(struct backend *b, const struct mat *w, const float *x, int n) {
    return n > cuda_q8_max_n() && cuda_mmq_takes(b, w, x, n);
}

bool cuda_gemv_q8(struct backend *b, const struct mat *w, const float *x, float *y, int n,
                  bool accumulate) {
    /* single tokens through f16 / bf16 weights stream faster without this kernel's staging */
    if (n == 1 && cuda_half_matmul(b, w, x, y, accumulate))
        return true;
    if (n > 1 && cuda_mma_half_multi(b, 1, w, x, nullptr, &y, n, accumulate))
        return true;
    q8_job job = {};
    job.w[0] = (const uint8_t *)w->data, job.y[0] = y;
    job.row_end[0] = job.items = w->n_rows;
    job.n_mats = 1, job.glu = -1, job.accumulate = accumulate;
    if (w->n_rows <= 0 || q8_leaves_to_mmq(b, w, x, n))
        return false;
    cuda_q8_written(b, y, n, w->n_rows);
    return q8_run(b, job, w, x, n);
}

bool cuda_matmul_add(struct backend *b, const struct mat *w, const float *x, float *y, int n) {
    if (cuda_rows_apart(b, w, n)) { /* a token at a time: declined for all if for the first */
        for (int t = 0; t < n; t++)
            if (!cuda_matmul_add(b, w, x + (size_t)t * w->n_cols, y + (size_t)t * w->n_rows, 1))
                return false;
        return true;
    }
    return cuda_gemv_q8(b, w, x, y, n, true) || cuda_mmq(b, w, x, y, n, true) ||
           cuda_gemm_add(b, w, x, y, n);
}

/* The job takes x through the norm itself (NULL: x is as it is). Every block norms its own
 * copy, which costs less than a norm kernel for one token only: 8 tokens made the 8B model's
 * batched decode 18% slower (x8: 462 -> 377 t/s); in one-token order batches keep it too (a
 * token's bits). False: declined. */
static bool q8_norm(struct backend *b, q8_job &job, const float *x, const struct norm_in *norm,
                    int n) {
    if (!norm)
        return true;
    job.x = x, job.norm_w = norm->w, job.norm_eps = norm->eps;
    /* a folded norm's matrices take the half kernel; q8_quantize_pairs reads 16 bytes at once */
    return (n == 1 || cuda_one_token(b, n)) && norm->w &&
           !(((uintptr_t)x | (uintptr_t)norm->w) & 15);
}

bool cuda_matmul_multi(struct backend *b, int count, const struct mat *w, const float *x,
                       const struct norm_in *norm, float *const *y, int n) {
    if (count < 1 || count > 3)
        return false;
    if (cuda_rows_apart(b, &w[0], n)) { /* a token at a time, as cuda_matmul_add */
        for (int t = 0; t < n; t++) {
            float *yt[3];
            for (int m = 0; m < count; m++)
                yt[m] = y[m] + (size_t)t * w[m].n_rows;
            if (!cuda_matmul_multi(b, count, w, x + (size_t)t * w[0].n_cols, norm, yt, 1))
                return false;
        }
        return true;
    }
    /* the tensor cores' batches: matrices of one width, of any types that read x alike */
    if (n > cuda_q8_max_n() && cuda_mmq_multi(b, count, w, x, norm, y, n))
        return true;
    /* Matrices of different kinds (a Q4_K_M file's q4_K q and k beside a q6_K v) are declined:
     * the caller's norm kernel and a launch per matrix measured faster than runs of one kind
     * each taking x through the norm itself (H100 tg128 8B Q4_K_M 358 against 354 t/s). */
    for (int m = 0; m < count; m++)
        if (!same_kind(&w[0], &w[m]) || w[m].n_rows <= 0)
            return false;
    /* one token through f16 / bf16 weights: the streaming kernel, the norm a kernel apart
     * (cuda_gemv_half.cu says why) unless its weight is folded into the matrices */
    if (n == 1 && cuda_half_takes(&w[0]))
        return cuda_half_multi(b, count, w, x, norm, y);
    if (cuda_mma_half_multi(b, count, w, x, norm, y, n, false)) /* a few tokens of them */
        return true;
    if (q8_leaves_to_mmq(b, &w[0], x, n)) /* declined above: a norm to run first */
        return false;
    q8_job job = {};
    job.n_mats = count, job.glu = -1;
    if (!q8_norm(b, job, x, norm, n))
        return false;
    int64_t rows = 0;
    for (int m = 0; m < count; m++) {
        job.w[m] = (const uint8_t *)w[m].data, job.y[m] = y[m];
        job.row_end[m] = rows += w[m].n_rows;
    }
    job.items = rows;
    for (int m = 0; m < count; m++)
        cuda_q8_written(b, y[m], n, w[m].n_rows);
    return q8_run(b, job, &w[0], x, n);
}

bool cuda_matmul_glu(struct backend *b, enum glu_kind kind, const struct mat *gate,
                     const struct mat *up, const float *x, const struct norm_in *norm, float *y,
                     int n) {
    if (!same_kind(gate, up) || gate->n_rows != up->n_rows || gate->n_rows <= 0)
        return false;
    if (cuda_rows_apart(b, gate, n)) { /* a token at a time, as cuda_matmul_add */
        for (int t = 0; t < n; t++)
            if (!cuda_matmul_glu(b, kind, gate, up, x + (size_t)t * gate->n_cols, norm,
                                 y + (size_t)t * gate->n_rows, 1))
                return false;
        return true;
    }
    if (n == 1 && cuda_half_takes(gate)) /* as cuda_matmul_multi */
        return cuda_half_glu(b, kind, gate, up, x, norm, y);
    if (cuda_mma_half_glu(b, kind, gate, up, x, norm, y, n))
        return true;
    if (q8_leaves_to_mmq(b, gate, x, n))
        return cuda_mmq_glu(b, kind, gate, up, x, norm, y, n);
    q8_job job = {};
    if (!q8_norm(b, job, x, norm, n))
        return false;
    job.w[0] = (const uint8_t *)gate->data, job.w[1] = (const uint8_t *)up->data, job.y[0] = y;
    job.row_end[0] = job.items = gate->n_rows;
    job.n_mats = 2, job.glu = (int)kind;
    cuda_q8_written(b, y, n, gate->n_rows);
    cuda_state *s = cuda_of(b);
    /* the output quantized for the down projection: 32 rows per block, a whole number of
     * blocks (a big matrix gets 32 rows per block anyway); the float types' down projection
     * reads floats */
    const bool quantize = gate->n_rows % 32 == 0 && cuda_gemv_fits(b, n, gate->n_rows) &&
                          ox_dtype_block_size(gate->type) > 1;
    if (quantize)
        job.xq_out = (cvd_xq *)s->xq[1 - s->xq_cur];
    if (!q8_run(b, job, gate, x, n))
        return false;
    if (quantize)
        s->xq_cur = 1 - s->xq_cur, s->xq_src = y, s->xq_n = n, s->xq_cols = gate->n_rows;
    return true;
}

/* ---- MoE experts: one (token, expert) pair per block row, the experts read on the device ---- */

bool cuda_q8_takes_experts(struct backend *b, const struct mat *w, int n_pairs) {
    if (!cuda_q8_fits(b, n_pairs, w->n_cols) || w->n_rows <= 0)
        return false;
    switch (w->type) {
#define CQ_CASE_(name)                                                                             \
    case OX_DTYPE_##name: return q8_shape_ok<OX_DTYPE_##name>(w, 1);
        Q8_TYPES(CQ_CASE_)
#undef CQ_CASE_
    default: return false;
    }
}

static void q8_experts(q8_job &job, const struct mat *w, const int32_t *ids, int n_pairs,
                       int x_div) {
    job.ids = ids, job.expert_bytes = (size_t)w->n_rows * w->row_bytes;
    job.n_pairs = n_pairs, job.x_div = x_div;
}

bool cuda_experts_glu(struct backend *b, enum glu_kind kind, const struct mat *gate,
                      const struct mat *up, const float *x, int n, const int32_t *ids, int k,
                      float *y) {
    const int pairs = n * k;
    if (!same_kind(gate, up) || gate->n_rows != up->n_rows || !cuda_q8_fits(b, n, gate->n_cols) ||
        !cuda_q8_takes_experts(b, gate, pairs))
        return false;
    q8_job job = {};
    job.w[0] = (const uint8_t *)gate->data, job.w[1] = (const uint8_t *)up->data, job.y[0] = y;
    job.row_end[0] = job.items = gate->n_rows;
    job.n_mats = 2, job.glu = (int)kind;
    q8_experts(job, gate, ids, pairs, k);
    cuda_q8_written(b, y, pairs, gate->n_rows);
    cuda_state *s = cuda_of(b);
    /* the rows quantized for the down projection, as cuda_matmul_glu does */
    const bool quantize = gate->n_rows % 32 == 0 && cuda_q8_fits(b, pairs, gate->n_rows) &&
                          ox_dtype_block_size(gate->type) > 1;
    if (quantize)
        job.xq_out = (cvd_xq *)s->xq[1 - s->xq_cur];
    if (!q8_run(b, job, gate, x, 1))
        return false;
    if (quantize)
        s->xq_cur = 1 - s->xq_cur, s->xq_src = y, s->xq_n = pairs, s->xq_cols = gate->n_rows;
    return true;
}

bool cuda_experts(struct backend *b, const struct mat *w, const float *x, const int32_t *ids,
                  int n_pairs, float *y) {
    if (!cuda_q8_takes_experts(b, w, n_pairs))
        return false;
    q8_job job = {};
    job.w[0] = (const uint8_t *)w->data, job.y[0] = y;
    job.row_end[0] = job.items = w->n_rows;
    job.n_mats = 1, job.glu = -1;
    q8_experts(job, w, ids, n_pairs, 1);
    cuda_q8_written(b, y, n_pairs, w->n_rows);
    return q8_run(b, job, w, x, 1);
}

/* Over 48 KB of dynamic shared memory must be allowed per kernel before any launch (and so
 * before a graph capture records one). */
template <enum ox_dtype T, int NT, bool MOE = false> static cudaError_t q8_allow_smem_nt() {
    return cudaFuncSetAttribute(gemv_q8_kernel<T, NT, MOE>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize, q_smem_limit);
}

template <enum ox_dtype T> static cudaError_t q8_allow_smem() {
    cudaError_t e = q8_allow_smem_nt<T, 1>();
    if (e == cudaSuccess)
        e = q8_allow_smem_nt<T, 1, true>();
    if constexpr (!q8_float_x<T>()) { /* the float types take single tokens only */
        if (e == cudaSuccess)
            e = q8_allow_smem_nt<T, 2>();
        if (e == cudaSuccess)
            e = q8_allow_smem_nt<T, 4>();
        if (e == cudaSuccess)
            e = q8_allow_smem_nt<T, 8>();
    }
    return e;
}

cudaError_t cuda_gemv_q8_init(void) {
    static_assert(sizeof cdq_iq4nl == sizeof iq4nl_values, "iq4nl table");
    int device = 0, optin = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    q_smem_limit = optin < Q_SMEM ? optin : Q_SMEM;
    if (e == cudaSuccess) /* this file's copy of the table (cuda_dequant.cuh) */
        e = cudaMemcpyToSymbol(cdq_iq4nl, iq4nl_values, sizeof iq4nl_values);
#define CQ_ATTR_(name)                                                                             \
    if (e == cudaSuccess)                                                                          \
        e = q8_allow_smem<OX_DTYPE_##name>();
    Q8_TYPES(CQ_ATTR_)
#undef CQ_ATTR_
    return e;
}
