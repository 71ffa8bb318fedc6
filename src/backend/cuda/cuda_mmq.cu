/* cuda_mmq.cu: weight matmuls of more than cuda_q8_max_n tokens on the int8 tensor cores, for
 * the types of cuda_vecdot.cuh: x quantized to int8 (levels and scales in separate planes), the
 * weights copied to shared memory as they are stored (16-byte cp.async, the next stage's on
 * their way while this one is multiplied) and unpacked there to int8 levels, mma.sync products
 * per group of 32 columns. The k-quants sum a super-block's products in integers and scale once
 * per 256 columns; the others scale each group's in float. The weights are read once per batch
 * as they are stored, with no f16 copy of them. */
#include <type_traits>

#include "backend/cuda/cuda_mmq_kscales.cuh"
#include "backend/cuda/cuda_mmq_tile.cuh"
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/cuda_vecdot.cuh"

/* A row's int8 words per stage in shared memory: 4 words of padding put the eight rows (or
 * tokens) of a fragment load on distinct banks. */
constexpr int MQ_WORDS = MQ_KG * 8 + 4;

/* The types whose cvd_w halves carry scales of their own (16-element sub-blocks): their
 * products go by halves (k = 16), the others' by whole groups (k = 32). */
template <enum ox_dtype T> constexpr bool mq_halves() {
    return T == OX_DTYPE_Q2_K || T == OX_DTYPE_Q3_K || T == OX_DTYPE_Q6_K;
}

/* The activations' form, as llama.cpp's CPU dot products take them (what the reference logits
 * come from): the k-quants and iq4_xs multiply q8_K (a float scale per 256, d = max / -127
 * from the first value of largest magnitude), the rest q8_1 (a half scale per 32). With q8_1
 * for all, the q4_K_M reference model's prompt was off by KL 1.63e-3 with 43 of 48 top tokens
 * (under the test's 90%); with q8_K 8.9e-4 and 46 of 48 (H200). */
template <enum ox_dtype T> constexpr bool mq_q8k() {
    return T == OX_DTYPE_Q2_K || T == OX_DTYPE_Q3_K || T == OX_DTYPE_Q4_K || T == OX_DTYPE_Q5_K ||
           T == OX_DTYPE_Q6_K || T == OX_DTYPE_IQ4_XS;
}

/* ---- activations: n rows of n_cols as int8 levels [n][n_cols], then per group of 32 a scale
 * word (q8_1: half d, int16 level sum) or two (q8_K: float d of the 256, the halves' level sums
 * as int16s) ---- */

/* Words of scales per group. */
template <enum ox_dtype T> constexpr int mq_xsw() {
    return mq_q8k<T>() ? 2 : 1;
}

/* q8_K: a warp per block of 256, lane l taking values 8l .. 8l + 7: bit for bit ggml's
 * quantize_row_q8_K (levels round half to even, at most 127; an all-zero block is all zero). */
__global__ static void mq_quantize_k_kernel(const float *__restrict__ x, uint8_t *__restrict__ lv,
                                            uint32_t *__restrict__ sc, int64_t n_blocks) {
    const int64_t blk = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = (int)threadIdx.x % 32;
    if (blk >= n_blocks) /* whole warps */
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
    sum += __shfl_xor_sync(0xffffffffu, sum, 1); /* a half's: lanes 4g, 4g + 1 and 4g + 2, 4g + 3 */
    const int second = __shfl_down_sync(0xffffffffu, sum, 2);
    ((uint2 *)(lv + 256 * blk))[lane] = make_uint2(q[0], q[1]);
    if (lane % 4 == 0) {
        uint32_t *g = sc + 2 * (8 * blk + lane / 4);
        g[0] = __float_as_uint(d);
        g[1] = ((uint32_t)sum & 0xffffu) | (uint32_t)second << 16;
    }
}

/* q8_1: four lanes per group of 32, each taking 8 values (cvd_q8_level). */
__global__ static void mq_quantize_1_kernel(const float *__restrict__ x, uint8_t *__restrict__ lv,
                                            uint32_t *__restrict__ sc, int64_t n_groups) {
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const bool live = t / 4 < n_groups; /* all lanes shuffle; the dead ones store nothing */
    const int64_t grp = live ? t / 4 : 0;
    const int part = (int)(t % 4);
    const float4 a = __ldg((const float4 *)(x + 32 * grp + 8 * part)),
                 c = __ldg((const float4 *)(x + 32 * grp + 8 * part) + 1);
    const float v[8] = {a.x, a.y, a.z, a.w, c.x, c.y, c.z, c.w};
    float amax = 0.f;
#pragma unroll
    for (int j = 0; j < 8; j++)
        amax = fmaxf(amax, fabsf(v[j]));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
    uint32_t q[2] = {0, 0};
    int sum = 0;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const int l = cvd_q8_level(v[j], amax);
        q[j / 4] |= (uint32_t)(l & 0xff) << (8 * (j % 4));
        sum += l;
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    if (!live)
        return;
    ((uint2 *)(lv + 32 * grp))[part] = make_uint2(q[0], q[1]);
    if (part == 0)
        sc[grp] = (uint32_t)cvd_q8_d_bits(amax) | (uint32_t)sum << 16;
}

/* q4_0's and q5_0's levels made signed as they are staged (minus 8, minus 16), so their
 * products need no offset term: llama.cpp's CPU dot products subtract it from the levels too. */
template <enum ox_dtype T> constexpr uint32_t mq_bias() {
    return T == OX_DTYPE_Q4_0 ? 0x08080808u : T == OX_DTYPE_Q5_0 ? 0x10101010u : 0u;
}

/* Whether the products have an offset term (a min times the activations' level sum). */
template <enum ox_dtype T> constexpr bool mq_min() {
    return !vd<T>::NO_MIN && mq_bias<T>() == 0;
}

/* A block's shared memory, in words: the int8 levels of its BM rows (MQ_WORDS a row) and, twice
 * (the stage being multiplied and the next, on its way), of its BN tokens; per group and row
 * (token) a scale word and a min; per row (d, -dmin) and per token d of the super-block; then,
 * twice, the tokens' scale words as quantized (mq_xsw each) and the rows' stored bytes (mq_raw's
 * ROOM each). The types of mq_q8k keep their scales as the integers they are (mqk's packed
 * word) and their tokens' level sums as integers; the others float scales and d sq. */
template <enum ox_dtype T, int BM, int BN> struct mq_at {
    static constexpr int WQ = 0, XS = WQ + BM * MQ_WORDS, WSC = XS + 2 * BN * MQ_WORDS,
                         WMN = WSC + MQ_KG * BM, XSC = WMN + MQ_KG * BM, XMN = XSC + MQ_KG * BN,
                         WSUP = XMN + MQ_KG * BN, XSUP = WSUP + 2 * BM, XSR = XSUP + BN,
                         XSR_SIZE = BN * MQ_KG * mq_xsw<T>(), RAW = XSR + 2 * XSR_SIZE,
                         RAW_SIZE = BM * mq_raw<T>::ROOM / 4, WORDS = RAW + 2 * RAW_SIZE;
    static_assert(RAW % 4 == 0, "the stored bytes 16-byte aligned");
};

template <enum ox_dtype T, int BM, int BN> constexpr size_t mq_smem() {
    return (size_t)4 * mq_at<T, BM, BN>::WORDS;
}

/* Asynchronous copies to shared memory (cp.async): BYTES from src, or zeros when !valid (src
 * is then not read, but must still be a device address). */
template <int BYTES>
__device__ __forceinline__ void mq_copy(void *dst, const void *src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    if constexpr (BYTES == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src),
                     "r"(valid ? 16 : 0));
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(d), "l"(src), "n"(BYTES),
                     "r"(valid ? BYTES : 0));
#endif
}
__device__ __forceinline__ void mq_copies_sent(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
__device__ __forceinline__ void mq_copies_wait(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group 0;" ::: "memory");
#endif
}

/* c += a b for a 16 x 32 int8 tile a (row-major fragments) and a 32 x 8 tile b. */
__device__ __forceinline__ void mq_mma_k32(int c[4], const uint32_t a[4], const uint32_t b[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, "
        "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

/* The same for a 16 x 16 tile (a0: rows 0-7, a1: rows 8-15) and a 16 x 8 tile. */
__device__ __forceinline__ void mq_mma_k16(int c[4], uint32_t a0, uint32_t a1, uint32_t b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
        "{%0,%1,%2,%3};"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a0), "r"(a1), "r"(b));
#endif
}

/* A stage's copies into buffer buf, sent without waiting: the block's rows' stored bytes of
 * groups [g0, g0 + kg) by 16-byte chunks (rows past n_rows, and chunks past the stage, zeros),
 * its BN tokens' levels from n0 (zeros past n and kg) and their scale words as quantized. */
template <enum ox_dtype T, int BM, int BN, int TH>
__device__ __forceinline__ void
mq_issue(const uint8_t *__restrict__ w, size_t row_bytes, int n_rows,
         const uint8_t *__restrict__ xl, const uint32_t *__restrict__ xsc, int n, int n_cols,
         int64_t r0, int n0, int g0, int kg, uint32_t *sm, int buf) {
    using L = mq_at<T, BM, BN>;
    using R = mq_raw<T>;
    constexpr int NCH = R::ROOM / 16, XSW = mq_xsw<T>();
    const int off0 = g0 / R::GPB * R::BS, c0 = off0 / 16 * 16, end = off0 + kg / R::GPB * R::BS;
    uint8_t *raw = (uint8_t *)(sm + L::RAW + buf * L::RAW_SIZE);
    for (int i = threadIdx.x; i < BM * NCH; i += TH) {
        const int r = i / NCH, c = i % NCH;
        const bool ok = r0 + r < n_rows && c0 + 16 * c < end;
        mq_copy<16>(raw + 16 * i, ok ? w + (r0 + r) * row_bytes + c0 + 16 * c : w, ok);
    }
    uint32_t *xs = sm + L::XS + buf * BN * MQ_WORDS;
    for (int i = threadIdx.x; i < BN * 16; i += TH) {
        const int c = i / 16, q = i % 16;
        const bool ok = n0 + c < n && q < 2 * kg;
        mq_copy<16>(xs + c * MQ_WORDS + 4 * q,
                    ok ? xl + (int64_t)(n0 + c) * n_cols + 32 * g0 + 16 * q : xl, ok);
    }
    uint32_t *xr = sm + L::XSR + buf * L::XSR_SIZE;
    for (int i = threadIdx.x; i < BN * MQ_KG; i += TH) {
        const int c = i / MQ_KG, k = i % MQ_KG;
        const bool ok = n0 + c < n && k < kg;
        mq_copy<4 * XSW>(xr + XSW * i,
                         ok ? xsc + ((int64_t)(n0 + c) * (n_cols / 32) + g0 + k) * XSW : xsc, ok);
    }
    mq_copies_sent();
}

/* Buffer buf's stored bytes (mq_issue) to int8 levels and their scales (mq_at); groups past kg
 * are zeros; q4_0 and q5_0 levels made signed. Then the tokens' scale words as mq_at keeps
 * them. */
template <enum ox_dtype T, int BM, int BN, int TH>
__device__ __forceinline__ void mq_unpack(int g0, int kg, uint32_t *sm, int buf) {
    using L = mq_at<T, BM, BN>;
    using R = mq_raw<T>;
    constexpr bool Q8K = mq_q8k<T>();
    constexpr int ITEMS = BM * MQ_KG / TH;
    static_assert(BM * MQ_KG % TH == 0 && TH % MQ_KG == 0, "weight items per thread");
    const int k = threadIdx.x % MQ_KG;         /* the same group for all of a thread's items */
    const int lead = g0 / R::GPB * R::BS % 16; /* where the stage starts in its first chunk */
#pragma unroll
    for (int it = 0; it < ITEMS; it++) {
        const int r = (threadIdx.x + it * TH) / MQ_KG;
        const uint8_t *base =
            (const uint8_t *)(sm + L::RAW + buf * L::RAW_SIZE) + r * R::ROOM + lead;
        cvd_w cw;
        uint32_t ks = 0;
        float2 sup = make_float2(0.f, 0.f);
        if (k < kg) {
            vd<T>::template unpack<R::ALIGN>(base, k, cw);
            if constexpr (Q8K) { /* a stage is one super-block: g0 is a multiple of 8 */
                ks = mqk<T>::scales(base, k);
                if (k == 0)
                    sup = mqk<T>::super(base);
            }
        } else {
#pragma unroll
            for (int j = 0; j < 8; j++)
                cw.v[j] = 0;
            cw.d[0] = cw.d[1] = cw.m[0] = cw.m[1] = 0.f;
        }
        uint32_t v[8];
#pragma unroll
        for (int j = 0; j < 8; j++)
            v[j] = mq_bias<T>() ? cvd_sub_bytes(cw.v[j], mq_bias<T>()) : cw.v[j];
        uint4 *d = (uint4 *)(sm + L::WQ + r * MQ_WORDS + 8 * k);
        d[0] = make_uint4(v[0], v[1], v[2], v[3]);
        d[1] = make_uint4(v[4], v[5], v[6], v[7]);
        if constexpr (Q8K) {
            sm[L::WSC + k * BM + r] = ks;
            if (k == 0)
                ((float2 *)(sm + L::WSUP))[r] = sup;
        } else {
            ((float *)sm)[L::WSC + k * BM + r] = cw.d[0];
            if constexpr (mq_min<T>())
                ((float *)sm)[L::WMN + k * BM + r] = cw.m[0];
        }
    }
    const uint32_t *xr = sm + L::XSR + buf * L::XSR_SIZE;
    for (int i = threadIdx.x; i < BN * MQ_KG; i += TH) {
        const int c = i / MQ_KG, kk = i % MQ_KG;
        if constexpr (Q8K) {
            const uint32_t h = xr[2 * i + 1]; /* the halves' sums */
            sm[L::XSC + kk * BN + c] =
                vd<T>::SPLIT_MIN ? h : (uint32_t)((int)(int16_t)(h & 0xffffu) + ((int)h >> 16));
            if (kk == 0)
                sm[L::XSUP + c] = xr[2 * i];
        } else {
            const float xd = cdq_f16((uint16_t)(xr[i] & 0xffffu));
            ((float *)sm)[L::XSC + kk * BN + c] = xd;
            if constexpr (mq_min<T>())
                ((float *)sm)[L::XMN + kk * BN + c] = xd * (float)(int16_t)(xr[i] >> 16);
        }
    }
}

/* A group's products (lo, and hi for the halves' types) scaled into the sums: for the types of
 * mq_q8k times the integer scale of the group (of each half) into ia; for the others times the
 * row's and token's scales (rs as float bits, cd), plus the min times d sq (rm, cm), into acc. */
template <enum ox_dtype T, int MT, int NT>
__device__ __forceinline__ void
mq_scale_group(const int (&lo)[MT][NT][4], const int (&hi)[MT][NT][4], const uint32_t (&rs)[MT][2],
               const float (&rm)[MT][2], const float2 (&cd)[NT], const float2 (&cm)[NT],
               float (&acc)[MT][NT][4], int (&ia)[MT][NT][4]) {
    constexpr bool HALVES = mq_halves<T>(), Q8K = mq_q8k<T>(), MIN = mq_min<T>();
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const uint32_t s = rs[mt][e / 2];
                if constexpr (Q8K) {
                    ia[mt][nt][e] += ((int)(s << 24) >> 24) * lo[mt][nt][e];
                    if constexpr (HALVES)
                        ia[mt][nt][e] += ((int)(s << 16) >> 24) * hi[mt][nt][e];
                } else {
                    const float xd = e % 2 ? cd[nt].y : cd[nt].x;
                    float v = (float)lo[mt][nt][e] * (__uint_as_float(s) * xd);
                    if constexpr (MIN)
                        v = fmaf(rm[mt][e / 2], e % 2 ? cm[nt].y : cm[nt].x, v);
                    acc[mt][nt][e] += v;
                }
            }
}

/* A warp's products over a staged stage, for its MT row tiles of 16 from wrow and NT token
 * tiles of 8 from wtok. The types of mq_q8k sum in ia: the level dot products times the
 * integer scale of each group (of each half); the others in acc: the dot product times the
 * group's two scales, plus the min times the activations' d sq. */
template <enum ox_dtype T, int MT, int NT, int BM, int BN>
__device__ __forceinline__ void mq_multiply(const uint32_t *sm, int buf, int kg, int wrow, int wtok,
                                            float (&acc)[MT][NT][4], int (&ia)[MT][NT][4]) {
    using L = mq_at<T, BM, BN>;
    constexpr bool HALVES = mq_halves<T>(), Q8K = mq_q8k<T>(), MIN = mq_min<T>();
    const int lane = threadIdx.x % 32, gi = lane / 4, ti = lane % 4;
    const uint32_t a_at = (uint32_t)__cvta_generic_to_shared(
        sm + L::WQ + (wrow + lane % 8 + 8 * (lane / 8 % 2)) * MQ_WORDS + 4 * (lane / 16));
    const uint32_t b_at = (uint32_t)__cvta_generic_to_shared(
        sm + L::XS + buf * BN * MQ_WORDS + (wtok + lane % 8 + 8 * (lane / 16)) * MQ_WORDS +
        4 * (lane / 8 % 2));
#pragma unroll
    for (int k = 0; k < MQ_KG; k++) {
        if (k >= kg)
            break;
        uint32_t a[MT][4], bf[NT][2];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
            mq_ldmatrix4(a[mt], a_at + 4 * (16 * mt * MQ_WORDS + 8 * k));
#pragma unroll
        for (int p = 0; p < NT / 2; p++) {
            uint32_t r[4];
            mq_ldmatrix4(r, b_at + 4 * (16 * p * MQ_WORDS + 8 * k));
            bf[2 * p][0] = r[0], bf[2 * p][1] = r[1], bf[2 * p + 1][0] = r[2],
                   bf[2 * p + 1][1] = r[3];
        }
        if constexpr (NT % 2) /* a last tile of 8 tokens on its own */
            mq_ldmatrix2(bf[NT - 1], b_at + 4 * (8 * (NT - 1) * MQ_WORDS + 8 * k));
        uint32_t rs[MT][2];
        float rm[MT][2];
        float2 cd[NT], cm[NT];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int row = wrow + 16 * mt + gi + 8 * h;
                rs[mt][h] = sm[L::WSC + k * BM + row];
                if constexpr (MIN && !Q8K)
                    rm[mt][h] = ((const float *)sm)[L::WMN + k * BM + row];
            }
        if constexpr (!Q8K) {
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                const int tok = wtok + 8 * nt + 2 * ti;
                cd[nt] = *(const float2 *)(sm + L::XSC + k * BN + tok);
                if constexpr (MIN)
                    cm[nt] = *(const float2 *)(sm + L::XMN + k * BN + tok);
            }
        }
        /* every product first, then the scaling: the mma results are not waited on one by one */
        int lo[MT][NT][4], hi[MT][NT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
#pragma unroll
                for (int e = 0; e < 4; e++)
                    lo[mt][nt][e] = hi[mt][nt][e] = 0;
                if constexpr (HALVES) {
                    mq_mma_k16(lo[mt][nt], a[mt][0], a[mt][1], bf[nt][0]);
                    mq_mma_k16(hi[mt][nt], a[mt][2], a[mt][3], bf[nt][1]);
                } else {
                    mq_mma_k32(lo[mt][nt], a[mt], bf[nt]);
                }
            }
        mq_scale_group<T, MT, NT>(lo, hi, rs, rm, cd, cm, acc, ia);
    }
}

/* The end of a super-block (types of mq_q8k): acc += x d (d ia + (-dmin) the mins times the
 * activations' level sums), ia back to zero. */
template <enum ox_dtype T, int MT, int NT, int BM, int BN>
__device__ __forceinline__ void mq_fold(const uint32_t *sm, int wrow, int wtok,
                                        float (&acc)[MT][NT][4], int (&ia)[MT][NT][4]) {
    using L = mq_at<T, BM, BN>;
    const int lane = threadIdx.x % 32, gi = lane / 4, ti = lane % 4;
    float2 sup[MT][2];
    float2 xd[NT];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++)
            sup[mt][h] = ((const float2 *)(sm + L::WSUP))[wrow + 16 * mt + gi + 8 * h];
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
        xd[nt] = *(const float2 *)(sm + L::XSUP + wtok + 8 * nt + 2 * ti);
    /* acc += x d ia (MINS: x (-dmin) ia), ia back to zero */
    auto scale_in = [&](auto mins) {
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const float x = e % 2 ? xd[nt].y : xd[nt].x;
                    const float d = decltype(mins)::value ? sup[mt][e / 2].y : sup[mt][e / 2].x;
                    acc[mt][nt][e] = fmaf(x * d, (float)ia[mt][nt][e], acc[mt][nt][e]);
                    ia[mt][nt][e] = 0;
                }
    };
    scale_in(std::false_type{});
    if constexpr (mq_min<T>()) { /* sum over the groups of min times level sum, in ia */
#pragma unroll
        for (int k = 0; k < MQ_KG; k++) {
            uint32_t rs[MT][2], cs[NT][2];
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int h = 0; h < 2; h++)
                    rs[mt][h] = sm[L::WSC + k * BM + wrow + 16 * mt + gi + 8 * h];
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                const uint2 c = *(const uint2 *)(sm + L::XSC + k * BN + wtok + 8 * nt + 2 * ti);
                cs[nt][0] = c.x, cs[nt][1] = c.y;
            }
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const uint32_t r = rs[mt][e / 2], c = cs[nt][e % 2];
                        if constexpr (vd<T>::SPLIT_MIN)
                            ia[mt][nt][e] += (int)(r >> 16 & 0xff) * (int)(int16_t)(c & 0xffff) +
                                             (int)(r >> 24) * ((int)c >> 16);
                        else
                            ia[mt][nt][e] += (int)(r >> 16 & 0xff) * (int)c;
                    }
        }
        scale_in(std::true_type{});
    }
}

/* One block: BM = 16 MT WM weight rows times BN = 8 NT WN tokens, WM x WN warps each taking
 * MT row tiles of 16 and NT token tiles of 8, the columns [z split_groups, (z + 1)
 * split_groups) of split z = blockIdx.z (partial sums in y's z-th n x n_rows slab when there
 * are several). Per stage of MQ_KG groups the block's copies of the weights' bytes and the
 * activations land in shared memory (sent a stage ahead), the weights are unpacked, then each
 * warp multiplies.
 * y[t][row] = (y +) the sum. Rows 16-byte aligned. */
template <enum ox_dtype T, int MT, int NT, int WM, int WN>
__global__ void __launch_bounds__(32 * WM * WN)
    mmq_kernel(const uint8_t *__restrict__ w, size_t row_bytes, int n_rows, int n_cols,
               const uint8_t *__restrict__ xl, const uint32_t *__restrict__ xsc,
               float *__restrict__ y, int n, int accumulate, int split_groups) {
    constexpr int BM = 16 * MT * WM, BN = 8 * NT * WN, TH = 32 * WM * WN;
    extern __shared__ uint4 mq_smem_base[];
    uint32_t *sm = (uint32_t *)mq_smem_base;

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gi = lane / 4, ti = lane % 4;
    const int wrow = warp % WM * 16 * MT, wtok = warp / WM * 8 * NT;
    const int64_t r0 = (int64_t)blockIdx.x * BM;
    const int n0 = (int)blockIdx.y * BN;

    float acc[MT][NT][4];
    int ia[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[mt][nt][e] = 0.f, ia[mt][nt][e] = 0;

    const int g_begin = (int)blockIdx.z * split_groups;
    const int g_end = min(n_cols / 32, g_begin + split_groups);
    y += (size_t)blockIdx.z * n * n_rows; /* a split's partial sums (gridDim.z > 1) */
    if (g_begin < g_end)
        mq_issue<T, BM, BN, TH>(w, row_bytes, n_rows, xl, xsc, n, n_cols, r0, n0, g_begin,
                                min(MQ_KG, g_end - g_begin), sm, 0);
    for (int g0 = g_begin, buf = 0; g0 < g_end; g0 += MQ_KG, buf ^= 1) {
        const int kg = min(MQ_KG, g_end - g0);
        mq_copies_wait();
        __syncthreads();        /* this stage's copies are in; the previous one is consumed */
        if (g0 + MQ_KG < g_end) /* the next stage's copies, on their way while this one runs */
            mq_issue<T, BM, BN, TH>(w, row_bytes, n_rows, xl, xsc, n, n_cols, r0, n0, g0 + MQ_KG,
                                    min(MQ_KG, g_end - g0 - MQ_KG), sm, buf ^ 1);
        mq_unpack<T, BM, BN, TH>(g0, kg, sm, buf);
        __syncthreads();
        mq_multiply<T, MT, NT, BM, BN>(sm, buf, kg, wrow, wtok, acc, ia);
        if constexpr (mq_q8k<T>())
            mq_fold<T, MT, NT, BM, BN>(sm, wrow, wtok, acc, ia);
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

/* Blocks of each kernel a multiprocessor holds at once (cuda_mmq_init; mq_splits plans by it). */
template <enum ox_dtype T, int MT, int NT, int WM, int WN> static int mq_per_sm = 1;

template <enum ox_dtype T, int MT, int NT, int WM, int WN>
static void mmq_launch(struct backend *b, const struct mat *w, const uint8_t *xl,
                       const uint32_t *xsc, float *y, int n, bool accumulate) {
    constexpr int BM = 16 * MT * WM, BN = 8 * NT * WN;
    cuda_state *s = cuda_of(b);
    const int n_groups = (int)(w->n_cols / 32);
    const unsigned row_tiles = cuda_blocks((size_t)w->n_rows, BM), tok_tiles = cuda_blocks(n, BN);
    const size_t outputs = (size_t)n * (size_t)w->n_rows;
    const int splits = mq_splits(b, (int64_t)row_tiles * tok_tiles, n_groups, outputs,
                                 mq_per_sm<T, MT, NT, WM, WN>);
    /* each split a whole number of stages */
    const int split_groups = (n_groups + splits * MQ_KG - 1) / (splits * MQ_KG) * MQ_KG;
    mmq_kernel<T, MT, NT, WM, WN><<<dim3(row_tiles, tok_tiles, (unsigned)splits), 32 * WM * WN,
                                    mq_smem<T, BM, BN>(), s->stream>>>(
        (const uint8_t *)w->data, w->row_bytes, (int)w->n_rows, (int)w->n_cols, xl, xsc,
        splits > 1 ? s->scratch : y, n, splits > 1 ? 0 : (int)accumulate, split_groups);
    CUDA_LAUNCHED(b, "cuda_mmq: kernel");
    if (splits > 1) {
        const unsigned blocks = cuda_blocks(outputs, 256), grid = blocks < 1024 ? blocks : 1024;
        mq_reduce_kernel<<<grid, 256, 0, s->stream>>>(s->scratch, y, outputs, splits,
                                                      (int)accumulate);
        CUDA_LAUNCHED(b, "cuda_mmq: reduce");
    }
}

/* Tiles by batch size, narrow ones for few tokens so fewer padding tokens are multiplied; on
 * matrices of 8M weights or more, wider ones for more tokens, which share the unpacking of the
 * weights among more of them: past 16 tokens 128 x 32 (8 warps), past 64 128 x 128 (16 warps).
 * H100, us: 32 tokens, 14336 x 4096 q4_K 54 against 62 with 64 x 32 tiles, 4096 x 4096 23.5
 * against 31 (but 2048 x 2048 q4_0 12.9 with two 64 x 16 tiles of tokens against 15.8: too few
 * tiles to fill the GPU); 128 tokens, q4_0 / q4_K: 2048 x 8192 34 / - against 43 with 128 x 64,
 * 4096 x 14336 96 / 111 against 124 / 147, 4096 x 4096 40 / 45 against 44 / 47. */
#define MQ_CONFIGS(X) X(1, 1, 4, 1) X(1, 2, 4, 1) X(1, 4, 8, 1) X(2, 4, 4, 2) X(2, 4, 4, 4)
constexpr int64_t MQ_WIDE_WEIGHTS = (int64_t)8 << 20;

template <enum ox_dtype T>
static void mmq_run_t(struct backend *b, const struct mat *w, const uint8_t *xl,
                      const uint32_t *xsc, float *y, int n, bool accumulate) {
    const bool wide = w->n_rows * w->n_cols >= MQ_WIDE_WEIGHTS;
    /* 128 tokens a tile only where that pads no more than 64 would: 160 tokens in two tiles
     * of 128 multiply 96 padding tokens, in three of 64 only 32 */
    const bool whole_128 = cuda_blocks(n, 128) * 128 <= cuda_blocks(n, 64) * 64;
    if (n > 64 && wide && whole_128)
        mmq_launch<T, 2, 4, 4, 4>(b, w, xl, xsc, y, n, accumulate);
    else if (n > 32)
        mmq_launch<T, 2, 4, 4, 2>(b, w, xl, xsc, y, n, accumulate);
    else if (n > 16 && wide)
        mmq_launch<T, 1, 4, 8, 1>(b, w, xl, xsc, y, n, accumulate);
    else if (n > 8)
        mmq_launch<T, 1, 2, 4, 1>(b, w, xl, xsc, y, n, accumulate);
    else
        mmq_launch<T, 1, 1, 4, 1>(b, w, xl, xsc, y, n, accumulate);
}

/* Over 48 KB of dynamic shared memory must be allowed per kernel, before any launch; then how
 * many blocks of it fit a multiprocessor. */
template <enum ox_dtype T> static cudaError_t mmq_allow_smem() {
    cudaError_t e = cudaSuccess;
#define MQ_ATTR_(mt, nt, wm, wn)                                                                   \
    if (e == cudaSuccess)                                                                          \
        e = cudaFuncSetAttribute(mmq_kernel<T, mt, nt, wm, wn>,                                    \
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,                      \
                                 (int)mq_smem<T, 16 * mt * wm, 8 * nt * wn>());                    \
    if (e == cudaSuccess)                                                                          \
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(                                         \
            &mq_per_sm<T, mt, nt, wm, wn>, mmq_kernel<T, mt, nt, wm, wn>, 32 * wm * wn,            \
            mq_smem<T, 16 * mt * wm, 8 * nt * wn>());
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

/* The most tokens of a matrix of these many weights the int8 kernel takes: the knobs are read
 * once (thread-safe initialisation); OX_CUDA_MMQ_MAX_N alone sets both limits. */
static int mmq_limit(int64_t weights) {
    static const int most = cuda_env_int("OX_CUDA_MMQ_MAX_N", CUDA_MMQ_MAX_N, 0, 65536);
    static const int small = cuda_env_int(
        "OX_CUDA_MMQ_SMALL_N", getenv("OX_CUDA_MMQ_MAX_N") ? most : CUDA_MMQ_SMALL_MAX_N, 0, 65536);
    static const int64_t small_weights =
        (int64_t)cuda_env_int("OX_CUDA_MMQ_SMALL_MW", (int)(CUDA_MMQ_SMALL_WEIGHTS >> 20), 0,
                              1 << 20)
        << 20;
    return weights < small_weights && small > most ? small : most;
}

int cuda_mmq_max_n(void) {
    return mmq_limit(0);
}

bool cuda_mmq_takes(struct backend *b, const struct mat *w, const float *x, int n) {
    switch (w->type) {
#define MQ_CASE_(name) case OX_DTYPE_##name:
        CVD_TYPES(MQ_CASE_)
#undef MQ_CASE_
        break;
    default: return false;
    }
    return mmq_int8_mma && n > cuda_q8_max_n() && n <= mmq_limit(w->n_rows * w->n_cols) &&
           cuda_q8_room(b, n, w->n_cols) && !((uintptr_t)x & 15) && /* quantizers read float4s */
           w->n_rows <= INT32_MAX && !(((uintptr_t)w->data | w->row_bytes) & 15);
}

bool cuda_mmq(struct backend *b, const struct mat *w, const float *x, float *y, int n,
              bool accumulate) {
    if (!cuda_mmq_takes(b, w, x, n))
        return false;
    /* x quantized once for the matmuls that read it in turn (q, k and v; gate and up) */
    cuda_state *s = cuda_of(b);
    uint8_t *xl = s->xm;
    uint32_t *xsc = (uint32_t *)(xl + (size_t)n * (size_t)w->n_cols);
    const bool q8k = mq_q8k_type(w->type);
    if (s->xm_src != x || s->xm_n != n || s->xm_cols != w->n_cols || s->xm_q8k != q8k) {
        const int64_t n_groups = (int64_t)n * (w->n_cols / 32);
        if (q8k) {
            const int64_t blocks = n_groups / 8;
            mq_quantize_k_kernel<<<cuda_blocks((size_t)blocks * 32, 256), 256, 0, s->stream>>>(
                x, xl, xsc, blocks);
        } else {
            mq_quantize_1_kernel<<<cuda_blocks((size_t)n_groups * 4, 256), 256, 0, s->stream>>>(
                x, xl, xsc, n_groups);
        }
        CUDA_LAUNCHED(b, "cuda_mmq: quantizing activations");
        s->xm_src = x, s->xm_n = n, s->xm_cols = w->n_cols, s->xm_q8k = q8k;
    }
    cuda_q8_written(b, y, n, w->n_rows);
    switch (w->type) {
#define MQ_CASE_(name)                                                                             \
    case OX_DTYPE_##name: mmq_run_t<OX_DTYPE_##name>(b, w, xl, xsc, y, n, accumulate); break;
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
