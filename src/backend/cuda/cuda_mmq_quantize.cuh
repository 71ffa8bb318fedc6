/* cuda_mmq_quantize.cuh: 8 values a lane into the int8 tensor-core matmul's activations (q8_K:
 * a warp per block of 256; q8_1: four lanes per group of 32), for the kernels that quantize
 * what they compute (cuda_mmq_quantize.cu's, the GLU's sums in cuda_mmq.cu). */
#ifndef OX_BACKEND_CUDA_MMQ_QUANTIZE_CUH
#define OX_BACKEND_CUDA_MMQ_QUANTIZE_CUH

#include "backend/cuda/cuda_vecdot.cuh"

/* q8_K: a warp's block of 256 values, lane l holding values 8l .. 8l + 7: bit for bit ggml's
 * quantize_row_q8_K (levels round half to even, at most 127; an all-zero block is all zero).
 * lv: the block's 256 levels; sc: its 8 groups' two words (float d, the halves' level sums as
 * int16s). */
__device__ __forceinline__ void mqq_put_k(const float (&v)[8], int lane, uint8_t *lv,
                                          uint32_t *sc) {
    float amax = 0.f, first_v = 0.f;
    int first = 0;
#pragma unroll
    for (int j = 0; j < 8; j++)
        if (fabsf(v[j]) > amax)
            amax = fabsf(v[j]), first = 8 * lane + j, first_v = v[j];
#pragma unroll
    for (int o = 16; o > 0; o /= 2) { /* the largest magnitude, first of equals */
        const float oa = __shfl_xor_sync(0xffffffffu, amax, o);
        const int oi = __shfl_xor_sync(0xffffffffu, first, o);
        const float ov = __shfl_xor_sync(0xffffffffu, first_v, o);
        if (oa > amax || (oa == amax && oi < first))
            amax = oa, first = oi, first_v = ov;
    }
    uint32_t q[2] = {0, 0};
    int sum = 0;
    float d = 0.f;
    if (amax != 0.f) {
        const float iscale = -127.f / first_v;
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
    ((uint2 *)lv)[lane] = make_uint2(q[0], q[1]);
    if (lane % 4 == 0) {
        uint32_t *g = sc + 2 * (lane / 4);
        g[0] = __float_as_uint(d);
        g[1] = ((uint32_t)sum & 0xffffu) | (uint32_t)second << 16;
    }
}

/* q8_1: a group of 32 values in four lanes (part = lane % 4), 8 values each (cvd_q8_level). All
 * lanes of the warp take part (shuffles); the ones not live store nothing. lv: the group's 32
 * levels; sc: its word (half d, int16 level sum). */
__device__ __forceinline__ void mqq_put_1(const float (&v)[8], int part, bool live, uint8_t *lv,
                                          uint32_t *sc) {
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
    ((uint2 *)lv)[part] = make_uint2(q[0], q[1]);
    if (part == 0)
        sc[0] = (uint32_t)cvd_q8_d_bits(amax) | (uint32_t)sum << 16;
}

__device__ __forceinline__ void mqq_load8(float (&v)[8], const float *p) {
    const float4 a = __ldg((const float4 *)p), c = __ldg((const float4 *)p + 1);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = c.x, v[5] = c.y, v[6] = c.z, v[7] = c.w;
}

#endif
