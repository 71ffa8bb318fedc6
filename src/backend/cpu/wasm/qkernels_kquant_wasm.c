/* qkernels_kquant_wasm.c: matmul kernels for the k-quants and iq4_xs in WebAssembly SIMD128, the
 * shapes of the NEON file (qkernels_kquant_neon.c): a row tile for any shape and 16 rows repacked
 * per super-block for batches, byte products widened to 16 bits (level_wasm.h). */
#include <string.h>

#include "backend/cpu/qkernels.h"
#include "backend/cpu/wasm/level_wasm.h"
#include "quant/blocks.h"
#include "quant/iq_tables.h"

/* Every super-block of 256 weights is first decoded to one common shape (struct kdec): 256
 * signed levels in element order and an int32 scale per group (16 or 32 elements). Offsets (q3_K's
 * 4, q6_K's 32, iq4_xs' signed table) are subtracted from the levels; the min types (q2_K, q4_K,
 * q5_K) keep their unsigned levels and pay for the min with the activations' sums of 16 (q8_K's
 * bsums). Activations are ggml's q8_K, so each super-block sums exactly in int32:
 *   row . x = d x.d sum_g sc_g (q . x)_g - dmin x.d sum_g m_g bsum_g */
struct kdec {
    v128_t q[16];  /* elements 16i .. 16i + 15 in q[i] */
    v128_t sc[4];  /* int32 scales of groups 4i .. 4i + 3 in sc[i] */
    v128_t min[2]; /* min types: int16 min of each group, group order */
    float d, dmin;
};

/* A type's decoder and block size, its elements per scale (16 or 32), and whether it has mins. */
struct ktype {
    struct kdec (*decode)(const uint8_t *block);
    size_t block_bytes;
    int group, mins;
};

static inline uint32_t load32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Sixteen int8 scales as four int32x4 (the first 8 only are used by 32-element groups). */
static inline void widen_scales(v128_t s, v128_t sc[4]) {
    v128_t lo = wasm_i16x8_extend_low_i8x16(s), hi = wasm_i16x8_extend_high_i8x16(s);
    sc[0] = wasm_i32x4_extend_low_i16x8(lo), sc[1] = wasm_i32x4_extend_high_i16x8(lo);
    sc[2] = wasm_i32x4_extend_low_i16x8(hi), sc[3] = wasm_i32x4_extend_high_i16x8(hi);
}

/* Bytes of v with bit `bit` set, as all ones. */
static inline v128_t bit_set(v128_t v, uint8_t bit) {
    return wasm_i8x16_ne(wasm_v128_and(v, wasm_i8x16_splat((int8_t)bit)), wasm_i8x16_splat(0));
}

/* ---- decoders: one super-block of each type to struct kdec -------------------------------- */

/* q2_K / q3_K: in half h, bit pair j of the 32 bytes qs[32h ..] holds elements 128h + 32j ..
 * (see dequant_k.c); q[8h + 2j + i] takes bytes 16i .. 16i + 15 of that run. */
static inline ALWAYS_INLINE void crumbs(const uint8_t *qs, v128_t q[16]) {
    const v128_t three = wasm_i8x16_splat(3);
    for (int h = 0; h < 2; h++) {
        v128_t b0 = wasm_v128_load(qs + 32 * h), b1 = wasm_v128_load(qs + 32 * h + 16);
        for (int j = 0; j < 4; j++) {
            q[8 * h + 2 * j] = wasm_v128_and(wasm_u8x16_shr(b0, 2 * j), three);
            q[8 * h + 2 * j + 1] = wasm_v128_and(wasm_u8x16_shr(b1, 2 * j), three);
        }
    }
}

static inline ALWAYS_INLINE struct kdec decode_q2_K(const uint8_t *p) {
    const struct block_q2_K *b = (const struct block_q2_K *)p;
    struct kdec k;
    crumbs(b->qs, k.q);
    v128_t s = wasm_v128_load(b->scales); /* low nibble scale, high nibble min */
    widen_scales(wasm_v128_and(s, wasm_i8x16_splat(0x0F)), k.sc);
    v128_t m = wasm_u8x16_shr(s, 4);
    k.min[0] = wasm_u16x8_extend_low_u8x16(m);
    k.min[1] = wasm_u16x8_extend_high_u8x16(m);
    k.d = f16(b->d), k.dmin = f16(b->dmin);
    return k;
}

/* q3_K: levels q - 4 where the hmask bit is clear; the bit of element 128h + 32j + l is bit
 * 4h + j of hmask[l]. The 16 six-bit scales unpacked as ggml does, four bytes at a time. */
static inline ALWAYS_INLINE struct kdec decode_q3_K(const uint8_t *p) {
    const struct block_q3_K *b = (const struct block_q3_K *)p;
    struct kdec k;
    crumbs(b->qs, k.q);
    v128_t hm[2] = {wasm_v128_load(b->hmask), wasm_v128_load(b->hmask + 16)};
    for (int i = 0; i < 16; i++) {
        v128_t set = bit_set(hm[i % 2], (uint8_t)(1u << (i / 2)));
        k.q[i] = wasm_i8x16_sub(k.q[i], wasm_v128_andnot(wasm_i8x16_splat(4), set));
    }
    const uint32_t u[3] = {load32(b->scales), load32(b->scales + 4), load32(b->scales + 8)};
    const uint32_t m4 = 0x0f0f0f0f, m2 = 0x03030303;
    v128_t s = wasm_u32x4_make((u[0] & m4) | (u[2] & m2) << 4, (u[1] & m4) | (u[2] >> 2 & m2) << 4,
                               (u[0] >> 4 & m4) | (u[2] >> 4 & m2) << 4,
                               (u[1] >> 4 & m4) | (u[2] >> 6 & m2) << 4);
    widen_scales(wasm_i8x16_sub(s, wasm_i8x16_splat(32)), k.sc);
    k.d = f16(b->d), k.dmin = 0.0f;
    return k;
}

/* q4_K / q5_K: eight 6-bit scales and mins in 12 bytes (see dequant_k.c), unpacked as ggml
 * does with 32-bit masks; 32 bytes of qs per 64 elements, low nibbles first. */
static inline ALWAYS_INLINE struct kdec decode_k4(const uint8_t *scales, uint16_t d, uint16_t dmin,
                                                  const uint8_t *qs) {
    struct kdec k;
    const v128_t low = wasm_i8x16_splat(0x0F);
    for (int j = 0; j < 4; j++) {
        v128_t b0 = wasm_v128_load(qs + 32 * j), b1 = wasm_v128_load(qs + 32 * j + 16);
        k.q[4 * j] = wasm_v128_and(b0, low);
        k.q[4 * j + 1] = wasm_v128_and(b1, low);
        k.q[4 * j + 2] = wasm_u8x16_shr(b0, 4);
        k.q[4 * j + 3] = wasm_u8x16_shr(b1, 4);
    }
    const uint32_t u[3] = {load32(scales), load32(scales + 4), load32(scales + 8)};
    const uint32_t m6 = 0x3f3f3f3f, m4 = 0x0f0f0f0f, m2 = 0x03030303;
    /* scales in bytes 0..7, mins in 8..15 */
    v128_t s = wasm_u32x4_make(u[0] & m6, (u[2] & m4) | (u[0] >> 6 & m2) << 4, u[1] & m6,
                               (u[2] >> 4 & m4) | (u[1] >> 6 & m2) << 4);
    widen_scales(s, k.sc);
    k.min[0] = wasm_u16x8_extend_high_u8x16(s);
    k.min[1] = wasm_i16x8_splat(0);
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
    v128_t qh[2] = {wasm_v128_load(b->qh), wasm_v128_load(b->qh + 16)};
    for (int i = 0; i < 16; i++) {
        v128_t set = bit_set(qh[i % 2], (uint8_t)(1u << (i / 2)));
        k.q[i] = wasm_v128_or(k.q[i], wasm_v128_and(set, wasm_i8x16_splat(16)));
    }
    return k;
}

/* q6_K: per half of 128, element 32k + l takes nibble k / 2 of ql[l + 32 (k % 2)] and bit pair
 * k of qh[l] as its top bits; levels 0..63 stand for q - 32. */
static inline ALWAYS_INLINE struct kdec decode_q6_K(const uint8_t *p) {
    const struct block_q6_K *b = (const struct block_q6_K *)p;
    struct kdec k;
    for (int h = 0; h < 2; h++) {
        v128_t ql[4], qh[2] = {wasm_v128_load(b->qh + 32 * h), wasm_v128_load(b->qh + 32 * h + 16)};
        for (int i = 0; i < 4; i++)
            ql[i] = wasm_v128_load(b->ql + 64 * h + 16 * i);
        for (int kk = 0; kk < 4; kk++)
            for (int i = 0; i < 2; i++) {
                v128_t lo = ql[2 * (kk % 2) + i];
                lo = kk < 2 ? wasm_v128_and(lo, wasm_i8x16_splat(0x0F)) : wasm_u8x16_shr(lo, 4);
                /* bit pair kk to bits 4..5 */
                v128_t hi =
                    kk < 2 ? wasm_i8x16_shl(qh[i], 4 - 2 * kk) : wasm_u8x16_shr(qh[i], 2 * kk - 4);
                hi = wasm_v128_and(hi, wasm_i8x16_splat(0x30));
                k.q[8 * h + 2 * kk + i] =
                    wasm_i8x16_sub(wasm_v128_or(lo, hi), wasm_i8x16_splat(32));
            }
    }
    widen_scales(wasm_v128_load(b->scales), k.sc);
    k.d = f16(b->d), k.dmin = 0.0f;
    return k;
}

/* iq4_xs: per sub-block of 32, 16 bytes, element j in the low nibble of byte j and j + 16 in
 * the high one, read through the signed level table; 6-bit scales minus 32. */
static inline ALWAYS_INLINE struct kdec decode_iq4_xs(const uint8_t *p) {
    const struct block_iq4_xs *b = (const struct block_iq4_xs *)p;
    struct kdec k;
    const v128_t levels = wasm_v128_load(iq4nl_values);
    uint32_t lo = load32(b->scales_l);
    uint64_t ls = 0; /* scale s in byte s: nibble s of scales_l, bit pair s of scales_h */
    for (int s = 0; s < 8; s++) {
        v128_t v = wasm_v128_load(b->qs + 16 * s);
        k.q[2 * s] = wasm_i8x16_swizzle(levels, wasm_v128_and(v, wasm_i8x16_splat(0x0F)));
        k.q[2 * s + 1] = wasm_i8x16_swizzle(levels, wasm_u8x16_shr(v, 4));
        ls |= (uint64_t)((lo >> 4 * s & 0x0F) | (b->scales_h >> 2 * s & 3u) << 4) << 8 * s;
    }
    widen_scales(wasm_i8x16_sub(wasm_u64x2_make(ls, 0), wasm_i8x16_splat(32)), k.sc);
    k.d = f16(b->d), k.dmin = 0.0f;
    return k;
}

/* ---- tiles: one row at a time, its decoded super-block dotted with every token -------------- */

/* Lane g: the lane total of d[g] (four vectors' sums side by side). */
static inline ALWAYS_INLINE v128_t totals(const v128_t d[4]) {
    v128_t a = wasm_i32x4_add(wasm_i32x4_shuffle(d[0], d[1], 0, 2, 4, 6),
                              wasm_i32x4_shuffle(d[0], d[1], 1, 3, 5, 7));
    v128_t b = wasm_i32x4_add(wasm_i32x4_shuffle(d[2], d[3], 0, 2, 4, 6),
                              wasm_i32x4_shuffle(d[2], d[3], 1, 3, 5, 7));
    return wasm_i32x4_add(wasm_i32x4_shuffle(a, b, 0, 2, 4, 6),
                          wasm_i32x4_shuffle(a, b, 1, 3, 5, 7));
}

/* acc + the super-block's dot with one token, in 4 float lanes. */
static inline ALWAYS_INLINE v128_t dot_super(const struct ktype *t, const struct kdec *k,
                                             const struct block_q8_K *xb, v128_t acc) {
    const int per = t->group / 16; /* q vectors per group */
    v128_t isum = wasm_i32x4_splat(0);
    for (int g4 = 0; g4 < 16 / per / 4; g4++) {
        v128_t dot[4];
        for (int g = 0; g < 4; g++) {
            int v = per * (4 * g4 + g);
            v128_t x0 = wasm_v128_load(xb->qs + 16 * v);
            if (per == 2)
                dot[g] = dot_pair(wasm_i32x4_splat(0), k->q[v], x0, k->q[v + 1],
                                  wasm_v128_load(xb->qs + 16 * v + 16));
            else
                dot[g] = wasm_i32x4_add(dot_pairs_lo(k->q[v], x0), dot_pairs_hi(k->q[v], x0));
        }
        /* lane g: the whole dot of group 4 g4 + g, to meet its scale */
        isum = wasm_i32x4_add(isum, wasm_i32x4_mul(totals(dot), k->sc[g4]));
    }
    acc = fmadd(acc, wasm_f32x4_convert_i32x4(isum), wasm_f32x4_splat(k->d * xb->d));
    if (t->mins) {
        v128_t b0 = wasm_v128_load(xb->bsums), b1 = wasm_v128_load(xb->bsums + 8);
        v128_t m;
        if (t->group == 32) { /* sums of 16 paired to sums of 32 (at most 4064: int16) */
            v128_t b = wasm_i16x8_add(wasm_i16x8_shuffle(b0, b1, 0, 2, 4, 6, 8, 10, 12, 14),
                                      wasm_i16x8_shuffle(b0, b1, 1, 3, 5, 7, 9, 11, 13, 15));
            m = wasm_i32x4_dot_i16x8(k->min[0], b);
        } else {
            m = wasm_i32x4_add(wasm_i32x4_dot_i16x8(k->min[0], b0),
                               wasm_i32x4_dot_i16x8(k->min[1], b1));
        }
        acc = fmadd(acc, wasm_f32x4_convert_i32x4(m), wasm_f32x4_splat(-k->dmin * xb->d));
    }
    return acc;
}

enum { NR = 4, NC = 4 };

/* The row tile's hooks (qkernels_kquant_drivers.h): the block's dot with each token in turn. */
struct kq_acc {
    v128_t v[NC];
};
static inline ALWAYS_INLINE struct kq_acc kq_acc_zero(int nc) {
    struct kq_acc a;
    for (int c = 0; c < nc; c++)
        a.v[c] = wasm_f32x4_splat(0.0f);
    return a;
}
static inline ALWAYS_INLINE struct kq_acc kq_block_tokens(const struct ktype *t,
                                                          const struct kdec *k, const uint8_t *x,
                                                          size_t x_stride, int64_t b, int nc,
                                                          struct kq_acc acc) {
    for (int c = 0; c < nc; c++)
        acc.v[c] = dot_super(t, k, (const struct block_q8_K *)(x + c * x_stride) + b, acc.v[c]);
    return acc;
}
static inline ALWAYS_INLINE float kq_acc_sum(const struct kq_acc *acc, int c) {
    return hsum_f32(acc->v[c]);
}

/* ---- batches: 16 rows repacked per super-block ------------------------------------------
 * NEON's scratch layout: the levels of 16 rows (signed, as decoded), chunk-major (chunk c, 4
 * elements, of row r at 64 c + 4 r), then per group of 16 elements the rows' int8 scales
 * [group][row] (a group of 32 gives its scale to both its halves), the min types' int16 mins
 * [group][row], and per row d and -dmin. */
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
        wasm_v128_store(sc + 4 * i, k->sc[i]);
    wasm_v128_store(mins, k->min[0]), wasm_v128_store(mins + 8, k->min[1]);
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

enum { KQ_PACK_BLOCK = KN_BLOCK };
struct kq_repack {
    int8_t levels[QK_SUPER];
};
static inline ALWAYS_INLINE void kq_repack_row(const struct ktype *t, struct kq_repack *rp,
                                               const struct kdec *k, int r, uint8_t *out) {
    for (int i = 0; i < 16; i++)
        wasm_v128_store(rp->levels + 16 * i, k->q[i]);
    for (int c = 0; c < QK_SUPER / 4; c++)
        memcpy(out + 64 * c + 4 * r, rp->levels + 4 * c, 4);
    repack_factors(t, k, r, out);
}
static inline ALWAYS_INLINE void kq_repack_block(const struct kq_repack *rp, uint8_t *out) {
    (void)rp, (void)out;
}

#include "backend/cpu/qkernels_kquant_drivers.h"

/* Rows 8 half .. 8 half + 7 (quads 2 half, 2 half + 1) x nc tokens over every super-block: the
 * mins against the activation sums first (converted at once), then per group the chunks by lane
 * into partial sums that meet the rows' scales. */
static inline ALWAYS_INLINE void rows8(const struct ktype *t, int64_t n, const uint8_t *packed,
                                       int half, int nr, const uint8_t *x, size_t x_stride, int nc,
                                       float *y, size_t y_stride) {
    v128_t acc[4][PACK_NC];
    for (int q = 0; q < 2; q++)
        for (int c = 0; c < nc; c++)
            acc[q][c] = wasm_f32x4_splat(0.0f);
    const uint8_t *pb = packed;
    for (int64_t b = 0; b < n / QK_SUPER; b++, pb += KN_BLOCK) {
        const struct block_q8_K *xb[PACK_NC] = {NULL};
        v128_t dot[2][PACK_NC];
        for (int c = 0; c < PACK_NC; c++) /* all, so none is seen unset */
            dot[0][c] = dot[1][c] = wasm_i32x4_splat(0);
        for (int c = 0; c < nc; c++)
            xb[c] = (const struct block_q8_K *)(x + (size_t)c * x_stride) + b;
        for (int g = 0; g < 16 && t->mins; g++) {
            v128_t m = wasm_v128_load((const int16_t *)(pb + KN_BIAS) + 16 * g + 8 * half);
            v128_t m0 = wasm_i32x4_extend_low_i16x8(m), m1 = wasm_i32x4_extend_high_i16x8(m);
            for (int c = 0; c < nc; c++) {
                v128_t bs = wasm_i32x4_splat(xb[c]->bsums[g]);
                dot[0][c] = wasm_i32x4_add(dot[0][c], wasm_i32x4_mul(m0, bs));
                dot[1][c] = wasm_i32x4_add(dot[1][c], wasm_i32x4_mul(m1, bs));
            }
        }
        if (t->mins)
            for (int q = 0; q < 2; q++) {
                v128_t db = wasm_v128_load((const float *)(pb + KN_DB) + 8 * half + 4 * q);
                for (int c = 0; c < nc; c++) {
                    v128_t f = wasm_f32x4_mul(db, wasm_f32x4_splat(xb[c]->d));
                    acc[q][c] = fmadd(acc[q][c], wasm_f32x4_convert_i32x4(dot[q][c]), f);
                    dot[q][c] = wasm_i32x4_splat(0);
                }
            }
        for (int g = 0; g < 16; g += t->group / 16) {
            v128_t s = wasm_i16x8_load8x8(pb + KN_SC + 16 * g + 8 * half);
            v128_t sc[2] = {wasm_i32x4_extend_low_i16x8(s), wasm_i32x4_extend_high_i16x8(s)};
            v128_t lo[2][PACK_NC], hi[2][PACK_NC];
            for (int q = 0; q < 2; q++)
                for (int c = 0; c < nc; c++)
                    lo[q][c] = hi[q][c] = wasm_i32x4_splat(0);
            for (int k = 4 * g; k < 4 * g + t->group / 4; k += 4) {
                v128_t xv[PACK_NC];
                for (int c = 0; c < nc; c++)
                    xv[c] = wasm_v128_load(xb[c]->qs + 4 * k);
                for (int q = 0; q < 2; q++) {
                    const uint8_t *wq = pb + 64 * k + 16 * (2 * half + q);
                    v128_t w[4] = {wasm_v128_load(wq), wasm_v128_load(wq + 64),
                                   wasm_v128_load(wq + 128), wasm_v128_load(wq + 192)};
                    for (int c = 0; c < nc; c++)
                        for (int j = 0; j < 4; j += 2) {
                            v128_t a = j ? splat_lane(xv[c], 2) : splat_lane(xv[c], 0);
                            v128_t e = j ? splat_lane(xv[c], 3) : splat_lane(xv[c], 1);
                            lo[q][c] = wasm_i32x4_add(
                                lo[q][c], wasm_i32x4_extadd_pairwise_i16x8(wasm_i16x8_add(
                                              wasm_i16x8_extmul_low_i8x16(w[j], a),
                                              wasm_i16x8_extmul_low_i8x16(w[j + 1], e))));
                            hi[q][c] = wasm_i32x4_add(
                                hi[q][c], wasm_i32x4_extadd_pairwise_i16x8(wasm_i16x8_add(
                                              wasm_i16x8_extmul_high_i8x16(w[j], a),
                                              wasm_i16x8_extmul_high_i8x16(w[j + 1], e))));
                        }
                }
            }
            for (int q = 0; q < 2; q++)
                for (int c = 0; c < nc; c++)
                    dot[q][c] = wasm_i32x4_add(
                        dot[q][c], wasm_i32x4_mul(fold_quads(lo[q][c], hi[q][c]), sc[q]));
        }
        for (int q = 0; q < 2; q++) {
            v128_t d = wasm_v128_load((const float *)(pb + KN_D) + 8 * half + 4 * q);
            for (int c = 0; c < nc; c++)
                acc[q][c] = fmadd(acc[q][c], wasm_f32x4_convert_i32x4(dot[q][c]),
                                  wasm_f32x4_mul(d, wasm_f32x4_splat(xb[c]->d)));
        }
    }
    store_quads(acc, 2 * half, 2, nr, nc, y, y_stride);
}

KQ_TILE16_BY_HALVES()

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
