/* test_vulkan_group_fold.c: decode's products making the int8 groups the next product takes
 * (vk_group_fold.c). y += W x, then q, k and v's products or a GLU of y through the RMSNorm: for
 * a residual whose normed groups of 32 are whole levels the products must match the double
 * product of the normed residual to the float sums' error, for a random one stay as close to it
 * as the unfolded path, and y as close as its sums in another order. A GLU, then down's product
 * of its output: the GLU's floats as unfolded, down's result as close to the double product. One
 * token folds; 3 and 8 must run as unfolded. Skipped (77) where there is no Vulkan device with
 * integer dot products. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/vulkan/vk_backend.h"
#include "device_ops_common.h"
#include "quant/dtype.h"
#include "test.h"

/* IN: y += W x's width; WIDE past matvec_group.comp's default 4096 (not folded: vk_matmul.c's
 * group_form) */
enum { DIM = 512, IN = 256, WIDE = 4608, FF = 256, STEPS = 2 };
static const int qkv_rows[3] = {256, 32, 32}; /* q (and the GLU): k-quants' blocks wide */

/* A residual whose norm's groups of 32 (times g) are whole levels of a power-of-two scale, one
 * of them 127 (the scale exactly that power), the scales far apart from group to group; g powers
 * of two with signs, so y * g is exact. */
static void exact_residual(int n, float *y, float *g) {
    for (int i = 0; i < DIM; i++)
        g[i] = ldexpf(i % 3 == 1 ? -1.0f : 1.0f, i % 5 - 2);
    for (int t = 0; t < n; t++)
        for (int q = 0; q < DIM / 32; q++) {
            float scale = ldexpf(1.0f, (q * 7 + t) % 11 - 8);
            for (int j = 0; j < 32; j++) {
                int i = 32 * q + j;
                float level = j == (q + t) % 32 ? (q % 2 ? -127.0f : 127.0f) : frand() * 126.0f;
                y[(size_t)t * DIM + i] = roundf(level) * scale / g[i];
            }
        }
}

/* y's RMSNorm times g in double, rounded to float. */
static void normed_ref(const float *y, const float *g, int n, float eps, float *out) {
    for (int t = 0; t < n; t++) {
        double ss = 0.0;
        for (int i = 0; i < DIM; i++)
            ss += (double)y[(size_t)t * DIM + i] * y[(size_t)t * DIM + i];
        double scale = 1.0 / sqrt(ss / DIM + eps);
        for (int i = 0; i < DIM; i++)
            out[(size_t)t * DIM + i] = (float)(y[(size_t)t * DIM + i] * scale * g[i]);
    }
}

/* STEPS rounds of y += W x (from y0) and the products of y through the norm (q, k and v, then
 * a GLU, whose output wd takes into z += wd h from 0: the GLU both takes a norm's groups and
 * makes its own), then k's product of z through the norm (z += wd h makes its groups from the
 * GLU's); the products' outputs, y, z and the last after the last step into got (q, k, v, glu,
 * y, z, k of z). */
static void fold_round(const struct mat *wo, const float *dxa, const struct mat dw[3],
                       const struct mat *up, const struct mat *wd, const float *y0,
                       const struct norm_in *norm, int n, float *got[7]) {
    float *dy = gpu.ops->alloc(&gpu, (size_t)n * DIM * 4), *out[5];
    float *dz = gpu.ops->alloc(&gpu, (size_t)n * DIM * 4);
    for (int m = 0; m < 3; m++)
        out[m] = gpu.ops->alloc(&gpu, (size_t)n * qkv_rows[m] * 4);
    out[3] = gpu.ops->alloc(&gpu, (size_t)n * qkv_rows[0] * 4);
    out[4] = gpu.ops->alloc(&gpu, (size_t)n * qkv_rows[1] * 4);
    for (int step = 0; step < STEPS; step++) { /* y the same for both */
        gpu.ops->zero(&gpu, dz, (size_t)n * DIM);
        gpu.ops->upload(&gpu, dy, y0, (size_t)n * DIM * 4);
        CHECK(gpu.ops->matmul_add(&gpu, wo, dxa, dy, n));
        CHECK(gpu.ops->matmul_multi(&gpu, 3, dw, dy, norm, out, n));
        gpu.ops->upload(&gpu, dy, y0, (size_t)n * DIM * 4);
        CHECK(gpu.ops->matmul_add(&gpu, wo, dxa, dy, n));
        CHECK(gpu.ops->matmul_glu(&gpu, GLU_SILU, &dw[0], up, dy, norm, out[3], n));
        CHECK(gpu.ops->matmul_add(&gpu, wd, out[3], dz, n));
        CHECK(gpu.ops->matmul_multi(&gpu, 1, &dw[1], dz, norm, &out[4], n));
    }
    for (int m = 0; m < 4; m++)
        got[m] = down(out[m], (size_t)n * (m == 3 ? qkv_rows[0] : qkv_rows[m])),
        gpu.ops->free(&gpu, out[m]);
    got[4] = down(dy, (size_t)n * DIM), got[5] = down(dz, (size_t)n * DIM);
    got[6] = down(out[4], (size_t)n * qkv_rows[1]);
    gpu.ops->free(&gpu, dy), gpu.ops->free(&gpu, dz), gpu.ops->free(&gpu, out[4]);
}

/* The double products of x (normed) by q, k, v and the GLU of q's weights and up's. */
static void products_ref(enum ox_dtype type, uint8_t *const hw[4], const float *x, int n,
                         float *want[4]) {
    for (int m = 0; m < 3; m++)
        matmul_ref(type, hw[m], qkv_rows[m], DIM, x, n, want[m]);
    float *u = malloc((size_t)n * qkv_rows[0] * 4);
    matmul_ref(type, hw[3], qkv_rows[0], DIM, x, n, u);
    for (size_t i = 0; i < (size_t)n * qkv_rows[0]; i++) {
        double gv = want[0][i];
        want[3][i] = (float)(gv / (1.0 + exp(-gv)) * u[i]);
    }
    free(u);
}

/* q, k, v and the GLU of y's norm folded (got[1]) and apart (got[0]) against the double products
 * of y's norm (y: got[1][4]); folds: the norm folded, q8: the GLU's groups made (its sums then in
 * another order). Frees got[0..1][0..3]. */
static void check_products(enum ox_dtype type, enum ox_dtype wo_type, uint8_t *const hw[4],
                           const float *g, float eps, int n, bool exact, bool folds, bool q8,
                           float *got[][7]) {
    float *x = malloc((size_t)n * DIM * 4), *want[4];
    normed_ref(got[1][4], g, n, eps, x);
    for (int m = 0; m < 4; m++)
        want[m] = malloc((size_t)n * qkv_rows[m == 3 ? 0 : m] * 4);
    products_ref(type, hw, x, n, want);
    static const char *what[4] = {"q", "k", "v", "the GLU"};
    for (int m = 0; m < 4; m++) {
        size_t count = (size_t)n * qkv_rows[m == 3 ? 0 : m];
        double folded_err = rel_err(got[1][m], want[m], count);
        double apart_err = rel_err(got[0][m], want[m], count);
        /* exact levels: the float sums' error; random ones: int8's, as unfolded (the same groups,
         * 1 / rms applied after); not folded: q, k and v bit for bit (below), the GLU summed in
         * another order where it makes its groups */
        double tol = exact ? 2e-5 : 1.1 * apart_err;
        CHECK_MSG(folded_err <= tol,
                  "%s of a folded norm (%s, y += W x %s, n=%d%s): error %.3g,"
                  " allowed %.3g (apart: %.3g)",
                  what[m], ox_dtype_name(type), ox_dtype_name(wo_type), n,
                  exact ? ", exact levels" : "", folded_err, tol, apart_err);
        CHECK_MSG(folds || (m == 3 && q8) || !memcmp(got[0][m], got[1][m], count * 4),
                  "%s not folded", what[m]);
        free(want[m]), free(got[0][m]), free(got[1][m]);
    }
    free(x);
}

/* tiny: the residual 2^-10 as large, its mean square below the norm's eps (which then counts) */
static void test_norm_fold(enum ox_dtype type, enum ox_dtype wo_type, int n, int in, bool exact,
                           bool tiny) {
    uint8_t *hw[4], *hwo, *hwd;
    struct mat dw[3], wup, wo = random_weight(wo_type, DIM, in, &hwo);
    struct mat wd = random_weight(wo_type, DIM, qkv_rows[0], &hwd);
    for (int m = 0; m < 3; m++)
        dw[m] = random_weight(type, qkv_rows[m], DIM, &hw[m]);
    wup = random_weight(type, qkv_rows[0], DIM, &hw[3]);
    float *y0 = random_floats((size_t)n * DIM, 2.0f), *g = random_floats(DIM, 1.0f);
    float *xa = random_floats((size_t)n * in, exact ? 0.0f : 1.0f); /* exact: y += 0 */
    if (exact)
        exact_residual(n, y0, g);
    for (size_t i = 0; tiny && i < (size_t)n * DIM; i++)
        y0[i] = ldexpf(y0[i], -10);
    float *dxa = up(xa, (size_t)n * in * 4);
    const struct norm_in norm = {up(g, DIM * 4), 1e-5f};
    float *got[3][7];
    bool was = vk_backend_group_folds();
    uint64_t taken = 0;
    for (int round = 0; round < 3; round++) { /* apart, folded to make the blocks, folded */
        vk_backend_set_group_folds(round > 0);
        taken = vk_backend_group_folds_taken();
        fold_round(&wo, dxa, dw, &wup, &wd, y0, &norm, n, got[round]);
    }
    vk_backend_set_group_folds(was);
    /* each step's: q, k and v's norm and the GLU's from y += W x, the GLU's groups for z += wd h
     * and k's norm of z from that: the first two not where y += W x has no integer form
     * (matvec_group.comp's) or is too wide for it; nothing where z's product has none or for
     * more tokens than one */
    uint64_t folded = vk_backend_group_folds_taken() - taken;
    bool q8 = vk_backend_q8_type(wo_type) && n == 1, folds = q8 && in <= vk_backend_group_cols();
    CHECK_MSG(folded == (uint64_t)(STEPS * (2 * folds + 2 * q8)),
              "%llu folds in %d steps (%s, %d wide, n=%d)", (unsigned long long)folded, STEPS,
              ox_dtype_name(wo_type), in, n);
    for (int i = 0; i < 7; i++) /* the round that made the blocks */
        free(got[1][i]), got[1][i] = got[2][i];
    check_products(type, wo_type, hw, g, norm.eps, n, exact, folds, q8, got);
    /* y summed in another order; z from the GLU's groups, their floats as close as the GLU's; k
     * of z's norm, z += wd h having made its groups */
    CHECK_CLOSE(got[1][4], got[0][4], (size_t)n * DIM, 1e-6, "y += W x writing its norm");
    CHECK_CLOSE(got[1][5], got[0][5], (size_t)n * DIM, 2e-3, "z += W h of a GLU making its groups");
    CHECK_CLOSE(got[1][6], got[0][6], (size_t)n * qkv_rows[1], 2e-3,
                "k of z's norm, z += W h making its groups");
    printf("  norm folded: %s, y += W x %s (%d wide), n=%d%s%s\n", ox_dtype_name(type),
           ox_dtype_name(wo_type), in, n, exact ? ", exact levels" : "", tiny ? ", tiny" : "");
    for (int r = 0; r < 2; r++)
        free(got[r][4]), free(got[r][5]), free(got[r][6]);
    free(y0), free(g), free(xa), free(hwo), free(hwd);
    gpu.ops->free(&gpu, (void *)wd.data);
    for (int m = 0; m < 3; m++)
        free(hw[m]), gpu.ops->free(&gpu, (void *)dw[m].data);
    free(hw[3]), gpu.ops->free(&gpu, (void *)wup.data), gpu.ops->free(&gpu, (void *)wo.data);
    gpu.ops->free(&gpu, dxa), gpu.ops->free(&gpu, (void *)norm.w);
}

/* STEPS rounds of y (from y0) += down (act(gate x) * (up x)), the GLU's output into got[0], y
 * into got[1]. */
static void glu_round(const struct mat w[3], const float *dx, const float *y0, int n,
                      float *got[2]) {
    float *dg = gpu.ops->alloc(&gpu, (size_t)n * FF * 4),
          *dy = gpu.ops->alloc(&gpu, (size_t)n * DIM * 4);
    for (int step = 0; step < STEPS; step++) {
        gpu.ops->upload(&gpu, dy, y0, (size_t)n * DIM * 4);
        CHECK(gpu.ops->matmul_glu(&gpu, GLU_SILU, &w[0], &w[1], dx, NULL, dg, n));
        CHECK(gpu.ops->matmul_add(&gpu, &w[2], dg, dy, n));
    }
    got[0] = down(dg, (size_t)n * FF), got[1] = down(dy, (size_t)n * DIM);
    gpu.ops->free(&gpu, dg), gpu.ops->free(&gpu, dy);
}

/* A GLU (gate and up of type) and down (down_type) of its output, folded and not. */
static void test_glu_fold(enum ox_dtype type, enum ox_dtype down_type, int n) {
    uint8_t *hw[3];
    struct mat w[3];
    for (int m = 0; m < 3; m++)
        w[m] = m < 2 ? random_weight(type, FF, DIM, &hw[m])
                     : random_weight(down_type, DIM, FF, &hw[m]);
    float *x = random_floats((size_t)n * DIM, 1.0f), *y0 = random_floats((size_t)n * DIM, 1.0f);
    float *dx = up(x, (size_t)n * DIM * 4), *got[2][2];
    bool was = vk_backend_group_folds();
    uint64_t taken = vk_backend_group_folds_taken();
    for (int round = 0; round < 2; round++) {
        vk_backend_set_group_folds(round == 1);
        glu_round(w, dx, y0, n, got[round]);
    }
    vk_backend_set_group_folds(was);
    uint64_t folded = vk_backend_group_folds_taken() - taken;
    CHECK_MSG(n == 1 ? folded >= STEPS - 1 : folded == 0, "%llu of %d GLUs' outputs folded (n=%d)",
              (unsigned long long)folded, STEPS, n);
    CHECK_CLOSE(got[1][0], got[0][0], (size_t)n * FF, 1e-5, "a GLU making its groups (%s, n=%d)",
                ox_dtype_name(type), n);
    float *want = malloc((size_t)n * DIM * 4);
    matmul_ref(down_type, hw[2], DIM, FF, got[0][0], n, want);
    for (size_t i = 0; i < (size_t)n * DIM; i++)
        want[i] += y0[i];
    double folded_err = rel_err(got[1][1], want, (size_t)n * DIM);
    double apart_err = rel_err(got[0][1], want, (size_t)n * DIM);
    CHECK_MSG(folded_err <= 1.1 * apart_err + 1e-6,
              "down of a GLU's groups (%s, down %s, n=%d): error %.3g, apart %.3g",
              ox_dtype_name(type), ox_dtype_name(down_type), n, folded_err, apart_err);
    printf("  GLU's groups: %s, down %s, n=%d\n", ox_dtype_name(type), ox_dtype_name(down_type), n);
    for (int m = 0; m < 3; m++)
        free(hw[m]), gpu.ops->free(&gpu, (void *)w[m].data);
    for (int r = 0; r < 2; r++)
        free(got[r][0]), free(got[r][1]);
    free(want), free(x), free(y0), gpu.ops->free(&gpu, dx);
}

int main(void) {
    int rc = device_open(&backend_vulkan_ops, "Vulkan");
    if (rc)
        return rc;
    if (!vk_backend_dot8()) {
        printf("no integer dot products on this Vulkan device: skipped\n");
        return 77;
    }
    static const enum ox_dtype types[] = {OX_DTYPE_Q4_K, OX_DTYPE_Q6_K, OX_DTYPE_Q8_0,
                                          OX_DTYPE_Q4_0, OX_DTYPE_Q5_K, OX_DTYPE_Q3_K};
    static const int ns[] = {1, 3, 8};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++)
            for (int exact = 0; exact < 2; exact++)
                test_norm_fold(types[i], i % 2 ? OX_DTYPE_Q4_K : OX_DTYPE_Q6_K, ns[j], IN, exact,
                               false);
    for (int exact = 0; exact < 2; exact++) /* the norm's eps counting */
        test_norm_fold(OX_DTYPE_Q4_K, OX_DTYPE_Q6_K, 1, IN, exact, true);
    for (int exact = 0; exact < 2; exact++) /* not folded: the products as they were */
        test_norm_fold(OX_DTYPE_Q4_K, OX_DTYPE_F16, 1, IN, exact, false);
    for (int exact = 0; exact < 2; exact++) /* y += W x too wide: the GLU's groups and z's */
        test_norm_fold(OX_DTYPE_Q4_K, OX_DTYPE_Q6_K, 1, WIDE, exact, false),
            test_norm_fold(OX_DTYPE_Q8_0, OX_DTYPE_Q4_K, 1, WIDE, exact, false);
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++)
            test_glu_fold(types[i], i % 2 ? OX_DTYPE_Q6_K : OX_DTYPE_Q4_K, ns[j]);
    gpu.ops->release(&gpu);
    cpu.ops->release(&cpu);
    return test_finish("test_vulkan_group_fold");
}
