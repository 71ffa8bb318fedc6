/* test_qmatmul.c: every fast matmul kernel this CPU runs against a double-precision dot product
 * of the same dequantized weights and quantized activations, over every tile shape it takes
 * (full and partial), plus the threaded driver against the tile. Bound: 1e-5 of sum |w x|. */
#include <math.h>

#include "backend/cpu/qmatmul.h"
#include "quant/dtype.h"
#include "test.h"

#define COLS   512 /* elements per row: two k-quant super-blocks, sixteen 32-blocks */
#define ROWS   16
#define TOKENS 7

static uint32_t rng = 12345;
static float uniform(void) { /* xorshift32 in [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
    return (float)(rng >> 8) / 8388608.0f - 1.0f;
}

static void check_type(enum ox_dtype type) {
    const struct qkernel *k = qkernel_for(type);
    const struct dtype_traits *tr = dtype_get((int)type);
    if (!k)
        return;
    static float w[ROWS][COLS], wd[ROWS][COLS], x[TOKENS][COLS], xd[TOKENS][COLS];
    static uint8_t wq[ROWS * COLS * 4], xq[TOKENS * COLS * 4];
    size_t w_row = (size_t)(COLS / tr->block_size) * tr->type_size, x_row = k->x_row_bytes(COLS);
    for (int r = 0; r < ROWS; r++) {
        for (int i = 0; i < COLS; i++) /* rows of different scales, some outliers */
            w[r][i] = uniform() * (0.5f + r) * (i % 61 == 0 ? 4.0f : 1.0f);
        tr->from_float(w[r], wq + r * w_row, 1, COLS, NULL);
        tr->to_float(wq + r * w_row, wd[r], COLS);
    }
    for (int c = 0; c < TOKENS; c++) {
        for (int i = 0; i < COLS; i++)
            x[c][i] = uniform() * (c + 1);
        k->quantize_x(x[c], xq + c * x_row, COLS);
        k->x_to_float(xq + c * x_row, xd[c], COLS);
    }
    int bad = 0;
    for (int nr = 1; nr <= k->max_nr; nr++)
        for (int nc = 1; nc <= k->max_nc; nc++) {
            float y[64 * 64];
            int r0 = ROWS - nr, c0 = TOKENS - nc; /* end-aligned: not always the first rows */
            k->tile(COLS, wq + r0 * w_row, w_row, nr, xq + c0 * x_row, x_row, nc, y, 64);
            for (int c = 0; c < nc; c++)
                for (int r = 0; r < nr; r++) {
                    double want = 0, mag = 0;
                    for (int i = 0; i < COLS; i++) {
                        want += (double)wd[r0 + r][i] * xd[c0 + c][i];
                        mag += fabs((double)wd[r0 + r][i] * xd[c0 + c][i]);
                    }
                    double got = y[c * 64 + r];
                    if (!(fabs(got - want) <= 1e-5 * mag + 1e-6)) {
                        if (bad++ < 3)
                            printf("  %s %dx%d tile: (%d,%d) %.9g vs %.9g\n", k->name, nr, nc, r, c,
                                   got, want);
                    }
                }
        }
    for (int nr = 1; k->repack16 && nr <= 16; nr++) /* the batch path: repacked rows */
        for (int nc = 1; nc <= k->pack_nc; nc++) {
            static uint8_t pack[PACK16_BYTES(COLS)];
            float y[64 * 64];
            int c0 = TOKENS - nc;
            k->repack16(COLS, wq, w_row, nr, pack);
            k->tile16(COLS, pack, nr, xq + c0 * x_row, x_row, nc, y, 64);
            for (int c = 0; c < nc; c++)
                for (int r = 0; r < nr; r++) {
                    double want = 0, mag = 0;
                    for (int i = 0; i < COLS; i++) {
                        want += (double)wd[r][i] * xd[c0 + c][i];
                        mag += fabs((double)wd[r][i] * xd[c0 + c][i]);
                    }
                    if (!(fabs(y[c * 64 + r] - want) <= 1e-5 * mag + 1e-6) && bad++ < 3)
                        printf("  %s packed %dx%d: (%d,%d) %.9g vs %.9g\n", k->name, nr, nc, r, c,
                               y[c * 64 + r], want);
                }
        }
    CHECK_MSG(bad == 0, "%s: %d dot products out of bound", k->name, bad);
    printf("  %-28s checked on %d x %d tiles\n", k->name, k->max_nr, k->max_nc);
}

int main(void) {
    int n = 0;
    for (int t = 0; t < OX_DTYPE_COUNT; t++) {
        if (!qkernel_for((enum ox_dtype)t))
            continue;
        check_type((enum ox_dtype)t);
        n++;
    }
    printf("%d fast kernels on this CPU\n", n);
    return test_finish("test_qmatmul");
}
