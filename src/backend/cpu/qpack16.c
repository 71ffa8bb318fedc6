/* qpack16.c: the load-time layout of q4_0, q5_0 and q8_0 weights that every x86 and NEON level
 * reads (groups of 16 rows): per block of 32, the 16 rows' f16 scales, then their quants
 * chunk-major as in the file (q4_0 and q5_0: bytes 4k..4k+3 of each row hold elements 4k.. in
 * the low nibbles and 4k+16.. in the high ones; q8_0: 4 bytes per row per chunk), and for q5_0
 * the fifth bits as a bit per level byte of each chunk. A single token then takes one 4-byte
 * broadcast of its activations per chunk for 16 rows, with no unpacking beyond a mask, a shift
 * (and, for q5_0, the bits spread to bytes). */
#include <string.h>

#include "backend/cpu/qmatmul.h"
#include "quant/blocks.h"

size_t qpack16_group_bytes_q4_0(int64_t n) {
    return (size_t)(n / 32) * QPACK16_Q4_0_BLOCK;
}

size_t qpack16_group_bytes_q5_0(int64_t n) {
    return (size_t)(n / 32) * QPACK16_Q5_0_BLOCK;
}

size_t qpack16_group_bytes_q8_0(int64_t n) {
    return (size_t)(n / 32) * QPACK16_Q8_0_BLOCK;
}

void qpack16_pack_q4_0(int64_t n, const uint8_t *w, size_t w_stride, void *dst) {
    uint8_t *out = dst;
    for (int64_t b = 0; b < n / 32; b++, out += QPACK16_Q4_0_BLOCK)
        for (int r = 0; r < 16; r++) {
            const struct block_q4_0 *blk =
                (const struct block_q4_0 *)(w + (size_t)r * w_stride) + b;
            memcpy(out + 2 * r, &blk->d, 2);
            for (int k = 0; k < 4; k++)
                memcpy(out + 32 + (k * 16 + r) * 4, blk->qs + 4 * k, 4);
        }
}

/* Element e of level chunk k, lane j: the low nibbles hold chunks 0..3, the high ones 4..7. */
static int q5_element(int k, int j) {
    return k < 4 ? 4 * k + j : 16 + 4 * (k - 4) + j;
}

void qpack16_pack_q5_0(int64_t n, const uint8_t *w, size_t w_stride, void *dst) {
    uint8_t *out = dst;
    for (int64_t b = 0; b < n / 32; b++, out += QPACK16_Q5_0_BLOCK) {
        uint64_t bits[8] = {0};
        for (int r = 0; r < 16; r++) {
            const struct block_q5_0 *blk =
                (const struct block_q5_0 *)(w + (size_t)r * w_stride) + b;
            uint32_t qh;
            memcpy(&qh, blk->qh, 4);
            memcpy(out + 2 * r, &blk->d, 2);
            for (int k = 0; k < 4; k++)
                memcpy(out + 32 + (k * 16 + r) * 4, blk->qs + 4 * k, 4);
            for (int k = 0; k < 8; k++)
                for (int j = 0; j < 4; j++)
                    bits[k] |= (uint64_t)(qh >> q5_element(k, j) & 1) << (4 * r + j);
        }
        memcpy(out + QPACK16_Q5_0_BITS, bits, sizeof bits); /* little-endian, as the loads */
    }
}

void qpack16_pack_q8_0(int64_t n, const uint8_t *w, size_t w_stride, void *dst) {
    uint8_t *out = dst;
    for (int64_t b = 0; b < n / 32; b++, out += QPACK16_Q8_0_BLOCK)
        for (int r = 0; r < 16; r++) {
            const struct block_q8_0 *blk =
                (const struct block_q8_0 *)(w + (size_t)r * w_stride) + b;
            memcpy(out + 2 * r, &blk->d, 2);
            for (int k = 0; k < 8; k++)
                memcpy(out + 32 + (k * 16 + r) * 4, blk->qs + 4 * k, 4);
        }
}

/* One row of a group back in the file's layout: its scale, then its chunks of 4 bytes. */
void qpack16_file_row_q4_0(int64_t n, const void *group, int lane, void *dst) {
    const uint8_t *blk = group;
    struct block_q4_0 *out = dst;
    for (int64_t b = 0; b < n / 32; b++, blk += QPACK16_Q4_0_BLOCK) {
        memcpy(&out[b].d, blk + 2 * lane, 2);
        for (int k = 0; k < 4; k++)
            memcpy(out[b].qs + 4 * k, blk + 32 + (k * 16 + lane) * 4, 4);
    }
}

void qpack16_file_row_q5_0(int64_t n, const void *group, int lane, void *dst) {
    const uint8_t *blk = group;
    struct block_q5_0 *out = dst;
    for (int64_t b = 0; b < n / 32; b++, blk += QPACK16_Q5_0_BLOCK) {
        uint64_t bits[8];
        memcpy(bits, blk + QPACK16_Q5_0_BITS, sizeof bits);
        uint32_t qh = 0;
        memcpy(&out[b].d, blk + 2 * lane, 2);
        for (int k = 0; k < 4; k++)
            memcpy(out[b].qs + 4 * k, blk + 32 + (k * 16 + lane) * 4, 4);
        for (int k = 0; k < 8; k++)
            for (int j = 0; j < 4; j++)
                qh |= (uint32_t)(bits[k] >> (4 * lane + j) & 1) << q5_element(k, j);
        memcpy(out[b].qh, &qh, 4);
    }
}

void qpack16_file_row_q8_0(int64_t n, const void *group, int lane, void *dst) {
    const uint8_t *blk = group;
    struct block_q8_0 *out = dst;
    for (int64_t b = 0; b < n / 32; b++, blk += QPACK16_Q8_0_BLOCK) {
        memcpy(&out[b].d, blk + 2 * lane, 2);
        for (int k = 0; k < 8; k++)
            memcpy(out[b].qs + 4 * k, blk + 32 + (k * 16 + lane) * 4, 4);
    }
}
