/* cuda_mmq.cu: weight matmuls of 9 to CUDA_MMQ_MAX_N tokens on the int8 tensor cores, for the
 * types of cuda_vecdot.cuh: x quantized to int8 blocks, the weights unpacked to int8 levels in
 * shared memory, mma.sync products per group of 32 columns, scaled and summed in float. The
 * weights are read once per batch as they are stored, with no f16 copy of them. */
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/cuda_vecdot.cuh"

/* Groups of 32 columns per stage, and a row's int8 words per stage in shared memory: 4 words
 * of padding put the eight rows (or tokens) a warp's fragment load reads on distinct banks. */
constexpr int MQ_KG = 8;
constexpr int MQ_WORDS = MQ_KG * 8 + 4;

/* The types whose cvd_w halves carry scales of their own (16-element sub-blocks): their
 * products go by halves (k = 16), the others' by whole groups (k = 32). */
template <enum ox_dtype T> constexpr bool mq_halves() {
    return T == OX_DTYPE_Q2_K || T == OX_DTYPE_Q3_K || T == OX_DTYPE_Q6_K;
}

/* The activations' form, as llama.cpp's CPU dot products take them (what the reference logits
 * come from): the k-quants and iq4_xs multiply q8_K (a float scale per 256, d = max / -127
 * from the first value of largest magnitude), the rest q8_0 / q8_1 (cvd_xq: a half scale per
 * 32). With q8_1 for all, the q4_K_M reference model's prompt was off by KL 1.63e-3 with 43
 * of 48 top tokens (under the test's 90%); with q8_K 8.9e-4 and 46 of 48 (H200). */
template <enum ox_dtype T> constexpr bool mq_q8k() {
    return T == OX_DTYPE_Q2_K || T == OX_DTYPE_Q3_K || T == OX_DTYPE_Q4_K || T == OX_DTYPE_Q5_K ||
           T == OX_DTYPE_Q6_K || T == OX_DTYPE_IQ4_XS;
}

/* A group of 32 of a q8_K block: the block's scale, the group's level sum, its levels. */
struct mq_xk {
    float d;
    int32_t sq;
    int32_t qs[8];
};
static_assert(sizeof(mq_xk) == 40, "q8_K group layout");

/* x[n][n_cols] (n_cols a multiple of 256) to q8_K groups, a warp per block of 256, lane l
 * taking values 8l .. 8l + 7: bit for bit ggml's quantize_row_q8_K (levels round half to even,
 * at most 127; an all-zero block is all zero). */
__global__ static void mq_quantize_k_kernel(const float *__restrict__ x, mq_xk *__restrict__ xk,
                                            int64_t n_blocks) {
    const int64_t blk = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = (int)threadIdx.x % 32;
    if (blk >= n_blocks)
        return;
    const float *xb = x + 256 * blk;
    float v[8];
    const float4 a = __ldg((const float4 *)xb + 2 * lane),
                 c = __ldg((const float4 *)xb + 2 * lane + 1);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = c.x, v[5] = c.y, v[6] = c.z, v[7] = c.w;
    float amax = 0.f;
    int first = 0;
#pragma unroll
    for (int j = 0; j < 8; j++)
        if (fabsf(v[j]) > amax)
            amax = fabsf(v[j]), first = 8 * lane + j;
#pragma unroll
    for (int o = 16; o > 0; o /= 2) { /* the largest magnitude, first of equals */
        const float oa = __shfl_xor_sync(0xffffffffu, amax, o);
        const int oi = __shfl_xor_sync(0xffffffffu, first, o);
        if (oa > amax || (oa == amax && oi < first))
            amax = oa, first = oi;
    }
    mq_xk *g = xk + 8 * blk + lane / 4;
    uint32_t q[2] = {0, 0};
    int sum = 0;
    float d = 0.f;
    if (amax != 0.f) {
        const float iscale = -127.f / __ldg(xb + first);
        d = 1.f / iscale;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int l = min(__float2int_rn(__fmul_rn(iscale, v[j])), 127);
            q[j / 4] |= (uint32_t)(l & 0xff) << (8 * (j % 4));
            sum += l;
        }
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    g->qs[2 * (lane % 4)] = (int32_t)q[0];
    g->qs[2 * (lane % 4) + 1] = (int32_t)q[1];
    if (lane % 4 == 0)
        g->d = d, g->sq = sum;
}

/* Shared memory of a block of bm rows and bn tokens: int8 words, then a float4 per row (token)
 * and group. */
constexpr size_t mq_smem(int bm, int bn) {
    return (size_t)(bm + bn) * (MQ_WORDS * 4 + MQ_KG * 16);
}

/* c += a b for a 16 x 32 int8 tile a (row-major fragments) and a 32 x 8 tile b. */
__device__ __forceinline__ void mq_mma_k32(int c[4], const uint32_t a[4], const uint32_t b[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

/* The same for a 16 x 16 tile (a0: rows 0-7, a1: rows 8-15) and a 16 x 8 tile. */
__device__ __forceinline__ void mq_mma_k16(int c[4], uint32_t a0, uint32_t a1, uint32_t b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
                 "{%0,%1,%2,%3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a0), "r"(a1), "r"(b));
#endif
}

/* A stage's weights: groups [g0, g0 + kg) of the block's BM rows from r0 unpacked to int8
 * levels (wq, MQ_WORDS per row) and a float4 (d0, d1, m0, m1) per group (wsc[k][row]); rows
 * past n_rows and groups past kg are zeros. Every item's loads come first (the loop is
 * unrolled), so they are all on their way together: a stage's latency is paid about once. */
template <enum ox_dtype T, int BM, int TH>
__device__ __forceinline__ void mq_stage_weights(const uint8_t *__restrict__ w, size_t row_bytes,
                                                 int n_rows, int64_t r0, int g0, int kg,
                                                 uint32_t *wq, float4 *wsc) {
    constexpr int ITEMS = BM * MQ_KG / TH;
    static_assert(BM * MQ_KG % TH == 0, "weight items per thread");
    cvd_w cw[ITEMS];
#pragma unroll
    for (int it = 0; it < ITEMS; it++) {
        const int i = threadIdx.x + it * TH, r = i / MQ_KG, k = i % MQ_KG;
        if (r0 + r < n_rows && k < kg) {
            vd<T>::template unpack<16>(w + (r0 + r) * row_bytes, g0 + k, cw[it]);
        } else {
#pragma unroll
            for (int j = 0; j < 8; j++)
                cw[it].v[j] = 0;
            cw[it].d[0] = cw[it].d[1] = cw[it].m[0] = cw[it].m[1] = 0.f;
        }
    }
#pragma unroll
    for (int it = 0; it < ITEMS; it++) {
        const int i = threadIdx.x + it * TH, r = i / MQ_KG, k = i % MQ_KG;
        uint4 *d = (uint4 *)(wq + r * MQ_WORDS + 8 * k);
        d[0] = make_uint4(cw[it].v[0], cw[it].v[1], cw[it].v[2], cw[it].v[3]);
        d[1] = make_uint4(cw[it].v[4], cw[it].v[5], cw[it].v[6], cw[it].v[7]);
        wsc[k * BM + r] = make_float4(cw[it].d[0], cw[it].d[1], cw[it].m[0], cw[it].m[1]);
    }
}

/* A stage's activations: groups [g0, g0 + kg) of the BN tokens from n0 (q8_K groups for the
 * types of mq_q8k, else cvd_xq) to levels (xs) and (d, d s0, d s1, d sq) per group
 * (xsc[k][token]): the scale times the halves' and the whole group's level sums. */
template <enum ox_dtype T, int BN, int TH>
__device__ __forceinline__ void mq_stage_x(const void *__restrict__ xq, int n, int n_groups, int n0,
                                           int g0, int kg, uint32_t *xs, float4 *xsc) {
    constexpr bool Q8K = mq_q8k<T>(), SPLIT_MIN = vd<T>::SPLIT_MIN;
    constexpr int XW = Q8K ? 10 : 9; /* words per group: mq_xk, cvd_xq */
    static_assert(BN * MQ_KG % TH == 0, "token items per thread");
#pragma unroll
    for (int it = 0; it < BN * MQ_KG / TH; it++) {
        const int i = threadIdx.x + it * TH, c = i / MQ_KG, k = i % MQ_KG;
        uint32_t *d = xs + c * MQ_WORDS + 8 * k;
        float4 sc = make_float4(0.f, 0.f, 0.f, 0.f);
        if (n0 + c < n && k < kg) {
            const uint32_t *p = (const uint32_t *)xq + ((int64_t)(n0 + c) * n_groups + g0 + k) * XW;
            int s0 = 0, s1 = 0;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                d[j] = __ldg(p + XW - 8 + j);
                if constexpr (SPLIT_MIN) {
                    if (j < 4)
                        s0 = __dp4a((int)d[j], 0x01010101, s0);
                    else
                        s1 = __dp4a((int)d[j], 0x01010101, s1);
                }
            }
            const uint32_t head = __ldg(p);
            const float xd = Q8K ? __uint_as_float(head) : cdq_f16((uint16_t)(head & 0xffffu));
            const int sq = Q8K ? (int)__ldg(p + 1) : (int)(int16_t)(head >> 16);
            sc = make_float4(xd, xd * (float)s0, xd * (float)s1, xd * (float)sq);
        } else {
#pragma unroll
            for (int j = 0; j < 8; j++)
                d[j] = 0;
        }
        xsc[k * BN + c] = sc;
    }
}

/* A warp's products over a staged stage: acc[mt][nt] += xd (d0 lo + d1 hi) + the offset term
 * for its MT row tiles from wrow and NT token tiles from wtok, lo and hi the halves' integer
 * dot products of each group, as cvd_dot computes them one group at a time. */
template <enum ox_dtype T, int MT, int NT, int BM, int BN>
__device__ __forceinline__ void mq_multiply(const uint32_t *wq, const float4 *wsc,
                                            const uint32_t *xs, const float4 *xsc, int kg, int wrow,
                                            int wtok, float (&acc)[MT][NT][4]) {
    constexpr bool HALVES = mq_halves<T>(), SPLIT_MIN = vd<T>::SPLIT_MIN, NO_MIN = vd<T>::NO_MIN;
    const int lane = threadIdx.x % 32, gi = lane / 4, ti = lane % 4;
#pragma unroll
    for (int k = 0; k < MQ_KG; k++) {
        if (k >= kg)
            break;
        uint32_t a[MT][4], bf[NT][2];
        float4 rs[MT][2], cs[NT][2];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            const int row = wrow + 16 * mt + gi;
            const uint32_t *p = wq + row * MQ_WORDS + 8 * k + ti;
            a[mt][0] = p[0], a[mt][1] = p[8 * MQ_WORDS];
            a[mt][2] = p[4], a[mt][3] = p[8 * MQ_WORDS + 4];
            rs[mt][0] = wsc[k * BM + row], rs[mt][1] = wsc[k * BM + row + 8];
        }
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            const int tok = wtok + 8 * nt;
            const uint32_t *p = xs + (tok + gi) * MQ_WORDS + 8 * k + ti;
            bf[nt][0] = p[0], bf[nt][1] = p[4];
            cs[nt][0] = xsc[k * BN + tok + 2 * ti], cs[nt][1] = xsc[k * BN + tok + 2 * ti + 1];
        }
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                int lo[4] = {0, 0, 0, 0}, hi[4] = {0, 0, 0, 0};
                if constexpr (HALVES) {
                    mq_mma_k16(lo, a[mt][0], a[mt][1], bf[nt][0]);
                    mq_mma_k16(hi, a[mt][2], a[mt][3], bf[nt][1]);
                } else {
                    mq_mma_k32(lo, a[mt], bf[nt]);
                }
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const float4 r = rs[mt][e / 2], x = cs[nt][e % 2];
                    float v = HALVES ? x.x * (r.x * (float)lo[e] + r.y * (float)hi[e])
                                     : x.x * r.x * (float)lo[e];
                    if constexpr (SPLIT_MIN)
                        v += r.z * x.y + r.w * x.z;
                    else if constexpr (!NO_MIN)
                        v += r.z * x.w;
                    acc[mt][nt][e] += v;
                }
            }
        }
    }
}

/* One block: BM = 16 MT WM weight rows times BN = 8 NT WN tokens, WM x WN warps each taking
 * MT row tiles of 16 and NT token tiles of 8, the columns [z split_groups, (z + 1)
 * split_groups) of split z = blockIdx.z (partial sums in y's z-th n x n_rows slab when there
 * are several). Per stage of MQ_KG groups the block stages weights and activations in shared
 * memory, then each warp multiplies. y[t][row] = (y +) the sum. Rows 16-byte aligned. */
template <enum ox_dtype T, int MT, int NT, int WM, int WN>
__global__ void __launch_bounds__(32 * WM * WN)
    mmq_kernel(const uint8_t *__restrict__ w, size_t row_bytes, int n_rows, int n_groups,
               const void *__restrict__ xq, float *__restrict__ y, int n, int accumulate,
               int split_groups) {
    constexpr int BM = 16 * MT * WM, BN = 8 * NT * WN, TH = 32 * WM * WN;
    extern __shared__ float4 mq_smem_base[];
    float4 *wsc = mq_smem_base, *xsc = wsc + MQ_KG * BM;
    uint32_t *wq = (uint32_t *)(xsc + MQ_KG * BN), *xs = wq + BM * MQ_WORDS;

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gi = lane / 4, ti = lane % 4;
    const int wrow = warp % WM * 16 * MT, wtok = warp / WM * 8 * NT;
    const int64_t r0 = (int64_t)blockIdx.x * BM;
    const int n0 = (int)blockIdx.y * BN;

    float acc[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[mt][nt][e] = 0.f;

    const int g_begin = (int)blockIdx.z * split_groups;
    const int g_end = min(n_groups, g_begin + split_groups);
    y += (size_t)blockIdx.z * n * n_rows; /* a split's partial sums (gridDim.z > 1) */
    for (int g0 = g_begin; g0 < g_end; g0 += MQ_KG) {
        const int kg = min(MQ_KG, g_end - g0);
        __syncthreads(); /* the previous stage is consumed */
        mq_stage_weights<T, BM, TH>(w, row_bytes, n_rows, r0, g0, kg, wq, wsc);
        mq_stage_x<T, BN, TH>(xq, n, n_groups, n0, g0, kg, xs, xsc);
        __syncthreads();
        mq_multiply<T, MT, NT, BM, BN>(wq, wsc, xs, xsc, kg, wrow, wtok, acc);
    }
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int64_t row = r0 + wrow + 16 * mt + gi + 8 * (e / 2);
                const int tok = n0 + wtok + 8 * nt + 2 * ti + e % 2;
                if (row < n_rows && tok < n) {
                    float *p = y + (int64_t)tok * n_rows + row;
                    *p = accumulate ? *p + acc[mt][nt][e] : acc[mt][nt][e];
                }
            }
}

/* y[t][r] = (y[t][r] +) the sum of the splits' partial sums, in split order (so a batch's
 * result does not depend on which split finished first). */
__global__ static void mmq_reduce_kernel(const float *__restrict__ part, float *__restrict__ y,
                                         size_t count, int splits, int accumulate) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = accumulate ? y[i] : 0.f;
        for (int z = 0; z < splits; z++)
            v += part[(size_t)z * count + i];
        y[i] = v;
    }
}

/* Splits of the columns when the tiles alone would leave multiprocessors idle: up to 8, each
 * of two stages or more, their partial sums within the scratch buffer. */
static int mmq_splits(struct backend *b, int64_t tiles, int n_groups, size_t outputs) {
    const cuda_state *s = cuda_of(b);
    int splits = (int)((2 * (int64_t)s->n_sm + tiles - 1) / tiles);
    splits = splits < 8 ? splits : 8;
    while (splits > 1 && (n_groups / (splits * MQ_KG) < 2 || splits * outputs > s->scratch_floats))
        splits--;
    return splits;
}

template <enum ox_dtype T, int MT, int NT, int WM, int WN>
static void mmq_launch(struct backend *b, const struct mat *w, const void *xq, float *y, int n,
                       bool accumulate) {
    constexpr int BM = 16 * MT * WM, BN = 8 * NT * WN;
    cuda_state *s = cuda_of(b);
    const int n_groups = (int)(w->n_cols / 32);
    const unsigned row_tiles = cuda_blocks((size_t)w->n_rows, BM), tok_tiles = cuda_blocks(n, BN);
    const size_t outputs = (size_t)n * (size_t)w->n_rows;
    const int splits = mmq_splits(b, (int64_t)row_tiles * tok_tiles, n_groups, outputs);
    /* each split a whole number of stages */
    const int split_groups = (n_groups + splits * MQ_KG - 1) / (splits * MQ_KG) * MQ_KG;
    mmq_kernel<T, MT, NT, WM, WN><<<dim3(row_tiles, tok_tiles, (unsigned)splits), 32 * WM * WN,
                                    mq_smem(BM, BN), s->stream>>>(
        (const uint8_t *)w->data, w->row_bytes, (int)w->n_rows, n_groups, xq,
        splits > 1 ? s->scratch : y, n, splits > 1 ? 0 : (int)accumulate, split_groups);
    CUDA_LAUNCHED(b, "cuda_mmq: kernel");
    if (splits > 1) {
        const unsigned blocks = cuda_blocks(outputs, 256), grid = blocks < 1024 ? blocks : 1024;
        mmq_reduce_kernel<<<grid, 256, 0, s->stream>>>(s->scratch, y, outputs, splits,
                                                       (int)accumulate);
        CUDA_LAUNCHED(b, "cuda_mmq: reduce");
    }
}

/* Tiles by batch size: 128 x 64 from 33 tokens, narrower ones below, so fewer padding tokens
 * are multiplied. */
#define MQ_CONFIGS(X) X(1, 2, 4, 1) X(2, 2, 2, 2) X(2, 4, 4, 2)

template <enum ox_dtype T>
static void mmq_run_t(struct backend *b, const struct mat *w, const void *xq, float *y, int n,
                      bool accumulate) {
    if (n > 32)
        mmq_launch<T, 2, 4, 4, 2>(b, w, xq, y, n, accumulate);
    else if (n > 16)
        mmq_launch<T, 2, 2, 2, 2>(b, w, xq, y, n, accumulate);
    else
        mmq_launch<T, 1, 2, 4, 1>(b, w, xq, y, n, accumulate);
}

/* Over 48 KB of dynamic shared memory must be allowed per kernel, before any launch. */
template <enum ox_dtype T> static cudaError_t mmq_allow_smem() {
    cudaError_t e = cudaSuccess;
#define MQ_ATTR_(mt, nt, wm, wn)                                                                   \
    if (e == cudaSuccess)                                                                          \
        e = cudaFuncSetAttribute(mmq_kernel<T, mt, nt, wm, wn>,                                    \
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,                      \
                                 (int)mq_smem(16 * mt * wm, 8 * nt * wn));
    MQ_CONFIGS(MQ_ATTR_)
#undef MQ_ATTR_
    return e;
}

static bool mq_q8k_type(enum ox_dtype t) {
    switch (t) {
#define MQ_CASE_(name)                                                                             \
    case OX_DTYPE_##name: return mq_q8k<OX_DTYPE_##name>();
        CVD_TYPES(MQ_CASE_)
#undef MQ_CASE_
    default: return false;
    }
}

static bool mmq_int8_mma; /* the GPU has mma.sync on int8 (Ampere on): cuda_mmq_init */

bool cuda_mmq(struct backend *b, const struct mat *w, const float *x, float *y, int n,
              bool accumulate) {
    switch (w->type) {
#define MQ_CASE_(name) case OX_DTYPE_##name:
        CVD_TYPES(MQ_CASE_)
#undef MQ_CASE_
        break;
    default: return false;
    }
    if (!mmq_int8_mma || n <= CUDA_Q8_MAX_N || n > CUDA_MMQ_MAX_N ||
        !cuda_q8_room(b, n, w->n_cols) ||
        (mq_q8k_type(w->type) && ((uintptr_t)x & 15)) || /* q8_K reads x by float4 */
        w->n_rows > INT32_MAX || (((uintptr_t)w->data | w->row_bytes) & 15))
        return false;
    const void *xq;
    if (mq_q8k_type(w->type)) {
        /* into the buffer the q8_1 copy is not in: that copy stays current, this one is made
         * for each call (a few microseconds) */
        cuda_state *s = cuda_of(b);
        const int64_t blocks = (int64_t)n * (w->n_cols / 256);
        mq_xk *xk = (mq_xk *)s->xq[1 - s->xq_cur];
        mq_quantize_k_kernel<<<cuda_blocks((size_t)blocks * 32, 256), 256, 0, s->stream>>>(x, xk,
                                                                                           blocks);
        CUDA_LAUNCHED(b, "cuda_mmq: quantizing activations to q8_K");
        xq = xk;
    } else {
        xq = cuda_q8_input(b, x, n, w->n_cols);
    }
    cuda_q8_written(b, y, n, w->n_rows);
    switch (w->type) {
#define MQ_CASE_(name)                                                                             \
    case OX_DTYPE_##name: mmq_run_t<OX_DTYPE_##name>(b, w, xq, y, n, accumulate); break;
        CVD_TYPES(MQ_CASE_)
#undef MQ_CASE_
    default: break;
    }
    return true;
}

cudaError_t cuda_mmq_init(void) {
    int device = 0, major = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    mmq_int8_mma = major >= 8;
    if (e == cudaSuccess) /* this file's copy of the iq4_nl levels (cuda_dequant.cuh) */
        e = cudaMemcpyToSymbol(cdq_iq4nl, iq4nl_values, sizeof iq4nl_values);
#define MQ_INIT_(name)                                                                             \
    if (e == cudaSuccess)                                                                          \
        e = mmq_allow_smem<OX_DTYPE_##name>();
    CVD_TYPES(MQ_INIT_)
#undef MQ_INIT_
    return e;
}
