/* cuda_matmul.cu: weight matmul (fused dequantize-and-dot GEMV for small batches, dequantize +
 * cuBLAS SGEMM for large ones) and get_rows, for every type of cuda_dequant.cuh. */
#include <cuda_fp16.h>
#include <cuda_pipeline.h>
#include <stdint.h>

#include "backend/cuda/cuda_dequant.cuh"
#include "backend/cuda/cuda_ops.cuh"

/* ---- tables ---- */

cudaError_t cuda_dequant_init(void) {
    static_assert(sizeof cdq_iq4nl == sizeof iq4nl_values, "iq4nl table");
    static_assert(sizeof cdq_e2m1 == sizeof fp4_e2m1_values, "e2m1 table");
    cudaError_t e = cudaMemcpyToSymbol(cdq_iq4nl, iq4nl_values, sizeof iq4nl_values);
    if (e == cudaSuccess)
        e = cudaMemcpyToSymbol(cdq_e2m1, fp4_e2m1_values, sizeof fp4_e2m1_values);
    if (e == cudaSuccess)
        e = cudaMemcpyToSymbol(cdq_iq3s_grid, iq3s_grid, sizeof iq3s_grid);
    return e;
}

/* ---- GEMV: n <= GV_MAX_N activation rows ---- */

/* One warp per weight row, GV_WARPS rows per block. The columns go by tiles of 32 groups of 32:
 * lane l dequantizes group l of the tile into registers and dots it with the NT activation rows.
 * Per tile the block stages the activations in shared memory, [NT][32 groups][33] (the pad
 * makes lane l's reads of its group hit bank (l + j) % 32: no conflicts), and each warp copies
 * its row's tile of quantized blocks to shared memory with the widest loads the address allows
 * (16 bytes for most rows), so the lanes' per-block reads of odd-sized blocks cost no extra
 * global transactions. The plain types (f32, f16, bf16) skip that copy: a lane's 32 elements are
 * 64 or 128 contiguous bytes, read straight from global memory with vector loads. */
constexpr int GV_WARPS = 8;
constexpr int GV_THREADS = 32 * GV_WARPS;
constexpr int GV_MAX_N = 8;
constexpr int GV_XPAD = 33;

/* Bytes of quantized blocks per tile of 1024 columns; 16 for the plain types (not staged). */
template <enum ox_dtype T> __host__ __device__ constexpr int gv_tile_bytes() {
    if constexpr (dq<T>::QK == 1)
        return 16;
    else
        return (1024 / dq<T>::QK * dq<T>::BS + 15) / 16 * 16;
}

/* The warp copies len bytes from global src to shared dst (16-byte aligned). */
__device__ __forceinline__ void gv_copy(uint8_t *dst, const uint8_t *src, int len, int lane) {
    const uintptr_t a = (uintptr_t)src | (uintptr_t)len;
    if (a % 16 == 0) {
        for (int i = lane; i < len / 16; i += 32)
            ((uint4 *)dst)[i] = __ldg((const uint4 *)src + i);
    } else if (a % 8 == 0) {
        for (int i = lane; i < len / 8; i += 32)
            ((uint2 *)dst)[i] = __ldg((const uint2 *)src + i);
    } else if (a % 4 == 0) {
        for (int i = lane; i < len / 4; i += 32)
            ((uint32_t *)dst)[i] = __ldg((const uint32_t *)src + i);
    } else {
        for (int i = lane; i < len; i += 32)
            dst[i] = __ldg(src + i);
    }
}

/* Stage columns [32 g0, 32 (g0 + tg)) of the NT activation rows (zeros past n) into xs, a tile
 * of TG groups, 32 groups per pass of the block. */
template <int NT, int TG>
__device__ __forceinline__ void gv_stage_x(float *xs, const float *x, int64_t n_cols, int n,
                                           int64_t g0, int tg) {
    const bool vec = (((uintptr_t)x | (uintptr_t)(n_cols * 4)) & 15) == 0;
#pragma unroll
    for (int pass = 0; pass < TG / 32; pass++) {
        const int gg = pass * 32 + threadIdx.x / 8, q = threadIdx.x % 8; /* group, its float4 */
#pragma unroll
        for (int t = 0; t < NT; t++) {
            float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
            if (t < n && gg < tg) {
                const float *p = x + t * n_cols + (g0 + gg) * 32 + 4 * q;
                if (vec)
                    v = __ldg((const float4 *)p);
                else
                    v = make_float4(__ldg(p), __ldg(p + 1), __ldg(p + 2), __ldg(p + 3));
            }
            float *d = xs + (t * TG + gg) * GV_XPAD + 4 * q;
            d[0] = v.x;
            d[1] = v.y;
            d[2] = v.z;
            d[3] = v.w;
        }
    }
}

/* Groups per tile: one token gets four per lane (two where the staged blocks would not fit the
 * 48 KB of static shared memory), so each warp has more weight bytes on their way per barrier
 * (decode is bound by bytes in flight); batches keep one per lane, their activation tiles being
 * NT times larger. */
template <enum ox_dtype T, int NT> constexpr int gv_groups() {
    if constexpr (NT > 1)
        return 32;
    else if constexpr (dq<T>::QK > 1 &&
                       gv_tile_bytes<T>() * 4 * GV_WARPS + 128 * GV_XPAD * 4 > 48 * 1024)
        return 64;
    else
        return 128;
}

/* y[t][row] = sum_c W[row][c] x[t][c] for t < n <= NT. A: the alignment of the weight rows
 * (plain types only; staged tiles are 16-byte aligned). */
template <enum ox_dtype T, int NT, int A>
__global__ void __launch_bounds__(GV_THREADS, 2)
    gemv_kernel(const uint8_t *__restrict__ w, size_t row_bytes, int64_t n_rows, int64_t n_cols,
                const float *__restrict__ x, float *__restrict__ y, int n) {
    constexpr bool STAGE = dq<T>::QK > 1;
    constexpr int TG = gv_groups<T, NT>(), TB = gv_tile_bytes<T>() * (STAGE ? TG / 32 : 1);
    __shared__ float xs[NT * TG * GV_XPAD];
    __shared__ __align__(16) uint8_t ws[GV_WARPS][TB];

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t row = (int64_t)blockIdx.x * GV_WARPS + warp;
    const bool live = row < n_rows;
    const uint8_t *wr = w + (live ? row : 0) * row_bytes;
    const int64_t n_groups = n_cols / 32;

    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++)
        acc[t] = 0.f;

    for (int64_t g0 = 0; g0 < n_groups; g0 += TG) {
        const int tg = (int)min((int64_t)TG, n_groups - g0);
        __syncthreads(); /* the previous tile is consumed */
        gv_stage_x<NT, TG>(xs, x, n_cols, n, g0, tg);
        if constexpr (STAGE) {
            constexpr int GPB = dq<T>::QK / 32; /* groups per block; divides g0 and tg */
            if (live)
                gv_copy(ws[warp], wr + g0 / GPB * dq<T>::BS, tg / GPB * dq<T>::BS, lane);
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TG / 32; k++) {
            const int g = lane + 32 * k;
            if (!live || g >= tg)
                break;
            float v[32];
            if constexpr (STAGE)
                dq<T>::template group<16>(ws[warp], g, v);
            else
                dq<T>::template group<A>(wr, g0 + g, v);
#pragma unroll
            for (int t = 0; t < NT; t++) {
                const float *xr = xs + (t * TG + g) * GV_XPAD;
                float s = 0.f;
#pragma unroll
                for (int j = 0; j < 32; j++)
                    s += v[j] * xr[j];
                acc[t] += s;
            }
        }
    }
    if constexpr (dq<T>::QK == 1) { /* plain types: the n_cols % 32 last columns */
        const int64_t i = n_groups * 32 + lane;
        if (live && i < n_cols) {
            const float v = dq<T>::elem(wr, i);
#pragma unroll
            for (int t = 0; t < NT; t++)
                if (t < n)
                    acc[t] += v * __ldg(x + t * n_cols + i);
        }
    }
#pragma unroll
    for (int t = 0; t < NT; t++) {
#pragma unroll
        for (int o = 16; o > 0; o /= 2)
            acc[t] += __shfl_xor_sync(0xffffffffu, acc[t], o);
        if (live && lane == t && t < n)
            y[t * n_rows + row] = acc[t];
    }
}

template <enum ox_dtype T, int NT>
static void gemv_launch(struct backend *b, const struct mat *w, const float *x, float *y, int n) {
    const unsigned blocks = cuda_blocks((size_t)w->n_rows, GV_WARPS);
    const uint8_t *data = (const uint8_t *)w->data;
    const bool aligned = (((uintptr_t)data | (uintptr_t)w->row_bytes) & 15) == 0;
    cudaStream_t s = cuda_of(b)->stream;
    /* staged tiles are 16-byte aligned whatever the rows are: one variant for quantized types */
    if (dq<T>::QK > 1 || aligned)
        gemv_kernel<T, NT, 16>
            <<<blocks, GV_THREADS, 0, s>>>(data, w->row_bytes, w->n_rows, w->n_cols, x, y, n);
    else if constexpr (dq<T>::QK == 1)
        gemv_kernel<T, NT, 1>
            <<<blocks, GV_THREADS, 0, s>>>(data, w->row_bytes, w->n_rows, w->n_cols, x, y, n);
    CUDA_LAUNCHED(b, "cuda_matmul: gemv kernel");
}

/* ---- GEMV for one token (decode), quantized types: warps stream their rows independently ---- */

/* The block stages x once ([n_cols / 32][33] floats, dynamic shared memory), then each warp
 * walks its rows (rpb per block) tile by tile with cp.async double buffering: the next
 * tile's blocks are on their way while the lanes dequantize the current one, and warps sync
 * only among their own lanes. Needs 16-byte aligned rows and tiles (checked by the caller). */
constexpr int DEC_SMEM = 200000; /* the most dynamic shared memory a launch may ask for, */
static int dec_smem_limit;       /* or less: what this GPU allows (cuda_matmul_init) */

/* Groups per tile: 128 (4 per lane) where two tiles per warp stay small, else 64. */
template <enum ox_dtype T> constexpr int dec_groups() {
    return gv_tile_bytes<T>() <= 640 ? 128 : 64;
}
template <enum ox_dtype T> constexpr int dec_tile_bytes() {
    return dec_groups<T>() * 32 / dq<T>::QK * dq<T>::BS;
}

template <enum ox_dtype T>
__global__ void __launch_bounds__(GV_THREADS, 2)
    gemv_dec_kernel(const uint8_t *__restrict__ w, size_t row_bytes, int64_t n_rows, int n_cols,
                    const float *__restrict__ x, float *__restrict__ y, int rpb) {
    constexpr int TG = dec_groups<T>(), TB = dec_tile_bytes<T>(), GPB = dq<T>::QK / 32;
    extern __shared__ __align__(16) uint8_t smem[];
    const int n_groups = n_cols / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float *xs = (float *)smem;
    uint8_t *ws = smem + ((size_t)n_groups * GV_XPAD * 4 + 15) / 16 * 16 + warp * 2 * TB;
    for (int i = threadIdx.x; i < n_cols; i += GV_THREADS)
        xs[(i / 32) * GV_XPAD + i % 32] = __ldg(x + i);
    __syncthreads();
    const int64_t r_end = min(n_rows, (int64_t)(blockIdx.x + 1) * rpb);
    for (int64_t row = (int64_t)blockIdx.x * rpb + warp; row < r_end; row += GV_WARPS) {
        const uint8_t *wr = w + row * row_bytes;
        const int n_tiles = (n_groups + TG - 1) / TG;
        auto fetch = [&](int t) { /* tile t into buffer t & 1, 16 bytes per lane per step */
                                  const int len = min(TG, n_groups - t * TG) / GPB * dq<T>::BS;
                                  const uint8_t *src = wr + (size_t)t * (TG / GPB) * dq<T>::BS;
                                  uint8_t *dst = ws + (t & 1) * TB;
                                  for (int i = lane * 16; i < len; i += 32 * 16)
                                      __pipeline_memcpy_async(dst + i, src + i, 16);
                                  __pipeline_commit();
        };
        float acc = 0.f;
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
                float v[32];
                dq<T>::template group<16>(ws + (t & 1) * TB, g, v);
                const float *xr = xs + (t * TG + g) * GV_XPAD;
                float s = 0.f;
#pragma unroll
                for (int j = 0; j < 32; j++)
                    s += v[j] * xr[j];
                acc += s;
            }
            __syncwarp(); /* the buffer is refilled two tiles later */
        }
#pragma unroll
        for (int o = 16; o > 0; o /= 2)
            acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (lane == 0)
            y[row] = acc;
    }
}

/* False when the decode kernel cannot take this matrix (the caller uses gemv_kernel). */
template <enum ox_dtype T>
static bool gemv_dec_launch(struct backend *b, const struct mat *w, const float *x, float *y) {
    if constexpr (dq<T>::QK == 1) {
        return false;
    } else {
        constexpr int TB = dec_tile_bytes<T>();
        const int64_t n_groups = w->n_cols / 32;
        const size_t smem = ((size_t)n_groups * GV_XPAD * 4 + 15) / 16 * 16 + GV_WARPS * 2 * TB;
        const size_t last = (size_t)(n_groups % dec_groups<T>()) / (dq<T>::QK / 32) * dq<T>::BS;
        if (TB % 16 || last % 16 || (((uintptr_t)w->data | w->row_bytes) & 15) ||
            smem > (size_t)dec_smem_limit || w->n_cols > INT32_MAX)
            return false;
        /* one row per warp while that leaves fewer than two blocks per multiprocessor; up to
         * four for big matrices, so x is staged less often */
        const int64_t per_warp = w->n_rows / ((int64_t)GV_WARPS * 2 * cuda_of(b)->n_sm);
        const int rpb = GV_WARPS * (int)(per_warp < 1 ? 1 : per_warp > 4 ? 4 : per_warp);
        gemv_dec_kernel<T><<<cuda_blocks((size_t)w->n_rows, (unsigned)rpb), GV_THREADS, smem,
                             cuda_of(b)->stream>>>((const uint8_t *)w->data, w->row_bytes,
                                                   w->n_rows, (int)w->n_cols, x, y, rpb);
        CUDA_LAUNCHED(b, "cuda_matmul: decode gemv kernel");
        return true;
    }
}

/* ---- rows to f32 (get_rows) or f16 (the GEMM path's dequantization into scratch) ---- */

__device__ __forceinline__ void put(float *d, float v) {
    *d = v;
}
__device__ __forceinline__ void put(__half *d, float v) {
    *d = __float2half_rn(v);
}

/* 32 values to d: 16-byte stores when aligned. */
__device__ __forceinline__ void put32(float *d, const float *v, bool aligned) {
    if (aligned) {
#pragma unroll
        for (int j = 0; j < 32; j += 4)
            *(float4 *)(d + j) = make_float4(v[j], v[j + 1], v[j + 2], v[j + 3]);
    } else {
#pragma unroll
        for (int j = 0; j < 32; j++)
            d[j] = v[j];
    }
}
__device__ __forceinline__ void put32(__half *d, const float *v, bool aligned) {
    if (aligned) {
#pragma unroll
        for (int j = 0; j < 32; j += 8) {
            __half2 h[4] = {
                __floats2half2_rn(v[j], v[j + 1]), __floats2half2_rn(v[j + 2], v[j + 3]),
                __floats2half2_rn(v[j + 4], v[j + 5]), __floats2half2_rn(v[j + 6], v[j + 7])};
            *(uint4 *)(d + j) = *(const uint4 *)h;
        }
    } else {
#pragma unroll
        for (int j = 0; j < 32; j++)
            d[j] = __float2half_rn(v[j]);
    }
}

/* One thread per group of 32 of an output row (plain types: one more per row for the tail):
 * y[t] = row (ids ? ids[t] : r0 + t) of w, t < n_out. An id outside the matrix gives zeros. */
template <enum ox_dtype T, int A, typename OUT>
__global__ void rows_kernel(const uint8_t *__restrict__ w, size_t row_bytes, int64_t n_rows,
                            int64_t n_cols, const int32_t *__restrict__ ids, int64_t r0,
                            OUT *__restrict__ y, int64_t n_out) {
    const int64_t n_groups = n_cols / 32;
    const int64_t slots = n_groups + (dq<T>::QK == 1 && n_cols % 32 ? 1 : 0);
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= slots * n_out)
        return;
    const int64_t t = i / slots, g = i % slots;
    const int64_t r = ids ? (int64_t)__ldg(ids + t) : r0 + t;
    OUT *yr = y + t * n_cols;
    const bool ok = r >= 0 && r < n_rows;
    const uint8_t *wr = w + (ok ? r : 0) * row_bytes;
    if (g == n_groups) { /* plain types: the tail */
        if constexpr (dq<T>::QK == 1) {
            for (int64_t c = 32 * n_groups; c < n_cols; c++)
                put(yr + c, ok ? dq<T>::elem(wr, c) : 0.f);
        }
        return;
    }
    float v[32];
    if (ok) {
        dq<T>::template group<A>(wr, g, v);
    } else {
#pragma unroll
        for (int j = 0; j < 32; j++)
            v[j] = 0.f;
    }
    put32(yr + 32 * g, v, (((uintptr_t)y | (uintptr_t)(n_cols * sizeof(OUT))) & 15) == 0);
}

template <enum ox_dtype T, typename OUT>
static void rows_launch(struct backend *b, const struct mat *w, const int32_t *ids, int64_t r0,
                        OUT *y, int64_t n_out) {
    const int64_t slots = w->n_cols / 32 + (dq<T>::QK == 1 && w->n_cols % 32 ? 1 : 0);
    const unsigned blocks = cuda_blocks((size_t)(slots * n_out), 128);
    const uint8_t *data = (const uint8_t *)w->data;
    const bool aligned = (((uintptr_t)data | (uintptr_t)w->row_bytes) & 15) == 0;
    cudaStream_t s = cuda_of(b)->stream;
    if (blocks == 0)
        return;
    if (aligned)
        rows_kernel<T, 16, OUT>
            <<<blocks, 128, 0, s>>>(data, w->row_bytes, w->n_rows, w->n_cols, ids, r0, y, n_out);
    else
        rows_kernel<T, 1, OUT>
            <<<blocks, 128, 0, s>>>(data, w->row_bytes, w->n_rows, w->n_cols, ids, r0, y, n_out);
    CUDA_LAUNCHED(b, "cuda_matmul: rows kernel");
}

/* ---- GEMM: y^T = W x^T with cuBLAS, on the tensor cores in f16 (f32 sums) ---- */

/* Column-major view: W's rows are columns of a [n_cols x rows] matrix (lda = n_cols), x^T is
 * [n_cols x n], y^T is [n_rows x n] (ldc = n_rows); so C = op_T(A) B. f32 weights keep SGEMM;
 * the rest multiply f16 (or bf16) operands with f32 accumulation, as llama.cpp's cuBLAS path. */
static void gemm_chunk(struct backend *b, const void *wt, cudaDataType wtype, int64_t lda,
                       int64_t rows, int64_t n_cols, const void *x, cudaDataType xtype, float *y,
                       int64_t n_rows, int n, bool accumulate) {
    const float one = 1.f, beta = accumulate ? 1.f : 0.f;
    cublasStatus_t st =
        cublasGemmEx(cuda_of(b)->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)rows, n, (int)n_cols, &one,
                     wt, wtype, (int)lda, x, xtype, (int)n_cols, &beta, y, CUDA_R_32F, (int)n_rows,
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    cuda_note_blas(b, st, "cuda_matmul: cublasGemmEx");
}

__global__ static void to_half_kernel(const float *x, __half *y, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = __float2half_rn(x[i]);
}

__global__ static void to_bf16_kernel(const float *x, __nv_bfloat16 *y, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = __float2bfloat16_rn(x[i]);
}

/* y = W x, or y += W x, through cuBLAS. */
template <enum ox_dtype T>
static void gemm(struct backend *b, const struct mat *w, const float *x, float *y, int n,
                 bool accumulate) {
    cuda_state *cs = cuda_of(b);
    const size_t nx = (size_t)n * (size_t)w->n_cols;
    const unsigned grid = cuda_blocks(nx, 256) < 4096 ? cuda_blocks(nx, 256) : 4096;
    const bool direct = (w->row_bytes | (uintptr_t)w->data) % 16 == 0;
    if (T == OX_DTYPE_F32 && direct) {
        gemm_chunk(b, w->data, CUDA_R_32F, (int64_t)(w->row_bytes / 4), w->n_rows, w->n_cols, x,
                   CUDA_R_32F, y, w->n_rows, n, accumulate);
        return;
    }
    if (nx > cs->xh_halves) {
        cuda_note(b, cudaErrorInvalidValue, "cuda_matmul: batch wider than the f16 scratch");
        return;
    }
    const bool bf16 = T == OX_DTYPE_BF16 && direct; /* bf16 weights as they are */
    if (cs->xh_src != x || cs->xh_count != nx || cs->xh_bf16 != bf16) {
        if (bf16)
            to_bf16_kernel<<<grid, 256, 0, cs->stream>>>(x, (__nv_bfloat16 *)cs->xh, nx);
        else
            to_half_kernel<<<grid, 256, 0, cs->stream>>>(x, (__half *)cs->xh, nx);
        CUDA_LAUNCHED(b, "cuda_matmul: x to f16 / bf16");
        cs->xh_src = x, cs->xh_count = nx, cs->xh_bf16 = bf16;
    }
    if (bf16) {
        gemm_chunk(b, w->data, CUDA_R_16BF, (int64_t)(w->row_bytes / 2), w->n_rows, w->n_cols,
                   cs->xh, CUDA_R_16BF, y, w->n_rows, n, accumulate);
        return;
    }
    if (T == OX_DTYPE_F16 && direct) {
        gemm_chunk(b, w->data, CUDA_R_16F, (int64_t)(w->row_bytes / 2), w->n_rows, w->n_cols,
                   cs->xh, CUDA_R_16F, y, w->n_rows, n, accumulate);
        return;
    }
    /* the fewest chunks the scratch holds, of equal whole tiles of rows: chunks of 1170 rows
     * (32 MiB of 14336-wide ones) made the 8B's batches of 160 sequences 11% slower than 1024,
     * and 14336 rows in 4096, 4096, 4096 and 2048 3% slower than in four of 3584 */
    const int64_t most = (int64_t)(cs->scratch_floats * 2 / (size_t)w->n_cols);
    int64_t chunk = most;
    if (most > 256) {
        const int64_t parts = (w->n_rows + most - 1) / most;
        chunk = ((w->n_rows + parts - 1) / parts + 255) / 256 * 256;
        chunk = chunk <= most ? chunk : most / 256 * 256;
    }
    if (chunk <= 0) {
        cuda_note(b, cudaErrorInvalidValue, "cuda_matmul: rows wider than the scratch buffer");
        return;
    }
    /* stream order keeps each chunk's dequantization after the previous chunk's GEMM */
    __half *wh = (__half *)cs->scratch;
    for (int64_t r0 = 0; r0 < w->n_rows; r0 += chunk) {
        const int64_t rows = w->n_rows - r0 < chunk ? w->n_rows - r0 : chunk;
        rows_launch<T, __half>(b, w, nullptr, r0, wh, rows);
        gemm_chunk(b, wh, CUDA_R_16F, w->n_cols, rows, w->n_cols, cs->xh, CUDA_R_16F, y + r0,
                   w->n_rows, n, accumulate);
    }
}

template <enum ox_dtype T>
static void matmul_t(struct backend *b, const struct mat *w, const float *x, float *y, int n) {
    if (n > GV_MAX_N)
        gemm<T>(b, w, x, y, n, false);
    else if (n > 4)
        gemv_launch<T, 8>(b, w, x, y, n);
    else if (n > 2)
        gemv_launch<T, 4>(b, w, x, y, n);
    else if (n == 2)
        gemv_launch<T, 2>(b, w, x, y, n);
    else if (!gemv_dec_launch<T>(b, w, x, y))
        gemv_launch<T, 1>(b, w, x, y, n);
}

void cuda_matmul(struct backend *b, const struct mat *w, const float *x, float *y, int n) {
    if (cuda_rows_apart(b, w, n)) {
        for (int t = 0; t < n; t++)
            cuda_matmul(b, w, x + (size_t)t * w->n_cols, y + (size_t)t * w->n_rows, 1);
        return;
    }
    if (n <= 0 || w->n_rows <= 0 || cuda_gemv_q8(b, w, x, y, n, false) ||
        cuda_mmq(b, w, x, y, n, false))
        return;
    cuda_q8_written(b, y, n, w->n_rows);
    switch (w->type) {
#define CMM_CASE_(name)                                                                            \
    case OX_DTYPE_##name: matmul_t<OX_DTYPE_##name>(b, w, x, y, n); return;
        CDQ_TYPES(CMM_CASE_)
#undef CMM_CASE_
    default: cuda_note(b, cudaErrorNotSupported, "cuda_matmul: weight type"); return;
    }
}

bool cuda_gemm_add(struct backend *b, const struct mat *w, const float *x, float *y, int n) {
    if (n <= GV_MAX_N || w->n_rows <= 0)
        return false;
    cuda_q8_written(b, y, n, w->n_rows);
    switch (w->type) {
#define CMM_CASE_(name)                                                                            \
    case OX_DTYPE_##name: gemm<OX_DTYPE_##name>(b, w, x, y, n, true); return true;
        CDQ_TYPES(CMM_CASE_)
#undef CMM_CASE_
    default: return false;
    }
}

void cuda_get_rows(struct backend *b, const struct mat *w, const int32_t *ids, float *y, int n) {
    if (n <= 0)
        return;
    switch (w->type) {
#define CMM_CASE_(name)                                                                            \
    case OX_DTYPE_##name: rows_launch<OX_DTYPE_##name, float>(b, w, ids, 0, y, n); return;
        CDQ_TYPES(CMM_CASE_)
#undef CMM_CASE_
    default: cuda_note(b, cudaErrorNotSupported, "cuda_get_rows: weight type"); return;
    }
}

/* Over 48 KB of dynamic shared memory must be allowed per kernel, before any launch (and so
 * before a graph capture records one). */
template <enum ox_dtype T> static cudaError_t dec_allow_smem() {
    if constexpr (dq<T>::QK > 1)
        return cudaFuncSetAttribute(gemv_dec_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    dec_smem_limit);
    else
        return cudaSuccess;
}

cudaError_t cuda_matmul_init(void) {
    int device = 0, optin = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e == cudaSuccess) /* Hopper allows 227 KB; Ampere 163 KB, Ada 99 KB */
        e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    dec_smem_limit = optin < DEC_SMEM ? optin : DEC_SMEM;
    if (e == cudaSuccess)
        e = cuda_dequant_init();
#define CMM_ATTR_(name)                                                                            \
    if (e == cudaSuccess)                                                                          \
        e = dec_allow_smem<OX_DTYPE_##name>();
    CDQ_TYPES(CMM_ATTR_)
#undef CMM_ATTR_
    return e;
}

/* The types the dequantizers (matmul's GEMM path) and the row lookups take: both ops alike. */
bool cuda_supports(enum backend_op op, enum ox_dtype type) {
    (void)op;
    switch (type) {
#define CMM_CASE_(name) case OX_DTYPE_##name:
        CDQ_TYPES(CMM_CASE_)
#undef CMM_CASE_
        return true;
    default: return false;
    }
}
