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
 * word); those with mins keep, in the planes of the others' mins (WMB) and token scales (XSB),
 * the operands of the mins' products (mq_fold): per row its 16 halves' mins as bytes, per token
 * its 16 halves' level sums as two byte planes, the high bits then the low. The others keep
 * float scales and d sq. Tiles of 128 x 192 and up keep one buffer of stored bytes (RAW_BUFS):
 * two would be over a block's shared memory for q6_K, so the next stage's copies wait for the
 * unpacking and go out while the warps multiply. */
template <enum ox_dtype T, int BM, int BN> struct mq_at {
    /* the scales' planes by group, rows (tokens) padded by 4 words: the unpacking's stores of a
     * warp (8 groups of 4 rows) fall on distinct banks */
    static constexpr int WST = BM + 4, XST = BN + 4;
    static constexpr int WQ = 0, XS = WQ + BM * MQ_WORDS, WSC = XS + 2 * BN * MQ_WORDS,
                         WMN = WSC + MQ_KG * WST, XSC = WMN + MQ_KG * WST, XMN = XSC + MQ_KG * XST,
                         WSUP = XMN + MQ_KG * XST, XSUP = WSUP + 2 * BM, XSR = XSUP + BN,
                         XSR_SIZE = BN * MQ_KG * mq_xsw<T>(), RAW = XSR + 2 * XSR_SIZE,
                         RAW_SIZE = BM * mq_raw<T>::ROOM / 4,
                         RAW_BUFS = BM * BN >= 128 * 192 ? 1 : 2, WORDS = RAW + RAW_BUFS * RAW_SIZE;
    static constexpr int WMB = WMN, XSB = XSC; /* 16 bytes a row; 16 a token, twice */
    static_assert(RAW % 4 == 0, "the stored bytes 16-byte aligned");
    static_assert(4 * BM <= MQ_KG * WST && 8 * BN <= MQ_KG * XST, "the mins' operands fit");
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
    uint8_t *raw = (uint8_t *)(sm + L::RAW + (L::RAW_BUFS > 1 ? buf : 0) * L::RAW_SIZE);
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

/* Buffer buf's token scale words as mq_at keeps them: q8_K's d (and, for types with mins, the
 * halves' level sums as the mins' mma operand), q8_1's d and d times the level sum. */
template <enum ox_dtype T, int BM, int BN, int TH>
__device__ __forceinline__ void mq_unpack_tokens(uint32_t *sm, int buf) {
    using L = mq_at<T, BM, BN>;
    constexpr bool Q8K = mq_q8k<T>();
    const uint32_t *xr = sm + L::XSR + buf * L::XSR_SIZE;
    for (int i = threadIdx.x; i < BN * MQ_KG; i += TH) {
        const int c = i / MQ_KG, kk = i % MQ_KG;
        if constexpr (Q8K) {
            if constexpr (mq_min<T>()) { /* the halves' level sums s = 64 hi + lo, |s| <= 2048: */
                const uint32_t h = xr[2 * i + 1]; /* hi in [-32, 31], lo in [0, 63] */
                const int s0 = (int)(int16_t)(h & 0xffffu), s1 = (int)h >> 16;
                uint16_t *xb = (uint16_t *)(sm + L::XSB) + 8 * c + kk;
                xb[0] = (uint16_t)((s0 >> 6 & 0xff) | (s1 >> 6 & 0xff) << 8);
                xb[8 * BN] = (uint16_t)((s0 & 63) | (s1 & 63) << 8);
            }
            if (kk == 0)
                sm[L::XSUP + c] = xr[2 * i];
        } else {
            const float xd = cdq_f16((uint16_t)(xr[i] & 0xffffu));
            ((float *)sm)[L::XSC + kk * L::XST + c] = xd;
            if constexpr (mq_min<T>())
                ((float *)sm)[L::XMN + kk * L::XST + c] = xd * (float)(int16_t)(xr[i] >> 16);
        }
    }
}

/* Group k of row r as mq_at keeps it: cw's levels (minus BIAS a byte: q4_0's and q5_0's made
 * signed, unpack_pair's q6_K and q3_K ones), its scale (the types of mq_q8k: the integer scale word
 * ks, and for k = 0 the super-block's d and -dmin in sup) and min. */
template <enum ox_dtype T, int BM, int BN, uint32_t BIAS>
__device__ __forceinline__ void mq_put_group(uint32_t *sm, int r, int k, const cvd_w &cw,
                                             uint32_t ks, float2 sup) {
    using L = mq_at<T, BM, BN>;
    uint32_t v[8];
#pragma unroll
    for (int j = 0; j < 8; j++)
        v[j] = BIAS ? cvd_sub_bytes(cw.v[j], BIAS) : cw.v[j];
    /* a row's 8 groups go to 8 lanes, 32 bytes apart: stored in one order they would hit
     * each bank twice per 16-byte store; groups 1, 3, 4, 6 store their second half first */
    uint4 *d = (uint4 *)(sm + L::WQ + r * MQ_WORDS + 8 * k);
    const int swap = (k ^ (k >> 2)) & 1;
    const uint4 lo = make_uint4(v[0], v[1], v[2], v[3]), hi = make_uint4(v[4], v[5], v[6], v[7]);
    d[swap] = swap ? hi : lo;
    d[swap ^ 1] = swap ? lo : hi;
    if constexpr (mq_q8k<T>()) {
        sm[L::WSC + k * L::WST + r] = ks;
        if constexpr (mq_min<T>()) /* the halves' mins: bytes 2k and 2k + 1 of the row's 16 */
            ((uint16_t *)(sm + L::WMB))[8 * r + k] = (uint16_t)(ks >> 16);
        if (k == 0)
            ((float2 *)(sm + L::WSUP))[r] = sup;
    } else {
        ((float *)sm)[L::WSC + k * L::WST + r] = cw.d[0];
        if constexpr (mq_min<T>())
            ((float *)sm)[L::WMN + k * L::WST + r] = cw.m[0];
    }
}

/* mq_unpack for the k-quants whose groups k and k + S share bytes (cvd_pair_stride): a thread
 * unpacks a pair from one read of them (H100, us, old / new: q6_K 14336 x 4096 at 32 tokens
 * 70.2 / 60.6, at 128 121.7 / 111.5; q3_K 82.4 / 73.8; q4_K 47.0 / 45.4; 8B Q4_K_M decode of
 * 32 sequences 4614 -> 4868 t/s, prompts unchanged). Lanes 8i .. 8i + 7 take one pair of 8 rows, so
 * each 16-byte store of a warp's quarter lands on 8 distinct bank quads (rows are MQ_WORDS apart).
 * A stage is one super-block: kg is 8, or 0 past the row's end. */
template <enum ox_dtype T, int BM, int BN, int TH>
__device__ __forceinline__ void mq_unpack_pairs(int g0, int kg, uint32_t *sm, int buf) {
    using L = mq_at<T, BM, BN>;
    using R = mq_raw<T>;
    constexpr int S = cvd_pair_stride<T>(), ITEMS = (BM * 4 + TH - 1) / TH;
    /* unpack_pair leaves q6_K's and q3_K's levels unsigned */
    constexpr uint32_t BIAS = T == OX_DTYPE_Q6_K   ? 0x20202020u
                              : T == OX_DTYPE_Q3_K ? 0x04040404u
                                                   : 0u;
    static_assert(mq_q8k<T>() && R::GPB == MQ_KG && (BM * 4) % TH % 32 == 0 && TH % 32 == 0,
                  "pairs of a super-block per thread, whole warps idle");
    const int p = threadIdx.x / 8 % 4, k = p / S * 2 * S + p % S;
    const int lead = g0 / R::GPB * R::BS % 16;
#pragma unroll
    for (int it = 0; it < ITEMS; it++) {
        const int r = (threadIdx.x + it * TH) / 32 * 8 + threadIdx.x % 8;
        if (BM * 4 % TH != 0 && r >= BM) /* more threads than pairs */
            break;
        const uint8_t *base =
            (const uint8_t *)(sm + L::RAW + (L::RAW_BUFS > 1 ? buf : 0) * L::RAW_SIZE) +
            r * R::ROOM + lead;
        cvd_w c0, c1;
        uint32_t ks0 = 0, ks1 = 0;
        float2 sup = make_float2(0.f, 0.f);
        if (k < kg) {
            vd<T>::template unpack_pair<R::ALIGN>(base, k, c0, c1);
            ks0 = mqk<T>::scales(base, k);
            ks1 = mqk<T>::scales(base, k + S);
            if (k == 0)
                sup = mqk<T>::super(base);
        } else {
#pragma unroll
            for (int j = 0; j < 8; j++)
                c0.v[j] = c1.v[j] = BIAS;
        }
        mq_put_group<T, BM, BN, BIAS>(sm, r, k, c0, ks0, sup);
        mq_put_group<T, BM, BN, BIAS>(sm, r, k + S, c1, ks1, sup);
    }
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
    if constexpr (cvd_pair_stride<T>() > 0) {
        mq_unpack_pairs<T, BM, BN, TH>(g0, kg, sm, buf);
    } else {
        const int k = threadIdx.x % MQ_KG;         /* the same group for all of a thread's items */
        const int lead = g0 / R::GPB * R::BS % 16; /* where the stage starts in its first chunk */
#pragma unroll
        for (int it = 0; it < ITEMS; it++) {
            const int r = (threadIdx.x + it * TH) / MQ_KG;
            const uint8_t *base =
                (const uint8_t *)(sm + L::RAW + (L::RAW_BUFS > 1 ? buf : 0) * L::RAW_SIZE) +
                r * R::ROOM + lead;
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
                    cw.v[j] = mq_bias<T>();
                cw.d[0] = cw.d[1] = cw.m[0] = cw.m[1] = 0.f;
            }
            mq_put_group<T, BM, BN, mq_bias<T>()>(sm, r, k, cw, ks, sup);
        }
    }
    mq_unpack_tokens<T, BM, BN, TH>(sm, buf);
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
                rs[mt][h] = sm[L::WSC + k * L::WST + row];
                if constexpr (MIN && !Q8K)
                    rm[mt][h] = ((const float *)sm)[L::WMN + k * L::WST + row];
            }
        if constexpr (!Q8K) {
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                const int tok = wtok + 8 * nt + 2 * ti;
                cd[nt] = *(const float2 *)(sm + L::XSC + k * L::XST + tok);
                if constexpr (MIN)
                    cm[nt] = *(const float2 *)(sm + L::XMN + k * L::XST + tok);
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
    if constexpr (mq_min<T>()) {
        /* sum over the 16 halves of min times level sum, in ia: two int8 products of 16 x 16
         * by 16 x 8 on the tensor cores, the rows' mins by the sums' high bytes, then by their
         * low bytes; the same integers the sum of 16 products gave, which took two instructions
         * per product and output (8B Q4_K_M, H100: 4.16k -> 4.42k t/s at 32 sequences, 7.10k
         * -> 7.71k at 128) */
        uint32_t am[MT][2];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int h = 0; h < 2; h++)
                am[mt][h] = sm[L::WMB + 4 * (wrow + 16 * mt + gi + 8 * h) + ti];
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            const int tok = wtok + 8 * nt + gi;
            const uint32_t bh = sm[L::XSB + 4 * tok + ti], bl = sm[L::XSB + 4 * (BN + tok) + ti];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                int ch[4] = {0, 0, 0, 0}, cl[4] = {0, 0, 0, 0};
                mq_mma_k16(ch, am[mt][0], am[mt][1], bh);
                mq_mma_k16(cl, am[mt][0], am[mt][1], bl);
#pragma unroll
                for (int e = 0; e < 4; e++)
                    ia[mt][nt][e] = 64 * ch[e] + cl[e];
            }
        }
        scale_in(std::true_type{});
    }
}

/* Up to three matrices of one type and width in one launch (q, k and v; gate and up): their
 * row tiles in turn along blockIdx.x, each its own output (y, or its place in a split's slab). */
struct mq_mats {
    const uint8_t *w[3];
    float *y[3];
    int rows[3];
    int tile_end[3]; /* the row tiles of matrices 0 .. m together */
    int count;
};

/* One block: BM = 16 MT WM weight rows times BN = 8 NT WN tokens, WM x WN warps each taking
 * MT row tiles of 16 and NT token tiles of 8, the columns [z split_groups, (z + 1)
 * split_groups) of split z = blockIdx.z (partial sums in the z-th slab of the scratch, slab
 * floats apart, when there are several). Per stage of MQ_KG groups the block's copies of the
 * weights' bytes and the activations land in shared memory (sent a stage ahead), the weights
 * are unpacked, then each warp multiplies.
 * y[t][row] = (y +) the sum. Rows 16-byte aligned. */
template <enum ox_dtype T, int MT, int NT, int WM, int WN>
__global__ void __launch_bounds__(32 * WM * WN)
    mmq_kernel(const mq_mats mats, size_t row_bytes, int n_cols, const uint8_t *__restrict__ xl,
               const uint32_t *__restrict__ xsc, int n, int accumulate, int split_groups,
               size_t slab) {
    constexpr int BM = 16 * MT * WM, BN = 8 * NT * WN, TH = 32 * WM * WN;
    extern __shared__ uint4 mq_smem_base[];
    uint32_t *sm = (uint32_t *)mq_smem_base;

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gi = lane / 4, ti = lane % 4;
    const int wrow = warp % WM * 16 * MT, wtok = warp / WM * 8 * NT;
    const int m = mats.count > 1 && (int)blockIdx.x >= mats.tile_end[0]
                      ? (mats.count > 2 && (int)blockIdx.x >= mats.tile_end[1] ? 2 : 1)
                      : 0;
    const uint8_t *__restrict__ w = m == 0 ? mats.w[0] : m == 1 ? mats.w[1] : mats.w[2];
    const int n_rows = m == 0 ? mats.rows[0] : m == 1 ? mats.rows[1] : mats.rows[2];
    float *__restrict__ y = m == 0 ? mats.y[0] : m == 1 ? mats.y[1] : mats.y[2];
    const int tile0 = m == 0 ? 0 : m == 1 ? mats.tile_end[0] : mats.tile_end[1];
    const int64_t r0 = (int64_t)((int)blockIdx.x - tile0) * BM;
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
    y += (size_t)blockIdx.z * slab; /* a split's partial sums (gridDim.z > 1) */
    if (g_begin < g_end)
        mq_issue<T, BM, BN, TH>(w, row_bytes, n_rows, xl, xsc, n, n_cols, r0, n0, g_begin,
                                min(MQ_KG, g_end - g_begin), sm, 0);
    /* a warp whose tokens all lie past n only copies and unpacks: its issue slots go to the
     * warps that multiply, so a tile's cost follows the tokens it holds, not its width */
    const bool busy = n0 + wtok < n;
    for (int g0 = g_begin, buf = 0; g0 < g_end; g0 += MQ_KG, buf ^= 1) {
        const int kg = min(MQ_KG, g_end - g0);
        mq_copies_wait();
        __syncthreads(); /* this stage's copies are in; the previous one is consumed */
        const bool next = g0 + MQ_KG < g_end;
        if (mq_at<T, BM, BN>::RAW_BUFS > 1 && next) /* on their way while this stage runs */
            mq_issue<T, BM, BN, TH>(w, row_bytes, n_rows, xl, xsc, n, n_cols, r0, n0, g0 + MQ_KG,
                                    min(MQ_KG, g_end - g0 - MQ_KG), sm, buf ^ 1);
        mq_unpack<T, BM, BN, TH>(g0, kg, sm, buf);
        __syncthreads();
        if (mq_at<T, BM, BN>::RAW_BUFS == 1 && next) /* the one buffer of bytes unpacked */
            mq_issue<T, BM, BN, TH>(w, row_bytes, n_rows, xl, xsc, n, n_cols, r0, n0, g0 + MQ_KG,
                                    min(MQ_KG, g_end - g0 - MQ_KG), sm, buf ^ 1);
        if (busy) {
            mq_multiply<T, MT, NT, BM, BN>(sm, buf, kg, wrow, wtok, acc, ia);
            if constexpr (mq_q8k<T>())
                mq_fold<T, MT, NT, BM, BN>(sm, wrow, wtok, acc, ia);
        }
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

/* A launch's count matrices (of one type, width and row size) and where their products go:
 * dst[m] (n x w[m].n_rows, added to where accumulate); with glu >= 0 (enum glu_kind), dst[0] =
 * act(w[0] x) * (w[1] x) instead, through the scratch (which the caller saw has room). */
struct mq_job {
    const struct mat *w;
    int count;
    float *const *dst;
    int glu;
    bool accumulate;
    bool quantize_out; /* glu: dst[0] also quantized, for the down projection (cuda_mmq_glu) */
};

template <enum ox_dtype T, int MT, int NT, int WM, int WN>
static void mmq_launch(struct backend *b, const mq_job &job, const uint8_t *xl, const uint32_t *xsc,
                       int n) {
    constexpr int BM = 16 * MT * WM, BN = 8 * NT * WN;
    cuda_state *s = cuda_of(b);
    const struct mat *w = job.w;
    const int n_groups = (int)(w->n_cols / 32);
    mq_mats mats = {};
    mats.count = job.count;
    size_t rows = 0;
    unsigned row_tiles = 0;
    for (int m = 0; m < job.count; m++) {
        mats.w[m] = (const uint8_t *)w[m].data, mats.rows[m] = (int)w[m].n_rows;
        row_tiles += cuda_blocks((size_t)w[m].n_rows, BM);
        mats.tile_end[m] = (int)row_tiles;
        rows += (size_t)w[m].n_rows;
    }
    const unsigned tok_tiles = cuda_blocks(n, BN);
    const size_t outputs = (size_t)n * rows;
    const int splits = mq_splits(b, (int64_t)row_tiles * tok_tiles, n_groups, outputs,
                                 mq_per_sm<T, MT, NT, WM, WN>);
    /* each split a whole number of stages */
    const int split_groups = (n_groups + splits * MQ_KG - 1) / (splits * MQ_KG) * MQ_KG;
    const bool gathered = splits > 1 || job.glu >= 0; /* the sums through the scratch */
    mq_dests d = {};
    size_t at = 0;
    for (int m = 0; m < job.count; m++) {
        mats.y[m] = gathered ? s->scratch + at : job.dst[m];
        d.y[m] = job.dst[m], d.end[m] = at += (size_t)n * (size_t)w[m].n_rows;
    }
    mmq_kernel<T, MT, NT, WM, WN>
        <<<dim3(row_tiles, tok_tiles, (unsigned)splits), 32 * WM * WN, mq_smem<T, BM, BN>(),
           s->stream>>>(mats, w->row_bytes, (int)w->n_cols, xl, xsc, n,
                        gathered ? 0 : (int)job.accumulate, split_groups, outputs);
    CUDA_LAUNCHED(b, "cuda_mmq: kernel");
    if (job.glu >= 0 && job.quantize_out) {
        const size_t count = (size_t)n * (size_t)w[0].n_rows;
        const unsigned blocks = cuda_blocks(count / 8, 256), grid = blocks < 1024 ? blocks : 1024;
        uint8_t *lv = s->xm;
        uint32_t *sc = (uint32_t *)(lv + count);
        mq_reduce_glu_q_kernel<mq_q8k<T>()><<<grid, 256, 0, s->stream>>>(
            s->scratch, job.dst[0], count, outputs, splits, job.glu, lv, sc);
        CUDA_LAUNCHED(b, "cuda_mmq: reduce");
        s->xm_src = job.dst[0], s->xm_n = n, s->xm_cols = w[0].n_rows, s->xm_q8k = mq_q8k<T>();
    } else if (job.glu >= 0) {
        const size_t count = (size_t)n * (size_t)w[0].n_rows;
        const unsigned blocks = cuda_blocks(count, 256), grid = blocks < 1024 ? blocks : 1024;
        mq_reduce_glu_kernel<<<grid, 256, 0, s->stream>>>(s->scratch, job.dst[0], count, outputs,
                                                          splits, job.glu);
        CUDA_LAUNCHED(b, "cuda_mmq: reduce");
    } else if (splits > 1) {
        const unsigned blocks = cuda_blocks(outputs, 256), grid = blocks < 1024 ? blocks : 1024;
        mq_reduce_kernel<<<grid, 256, 0, s->stream>>>(s->scratch, d, outputs, splits,
                                                      (int)job.accumulate);
        CUDA_LAUNCHED(b, "cuda_mmq: reduce");
    }
}

/* Tiles by batch size, narrow ones for few tokens so fewer padding tokens are multiplied; on
 * matrices of 8M weights or more, wider ones for more tokens, which share the unpacking of the
 * weights among more of them: past 16 tokens 128 x 32 (8 warps), past 64 128 x 128 (16 warps).
 * H100, us: 32 tokens, 14336 x 4096 q4_K 54 against 62 with 64 x 32 tiles, 4096 x 4096 23.5
 * against 31 (but 2048 x 2048 q4_0 12.9 with two 64 x 16 tiles of tokens against 15.8: too few
 * tiles to fill the GPU); 128 tokens, q4_0 / q4_K: 2048 x 8192 34 / - against 43 with 128 x 64,
 * 4096 x 4096 40 / 45 against 44 / 47.
 * From MQ_TALL_FROM to MQ_TALL_N tokens, 64 x 192 (16 warps): the weights unpacked once, where
 * tiles of 64 or 128 tokens unpacked them two or three times and made a step of 160 sequences cost
 * what one of 256 does; the warps past the batch's last token skip their products. H100, us,
 * 4096 x 4096 q4_K / q4_0 at 160 and 192 tokens: 49.9 / 45.7 and 53.4 / 48.7 against 68.5 /
 * 59.7 and 70.3 / 62.0 by tiles of 64; at 224 and 256, two of these tiles cost 82 / 73 against
 * 63 / 58 for tiles of 128 (q4_K) and 64 (q4_0), which keep those.
 * Wide matrices of 129 to 160 tokens take 128 x 160 tiles (16 warps of 32 x 40), one per 128
 * rows: the 8B's 14336-row matrices then fill the GPU once (112 blocks), where the tall tiles
 * took two rounds of 224 (H200, us, q4_K / q6_K 14336 x 4096 at 160 tokens: 101.7 / 144.9
 * against 137.8 / 180.6; the 8B Q4_K_M decoding 160 sequences 8.76k t/s against 7.42k, 128
 * 8.37k). The 1B's matrices gain nothing (28.5k / 28.4k t/s with them all on these). Where a
 * type's tile is over the shared memory a block may have, the tall ones stay.
 * 161 to 192 tokens on wide matrices: 128 x 192 tiles, again one round of blocks where the tall
 * ones took two (H100, us, 14336 x 4096 at 192 tokens, q4_K / q6_K / q4_0: 121.2 / 165.8 / 117.5
 * by 16 warps of 32 x 48, 151.7 / 149.3 / 160.0 by 8 warps of 64 x 48, against 144.9 / 178.3 /
 * 144.9 by the tall tiles; H200, the 8B Q4_K_M decoding 192 sequences 8.75k t/s against
 * 8.20k, the 1B Q4_0 29.4k against 28.3k). The types whose products go by halves (two sets of
 * products in registers) take the 8 warps, the others the 16 (mq_used). The types scaled in
 * float take 128 x 224 tiles for 193 to 224 tokens (H200, 224 sequences: 1B Q4_0 29.26k t/s
 * against 28.56k with tiles of 128, 8B Q4_0 8.91k against 8.87k). */
/* clang-format off */
#define MQ_CONFIGS(X)                                                                              \
    X(1, 1, 4, 1) X(1, 2, 4, 1) X(1, 4, 8, 1) X(2, 4, 4, 2) X(2, 4, 4, 4) X(2, 3, 2, 8)            \
    X(2, 5, 4, 4) X(2, 6, 4, 4) X(4, 6, 2, 4) X(2, 7, 4, 4)
/* clang-format on */
constexpr int64_t MQ_WIDE_WEIGHTS = (int64_t)8 << 20;
constexpr int MQ_TALL_FROM = 128, MQ_TALL_N = 192; /* 64 x 192: 8 tokens x NT 3 x WN 8 */
constexpr int MQ_WIDE_N = 224; /* the widest 128-row tile: 8 tokens x NT 7 x WN 4 */

/* Whether type T has this tile: of the two 128 x 192 ones, one per type; 128 x 224 only for
 * the types that scale each group in float (the others' sums spill 420-530 bytes). */
template <enum ox_dtype T, int MT, int NT, int WM, int WN> constexpr bool mq_used() {
    if (NT == 7)
        return !mq_q8k<T>();
    return NT != 6 || WN != 4 || (MT == 4) == mq_halves<T>();
}

/* The tile's launch where it fits the shared memory; false where it does not. */
template <enum ox_dtype T, int MT, int NT, int WM, int WN>
static bool mmq_launch_fits(struct backend *b, const mq_job &job, const uint8_t *xl,
                            const uint32_t *xsc, int n) {
    if ((mq_per_sm<T, MT, NT, WM, WN>) == 0)
        return false;
    mmq_launch<T, MT, NT, WM, WN>(b, job, xl, xsc, n);
    return true;
}

/* 129 to 224 tokens in one tile of 128 rows by 160, 192 or 224 tokens, where the type has it
 * and it fits the shared memory; false where not (the tall tiles or those of 128 tokens then
 * take the batch). */
template <enum ox_dtype T>
static bool mmq_run_wide(struct backend *b, const mq_job &job, const uint8_t *xl,
                         const uint32_t *xsc, int n) {
    constexpr int MT = mq_halves<T>() ? 4 : 2, WM = 8 / MT;
    if (n <= 160)
        return mmq_launch_fits<T, 2, 5, 4, 4>(b, job, xl, xsc, n);
    if (n <= 192)
        return mmq_launch_fits<T, MT, 6, WM, 4>(b, job, xl, xsc, n);
    if constexpr (mq_used<T, 2, 7, 4, 4>())
        return mmq_launch_fits<T, 2, 7, 4, 4>(b, job, xl, xsc, n);
    return false;
}

template <enum ox_dtype T>
static void mmq_run_t(struct backend *b, const mq_job &job, const uint8_t *xl, const uint32_t *xsc,
                      int n) {
    /* a measuring knob: the batches past which the 64 x 192 tiles take over */
    static const int tall_from = cuda_env_int("OX_CUDA_MMQ_TALL_FROM", MQ_TALL_FROM, 0, 65536);
    /* and the most tokens of wide matrices the 128-row tiles of 160 to 224 tokens take */
    static const int wide_n = cuda_env_int("OX_CUDA_MMQ_WIDE_N", MQ_WIDE_N, 0, MQ_WIDE_N);
    int64_t weights = 0;
    for (int m = 0; m < job.count; m++)
        weights += job.w[m].n_rows * job.w[m].n_cols;
    const bool wide = weights >= MQ_WIDE_WEIGHTS;
    /* 128 tokens a tile only where that pads no more than 64 would */
    const bool whole_128 = cuda_blocks(n, 128) * 128 <= cuda_blocks(n, 64) * 64;
    if (wide && n > 128 && n <= wide_n && mmq_run_wide<T>(b, job, xl, xsc, n))
        return;
    if (n > tall_from && n <= MQ_TALL_N)
        mmq_launch<T, 2, 3, 2, 8>(b, job, xl, xsc, n);
    else if (n > 64 && wide && whole_128)
        mmq_launch<T, 2, 4, 4, 4>(b, job, xl, xsc, n);
    else if (n > 32)
        mmq_launch<T, 2, 4, 4, 2>(b, job, xl, xsc, n);
    else if (n > 16 && wide)
        mmq_launch<T, 1, 4, 8, 1>(b, job, xl, xsc, n);
    else if (n > 8)
        mmq_launch<T, 1, 2, 4, 1>(b, job, xl, xsc, n);
    else
        mmq_launch<T, 1, 1, 4, 1>(b, job, xl, xsc, n);
}

/* Over 48 KB of dynamic shared memory must be allowed per kernel, before any launch; then how
 * many blocks of it fit a multiprocessor (none for a tile whose memory is over the device's
 * limit: mmq_run_t passes it by). */
template <enum ox_dtype T> static cudaError_t mmq_allow_smem(int limit) {
    cudaError_t e = cudaSuccess;
#define MQ_ATTR_(mt, nt, wm, wn)                                                                   \
    if constexpr (!mq_used<T, mt, nt, wm, wn>())                                                   \
        mq_per_sm<T, mt, nt, wm, wn> = 0;                                                          \
    else if (mq_smem<T, 16 * mt * wm, 8 * nt * wn>() > (size_t)limit)                              \
        mq_per_sm<T, mt, nt, wm, wn> = 0;                                                          \
    else if (e == cudaSuccess &&                                                                   \
             (e = cudaFuncSetAttribute(                                                            \
                  mmq_kernel<T, mt, nt, wm, wn>, cudaFuncAttributeMaxDynamicSharedMemorySize,      \
                  (int)mq_smem<T, 16 * mt * wm, 8 * nt * wn>())) == cudaSuccess)                   \
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
    return mmq_int8_mma && n > cuda_q8_max_n() && !cuda_one_token(b, n) &&
           n <= mmq_limit(w->n_rows * w->n_cols) && cuda_q8_room(b, n, w->n_cols) &&
           !((uintptr_t)x & 15) && /* quantizers read float4s */
           w->n_rows <= INT32_MAX && !(((uintptr_t)w->data | w->row_bytes) & 15);
}

/* x's rows quantized as w's kernel reads them, unless they already are (the matmuls that read
 * them in turn: q, k and v; gate and up); through the norm, the copy is not kept for x. */
static void mmq_input(struct backend *b, const struct mat *w, const float *x,
                      const struct norm_in *norm, int n, uint8_t **xl, uint32_t **xsc) {
    cuda_state *s = cuda_of(b);
    *xl = s->xm;
    *xsc = (uint32_t *)(s->xm + (size_t)n * (size_t)w->n_cols);
    const bool q8k = mq_q8k_type(w->type);
    if (norm || s->xm_src != x || s->xm_n != n || s->xm_cols != w->n_cols || s->xm_q8k != q8k) {
        cuda_mmq_quantize(b, x, norm, n, w->n_cols, q8k, *xl, *xsc);
        s->xm_src = norm ? nullptr : x, s->xm_n = n, s->xm_cols = w->n_cols, s->xm_q8k = q8k;
    }
}

/* The job's launch (its x quantized already). */
static void mmq_run(struct backend *b, const mq_job &job, const uint8_t *xl, const uint32_t *xsc,
                    int n) {
    for (int m = 0; m < (job.glu >= 0 ? 1 : job.count); m++)
        cuda_q8_written(b, job.dst[m], n, job.w[m].n_rows);
    switch (job.w->type) {
#define MQ_CASE_(name)                                                                             \
    case OX_DTYPE_##name: mmq_run_t<OX_DTYPE_##name>(b, job, xl, xsc, n); break;
        CVD_TYPES(MQ_CASE_)
#undef MQ_CASE_
    default: break;
    }
}

bool cuda_mmq(struct backend *b, const struct mat *w, const float *x, float *y, int n,
              bool accumulate) {
    if (!cuda_mmq_takes(b, w, x, n))
        return false;
    uint8_t *xl;
    uint32_t *xsc;
    mmq_input(b, w, x, nullptr, n, &xl, &xsc);
    mmq_run(b, {w, 1, &y, -1, accumulate, false}, xl, xsc, n);
    return true;
}

/* Whether the int8 kernel takes all count matrices, of one width and one form of activations,
 * with x through this norm. */
static bool mmq_takes_all(struct backend *b, const struct mat *w, int count, const float *x,
                          const struct norm_in *norm, int n) {
    for (int m = 0; m < count; m++)
        if (w[m].n_rows <= 0 || !cuda_mmq_takes(b, &w[m], x, n) || w[m].n_cols != w[0].n_cols ||
            mq_q8k_type(w[m].type) != mq_q8k_type(w[0].type))
            return false;
    return cuda_mmq_norm_takes(x, norm, w->n_cols);
}

static bool mmq_same_kind(const struct mat *a, const struct mat *c) {
    return a->type == c->type && a->row_bytes == c->row_bytes;
}

/* x quantized once; a launch for each run of matrices of one type (Q4_K_M's q and k are q4_K
 * where its v may be q6_K). */
bool cuda_mmq_multi(struct backend *b, int count, const struct mat *w, const float *x,
                    const struct norm_in *norm, float *const *y, int n) {
    if (count < 1 || count > 3 || !mmq_takes_all(b, w, count, x, norm, n))
        return false;
    uint8_t *xl;
    uint32_t *xsc;
    mmq_input(b, w, x, norm, n, &xl, &xsc);
    for (int m0 = 0, m1; m0 < count; m0 = m1) {
        for (m1 = m0 + 1; m1 < count && mmq_same_kind(&w[m0], &w[m1]);)
            m1++;
        mmq_run(b, {&w[m0], m1 - m0, &y[m0], -1, false, false}, xl, xsc, n);
    }
    return true;
}

bool cuda_mmq_glu(struct backend *b, enum glu_kind kind, const struct mat *gate,
                  const struct mat *up, const float *x, const struct norm_in *norm, float *y,
                  int n) {
    const struct mat w[2] = {*gate, *up};
    /* both products go through the scratch before the GLU */
    if (!mmq_same_kind(gate, up) || !mmq_takes_all(b, w, 2, x, norm, n) ||
        (size_t)n * (size_t)(gate->n_rows + up->n_rows) > cuda_of(b)->scratch_floats)
        return false;
    uint8_t *xl;
    uint32_t *xsc;
    mmq_input(b, gate, x, norm, n, &xl, &xsc);
    /* the output quantized as it is made, in the form of gate's type, which the down
     * projection usually shares (if not, it quantizes again): whole blocks of a row */
    const int64_t rows = gate->n_rows;
    const bool quantize = rows % (mq_q8k_type(gate->type) ? 256 : 32) == 0 &&
                          cuda_q8_room(b, n, rows) && !((uintptr_t)y & 15);
    mmq_run(b, {w, 2, &y, (int)kind, false, quantize}, xl, xsc, n);
    return true;
}

cudaError_t cuda_mmq_init(void) {
    int device = 0, major = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    mmq_int8_mma = major >= 8;
    int limit = 0;
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    if (e == cudaSuccess) /* this file's copy of the iq4_nl levels (cuda_dequant.cuh) */
        e = cudaMemcpyToSymbol(cdq_iq4nl, iq4nl_values, sizeof iq4nl_values);
#define MQ_INIT_(name)                                                                             \
    if (e == cudaSuccess)                                                                          \
        e = mmq_allow_smem<OX_DTYPE_##name>(limit);
    CVD_TYPES(MQ_INIT_)
#undef MQ_INIT_
    return e;
}
