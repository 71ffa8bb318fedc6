/* qkernels_kquant_neon.c: matmul kernels for the k-quants and iq4_xs on AArch64: a row tile for
 * any shape and 16 rows repacked per super-block for batches. Built three times (level_neon.h):
 * plain NEON, +dotprod (SDOT, by lane over a chunk-major layout), +i8mm (SMMLA over pairs of rows
 * and tokens). */
#include <arm_neon.h>
#include <string.h>

#include "backend/cpu/arm/level_neon.h"
#include "backend/cpu/qkernels.h"
#include "quant/blocks.h"
#include "quant/iq_tables.h"

/* Every super-block of 256 weights is first decoded to one common shape (struct kdec): 256
 * signed levels in element order and an int32 scale per group (16 or 32 elements). SDOT takes
 * signed bytes on both sides, so offsets (q3_K's 4, q6_K's 32, iq4_xs' signed table) are
 * subtracted from the levels and need no term of their own; the min types (q2_K, q4_K, q5_K)
 * keep their unsigned levels and pay for the min with the activations' sums of 16 (q8_K's
 * bsums). Activations are ggml's q8_K, so each super-block sums exactly in int32:
 *   row . x = d x.d sum_g sc_g (q . x)_g - dmin x.d sum_g m_g bsum_g */
struct kdec {
    int8x16_t q[16];  /* elements 16i .. 16i + 15 in q[i] */
    int32x4_t sc[4];  /* scales of groups 4i .. 4i + 3 in sc[i] */
    int16x8_t min[2]; /* min types: min of each group, group order */
    float d, dmin;
};

/* A decoded super-block stays in registers only if the decoders are inlined and every loop over
 * its vectors is unrolled ("#pragma GCC unroll": GCC's -O2 unrolls none of them by itself). */

/* A type's decoder and block size, its elements per scale (16 or 32), and whether it has mins. */
struct ktype {
    struct kdec (*decode)(const uint8_t *block);
    size_t block_bytes;
    int group, mins;
};

static inline int8x16_t s8(uint8x16_t v) {
    return vreinterpretq_s8_u8(v);
}

/* Right shift by a count known only after inlining (vshrq_n wants an immediate). */
static inline uint8x16_t shr(uint8x16_t v, int count) {
    return vshlq_u8(v, vdupq_n_s8((int8_t)-count));
}

static inline uint32_t load32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Four 32-bit words as one vector, without a trip through memory. */
static inline uint8x16_t words(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
    return vreinterpretq_u8_u64(
        vcombine_u64(vcreate_u64(a | (uint64_t)b << 32), vcreate_u64(c | (uint64_t)d << 32)));
}

/* Sixteen int8 scales as four int32x4 (the first 8 only are used by 32-element groups). */
static inline void widen_scales(int8x16_t s, int32x4_t sc[4]) {
    int16x8_t lo = vmovl_s8(vget_low_s8(s)), hi = vmovl_high_s8(s);
    sc[0] = vmovl_s16(vget_low_s16(lo)), sc[1] = vmovl_high_s16(lo);
    sc[2] = vmovl_s16(vget_low_s16(hi)), sc[3] = vmovl_high_s16(hi);
}

/* ---- decoders: one super-block of each type to struct kdec -------------------------------- */

/* q2_K / q3_K: in half h, bit pair j of the 32 bytes qs[32h ..] holds elements 128h + 32j ..
 * (see dequant_k.c); q[8h + 2j + i] takes bytes 16i .. 16i + 15 of that run. */
static inline ALWAYS_INLINE void crumbs(const uint8_t *qs, int8x16_t q[16]) {
#pragma GCC unroll 16
    for (int h = 0; h < 2; h++) {
        uint8x16_t b0 = vld1q_u8(qs + 32 * h), b1 = vld1q_u8(qs + 32 * h + 16);
#pragma GCC unroll 16
        for (int j = 0; j < 4; j++) {
            q[8 * h + 2 * j] = s8(vandq_u8(shr(b0, 2 * j), vdupq_n_u8(3)));
            q[8 * h + 2 * j + 1] = s8(vandq_u8(shr(b1, 2 * j), vdupq_n_u8(3)));
        }
    }
}

static inline ALWAYS_INLINE struct kdec decode_q2_K(const uint8_t *p) {
    const struct block_q2_K *b = (const struct block_q2_K *)p;
    struct kdec k;
    crumbs(b->qs, k.q);
    uint8x16_t s = vld1q_u8(b->scales); /* low nibble scale, high nibble min */
    widen_scales(s8(vandq_u8(s, vdupq_n_u8(0x0F))), k.sc);
    uint8x16_t m = vshrq_n_u8(s, 4);
    k.min[0] = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(m)));
    k.min[1] = vreinterpretq_s16_u16(vmovl_high_u8(m));
    k.d = f16(b->d), k.dmin = f16(b->dmin);
    return k;
}

/* q3_K: levels q - 4 where the hmask bit is clear; the bit of element 128h + 32j + l is bit
 * 4h + j of hmask[l]. The 16 six-bit scales unpacked as ggml does, four bytes at a time: low
 * nibbles from u0, u1, u0 >> 4, u1 >> 4, top bits from bit pair i of u2's bytes. */
static inline ALWAYS_INLINE struct kdec decode_q3_K(const uint8_t *p) {
    const struct block_q3_K *b = (const struct block_q3_K *)p;
    struct kdec k;
    crumbs(b->qs, k.q);
    uint8x16_t hm[2] = {vld1q_u8(b->hmask), vld1q_u8(b->hmask + 16)};
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) {
        uint8x16_t set = vtstq_u8(hm[i % 2], vdupq_n_u8((uint8_t)(1u << (i / 2))));
        k.q[i] = vsubq_s8(k.q[i], s8(vbicq_u8(vdupq_n_u8(4), set)));
    }
    const uint32_t u[3] = {load32(b->scales), load32(b->scales + 4), load32(b->scales + 8)};
    const uint32_t m4 = 0x0f0f0f0f, m2 = 0x03030303;
    uint8x16_t s =
        words((u[0] & m4) | (u[2] & m2) << 4, (u[1] & m4) | (u[2] >> 2 & m2) << 4,
              (u[0] >> 4 & m4) | (u[2] >> 4 & m2) << 4, (u[1] >> 4 & m4) | (u[2] >> 6 & m2) << 4);
    widen_scales(vsubq_s8(s8(s), vdupq_n_s8(32)), k.sc);
    k.d = f16(b->d), k.dmin = 0.0f;
    return k;
}

/* q4_K / q5_K: eight 6-bit scales and mins in 12 bytes (see dequant_k.c), unpacked as ggml
 * does with 32-bit masks; 32 bytes of qs per 64 elements, low nibbles first. */
static inline ALWAYS_INLINE struct kdec decode_k4(const uint8_t *scales, uint16_t d, uint16_t dmin,
                                                  const uint8_t *qs) {
    struct kdec k;
#pragma GCC unroll 16
    for (int j = 0; j < 4; j++) {
        uint8x16_t b0 = vld1q_u8(qs + 32 * j), b1 = vld1q_u8(qs + 32 * j + 16);
        k.q[4 * j] = s8(vandq_u8(b0, vdupq_n_u8(0x0F)));
        k.q[4 * j + 1] = s8(vandq_u8(b1, vdupq_n_u8(0x0F)));
        k.q[4 * j + 2] = s8(vshrq_n_u8(b0, 4));
        k.q[4 * j + 3] = s8(vshrq_n_u8(b1, 4));
    }
    const uint32_t u[3] = {load32(scales), load32(scales + 4), load32(scales + 8)};
    const uint32_t m6 = 0x3f3f3f3f, m4 = 0x0f0f0f0f, m2 = 0x03030303;
    /* scales in bytes 0..7, mins in 8..15 */
    uint8x16_t s = words(u[0] & m6, (u[2] & m4) | (u[0] >> 6 & m2) << 4, u[1] & m6,
                         (u[2] >> 4 & m4) | (u[1] >> 6 & m2) << 4);
    widen_scales(s8(s), k.sc);
    k.min[0] = vreinterpretq_s16_u16(vmovl_high_u8(s));
    k.min[1] = vdupq_n_s16(0);
    k.d = f16(d), k.dmin = f16(dmin);
    return k;
}

static inline ALWAYS_INLINE struct kdec decode_q4_K(const uint8_t *p) {
    const struct block_q4_K *b = (const struct block_q4_K *)p;
    return decode_k4(b->scales, b->d, b->dmin, b->qs);
}

/* q5_K: q4_K plus a fifth bit, bit s of qh[l] for element l of sub-block s. */
static inline ALWAYS_INLINE struct kdec decode_q5_K(const uint8_t *p) {
    const struct block_q5_K *b = (const struct block_q5_K *)p;
    struct kdec k = decode_k4(b->scales, b->d, b->dmin, b->qs);
    uint8x16_t qh[2] = {vld1q_u8(b->qh), vld1q_u8(b->qh + 16)};
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) {
        uint8x16_t set = vtstq_u8(qh[i % 2], vdupq_n_u8((uint8_t)(1u << (i / 2))));
        k.q[i] = vorrq_s8(k.q[i], s8(vandq_u8(set, vdupq_n_u8(16))));
    }
    return k;
}

/* q6_K: per half of 128, element 32k + l takes nibble k / 2 of ql[l + 32 (k % 2)] and bit pair
 * k of qh[l] as its top bits; levels 0..63 stand for q - 32. */
static inline ALWAYS_INLINE struct kdec decode_q6_K(const uint8_t *p) {
    const struct block_q6_K *b = (const struct block_q6_K *)p;
    struct kdec k;
#pragma GCC unroll 16
    for (int h = 0; h < 2; h++) {
        uint8x16_t ql[4], qh[2] = {vld1q_u8(b->qh + 32 * h), vld1q_u8(b->qh + 32 * h + 16)};
#pragma GCC unroll 16
        for (int i = 0; i < 4; i++)
            ql[i] = vld1q_u8(b->ql + 64 * h + 16 * i);
#pragma GCC unroll 16
        for (int kk = 0; kk < 4; kk++)
#pragma GCC unroll 16
            for (int i = 0; i < 2; i++) {
                uint8x16_t lo = ql[2 * (kk % 2) + i];
                lo = kk < 2 ? vandq_u8(lo, vdupq_n_u8(0x0F)) : vshrq_n_u8(lo, 4);
                /* bit pair kk to bits 4..5 */
                uint8x16_t hi =
                    vandq_u8(vshlq_u8(qh[i], vdupq_n_s8((int8_t)(4 - 2 * kk))), vdupq_n_u8(0x30));
                k.q[8 * h + 2 * kk + i] = vsubq_s8(s8(vorrq_u8(lo, hi)), vdupq_n_s8(32));
            }
    }
    widen_scales(vld1q_s8(b->scales), k.sc);
    k.d = f16(b->d), k.dmin = 0.0f;
    return k;
}

/* iq4_xs: per sub-block of 32, 16 bytes, element j in the low nibble of byte j and j + 16 in
 * the high one, read through the signed level table; 6-bit scales minus 32. */
static inline ALWAYS_INLINE struct kdec decode_iq4_xs(const uint8_t *p) {
    const struct block_iq4_xs *b = (const struct block_iq4_xs *)p;
    struct kdec k;
    const int8x16_t levels = vld1q_s8(iq4nl_values);
    uint32_t lo = load32(b->scales_l);
    uint64_t ls = 0; /* scale s in byte s: nibble s of scales_l, bit pair s of scales_h */
#pragma GCC unroll 16
    for (int s = 0; s < 8; s++) {
        uint8x16_t v = vld1q_u8(b->qs + 16 * s);
        k.q[2 * s] = vqtbl1q_s8(levels, vandq_u8(v, vdupq_n_u8(0x0F)));
        k.q[2 * s + 1] = vqtbl1q_s8(levels, vshrq_n_u8(v, 4));
        ls |= (uint64_t)((lo >> 4 * s & 0x0F) | (b->scales_h >> 2 * s & 3u) << 4) << 8 * s;
    }
    widen_scales(vsubq_s8(s8(words((uint32_t)ls, (uint32_t)(ls >> 32), 0, 0)), vdupq_n_s8(32)),
                 k.sc);
    k.d = f16(b->d), k.dmin = 0.0f;
    return k;
}

/* ---- tiles: one row at a time, its decoded super-block (half the registers) dotted with every
 * token --------------------------------------------------------------------------------------- */

/* acc + the super-block's dot with one token, in 4 float lanes. */
static inline ALWAYS_INLINE float32x4_t dot_super(const struct ktype *t, const struct kdec *k,
                                                  const struct block_q8_K *xb, float32x4_t acc) {
    const int per = t->group / 16; /* q vectors per group */
    int32x4_t isum = vdupq_n_s32(0);
#pragma GCC unroll 16
    for (int g4 = 0; g4 < 16 / per / 4; g4++) {
        int32x4_t dot[4];
#pragma GCC unroll 16
        for (int g = 0; g < 4; g++) {
            int v = per * (4 * g4 + g);
            if (per == 2)
                dot[g] = dot_pair(vdupq_n_s32(0), k->q[v], vld1q_s8(xb->qs + 16 * v), k->q[v + 1],
                                  vld1q_s8(xb->qs + 16 * v + 16));
            else
                dot[g] = dot4(vdupq_n_s32(0), k->q[v], vld1q_s8(xb->qs + 16 * v));
        }
        /* lane g: the whole dot of group 4 g4 + g, to meet its scale */
        int32x4_t s = vpaddq_s32(vpaddq_s32(dot[0], dot[1]), vpaddq_s32(dot[2], dot[3]));
        isum = vmlaq_s32(isum, s, k->sc[g4]);
    }
    acc = vfmaq_n_f32(acc, vcvtq_f32_s32(isum), k->d * xb->d);
    if (t->mins) {
        int16x8_t b0 = vld1q_s16(xb->bsums), b1 = vld1q_s16(xb->bsums + 8);
        int32x4_t m;
        if (t->group == 32) { /* sums of 16 paired to sums of 32 (at most 4064: int16) */
            int16x8_t b = vpaddq_s16(b0, b1);
            m = vmlal_high_s16(vmull_s16(vget_low_s16(k->min[0]), vget_low_s16(b)), k->min[0], b);
        } else {
            m = vmlal_high_s16(vmull_s16(vget_low_s16(k->min[0]), vget_low_s16(b0)), k->min[0], b0);
            m = vmlal_high_s16(vmlal_s16(m, vget_low_s16(k->min[1]), vget_low_s16(b1)), k->min[1],
                               b1);
        }
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(m), -k->dmin * xb->d);
    }
    return acc;
}

enum { NR = 4, NC = 4 };

/* The row tile's hooks (qkernels_kquant_drivers.h): the block's dot with each token in turn. */
struct kq_acc {
    float32x4_t v[NC];
};
static inline ALWAYS_INLINE struct kq_acc kq_acc_zero(int nc) {
    struct kq_acc a;
#pragma GCC unroll 16
    for (int c = 0; c < nc; c++)
        a.v[c] = vdupq_n_f32(0.0f);
    return a;
}
static inline ALWAYS_INLINE struct kq_acc kq_block_tokens(const struct ktype *t,
                                                          const struct kdec *k, const uint8_t *x,
                                                          size_t x_stride, int64_t b, int nc,
                                                          struct kq_acc acc) {
#pragma GCC unroll 16
    for (int c = 0; c < nc; c++)
        acc.v[c] = dot_super(t, k, (const struct block_q8_K *)(x + c * x_stride) + b, acc.v[c]);
    return acc;
}
static inline ALWAYS_INLINE float kq_acc_sum(const struct kq_acc *acc, int c) {
    return vaddvq_f32(acc->v[c]);
}

/* ---- batches: 16 rows repacked per super-block ------------------------------------------
 * NEON's own scratch layout (KN_; not qmatmul.h's x86 KP_ one, whose levels are unsigned with
 * the offsets folded into paired bias multipliers): the levels of 16 rows (signed, as decoded),
 * then per group of 16 elements the rows' int8 scales [group][row] (a group of 32 gives its scale
 * to both its halves), the min types' int16 mins [group][row] (likewise: m bsum32 = m bsum16 + m
 * bsum16), and per row d and -dmin. Below i8mm the levels are chunk-major (chunk c, 4 elements, of
 * row r at 64 c + 4 r: SDOT by lane); with i8mm pair-major per 8 elements (chunk k of rows 2p, 2p +
 * 1 at 128 k + 16 p: SMMLA). */
enum {
    KN_SC = 16 * QK_SUPER,
    KN_BIAS = KN_SC + 16 * 16,
    KN_D = KN_BIAS + 16 * 16 * 2,
    KN_DB = KN_D + 16 * 4,
    KN_BLOCK = KN_DB + 16 * 4,
};
_Static_assert(KN_BLOCK <= PACK16_BYTES(QK_SUPER) - 64, "pack size");

/* One row's decoded super-block into the per-group tables of row r. */
static inline ALWAYS_INLINE void repack_factors(const struct ktype *t, const struct kdec *k, int r,
                                                uint8_t *out) {
    int32_t sc[16];
    int16_t mins[16];
    for (int i = 0; i < 4; i++)
        vst1q_s32(sc + 4 * i, k->sc[i]);
    vst1q_s16(mins, k->min[0]), vst1q_s16(mins + 8, k->min[1]);
    for (int g = 0; g < 16; g++) {
        int src = t->group == 32 ? g / 2 : g;
        int16_t m = t->mins ? mins[src] : 0;
        out[KN_SC + 16 * g + r] = (uint8_t)(int8_t)sc[src];
        memcpy(out + KN_BIAS + 32 * g + 2 * r, &m, 2);
    }
    float d = k->d, db = t->mins ? -k->dmin : 0.0f;
    memcpy(out + KN_D + 4 * r, &d, 4);
    memcpy(out + KN_DB + 4 * r, &db, 4);
}

/* The repack's hooks: each row's levels laid out as soon as it is decoded (through rp, element
 * order), with its factors. */
enum { KQ_PACK_BLOCK = KN_BLOCK };
struct kq_repack {
    int8_t levels[QK_SUPER];
};
static inline ALWAYS_INLINE void kq_repack_row(const struct ktype *t, struct kq_repack *rp,
                                               const struct kdec *k, int r, uint8_t *out) {
    for (int i = 0; i < 16; i++)
        vst1q_s8(rp->levels + 16 * i, k->q[i]);
    for (int c = 0; c < QK_SUPER / 4 && !I8MM; c++)
        memcpy(out + 64 * c + 4 * r, rp->levels + 4 * c, 4);
    for (int c = 0; c < QK_SUPER / 8 && I8MM; c++)
        memcpy(out + 128 * c + 16 * (r / 2) + 8 * (r % 2), rp->levels + 8 * c, 8);
    repack_factors(t, k, r, out);
}
static inline ALWAYS_INLINE void kq_repack_block(const struct kq_repack *rp, uint8_t *out) {
    (void)rp, (void)out;
}

#include "backend/cpu/qkernels_kquant_drivers.h"

/* Group g's int8 scales of rows 8 half .. 8 half + 7 as int16. */
static inline int16x8_t group_scales(const uint8_t *pb, int g, int half) {
    return vmovl_s8(vld1_s8((const int8_t *)pb + KN_SC + 16 * g + 8 * half));
}
static inline int16x8_t group_mins(const uint8_t *pb, int g, int half) {
    return vld1q_s16((const int16_t *)(pb + KN_BIAS) + 16 * g + 8 * half);
}

#if !defined(OX_NEON_I8MM)
/* Rows 8 half .. 8 half + 7 (quads 2 half, 2 half + 1) x nc tokens over every super-block: the
 * mins against the activation sums first (converted at once), then per group the chunks by lane
 * into partial sums that meet the rows' scales. */
static inline ALWAYS_INLINE void rows8(const struct ktype *t, int64_t n, const uint8_t *packed,
                                       int half, int nr, const uint8_t *x, size_t x_stride, int nc,
                                       float *y, size_t y_stride) {
    float32x4_t acc[4][PACK_NC];
#pragma GCC unroll 16
    for (int q = 0; q < 2; q++)
#pragma GCC unroll 16
        for (int c = 0; c < nc; c++)
            acc[q][c] = vdupq_n_f32(0.0f);
    const uint8_t *pb = packed;
    for (int64_t b = 0; b < n / QK_SUPER; b++, pb += KN_BLOCK) {
        const struct block_q8_K *xb[PACK_NC] = {NULL};
        int32x4_t dot[2][PACK_NC];
#pragma GCC unroll 16
        for (int c = 0; c < PACK_NC; c++) /* all, so none is seen unset */
            dot[0][c] = dot[1][c] = vdupq_n_s32(0);
#pragma GCC unroll 16
        for (int c = 0; c < nc; c++)
            xb[c] = (const struct block_q8_K *)(x + (size_t)c * x_stride) + b;
        for (int g = 0; g < 16 && t->mins; g++) {
            int16x8_t m = group_mins(pb, g, half);
#pragma GCC unroll 16
            for (int c = 0; c < nc; c++) {
                dot[0][c] = vmlal_n_s16(dot[0][c], vget_low_s16(m), xb[c]->bsums[g]);
                dot[1][c] = vmlal_high_n_s16(dot[1][c], m, xb[c]->bsums[g]);
            }
        }
        if (t->mins)
#pragma GCC unroll 16
            for (int q = 0; q < 2; q++) {
                float32x4_t db = vld1q_f32((const float *)(pb + KN_DB) + 8 * half + 4 * q);
#pragma GCC unroll 16
                for (int c = 0; c < nc; c++) {
                    float32x4_t f = vmulq_n_f32(db, xb[c]->d);
                    acc[q][c] = vfmaq_f32(acc[q][c], vcvtq_f32_s32(dot[q][c]), f);
                    dot[q][c] = vdupq_n_s32(0);
                }
            }
        for (int g = 0; g < 16; g += t->group / 16) {
            int16x8_t s = group_scales(pb, g, half);
            int32x4_t sc[2] = {vmovl_s16(vget_low_s16(s)), vmovl_high_s16(s)};
            int32x4_t part[2][PACK_NC];
#pragma GCC unroll 16
            for (int q = 0; q < 2; q++)
#pragma GCC unroll 16
                for (int c = 0; c < nc; c++)
                    part[q][c] = vdupq_n_s32(0);
#pragma GCC unroll 16
            for (int k = 4 * g; k < 4 * g + t->group / 4; k += 4) {
                int8x16_t xv[PACK_NC];
#pragma GCC unroll 16
                for (int c = 0; c < nc; c++)
                    xv[c] = vld1q_s8(xb[c]->qs + 4 * k);
#pragma GCC unroll 16
                for (int q = 0; q < 2; q++) {
                    const int8_t *wq = (const int8_t *)pb + 64 * k + 16 * (2 * half + q);
                    int8x16_t w0 = vld1q_s8(wq), w1 = vld1q_s8(wq + 64);
                    int8x16_t w2 = vld1q_s8(wq + 128), w3 = vld1q_s8(wq + 192);
#pragma GCC unroll 16
                    for (int c = 0; c < nc; c++) {
                        int32x4_t p = part[q][c];
                        p = dot_lane(p, w0, xv[c], 0), p = dot_lane(p, w1, xv[c], 1);
                        p = dot_lane(p, w2, xv[c], 2), p = dot_lane(p, w3, xv[c], 3);
                        part[q][c] = p;
                    }
                }
            }
#pragma GCC unroll 16
            for (int q = 0; q < 2; q++)
#pragma GCC unroll 16
                for (int c = 0; c < nc; c++)
                    dot[q][c] = vmlaq_s32(dot[q][c], part[q][c], sc[q]);
        }
#pragma GCC unroll 16
        for (int q = 0; q < 2; q++) {
            float32x4_t d = vld1q_f32((const float *)(pb + KN_D) + 8 * half + 4 * q);
#pragma GCC unroll 16
            for (int c = 0; c < nc; c++)
                acc[q][c] =
                    vfmaq_f32(acc[q][c], vcvtq_f32_s32(dot[q][c]), vmulq_n_f32(d, xb[c]->d));
        }
    }
    store_quads(acc, 2 * half, 2, nr, nc, y, y_stride);
}

KQ_TILE16_BY_HALVES()
#else
/* [a, b, a, b]: one value of each token of a pair, as SMMLA's 2 x 2 lanes want them. */
static inline int16x4_t tok_pair16(int16_t a, int16_t b) {
    uint64_t v = (uint16_t)a | (uint64_t)(uint16_t)b << 16;
    return vreinterpret_s16_u64(vdup_n_u64(v | v << 32));
}

/* Pairs 4 half .. 4 half + 3 (8 rows) x ntp token pairs over every super-block, as rows8 below
 * i8mm: lanes are [r0 c0, r0 c1, r1 c0, r1 c1] of a row pair and a token pair, so the per-row
 * values are duplicated ([s0, s0, s1, s1]) and the per-token ones alternated. */
static inline ALWAYS_INLINE void pairs8(const struct ktype *t, int64_t n, const uint8_t *packed,
                                        int half, int nr, const uint8_t *x, size_t x_stride, int nc,
                                        int ntp, float *y, size_t y_stride) {
    float32x4_t acc[4][PACK_NC / 2];
#pragma GCC unroll 16
    for (int p = 0; p < 4; p++)
#pragma GCC unroll 16
        for (int tp = 0; tp < ntp; tp++)
            acc[p][tp] = vdupq_n_f32(0.0f);
    const uint8_t *pb = packed;
    for (int64_t b = 0; b < n / QK_SUPER; b++, pb += KN_BLOCK) {
        const struct block_q8_K *xa[PACK_NC / 2] = {NULL}, *xe[PACK_NC / 2] = {NULL};
        float32x4_t xd[PACK_NC / 2];
        int32x4_t dot[4][PACK_NC / 2];
#pragma GCC unroll 16
        for (int tp = 0; tp < ntp; tp++) {
            int c1 = 2 * tp + 1 < nc ? 2 * tp + 1 : 2 * tp;
            xa[tp] = (const struct block_q8_K *)(x + (size_t)(2 * tp) * x_stride) + b;
            xe[tp] = (const struct block_q8_K *)(x + (size_t)c1 * x_stride) + b;
            float32x2_t d2 = vset_lane_f32(xe[tp]->d, vdup_n_f32(xa[tp]->d), 1);
            xd[tp] = vcombine_f32(d2, d2);
        }
#pragma GCC unroll 16
        for (int p = 0; p < 4; p++) /* all, so none is seen unset */
            dot[p][0] = dot[p][1] = vdupq_n_s32(0);
        for (int g = 0; g < 16 && t->mins; g++) {
            int16x8_t m = group_mins(pb, g, half);
            int16x8_t z[2] = {vzip1q_s16(m, m), vzip2q_s16(m, m)};
#pragma GCC unroll 16
            for (int tp = 0; tp < ntp; tp++) {
                int16x4_t bs = tok_pair16(xa[tp]->bsums[g], xe[tp]->bsums[g]);
#pragma GCC unroll 16
                for (int p = 0; p < 4; p++)
                    dot[p][tp] = vmlal_s16(
                        dot[p][tp], p % 2 ? vget_high_s16(z[p / 2]) : vget_low_s16(z[p / 2]), bs);
            }
        }
        if (t->mins)
#pragma GCC unroll 16
            for (int p = 0; p < 4; p++) {
                float32x4_t db =
                    dup_pairs(vld1_f32((const float *)(pb + KN_DB) + 8 * half + 2 * p));
#pragma GCC unroll 16
                for (int tp = 0; tp < ntp; tp++) {
                    acc[p][tp] =
                        vfmaq_f32(acc[p][tp], vcvtq_f32_s32(dot[p][tp]), vmulq_f32(db, xd[tp]));
                    dot[p][tp] = vdupq_n_s32(0);
                }
            }
        for (int g = 0; g < 16; g += t->group / 16) {
            int16x8_t s = group_scales(pb, g, half);
            int16x8_t z0 = vzip1q_s16(s, s), z1 = vzip2q_s16(s, s);
            int32x4_t sc[4] = {vmovl_s16(vget_low_s16(z0)), vmovl_high_s16(z0),
                               vmovl_s16(vget_low_s16(z1)), vmovl_high_s16(z1)};
            int32x4_t part[4][PACK_NC / 2];
#pragma GCC unroll 16
            for (int p = 0; p < 4; p++)
#pragma GCC unroll 16
                for (int tp = 0; tp < ntp; tp++)
                    part[p][tp] = vdupq_n_s32(0);
#pragma GCC unroll 16
            for (int k = 2 * g; k < 2 * g + t->group / 8; k++) {
                int8x16_t xi[PACK_NC / 2];
#pragma GCC unroll 16
                for (int tp = 0; tp < ntp; tp++)
                    xi[tp] = vcombine_s8(vld1_s8(xa[tp]->qs + 8 * k), vld1_s8(xe[tp]->qs + 8 * k));
#pragma GCC unroll 16
                for (int p = 0; p < 4; p++) {
                    int8x16_t w = vld1q_s8((const int8_t *)pb + 128 * k + 16 * (4 * half + p));
#pragma GCC unroll 16
                    for (int tp = 0; tp < ntp; tp++)
                        part[p][tp] = vmmlaq_s32(part[p][tp], w, xi[tp]);
                }
            }
#pragma GCC unroll 16
            for (int p = 0; p < 4; p++)
#pragma GCC unroll 16
                for (int tp = 0; tp < ntp; tp++)
                    dot[p][tp] = vmlaq_s32(dot[p][tp], part[p][tp], sc[p]);
        }
#pragma GCC unroll 16
        for (int p = 0; p < 4; p++) {
            float32x4_t d = dup_pairs(vld1_f32((const float *)(pb + KN_D) + 8 * half + 2 * p));
#pragma GCC unroll 16
            for (int tp = 0; tp < ntp; tp++)
                acc[p][tp] = vfmaq_f32(acc[p][tp], vcvtq_f32_s32(dot[p][tp]), vmulq_f32(d, xd[tp]));
        }
    }
    store_pairs(acc, 4 * half, nr, nc, y, y_stride);
}

static inline ALWAYS_INLINE void tile16_k(const struct ktype *t, int64_t n, const void *packed,
                                          int nr, const uint8_t *x, size_t x_stride, int nc,
                                          float *y, size_t y_stride) {
    for (int half = 0; half < 2 && 8 * half < nr; half++) {
        if (nc > 2)
            pairs8(t, n, packed, half, nr, x, x_stride, nc, 2, y, y_stride);
        else
            pairs8(t, n, packed, half, nr, x, x_stride, nc, 1, y, y_stride);
    }
}
#endif

/* ---- the kernels ----------------------------------------------------------------------------- */

/* The kernels of this level's table (qkernels.c): each type's struct ktype, then its kernel;
 * activations from the reference quantizer of ggml's q8_K. */
#define DEFINE_KQUANT(type, group, mins)                                                           \
    static const struct ktype kt_##type = {decode_##type, sizeof(struct block_##type), group,      \
                                           mins};                                                  \
    DEFINE_KQUANT_KERNEL(QK_LEVEL, LEVEL_NAME, type, xq8_K_quantize, )

/*            type  group mins */
DEFINE_KQUANT(q2_K, 16, 1)
DEFINE_KQUANT(q3_K, 16, 0)
DEFINE_KQUANT(q4_K, 32, 1)
DEFINE_KQUANT(q5_K, 32, 1)
DEFINE_KQUANT(q6_K, 16, 0)
DEFINE_KQUANT(iq4_xs, 32, 0)
