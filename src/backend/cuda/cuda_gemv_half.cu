/* cuda_gemv_half.cu: one token through f16 / bf16 weights, each warp streaming a row straight
 * from global memory, with the decode fusions that keep it streaming: q, k and v in one
 * launch, gate and up with their GLU, y += W x. */
#include <cuda_fp16.h>

#include "backend/cuda/cuda_ops.cuh"

/* A warp per row (or gate and up row pair), four rows per block. No shared memory and no
 * barriers: each lane takes 16-byte pieces lane, lane + 32, ... eight at a time, so a warp
 * keeps 4 KB of its row on the way with nothing to wait for in between; x comes through the L1
 * cache. Kernels per layer are what a decode step of a small model pays for, so fusing them
 * matters as much as streaming: H200, 1B F16 tg128 820 t/s through the integer GEMV's
 * float-x kernel (staged tiles, the norm inside), 860 here with a launch per matrix, 969 with
 * q, k, v and gate, up, GLU fused. The RMSNorm before them comes in only with its weight folded
 * into the matrices (weights_gpu.c): each warp then sums x's squares beside its dot product,
 * reading nothing more (tg128 1B F16 1065 -> 1150 t/s, 8B F16 234 -> 245 against a norm
 * kernel); reading the norm's weights beside x instead doubled the L1 traffic per weight byte
 * (945 and 198 t/s, against 969 and 217 with the kernel). */
constexpr int HV_WARPS = 4;
constexpr int HV_THREADS = 32 * HV_WARPS;

/* What one launch computes: up to three matrices of one type and width sharing x, their rows
 * taken in turn (q, k and v); or, with glu >= 0, a gate and an up matrix whose row pairs make
 * y[0] = act(gate x) * (up x). */
struct half_job {
    const uint8_t *w[3];
    float *y[3];
    int64_t row_end[3]; /* matrix m owns items [row_end[m - 1], row_end[m]) */
    int64_t items;      /* rows, or row pairs (glu) */
    size_t row_bytes;
    int n_cols, glu, accumulate;
    const float *x;
    bool norm;      /* x is the norm's input: scale the sums by 1 / rms(x) (its weight is */
    float norm_eps; /* folded into the matrices: cuda_fold.cu) */
};

/* Eight weights (16 bytes) times x[0..8) (16-byte aligned); with SS, x's squares added to ss. */
template <enum ox_dtype T, bool SS>
__device__ __forceinline__ float hv_dot8(uint4 u, const float *x, float &ss) {
    const float4 x0 = __ldg((const float4 *)x), x1 = __ldg((const float4 *)x + 1);
    float2 f[4];
    const uint32_t *h = (const uint32_t *)&u;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        if constexpr (T == OX_DTYPE_F16) {
            f[k] = __half22float2(*(const __half2 *)&h[k]);
        } else { /* bf16: the high half of a float */
            f[k] = make_float2(__uint_as_float(h[k] << 16), __uint_as_float(h[k] & 0xffff0000u));
        }
    }
    if constexpr (SS)
        ss += x0.x * x0.x + x0.y * x0.y + x0.z * x0.z + x0.w * x0.w + x1.x * x1.x + x1.y * x1.y +
              x1.z * x1.z + x1.w * x1.w;
    return f[0].x * x0.x + f[0].y * x0.y + f[1].x * x0.z + f[1].y * x0.w + f[2].x * x1.x +
           f[2].y * x1.y + f[3].x * x1.z + f[3].y * x1.w;
}

/* The lane's share of row wr times x (pieces of 8 columns), and with SS of x's squares. */
template <enum ox_dtype T, bool SS>
__device__ __forceinline__ float hv_row(const uint4 *wr, const float *x, int pieces, int lane,
                                        float &ss) {
    float acc = 0.f;
    int i = lane;
    for (; i + 224 < pieces; i += 256) {
        uint4 u[8];
#pragma unroll
        for (int k = 0; k < 8; k++)
            u[k] = __ldg(wr + i + 32 * k);
#pragma unroll
        for (int k = 0; k < 8; k++)
            acc += hv_dot8<T, SS>(u[k], x + 8 * (i + 32 * k), ss);
    }
    for (; i + 96 < pieces; i += 128) {
        const uint4 u0 = __ldg(wr + i), u1 = __ldg(wr + i + 32), u2 = __ldg(wr + i + 64),
                    u3 = __ldg(wr + i + 96);
        acc += hv_dot8<T, SS>(u0, x + 8 * i, ss) + hv_dot8<T, SS>(u1, x + 8 * (i + 32), ss) +
               hv_dot8<T, SS>(u2, x + 8 * (i + 64), ss) + hv_dot8<T, SS>(u3, x + 8 * (i + 96), ss);
    }
    for (; i < pieces; i += 32)
        acc += hv_dot8<T, SS>(__ldg(wr + i), x + 8 * i, ss);
    return acc;
}

/* A minimum of one block per multiprocessor leaves ptxas free to spend 118 registers, which it
 * uses to keep the next pieces' loads on the way while the lanes multiply (H200 tg128: 1B F16
 * 966 -> 1071 t/s, 8B F16 221 -> 237 against no minimum, 56 registers); capped at 48 it
 * spilled (902 / 201), and 16 pieces a step took 214 registers (828 / 219). Four warps a block
 * gave 1071 / 237, eight 1057 / 234, two 1072 / 234. */
template <enum ox_dtype T, bool GLU, bool NORM>
__global__ void __launch_bounds__(HV_THREADS, 1) gemv_half_kernel(const half_job job) {
    cuda_wait_previous();
    const int64_t it = (int64_t)blockIdx.x * HV_WARPS + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (it >= job.items)
        return;
    /* the item's matrix and row: selects, not an indexed read of the parameter block */
    int64_t row = it;
    const uint8_t *base = job.w[0];
    float *y = job.y[0];
    if (!GLU && row >= job.row_end[0]) {
        const bool third = row >= job.row_end[1];
        base = third ? job.w[2] : job.w[1], y = third ? job.y[2] : job.y[1];
        row -= third ? job.row_end[1] : job.row_end[0];
    }
    const int pieces = job.n_cols / 8;
    float ss = 0.f, unused = 0.f;
    float acc =
        hv_row<T, NORM>((const uint4 *)(base + row * job.row_bytes), job.x, pieces, lane, ss);
    float up = 0.f;
    if constexpr (GLU)
        up = hv_row<T, false>((const uint4 *)(job.w[1] + row * job.row_bytes), job.x, pieces, lane,
                              unused);
    cuda_let_next_start(); /* its weights' requests may follow this row's */
#pragma unroll
    for (int o = 16; o > 0; o /= 2) {
        acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if constexpr (GLU)
            up += __shfl_xor_sync(0xffffffffu, up, o);
        if constexpr (NORM)
            ss += __shfl_xor_sync(0xffffffffu, ss, o);
    }
    if constexpr (NORM) { /* W (g x / rms(x)) = (W g) x / rms(x), W g being the folded matrix */
        const float scale = rsqrtf(ss / (float)job.n_cols + job.norm_eps);
        acc *= scale, up *= scale;
    }
    if (lane == 0) {
        const float v = GLU ? cuda_glu_act(job.glu, acc) * up : acc;
        y[row] = job.accumulate ? y[row] + v : v;
    }
}

bool cuda_half_takes(const struct mat *w) {
    return (w->type == OX_DTYPE_F16 || w->type == OX_DTYPE_BF16) && w->n_cols % 8 == 0 &&
           w->n_cols <= INT32_MAX && (((uintptr_t)w->data | w->row_bytes) & 15) == 0;
}

template <enum ox_dtype T, bool GLU> static void hv_launch(struct backend *b, const half_job &job) {
    cuda_state *s = cuda_of(b);
    auto kernel = job.norm ? gemv_half_kernel<T, GLU, true> : gemv_half_kernel<T, GLU, false>;
    cuda_note(b,
              cuda_launch_early(s->pdl, kernel, dim3(cuda_blocks((size_t)job.items, HV_WARPS)),
                                dim3(HV_THREADS), 0, s->stream, job),
              "cuda_gemv_half: kernel");
}

/* Completes the job from w (the first matrix) and the norm x goes through (NULL: none), and
 * launches it; false where the kernel does not take the matrices, x or the norm (only one whose
 * weight is folded into the matrices: the kernel reads nothing but x). */
static bool hv_run(struct backend *b, half_job &job, const struct mat *w, const float *x,
                   const struct norm_in *norm) {
    if (!cuda_half_takes(w) || ((uintptr_t)x & 15) || job.items <= 0 || (norm && norm->w))
        return false;
    job.norm = norm != nullptr, job.norm_eps = norm ? norm->eps : 0.f;
    job.row_bytes = w->row_bytes, job.n_cols = (int)w->n_cols, job.x = x;
    const bool glu = job.glu >= 0;
    if (w->type == OX_DTYPE_F16)
        glu ? hv_launch<OX_DTYPE_F16, true>(b, job) : hv_launch<OX_DTYPE_F16, false>(b, job);
    else
        glu ? hv_launch<OX_DTYPE_BF16, true>(b, job) : hv_launch<OX_DTYPE_BF16, false>(b, job);
    return true;
}

bool cuda_half_matmul(struct backend *b, const struct mat *w, const float *x, float *y,
                      bool accumulate) {
    half_job job = {};
    job.w[0] = (const uint8_t *)w->data, job.y[0] = y;
    job.row_end[0] = job.row_end[1] = job.row_end[2] = job.items = w->n_rows;
    job.glu = -1, job.accumulate = accumulate;
    if (!hv_run(b, job, w, x, nullptr))
        return false;
    cuda_q8_written(b, y, 1, w->n_rows);
    return true;
}

bool cuda_half_multi(struct backend *b, int count, const struct mat *w, const float *x,
                     const struct norm_in *norm, float *const *y) {
    half_job job = {};
    int64_t rows = 0;
    job.glu = -1;
    for (int m = 0; m < 3; m++) {
        if (m < count) {
            if ((uintptr_t)w[m].data & 15) /* hv_run checks the first */
                return false;
            job.w[m] = (const uint8_t *)w[m].data, job.y[m] = y[m];
            rows += w[m].n_rows;
        }
        job.row_end[m] = rows;
    }
    job.items = rows;
    if (!hv_run(b, job, &w[0], x, norm))
        return false;
    for (int m = 0; m < count; m++)
        cuda_q8_written(b, y[m], 1, w[m].n_rows);
    return true;
}

bool cuda_half_glu(struct backend *b, enum glu_kind kind, const struct mat *gate,
                   const struct mat *up, const float *x, const struct norm_in *norm, float *y) {
    if ((uintptr_t)up->data & 15) /* hv_run checks gate */
        return false;
    half_job job = {};
    job.w[0] = (const uint8_t *)gate->data, job.w[1] = (const uint8_t *)up->data, job.y[0] = y;
    job.row_end[0] = job.row_end[1] = job.row_end[2] = job.items = gate->n_rows;
    job.glu = (int)kind;
    if (!hv_run(b, job, gate, x, norm))
        return false;
    cuda_q8_written(b, y, 1, gate->n_rows);
    return true;
}
