/* quantize_iq4.c: reference quantizers to iq4_nl and iq4_xs (ggml's quantize_iq4_nl/_xs). */
#include <math.h>
#include <string.h>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/iq_tables.h"
#include "quant/quantize.h"
#include "quant/quantize_util.h"

/* Both types code each element as one of 16 non-linear levels (iq4nl_values) times a block
 * scale, in blocks of 32. iq4_nl stores that scale as fp16 per block; iq4_xs groups 8 blocks
 * into a super-block of 256 with one fp16 scale and a 6-bit signed multiplier per block. The
 * arithmetic below follows ggml's quantize_row_iq4_nl_impl with ntry = 7 (what quantize_iq4_*
 * pass), float for float. */

#define IQ4_BLOCK 32
#define IQ4_TRIES 7 /* trial scales -7..7 steps around the level range */

/* Error weights of one block: the imatrix entry times sqrt(sigma2 + x^2), or x^2 without one.
 * sigma2 is twice the mean square of the enclosing super-block. */
static void block_weights(const float *xb, const float *qw, float sigma2, float *weight) {
    for (int j = 0; j < IQ4_BLOCK; j++)
        weight[j] = qw ? qw[j] * sqrtf(sigma2 + xb[j] * xb[j]) : xb[j] * xb[j];
}

/* sum w*q*x and sum w*q^2 when every element takes the level nearest to id*x. */
static void level_sums(const float *xb, const float *weight, float id, float *sumqx, float *sumq2) {
    float sx = 0, s2 = 0;
    for (int j = 0; j < IQ4_BLOCK; j++) {
        const float q = iq4nl_values[best_index_int8(16, iq4nl_values, id * xb[j])];
        const float w = weight[j];
        sx += w * q * xb[j];
        s2 += w * q * q;
    }
    *sumqx = sx;
    *sumq2 = s2;
}

/* The block's scale: start from the one that maps the largest-magnitude element onto the
 * first level, then try the 15 inverse scales (t + level[0]) / max and keep whichever
 * least-squares scale explains the most weighted signal. 0 for an all-zero block. */
static float block_scale(const float *xb, const float *weight) {
    float amax = 0, max = 0;
    for (int j = 0; j < IQ4_BLOCK; j++) {
        const float ax = fabsf(xb[j]);
        if (ax > amax) {
            amax = ax;
            max = xb[j];
        }
    }
    if (amax < QUANT_GROUP_MAX_EPS)
        return 0;
    float sumqx, sumq2;
    float d = -max / iq4nl_values[0];
    level_sums(xb, weight, 1 / d, &sumqx, &sumq2);
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int t = -IQ4_TRIES; t <= IQ4_TRIES; t++) {
        const float id = (float)(t + iq4nl_values[0]) / max;
        level_sums(xb, weight, id, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

/* Level codes of n elements at inverse scale id. */
static void code_levels(const float *x, int n, float id, uint8_t *L) {
    for (int j = 0; j < n; j++)
        L[j] = (uint8_t)best_index_int8(16, iq4nl_values, id * x[j]);
}

/* Nibble packing: in each run of 32, byte j holds element j (low) and element j + 16 (high). */
static void pack_nibbles(const uint8_t *L, int n, uint8_t *qs) {
    for (int i = 0; i < n / 32; i++)
        for (int j = 0; j < 16; j++)
            qs[16 * i + j] = (uint8_t)(L[32 * i + j] | L[32 * i + 16 + j] << 4);
}

/* Twice the mean square of n elements, as ggml scales it (sum, then times 2/n). */
static float twice_mean_square(const float *x, int n) {
    float sigma2 = 0;
    for (int j = 0; j < n; j++)
        sigma2 += x[j] * x[j];
    sigma2 *= 2.f / n;
    return sigma2;
}

static void quantize_block_iq4_nl(const float *x, const float *qw, struct block_iq4_nl *y) {
    float weight[IQ4_BLOCK];
    uint8_t L[IQ4_BLOCK];
    block_weights(x, qw, twice_mean_square(x, IQ4_BLOCK), weight);
    const float d = block_scale(x, weight);
    y->d = fp32_to_fp16(d);
    code_levels(x, IQ4_BLOCK, d ? 1 / d : 0, L);
    pack_nibbles(L, IQ4_BLOCK, y->qs);
}

/* One block for quant_rows (the grid lookup is a pthread_once check after the first). */
static void block_iq4_nl(const float *x, const float *qw, float row_sigma2, void *out) {
    (void)row_sigma2;
    struct block_iq4_nl y;
    quantize_block_iq4_nl(x, qw, &y);
    memcpy(out, &y, sizeof y);
}

size_t quant_iq4_nl(const float *src, void *dst, int64_t n_rows, int64_t n_per_row,
                    const float *imatrix) {
    return quant_rows(src, dst, n_rows, n_per_row, imatrix, IQ4_BLOCK, sizeof(struct block_iq4_nl),
                      block_iq4_nl);
}

/* iq4_xs: the super-scale d = -(the block scale of largest magnitude) / 32, so that block's
 * multiplier is -32; each block then gets multiplier l = round(scale / d) in [-32, 31], stored
 * plus 32 (low nibble in scales_l, top 2 bits in scales_h), and its elements are recoded at
 * the rounded scale d * l. */
static void quantize_superblock_iq4_xs(const float *x, const float *qw, struct block_iq4_xs *y) {
    float weight[IQ4_BLOCK], scales[QK_SUPER / IQ4_BLOCK];
    uint8_t L[QK_SUPER];
    const float sigma2 = twice_mean_square(x, QK_SUPER);
    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < QK_SUPER / IQ4_BLOCK; ib++) {
        block_weights(x + ib * IQ4_BLOCK, qw ? qw + ib * IQ4_BLOCK : NULL, sigma2, weight);
        scales[ib] = block_scale(x + ib * IQ4_BLOCK, weight);
        if (fabsf(scales[ib]) > amax_scale) {
            amax_scale = fabsf(scales[ib]);
            max_scale = scales[ib];
        }
    }
    const float d = -max_scale / 32; /* -0.0 for an all-zero super-block, as in ggml */
    const float id = d ? 1 / d : 0.f;
    y->d = fp32_to_fp16(d);
    y->scales_h = 0;
    memset(y->scales_l, 0, sizeof y->scales_l);
    for (int ib = 0; ib < QK_SUPER / IQ4_BLOCK; ib++) {
        int l = nearest_int(id * scales[ib]);
        l = l < -32 ? -32 : l > 31 ? 31 : l;
        const float dl = d * l;
        code_levels(x + ib * IQ4_BLOCK, IQ4_BLOCK, dl ? 1 / dl : 0.f, L + ib * IQ4_BLOCK);
        l += 32;
        y->scales_l[ib / 2] |= (uint8_t)((l & 0xf) << 4 * (ib % 2));
        y->scales_h |= (uint16_t)((l >> 4) << 2 * ib);
    }
    pack_nibbles(L, QK_SUPER, y->qs);
}

/* One block for quant_rows (the grid lookup is a pthread_once check after the first). */
static void block_iq4_xs(const float *x, const float *qw, float row_sigma2, void *out) {
    (void)row_sigma2;
    struct block_iq4_xs y;
    quantize_superblock_iq4_xs(x, qw, &y);
    memcpy(out, &y, sizeof y);
}

size_t quant_iq4_xs(const float *src, void *dst, int64_t n_rows, int64_t n_per_row,
                    const float *imatrix) {
    return quant_rows(src, dst, n_rows, n_per_row, imatrix, QK_SUPER, sizeof(struct block_iq4_xs),
                      block_iq4_xs);
}
