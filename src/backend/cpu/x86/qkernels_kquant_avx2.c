/* qkernels_kquant_avx2.c: matmul tiles for the k-quants and iq4_xs on AVX2 CPUs without AVX-512. */
#include <immintrin.h>
#include <string.h>

#include "backend/cpu/qkernels.h"
#include "backend/cpu/x86/level_avx2.h"
#include "backend/cpu/x86/simd_x86.h"
#include "quant/blocks.h"
#include "quant/iq_tables.h"

/* As in qkernels_kquant_avx512.c, every super-block of 256 weights is first decoded to one
 * common shape: levels in element order, and per group of 16 elements the scale of the group's
 * integer dot product and the multiplier of its activation sum (q8_K's bsums), which carries the
 * offset (folded into the same int32 sum) or the min (its own factor db):
 *   row . x = d x.d (sum_g sc_g (q . x)_g + sum_g bias_g bsum_g)        (offset types: fold)
 *   row . x = d x.d sum_g sc_g (q . x)_g + db x.d sum_g bias_g bsum_g   (min types)
 * VPMADDUBSW needs its unsigned operand below 128 to stay clear of saturation: the k-quant
 * levels are unsigned and below 64; iq4_xs' levels are signed and go through the sign trick. */
struct kdec {
    __m256i q[8]; /* levels of elements 32i .. 32i + 31 in q[i] */
    __m128i sc;   /* int8 scale per group of 16 */
    __m256i bias; /* int16 multiplier of each group's activation sum */
    float d, db;  /* factors of the dot sum and (min types) of the bias sum */
};

/* A type for the shared loops: its decoder and block size, whether the bias sum folds into the
 * dot sum, whether its levels are signed, elements per scale (16 or 32), and how many chunks of
 * 4 may share an int16 partial sum of VPMADDUBSW pairs (levels below 16: 8 chunks, 16 * 15 *
 * 127 < 2^15; below 32: 4; below 64: 2; signed: 1). */
struct ktype {
    struct kdec (*decode)(const uint8_t *block);
    size_t block_bytes;
    int fold, sign, group, depth;
};

static inline __m256i load256(const void *p) {
    return _mm256_loadu_si256((const __m256i *)p);
}

/* ---- decoders: one super-block of each type to struct kdec -------------------------------- */

/* The width-bit field at bit `from` of every byte of v, moved to bit `to`. The shifts are 16-bit,
 * but the bits that cross into the neighbouring byte land outside the mask. */
static inline __m256i field(__m256i v, int from, int to, int width) {
    __m256i s = from > to ? _mm256_srli_epi16(v, from - to) : _mm256_slli_epi16(v, to - from);
    return _mm256_and_si256(s, _mm256_set1_epi8((char)(((1 << width) - 1) << to)));
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

/* q2_K: in half h, bit pair j of the 32 bytes qs[32h ..] holds elements 128h + 32j ..; each
 * scale byte is the group's scale (low nibble) and min (high nibble). */
static inline struct kdec decode_q2_K(const uint8_t *p) {
    const struct block_q2_K *b = (const struct block_q2_K *)p;
    struct kdec k;
    for (int i = 0; i < 8; i++)
        k.q[i] = field(load256(b->qs + 32 * (i / 4)), 2 * (i % 4), 0, 2);
    __m128i s = _mm_loadu_si128((const __m128i *)b->scales), m4 = _mm_set1_epi8(0x0F);
    k.sc = _mm_and_si128(s, m4);
    k.bias = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), m4));
    k.d = f16(b->d), k.db = -f16(b->dmin);
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
    __m256i hm = load256(b->hmask);
    for (int i = 0; i < 8; i++)
        k.q[i] = _mm256_or_si256(field(load256(b->qs + 32 * (i / 4)), 2 * (i % 4), 0, 2),
                                 field(hm, i, 2, 1));
    k.sc = _mm_sub_epi8(q3_scales(p), _mm_set1_epi8(32));
    k.bias = offset_bias(k.sc, 4);
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
    return _mm_or_si128(lo, hi); /* sc 0..3, sc 4..7, m 0..3, m 4..7 */
}

/* q4_K: 32 bytes per 64 elements, low nibbles first; x = d sc q - dmin m per sub-block of 32,
 * whose scale and min serve both its groups of 16. */
static inline struct kdec decode_q4_K_common(const uint8_t *block, uint16_t d, uint16_t dmin,
                                             const uint8_t *qs) {
    struct kdec k;
    for (int i = 0; i < 8; i++)
        k.q[i] = field(load256(qs + 32 * (i / 2)), 4 * (i % 2), 0, 4);
    __m128i s = k4_scales(block);
    k.sc = dup_bytes(s, 0), k.bias = _mm256_cvtepu8_epi16(dup_bytes(s, 8));
    k.d = f16(d), k.db = -f16(dmin);
    return k;
}

static inline struct kdec decode_q4_K(const uint8_t *p) {
    const struct block_q4_K *b = (const struct block_q4_K *)p;
    return decode_q4_K_common(p, b->d, b->dmin, b->qs);
}

/* q5_K: q4_K plus a fifth bit, bit i of qh[l] for element l of sub-block i. */
static inline struct kdec decode_q5_K(const uint8_t *p) {
    const struct block_q5_K *b = (const struct block_q5_K *)p;
    struct kdec k = decode_q4_K_common(p, b->d, b->dmin, b->qs);
    __m256i qh = load256(b->qh);
    for (int i = 0; i < 8; i++)
        k.q[i] = _mm256_or_si256(k.q[i], field(qh, i, 4, 1));
    return k;
}

/* q6_K: per half of 128, element 32j + l takes nibble j / 2 of ql[l + 32 (j % 2)] and bit pair
 * j of qh[l] as its top bits; levels 0..63 stand for q - 32. */
static inline struct kdec decode_q6_K(const uint8_t *p) {
    const struct block_q6_K *b = (const struct block_q6_K *)p;
    struct kdec k;
    for (int i = 0; i < 8; i++) {
        int h = i / 4, j = i % 4;
        __m256i ql = load256(b->ql + 64 * h + 32 * (j % 2)), qh = load256(b->qh + 32 * h);
        k.q[i] = _mm256_or_si256(field(ql, 4 * (j / 2), 0, 4), field(qh, 2 * j, 4, 2));
    }
    k.sc = _mm_loadu_si128((const __m128i *)b->scales);
    k.bias = offset_bias(k.sc, 32);
    k.d = f16(b->d), k.db = 0.0f;
    return k;
}

/* iq4_xs: per sub-block of 32, 16 bytes, element j in the low nibble of byte j and j + 16 in
 * the high one, signed levels from iq4nl_values; 6-bit scales minus 32, their low nibbles two
 * per byte of scales_l and their top bit pairs in scales_h, spread one field per byte by
 * halving steps (what _pdep_u64 does where BMI2 is at hand). */
static inline struct kdec decode_iq4_xs(const uint8_t *p) {
    const struct block_iq4_xs *b = (const struct block_iq4_xs *)p;
    struct kdec k;
    const __m256i table =
        _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)iq4nl_values));
    for (int i = 0; i < 8; i++) {
        __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b->qs + 16 * i)));
        v = _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_set_epi64x(4, 4, 0, 0)),
                             _mm256_set1_epi8(0x0F));
        k.q[i] = _mm256_shuffle_epi8(table, v);
    }
    uint32_t lo4;
    memcpy(&lo4, b->scales_l, sizeof lo4);
    uint64_t lo = lo4, hi = b->scales_h;
    lo = (lo | lo << 16) & 0x0000FFFF0000FFFFull;
    lo = (lo | lo << 8) & 0x00FF00FF00FF00FFull;
    lo = (lo | lo << 4) & 0x0F0F0F0F0F0F0F0Full;
    hi = (hi | hi << 24) & 0x000000FF000000FFull;
    hi = (hi | hi << 12) & 0x000F000F000F000Full;
    hi = (hi | hi << 6) & 0x0303030303030303ull;
    __m128i ls = _mm_cvtsi64_si128((long long)(lo | hi << 4));
    k.sc = dup_bytes(_mm_sub_epi8(ls, _mm_set1_epi8(32)), 0);
    k.bias = _mm256_setzero_si256();
    k.d = f16(b->d), k.db = 0.0f;
    return k;
}

/* ---- tiles ------------------------------------------------------------------------------- */

/* The multipliers of chunk i's 16 pair sums: group 2i's scale in the low 128-bit lane, group
 * 2i + 1's in the high one. s16[h] holds groups 8h .. 8h + 7 as words in both lanes. */
static inline void chunk_scales(__m128i sc, __m256i s[8]) {
    __m256i s16[2] = {_mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(sc)),
                      _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_srli_si128(sc, 8)))};
    for (int i = 0; i < 8; i++) {
        int g = 2 * (i % 4); /* word g in the low lane, g + 1 in the high one */
        __m256i idx = _mm256_set_m128i(_mm_set1_epi16((short)((2 * g + 3) << 8 | (2 * g + 2))),
                                       _mm_set1_epi16((short)((2 * g + 1) << 8 | 2 * g)));
        s[i] = _mm256_shuffle_epi8(s16[i / 4], idx);
    }
}

enum { NR = 4, NC = 4 };

/* The row tile's hooks (qkernels_kquant_drivers.h). A block meets the tokens chunk by chunk: each
 * chunk of 32 levels and its scales meet every token while they sit in registers. The pair sums
 * of VPMADDUBSW stay below 2^15: 2 * 63 * 127 for the k-quants, 2 * 127 * 127 for iq4_xs' |q|
 * times x with q's sign. */
struct kq_acc {
    __m256 v[NC];
};
static inline __attribute__((always_inline)) struct kq_acc kq_acc_zero(int nc) {
    struct kq_acc a;
    for (int c = 0; c < nc; c++)
        a.v[c] = _mm256_setzero_ps();
    return a;
}
static inline __attribute__((always_inline)) struct kq_acc
kq_block_tokens(const struct ktype *t, const struct kdec *k, const uint8_t *x, size_t x_stride,
                int64_t b, int nc, struct kq_acc acc) {
    __m256i s[8];
    chunk_scales(k->sc, s);
    const struct block_q8_K *xb[NC];
    __m256i dot[NC];
    for (int c = 0; c < nc; c++) {
        xb[c] = (const struct block_q8_K *)(x + c * x_stride) + b;
        __m256i bs = _mm256_madd_epi16(k->bias, load256(xb[c]->bsums));
        dot[c] = t->fold ? bs : _mm256_setzero_si256();
        if (!t->fold)
            acc.v[c] =
                _mm256_fmadd_ps(_mm256_cvtepi32_ps(bs), _mm256_set1_ps(k->db * xb[c]->d), acc.v[c]);
    }
    for (int i = 0; i < 8; i++) {
        __m256i q = t->sign ? _mm256_sign_epi8(k->q[i], k->q[i]) : k->q[i];
        for (int c = 0; c < nc; c++) {
            __m256i xv = load256(xb[c]->qs + 32 * i);
            xv = t->sign ? _mm256_sign_epi8(xv, k->q[i]) : xv;
            dot[c] = _mm256_add_epi32(dot[c], _mm256_madd_epi16(_mm256_maddubs_epi16(q, xv), s[i]));
        }
    }
    for (int c = 0; c < nc; c++)
        acc.v[c] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[c]), _mm256_set1_ps(k->d * xb[c]->d), acc.v[c]);
    return acc;
}
static inline __attribute__((always_inline)) float kq_acc_sum(const struct kq_acc *acc, int c) {
    return hsum(acc->v[c]);
}

/* ---- batches: 16 rows repacked per super-block, 8 at a time in a register ---------------
 * The layout of qmatmul.h's KP_ constants (shared with qkernels_kquant_avx512.c): the levels
 * chunk-major, so one broadcast of 4 activation bytes meets 8 rows in one product; the bias
 * multipliers as int16 pairs for VPMADDWD against pairs of activation sums. */
enum { PACK_NC = 4, KQ_PACK_BLOCK = KP_BLOCK };
_Static_assert(KP_BLOCK <= PACK16_BYTES(QK_SUPER) - 64, "pack size");

/* The repack's hooks: the 16 rows' decoded blocks gathered, then spread chunk-major. */
struct kq_repack {
    uint8_t levels[16][QK_SUPER];
    int8_t sc[16][16];
    int16_t bias[16][16];
};
static inline __attribute__((always_inline)) void kq_repack_row(const struct ktype *t,
                                                                struct kq_repack *rp,
                                                                const struct kdec *k, int r,
                                                                uint8_t *out) {
    (void)t;
    for (int i = 0; i < 8; i++)
        _mm256_storeu_si256((__m256i *)(rp->levels[r] + 32 * i), k->q[i]);
    _mm_storeu_si128((__m128i *)rp->sc[r], k->sc);
    _mm256_storeu_si256((__m256i *)rp->bias[r], k->bias);
    ((float *)(out + KP_D))[r] = k->d, ((float *)(out + KP_DB))[r] = k->db;
}
static inline __attribute__((always_inline)) void kq_repack_block(const struct kq_repack *rp,
                                                                  uint8_t *out) {
    for (int c = 0; c < QK_SUPER / 4; c++)
        for (int r = 0; r < 16; r++)
            memcpy(out + 64 * c + 4 * r, rp->levels[r] + 4 * c, 4);
    for (int g = 0; g < 16; g++)
        for (int r = 0; r < 16; r++) {
            out[KP_SC + 16 * g + r] = (uint8_t)rp->sc[r][g];
            memcpy(out + KP_BIAS + 64 * (g / 2) + 4 * r + 2 * (g % 2), &rp->bias[r][g], 2);
        }
}

static inline int32_t load32(const void *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Rows 8 half .. 8 half + 7 x nc tokens over every super-block: the bias sums first (min types
 * convert them at once, freeing their registers), then each group's chunks summed into partials
 * that are scaled per row as they widen. */
static inline __attribute__((always_inline)) void rows8(const struct ktype *t, int64_t n,
                                                        const uint8_t *packed, int half, int nr,
                                                        const uint8_t *x, size_t x_stride, int nc,
                                                        float *y, size_t y_stride) {
    const int chunks = t->group / 4, depth = VNNI || t->depth > chunks ? chunks : t->depth;
    __m256 acc[PACK_NC];
#pragma GCC unroll 8
    for (int c = 0; c < nc; c++)
        acc[c] = _mm256_setzero_ps();
    const uint8_t *pb = packed;
    for (int64_t b = 0; b < n / QK_SUPER; b++, pb += KP_BLOCK) {
        const struct block_q8_K *xb[PACK_NC] = {NULL};
        __m256i dot[PACK_NC] = {_mm256_setzero_si256(), _mm256_setzero_si256(),
                                _mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 8
        for (int c = 0; c < nc; c++) {
            xb[c] = (const struct block_q8_K *)(x + c * x_stride) + b;
            dot[c] = _mm256_setzero_si256();
        }
        for (int g = 0; g < 16; g += 2) {
            __m256i bm = load256(pb + KP_BIAS + 64 * (g / 2) + 32 * half);
#pragma GCC unroll 8
            for (int c = 0; c < nc; c++)
                dot[c] = _mm256_add_epi32(
                    dot[c], _mm256_madd_epi16(bm, _mm256_set1_epi32(load32(xb[c]->bsums + g))));
        }
        __m256 d = _mm256_loadu_ps((const float *)(pb + KP_D) + 8 * half);
        __m256 db = _mm256_loadu_ps((const float *)(pb + KP_DB) + 8 * half);
        for (int c = 0; c < nc && !t->fold; c++) {
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[c]),
                                     _mm256_mul_ps(db, _mm256_set1_ps(xb[c]->d)), acc[c]);
            dot[c] = _mm256_setzero_si256();
        }
        for (int g = 0; g < 16; g += t->group / 16) {
            __m256i sc = group_scales_i8(pb + KP_SC + 16 * g + 8 * half);
            for (int k0 = 4 * g; k0 < 4 * g + chunks; k0 += depth) {
                __m256i part[PACK_NC] = {_mm256_setzero_si256(), _mm256_setzero_si256(),
                                         _mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 8
                for (int c = 0; c < nc; c++)
                    part[c] = _mm256_setzero_si256();
                for (int k = k0; k < k0 + depth; k++) {
                    __m256i wv = load256(pb + 64 * k + 32 * half);
                    __m256i wu = t->sign ? _mm256_sign_epi8(wv, wv) : wv;
#pragma GCC unroll 8
                    for (int c = 0; c < nc; c++) {
                        __m256i xv = _mm256_set1_epi32(load32(xb[c]->qs + 4 * k));
                        part[c] = accumulate(part[c], wu, t->sign ? _mm256_sign_epi8(xv, wv) : xv);
                        PIN(part[c]);
                    }
                }
#pragma GCC unroll 8
                for (int c = 0; c < nc; c++)
                    dot[c] = _mm256_add_epi32(dot[c], scale_sum(part[c], sc));
            }
        }
#pragma GCC unroll 8
        for (int c = 0; c < nc; c++)
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[c]),
                                     _mm256_mul_ps(d, _mm256_set1_ps(xb[c]->d)), acc[c]);
    }
    int keep = nr - 8 * half;
    __m256i mask =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(keep), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (int c = 0; c < nc; c++) {
        float *yc = y + (size_t)c * y_stride + 8 * half;
        if (keep >= 8)
            _mm256_storeu_ps(yc, acc[c]);
        else
            _mm256_maskstore_ps(yc, mask, acc[c]);
    }
}

/* ---- small batches over the load-time layouts (kpack16.c) --------------------------------
 * 8 rows per register as in the batch tiles, but the levels come straight from the compact
 * layout (a mask and a shift per chunk) instead of a scratch copy, so each weight byte is read
 * once from memory. The two halves of a group take turns per super-block: the second reads the
 * cache lines the first brought in. */
enum { GEMV_NC = 3 }; /* qmatmul.c takes gemv16 for batches below pack_nc */

static inline __m256i bcast32(const int8_t *p) {
    return _mm256_set1_epi32(load32(p));
}

/* q4_K: per pair of sub-blocks, 8 loads give 8 chunks of each (low and high nibbles); the mins
 * meet the sums of 32 activations as byte pairs against int16 pairs. */
static inline __attribute__((always_inline)) void gemv_q4_K_nc(int64_t n, const uint8_t *group,
                                                               const uint8_t *x, size_t x_stride,
                                                               int nc, float *y, size_t y_stride) {
    const __m256i low = _mm256_set1_epi8(0x0F);
    __m256 acc[2][GEMV_NC];
    for (int h = 0; h < 2; h++)
        for (int c = 0; c < nc; c++)
            acc[h][c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK_SUPER; b++) {
        const uint8_t *pb = group + (size_t)b * K4P_BLOCK;
        const struct block_q8_K *xb[GEMV_NC];
        int32_t sums[GEMV_NC][4]; /* per token: sub-block sums of 32 as int16 pairs */
        for (int c = 0; c < nc; c++) {
            xb[c] = (const struct block_q8_K *)(x + c * x_stride) + b;
            __m256i s = _mm256_madd_epi16(load256(xb[c]->bsums), _mm256_set1_epi16(1));
            _mm_storeu_si128((__m128i *)sums[c], _mm_packs_epi32(_mm256_castsi256_si128(s),
                                                                 _mm256_extracti128_si256(s, 1)));
        }
        for (int h = 0; h < 2; h++) {
            __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pb + K4P_D + 16 * h)));
            __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pb + K4P_DMIN + 16 * h)));
            __m256i dot[GEMV_NC];
            for (int c = 0; c < nc; c++) {
                __m256i mn = _mm256_setzero_si256();
                for (int p = 0; p < 4; p++) {
                    __m256i m = _mm256_cvtepu8_epi16(
                        _mm_loadu_si128((const __m128i *)(pb + K4P_M + 32 * p + 16 * h)));
                    mn = _mm256_add_epi32(mn, _mm256_madd_epi16(m, _mm256_set1_epi32(sums[c][p])));
                }
                acc[h][c] = _mm256_fnmadd_ps(
                    _mm256_cvtepi32_ps(mn), _mm256_mul_ps(dm, _mm256_set1_ps(xb[c]->d)), acc[h][c]);
                dot[c] = _mm256_setzero_si256();
            }
            for (int i = 0; i < 4; i++) {
                __m256i sc_lo = group_scales_u8(pb + K4P_SC + 32 * i + 8 * h);
                __m256i sc_hi = group_scales_u8(pb + K4P_SC + 32 * i + 16 + 8 * h);
                __m256i plo[GEMV_NC], phi[GEMV_NC];
                for (int c = 0; c < nc; c++)
                    plo[c] = phi[c] = _mm256_setzero_si256();
                for (int k = 0; k < 8; k++) { /* levels below 16: 8 chunks fit an int16 sum */
                    __m256i v = load256(pb + K4P_QS + 64 * (8 * i + k) + 32 * h);
                    __m256i lo = _mm256_and_si256(v, low);
                    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
                    for (int c = 0; c < nc; c++) {
                        plo[c] = accumulate(plo[c], lo, bcast32(xb[c]->qs + 64 * i + 4 * k));
                        phi[c] = accumulate(phi[c], hi, bcast32(xb[c]->qs + 64 * i + 32 + 4 * k));
                        PIN(plo[c]);
                        PIN(phi[c]);
                    }
                }
                for (int c = 0; c < nc; c++)
                    dot[c] = _mm256_add_epi32(dot[c], _mm256_add_epi32(scale_sum(plo[c], sc_lo),
                                                                       scale_sum(phi[c], sc_hi)));
            }
            for (int c = 0; c < nc; c++)
                acc[h][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[c]),
                                            _mm256_mul_ps(d, _mm256_set1_ps(xb[c]->d)), acc[h][c]);
        }
    }
    for (int h = 0; h < 2; h++)
        for (int c = 0; c < nc; c++)
            _mm256_storeu_ps(y + (size_t)c * y_stride + 8 * h, acc[h][c]);
}

/* q6_K: per group of 16, three level vectors give its 4 chunks (kpack16.c); levels 0..63 stand
 * for q - 32, paid as -32 times the scale against the group's activation sum. */
static inline __attribute__((always_inline)) void gemv_q6_K_nc(int64_t n, const uint8_t *group,
                                                               const uint8_t *x, size_t x_stride,
                                                               int nc, float *y, size_t y_stride) {
    const __m256i six = _mm256_set1_epi8(0x3F);
    __m256 acc[2][GEMV_NC];
    for (int h = 0; h < 2; h++)
        for (int c = 0; c < nc; c++)
            acc[h][c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK_SUPER; b++) {
        const uint8_t *pb = group + (size_t)b * K6P_BLOCK;
        const struct block_q8_K *xb[GEMV_NC];
        for (int c = 0; c < nc; c++)
            xb[c] = (const struct block_q8_K *)(x + c * x_stride) + b;
        for (int h = 0; h < 2; h++) {
            __m256i dot[GEMV_NC];
            for (int c = 0; c < nc; c++)
                dot[c] = _mm256_setzero_si256();
            for (int g = 0; g < 16; g++) {
                const uint8_t *q = pb + K6P_Q + 192 * g + 32 * h;
                __m256i sc = group_scales_i8(pb + K6P_SC + 16 * g + 8 * h);
                __m256i v0 = load256(q), v1 = load256(q + 64), v2 = load256(q + 128);
                __m256i lv[4] = {
                    _mm256_and_si256(v0, six), _mm256_and_si256(v1, six), _mm256_and_si256(v2, six),
                    _mm256_or_si256(_mm256_or_si256(field(v0, 6, 0, 2), field(v1, 6, 2, 2)),
                                    field(v2, 6, 4, 2))};
                for (int c = 0; c < nc; c++) {
                    const int8_t *xq = xb[c]->qs + 16 * g;
                    /* levels below 64: two chunks fit an int16 sum (VNNI: all four) */
                    __m256i p0 = accumulate(_mm256_setzero_si256(), lv[0], bcast32(xq));
                    p0 = accumulate(p0, lv[1], bcast32(xq + 4));
                    __m256i p1 =
                        accumulate(VNNI ? p0 : _mm256_setzero_si256(), lv[2], bcast32(xq + 8));
                    p1 = accumulate(p1, lv[3], bcast32(xq + 12));
                    __m256i s = VNNI ? scale_sum(p1, sc)
                                     : _mm256_add_epi32(scale_sum(p0, sc), scale_sum(p1, sc));
                    dot[c] = _mm256_add_epi32(dot[c], s);
                }
            }
            /* the offset 32 of every level: -32 times the sum over groups of scale times the
             * group's activation sum, two groups per VPMADDWD (scale pairs against bsums pairs) */
            for (int c = 0; c < nc; c++) {
                __m256i off = _mm256_setzero_si256();
                for (int g = 0; g < 16; g += 2) {
                    __m256i sc2 = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(
                        _mm_loadl_epi64((const __m128i *)(pb + K6P_SC + 16 * g + 8 * h)),
                        _mm_loadl_epi64((const __m128i *)(pb + K6P_SC + 16 * (g + 1) + 8 * h))));
                    off = _mm256_add_epi32(
                        off, _mm256_madd_epi16(sc2, _mm256_set1_epi32(load32(xb[c]->bsums + g))));
                }
                dot[c] = _mm256_sub_epi32(dot[c], _mm256_slli_epi32(off, 5));
            }
            __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pb + K6P_D + 16 * h)));
            for (int c = 0; c < nc; c++)
                acc[h][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[c]),
                                            _mm256_mul_ps(d, _mm256_set1_ps(xb[c]->d)), acc[h][c]);
        }
    }
    for (int h = 0; h < 2; h++)
        for (int c = 0; c < nc; c++)
            _mm256_storeu_ps(y + (size_t)c * y_stride + 8 * h, acc[h][c]);
}

/* ---- activations: ggml's q8_K ---------------------------------------------------------------- */

/* ggml's quantize_row_q8_K vectorized, byte for byte: the scale comes from the first element
 * of largest magnitude, with its sign (d = max / -127), levels round half to even and stop at
 * 127 (the saturating packs); an all-zero block stays all zero. */
static void xq8_K_quantize_avx2(const float *x, void *xq, int64_t n) {
    struct block_q8_K *out = xq;
    const __m256 abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    for (int64_t b = 0; b < n / QK_SUPER; b++, x += QK_SUPER) {
        __m256 amax = _mm256_setzero_ps();
        for (int i = 0; i < QK_SUPER; i += 8)
            amax = _mm256_max_ps(amax, _mm256_and_ps(_mm256_loadu_ps(x + i), abs));
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        if (_mm_cvtss_f32(m) == 0.0f) {
            memset(&out[b], 0, sizeof out[b]);
            continue;
        }
        __m256 a = _mm256_broadcastss_ps(m);
        int first = 0;
        for (int i = 0; i < QK_SUPER; i += 8) {
            int hit = _mm256_movemask_ps(
                _mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), abs), a, _CMP_EQ_OQ));
            if (hit) {
                first = i + __builtin_ctz((unsigned)hit);
                break;
            }
        }
        const float iscale = -127.f / x[first];
        const __m256 is = _mm256_set1_ps(iscale);
        for (int i = 0; i < QK_SUPER; i += 32) {
            __m256i v[4];
            for (int j = 0; j < 4; j++)
                v[j] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * j), is));
            /* the packs interleave 128-bit lanes; the dword permute puts them back in order */
            __m256i q =
                _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
            q = _mm256_permutevar8x32_epi32(q, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(out[b].qs + i), q);
        }
        /* sums of 16: byte sums of 8 (each plus 8 * 128) per qword, adjacent qwords added */
        for (int i = 0; i < QK_SUPER; i += 32) {
            __m256i q = _mm256_xor_si256(load256(out[b].qs + i), _mm256_set1_epi8((char)0x80));
            __m256i s = _mm256_sad_epu8(q, _mm256_setzero_si256());
            s = _mm256_add_epi64(s, _mm256_srli_si256(s, 8)); /* qwords 0 and 2 */
            out[b].bsums[i / 16] = (int16_t)(_mm256_extract_epi64(s, 0) - 16 * 128);
            out[b].bsums[i / 16 + 1] = (int16_t)(_mm256_extract_epi64(s, 2) - 16 * 128);
        }
        out[b].d = 1 / iscale;
    }
}

/* ---- the kernels ----------------------------------------------------------------------------- */

#include "backend/cpu/qkernels_kquant_drivers.h"

KQ_TILE16_BY_HALVES()
KQ_GEMV_BY_NC(q4_K)
KQ_GEMV_BY_NC(q6_K)

/* The kernels of this level's table (qkernels.c): each type's struct ktype, then its kernel. */
#define DEFINE_KQUANT(type, fold, sign, group, depth, ...)                                         \
    static const struct ktype kt_##type = {                                                        \
        decode_##type, sizeof(struct block_##type), fold, sign, group, depth};                     \
    DEFINE_KQUANT_KERNEL(QK_LEVEL, LEVEL_NAME, type, xq8_K_quantize_avx2, __VA_ARGS__)

/*            type  fold sign group depth  */
DEFINE_KQUANT(q2_K, 0, 0, 16, 8, )
DEFINE_KQUANT(q3_K, 1, 0, 16, 8, )
DEFINE_KQUANT(q4_K, 0, 0, 32, 8, KPACK16_LAYOUT(q4_K))
DEFINE_KQUANT(q5_K, 0, 0, 32, 4, )
DEFINE_KQUANT(q6_K, 1, 0, 16, 2, KPACK16_LAYOUT(q6_K))
DEFINE_KQUANT(iq4_xs, 1, 1, 32, 1, )
