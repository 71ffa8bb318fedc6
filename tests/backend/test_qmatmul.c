/* test_qmatmul.c: every fast matmul kernel this CPU runs against a double-precision dot product
 * of the same dequantized weights and quantized activations, over every tile shape it takes
 * (full and partial), plus the threaded driver against the tile. Bound: 1e-5 of sum |w x|. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>

#include <stdlib.h>
#include <string.h>

#include "backend/cpu/qkernels.h"
#include "core/alloc.h"
#include "core/cpu_features.h"
#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/dtype.h"
#include "test.h"

#ifdef OX_TEST_VNNI_EMULATED
/* The AVX-VNNI kernels on AVX2 alone (tests/backend/CMakeLists.txt), as a level's table */
QKERNEL_TABLE(qkernels_avx2vnni_emulated, avx2vnni_emulated, avx2);
#endif

#define COLS   512 /* elements per row: two k-quant super-blocks, sixteen 32-blocks */
#define ROWS   16
#define TOKENS 9 /* more than the widest packed tile (8), so tiles start past token 0 */

static uint32_t rng = 12345;
static float uniform(void) { /* xorshift32 in [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
    return (float)(rng >> 8) / 8388608.0f - 1.0f;
}

/* The operands: weights as the file holds them (wq) and dequantized (wd), activations as the
 * kernel quantizes them (xq) and back (xd). */
static float w[ROWS][COLS], wd[ROWS][COLS], x[TOKENS][COLS], xd[TOKENS][COLS];
static uint8_t wq[ROWS * COLS * 4], xq[TOKENS * COLS * 4];

static void quantize_operands(const struct dtype_traits *tr, const struct qkernel *k) {
    size_t w_row = (size_t)(COLS / tr->block_size) * tr->type_size, x_row = k->x_row_bytes(COLS);
    for (int r = 0; r < ROWS; r++)
        tr->to_float(wq + r * w_row, wd[r], COLS);
    for (int c = 0; c < TOKENS; c++) {
        k->quantize_x(x[c], xq + c * x_row, COLS);
        k->x_to_float(xq + c * x_row, xd[c], COLS);
    }
}

static void check_paths(enum ox_dtype type, const struct qkernel *k);

static void check_kernel(enum ox_dtype type, const struct qkernel *k) {
    const struct dtype_traits *tr = dtype_get((int)type);
    if (!k)
        return;
    size_t w_row = (size_t)(COLS / tr->block_size) * tr->type_size;
    for (int r = 0; r < ROWS; r++) {
        for (int i = 0; i < COLS; i++) /* rows of different scales, some outliers */
            w[r][i] = uniform() * (0.5f + r) * (i % 61 == 0 ? 4.0f : 1.0f);
        tr->from_float(w[r], wq + r * w_row, 1, COLS, NULL);
    }
    for (int c = 0; c < TOKENS; c++)
        for (int i = 0; i < COLS; i++)
            x[c][i] = uniform() * (c + 1);
    quantize_operands(tr, k);
    check_paths(type, k);
}

/* q8_0 at the ends of its levels, where byte products of a pair come nearest int16's limits:
 * rows of -128 (a file may hold it; ggml's quantizer stops at -127), of 127, and mixed, against
 * activations of one magnitude (levels +-127) with every sign pattern. */
static void check_q8_0_extremes(const struct qkernel *k) {
    if (!k)
        return;
    const struct dtype_traits *tr = dtype_get(OX_DTYPE_Q8_0);
    for (int r = 0; r < ROWS; r++)
        for (int b = 0; b < COLS / 32; b++) {
            struct block_q8_0 *blk = (struct block_q8_0 *)wq + r * (COLS / 32) + b;
            blk->d = 0x3C00; /* 1.0 */
            for (int i = 0; i < 32; i++) {
                int pick = r % 4 == 0 ? 0 : r % 4 == 1 ? 1 : (i + r + b) % (r % 4);
                blk->qs[i] = (int8_t)(pick == 0 ? -128 : 127);
            }
        }
    for (int c = 0; c < TOKENS; c++)
        for (int i = 0; i < COLS; i++)
            x[c][i] = c == 0 ? 1.0f : c == 1 ? -1.0f : ((i * c + i / 3) % 2 ? 1.0f : -1.0f);
    quantize_operands(tr, k);
    check_paths(OX_DTYPE_Q8_0, k);
}

/* What ggml's q4_1 / q5_1 dot products add to row r . token c of the values the kernel sees:
 * their min term is m_w * s with s the activations' own f16 d * sum(q) (ggml's q8_1), not m_w
 * times the sum of those values; 0 for the other types. */
static double min_term(enum ox_dtype type, int r, int c, size_t w_row, size_t x_row) {
    if (type != OX_DTYPE_Q4_1 && type != OX_DTYPE_Q5_1)
        return 0.0;
    const struct dtype_traits *tr = dtype_get((int)type);
    double extra = 0.0;
    for (int b = 0; b < COLS / 32; b++) {
        const struct xq8_32 *xb = (const struct xq8_32 *)(xq + c * x_row) + b;
        uint16_t m; /* both blocks begin with f16 d, then f16 m */
        memcpy(&m, wq + r * w_row + b * tr->type_size + 2, sizeof m);
        double seen = 0.0;
        for (int i = 0; i < 32; i++)
            seen += xd[c][b * 32 + i];
        extra += (double)fp16_to_fp32(m) * ((double)xb->s - seen);
    }
    return extra;
}

static void check_paths(enum ox_dtype type, const struct qkernel *k) {
    const struct dtype_traits *tr = dtype_get((int)type);
    size_t w_row = (size_t)(COLS / tr->block_size) * tr->type_size, x_row = k->x_row_bytes(COLS);
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
                    want += min_term(type, r0 + r, c0 + c, w_row, x_row);
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
                    want += min_term(type, r, c0 + c, w_row, x_row);
                    if (!(fabs(y[c * 64 + r] - want) <= 1e-5 * mag + 1e-6) && bad++ < 3)
                        printf("  %s packed %dx%d: (%d,%d) %.9g vs %.9g\n", k->name, nr, nc, r, c,
                               y[c * 64 + r], want);
                }
        }
    if (k->pack) { /* the load-time layout: one token at a time, and unpacked for batches */
        static uint8_t group[PACK16_BYTES(COLS) * 2], pack[PACK16_BYTES(COLS)];
        k->pack(COLS, wq, w_row, group);
        k->unpack16(COLS, group, pack);
        for (int r = 0; r < 16; r++) { /* each row comes back byte for byte */
            static uint8_t row[COLS * 4];
            k->file_row(COLS, group, r, row);
            CHECK_MSG(memcmp(row, wq + r * w_row, w_row) == 0, "%s: file_row %d", k->name, r);
        }
        for (int nc = 1; nc <= k->pack_nc; nc++)
            for (int path = 0; path < 2; path++) {
                float y[64 * 64];
                for (int i = 0; i < 64 * 64; i++) /* a token left out shows */
                    y[i] = NAN;
                int c0 = TOKENS - nc;
                if (path == 0)
                    k->gemv16(COLS, group, xq + c0 * x_row, x_row, nc, y, 64);
                else
                    k->tile16(COLS, pack, 16, xq + c0 * x_row, x_row, nc, y, 64);
                for (int c = 0; c < nc; c++)
                    for (int r = 0; r < 16; r++) {
                        double want = 0, mag = 0;
                        for (int i = 0; i < COLS; i++) {
                            want += (double)wd[r][i] * xd[c0 + c][i];
                            mag += fabs((double)wd[r][i] * xd[c0 + c][i]);
                        }
                        want += min_term(type, r, c0 + c, w_row, x_row);
                        if (!(fabs(y[c * 64 + r] - want) <= 1e-5 * mag + 1e-6) && bad++ < 3)
                            printf("  %s %s %d: (%d,%d) %.9g vs %.9g\n", k->name,
                                   path ? "unpacked" : "gemv16", nc, r, c, y[c * 64 + r], want);
                    }
            }
    }
    CHECK_MSG(bad == 0, "%s: %d dot products out of bound", k->name, bad);
    printf("  %-28s checked on %d x %d tiles\n", k->name, k->max_nr, k->max_nc);
}

/* Kernels on q8_K activations round them byte for byte as ggml's quantize_row_q8_K (the
 * reference quantizer): halves to even, the scale from the first element of largest magnitude
 * with its sign, all-zero blocks all zero. */
static void check_q8_K_activations(const struct qkernel *k) {
    if (!k || k->x_to_float != dequant_q8_K)
        return;
    static float x[4 * QK_SUPER];
    static uint8_t got[4 * sizeof(struct block_q8_K)], want[4 * sizeof(struct block_q8_K)];
    for (int i = 0; i < QK_SUPER; i++) {
        x[i] = (float)(i % 200 - 100) + 0.5f;   /* scale 1: every level a tie */
        x[QK_SUPER + i] = 0.0f;                 /* all zero */
        x[2 * QK_SUPER + i] = uniform() * 3.0f; /* the largest twice, signs opposite */
        x[3 * QK_SUPER + i] = uniform() * 1e-3f;
    }
    x[7] = -127.0f, x[2 * QK_SUPER + 9] = 3.5f, x[2 * QK_SUPER + 30] = -3.5f;
    k->quantize_x(x, got, 4 * QK_SUPER);
    dtype_get(OX_DTYPE_Q8_K)->from_float(x, want, 1, 4 * QK_SUPER, NULL);
    CHECK_MSG(memcmp(got, want, sizeof got) == 0, "%s: activations differ from q8_K", k->name);
}

/* Float weights: the fast kernels run the reference's own summation orders, so the whole
 * matmul (batch: tinyBLAS order, one token: vec_dot order, widths with and without tails)
 * equals the scalar reference bit for bit. */
static void check_float_exact(enum ox_dtype type, int cols, int n) {
    if (!qkernel_for(type))
        return;
    const struct dtype_traits *tr = dtype_get((int)type);
    enum { R = 21 };
    static float w[R * 600], x[8 * 600], y_fast[8 * R], y_ref[8 * R];
    static uint8_t wq[R * 600 * 4];
    for (int i = 0; i < R * cols; i++)
        w[i] = uniform();
    for (int i = 0; i < n * cols; i++)
        x[i] = uniform() * 3.0f;
    size_t row = (size_t)cols * tr->type_size;
    tr->from_float(w, wq, R, cols, NULL);
    struct backend b = {.ops = &backend_cpu_ops};
    CHECK(b.ops->init(&b, &(struct backend_sizes){
                              .n_batch = 8, .n_threads = 2, .max_cols = cols}) == OX_OK);
    struct mat m = {type, wq, R, cols, row, NULL, NULL};
    b.ops->matmul(&b, &m, x, y_fast, n);
    setenv("OX_REFERENCE_MATMUL", "1", 1);
    b.ops->matmul(&b, &m, x, y_ref, n);
    unsetenv("OX_REFERENCE_MATMUL");
    CHECK_MSG(memcmp(y_fast, y_ref, (size_t)n * R * sizeof(float)) == 0,
              "%s: %d x %d, %d tokens: fast != reference", tr->name, R, cols, n);
    b.ops->release(&b);
}

/* The fused ops (qmatmul_fused.c) against the separate matmuls and glu they stand for, bit for
 * bit: q, k, v of different heights; a GLU whose rows span more than one of its buffers, with a
 * partial last span; every token count the fused path takes. Weights of one type in the
 * load-time layout (the only ones the fusions take), 2 threads. */
static void check_fused(enum ox_dtype type) {
    const struct qkernel *k = qkernel_for(type);
    if (!k || !k->pack)
        return;
    enum { C = 512, RQ = 64, RK = 32, RV = 48, RF = 16 * 37, N = 7 };
    const struct dtype_traits *tr = dtype_get((int)type);
    size_t row = (size_t)(C / tr->block_size) * tr->type_size;
    static float wf[RF * C], x[N * C];
    static uint8_t wq[5][RF * C * 2];
    static float got[5][N * RF], want[5][N * RF];
    const int rows[5] = {RQ, RK, RV, RF, RF};
    struct mat m[5];
    for (int i = 0; i < 5; i++) {
        for (int e = 0; e < rows[i] * C; e++)
            wf[e] = uniform() * 0.1f;
        tr->from_float(wf, wq[i], rows[i], C, NULL);
        m[i] = (struct mat){type, wq[i], rows[i], C, row, NULL, NULL};
        m[i].packed = cpu_pack_rows(type, wq[i], rows[i], C, row);
    }
    for (int e = 0; e < N * C; e++)
        x[e] = uniform() * 4.0f;
    struct backend b = {.ops = &backend_cpu_ops};
    CHECK(b.ops->init(&b, &(struct backend_sizes){.n_batch = N, .n_threads = 2, .max_cols = C}) ==
          OX_OK);
    for (int n = 1; n < k->pack_nc && n <= N; n++) {
        float *y3[3] = {got[0], got[1], got[2]};
        CHECK_MSG(qmatmul_multi(&b, 3, m, x, NULL, y3, n), "%s: multi not taken", k->name);
        for (int i = 0; i < 3; i++) {
            qmatmul(&b, &m[i], x, want[i], n);
            CHECK_MSG(memcmp(got[i], want[i], (size_t)n * rows[i] * sizeof(float)) == 0,
                      "%s: multi matrix %d, %d tokens != matmul", k->name, i, n);
        }
        for (int kind = GLU_SILU; kind <= GLU_GELU; kind++) {
            CHECK_MSG(qmatmul_glu(&b, (enum glu_kind)kind, &m[3], &m[4], x, NULL, got[3], n),
                      "%s: glu not taken", k->name);
            qmatmul(&b, &m[3], x, want[3], n);
            qmatmul(&b, &m[4], x, want[4], n);
            b.ops->glu(&b, (enum glu_kind)kind, want[3], want[4], got[4], (size_t)n * RF);
            CHECK_MSG(memcmp(got[3], got[4], (size_t)n * RF * sizeof(float)) == 0,
                      "%s: glu %d, %d tokens != matmuls and glu", k->name, kind, n);
        }
    }
    struct norm_in norm = {wf, 1e-5f}; /* norms are the caller's: refused */
    float *y3[3] = {got[0], got[1], got[2]};
    CHECK_MSG(!qmatmul_multi(&b, 3, m, x, &norm, y3, 1), "%s: multi took a norm", k->name);
    for (int i = 0; i < 5; i++)
        cpu_pack_free((void *)m[i].packed);
    b.ops->release(&b);
}

int main(void) {
    const enum ox_dtype floats[] = {OX_DTYPE_F32, OX_DTYPE_F16, OX_DTYPE_BF16};
    for (int i = 0; i < 3; i++)
        for (int n = 1; n <= 6; n += 5)
            for (int cols = 200; cols <= 600; cols += 312) /* 200: tails; 512: whole steps */
                check_float_exact(floats[i], cols, n);
    int n = 0;
    for (int t = 0; t < OX_DTYPE_COUNT; t++) {
        if (!qkernel_for((enum ox_dtype)t))
            continue;
        check_kernel((enum ox_dtype)t, qkernel_for((enum ox_dtype)t));
        check_q8_K_activations(qkernel_for((enum ox_dtype)t));
        n++;
    }
    check_q8_0_extremes(qkernel_for(OX_DTYPE_Q8_0));
    for (int t = 0; t < OX_DTYPE_COUNT; t++)
        check_fused((enum ox_dtype)t);
#if defined(__x86_64__) /* the AVX2 sets, which AVX-512 machines never pick, on their own */
    const struct cpu_features *f = cpu_features_get();
    for (int t = 0; f->avx2 && f->fma && f->f16c && t < OX_DTYPE_COUNT; t++) {
        check_kernel((enum ox_dtype)t, qkernels_avx2[t]);
        check_q8_K_activations(qkernels_avx2[t]);
        if (f->avx_vnni)
            check_kernel((enum ox_dtype)t, qkernels_avx2vnni[t]);
    }
    if (f->avx2 && f->fma && f->f16c)
        check_q8_0_extremes(qkernels_avx2[OX_DTYPE_Q8_0]);
    if (f->avx_vnni)
        check_q8_0_extremes(qkernels_avx2vnni[OX_DTYPE_Q8_0]);
#ifdef OX_TEST_VNNI_EMULATED
    for (int t = 0; f->avx2 && f->fma && f->f16c && t < OX_DTYPE_COUNT; t++)
        check_kernel((enum ox_dtype)t, qkernels_avx2vnni_emulated[t]);
    if (f->avx2 && f->fma && f->f16c)
        check_q8_0_extremes(qkernels_avx2vnni_emulated[OX_DTYPE_Q8_0]);
#endif
#endif
    printf("%d fast kernels on this CPU\n", n);
    return test_finish("test_qmatmul");
}
