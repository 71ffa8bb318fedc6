/* cuda_mmq_kscales.cuh: the k-quants' (and iq4_xs's) scales as the integers they are stored as,
 * for cuda_mmq.cu, which sums a super-block's products in integers (sub-block scale times level
 * dot product, min times activation sum) and scales once per 256 columns, as llama.cpp's CPU
 * dot products against q8_K do. Rows are 16-byte aligned (cuda_mmq checks). */
#ifndef OX_BACKEND_CUDA_MMQ_KSCALES_CUH
#define OX_BACKEND_CUDA_MMQ_KSCALES_CUH

#include "backend/cuda/cuda_dequant.cuh"

/* Group g's scales packed in a word: byte 0 the first half's scale, byte 1 the second's (both
 * signed; equal for the types with one scale per 32), bytes 2 and 3 the halves' mins (unsigned;
 * equal, or zero without mins). The super-block's (d, -dmin) beside them: w = d sc q - dmin m. */
template <enum ox_dtype T> struct mqk;

__device__ __forceinline__ uint32_t mqk_pack(int sc0, int sc1, int mn0, int mn1) {
    return (uint32_t)(sc0 & 0xff) | (uint32_t)(sc1 & 0xff) << 8 | (uint32_t)mn0 << 16 |
           (uint32_t)mn1 << 24;
}

template <int BS, int OFF> __device__ __forceinline__ float mqk_half(const uint8_t *b) {
    return cdq_f16((uint16_t)cdq_u16<cdq_align(16, BS, OFF)>(b + OFF));
}

/* q2_K: byte 8h + 2j + half of the 16 holds the half's scale (low nibble) and min (high) */
template <> struct mqk<OX_DTYPE_Q2_K> {
    static constexpr int BS = 84;
    __device__ static uint32_t scales(const uint8_t *b, int s) {
        const int h = s / 4, j = s % 4, a = b[8 * h + 2 * j], c = b[8 * h + 2 * j + 1];
        return mqk_pack(a & 15, c & 15, a >> 4, c >> 4);
    }
    __device__ static float2 super(const uint8_t *b) {
        return make_float2(mqk_half<BS, 80>(b), -mqk_half<BS, 82>(b));
    }
};

template <> struct mqk<OX_DTYPE_Q3_K> {
    static constexpr int BS = 110;
    __device__ static uint32_t scales(const uint8_t *b, int s) {
        const int h = s / 4, j = s % 4;
        return mqk_pack(cdq_q3_K_scale(b + 96, 8 * h + 2 * j),
                        cdq_q3_K_scale(b + 96, 8 * h + 2 * j + 1), 0, 0);
    }
    __device__ static float2 super(const uint8_t *b) {
        return make_float2(mqk_half<BS, 108>(b), 0.f);
    }
};

template <int BYTES> struct mqk_k4 {
    static constexpr int BS = BYTES;
    __device__ static uint32_t scales(const uint8_t *b, int s) {
        int sc, mn;
        cdq_k4_scale_min(b + 4, s, &sc, &mn);
        return mqk_pack(sc, sc, mn, mn);
    }
    __device__ static float2 super(const uint8_t *b) {
        return make_float2(mqk_half<BS, 0>(b), -mqk_half<BS, 2>(b));
    }
};
template <> struct mqk<OX_DTYPE_Q4_K> : mqk_k4<144> {};
template <> struct mqk<OX_DTYPE_Q5_K> : mqk_k4<176> {};

/* q6_K: signed byte scales, one per 16, from byte 192 */
template <> struct mqk<OX_DTYPE_Q6_K> {
    static constexpr int BS = 210;
    __device__ static uint32_t scales(const uint8_t *b, int s) {
        const int h = s / 4, k = s % 4;
        const int8_t *sc = (const int8_t *)(b + 192 + 8 * h + 2 * k);
        return mqk_pack(sc[0], sc[1], 0, 0);
    }
    __device__ static float2 super(const uint8_t *b) {
        return make_float2(mqk_half<BS, 208>(b), 0.f);
    }
};

/* iq4_xs: six-bit scales (4 low bits in scales_l, 2 high in scales_h) minus 32 */
template <> struct mqk<OX_DTYPE_IQ4_XS> {
    static constexpr int BS = 136;
    __device__ static uint32_t scales(const uint8_t *b, int s) {
        const uint32_t scales_h = cdq_u16<cdq_align(16, BS, 2)>(b + 2);
        const int ls = (b[4 + s / 2] >> (4 * (s % 2)) & 15) | (int)(scales_h >> (2 * s) & 3) << 4;
        return mqk_pack(ls - 32, ls - 32, 0, 0);
    }
    __device__ static float2 super(const uint8_t *b) {
        return make_float2(mqk_half<BS, 0>(b), 0.f);
    }
};

#endif
