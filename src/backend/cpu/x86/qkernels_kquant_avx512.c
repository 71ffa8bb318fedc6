/* qkernels_kquant_avx512.c: matmul tiles for the k-quants and iq4_xs on AVX-512 VNNI CPUs. */
#include <immintrin.h>
#include <string.h>

#include "backend/cpu/qkernels.h"
#include "backend/cpu/x86/simd_x86.h"
#include "quant/blocks.h"
#include "quant/iq_tables.h"
#include "quant/quantize.h"

/* Every super-block of 256 weights is first decoded to one common shape (struct kdec): 256
 * unsigned levels in element order, and per group of 16 elements two small integers, the scale
 * of the group's integer dot product and the multiplier of its activation sum, which carries
 * the offset or the min. Activations are ggml's q8_K (one scale per 256 and sums per 16), the
 * same rounding llama.cpp and the reference path give them, so whole super-blocks sum in int32:
 *   row . x = d x.d (sum_g sc_g (q . x)_g + sum_g bias_g bsum_g)   (offset types: fold)
 *   row . x = d x.d sum_g sc_g (q . x)_g + db x.d sum_g bias_g bsum_g   (min types)
 * Offsets (q6_K's levels 0..63 stand for q - 32) fold into the same integer sum: as separate
 * float terms they would cancel and lose bits (iq4_xs' offset of 128 is twice its range). */
struct kdec {
    __m512i q[4]; /* unsigned levels, elements 64z .. 64z + 63 in q[z] */
    __m128i sc;   /* int8 scale per group of 16 */
    __m256i bias; /* int16 multiplier of each group's activation sum */
    float d, db;  /* factors of the dot sum and (min types) of the bias sum */
};

/* What the shared loops need to know of a type: its decoder, block size, whether its levels fit
 * VPMADDUBSW (words) or need VPDPBUSD (see group_scales), elements per scale (16 or 32), and
 * whether the bias sum folds into the dot sum (offset types) or has its own factor db. */
struct ktype {
    struct kdec (*decode)(const uint8_t *block);
    size_t block_bytes;
    int words, group, fold;
};

/* ---- decoders: one super-block of each type to struct kdec -------------------------------- */

/* 32 bytes in both halves of a zmm, each shifted right by its own count within 64-bit lanes:
 * the way 2-bit and 4-bit planes of a run of 32 bytes come out as 64 consecutive elements. */
static inline __m512i halves_srl(const uint8_t *p, int lo, int hi) {
    __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_srlv_epi64(v, _mm512_set_epi64(hi, hi, hi, hi, lo, lo, lo, lo));
}

/* A 16-byte vector with byte 2i and 2i + 1 both taken from byte i + from of v. */
static inline __m128i dup_bytes(__m128i v, int from) {
    const __m128i idx = _mm_set_epi8(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    return _mm_shuffle_epi8(v, _mm_add_epi8(idx, _mm_set1_epi8((char)from)));
}

/* Bias multipliers of an offset type: the group scales times -offset. */
static inline __m256i offset_bias(__m128i sc, int offset) {
    return _mm256_mullo_epi16(_mm256_cvtepi8_epi16(sc), _mm256_set1_epi16((short)-offset));
}

/* q6_K: per half of 128, ql's low nibbles are elements 0..63 and its high nibbles 64..127;
 * qh bit pair k of byte l is the top of element 32k + l. */
static inline struct kdec decode_q6_K(const uint8_t *p) {
    const struct block_q6_K *b = (const struct block_q6_K *)p;
    struct kdec k;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    for (int h = 0; h < 2; h++) {
        __m512i ql = _mm512_loadu_si512(b->ql + 64 * h);
        __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b->qh + 32 * h)));
        /* bit pairs 0, 1 to bits 4..5 for the low nibbles, pairs 2, 3 for the high ones */
        __m512i h0 = _mm512_sllv_epi64(qh, _mm512_set_epi64(2, 2, 2, 2, 4, 4, 4, 4));
        __m512i h1 = _mm512_srlv_epi64(qh, _mm512_set_epi64(2, 2, 2, 2, 0, 0, 0, 0));
        /* 0xF8: a | (b & c) */
        k.q[2 * h] = _mm512_ternarylogic_epi32(_mm512_and_si512(ql, m4), h0, m30, 0xF8);
        k.q[2 * h + 1] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                                   h1, m30, 0xF8);
    }
    k.sc = _mm_loadu_si128((const __m128i *)b->scales);
    k.bias = offset_bias(k.sc, 32);
    k.d = f16(b->d), k.db = 0.0f;
    return k;
}

/* q4_K / q5_K: eight 6-bit scales and mins in 12 bytes (see dequant_k.c), unpacked as ggml
 * does with 32-bit masks, four bytes at a time: the result holds the scales in bytes 0..7 and
 * the mins in 8..15. block points at the block; its scales are bytes 4..15. */
static inline __m128i k4_scales(const uint8_t *block) {
    __m128i v = _mm_loadu_si128((const __m128i *)block); /* dwords: d|dmin, u0, u1, u2 */
    /* low bits: u0 & 0x3f, u2 & 0x0f, u1 & 0x3f, u2 >> 4 & 0x0f */
    __m128i lo =
        _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(3, 2, 3, 1)), _mm_set_epi32(4, 0, 0, 0));
    lo = _mm_and_si128(lo, _mm_set_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f));
    /* top bits of scales and mins 4..7: bits 6..7 of u0, u1 moved to 4..5 */
    __m128i hi = _mm_srli_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 0, 1, 0)), 2);
    hi = _mm_and_si128(hi, _mm_set_epi32(0x30303030, 0, 0x30303030, 0));
    __m128i s = _mm_or_si128(lo, hi); /* sc 0..3, sc 4..7, m 0..3, m 4..7 */
    return s;
}

/* q4_K: 32 bytes per 64 elements, low nibbles first; x = d sc q - dmin m per sub-block of 32. */
static inline struct kdec decode_q4_K_common(const uint8_t *block, uint16_t d, uint16_t dmin,
                                             const uint8_t *qs) {
    struct kdec k;
    for (int z = 0; z < 4; z++)
        k.q[z] = _mm512_and_si512(halves_srl(qs + 32 * z, 0, 4), _mm512_set1_epi8(0x0F));
    __m128i s = k4_scales(block);
    k.sc = dup_bytes(s, 0), k.bias = _mm256_cvtepu8_epi16(dup_bytes(s, 8));
    k.d = f16(d);
    k.db = -f16(dmin);
    return k;
}

static inline struct kdec decode_q4_K(const uint8_t *p) {
    const struct block_q4_K *b = (const struct block_q4_K *)p;
    return decode_q4_K_common(p, b->d, b->dmin, b->qs);
}

/* q5_K: q4_K plus a fifth bit, bit s of qh[l] for element l of sub-block s. */
static inline struct kdec decode_q5_K(const uint8_t *p) {
    const struct block_q5_K *b = (const struct block_q5_K *)p;
    struct kdec k = decode_q4_K_common(p, b->d, b->dmin, b->qs);
    __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)b->qh));
    for (int z = 0; z < 4; z++) {
        __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << 2 * z)),
                                         _mm256_set1_epi8((char)(2 << 2 * z)), 1);
        __mmask64 m = _mm512_test_epi8_mask(qh, bit);
        k.q[z] = _mm512_mask_add_epi8(k.q[z], m, k.q[z], _mm512_set1_epi8(16));
    }
    return k;
}

/* q2_K / q3_K: in half h, bit pair j of the 32 bytes qs[32h ..] holds elements 128h + 32j ..,
 * so 64 consecutive elements are two bit pairs of one run of 32 bytes. */
static inline __m512i crumbs(const uint8_t *qs, int z) {
    int j = 2 * (z % 2);
    return _mm512_and_si512(halves_srl(qs + 32 * (z / 2), 2 * j, 2 * j + 2), _mm512_set1_epi8(3));
}

static inline struct kdec decode_q2_K(const uint8_t *p) {
    const struct block_q2_K *b = (const struct block_q2_K *)p;
    struct kdec k;
    for (int z = 0; z < 4; z++)
        k.q[z] = crumbs(b->qs, z);
    __m128i s = _mm_loadu_si128((const __m128i *)b->scales), m4 = _mm_set1_epi8(0x0F);
    k.sc = _mm_and_si128(s, m4);
    k.bias = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), m4));
    k.d = f16(b->d);
    k.db = -f16(b->dmin);
    return k;
}

/* q3_K's 16 six-bit scales (see dequant_k.c), unpacked as ggml does four bytes at a time:
 * low nibbles from u0, u1, u0 >> 4, u1 >> 4, top bits from bit pair i of u2's bytes. The 16
 * bytes read end with the block's d, so none lies outside it. */
static inline __m128i q3_scales(const uint8_t *block) {
    __m128i v = _mm_srli_si128(_mm_loadu_si128((const __m128i *)(block + 94)), 2); /* u0 u1 u2 */
    __m128i lo =
        _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(1, 0, 1, 0)), _mm_set_epi32(4, 4, 0, 0));
    __m128i hi =
        _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 2, 2, 2)), _mm_set_epi32(6, 4, 2, 0));
    return _mm_or_si128(_mm_and_si128(lo, _mm_set1_epi8(0x0F)),
                        _mm_and_si128(_mm_slli_epi32(hi, 4), _mm_set1_epi8(0x30)));
}

/* q3_K: levels q + 4 hbit in 0..7 stand for q - 4 (!hbit); the hmask bit of element
 * 128h + 32j + l is bit 4h + j of hmask[l]. Scales as ggml unpacks them, minus 32. */
static inline struct kdec decode_q3_K(const uint8_t *p) {
    const struct block_q3_K *b = (const struct block_q3_K *)p;
    struct kdec k;
    __m512i hm = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)b->hmask));
    for (int z = 0; z < 4; z++) {
        int bit = 4 * (z / 2) + 2 * (z % 2);
        __m512i sel = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << bit)),
                                         _mm256_set1_epi8((char)(2 << bit)), 1);
        __m512i q = crumbs(b->qs, z);
        k.q[z] = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(hm, sel), q, _mm512_set1_epi8(4));
    }
    k.sc = _mm_sub_epi8(q3_scales(p), _mm_set1_epi8(32));
    k.bias = offset_bias(k.sc, 4);
    k.d = f16(b->d), k.db = 0.0f;
    return k;
}

/* iq4_xs: per sub-block of 32, 16 bytes, element j in the low nibble of byte j and j + 16 in
 * the high one; levels from iq4nl_values plus 128 so they are unsigned. */
static inline struct kdec decode_iq4_xs(const uint8_t *p) {
    const struct block_iq4_xs *b = (const struct block_iq4_xs *)p;
    struct kdec k;
    const __m512i table =
        _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)iq4nl_values)),
                         _mm512_set1_epi8((char)0x80));
    for (int z = 0; z < 4; z++) {
        /* bytes 0..15 to 128-bit lanes 0 and 1 (low, high nibbles), 16..31 to lanes 2 and 3 */
        __m512i v = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(b->qs + 32 * z)));
        v = _mm512_shuffle_i64x2(v, v, _MM_SHUFFLE(1, 1, 0, 0));
        v = _mm512_srlv_epi64(v, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0));
        k.q[z] = _mm512_shuffle_epi8(table, _mm512_and_si512(v, _mm512_set1_epi8(0x0F)));
    }
    uint32_t lo;
    memcpy(&lo, b->scales_l, sizeof lo);
    uint64_t ls =
        _pdep_u64(lo, 0x0F0F0F0F0F0F0F0Full) | _pdep_u64(b->scales_h, 0x3030303030303030ull);
    k.sc = dup_bytes(_mm_sub_epi8(_mm_cvtsi64_si128((long long)ls), _mm_set1_epi8(32)), 0);
    k.bias = offset_bias(k.sc, 128);
    k.d = f16(b->d), k.db = 0.0f;
    return k;
}

/* ---- single tokens and small batches: one row at a time, its super-block decoded once and
 * dotted with every token --------------------------------------------------------------------- */

/* Index vector selecting, in 128-bit lane L, element 4z + L of 16 dwords (words: pair 4z + L). */
static inline __m512i lane_groups(int z, int words) {
    int m = words ? 0x10001 : 1, g = 4 * z;
    return _mm512_set_epi32((g + 3) * m, (g + 3) * m, (g + 3) * m, (g + 3) * m, (g + 2) * m,
                            (g + 2) * m, (g + 2) * m, (g + 2) * m, (g + 1) * m, (g + 1) * m,
                            (g + 1) * m, (g + 1) * m, g * m, g * m, g * m, g * m);
}

/* The group scales as multipliers for the dot products of q[z]: words for VPMADDUBSW +
 * VPDPWSSD (levels below 64, so the 16-bit pair sums cannot saturate), dwords for VPDPBUSD +
 * VPMULLD (iq4_xs: levels up to 241). */
static inline void group_scales(const struct kdec *k, int words, __m512i s[4]) {
    __m512i all =
        words ? _mm512_castsi256_si512(_mm256_cvtepi8_epi16(k->sc)) : _mm512_cvtepi8_epi32(k->sc);
    for (int z = 0; z < 4; z++)
        s[z] = words ? _mm512_permutexvar_epi16(lane_groups(z, 1), all)
                     : _mm512_permutexvar_epi32(lane_groups(z, 0), all);
}

/* sum_g sc_g (q . x)_g of one super-block, in int32 lanes. */
static inline __m512i dot_super(const struct kdec *k, const __m512i s[4], int words,
                                const int8_t *xq) {
    __m512i acc = _mm512_setzero_si512();
    for (int z = 0; z < 4; z++) {
        __m512i x = _mm512_loadu_si512(xq + 64 * z);
        if (words)
            acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(k->q[z], x), s[z]);
        else
            acc = _mm512_add_epi32(
                acc,
                _mm512_mullo_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), k->q[z], x), s[z]));
    }
    return acc;
}

enum { NR = 4, NC = 4 };

/* The row tile's hooks (qkernels_kquant_drivers.h): per token, the block's integer dot in 16
 * lanes and, for min types, the bias sum in its own 8 float lanes, added only at the end. */
struct kq_acc {
    __m512 dot[NC];
    __m256 bias[NC];
};
static inline __attribute__((always_inline)) struct kq_acc kq_acc_zero(int nc) {
    struct kq_acc a;
    for (int c = 0; c < nc; c++)
        a.dot[c] = _mm512_setzero_ps(), a.bias[c] = _mm256_setzero_ps();
    return a;
}
static inline __attribute__((always_inline)) struct kq_acc
kq_block_tokens(const struct ktype *t, const struct kdec *k, const uint8_t *x, size_t x_stride,
                int64_t b, int nc, struct kq_acc acc) {
    __m512i s[4];
    group_scales(k, t->words, s);
    for (int c = 0; c < nc; c++) {
        const struct block_q8_K *xb = (const struct block_q8_K *)(x + c * x_stride) + b;
        __m512i dot = dot_super(k, s, t->words, xb->qs);
        __m256i bs = _mm256_madd_epi16(k->bias, _mm256_loadu_si256((const __m256i *)xb->bsums));
        if (t->fold)
            dot = _mm512_add_epi32(dot, _mm512_zextsi256_si512(bs));
        else
            acc.bias[c] =
                _mm256_fmadd_ps(_mm256_cvtepi32_ps(bs), _mm256_set1_ps(k->db * xb->d), acc.bias[c]);
        acc.dot[c] =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_set1_ps(k->d * xb->d), acc.dot[c]);
    }
    return acc;
}
static inline __attribute__((always_inline)) float kq_acc_sum(const struct kq_acc *acc, int c) {
    __m256 s = _mm256_add_ps(acc->bias[c], _mm512_castps512_ps256(acc->dot[c]));
    s = _mm256_add_ps(s, _mm512_extractf32x8_ps(acc->dot[c], 1));
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

/* ---- batches: 16 rows repacked per super-block --------------------------------------------- */

/* Per super-block of 16 rows, the layout of qmatmul.h's KP_ constants: the levels chunk-major,
 * so one VPDPBUSD advances all 16 rows with a broadcast of 4 activation bytes; the bias
 * multipliers as int16 pairs for VPDPWSSD against pairs of activation sums. */
_Static_assert(KP_BLOCK <= PACK16_BYTES(QK_SUPER) - 64, "pack size");

/* r[i] dword j -> r[j] dword i: pairs of rows interleaved, then pairs of pairs, then the
 * 128-bit lanes of four vectors transposed. */
static inline void transpose16(__m512i r[16]) {
    __m512i t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    /* u[4q + j], lane L: rows 4q .. 4q + 3 of dword 4L + j */
    for (int q = 0; q < 4; q++) {
        __m512i *a = t + 4 * q;
        u[4 * q + 0] = _mm512_unpacklo_epi64(a[0], a[2]);
        u[4 * q + 1] = _mm512_unpackhi_epi64(a[0], a[2]);
        u[4 * q + 2] = _mm512_unpacklo_epi64(a[1], a[3]);
        u[4 * q + 3] = _mm512_unpackhi_epi64(a[1], a[3]);
    }
    for (int j = 0; j < 4; j++) {
        __m512i a = _mm512_shuffle_i32x4(u[j], u[4 + j], _MM_SHUFFLE(1, 0, 1, 0));
        __m512i b = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], _MM_SHUFFLE(1, 0, 1, 0));
        __m512i c = _mm512_shuffle_i32x4(u[j], u[4 + j], _MM_SHUFFLE(3, 2, 3, 2));
        __m512i d = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], _MM_SHUFFLE(3, 2, 3, 2));
        r[j] = _mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0));
        r[4 + j] = _mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1));
        r[8 + j] = _mm512_shuffle_i32x4(c, d, _MM_SHUFFLE(2, 0, 2, 0));
        r[12 + j] = _mm512_shuffle_i32x4(c, d, _MM_SHUFFLE(3, 1, 3, 1));
    }
}

/* The repack's hooks: per row 64 dwords of levels, 16 scales and 8 bias pairs as dwords, then
 * transposed 16 rows at a time. */
enum { KQ_PACK_BLOCK = KP_BLOCK };
struct kq_repack {
    __m512i lv[4][16], sc[16], bias[16];
};
static inline __attribute__((always_inline)) void kq_repack_row(const struct ktype *t,
                                                                struct kq_repack *rp,
                                                                const struct kdec *k, int r,
                                                                uint8_t *out) {
    (void)t;
    for (int z = 0; z < 4; z++)
        rp->lv[z][r] = k->q[z];
    rp->sc[r] = _mm512_cvtepi8_epi32(k->sc);
    rp->bias[r] = _mm512_zextsi256_si512(k->bias);
    ((float *)(out + KP_D))[r] = k->d, ((float *)(out + KP_DB))[r] = k->db;
}
static inline __attribute__((always_inline)) void kq_repack_block(struct kq_repack *rp,
                                                                  uint8_t *out) {
    for (int z = 0; z < 4; z++) {
        transpose16(rp->lv[z]);
        for (int c = 0; c < 16; c++)
            _mm512_storeu_si512(out + 64 * (16 * z + c), rp->lv[z][c]);
    }
    transpose16(rp->sc);
    transpose16(rp->bias);
    for (int g = 0; g < 16; g++)
        _mm_storeu_si128((__m128i *)(out + KP_SC + 16 * g), _mm512_cvtepi32_epi8(rp->sc[g]));
    for (int g = 0; g < 8; g++)
        _mm512_storeu_si512(out + KP_BIAS + 64 * g, rp->bias[g]);
}

static inline int32_t load32(const void *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

enum { PACK_NC = 8 };

/* 16 rows x nc tokens: the integer dot of each group (t->group elements) is formed with
 * VPDPBUSD, then scaled per row with one VPMULLD. The bias sums go first: min types convert
 * them right away, which frees their registers while the dot products run. */
static inline __attribute__((always_inline)) void tile16_rows(const struct ktype *t, int64_t n,
                                                              const void *packed, int nr,
                                                              const uint8_t *x, size_t x_stride,
                                                              int nc, float *y, size_t y_stride) {
    __m512 acc[PACK_NC];
    for (int c = 0; c < nc; c++)
        acc[c] = _mm512_setzero_ps();
    const uint8_t *pb = packed;
    for (int64_t b = 0; b < n / QK_SUPER; b++, pb += KP_BLOCK) {
        const struct block_q8_K *xb[PACK_NC];
        __m512i dot[PACK_NC];
        for (int c = 0; c < nc; c++) {
            xb[c] = (const struct block_q8_K *)(x + c * x_stride) + b;
            dot[c] = _mm512_setzero_si512();
        }
        for (int g = 0; g < 16; g += 2) {
            __m512i bm = _mm512_loadu_si512(pb + KP_BIAS + 32 * g);
            for (int c = 0; c < nc; c++)
                dot[c] =
                    _mm512_dpwssd_epi32(dot[c], bm, _mm512_set1_epi32(load32(xb[c]->bsums + g)));
        }
        __m512 d = _mm512_loadu_ps(pb + KP_D), db = _mm512_loadu_ps(pb + KP_DB);
        for (int c = 0; c < nc && !t->fold; c++) {
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[c]),
                                     _mm512_mul_ps(db, _mm512_set1_ps(xb[c]->d)), acc[c]);
            dot[c] = _mm512_setzero_si512();
        }
        for (int g = 0; g < 16; g += t->group / 16) {
            __m512i s =
                _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(pb + KP_SC + 16 * g)));
            for (int c = 0; c < nc; c++) {
                __m512i u = _mm512_setzero_si512();
                for (int k = 4 * g; k < 4 * g + t->group / 4; k++)
                    u = _mm512_dpbusd_epi32(u, _mm512_loadu_si512(pb + 64 * k),
                                            _mm512_set1_epi32(load32(xb[c]->qs + 4 * k)));
                dot[c] = _mm512_add_epi32(dot[c], _mm512_mullo_epi32(u, s));
            }
        }
        for (int c = 0; c < nc; c++)
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[c]),
                                     _mm512_mul_ps(d, _mm512_set1_ps(xb[c]->d)), acc[c]);
    }
    __mmask16 rows = (__mmask16)((1u << nr) - 1);
    for (int c = 0; c < nc; c++)
        _mm512_mask_storeu_ps(y + (size_t)c * y_stride, rows, acc[c]);
}

#define TILE16_CASE(nc_)                                                                           \
    case nc_: tile16_rows(t, n, packed, nr, x, x_stride, nc_, y, y_stride); break;

static inline __attribute__((always_inline)) void tile16_k(const struct ktype *t, int64_t n,
                                                           const void *packed, int nr,
                                                           const uint8_t *x, size_t x_stride,
                                                           int nc, float *y, size_t y_stride) {
    switch (nc) {
        TILE16_CASE(1)
        TILE16_CASE(2)
        TILE16_CASE(3)
        TILE16_CASE(4)
        TILE16_CASE(5)
        TILE16_CASE(6)
        TILE16_CASE(7)
    default: tile16_rows(t, n, packed, nr, x, x_stride, 8, y, y_stride);
    }
}

/* ---- small batches over the load-time layouts (kpack16.c) --------------------------------
 * A chunk of 4 elements of the group's 16 rows is one 64-byte register: VPDPBUSD meets it with
 * a broadcast of 4 activation bytes, straight from the compact layout (a mask and a shift), so
 * each weight byte is read once from memory. */
enum { GEMV_NC = 4 }; /* tokens per pass; more go in further passes */

static inline __m512i bcast32(const int8_t *p) {
    return _mm512_set1_epi32(load32(p));
}

/* q4_K: 8 loads per pair of sub-blocks give 8 chunks of each (low and high nibbles); the mins
 * meet the activations' sums of 32 as byte pairs against int16 pairs (VPDPWSSD). */
static inline __attribute__((always_inline)) void gemv_q4_K_nc(int64_t n, const uint8_t *group,
                                                               const uint8_t *x, size_t x_stride,
                                                               int nc, float *y, size_t y_stride) {
    const __m512i low = _mm512_set1_epi8(0x0F);
    __m512 acc[GEMV_NC];
    for (int c = 0; c < nc; c++)
        acc[c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < n / QK_SUPER; b++) {
        const uint8_t *pb = group + (size_t)b * K4P_BLOCK;
        const struct block_q8_K *xb[GEMV_NC];
        __m512i dot[GEMV_NC], mn[GEMV_NC];
        for (int c = 0; c < nc; c++) {
            xb[c] = (const struct block_q8_K *)(x + c * x_stride) + b;
            __m256i s = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xb[c]->bsums),
                                          _mm256_set1_epi16(1));
            int32_t sums[4]; /* sums of 32 as int16 pairs, one per pair of sub-blocks */
            _mm_storeu_si128((__m128i *)sums, _mm_packs_epi32(_mm256_castsi256_si128(s),
                                                              _mm256_extracti128_si256(s, 1)));
            mn[c] = dot[c] = _mm512_setzero_si512();
            for (int p = 0; p < 4; p++)
                mn[c] = _mm512_dpwssd_epi32(mn[c],
                                            _mm512_cvtepu8_epi16(_mm256_loadu_si256(
                                                (const __m256i *)(pb + K4P_M + 32 * p))),
                                            _mm512_set1_epi32(sums[p]));
        }
        for (int i = 0; i < 4; i++) {
            __m512i sc_lo =
                _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(pb + K4P_SC + 32 * i)));
            __m512i sc_hi =
                _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(pb + K4P_SC + 32 * i + 16)));
            __m512i plo[GEMV_NC], phi[GEMV_NC];
            for (int c = 0; c < nc; c++)
                plo[c] = phi[c] = _mm512_setzero_si512();
            for (int k = 0; k < 8; k++) {
                __m512i v = _mm512_loadu_si512(pb + K4P_QS + 64 * (8 * i + k));
                __m512i lo = _mm512_and_si512(v, low);
                __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
                for (int c = 0; c < nc; c++) {
                    plo[c] = _mm512_dpbusd_epi32(plo[c], lo, bcast32(xb[c]->qs + 64 * i + 4 * k));
                    phi[c] =
                        _mm512_dpbusd_epi32(phi[c], hi, bcast32(xb[c]->qs + 64 * i + 32 + 4 * k));
                }
            }
            for (int c = 0; c < nc; c++)
                dot[c] =
                    _mm512_add_epi32(dot[c], _mm512_add_epi32(_mm512_mullo_epi32(plo[c], sc_lo),
                                                              _mm512_mullo_epi32(phi[c], sc_hi)));
        }
        __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pb + K4P_D)));
        __m512 dm = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pb + K4P_DMIN)));
        for (int c = 0; c < nc; c++) {
            __m512 xd = _mm512_set1_ps(xb[c]->d);
            acc[c] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mn[c]), _mm512_mul_ps(dm, xd), acc[c]);
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[c]), _mm512_mul_ps(d, xd), acc[c]);
        }
    }
    for (int c = 0; c < nc; c++)
        _mm512_storeu_ps(y + (size_t)c * y_stride, acc[c]);
}

/* The width-bit field at bit `from` of every byte of v, moved to bit `to`. */
static inline __m512i field512(__m512i v, int from, int to, int width) {
    __m512i s = from > to ? _mm512_srli_epi16(v, from - to) : _mm512_slli_epi16(v, to - from);
    return _mm512_and_si512(s, _mm512_set1_epi8((char)(((1 << width) - 1) << to)));
}

/* q6_K: per group of 16, three level vectors give its 4 chunks (kpack16.c); levels 0..63 stand
 * for q - 32, so -32 times the group's activation sum joins its dot before the
 * scale. */
static inline __attribute__((always_inline)) void gemv_q6_K_nc(int64_t n, const uint8_t *group,
                                                               const uint8_t *x, size_t x_stride,
                                                               int nc, float *y, size_t y_stride) {
    const __m512i six = _mm512_set1_epi8(0x3F);
    __m512 acc[GEMV_NC];
    for (int c = 0; c < nc; c++)
        acc[c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < n / QK_SUPER; b++) {
        const uint8_t *pb = group + (size_t)b * K6P_BLOCK;
        const struct block_q8_K *xb[GEMV_NC];
        __m512i dot[GEMV_NC];
        for (int c = 0; c < nc; c++) {
            xb[c] = (const struct block_q8_K *)(x + c * x_stride) + b;
            dot[c] = _mm512_setzero_si512();
        }
        for (int g = 0; g < 16; g++) {
            const uint8_t *q = pb + K6P_Q + 192 * g;
            __m512i sc =
                _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(pb + K6P_SC + 16 * g)));
            __m512i v0 = _mm512_loadu_si512(q), v1 = _mm512_loadu_si512(q + 64),
                    v2 = _mm512_loadu_si512(q + 128);
            __m512i lv[4] = {
                _mm512_and_si512(v0, six), _mm512_and_si512(v1, six), _mm512_and_si512(v2, six),
                _mm512_or_si512(_mm512_or_si512(field512(v0, 6, 0, 2), field512(v1, 6, 2, 2)),
                                field512(v2, 6, 4, 2))};
            for (int c = 0; c < nc; c++) {
                const int8_t *xq = xb[c]->qs + 16 * g;
                __m512i p = _mm512_set1_epi32(-32 * xb[c]->bsums[g]);
                for (int k = 0; k < 4; k++)
                    p = _mm512_dpbusd_epi32(p, lv[k], bcast32(xq + 4 * k));
                dot[c] = _mm512_add_epi32(dot[c], _mm512_mullo_epi32(p, sc));
            }
        }
        __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pb + K6P_D)));
        for (int c = 0; c < nc; c++)
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[c]),
                                     _mm512_mul_ps(d, _mm512_set1_ps(xb[c]->d)), acc[c]);
    }
    for (int c = 0; c < nc; c++)
        _mm512_storeu_ps(y + (size_t)c * y_stride, acc[c]);
}

/* ---- activations: ggml's q8_K ---------------------------------------------------------------- */

/* ggml's quantize_row_q8_K vectorized, byte for byte: the scale comes from the first element
 * of largest magnitude, with its sign (d = max / -127), levels round half to even and stop at
 * 127; an all-zero block stays all zero. */
static void xq8_K_quantize_avx512(const float *x, void *xq, int64_t n) {
    struct block_q8_K *out = xq;
    for (int64_t b = 0; b < n / QK_SUPER; b++, x += QK_SUPER) {
        __m512 amax = _mm512_setzero_ps();
        for (int i = 0; i < 16; i++)
            amax = _mm512_max_ps(amax, _mm512_abs_ps(_mm512_loadu_ps(x + 16 * i)));
        float a = _mm512_reduce_max_ps(amax);
        if (a == 0.0f) {
            memset(&out[b], 0, sizeof out[b]);
            continue;
        }
        int first = 0;
        for (int i = 0; i < 16; i++) {
            __mmask16 m = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + 16 * i)),
                                             _mm512_set1_ps(a), _CMP_EQ_OQ);
            if (m) {
                first = 16 * i + __builtin_ctz(m);
                break;
            }
        }
        const float iscale = -127.f / x[first];
        for (int i = 0; i < 16; i++) {
            __m512i v = _mm512_cvtps_epi32(
                _mm512_mul_ps(_mm512_loadu_ps(x + 16 * i), _mm512_set1_ps(iscale)));
            _mm_storeu_si128((__m128i *)(out[b].qs + 16 * i),
                             _mm512_cvtepi32_epi8(_mm512_min_epi32(v, _mm512_set1_epi32(127))));
        }
        /* sums of 16: byte sums of 8 (plus 128 each) per qword, then adjacent qwords added */
        __m512i s8[4];
        for (int k = 0; k < 4; k++)
            s8[k] = _mm512_sad_epu8(_mm512_xor_si512(_mm512_loadu_si512(out[b].qs + 64 * k),
                                                     _mm512_set1_epi8((char)0x80)),
                                    _mm512_setzero_si512());
        const __m512i even = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0);
        const __m512i odd = _mm512_add_epi64(even, _mm512_set1_epi64(1));
        for (int h = 0; h < 2; h++) {
            __m512i sum =
                _mm512_add_epi64(_mm512_permutex2var_epi64(s8[2 * h], even, s8[2 * h + 1]),
                                 _mm512_permutex2var_epi64(s8[2 * h], odd, s8[2 * h + 1]));
            __m128i sums = _mm_sub_epi16(_mm512_cvtepi64_epi16(sum), _mm_set1_epi16(16 * 128));
            _mm_storeu_si128((__m128i *)(out[b].bsums + 8 * h), sums);
        }
        out[b].d = 1 / iscale;
    }
}

/* ---- the kernels ----------------------------------------------------------------------------- */

#include "backend/cpu/qkernels_kquant_drivers.h"

KQ_GEMV_BY_NC(q4_K)
KQ_GEMV_BY_NC(q6_K)

/* The kernels of the AVX-512 table (qkernels.c): each type's struct ktype, then its kernel. */
#define DEFINE_KQUANT(type, words, group, fold, ...)                                               \
    static const struct ktype kt_##type = {decode_##type, sizeof(struct block_##type), words,      \
                                           group, fold};                                           \
    DEFINE_KQUANT_KERNEL(avx512, "avx512-vnni", type, xq8_K_quantize_avx512, __VA_ARGS__)

/*            type   words group fold */
DEFINE_KQUANT(q6_K, 1, 16, 1, KPACK16_LAYOUT(q6_K))
DEFINE_KQUANT(q4_K, 1, 32, 0, KPACK16_LAYOUT(q4_K))
DEFINE_KQUANT(q5_K, 1, 32, 0, )
DEFINE_KQUANT(q3_K, 1, 16, 1, )
DEFINE_KQUANT(q2_K, 1, 16, 0, )
DEFINE_KQUANT(iq4_xs, 0, 32, 1, )
