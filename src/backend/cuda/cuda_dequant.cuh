/* cuda_dequant.cuh: GGUF block dequantization for host and device, 32 consecutive elements of a
 * row at a time, bit-identical with src/quant/dequant_*.c. */
#ifndef OX_BACKEND_CUDA_DEQUANT_CUH
#define OX_BACKEND_CUDA_DEQUANT_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include "oxidize.h"
extern "C" {
#include "quant/iq_tables.h"
}

/* Usage: dq<T>::group<A>(base, g, y) writes elements 32g .. 32g+31 of the row that starts at
 * base (type T's layout) to y[0..31]. A is the alignment in bytes (1, 2, 4, 8 or 16) that base is
 * known to have: with A = 16 the fields are read with the widest loads their offsets allow.
 * The types the kernels handle, for switch statements and tests: */
/* clang-format off */
#define CDQ_TYPES(X)                                                                               \
    X(F32) X(F16) X(BF16)                                                                          \
    X(Q4_0) X(Q4_1) X(Q5_0) X(Q5_1) X(Q8_0) X(Q1_0) X(Q2_0)                                        \
    X(Q2_K) X(Q3_K) X(Q4_K) X(Q5_K) X(Q6_K)                                                        \
    X(IQ4_NL) X(IQ4_XS) X(IQ3_S) X(MXFP4) X(TQ1_0) X(TQ2_0)
/* clang-format on */

/* Fills the device copies of the lookup tables (iq4_nl levels, e2m1 levels, iq3_s grid) that the
 * kernels of cuda_matmul.cu read; call once per device before any matmul or get_rows of an
 * IQ4_NL, IQ4_XS, IQ3_S or MXFP4 weight. Defined in cuda_matmul.cu. */
cudaError_t cuda_dequant_init(void);

#define CDQ_HD __host__ __device__ __forceinline__
/* Unrolling is for the device; the host compiler would warn about the pragma. */
#ifdef __CUDA_ARCH__
#define CDQ_UNROLL _Pragma("unroll")
#else
#define CDQ_UNROLL
#endif

/* Device tables: static, so each .cu that includes this header has its own copy (no -rdc); only
 * cuda_matmul.cu's are filled, by cuda_dequant_init. Host code reads the CPU tables. */
static __device__ int8_t cdq_iq4nl[16];
static __device__ int8_t cdq_e2m1[16];
static __device__ uint32_t cdq_iq3s_grid[512];

static_assert(sizeof iq3s_grid == sizeof cdq_iq3s_grid, "iq3s grid size");

/* ---- exact float arithmetic: the CPU reference is compiled with -ffp-contract=off, so every
 * product and sum is rounded on its own; nvcc would fuse a * b - c into one FMA otherwise. ---- */

CDQ_HD float cdq_mul(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

CDQ_HD float cdq_add(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

CDQ_HD float cdq_sub(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

/* Integer levels are small (|v| < 2^24): the conversion is exact, as C's. */
CDQ_HD float cdq_i2f(int v) {
    return (float)v;
}

CDQ_HD float cdq_from_bits(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

/* fp16 -> fp32 as core/fp16.h: exact; inf and NaN built from bits (NaN made quiet with its
 * payload kept), which the device's cvt would canonicalise. */
CDQ_HD float cdq_f16(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    const uint32_t exp = (h >> 10) & 0x1f;
    const uint32_t mant = h & 0x3ff;
    if (exp == 0x1f)
        return cdq_from_bits(sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0));
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half(h)); /* exact for finite values, subnormals included */
#else
    if (exp != 0)
        return cdq_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
    if (mant == 0)
        return cdq_from_bits(sign);
    const float f = (float)mant * 0x1p-24f; /* subnormal half: exact */
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return cdq_from_bits(sign | u);
#endif
}

CDQ_HD float cdq_bf16(uint16_t h) {
    return cdq_from_bits((uint32_t)h << 16);
}

/* ---- loads: a field at byte offset off of a block of bs bytes, under a base aligned to a, is
 * aligned to the largest power of two dividing a, bs and off. ---- */

__host__ __device__ constexpr int cdq_align(int a, int bs, int off) {
    while (a > 1 && (bs % a != 0 || off % a != 0))
        a /= 2;
    return a;
}

/* Little-endian 16-bit word at p, which is aligned to A. */
template <int A> CDQ_HD uint32_t cdq_u16(const uint8_t *p) {
#ifdef __CUDA_ARCH__
    if constexpr (A % 2 == 0)
        return *(const uint16_t *)p;
    else
        return (uint32_t)p[0] | (uint32_t)p[1] << 8;
#else
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
#endif
}

/* N bytes (a multiple of 4) at p, aligned to A, into N/4 little-endian words. */
template <int N, int A> CDQ_HD void cdq_load(const uint8_t *p, uint32_t *w) {
    static_assert(N % 4 == 0, "whole words");
#ifdef __CUDA_ARCH__
    if constexpr (A % 16 == 0 && N % 16 == 0) {
        CDQ_UNROLL
        for (int i = 0; i < N / 16; i++) {
            const uint4 v = ((const uint4 *)p)[i];
            w[4 * i] = v.x;
            w[4 * i + 1] = v.y;
            w[4 * i + 2] = v.z;
            w[4 * i + 3] = v.w;
        }
    } else if constexpr (A % 8 == 0 && N % 8 == 0) {
        CDQ_UNROLL
        for (int i = 0; i < N / 8; i++) {
            const uint2 v = ((const uint2 *)p)[i];
            w[2 * i] = v.x;
            w[2 * i + 1] = v.y;
        }
    } else if constexpr (A % 4 == 0) {
        CDQ_UNROLL
        for (int i = 0; i < N / 4; i++)
            w[i] = ((const uint32_t *)p)[i];
    } else if constexpr (A % 2 == 0) {
        CDQ_UNROLL
        for (int i = 0; i < N / 4; i++)
            w[i] = (uint32_t)((const uint16_t *)p)[2 * i] |
                   (uint32_t)((const uint16_t *)p)[2 * i + 1] << 16;
    } else {
        CDQ_UNROLL
        for (int i = 0; i < N / 4; i++)
            w[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
                   (uint32_t)p[4 * i + 3] << 24;
    }
#else
    memcpy(w, p, N);
#endif
}

/* Byte j of a word array. */
CDQ_HD int cdq_byte(const uint32_t *w, int j) {
    return (int)((w[j / 4] >> (8 * (j % 4))) & 0xff);
}

CDQ_HD int cdq_iq4nl_level(int q) {
#ifdef __CUDA_ARCH__
    return cdq_iq4nl[q];
#else
    return iq4nl_values[q];
#endif
}

CDQ_HD int cdq_e2m1_level(int q) {
#ifdef __CUDA_ARCH__
    return cdq_e2m1[q];
#else
    return fp4_e2m1_values[q];
#endif
}

CDQ_HD uint32_t cdq_iq3s_entry(int idx) {
#ifdef __CUDA_ARCH__
    return cdq_iq3s_grid[idx];
#else
    return iq3s_grid[idx];
#endif
}

/* ---- one specialization per type: QK elements per block of BS bytes ---- */

template <enum ox_dtype T> struct dq;

/* The plain types: 32 elements are 32 consecutive values. elem() reads one (row tails whose
 * length is not a multiple of 32). */
template <> struct dq<OX_DTYPE_F32> {
    static constexpr int QK = 1, BS = 4;
    template <int A> CDQ_HD static void group(const uint8_t *base, int64_t g, float *y) {
        uint32_t w[32];
        cdq_load<128, cdq_align(A, 128, 0)>(base + 128 * g, w);
        CDQ_UNROLL
        for (int j = 0; j < 32; j++)
            y[j] = cdq_from_bits(w[j]);
    }
    CDQ_HD static float elem(const uint8_t *base, int64_t i) {
        uint32_t w;
        cdq_load<4, 1>(base + 4 * i, &w);
        return cdq_from_bits(w);
    }
};

template <> struct dq<OX_DTYPE_F16> {
    static constexpr int QK = 1, BS = 2;
    template <int A> CDQ_HD static void group(const uint8_t *base, int64_t g, float *y) {
        uint32_t w[16];
        cdq_load<64, cdq_align(A, 64, 0)>(base + 64 * g, w);
        CDQ_UNROLL
        for (int j = 0; j < 16; j++) {
            y[2 * j] = cdq_f16((uint16_t)(w[j] & 0xffff));
            y[2 * j + 1] = cdq_f16((uint16_t)(w[j] >> 16));
        }
    }
    CDQ_HD static float elem(const uint8_t *base, int64_t i) {
        return cdq_f16((uint16_t)cdq_u16<1>(base + 2 * i));
    }
};

template <> struct dq<OX_DTYPE_BF16> {
    static constexpr int QK = 1, BS = 2;
    template <int A> CDQ_HD static void group(const uint8_t *base, int64_t g, float *y) {
        uint32_t w[16];
        cdq_load<64, cdq_align(A, 64, 0)>(base + 64 * g, w);
        CDQ_UNROLL
        for (int j = 0; j < 16; j++) {
            y[2 * j] = cdq_bf16((uint16_t)(w[j] & 0xffff));
            y[2 * j + 1] = cdq_bf16((uint16_t)(w[j] >> 16));
        }
    }
    CDQ_HD static float elem(const uint8_t *base, int64_t i) {
        return cdq_bf16((uint16_t)cdq_u16<1>(base + 2 * i));
    }
};

/* ---- legacy types: byte j of the 16 qs bytes holds element j (low nibble) and j + 16 ---- */

template <> struct dq<OX_DTYPE_Q4_0> {
    static constexpr int QK = 32, BS = 18;
    template <int A> CDQ_HD static void group(const uint8_t *base, int64_t g, float *y) {
        const uint8_t *b = base + BS * g;
        const float d = cdq_f16((uint16_t)cdq_u16<cdq_align(A, BS, 0)>(b));
        uint32_t w[4];
        cdq_load<16, cdq_align(A, BS, 2)>(b + 2, w);
        CDQ_UNROLL
        for (int j = 0; j < 16; j++) {
            const int q = cdq_byte(w, j);
            y[j] = cdq_mul(cdq_i2f((q & 0x0f) - 8), d);
            y[j + 16] = cdq_mul(cdq_i2f((q >> 4) - 8), d);
        }
    }
};

template <> struct dq<OX_DTYPE_Q4_1> {
    static constexpr int QK = 32, BS = 20;
    template <int A> CDQ_HD static void group(const uint8_t *base, int64_t g, float *y) {
        const uint8_t *b = base + BS * g;
        const float d = cdq_f16((uint16_t)cdq_u16<cdq_align(A, BS, 0)>(b));
        const float m = cdq_f16((uint16_t)cdq_u16<cdq_align(A, BS, 2)>(b + 2));
        uint32_t w[4];
        cdq_load<16, cdq_align(A, BS, 4)>(b + 4, w);
        CDQ_UNROLL
        for (int j = 0; j < 16; j++) {
            const int q = cdq_byte(w, j);
            y[j] = cdq_add(cdq_mul(cdq_i2f(q & 0x0f), d), m);
            y[j + 16] = cdq_add(cdq_mul(cdq_i2f(q >> 4), d), m);
        }
    }
};

/* q5: bit j of the little-endian qh word is the 5th bit of element j */
template <> struct dq<OX_DTYPE_Q5_0> {
    static constexpr int QK = 32, BS = 22;
    template <int A> CDQ_HD static void group(const uint8_t *base, int64_t g, float *y) {
        const uint8_t *b = base + BS * g;
        const float d = cdq_f16((uint16_t)cdq_u16<cdq_align(A, BS, 0)>(b));
        uint32_t qh, w[4];
        cdq_load<4, cdq_align(A, BS, 2)>(b + 2, &qh);
        cdq_load<16, cdq_align(A, BS, 6)>(b + 6, w);
        CDQ_UNROLL
        for (int j = 0; j < 16; j++) {
            const int q = cdq_byte(w, j);
            const int lo = (q & 0x0f) | (int)((qh >> j) & 1) << 4;
            const int hi = (q >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            y[j] = cdq_mul(cdq_i2f(lo - 16), d);
            y[j + 16] = cdq_mul(cdq_i2f(hi - 16), d);
        }
    }
};

template <> struct dq<OX_DTYPE_Q5_1> {
    static constexpr int QK = 32, BS = 24;
    template <int A> CDQ_HD static void group(const uint8_t *base, int64_t g, float *y) {
        const uint8_t *b = base + BS * g;
        const float d = cdq_f16((uint16_t)cdq_u16<cdq_align(A, BS, 0)>(b));
        const float m = cdq_f16((uint16_t)cdq_u16<cdq_align(A, BS, 2)>(b + 2));
        uint32_t qh, w[4];
        cdq_load<4, cdq_align(A, BS, 4)>(b + 4, &qh);
        cdq_load<16, cdq_align(A, BS, 8)>(b + 8, w);
        CDQ_UNROLL
        for (int j = 0; j < 16; j++) {
            const int q = cdq_byte(w, j);
            const int lo = (q & 0x0f) | (int)((qh >> j) & 1) << 4;
            const int hi = (q >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            y[j] = cdq_add(cdq_mul(cdq_i2f(lo), d), m);
            y[j + 16] = cdq_add(cdq_mul(cdq_i2f(hi), d), m);
        }
    }
};

template <> struct dq<OX_DTYPE_Q8_0> {
    static constexpr int QK = 32, BS = 34;
    template <int A> CDQ_HD static void group(const uint8_t *base, int64_t g, float *y) {
        const uint8_t *b = base + BS * g;
        const float d = cdq_f16((uint16_t)cdq_u16<cdq_align(A, BS, 0)>(b));
        uint32_t w[8];
        cdq_load<32, cdq_align(A, BS, 2)>(b + 2, w);
        CDQ_UNROLL
        for (int j = 0; j < 32; j++)
            y[j] = cdq_mul(cdq_i2f((int8_t)cdq_byte(w, j)), d);
    }
};

/* q1_0: 128 per block, element j is bit j%8 of byte j/8: a group is 4 bytes, one word */
template <> struct dq<OX_DTYPE_Q1_0> {
    static constexpr int QK = 128, BS = 18;
    template <int A> CDQ_HD static void group(const uint8_t *base, int64_t g, float *y) {
        const uint8_t *b = base + BS * (g / 4);
        const int s = (int)(g % 4);
        const float d = cdq_f16((uint16_t)cdq_u16<cdq_align(A, BS, 0)>(b));
        uint32_t bits;
        cdq_load<4, cdq_align(A, BS, 2)>(b + 2 + 4 * s, &bits);
        CDQ_UNROLL
        for (int j = 0; j < 32; j++)
            y[j] = (bits >> j) & 1 ? d : -d;
    }
};

/* q2_0: 64 per block, four 2-bit codes per byte lowest first: a group is 8 bytes */
template <> struct dq<OX_DTYPE_Q2_0> {
    static constexpr int QK = 64, BS = 18;
    template <int A> CDQ_HD static void group(const uint8_t *base, int64_t g, float *y) {
        const uint8_t *b = base + BS * (g / 2);
        const int s = (int)(g % 2);
        const float d = cdq_f16((uint16_t)cdq_u16<cdq_align(A, BS, 0)>(b));
        uint32_t w[2];
        cdq_load<8, cdq_align(A, BS, 2)>(b + 2 + 8 * s, w);
        CDQ_UNROLL
        for (int j = 0; j < 32; j++) {
            const int q = (int)((w[j / 16] >> (2 * (j % 16))) & 3);
            y[j] = cdq_mul(cdq_i2f(q - 1), d);
        }
    }
};

/* ---- k-quants: a super-block of 256 is 8 groups ---- */

/* q2_K: group s = 4h + j takes bit pair j of qs[32h .. 32h+31]; scales 8h+2j and 8h+2j+1 cover
 * its two halves of 16. */
template <> struct dq<OX_DTYPE_Q2_K> {
    static constexpr int QK = 256, BS = 84;
    template <int A> CDQ_HD static void group(const uint8_t *base, int64_t g, float *y) {
        const uint8_t *b = base + BS * (g / 8);
        const int s = (int)(g % 8), h = s / 4, j = s % 4;
        const float d = cdq_f16((uint16_t)cdq_u16<cdq_align(A, BS, 80)>(b + 80));
        const float dmin = cdq_f16((uint16_t)cdq_u16<cdq_align(A, BS, 82)>(b + 82));
        uint32_t w[8];
        cdq_load<32, cdq_align(A, BS, 16)>(b + 16 + 32 * h, w);
        CDQ_UNROLL
        for (int half = 0; half < 2; half++) {
            const int sc = b[8 * h + 2 * j + half];
            const float dl = cdq_mul(d, cdq_i2f(sc & 0x0f));
            const float ml = cdq_mul(dmin, cdq_i2f(sc >> 4));
            CDQ_UNROLL
            for (int l = 0; l < 16; l++) {
                const int q = (cdq_byte(w, 16 * half + l) >> (2 * j)) & 3;
                y[16 * half + l] = cdq_sub(cdq_mul(dl, cdq_i2f(q)), ml);
            }
        }
    }
};

/* q3_K's six-bit scale s (dequant_k.c's q3_K_scale), minus 32. */
CDQ_HD int cdq_q3_K_scale(const uint8_t *packed, int s) {
    const int low = s < 8 ? packed[s] & 0x0f : packed[s - 8] >> 4;
    const int high = (packed[8 + s % 4] >> (2 * (s / 4))) & 3;
    return (low | high << 4) - 32;
}

/* q3_K: as q2_K, plus the high bit of element i of the group in bit 4h+j of hmask[i] */
template <> struct dq<OX_DTYPE_Q3_K> {
    static constexpr int QK = 256, BS = 110;
    template <int A> CDQ_HD static void group(const uint8_t *base, int64_t g, float *y) {
        const uint8_t *b = base + BS * (g / 8);
        const int s = (int)(g % 8), h = s / 4, j = s % 4;
        const float d = cdq_f16((uint16_t)cdq_u16<cdq_align(A, BS, 108)>(b + 108));
        uint32_t hm[8], w[8];
        cdq_load<32, cdq_align(A, BS, 0)>(b, hm);
        cdq_load<32, cdq_align(A, BS, 32)>(b + 32 + 32 * h, w);
        const int hbit = 1 << (4 * h + j);
        CDQ_UNROLL
        for (int half = 0; half < 2; half++) {
            const float dl = cdq_mul(d, cdq_i2f(cdq_q3_K_scale(b + 96, 8 * h + 2 * j + half)));
            CDQ_UNROLL
            for (int l = 0; l < 16; l++) {
                const int i = 16 * half + l;
                const int level =
                    ((cdq_byte(w, i) >> (2 * j)) & 3) - (cdq_byte(hm, i) & hbit ? 0 : 4);
                y[i] = cdq_mul(dl, cdq_i2f(level));
            }
        }
    }
};

/* q4_K / q5_K's six-bit scale and min of sub-block s (dequant_k.c's k4_scale_min). */
CDQ_HD void cdq_k4_scale_min(const uint8_t *packed, int s, int *scale, int *min) {
    if (s < 4) {
        *scale = packed[s] & 63;
        *min = packed[s + 4] & 63;
    } else {
        *scale = (packed[s + 4] & 0x0f) | (packed[s - 4] >> 6) << 4;
        *min = (packed[s + 4] >> 4) | (packed[s] >> 6) << 4;
    }
}

/* q4_K: group s is nibble s%2 of qs[32(s/2) .. +31] */
template <> struct dq<OX_DTYPE_Q4_K> {
    static constexpr int QK = 256, BS = 144;
    template <int A> CDQ_HD static void group(const uint8_t *base, int64_t g, float *y) {
        const uint8_t *b = base + BS * (g / 8);
        const int s = (int)(g % 8);
        const float d = cdq_f16((uint16_t)cdq_u16<cdq_align(A, BS, 0)>(b));
        const float dmin = cdq_f16((uint16_t)cdq_u16<cdq_align(A, BS, 2)>(b + 2));
        int sc, mn;
        cdq_k4_scale_min(b + 4, s, &sc, &mn);
        const float dl = cdq_mul(d, cdq_i2f(sc));
        const float ml = cdq_mul(dmin, cdq_i2f(mn));
        uint32_t w[8];
        cdq_load<32, cdq_align(A, BS, 16)>(b + 16 + 32 * (s / 2), w);
        const int shift = 4 * (s % 2);
        CDQ_UNROLL
        for (int l = 0; l < 32; l++)
            y[l] = cdq_sub(cdq_mul(dl, cdq_i2f((cdq_byte(w, l) >> shift) & 0x0f)), ml);
    }
};

/* q5_K: as q4_K; the 5th bit of element l of group s is bit s of qh[l] */
template <> struct dq<OX_DTYPE_Q5_K> {
    static constexpr int QK = 256, BS = 176;
    template <int A> CDQ_HD static void group(const uint8_t *base, int64_t g, float *y) {
        const uint8_t *b = base + BS * (g / 8);
        const int s = (int)(g % 8);
        const float d = cdq_f16((uint16_t)cdq_u16<cdq_align(A, BS, 0)>(b));
        const float dmin = cdq_f16((uint16_t)cdq_u16<cdq_align(A, BS, 2)>(b + 2));
        int sc, mn;
        cdq_k4_scale_min(b + 4, s, &sc, &mn);
        const float dl = cdq_mul(d, cdq_i2f(sc));
        const float ml = cdq_mul(dmin, cdq_i2f(mn));
        uint32_t qh[8], w[8];
        cdq_load<32, cdq_align(A, BS, 16)>(b + 16, qh);
        cdq_load<32, cdq_align(A, BS, 48)>(b + 48 + 32 * (s / 2), w);
        const int shift = 4 * (s % 2);
        CDQ_UNROLL
        for (int l = 0; l < 32; l++) {
            const int level =
                ((cdq_byte(w, l) >> shift) & 0x0f) + ((cdq_byte(qh, l) >> s) & 1) * 16;
            y[l] = cdq_sub(cdq_mul(dl, cdq_i2f(level)), ml);
        }
    }
};

/* q6_K: group s = 4h + k: low nibble k/2 of ql[64h + 32(k%2) + l], bit pair k of qh[32h + l] */
template <> struct dq<OX_DTYPE_Q6_K> {
    static constexpr int QK = 256, BS = 210;
    template <int A> CDQ_HD static void group(const uint8_t *base, int64_t g, float *y) {
        const uint8_t *b = base + BS * (g / 8);
        const int s = (int)(g % 8), h = s / 4, k = s % 4;
        const float d = cdq_f16((uint16_t)cdq_u16<cdq_align(A, BS, 208)>(b + 208));
        uint32_t ql[8], qh[8];
        cdq_load<32, cdq_align(A, BS, 0)>(b + 64 * h + 32 * (k % 2), ql);
        cdq_load<32, cdq_align(A, BS, 128)>(b + 128 + 32 * h, qh);
        const int8_t *sc = (const int8_t *)(b + 192 + 8 * h);
        /* (d * scale) first, as ggml: one product per half of 16 */
        const float ds[2] = {cdq_mul(d, cdq_i2f(sc[2 * k])), cdq_mul(d, cdq_i2f(sc[2 * k + 1]))};
        CDQ_UNROLL
        for (int l = 0; l < 32; l++) {
            const int lo = (cdq_byte(ql, l) >> (4 * (k / 2))) & 0x0f;
            const int level = (lo | ((cdq_byte(qh, l) >> (2 * k)) & 3) << 4) - 32;
            y[l] = cdq_mul(ds[l / 16], cdq_i2f(level));
        }
    }
};

/* ---- table-coded 4-bit types ---- */

template <> struct dq<OX_DTYPE_IQ4_NL> {
    static constexpr int QK = 32, BS = 18;
    template <int A> CDQ_HD static void group(const uint8_t *base, int64_t g, float *y) {
        const uint8_t *b = base + BS * g;
        const float d = cdq_f16((uint16_t)cdq_u16<cdq_align(A, BS, 0)>(b));
        uint32_t w[4];
        cdq_load<16, cdq_align(A, BS, 2)>(b + 2, w);
        CDQ_UNROLL
        for (int j = 0; j < 16; j++) {
            const int q = cdq_byte(w, j);
            y[j] = cdq_mul(d, cdq_i2f(cdq_iq4nl_level(q & 0x0f)));
            y[j + 16] = cdq_mul(d, cdq_i2f(cdq_iq4nl_level(q >> 4)));
        }
    }
};

template <> struct dq<OX_DTYPE_IQ4_XS> {
    static constexpr int QK = 256, BS = 136;
    template <int A> CDQ_HD static void group(const uint8_t *base, int64_t g, float *y) {
        const uint8_t *b = base + BS * (g / 8);
        const int ib = (int)(g % 8);
        const float d = cdq_f16((uint16_t)cdq_u16<cdq_align(A, BS, 0)>(b));
        const uint32_t scales_h = cdq_u16<cdq_align(A, BS, 2)>(b + 2);
        /* 6-bit scale: low nibble from scales_l, top two bits from scales_h */
        const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 0x0f) | ((scales_h >> (2 * ib)) & 3)
                                                                        << 4;
        const float dl = cdq_mul(d, cdq_i2f(ls - 32));
        uint32_t w[4];
        cdq_load<16, cdq_align(A, BS, 8)>(b + 8 + 16 * ib, w);
        CDQ_UNROLL
        for (int j = 0; j < 16; j++) {
            const int q = cdq_byte(w, j);
            y[j] = cdq_mul(dl, cdq_i2f(cdq_iq4nl_level(q & 0x0f)));
            y[j + 16] = cdq_mul(dl, cdq_i2f(cdq_iq4nl_level(q >> 4)));
        }
    }
};

/* mxfp4: e2m1 levels (doubled) times the halved e8m0 scale 2^(e - 128), built from bits */
template <> struct dq<OX_DTYPE_MXFP4> {
    static constexpr int QK = 32, BS = 17;
    template <int A> CDQ_HD static void group(const uint8_t *base, int64_t g, float *y) {
        const uint8_t *b = base + BS * g;
        const uint32_t e = b[0];
        const float d = cdq_from_bits(e < 2 ? 0x00200000u << e : (e - 1) << 23);
        CDQ_UNROLL
        for (int j = 0; j < 16; j++) {
            const int q = b[1 + j];
            y[j] = cdq_mul(cdq_i2f(cdq_e2m1_level(q & 0x0f)), d);
            y[j + 16] = cdq_mul(cdq_i2f(cdq_e2m1_level(q >> 4)), d);
        }
    }
};

/* ---- ternary ---- */

/* Trit k of a tq1_0 byte (a base-3 fixed-point fraction): multiply by 3^k mod 256, take the
 * top digit. */
CDQ_HD int cdq_trit(int byte, int k) {
    const int pow3 = k == 0 ? 1 : k == 1 ? 3 : k == 2 ? 9 : k == 3 ? 27 : 81;
    return (((byte * pow3) & 0xff) * 3) >> 8;
}

/* tq1_0 element order: trit k of qs[0..31] for k = 0..4 (groups 0..4), trit k of qs[32..47]
 * for k = 0..4 (160 elements .. 239), trit k of qh[0..3] for k = 0..3 (240 .. 255). */
template <> struct dq<OX_DTYPE_TQ1_0> {
    static constexpr int QK = 256, BS = 54;
    template <int A> CDQ_HD static void group(const uint8_t *base, int64_t g, float *y) {
        const uint8_t *b = base + BS * (g / 8);
        const int s = (int)(g % 8);
        const float d = cdq_f16((uint16_t)cdq_u16<cdq_align(A, BS, 52)>(b + 52));
        if (s < 5) {
            uint32_t w[8];
            cdq_load<32, cdq_align(A, BS, 0)>(b, w);
            CDQ_UNROLL
            for (int m = 0; m < 32; m++)
                y[m] = cdq_mul(cdq_i2f(cdq_trit(cdq_byte(w, m), s) - 1), d);
            return;
        }
        uint32_t w[4];
        cdq_load<16, cdq_align(A, BS, 32)>(b + 32, w);
        if (s < 7) { /* trits 2(s-5) and 2(s-5)+1 of qs[32..47] */
            CDQ_UNROLL
            for (int i = 0; i < 32; i++)
                y[i] = cdq_mul(cdq_i2f(cdq_trit(cdq_byte(w, i % 16), 2 * (s - 5) + i / 16) - 1), d);
            return;
        }
        uint32_t qh;
        cdq_load<4, cdq_align(A, BS, 48)>(b + 48, &qh);
        CDQ_UNROLL
        for (int i = 0; i < 16; i++) /* trit 4 of qs[32..47] */
            y[i] = cdq_mul(cdq_i2f(cdq_trit(cdq_byte(w, i), 4) - 1), d);
        CDQ_UNROLL
        for (int i = 0; i < 16; i++) /* then the 4 trits of each qh byte, k-major */
            y[16 + i] =
                cdq_mul(cdq_i2f(cdq_trit((int)((qh >> (8 * (i % 4))) & 0xff), i / 4) - 1), d);
    }
};

/* tq2_0: group s takes bit pair s%4 of qs[32(s/4) .. +31]; codes 0..2 mean -1, 0, +1 */
template <> struct dq<OX_DTYPE_TQ2_0> {
    static constexpr int QK = 256, BS = 66;
    template <int A> CDQ_HD static void group(const uint8_t *base, int64_t g, float *y) {
        const uint8_t *b = base + BS * (g / 8);
        const int s = (int)(g % 8);
        const float d = cdq_f16((uint16_t)cdq_u16<cdq_align(A, BS, 64)>(b + 64));
        uint32_t w[8];
        cdq_load<32, cdq_align(A, BS, 0)>(b + 32 * (s / 4), w);
        CDQ_UNROLL
        for (int m = 0; m < 32; m++)
            y[m] = cdq_mul(cdq_i2f(((cdq_byte(w, m) >> (2 * (s % 4))) & 3) - 1), d);
    }
};

/* ---- grid i-quants ---- */

/* iq3_s: group ib has 8 nine-bit grid indices (low byte in qs, 9th bit in qh[ib]) of 4
 * magnitudes each, 32 explicit sign bits and an odd 4-bit scale 1 + 2 sc. Each element is
 * (db * magnitude) * sign, in that order, as dequant_iq.c. */
template <> struct dq<OX_DTYPE_IQ3_S> {
    static constexpr int QK = 256, BS = 110;
    template <int A> CDQ_HD static void group(const uint8_t *base, int64_t g, float *y) {
        const uint8_t *b = base + BS * (g / 8);
        const int ib = (int)(g % 8);
        const float d = cdq_f16((uint16_t)cdq_u16<cdq_align(A, BS, 0)>(b));
        const int sc = (b[106 + ib / 2] >> (4 * (ib % 2))) & 0x0f;
        const float db = cdq_mul(d, cdq_i2f(1 + 2 * sc));
        uint32_t qs[2], signs;
        cdq_load<8, cdq_align(A, BS, 2)>(b + 2 + 8 * ib, qs);
        cdq_load<4, cdq_align(A, BS, 74)>(b + 74 + 4 * ib, &signs);
        const int qh = b[66 + ib];
        CDQ_UNROLL
        for (int gi = 0; gi < 8; gi++) {
            const int idx = cdq_byte(qs, gi) | ((qh >> gi) & 1) << 8;
            const uint32_t entry = cdq_iq3s_entry(idx);
            CDQ_UNROLL
            for (int j = 0; j < 4; j++) {
                const float mag = cdq_mul(db, cdq_i2f((int)((entry >> (8 * j)) & 0xff)));
                y[4 * gi + j] = cdq_mul(mag, (signs >> (4 * gi + j)) & 1 ? -1.f : 1.f);
            }
        }
    }
};

/* ---- whole rows, host side (tests; the kernels call dq<T>::group directly) ---- */

/* Elements 0..n-1 of a row (n a multiple of the block size) to y. */
template <enum ox_dtype T>
static inline void cdq_row_host(const uint8_t *row, int64_t n, float *y) {
    for (int64_t g = 0; g < n / 32; g++)
        dq<T>::template group<1>(row, g, y + 32 * g);
    if constexpr (dq<T>::QK == 1) {
        for (int64_t i = n / 32 * 32; i < n; i++)
            y[i] = dq<T>::elem(row, i);
    }
}

/* Switch on the type; false for a type outside CDQ_TYPES. */
static inline bool cdq_row_host(enum ox_dtype type, const void *row, int64_t n, float *y) {
    switch (type) {
#define CDQ_CASE_(name)                                                                            \
    case OX_DTYPE_##name: cdq_row_host<OX_DTYPE_##name>((const uint8_t *)row, n, y); return true;
        CDQ_TYPES(CDQ_CASE_)
#undef CDQ_CASE_
    default: return false;
    }
}

#endif
