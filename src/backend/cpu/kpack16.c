/* kpack16.c: the load-time layout of q4_K and q6_K weights (groups of 16 rows) that the x86
 * levels read for single tokens, its unpacking into the batch tiles' scratch layout, and a row
 * back in the file's layout. Per super-block of 256, each layout holds the 16 rows' factors and
 * scales unpacked to bytes first, then their levels chunk-major (4 elements of row 0, of row 1,
 * ... row 15, then the next 4 elements), so one 4-byte broadcast of the activations meets 8 rows
 * in one product and a row's bytes need only a mask and a shift. The sizes equal the file's
 * (q6_K) or exceed it by 2.8% (q4_K, whose 6-bit scales are kept as bytes). */
#include <string.h>

#include "backend/cpu/qmatmul.h"
#include "core/fp16.h"
#include "quant/blocks.h"

static uint32_t load_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static void store_u32(uint8_t *p, uint32_t v) {
    memcpy(p, &v, sizeof v);
}

size_t kpack16_group_bytes_q4_K(int64_t n) {
    return (size_t)(n / QK_SUPER) * K4P_BLOCK;
}

size_t kpack16_group_bytes_q6_K(int64_t n) {
    return (size_t)(n / QK_SUPER) * K6P_BLOCK;
}

/* ---- q4_K: the file's 4-byte chunks of qs kept as they are (chunk k's low nibbles are
 * elements 64 (k / 8) + 4 (k % 8) .., its high nibbles the same 32 further on) ------------- */

void kpack16_pack_q4_K(int64_t n, const uint8_t *w, size_t w_stride, void *dst) {
    uint8_t *out = dst;
    for (int64_t b = 0; b < n / QK_SUPER; b++, out += K4P_BLOCK) {
        memset(out, 0, K4P_QS);
        for (int r = 0; r < 16; r++) {
            const struct block_q4_K *blk =
                (const struct block_q4_K *)(w + (size_t)r * w_stride) + b;
            memcpy(out + K4P_D + 2 * r, &blk->d, 2);
            memcpy(out + K4P_DMIN + 2 * r, &blk->dmin, 2);
            for (int j = 0; j < 8; j++) {
                int sc, m;
                k4_scale_get(blk->scales, j, &sc, &m);
                out[K4P_SC + 16 * j + r] = (uint8_t)sc;
                out[K4P_M + 32 * (j / 2) + 2 * r + j % 2] = (uint8_t)m;
            }
            for (int k = 0; k < 32; k++)
                memcpy(out + K4P_QS + 64 * k + 4 * r, blk->qs + 4 * k, 4);
        }
    }
}

void kpack16_file_row_q4_K(int64_t n, const void *group, int lane, void *dst) {
    const uint8_t *in = group;
    struct block_q4_K *out = dst;
    for (int64_t b = 0; b < n / QK_SUPER; b++, in += K4P_BLOCK) {
        memcpy(&out[b].d, in + K4P_D + 2 * lane, 2);
        memcpy(&out[b].dmin, in + K4P_DMIN + 2 * lane, 2);
        memset(out[b].scales, 0, sizeof out[b].scales);
        for (int j = 0; j < 8; j++)
            k4_scale_set(out[b].scales, j, in[K4P_SC + 16 * j + lane],
                         in[K4P_M + 32 * (j / 2) + 2 * lane + j % 2]);
        for (int k = 0; k < 32; k++)
            memcpy(out[b].qs + 4 * k, in + K4P_QS + 64 * k + 4 * lane, 4);
    }
}

/* Into the batch layout: levels of chunk 16 (k / 8) + k % 8 from the low nibbles, + 8 from the
 * high ones; the scale of each sub-block serves both its groups of 16, the min (times -dmin)
 * is their bias multiplier. */
void kpack16_unpack_q4_K(int64_t n, const void *group, void *dst) {
    const uint8_t *in = group;
    uint8_t *out = dst;
    for (int64_t b = 0; b < n / QK_SUPER; b++, in += K4P_BLOCK, out += KP_BLOCK) {
        for (int k = 0; k < 32; k++) {
            int lo = 16 * (k / 8) + k % 8;
            for (int r = 0; r < 16; r++) {
                uint32_t v = load_u32(in + K4P_QS + 64 * k + 4 * r);
                store_u32(out + 64 * lo + 4 * r, v & 0x0F0F0F0Fu);
                store_u32(out + 64 * (lo + 8) + 4 * r, v >> 4 & 0x0F0F0F0Fu);
            }
        }
        for (int g = 0; g < 16; g++)
            for (int r = 0; r < 16; r++) {
                int16_t m = in[K4P_M + 32 * (g / 4) + 2 * r + g / 2 % 2];
                out[KP_SC + 16 * g + r] = in[K4P_SC + 16 * (g / 2) + r];
                memcpy(out + KP_BIAS + 64 * (g / 2) + 4 * r + 2 * (g % 2), &m, 2);
            }
        float *d = (float *)(out + KP_D), *db = (float *)(out + KP_DB);
        for (int r = 0; r < 16; r++) {
            uint16_t h;
            memcpy(&h, in + K4P_D + 2 * r, 2);
            d[r] = fp16_to_fp32(h);
            memcpy(&h, in + K4P_DMIN + 2 * r, 2);
            db[r] = -fp16_to_fp32(h);
        }
    }
}

/* ---- q6_K: per group of 16 elements, three vectors holding the 6-bit levels of chunks 0, 1
 * and 2 in their low 6 bits, and chunk 3's level spread over their top bit pairs (its bits 0-1
 * in vector 0, 2-3 in vector 1, 4-5 in vector 2): a level comes out with one mask (chunks 0-2)
 * or three shifts, three masks and two ORs (chunk 3), where low nibbles and top bit pairs kept
 * apart cost 17 operations a group --------------------------------------------------------- */

/* Where chunk c of group g (elements 16 g + 4 c .. + 3) lies in the file: the 4 bytes of ql and
 * of qh that hold its low nibbles and top bit pairs, and their shifts. */
struct q6_chunk {
    int ql, ql_shift, qh, qh_shift;
};

static struct q6_chunk q6_chunk_place(int g, int c) {
    int e = 16 * g + 4 * c, half = e / 128, quarter = e % 128 / 32, l = e % 32;
    return (struct q6_chunk){64 * half + l + 32 * (quarter & 1), quarter >= 2 ? 4 : 0,
                             32 * half + l, 2 * quarter};
}

/* The 4 levels (0..63, a byte each) of chunk c of row r, from a group's 192 bytes q. */
static uint32_t q6_levels(const uint8_t *q, int r, int c) {
    const uint32_t six = 0x3F3F3F3Fu, two = 0x03030303u;
    if (c < 3)
        return load_u32(q + 64 * c + 4 * r) & six;
    return (load_u32(q + 4 * r) >> 6 & two) | (load_u32(q + 64 + 4 * r) >> 4 & two << 2) |
           (load_u32(q + 128 + 4 * r) >> 2 & two << 4);
}

/* Row r's three level vectors of group g, from its file block. */
static void q6_pack_group(const struct block_q6_K *blk, int g, uint8_t *q, int r) {
    uint32_t lv[4];
    for (int c = 0; c < 4; c++) {
        struct q6_chunk p = q6_chunk_place(g, c);
        uint32_t lo = load_u32(blk->ql + p.ql) >> p.ql_shift & 0x0F0F0F0Fu;
        uint32_t hi = load_u32(blk->qh + p.qh) >> p.qh_shift & 0x03030303u;
        lv[c] = lo | hi << 4;
    }
    for (int k = 0; k < 3; k++)
        store_u32(q + 64 * k + 4 * r, lv[k] | (lv[3] >> (2 * k) & 0x03030303u) << 6);
}

void kpack16_pack_q6_K(int64_t n, const uint8_t *w, size_t w_stride, void *dst) {
    uint8_t *out = dst;
    for (int64_t b = 0; b < n / QK_SUPER; b++, out += K6P_BLOCK)
        for (int r = 0; r < 16; r++) {
            const struct block_q6_K *blk =
                (const struct block_q6_K *)(w + (size_t)r * w_stride) + b;
            memcpy(out + K6P_D + 2 * r, &blk->d, 2);
            for (int g = 0; g < 16; g++) {
                out[K6P_SC + 16 * g + r] = (uint8_t)blk->scales[g];
                q6_pack_group(blk, g, out + K6P_Q + 192 * g, r);
            }
        }
}

void kpack16_file_row_q6_K(int64_t n, const void *group, int lane, void *dst) {
    const uint8_t *in = group;
    struct block_q6_K *out = dst;
    for (int64_t b = 0; b < n / QK_SUPER; b++, in += K6P_BLOCK) {
        struct block_q6_K *blk = &out[b];
        memset(blk, 0, sizeof *blk);
        memcpy(&blk->d, in + K6P_D + 2 * lane, 2);
        for (int g = 0; g < 16; g++) {
            blk->scales[g] = (int8_t)in[K6P_SC + 16 * g + lane];
            for (int c = 0; c < 4; c++) {
                struct q6_chunk p = q6_chunk_place(g, c);
                uint32_t lv = q6_levels(in + K6P_Q + 192 * g, lane, c);
                uint32_t lo = lv & 0x0F0F0F0Fu, hi = lv >> 4 & 0x03030303u;
                store_u32(blk->ql + p.ql, load_u32(blk->ql + p.ql) | lo << p.ql_shift);
                store_u32(blk->qh + p.qh, load_u32(blk->qh + p.qh) | hi << p.qh_shift);
            }
        }
    }
}

/* Into the batch layout: levels 0..63 stand for q - 32, so each group's bias multiplier is -32
 * times its scale and folds into the dot sum. */
void kpack16_unpack_q6_K(int64_t n, const void *group, void *dst) {
    const uint8_t *in = group;
    uint8_t *out = dst;
    for (int64_t b = 0; b < n / QK_SUPER; b++, in += K6P_BLOCK, out += KP_BLOCK) {
        for (int g = 0; g < 16; g++) {
            const uint8_t *q = in + K6P_Q + 192 * g;
            for (int r = 0; r < 16; r++) {
                for (int c = 0; c < 4; c++)
                    store_u32(out + 64 * (4 * g + c) + 4 * r, q6_levels(q, r, c));
                int8_t sc = (int8_t)in[K6P_SC + 16 * g + r];
                int16_t bias = (int16_t)(-32 * sc);
                out[KP_SC + 16 * g + r] = (uint8_t)sc;
                memcpy(out + KP_BIAS + 64 * (g / 2) + 4 * r + 2 * (g % 2), &bias, 2);
            }
        }
        float *d = (float *)(out + KP_D), *db = (float *)(out + KP_DB);
        for (int r = 0; r < 16; r++) {
            uint16_t h;
            memcpy(&h, in + K6P_D + 2 * r, 2);
            d[r] = fp16_to_fp32(h), db[r] = 0.0f;
        }
    }
}
