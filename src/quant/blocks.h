/* blocks.h: the byte layout of every quantized block (ggml's block_* structs) and the reference
 * dequantizers, one per type. */
#ifndef OX_QUANT_BLOCKS_H
#define OX_QUANT_BLOCKS_H

#include <stdint.h>

/* Layout rules: every field is a byte array or a 16-bit little-endian word (q8_K: a 32-bit
 * float first), ordered so that no struct needs padding; the _Static_asserts pin the sizes to
 * the file format. fp16 scales are kept as raw uint16_t bits. Dequantizers copy each block into
 * a local struct with memcpy, so src needs no particular alignment. */

#define QK_SUPER 256 /* elements per super-block (k-quants, i-quants, ternary) */

/* ---- legacy: one scale per block of 32 (q1_0: 128, q2_0: 64) ---- */

struct block_q1_0 { /* x = bit ? d : -d */
    uint16_t d;
    uint8_t qs[128 / 8];
};
struct block_q2_0 { /* x = (q - 1) * d, q in 0..3 */
    uint16_t d;
    uint8_t qs[64 / 4];
};
struct block_q4_0 { /* x = (q - 8) * d; low nibbles are elements 0..15, high 16..31 */
    uint16_t d;
    uint8_t qs[32 / 2];
};
struct block_q4_1 { /* x = q * d + m */
    uint16_t d;
    uint16_t m;
    uint8_t qs[32 / 2];
};
struct block_q5_0 { /* x = (q - 16) * d; qh holds the 5th bit of element j at bit j */
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[32 / 2];
};
struct block_q5_1 { /* x = q * d + m */
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[32 / 2];
};
struct block_q8_0 { /* x = q * d */
    uint16_t d;
    int8_t qs[32];
};
struct block_q8_1 { /* x = q * d; s = d * sum(q) is only used by dot products */
    uint16_t d;
    uint16_t s;
    int8_t qs[32];
};

/* ---- k-quants: super-blocks of 256 with quantized sub-block scales ---- */

struct block_q2_K {                /* 16 sub-blocks of 16: x = d * sc * q - dmin * m */
    uint8_t scales[QK_SUPER / 16]; /* low nibble scale, high nibble min */
    uint8_t qs[QK_SUPER / 4];
    uint16_t d;
    uint16_t dmin;
};
/* q4_K / q5_K's eight 6-bit scales and mins in 12 bytes (ggml's get_scale_min_k4 layout):
 * sub-blocks 0..3 have theirs in the low 6 bits of bytes 0..3 (scale) and 4..7 (min); sub-blocks
 * 4..7 take their low 4 bits from the nibbles of bytes 8..11 and their top 2 bits from the spare
 * top bits of bytes 0..7. k4_scale_set must be called in order j = 0..7 on zeroed bytes. */
static inline void k4_scale_get(const uint8_t sc[12], int j, int *scale, int *min) {
    if (j < 4) {
        *scale = sc[j] & 63;
        *min = sc[j + 4] & 63;
    } else {
        *scale = (sc[j + 4] & 0x0F) | (sc[j - 4] >> 6) << 4;
        *min = (sc[j + 4] >> 4) | (sc[j] >> 6) << 4;
    }
}
static inline void k4_scale_set(uint8_t sc[12], int j, int scale, int min) {
    if (j < 4) {
        sc[j] = (uint8_t)scale;
        sc[j + 4] = (uint8_t)min;
    } else {
        sc[j + 4] = (uint8_t)((scale & 0xF) | (min & 0xF) << 4);
        sc[j - 4] |= (uint8_t)((scale >> 4) << 6);
        sc[j] |= (uint8_t)((min >> 4) << 6);
    }
}
struct block_q3_K { /* 16 sub-blocks of 16: x = d * (sc - 32) * (q - 4 * !hbit) */
    uint8_t hmask[QK_SUPER / 8];
    uint8_t qs[QK_SUPER / 4];
    uint8_t scales[12]; /* 16 six-bit scales */
    uint16_t d;
};
struct block_q4_K { /* 8 sub-blocks of 32: x = d * sc * q - dmin * m */
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12]; /* 8 six-bit scales and 8 six-bit mins */
    uint8_t qs[QK_SUPER / 2];
};
struct block_q5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qh[QK_SUPER / 8];
    uint8_t qs[QK_SUPER / 2];
};
struct block_q6_K { /* 16 sub-blocks of 16: x = d * sc * (q - 32) */
    uint8_t ql[QK_SUPER / 2];
    uint8_t qh[QK_SUPER / 4];
    int8_t scales[QK_SUPER / 16];
    uint16_t d;
};
struct block_q8_K { /* activations for k-quant dot products: x = d * q */
    float d;
    int8_t qs[QK_SUPER];
    int16_t bsums[QK_SUPER / 16];
};

/* ---- i-quants: grid indices + signs + sub-block scales ---- */

struct block_iq2_xxs {
    uint16_t d;
    uint16_t qs[QK_SUPER / 8]; /* per 32: 4 grid bytes, then 4x7 sign bits + 4-bit scale */
};
struct block_iq2_xs {
    uint16_t d;
    uint16_t qs[QK_SUPER / 8]; /* 9-bit grid index | 7 sign bits << 9 */
    uint8_t scales[QK_SUPER / 32];
};
struct block_iq2_s {
    uint16_t d;
    uint8_t qs[QK_SUPER / 4]; /* 32 grid index low bytes, then 32 sign bytes */
    uint8_t qh[QK_SUPER / 32];
    uint8_t scales[QK_SUPER / 32];
};
struct block_iq3_xxs {
    uint16_t d;
    uint8_t qs[3 * QK_SUPER / 8]; /* 64 grid bytes, then per 32: 4x7 sign bits + scale */
};
struct block_iq3_s {
    uint16_t d;
    uint8_t qs[QK_SUPER / 4];
    uint8_t qh[QK_SUPER / 32];
    uint8_t signs[QK_SUPER / 8];
    uint8_t scales[QK_SUPER / 64];
};
struct block_iq1_s {
    uint16_t d;
    uint8_t qs[QK_SUPER / 8];
    uint16_t qh[QK_SUPER / 32]; /* 3x3 index bits, 3-bit scale, delta sign */
};
struct block_iq1_m { /* the fp16 super-scale is spread over the top nibbles of scales */
    uint8_t qs[QK_SUPER / 8];
    uint8_t qh[QK_SUPER / 16];
    uint8_t scales[QK_SUPER / 32];
};
struct block_iq4_nl { /* x = d * level[q] */
    uint16_t d;
    uint8_t qs[32 / 2];
};
struct block_iq4_xs {
    uint16_t d;
    uint16_t scales_h; /* high 2 bits of 8 six-bit scales */
    uint8_t scales_l[QK_SUPER / 64];
    uint8_t qs[QK_SUPER / 2];
};

/* ---- fp4 (e2m1 elements, power-of-two / e4m3 scales) ---- */

struct block_mxfp4 {
    uint8_t e; /* e8m0 scale */
    uint8_t qs[32 / 2];
};
struct block_nvfp4 {
    uint8_t d[64 / 16]; /* ue4m3 scale of each group of 16 */
    uint8_t qs[64 / 2];
};

/* ---- ternary ---- */

struct block_tq1_0 {
    uint8_t qs[(QK_SUPER - 4 * QK_SUPER / 64) / 5]; /* 5 trits per byte (3^5 = 243) */
    uint8_t qh[QK_SUPER / 64];                      /* 4 trits per byte */
    uint16_t d;
};
struct block_tq2_0 {
    uint8_t qs[QK_SUPER / 4]; /* 2 bits per element */
    uint16_t d;
};

_Static_assert(sizeof(struct block_q1_0) == 18, "q1_0 layout");
_Static_assert(sizeof(struct block_q2_0) == 18, "q2_0 layout");
_Static_assert(sizeof(struct block_q4_0) == 18, "q4_0 layout");
_Static_assert(sizeof(struct block_q4_1) == 20, "q4_1 layout");
_Static_assert(sizeof(struct block_q5_0) == 22, "q5_0 layout");
_Static_assert(sizeof(struct block_q5_1) == 24, "q5_1 layout");
_Static_assert(sizeof(struct block_q8_0) == 34, "q8_0 layout");
_Static_assert(sizeof(struct block_q8_1) == 36, "q8_1 layout");
_Static_assert(sizeof(struct block_q2_K) == 84, "q2_K layout");
_Static_assert(sizeof(struct block_q3_K) == 110, "q3_K layout");
_Static_assert(sizeof(struct block_q4_K) == 144, "q4_K layout");
_Static_assert(sizeof(struct block_q5_K) == 176, "q5_K layout");
_Static_assert(sizeof(struct block_q6_K) == 210, "q6_K layout");
_Static_assert(sizeof(struct block_q8_K) == 292, "q8_K layout");
_Static_assert(sizeof(struct block_iq2_xxs) == 66, "iq2_xxs layout");
_Static_assert(sizeof(struct block_iq2_xs) == 74, "iq2_xs layout");
_Static_assert(sizeof(struct block_iq2_s) == 82, "iq2_s layout");
_Static_assert(sizeof(struct block_iq3_xxs) == 98, "iq3_xxs layout");
_Static_assert(sizeof(struct block_iq3_s) == 110, "iq3_s layout");
_Static_assert(sizeof(struct block_iq1_s) == 50, "iq1_s layout");
_Static_assert(sizeof(struct block_iq1_m) == 56, "iq1_m layout");
_Static_assert(sizeof(struct block_iq4_nl) == 18, "iq4_nl layout");
_Static_assert(sizeof(struct block_iq4_xs) == 136, "iq4_xs layout");
_Static_assert(sizeof(struct block_mxfp4) == 17, "mxfp4 layout");
_Static_assert(sizeof(struct block_nvfp4) == 36, "nvfp4 layout");
_Static_assert(sizeof(struct block_tq1_0) == 54, "tq1_0 layout");
_Static_assert(sizeof(struct block_tq2_0) == 66, "tq2_0 layout");

/* Reference dequantizers: n elements (a multiple of the block size, checked by the caller) from
 * src in the type's layout to dst. Bit-identical with ggml's dequantize_row_* where ggml has
 * one; the plain types convert each value with a C cast. */
/* dequant_float.c: plain types */
void dequant_f32(const void *src, float *dst, int64_t n);
void dequant_f16(const void *src, float *dst, int64_t n);
void dequant_bf16(const void *src, float *dst, int64_t n);
void dequant_f64(const void *src, float *dst, int64_t n);
void dequant_i8(const void *src, float *dst, int64_t n);
void dequant_i16(const void *src, float *dst, int64_t n);
void dequant_i32(const void *src, float *dst, int64_t n);
void dequant_i64(const void *src, float *dst, int64_t n);
/* dequant_legacy.c */
void dequant_q1_0(const void *src, float *dst, int64_t n);
void dequant_q2_0(const void *src, float *dst, int64_t n);
void dequant_q4_0(const void *src, float *dst, int64_t n);
void dequant_q4_1(const void *src, float *dst, int64_t n);
void dequant_q5_0(const void *src, float *dst, int64_t n);
void dequant_q5_1(const void *src, float *dst, int64_t n);
void dequant_q8_0(const void *src, float *dst, int64_t n);
void dequant_q8_1(const void *src, float *dst, int64_t n);
/* dequant_k.c */
void dequant_q2_K(const void *src, float *dst, int64_t n);
void dequant_q3_K(const void *src, float *dst, int64_t n);
void dequant_q4_K(const void *src, float *dst, int64_t n);
void dequant_q5_K(const void *src, float *dst, int64_t n);
void dequant_q6_K(const void *src, float *dst, int64_t n);
void dequant_q8_K(const void *src, float *dst, int64_t n);
/* dequant_iq.c */
void dequant_iq2_xxs(const void *src, float *dst, int64_t n);
void dequant_iq2_xs(const void *src, float *dst, int64_t n);
void dequant_iq2_s(const void *src, float *dst, int64_t n);
void dequant_iq3_xxs(const void *src, float *dst, int64_t n);
void dequant_iq3_s(const void *src, float *dst, int64_t n);
void dequant_iq1_s(const void *src, float *dst, int64_t n);
void dequant_iq1_m(const void *src, float *dst, int64_t n);
/* dequant_iq4_fp4.c: 4-bit elements read through a 16-entry table */
void dequant_iq4_nl(const void *src, float *dst, int64_t n);
void dequant_iq4_xs(const void *src, float *dst, int64_t n);
void dequant_mxfp4(const void *src, float *dst, int64_t n);
void dequant_nvfp4(const void *src, float *dst, int64_t n);
/* dequant_ternary.c */
void dequant_tq1_0(const void *src, float *dst, int64_t n);
void dequant_tq2_0(const void *src, float *dst, int64_t n);

#endif
