/* test_vulkan_norm_in.c: RMSNorms' weights folded into the f16 matrices after them at load
 * (vk_fold_norm.c) and a decode step's product of one token taking the norm in (matvec.comp's
 * NORM_IN). The folded weights must be f16(w g) bit for bit; q, k and v's products and a GLU of
 * the floats before the norm must match the double products of the folded weights and the normed
 * x to the float sums' error, for one token through the norm taken in (counted) and for 3 through
 * the norm op as before; a weight whose product is past f16's range leaves the matrices as they
 * were. Skipped (77) where there is no Vulkan device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/vulkan/vk_backend.h"
#include "core/fp16.h"
#include "device_ops_common.h"
#include "test.h"

enum { DIM = 2048, FF = 256, MATS = 5, ROUNDS = 3 };
static const int rows_of[MATS] = {256, 64, 64, FF, FF}; /* q, k, v, gate, up */

static uint16_t *random_halves(int rows) {
    uint16_t *h = malloc((size_t)rows * DIM * 2);
    for (size_t i = 0; i < (size_t)rows * DIM; i++)
        h[i] = fp32_to_fp16(frand());
    return h;
}

/* The device copy of an f16 matrix, as a model's weights get one (through the loader). */
static struct mat device_copy(struct backend_weights *bw, const uint16_t *host, int rows) {
    struct backend_tensor t = {OX_DTYPE_F16,          host, rows, DIM, 1, 2, (size_t)DIM * 2,
                               (size_t)rows * DIM * 2};
    const void *copy = NULL;
    CHECK(gpu.ops->prepare_weight(bw, &t, &copy) == OX_OK && copy);
    return (struct mat){OX_DTYPE_F16, copy, rows, DIM, (size_t)DIM * 2, NULL, NULL};
}

/* The norm's weights as the model gives them: a device copy of the floats. */
static const float *norm_weight(struct backend_weights *bw, const float *g) {
    struct backend_tensor t = {OX_DTYPE_F32, g, 1, DIM, 1, 1, (size_t)DIM * 4, (size_t)DIM * 4};
    const void *copy = NULL;
    CHECK(gpu.ops->prepare_weight(bw, &t, &copy) == OX_OK && copy);
    return copy;
}

/* x's RMSNorm (no weights: they are in the matrices) in double, rounded to float. */
static void normed_ref(const float *x, int n, float eps, float *out) {
    for (int t = 0; t < n; t++) {
        double ss = 0.0;
        for (int i = 0; i < DIM; i++)
            ss += (double)x[(size_t)t * DIM + i] * x[(size_t)t * DIM + i];
        double scale = 1.0 / sqrt(ss / DIM + eps);
        for (int i = 0; i < DIM; i++)
            out[(size_t)t * DIM + i] = (float)(x[(size_t)t * DIM + i] * scale);
    }
}

/* ROUNDS rounds of q, k and v's products and the GLU of x through the norm (its weights in the
 * matrices), the last round's outputs into got (q, k, v, GLU). */
static void products(const struct mat w[MATS], const float *dx, float eps, int n, float *got[4]) {
    float *out[4];
    for (int m = 0; m < 4; m++)
        out[m] = gpu.ops->alloc(&gpu, (size_t)n * rows_of[m] * 4);
    const struct norm_in norm = {NULL, eps};
    for (int r = 0; r < ROUNDS; r++) {
        CHECK(gpu.ops->matmul_multi(&gpu, 3, w, dx, &norm, out, n));
        CHECK(gpu.ops->matmul_glu(&gpu, GLU_SILU, &w[3], &w[4], dx, &norm, out[3], n));
    }
    for (int m = 0; m < 4; m++)
        got[m] = down(out[m], (size_t)n * rows_of[m]), gpu.ops->free(&gpu, out[m]);
}

/* The double products of the normed x by the folded weights (hf), q, k, v and the GLU. */
static void products_ref(uint16_t *const hf[MATS], const float *xn, int n, float *want[4]) {
    float *u = malloc((size_t)n * FF * 4);
    for (int m = 0; m < MATS; m++)
        matmul_ref(OX_DTYPE_F16, hf[m], rows_of[m], DIM, xn, n, m < 4 ? want[m] : u);
    for (size_t i = 0; i < (size_t)n * FF; i++) {
        double gv = want[3][i];
        want[3][i] = (float)(gv / (1.0 + exp(-gv)) * u[i]);
    }
    free(u);
}

/* The matrices folded on the device, as the host folds them (f16 of w g, to nearest even). */
static void check_folded(const struct mat w[MATS], uint16_t *const host[MATS], const float *g,
                         uint16_t *folded[MATS]) {
    for (int m = 0; m < MATS; m++) {
        size_t count = (size_t)rows_of[m] * DIM;
        folded[m] = malloc(count * 2);
        for (size_t i = 0; i < count; i++)
            folded[m][i] = fp32_to_fp16(fp16_to_fp32(host[m][i]) * g[i % DIM]);
        uint16_t *dev = malloc(count * 2);
        CHECK(gpu.ops->download(&gpu, dev, w[m].data, count * 2) == OX_OK);
        CHECK_MSG(!memcmp(dev, folded[m], count * 2), "matrix %d folded as f16(w g)", m);
        free(dev);
    }
}

/* scale: x's; tiny: its mean square below eps (which then counts). */
static void test_norm_in(int n, float scale) {
    struct backend_weights bw = {0};
    uint16_t *host[MATS], *folded[MATS];
    struct mat w[MATS];
    for (int m = 0; m < MATS; m++)
        host[m] = random_halves(rows_of[m]), w[m] = device_copy(&bw, host[m], rows_of[m]);
    float *g = random_floats(DIM, 1.5f), *x = random_floats((size_t)n * DIM, scale);
    const float eps = 1e-5f, *dg = norm_weight(&bw, g);
    bool done = false;
    CHECK(gpu.ops->fold_norm(&bw, dg, w, 3, &done) == OX_OK && done);
    CHECK(gpu.ops->fold_norm(&bw, dg, &w[3], 2, &done) == OX_OK && done);
    check_folded(w, host, g, folded);
    float *dx = up(x, (size_t)n * DIM * 4), *got[4], *want[4], *xn = malloc((size_t)n * DIM * 4);
    uint64_t taken = vk_backend_norm_ins_taken();
    products(w, dx, eps, n, got);
    /* two products a round (q, k and v; the GLU), all but the first where the norm's block was
     * made by it (the context's first test) */
    uint64_t took = vk_backend_norm_ins_taken() - taken;
    CHECK_MSG(n == 1 ? took >= 2 * ROUNDS - 1 && took <= 2 * ROUNDS : took == 0,
              "%llu products took the norm in (n=%d)", (unsigned long long)took, n);
    normed_ref(x, n, eps, xn);
    for (int m = 0; m < 4; m++)
        want[m] = malloc((size_t)n * rows_of[m] * 4);
    products_ref(folded, xn, n, want);
    static const char *what[4] = {"q", "k", "v", "the GLU"};
    for (int m = 0; m < 4; m++) { /* n > 1: x rounded to f16 as before */
        CHECK_CLOSE(got[m], want[m], (size_t)n * rows_of[m], n == 1 ? 2e-6 : 2e-3,
                    "%s of the norm taken in (n=%d, x scale %g)", what[m], n, (double)scale);
        free(got[m]), free(want[m]);
    }
    printf("  norm taken in: n=%d, x scale %g\n", n, (double)scale);
    for (int m = 0; m < MATS; m++)
        free(host[m]), free(folded[m]), gpu.ops->release_weight(w[m].data);
    gpu.ops->release_weight(dg), gpu.ops->free(&gpu, dx);
    free(g), free(x), free(xn);
}

/* A norm weight whose product with some weight is past f16's range: nothing folded. */
static void test_overflow(void) {
    struct backend_weights bw = {0};
    uint16_t *host[2] = {random_halves(64), random_halves(64)};
    float *g = random_floats(DIM, 1.0f);
    host[1][5 * DIM + 7] = fp32_to_fp16(-2.0f), g[7] = 40000.0f;
    struct mat w[2] = {device_copy(&bw, host[0], 64), device_copy(&bw, host[1], 64)};
    const float *dg = norm_weight(&bw, g);
    bool done = true;
    CHECK(gpu.ops->fold_norm(&bw, dg, w, 2, &done) == OX_OK);
    CHECK_MSG(!done, "a product past f16's range folded");
    for (int m = 0; m < 2; m++) {
        uint16_t *dev = malloc((size_t)64 * DIM * 2);
        CHECK(gpu.ops->download(&gpu, dev, w[m].data, (size_t)64 * DIM * 2) == OX_OK);
        CHECK_MSG(!memcmp(dev, host[m], (size_t)64 * DIM * 2), "matrix %d changed", m);
        free(dev), free(host[m]), gpu.ops->release_weight(w[m].data);
    }
    gpu.ops->release_weight(dg), free(g);
    printf("  past f16's range: not folded\n");
}

int main(void) {
    int rc = device_open(&backend_vulkan_ops, "Vulkan");
    if (rc)
        return rc;
    if (!vk_backend_norm_in()) {
        printf("norms taken in turned off (OX_VK_NORM_IN=0): skipped\n");
        return 77;
    }
    test_norm_in(1, 2.0f);
    test_norm_in(1, 1e-4f); /* eps counts */
    test_norm_in(3, 2.0f);
    test_overflow();
    gpu.ops->release(&gpu);
    cpu.ops->release(&cpu);
    return test_finish("test_vulkan_norm_in");
}
