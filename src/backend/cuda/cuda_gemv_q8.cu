/* cuda_gemv_q8.cu: weight matmuls of up to 8 tokens on int8 activations. x is quantized to q8_1
 * once (here, or by the RMSNorm that produced it), then each warp streams its weight rows
 * through shared memory and takes integer dot products (cuda_vecdot.cuh): four times fewer
 * instructions per weight than dequantizing to floats, which is what bound the float GEMV. */
#include <cuda_pipeline.h>

#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/cuda_vecdot.cuh"

constexpr int QW = 8; /* warps per block */
constexpr int Q_THREADS = 32 * QW;
constexpr int Q_SMEM = 200000; /* the most dynamic shared memory a launch asks for, */
static int q_smem_limit;       /* or what this GPU allows (cuda_gemv_q8_init) */

/* ---- quantizing activations ---- */

/* x[n][n_cols] (n_cols a multiple of 32) to q8_1 blocks, one warp per block. */
__global__ static void q8_quantize_kernel(const float *__restrict__ x, cvd_xq *__restrict__ xq,
                                          int64_t n_blocks) {
    const int64_t blk = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (blk < n_blocks)
        cvd_quantize_warp(__ldg(x + 32 * blk + threadIdx.x % 32), xq + blk, (int)threadIdx.x % 32);
}

bool cuda_q8_fits(struct backend *b, int n, int64_t n_cols) {
    return n >= 1 && n <= CUDA_Q8_MAX_N && n_cols % 32 == 0 &&
           (size_t)n * (size_t)(n_cols / 32) <= cuda_of(b)->xq_blocks;
}

/* The q8_1 copy of x, made unless the last quantization was of these very rows. */
static const cvd_xq *q8_input(struct backend *b, const float *x, int n, int64_t n_cols) {
    cuda_state *s = cuda_of(b);
    if (s->xq_src != x || s->xq_n != n || s->xq_cols != n_cols) {
        const int64_t blocks = (int64_t)n * (n_cols / 32);
        q8_quantize_kernel<<<cuda_blocks((size_t)blocks * 32, 256), 256, 0, s->stream>>>(
            x, (cvd_xq *)s->xq[s->xq_cur], blocks);
        CUDA_LAUNCHED(b, "quantizing activations");
        s->xq_src = x, s->xq_n = n, s->xq_cols = n_cols;
    }
    return (const cvd_xq *)s->xq[s->xq_cur];
}

/* ---- the GEMV ---- */

/* Groups of 32 per tile of a row: 128 (4 per lane) where two tiles per warp stay small. */
template <enum ox_dtype T> constexpr int q8_groups() {
    return 1024 / dq<T>::QK * dq<T>::BS <= 640 ? 128 : 64;
}
template <enum ox_dtype T> constexpr int q8_tile_bytes() {
    return q8_groups<T>() * 32 / dq<T>::QK * dq<T>::BS;
}

/* What one launch computes: up to three matrices of one type and width sharing x, their rows
 * taken in turn (q, k and v); or, with glu >= 0, a gate and an up matrix whose row pairs make
 * y[0] = act(gate x) * (up x), also quantized to q8_1 into xq_out unless that is NULL (for
 * the down projection next; needs 32 rows per block). accumulate: y += instead of y =. */
struct q8_job {
    const uint8_t *w[3];
    float *y[3];
    int64_t row_end[3]; /* matrix m owns rows [row_end[m - 1], row_end[m]) */
    int64_t items;      /* rows, or row pairs (glu) */
    size_t row_bytes;
    int n_mats, glu, accumulate;
    cvd_xq *xq_out;
};

/* All lanes get sum_c W[row][c] x[t][c] in acc[t], t < n, the row streamed tile by tile into
 * the warp's two buffers at ws with cp.async (the next tile in flight while this one is used). */
template <enum ox_dtype T, int NT>
__device__ __forceinline__ void q8_row(const uint8_t *__restrict__ wr, int n_groups,
                                       const cvd_xq *xs, uint8_t *ws, int lane, int n, float *acc) {
    constexpr int TG = q8_groups<T>(), TB = q8_tile_bytes<T>(), GPB = dq<T>::QK / 32;
    const int n_tiles = (n_groups + TG - 1) / TG;
    auto fetch = [&](int t) {
        const int len = min(TG, n_groups - t * TG) / GPB * dq<T>::BS;
        const uint8_t *src = wr + (size_t)t * (TG / GPB) * dq<T>::BS;
        uint8_t *dst = ws + (t & 1) * TB;
        for (int i = lane * 16; i < len; i += 32 * 16)
            __pipeline_memcpy_async(dst + i, src + i, 16);
        __pipeline_commit();
    };
#pragma unroll
    for (int t = 0; t < NT; t++)
        acc[t] = 0.f;
    fetch(0);
    for (int t = 0; t < n_tiles; t++) {
        if (t + 1 < n_tiles) {
            fetch(t + 1);
            __pipeline_wait_prior(1);
        } else {
            __pipeline_wait_prior(0);
        }
        __syncwarp();
        const int tg = min(TG, n_groups - t * TG);
#pragma unroll
        for (int k = 0; k < TG / 32; k++) {
            const int g = lane + 32 * k;
            if (g >= tg)
                break;
            cvd_w w;
            vd<T>::template unpack<16>(ws + (t & 1) * TB, g, w);
#pragma unroll
            for (int i = 0; i < NT; i++)
                if (i < n)
                    acc[i] += cvd_dot<T>(w, xs[(size_t)i * n_groups + t * TG + g]);
        }
        __syncwarp(); /* the buffer is refilled two tiles later */
    }
#pragma unroll
    for (int i = 0; i < NT; i++)
#pragma unroll
        for (int o = 16; o > 0; o /= 2)
            acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], o);
}

/* Lane t < n stores token t's value v[t] at y + t * stride. */
template <int NT>
__device__ __forceinline__ void q8_store(float *y, int64_t stride, const float *v, int n, int lane,
                                         bool accumulate) {
#pragma unroll
    for (int t = 0; t < NT; t++) {
        if (t < n && lane == t) {
            float *p = y + t * stride;
            *p = accumulate ? *p + v[t] : v[t];
        }
    }
}

/* The block stages all of x (n rows of q8_1 blocks) in shared memory once, then each warp
 * takes the job's rows rpb / QW apart within the block's rpb. */
template <enum ox_dtype T, int NT>
__global__ void __launch_bounds__(Q_THREADS, 2)
    gemv_q8_kernel(const q8_job job, int n_cols, const cvd_xq *__restrict__ xq, int n, int rpb) {
    constexpr int TB = q8_tile_bytes<T>();
    extern __shared__ __align__(16) uint8_t smem[];
    const int n_groups = n_cols / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const cvd_xq *xs = (const cvd_xq *)smem;
    const size_t x_bytes = ((size_t)NT * n_groups * sizeof(cvd_xq) + 15) / 16 * 16;
    uint8_t *ws = smem + x_bytes + warp * 2 * TB;
    float *outs = (float *)(smem + x_bytes + QW * 2 * TB); /* [NT][32]: rows for xq_out */
    const int words = n * n_groups * (int)(sizeof(cvd_xq) / 4);
    for (int i = threadIdx.x; i < words; i += Q_THREADS)
        ((uint32_t *)smem)[i] = __ldg((const uint32_t *)xq + i);
    __syncthreads();

    const int64_t items = job.items;
    const int64_t end = min(items, (int64_t)(blockIdx.x + 1) * rpb);
    for (int64_t it = (int64_t)blockIdx.x * rpb + warp; it < end; it += QW) {
        float a[NT];
        if (job.glu >= 0) {
            float u[NT];
            q8_row<T, NT>(job.w[0] + it * job.row_bytes, n_groups, xs, ws, lane, n, a);
            q8_row<T, NT>(job.w[1] + it * job.row_bytes, n_groups, xs, ws, lane, n, u);
#pragma unroll
            for (int t = 0; t < NT; t++) {
                a[t] = cuda_glu_act(job.glu, a[t]) * u[t];
                if (job.xq_out && lane == t)
                    outs[t * 32 + (int)(it % 32)] = a[t];
            }
            q8_store<NT>(job.y[0] + it, items, a, n, lane, job.accumulate);
            continue;
        }
        /* which matrix: selects, not an indexed read of the parameter block */
        const int m = it < job.row_end[0] ? 0 : it < job.row_end[1] ? 1 : 2;
        const int64_t r0 = m == 0 ? 0 : m == 1 ? job.row_end[0] : job.row_end[1];
        const int64_t rows = (m == 0   ? job.row_end[0]
                              : m == 1 ? job.row_end[1]
                                       : job.row_end[2]) -
                             r0;
        const uint8_t *w = m == 0 ? job.w[0] : m == 1 ? job.w[1] : job.w[2];
        float *y = m == 0 ? job.y[0] : m == 1 ? job.y[1] : job.y[2];
        q8_row<T, NT>(w + (it - r0) * job.row_bytes, n_groups, xs, ws, lane, n, a);
        q8_store<NT>(y + (it - r0), rows, a, n, lane, job.accumulate);
    }
    if (job.xq_out) { /* the block's 32 rows are block blockIdx.x of each token's q8_1 row */
        __syncthreads();
        if (warp < n)
            cvd_quantize_warp(outs[warp * 32 + lane], job.xq_out + warp * (items / 32) + blockIdx.x,
                              lane);
    }
}

template <enum ox_dtype T> static size_t q8_smem(int nt, int64_t n_cols) {
    return ((size_t)nt * (size_t)(n_cols / 32) * sizeof(cvd_xq) + 15) / 16 * 16 +
           (size_t)QW * 2 * q8_tile_bytes<T>() + (size_t)nt * 32 * sizeof(float);
}

/* Whether the kernel takes matrices of this type and shape: 16-byte aligned rows and tiles
 * (the cp.async copies), x and the tiles within shared memory. */
template <enum ox_dtype T> static bool q8_shape_ok(const struct mat *w, int nt) {
    constexpr int TG = q8_groups<T>(), GPB = dq<T>::QK / 32;
    const int64_t n_groups = w->n_cols / 32;
    const size_t last = (size_t)(n_groups % TG) / GPB * dq<T>::BS;
    return q8_tile_bytes<T>() % 16 == 0 && last % 16 == 0 &&
           (((uintptr_t)w->data | w->row_bytes) & 15) == 0 && w->n_cols <= INT32_MAX / 2 &&
           q8_smem<T>(nt, w->n_cols) <= (size_t)q_smem_limit;
}

template <enum ox_dtype T, int NT>
static void q8_launch(struct backend *b, const q8_job &job, int64_t n_cols, const float *x, int n) {
    const cvd_xq *xq = q8_input(b, x, n, n_cols);
    const int64_t items = job.items;
    const int64_t work = job.glu >= 0 ? 2 * items : items;
    /* one row per warp while that leaves fewer than two blocks per multiprocessor; up to four
     * for big matrices, so x is staged less often */
    const int64_t per_warp = work / ((int64_t)QW * 2 * cuda_of(b)->n_sm);
    const int rpb = job.xq_out ? 32 : QW * (int)(per_warp < 1 ? 1 : per_warp > 4 ? 4 : per_warp);
    gemv_q8_kernel<T, NT>
        <<<cuda_blocks((size_t)items, (unsigned)rpb), Q_THREADS, q8_smem<T>(NT, n_cols),
           cuda_of(b)->stream>>>(job, (int)n_cols, xq, n, rpb);
    CUDA_LAUNCHED(b, "q8 gemv kernel");
}

template <enum ox_dtype T>
static bool q8_run_t(struct backend *b, const q8_job &job, const struct mat *w, const float *x,
                     int n) {
    const int nt = n == 1 ? 1 : n == 2 ? 2 : n <= 4 ? 4 : 8;
    if (!q8_shape_ok<T>(w, nt))
        return false;
    if (nt == 1)
        q8_launch<T, 1>(b, job, w->n_cols, x, n);
    else if (nt == 2)
        q8_launch<T, 2>(b, job, w->n_cols, x, n);
    else if (nt == 4)
        q8_launch<T, 4>(b, job, w->n_cols, x, n);
    else
        q8_launch<T, 8>(b, job, w->n_cols, x, n);
    return true;
}

/* Runs the job on matrices like w when the kernel takes them; false leaves everything as it
 * was (the caller uses another path). */
static bool q8_run(struct backend *b, q8_job &job, const struct mat *w, const float *x, int n) {
    if (!cuda_q8_fits(b, n, w->n_cols))
        return false;
    job.row_bytes = w->row_bytes;
    switch (w->type) {
#define CQ_CASE_(name)                                                                             \
    case OX_DTYPE_##name: return q8_run_t<OX_DTYPE_##name>(b, job, w, x, n);
        CVD_TYPES(CQ_CASE_)
#undef CQ_CASE_
    default: return false;
    }
}

static bool same_kind(const struct mat *a, const struct mat *c) {
    return a->type == c->type && a->n_cols == c->n_cols && a->row_bytes == c->row_bytes;
}

/* The matmul's writes may overwrite the rows the q8_1 copy was made from. */
static void q8_written(struct backend *b, const float *y) {
    if (cuda_of(b)->xq_src == y)
        cuda_of(b)->xq_src = nullptr;
}

bool cuda_gemv_q8(struct backend *b, const struct mat *w, const float *x, float *y, int n,
                  bool accumulate) {
    q8_job job = {};
    job.w[0] = (const uint8_t *)w->data, job.y[0] = y;
    job.row_end[0] = job.items = w->n_rows;
    job.n_mats = 1, job.glu = -1, job.accumulate = accumulate;
    q8_written(b, y);
    return w->n_rows > 0 && q8_run(b, job, w, x, n);
}

bool cuda_matmul_add(struct backend *b, const struct mat *w, const float *x, float *y, int n) {
    return cuda_gemv_q8(b, w, x, y, n, true);
}

bool cuda_matmul_multi(struct backend *b, int count, const struct mat *w, const float *x,
                       float *const *y, int n) {
    if (count < 1 || count > 3)
        return false;
    q8_job job = {};
    job.n_mats = count, job.glu = -1;
    int64_t rows = 0;
    for (int m = 0; m < count; m++) {
        if (!same_kind(&w[0], &w[m]) || w[m].n_rows <= 0)
            return false;
        job.w[m] = (const uint8_t *)w[m].data, job.y[m] = y[m];
        job.row_end[m] = rows += w[m].n_rows;
    }
    job.items = rows;
    for (int m = 0; m < count; m++)
        q8_written(b, y[m]);
    return q8_run(b, job, &w[0], x, n);
}

bool cuda_matmul_glu(struct backend *b, enum glu_kind kind, const struct mat *gate,
                     const struct mat *up, const float *x, float *y, int n) {
    if (!same_kind(gate, up) || gate->n_rows != up->n_rows || gate->n_rows <= 0)
        return false;
    q8_job job = {};
    job.w[0] = (const uint8_t *)gate->data, job.w[1] = (const uint8_t *)up->data, job.y[0] = y;
    job.row_end[0] = job.items = gate->n_rows;
    job.n_mats = 2, job.glu = (int)kind;
    q8_written(b, y);
    cuda_state *s = cuda_of(b);
    /* the output quantized for the down projection: 32 rows per block, a whole number of
     * blocks (a big matrix gets 32 rows per block anyway) */
    const bool quantize = gate->n_rows % 32 == 0 && cuda_q8_fits(b, n, gate->n_rows);
    if (quantize)
        job.xq_out = (cvd_xq *)s->xq[1 - s->xq_cur];
    if (!q8_run(b, job, gate, x, n))
        return false;
    if (quantize)
        s->xq_cur = 1 - s->xq_cur, s->xq_src = y, s->xq_n = n, s->xq_cols = gate->n_rows;
    return true;
}

/* Over 48 KB of dynamic shared memory must be allowed per kernel before any launch (and so
 * before a graph capture records one). */
template <enum ox_dtype T> static cudaError_t q8_allow_smem() {
    cudaError_t e = cudaFuncSetAttribute(gemv_q8_kernel<T, 1>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, q_smem_limit);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(gemv_q8_kernel<T, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 q_smem_limit);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(gemv_q8_kernel<T, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 q_smem_limit);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(gemv_q8_kernel<T, 8>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 q_smem_limit);
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
    CVD_TYPES(CQ_ATTR_)
#undef CQ_ATTR_
    return e;
}
