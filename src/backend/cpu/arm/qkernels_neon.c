/* qkernels_neon.c: matmul tiles for AArch64 CPUs with the dot-product extension (SDOT), for the
 * 32-block types. Weights are unpacked to signed bytes (offsets subtracted; q4_1/q5_1 keep
 * their 0..31 levels and return the min through the activation block sum), then each 16 bytes
 * meet the activations in one SDOT. Built with +dotprod and chosen at run time. */
#include <arm_neon.h>
#include <string.h>

#include "backend/cpu/qmatmul.h"
#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/iq_tables.h"

enum { NR = 4, NC = 4 };

/* 32 signed weights as two halves, the scale, and the term that multiplies the block sum. */
struct nblock {
    int8x16_t lo, hi;
    float d, bias;
};

static inline void nibbles(const uint8_t *qs, uint8x16_t *lo, uint8x16_t *hi) {
    uint8x16_t b = vld1q_u8(qs);
    *lo = vandq_u8(b, vdupq_n_u8(0x0F)); /* elements 0..15 */
    *hi = vshrq_n_u8(b, 4);              /* elements 16..31 */
}

/* Bit j of qh as 0x10 in byte j, for j < 32. */
static inline void fifth_bits(const uint8_t *qh, uint8x16_t *lo, uint8x16_t *hi) {
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    uint32_t bits;
    memcpy(&bits, qh, 4);
    uint8x16_t sel = vld1q_u8(bit);
    uint8x16_t b0 = vcombine_u8(vdup_n_u8((uint8_t)bits), vdup_n_u8((uint8_t)(bits >> 8)));
    uint8x16_t b1 = vcombine_u8(vdup_n_u8((uint8_t)(bits >> 16)), vdup_n_u8((uint8_t)(bits >> 24)));
    *lo = vandq_u8(vtstq_u8(b0, sel), vdupq_n_u8(0x10));
    *hi = vandq_u8(vtstq_u8(b1, sel), vdupq_n_u8(0x10));
}

static inline struct nblock unpack_q4_0(const uint8_t *p) {
    const struct block_q4_0 *b = (const struct block_q4_0 *)p;
    uint8x16_t lo, hi;
    nibbles(b->qs, &lo, &hi);
    int8x16_t eight = vdupq_n_s8(8);
    return (struct nblock){vsubq_s8(vreinterpretq_s8_u8(lo), eight),
                           vsubq_s8(vreinterpretq_s8_u8(hi), eight), fp16_to_fp32(b->d), 0.0f};
}
static inline struct nblock unpack_q4_1(const uint8_t *p) {
    const struct block_q4_1 *b = (const struct block_q4_1 *)p;
    uint8x16_t lo, hi;
    nibbles(b->qs, &lo, &hi);
    return (struct nblock){vreinterpretq_s8_u8(lo), vreinterpretq_s8_u8(hi), fp16_to_fp32(b->d),
                           fp16_to_fp32(b->m)};
}
static inline struct nblock unpack_q5_0(const uint8_t *p) {
    const struct block_q5_0 *b = (const struct block_q5_0 *)p;
    uint8x16_t lo, hi, flo, fhi;
    nibbles(b->qs, &lo, &hi);
    fifth_bits(b->qh, &flo, &fhi);
    int8x16_t sixteen = vdupq_n_s8(16);
    return (struct nblock){vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, flo)), sixteen),
                           vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(hi, fhi)), sixteen),
                           fp16_to_fp32(b->d), 0.0f};
}
static inline struct nblock unpack_q5_1(const uint8_t *p) {
    const struct block_q5_1 *b = (const struct block_q5_1 *)p;
    uint8x16_t lo, hi, flo, fhi;
    nibbles(b->qs, &lo, &hi);
    fifth_bits(b->qh, &flo, &fhi);
    return (struct nblock){vreinterpretq_s8_u8(vorrq_u8(lo, flo)),
                           vreinterpretq_s8_u8(vorrq_u8(hi, fhi)), fp16_to_fp32(b->d),
                           fp16_to_fp32(b->m)};
}
static inline struct nblock unpack_q8_0(const uint8_t *p) {
    const struct block_q8_0 *b = (const struct block_q8_0 *)p;
    return (struct nblock){vld1q_s8(b->qs), vld1q_s8(b->qs + 16), fp16_to_fp32(b->d), 0.0f};
}
static inline struct nblock unpack_iq4_nl(const uint8_t *p) {
    const struct block_iq4_nl *b = (const struct block_iq4_nl *)p;
    uint8x16_t lo, hi;
    nibbles(b->qs, &lo, &hi);
    int8x16_t levels = vld1q_s8(iq4nl_values);
    return (struct nblock){vqtbl1q_s8(levels, lo), vqtbl1q_s8(levels, hi), fp16_to_fp32(b->d),
                           0.0f};
}

static inline __attribute__((always_inline)) void
tile_neon(struct nblock (*unpack)(const uint8_t *), size_t block_bytes, int64_t n, const uint8_t *w,
          size_t w_stride, int nr, const uint8_t *x, size_t x_stride, int nc, float *y,
          size_t y_stride) {
    float32x4_t acc[NR][NC];
    float corr[NR][NC];
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < NC; c++)
            acc[r][c] = vdupq_n_f32(0.0f), corr[r][c] = 0.0f;
    for (int64_t b = 0; b < n / 32; b++) {
        struct nblock wb[NR];
        for (int r = 0; r < nr; r++)
            wb[r] = unpack(w + (size_t)r * w_stride + (size_t)b * block_bytes);
        for (int c = 0; c < nc; c++) {
            const struct xq8_32 *xb = (const struct xq8_32 *)(x + (size_t)c * x_stride) + b;
            int8x16_t x0 = vld1q_s8(xb->q), x1 = vld1q_s8(xb->q + 16);
            for (int r = 0; r < nr; r++) {
                int32x4_t dot = vdotq_s32(vdotq_s32(vdupq_n_s32(0), wb[r].lo, x0), wb[r].hi, x1);
                acc[r][c] = vfmaq_n_f32(acc[r][c], vcvtq_f32_s32(dot), wb[r].d * xb->d);
                corr[r][c] += wb[r].bias * xb->s;
            }
        }
    }
    for (int c = 0; c < nc; c++)
        for (int r = 0; r < nr; r++)
            y[(size_t)c * y_stride + (size_t)r] = vaddvq_f32(acc[r][c]) + corr[r][c];
}

#define DEFINE_TILE_NEON(type)                                                                     \
    static void tile_##type(int64_t n, const uint8_t *w, size_t w_stride, int nr,                  \
                            const uint8_t *x, size_t x_stride, int nc, float *y,                   \
                            size_t y_stride) {                                                     \
        if (nc == 1) /* one token: each row streams alone, which memory serves fastest */          \
            for (int r = 0; r < nr; r++)                                                           \
                tile_neon(unpack_##type, sizeof(struct block_##type), n, w + (size_t)r * w_stride, \
                          w_stride, 1, x, x_stride, 1, y + r, y_stride);                           \
        else                                                                                       \
            tile_neon(unpack_##type, sizeof(struct block_##type), n, w, w_stride, nr, x, x_stride, \
                      nc, y, y_stride);                                                            \
    }                                                                                              \
    static const struct qkernel k_##type = {.name = #type " neon-dotprod",                         \
                                            .x_row_bytes = xq8_32_row_bytes,                       \
                                            .quantize_x = xq8_32_quantize,                         \
                                            .x_to_float = xq8_32_to_float,                         \
                                            .tile = tile_##type,                                   \
                                            .max_nr = NR,                                          \
                                            .max_nc = NC};

DEFINE_TILE_NEON(q4_0)
DEFINE_TILE_NEON(q4_1)
DEFINE_TILE_NEON(q5_0)
DEFINE_TILE_NEON(q5_1)
DEFINE_TILE_NEON(q8_0)
DEFINE_TILE_NEON(iq4_nl)

const struct qkernel *qkernels_neon(enum ox_dtype type) {
    switch (type) {
    case OX_DTYPE_Q4_0: return &k_q4_0;
    case OX_DTYPE_Q4_1: return &k_q4_1;
    case OX_DTYPE_Q5_0: return &k_q5_0;
    case OX_DTYPE_Q5_1: return &k_q5_1;
    case OX_DTYPE_Q8_0: return &k_q8_0;
    case OX_DTYPE_IQ4_NL: return &k_iq4_nl;
    default:
        return qkernels_kquant_neon(type) ? qkernels_kquant_neon(type) : qkernels_float_neon(type);
    }
}
