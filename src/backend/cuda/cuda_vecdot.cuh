/* cuda_vecdot.cuh: integer dot products of 32 quantized weights with 32 activations quantized to
 * int8 (q8_1), for host and device: what the small-batch GEMV runs instead of dequantizing. */
#ifndef OX_BACKEND_CUDA_VECDOT_CUH
#define OX_BACKEND_CUDA_VECDOT_CUH

#include "backend/cuda/cuda_dequant.cuh"

/* The types with an integer path; the others keep the float GEMV. */
/* clang-format off */
#define CVD_TYPES(X)                                                                               \
    X(Q4_0) X(Q4_1) X(Q5_0) X(Q5_1) X(Q8_0)                                                        \
    X(Q2_K) X(Q3_K) X(Q4_K) X(Q5_K) X(Q6_K) X(IQ4_NL) X(IQ4_XS)
/* clang-format on */

/* 32 activations x_j ~ d * qs_j (as llama.cpp's block_q8_1): d = max |x_j| / 127 as half bits,
 * the sum of the 32 int8 levels, then the levels. The offset terms of q4_0, q4_1, q5_* and the
 * K-quants use that integer sum, as llama.cpp's CPU dot products do (its GPU kernels take the
 * sum of the original x in half precision instead, which measured 3-8x the KL on the reference
 * models' greedy decode). 36 bytes: 9 words, an odd stride, so lanes reading consecutive blocks
 * from shared memory hit distinct banks. */
struct cvd_xq {
    uint16_t d;
    int16_t sq;
    int32_t qs[8];
};
static_assert(sizeof(cvd_xq) == 36, "q8_1 layout");

/* 32 weights as int8 levels v (element 4i + k in byte k of v[i]) and per half of 16 a scale and
 * an offset: w_j = d[j / 16] * v_j + m[j / 16]. */
struct cvd_w {
    uint32_t v[8];
    float d[2], m[2];
};

/* c + the sum of the four products of a's and b's signed bytes. */
CDQ_HD int cvd_dp4a(uint32_t a, int32_t b, int c) {
#ifdef __CUDA_ARCH__
    return __dp4a((int)a, (int)b, c);
#else
    for (int k = 0; k < 4; k++)
        c += (int8_t)(uint8_t)(a >> (8 * k)) * (int8_t)(uint8_t)((uint32_t)b >> (8 * k));
    return c;
#endif
}

/* fp16 -> fp32 for a dot product's scales: the device's own conversion, which cdq_f16 wraps
 * in a branch to keep NaN payloads (what a dequantized copy needs bit for bit; a sum with a
 * NaN in it is NaN either way). Finite values convert exactly in both. The single-token GEMV
 * is bound by its instructions: this and cvd_k4_scale_min took its q4_K kernel from about 100
 * to 75 PTX instructions a group, H100 4096 x 14336 13.6 -> 11.1 us (81% -> 99% of the copy
 * bandwidth), tg128 8B Q4_K_M 353.7 -> 385.0 t/s, 1B Q4_0 1364 -> 1406. */
CDQ_HD float cvd_f16(uint16_t h) {
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half(h));
#else
    return cdq_f16(h);
#endif
}

/* Each byte of v (< 128) minus the matching byte of k (<= 128), as int8; no borrow crosses
 * bytes, since each byte goes through v + 128 - k, which stays in 0..255. */
CDQ_HD uint32_t cvd_sub_bytes(uint32_t v, uint32_t k) {
    return ((v | 0x80808080u) - k) ^ 0x80808080u;
}

/* Bits 0..3 of x to bit 4 of bytes 0..3 (the fifth bit of q5 levels). */
CDQ_HD uint32_t cvd_bit4(uint32_t x) {
    return (x & 1) << 4 | (x & 2) << 11 | (x & 4) << 18 | (x & 8) << 25;
}

/* The iq4_nl levels of four indices (one per byte, 0..15). The device picks them out of the
 * table's four words with byte permutes: the low three bits select among eight bytes, bit 3
 * chooses the upper or lower eight. */
CDQ_HD uint32_t cvd_iq4_levels(uint32_t q) {
#ifdef __CUDA_ARCH__
    const uint32_t *t = (const uint32_t *)cdq_iq4nl;
    const uint32_t v = q & 0x07070707u, p = v | v >> 4;
    const uint32_t sel = (p & 0xffu) | (p >> 8 & 0xff00u);
    const uint32_t lo = __byte_perm(t[0], t[1], sel), hi = __byte_perm(t[2], t[3], sel);
    const uint32_t upper = (q >> 3 & 0x01010101u) * 0xffu;
    return (lo & ~upper) | (hi & upper);
#else
    uint32_t r = 0;
    for (int k = 0; k < 4; k++)
        r |= (uint32_t)(uint8_t)iq4nl_values[q >> (8 * k) & 15] << (8 * k);
    return r;
#endif
}

/* Pairs of groups that read the same bytes (the K-quants' groups s and s + S of a super-block,
 * s % 2S < S, share their low / high nibbles or bit pairs, and q5_K / q3_K their high-bit
 * words): vd<T>::unpack_pair<A>(base, g, w0, w1) unpacks groups g and g + S from one read,
 * where unpack reads the bytes again for each. The single-token GEMV takes a pair per lane:
 * H100, tg128 8B Q4_K_M 382 -> 393 t/s, 1B Q4_K_M / Q5_K_M / Q3_K_M +5%, 4096 x 14336 q6_K
 * 22.4 -> 20.9 us, q3_K 18.1 -> 15.4, q4_K 11.0 -> 9.9. S = cvd_pair_stride<T>(), 0 for the
 * types without pairs. */
template <enum ox_dtype T> constexpr int cvd_pair_stride() {
    return T == OX_DTYPE_Q6_K ? 2
           : T == OX_DTYPE_Q2_K || T == OX_DTYPE_Q3_K || T == OX_DTYPE_Q4_K || T == OX_DTYPE_Q5_K
               ? 1
               : 0;
}

/* N bytes at p (N a multiple of 4), aligned to A (2 at least), as N/4 little-endian words.
 * Under 4-byte alignment the lanes of a warp differ in where their bytes start (q6_K's blocks
 * are 210 bytes, q8_0's 34): N/4 aligned words, one more where p is not aligned, and funnel
 * shifts serve every lane with the same instructions, where two-byte loads take N/2 and N/4
 * merges. The extra word ends 2 bytes past the field, within the caller's block or its
 * neighbour in shared memory. H100, one token: q8_0 4096 x 4096 6.0 -> 5.2 us, q4_0 4096 x
 * 14336 11.2 -> 10.1 (1B tg128 Q8_0 1150 -> 1208 t/s, Q4_0 1424 -> 1449); q5_0 and iq4_nl,
 * whose unpacking has more arithmetic to do, measured 6-7% slower and keep two-byte loads. */
template <int N, int A> CDQ_HD void cvd_load(const uint8_t *p, uint32_t *w) {
#ifdef __CUDA_ARCH__
    if constexpr (A % 4 == 2) { /* odd addresses keep cdq_load's bytes */
        static_assert(N % 4 == 0, "whole words");
        const unsigned off = (unsigned)(uintptr_t)p & 3u;
        const uint32_t *a = (const uint32_t *)(p - off); /* still known to be shared memory */
        const unsigned sh = off * 8u;
        uint32_t t[N / 4 + 1];
        CDQ_UNROLL
        for (int i = 0; i < N / 4; i++)
            t[i] = a[i];
        t[N / 4] = off ? a[N / 4] : 0u;
        CDQ_UNROLL
        for (int i = 0; i < N / 4; i++)
            w[i] = __funnelshift_r(t[i], t[i + 1], sh);
        return;
    }
#endif
    cdq_load<N, A>(p, w);
}

/* Usage: vd<T>::unpack<A>(base, g, w) reads group g (elements 32g .. 32g+31) of the row that
 * starts at base, aligned to A bytes, as dq<T>::group does; the k-quants have unpack_pair
 * instead (above). SPLIT_MIN: the two halves have different offsets (else m[0] == m[1]);
 * NO_MIN: there is none. */
template <enum ox_dtype T> struct vd;

/* the legacy 4/5-bit types: byte j of qs holds element j (low nibble) and j + 16 (high) */
CDQ_HD void cvd_nibbles(const uint32_t *q, cvd_w &w) {
    CDQ_UNROLL
    for (int i = 0; i < 4; i++) {
        w.v[i] = q[i] & 0x0f0f0f0fu;
        w.v[4 + i] = q[i] >> 4 & 0x0f0f0f0fu;
    }
}

/* q5_0 / q5_1: the nibbles plus bit j of the little-endian qh word as the 5th bit of
 * element j */
CDQ_HD void cvd_nibbles5(const uint32_t *q, uint32_t qh, cvd_w &w) {
    cvd_nibbles(q, w);
    CDQ_UNROLL
    for (int i = 0; i < 4; i++) {
        w.v[i] |= cvd_bit4(qh >> (4 * i) & 15);
        w.v[4 + i] |= cvd_bit4(qh >> (16 + 4 * i) & 15);
    }
}

/* iq4_nl / iq4_xs: the nibbles (laid out as the legacy types') are indices of levels */
CDQ_HD void cvd_iq4_nibbles(const uint32_t *q, cvd_w &w) {
    cvd_nibbles(q, w);
    CDQ_UNROLL
    for (int i = 0; i < 8; i++)
        w.v[i] = cvd_iq4_levels(w.v[i]);
}

CDQ_HD void cvd_scale(cvd_w &w, float d, float m) {
    w.d[0] = w.d[1] = d;
    w.m[0] = w.m[1] = m;
}

template <> struct vd<OX_DTYPE_Q4_0> {
    static constexpr bool SPLIT_MIN = false, NO_MIN = false;
    template <int A> CDQ_HD static void unpack(const uint8_t *base, int64_t g, cvd_w &w) {
        const uint8_t *b = base + 18 * g;
        uint32_t q[4];
        cvd_load<16, cdq_align(A, 18, 2)>(b + 2, q);
        cvd_nibbles(q, w);
        const float d = cvd_f16((uint16_t)cdq_u16<cdq_align(A, 18, 0)>(b));
        cvd_scale(w, d, -8.f * d);
    }
};

template <> struct vd<OX_DTYPE_Q4_1> {
    static constexpr bool SPLIT_MIN = false, NO_MIN = false;
    template <int A> CDQ_HD static void unpack(const uint8_t *base, int64_t g, cvd_w &w) {
        const uint8_t *b = base + 20 * g;
        uint32_t q[4];
        cdq_load<16, cdq_align(A, 20, 4)>(b + 4, q);
        cvd_nibbles(q, w);
        cvd_scale(w, cvd_f16((uint16_t)cdq_u16<cdq_align(A, 20, 0)>(b)),
                  cvd_f16((uint16_t)cdq_u16<cdq_align(A, 20, 2)>(b + 2)));
    }
};

template <> struct vd<OX_DTYPE_Q5_0> {
    static constexpr bool SPLIT_MIN = false, NO_MIN = false;
    template <int A> CDQ_HD static void unpack(const uint8_t *base, int64_t g, cvd_w &w) {
        const uint8_t *b = base + 22 * g;
        uint32_t qh, q[4];
        cdq_load<4, cdq_align(A, 22, 2)>(b + 2, &qh);
        cdq_load<16, cdq_align(A, 22, 6)>(b + 6, q);
        cvd_nibbles5(q, qh, w);
        const float d = cvd_f16((uint16_t)cdq_u16<cdq_align(A, 22, 0)>(b));
        cvd_scale(w, d, -16.f * d);
    }
};

template <> struct vd<OX_DTYPE_Q5_1> {
    static constexpr bool SPLIT_MIN = false, NO_MIN = false;
    template <int A> CDQ_HD static void unpack(const uint8_t *base, int64_t g, cvd_w &w) {
        const uint8_t *b = base + 24 * g;
        uint32_t qh, q[4];
        cdq_load<4, cdq_align(A, 24, 4)>(b + 4, &qh);
        cdq_load<16, cdq_align(A, 24, 8)>(b + 8, q);
        cvd_nibbles5(q, qh, w);
        cvd_scale(w, cvd_f16((uint16_t)cdq_u16<cdq_align(A, 24, 0)>(b)),
                  cvd_f16((uint16_t)cdq_u16<cdq_align(A, 24, 2)>(b + 2)));
    }
};

template <> struct vd<OX_DTYPE_Q8_0> {
    static constexpr bool SPLIT_MIN = false, NO_MIN = true;
    template <int A> CDQ_HD static void unpack(const uint8_t *base, int64_t g, cvd_w &w) {
        const uint8_t *b = base + 34 * g;
        cvd_load<32, cdq_align(A, 34, 2)>(b + 2, w.v);
        cvd_scale(w, cvd_f16((uint16_t)cdq_u16<cdq_align(A, 34, 0)>(b)), 0.f);
    }
};

/* q2_K: group s = 4h + j is bit pair j of qs[32h + l]; each half has its scale and min */
template <> struct vd<OX_DTYPE_Q2_K> {
    static constexpr bool SPLIT_MIN = true, NO_MIN = false;
    template <int A>
    CDQ_HD static void unpack_pair(const uint8_t *base, int64_t g, cvd_w &w0, cvd_w &w1) {
        const uint8_t *b = base + 84 * (g / 8);
        const int s = (int)(g % 8), h = s / 4, j = s % 4;
        uint32_t q[8];
        cdq_load<32, cdq_align(A, 84, 16)>(b + 16 + 32 * h, q);
        CDQ_UNROLL
        for (int i = 0; i < 8; i++) {
            w0.v[i] = q[i] >> (2 * j) & 0x03030303u;
            w1.v[i] = q[i] >> (2 * j + 2) & 0x03030303u;
        }
        const float d = cvd_f16((uint16_t)cdq_u16<cdq_align(A, 84, 80)>(b + 80));
        const float dmin = cvd_f16((uint16_t)cdq_u16<cdq_align(A, 84, 82)>(b + 82));
        CDQ_UNROLL
        for (int half = 0; half < 2; half++) {
            const int sc0 = b[8 * h + 2 * j + half], sc1 = b[8 * h + 2 * j + 2 + half];
            w0.d[half] = d * (float)(sc0 & 15);
            w0.m[half] = -dmin * (float)(sc0 >> 4);
            w1.d[half] = d * (float)(sc1 & 15);
            w1.m[half] = -dmin * (float)(sc1 >> 4);
        }
    }
};

/* q3_K: as q2_K, a level is 4 lower where its hmask bit (4h + j) is clear; scales signed */
template <> struct vd<OX_DTYPE_Q3_K> {
    static constexpr bool SPLIT_MIN = false, NO_MIN = true;
    /* levels unsigned (0..7), for cvd_dot_pair */
    template <int A>
    CDQ_HD static void unpack_pair(const uint8_t *base, int64_t g, cvd_w &w0, cvd_w &w1) {
        const uint8_t *b = base + 110 * (g / 8);
        const int s = (int)(g % 8), h = s / 4, j = s % 4;
        uint32_t hm[8], q[8];
        cvd_load<32, cdq_align(A, 110, 0)>(b, hm);
        cvd_load<32, cdq_align(A, 110, 32)>(b + 32 + 32 * h, q);
        CDQ_UNROLL
        for (int i = 0; i < 8; i++) {
            const uint32_t hb = hm[i] >> (4 * h + j);
            w0.v[i] = (q[i] >> (2 * j) & 0x03030303u) | (hb & 0x01010101u) << 2;
            w1.v[i] = (q[i] >> (2 * j + 2) & 0x03030303u) | (hb << 1 & 0x04040404u);
        }
        const float d = cvd_f16((uint16_t)cdq_u16<cdq_align(A, 110, 108)>(b + 108));
        CDQ_UNROLL
        for (int half = 0; half < 2; half++) {
            w0.d[half] = d * (float)cdq_q3_K_scale(b + 96, 8 * h + 2 * j + half);
            w1.d[half] = d * (float)cdq_q3_K_scale(b + 96, 8 * h + 2 * j + 2 + half);
            w0.m[half] = w1.m[half] = 0.f;
        }
    }
};

/* q4_K / q5_K: the scale and min of sub-block s (cdq_k4_scale_min's) from the 12 packed bytes
 * as three words, both halves worked out and one selected: the lanes of a warp take different
 * sub-blocks, so a branch on s would run both sides anyway. */
template <int A, int BS> CDQ_HD void cvd_k4_scale_min(const uint8_t *b, int s, int &sc, int &mn) {
    uint32_t p[3];
    cdq_load<12, cdq_align(A, BS, 4)>(b + 4, p);
    const int shift = 8 * (s & 3);
    const uint32_t lo = p[0] >> shift, mid = p[1] >> shift, hi = p[2] >> shift;
    sc = (int)(s < 4 ? lo & 63 : (hi & 15) | (lo >> 2 & 48));
    mn = (int)(s < 4 ? mid & 63 : (hi >> 4 & 15) | (mid >> 2 & 48));
}

/* q4_K / q5_K: the scale and min of sub-block s times d and dmin */
template <int A, int BS> CDQ_HD void cvd_k4_scales(const uint8_t *b, int s, cvd_w &w) {
    int sc, mn;
    cvd_k4_scale_min<A, BS>(b, s, sc, mn);
    cvd_scale(w, cvd_f16((uint16_t)cdq_u16<cdq_align(A, BS, 0)>(b)) * (float)sc,
              -cvd_f16((uint16_t)cdq_u16<cdq_align(A, BS, 2)>(b + 2)) * (float)mn);
}

template <> struct vd<OX_DTYPE_Q4_K> {
    static constexpr bool SPLIT_MIN = false, NO_MIN = false;
    template <int A>
    CDQ_HD static void unpack_pair(const uint8_t *base, int64_t g, cvd_w &w0, cvd_w &w1) {
        const uint8_t *b = base + 144 * (g / 8);
        const int s = (int)(g % 8);
        uint32_t q[8];
        cdq_load<32, cdq_align(A, 144, 16)>(b + 16 + 16 * s, q);
        CDQ_UNROLL
        for (int i = 0; i < 8; i++) {
            w0.v[i] = q[i] & 0x0f0f0f0fu;
            w1.v[i] = q[i] >> 4 & 0x0f0f0f0fu;
        }
        cvd_k4_scales<A, 144>(b, s, w0);
        cvd_k4_scales<A, 144>(b, s + 1, w1);
    }
};

template <> struct vd<OX_DTYPE_Q5_K> {
    static constexpr bool SPLIT_MIN = false, NO_MIN = false;
    template <int A>
    CDQ_HD static void unpack_pair(const uint8_t *base, int64_t g, cvd_w &w0, cvd_w &w1) {
        const uint8_t *b = base + 176 * (g / 8);
        const int s = (int)(g % 8);
        uint32_t qh[8], q[8];
        cdq_load<32, cdq_align(A, 176, 16)>(b + 16, qh);
        cdq_load<32, cdq_align(A, 176, 48)>(b + 48 + 16 * s, q);
        CDQ_UNROLL
        for (int i = 0; i < 8; i++) {
            const uint32_t hb = qh[i] >> s;
            w0.v[i] = (q[i] & 0x0f0f0f0fu) | (hb & 0x01010101u) << 4;
            w1.v[i] = (q[i] >> 4 & 0x0f0f0f0fu) | (hb << 3 & 0x10101010u);
        }
        cvd_k4_scales<A, 176>(b, s, w0);
        cvd_k4_scales<A, 176>(b, s + 1, w1);
    }
};

/* q6_K: group s = 4h + k: nibble k/2 of ql[64h + 32(k%2) + l] and bit pair k of qh[32h + l],
 * minus 32; a scale per half */
template <> struct vd<OX_DTYPE_Q6_K> {
    static constexpr bool SPLIT_MIN = false, NO_MIN = true;
    /* groups s and s + 2 of a half (s % 4 < 2) share ql's bytes (low and high nibbles) and
     * qh's (bit pairs s and s + 2); their levels stay unsigned (0..63), for cvd_dot_pair */
    template <int A>
    CDQ_HD static void unpack_pair(const uint8_t *base, int64_t g, cvd_w &w0, cvd_w &w1) {
        const uint8_t *b = base + 210 * (g / 8);
        const int s = (int)(g % 8), h = s / 4, k = s % 4; /* k < 2 */
        uint32_t ql[8], qh[8];
        cvd_load<32, cdq_align(A, 210, 32)>(b + 64 * h + 32 * k, ql);
        cvd_load<32, cdq_align(A, 210, 128)>(b + 128 + 32 * h, qh);
        CDQ_UNROLL
        for (int i = 0; i < 8; i++) {
            w0.v[i] = (ql[i] & 0x0f0f0f0fu) | (qh[i] << (4 - 2 * k) & 0x30303030u);
            w1.v[i] = (ql[i] >> 4 & 0x0f0f0f0fu) | (qh[i] >> (2 * k) & 0x30303030u);
        }
        const float d = cvd_f16((uint16_t)cdq_u16<cdq_align(A, 210, 208)>(b + 208));
        const int8_t *sc = (const int8_t *)(b + 192 + 8 * h + 2 * k);
        w0.d[0] = d * (float)sc[0];
        w0.d[1] = d * (float)sc[1];
        w1.d[0] = d * (float)sc[4];
        w1.d[1] = d * (float)sc[5];
        w0.m[0] = w0.m[1] = w1.m[0] = w1.m[1] = 0.f;
    }
};

template <> struct vd<OX_DTYPE_IQ4_NL> {
    static constexpr bool SPLIT_MIN = false, NO_MIN = true;
    template <int A> CDQ_HD static void unpack(const uint8_t *base, int64_t g, cvd_w &w) {
        const uint8_t *b = base + 18 * g;
        uint32_t q[4];
        cdq_load<16, cdq_align(A, 18, 2)>(b + 2, q);
        cvd_iq4_nibbles(q, w);
        cvd_scale(w, cvd_f16((uint16_t)cdq_u16<cdq_align(A, 18, 0)>(b)), 0.f);
    }
};

template <> struct vd<OX_DTYPE_IQ4_XS> {
    static constexpr bool SPLIT_MIN = false, NO_MIN = true;
    template <int A> CDQ_HD static void unpack(const uint8_t *base, int64_t g, cvd_w &w) {
        const uint8_t *b = base + 136 * (g / 8);
        const int ib = (int)(g % 8);
        uint32_t q[4];
        cdq_load<16, cdq_align(A, 136, 8)>(b + 8 + 16 * ib, q);
        cvd_iq4_nibbles(q, w);
        const uint32_t scales_h = cdq_u16<cdq_align(A, 136, 2)>(b + 2);
        const int ls = (b[4 + ib / 2] >> (4 * (ib % 2)) & 15) | (int)(scales_h >> (2 * ib) & 3)
                                                                    << 4;
        cvd_scale(w, cvd_f16((uint16_t)cdq_u16<cdq_align(A, 136, 0)>(b)) * (float)(ls - 32), 0.f);
    }
};

/* q8_1's rule, whichever lanes share a group: the level of v in a group whose largest magnitude
 * is amax (d = amax / 127, rounded to nearest with ties to even, as llama.cpp's SIMD
 * quantizers; its scalar reference rounds ties away from zero), and d as the block keeps it. */
__device__ __forceinline__ int cvd_q8_level(float v, float amax) {
    return amax == 0.f ? 0 : __float2int_rn(v / (amax / 127.f));
}
__device__ __forceinline__ uint16_t cvd_q8_d_bits(float amax) {
    return __half_as_ushort(__float2half_rn(amax / 127.f));
}

/* The warp's 32 values (one per lane, in order) into blk (cvd_q8_level). */
__device__ __forceinline__ void cvd_quantize_warp(float v, cvd_xq *blk, int lane) {
    float amax = fabsf(v);
#pragma unroll
    for (int o = 16; o > 0; o /= 2)
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const int q = cvd_q8_level(v, amax);
    int sum = q;
#pragma unroll
    for (int o = 16; o > 0; o /= 2)
        sum += __shfl_xor_sync(0xffffffffu, sum, o);
    ((int8_t *)blk->qs)[lane] = (int8_t)q;
    if (lane == 0) {
        blk->d = cvd_q8_d_bits(amax);
        blk->sq = (int16_t)sum;
    }
}

/* sum_j w_j x_j for one group of weights and its block of activations. */
template <enum ox_dtype T> CDQ_HD float cvd_dot(const cvd_w &w, const cvd_xq &x) {
    int lo = 0, hi = 0;
    CDQ_UNROLL
    for (int i = 0; i < 4; i++) {
        lo = cvd_dp4a(w.v[i], x.qs[i], lo);
        hi = cvd_dp4a(w.v[4 + i], x.qs[4 + i], hi);
    }
    const float xd = cvd_f16(x.d);
    float r = xd * (w.d[0] * (float)lo + w.d[1] * (float)hi);
    if constexpr (vd<T>::SPLIT_MIN) { /* the halves' sums of x, from the levels */
        int s0 = 0, s1 = 0;
        CDQ_UNROLL
        for (int i = 0; i < 4; i++) {
            s0 = cvd_dp4a(0x01010101u, x.qs[i], s0);
            s1 = cvd_dp4a(0x01010101u, x.qs[4 + i], s1);
        }
        r += xd * (w.m[0] * (float)s0 + w.m[1] * (float)s1);
    } else if constexpr (!vd<T>::NO_MIN) {
        r += xd * (w.m[0] * (float)x.sq);
    }
    return r;
}

/* cvd_dot over unpack_pair's groups. q6_K's and q3_K's levels come unsigned: each word's -32
 * or -4 is a second product with x's levels, the same integer sums as cvd_dot over unpack's
 * signed levels (to the bit), for one instruction a word where the subtraction costs three. */
template <enum ox_dtype T> CDQ_HD float cvd_dot_pair(const cvd_w &w, const cvd_xq &x) {
    if constexpr (T == OX_DTYPE_Q6_K || T == OX_DTYPE_Q3_K) {
        constexpr uint32_t off = T == OX_DTYPE_Q6_K ? 0xe0e0e0e0u : 0xfcfcfcfcu; /* -32, -4 */
        int lo = 0, hi = 0;
        CDQ_UNROLL
        for (int i = 0; i < 4; i++) {
            lo = cvd_dp4a(off, x.qs[i], cvd_dp4a(w.v[i], x.qs[i], lo));
            hi = cvd_dp4a(off, x.qs[4 + i], cvd_dp4a(w.v[4 + i], x.qs[4 + i], hi));
        }
        return cvd_f16(x.d) * (w.d[0] * (float)lo + w.d[1] * (float)hi);
    } else {
        return cvd_dot<T>(w, x);
    }
}

#endif
