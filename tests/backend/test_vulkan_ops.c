/* test_vulkan_ops.c: the Vulkan backend's ops but attention (test_vulkan_attention.c) against
 * the CPU backend's on random inputs (in CI on Mesa's lavapipe, the CPU Vulkan driver; on a GPU
 * where there is one). Skipped (77) where there is no Vulkan device with what the shaders need. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/vulkan/vk_backend.h"
#include "quant/dtype.h"
#include "device_ops_common.h"
#include "test.h"

/* An op on n values of y (from y0) and x, z on both backends; y compared. */
typedef void (*vec_op)(struct backend *b, float *y, const float *x, const float *z, size_t n);

static void compare_vec(const char *name, vec_op op, size_t n, double tol) {
    float *y0 = random_floats(n, 3.0f), *x = random_floats(n, 3.0f), *z = random_floats(n, 3.0f);
    float *want = malloc(n * sizeof *want);
    memcpy(want, y0, n * sizeof *want);
    op(&cpu, want, x, z, n);
    float *dy = up(y0, n * 4), *dx = up(x, n * 4), *dz = up(z, n * 4);
    op(&gpu, dy, dx, dz, n);
    float *got = down(dy, n);
    CHECK_CLOSE(got, want, n, tol, "%s", name);
    printf("  %-22s %8zu values: relative error %.2g\n", name, n, rel_err(got, want, n));
    gpu.ops->free(&gpu, dy), gpu.ops->free(&gpu, dx), gpu.ops->free(&gpu, dz);
    free(y0), free(x), free(z), free(want), free(got);
}

static void op_add(struct backend *b, float *y, const float *x, const float *z, size_t n) {
    (void)z, b->ops->add(b, y, x, n);
}
static void op_scale(struct backend *b, float *y, const float *x, const float *z, size_t n) {
    (void)x, (void)z, b->ops->scale(b, y, 0.37f, n);
}
static void op_zero(struct backend *b, float *y, const float *x, const float *z, size_t n) {
    (void)x, (void)z, b->ops->zero(b, y, n);
}
static void op_axpy(struct backend *b, float *y, const float *x, const float *z, size_t n) {
    (void)z, b->ops->axpy(b, y, x, -1.25f, n);
}
static void op_gelu(struct backend *b, float *y, const float *x, const float *z, size_t n) {
    (void)z, b->ops->gelu(b, x, y, n);
}
static void op_softcap(struct backend *b, float *y, const float *x, const float *z, size_t n) {
    (void)x, (void)z, b->ops->softcap(b, y, 2.5f, n);
}
static enum glu_kind glu_kind_now;
static void op_glu(struct backend *b, float *y, const float *x, const float *z, size_t n) {
    b->ops->glu(b, glu_kind_now, x, z, y, n);
}

static void test_vectors(void) {
    static const size_t sizes[] = {1, 255, 4096, 1000003};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        compare_vec("add", op_add, n, 1e-7);
        compare_vec("scale", op_scale, n, 1e-7);
        compare_vec("zero", op_zero, n, 0.0);
        compare_vec("axpy", op_axpy, n, 1e-6);
        compare_vec("gelu", op_gelu, n, 5e-3); /* the CPU's from an f16 table of x, as ggml's */
        compare_vec("softcap", op_softcap, n, 1e-5);
        static const char *const names[] = {"glu silu", "glu gelu", "glu sigmoid", "glu oai"};
        for (int g = 0; g <= GLU_SWIGLU_OAI; g++) {
            glu_kind_now = (enum glu_kind)g;
            compare_vec(names[g], op_glu, n, g == GLU_GELU ? 5e-3 : 1e-5);
        }
    }
}

/* Row ops over n rows of dim: norms (with and without a weight and bias), softmax, a bias row,
 * a gate per row, rows copied with strides; one_norm: of rows.comp's ops (a workgroup a row,
 * dispatched by the same loop) only the RMSNorm, for many rows: on lavapipe under ASan each took
 * about 49 s of 70000. */
static void test_rows(int n, int dim, bool one_norm) {
    size_t all = (size_t)n * (size_t)dim;
    float *x = random_floats(all, 4.0f), *g = random_floats((size_t)dim, 1.0f),
          *bias = random_floats((size_t)dim, 1.0f), *gate = random_floats((size_t)n, 3.0f);
    float *want = malloc(all * sizeof *want);
    float *dx = up(x, all * 4), *dy = gpu.ops->alloc(&gpu, all * 4), *dg = up(g, (size_t)dim * 4),
          *db = up(bias, (size_t)dim * 4), *dgate = up(gate, (size_t)n * 4);
    for (int k = 0; k < 7; k++) {
        if (one_norm && k >= 1 && k <= 3)
            continue;
        const char *name = "";
        memcpy(want, x, all * sizeof *want);
        gpu.ops->copy_rows(&gpu, dy, (size_t)dim, dx, (size_t)dim, n, dim);
        switch (k) {
        case 0:
            name = "rms_norm", cpu.ops->rms_norm(&cpu, x, g, want, n, dim, 1e-6f);
            gpu.ops->rms_norm(&gpu, dx, dg, dy, n, dim, 1e-6f);
            break;
        case 1:
            name = "rms_norm (no weight)", cpu.ops->rms_norm(&cpu, x, NULL, want, n, dim, 1e-5f);
            gpu.ops->rms_norm(&gpu, dx, NULL, dy, n, dim, 1e-5f);
            break;
        case 2:
            name = "layer_norm", cpu.ops->layer_norm(&cpu, x, g, bias, want, n, dim, 1e-5f);
            gpu.ops->layer_norm(&gpu, dx, dg, db, dy, n, dim, 1e-5f);
            break;
        case 3:
            name = "softmax", cpu.ops->softmax(&cpu, want, n, dim);
            gpu.ops->softmax(&gpu, dy, n, dim);
            break;
        case 4:
            name = "add_row", cpu.ops->add_row(&cpu, want, bias, n, dim);
            gpu.ops->add_row(&gpu, dy, db, n, dim);
            break;
        case 5:
            name = "sigmoid_scale_rows", cpu.ops->sigmoid_scale_rows(&cpu, want, gate, n, dim);
            gpu.ops->sigmoid_scale_rows(&gpu, dy, dgate, n, dim);
            break;
        case 6:
            name = "copy_rows (strided)"; /* the middle half of each row to its first half */
            cpu.ops->copy_rows(&cpu, want, (size_t)dim, x + dim / 4, (size_t)dim, n, dim / 2);
            gpu.ops->copy_rows(&gpu, dy, (size_t)dim, dx + dim / 4, (size_t)dim, n, dim / 2);
            break;
        }
        float *got = down(dy, all);
        CHECK_CLOSE(got, want, all, 2e-6, "%s", name);
        printf("  %-22s %4d x %-6d: relative error %.2g\n", name, n, dim, rel_err(got, want, all));
        free(got);
    }
    gpu.ops->free(&gpu, dx), gpu.ops->free(&gpu, dy), gpu.ops->free(&gpu, dg),
        gpu.ops->free(&gpu, db);
    gpu.ops->free(&gpu, dgate);
    free(x), free(g), free(bias), free(gate), free(want);
}

/* RoPE of n tokens' heads at scattered positions: normal and NeoX pairs, partial rotation,
 * YaRN, frequency factors. */
static void test_rope(bool neox, int n_rot, float ext_factor, bool factors) {
    enum { N = 5, HEADS = 4, HD = 128 };
    int32_t pos[N] = {0, 1, 17, 600, 8191};
    float *ff = factors ? random_floats((size_t)n_rot / 2, 0.5f) : NULL;
    for (int i = 0; ff && i < n_rot / 2; i++)
        ff[i] = 1.0f + fabsf(ff[i]) * 8.0f;
    struct rope_params p = {.n_rot = n_rot,
                            .neox = neox,
                            .freq_base = 500000.0f,
                            .freq_scale = ext_factor != 0.0f ? 0.25f : 1.0f,
                            .ext_factor = ext_factor,
                            .attn_factor = 1.0f,
                            .corr_dims = {10.0f, 40.0f},
                            .freq_factors = ff};
    size_t all = (size_t)N * HEADS * HD;
    float *x = random_floats(all, 2.0f), *want = malloc(all * sizeof *want);
    memcpy(want, x, all * sizeof *want);
    cpu.ops->rope(&cpu, want, pos, N, HEADS, HD, &p);
    float *dx = up(x, all * 4);
    int32_t *dpos = up(pos, sizeof pos);
    float *dff = ff ? up(ff, (size_t)n_rot / 2 * 4) : NULL;
    struct rope_params dp = p;
    dp.freq_factors = dff;
    gpu.ops->rope(&gpu, dx, dpos, N, HEADS, HD, &dp);
    float *got = down(dx, all);
    char name[64];
    snprintf(name, sizeof name, "rope%s n_rot %d%s%s", neox ? " neox" : "", n_rot,
             ext_factor != 0.0f ? " yarn" : "", factors ? " factors" : "");
    CHECK_CLOSE(got, want, all, 2e-5, "%s", name);
    printf("  %-36s relative error %.2g\n", name, rel_err(got, want, all));
    gpu.ops->free(&gpu, dx), gpu.ops->free(&gpu, dpos), gpu.ops->free(&gpu, dff);
    free(x), free(want), free(got), free(ff);
}

/* y = W x and rows of W for f32 and f16 weights, batches of 1 to 9 tokens. */
static void test_matmul(enum ox_dtype type, int rows, int cols, int n) {
    size_t row_bytes = (size_t)cols * ox_dtype_type_size(type);
    float *wf = random_floats((size_t)rows * (size_t)cols, 1.0f);
    uint8_t *w = malloc(row_bytes * (size_t)rows);
    CHECK(ox_quantize(type, wf, w, rows, cols, NULL) == OX_OK);
    struct mat hm = {type, w, rows, cols, row_bytes, NULL, NULL};
    struct mat dm = hm;
    dm.data = up(w, row_bytes * (size_t)rows);
    float *x = random_floats((size_t)n * (size_t)cols, 1.0f);
    float *want = malloc((size_t)n * (size_t)rows * sizeof *want);
    cpu.ops->matmul(&cpu, &hm, x, want, n);
    float *dx = up(x, (size_t)n * (size_t)cols * 4),
          *dy = gpu.ops->alloc(&gpu, (size_t)n * rows * 4);
    gpu.ops->matmul(&gpu, &dm, dx, dy, n);
    float *got = down(dy, (size_t)n * (size_t)rows);
    char name[64];
    snprintf(name, sizeof name, "matmul %s %d x %d, %d tokens", ox_dtype_name(type), rows, cols, n);
    /* both round x to f16 for f16 weights, as ggml does: float sums in another order apart */
    CHECK_CLOSE(got, want, (size_t)n * rows, 1e-5, "%s", name);
    printf("  %-36s relative error %.2g\n", name, rel_err(got, want, (size_t)n * rows));
    int32_t ids[3] = {rows - 1, 0, rows / 2};
    int32_t *dids = up(ids, sizeof ids);
    float *rw = malloc(3 * (size_t)cols * sizeof *rw),
          *drw = gpu.ops->alloc(&gpu, 3 * (size_t)cols * 4);
    cpu.ops->get_rows(&cpu, &hm, ids, rw, 3);
    gpu.ops->get_rows(&gpu, &dm, dids, drw, 3);
    float *grw = down(drw, 3 * (size_t)cols);
    CHECK_MSG(memcmp(grw, rw, 3 * (size_t)cols * sizeof *rw) == 0, "get_rows %s: not the rows",
              ox_dtype_name(type));
    gpu.ops->free(&gpu, (void *)dm.data), gpu.ops->free(&gpu, dx), gpu.ops->free(&gpu, dy);
    gpu.ops->free(&gpu, dids), gpu.ops->free(&gpu, drw);
    free(wf), free(w), free(x), free(want), free(got), free(rw), free(grw);
}

/* KV cache rows stored to scattered cells and loaded back, f32 and f16, free cells skipped. */
static void test_cache(enum ox_dtype type) {
    enum { N = 5, DIM = 256, CELLS = 9 };
    int32_t where[N] = {8, 0, 3, 4, 6}, cell_pos[CELLS] = {1, -1, -1, 2, 3, -1, 4, -1, 0};
    size_t row_bytes = DIM / ox_dtype_block_size(type) * ox_dtype_type_size(type);
    float *x = random_floats(N * DIM, 2.0f);
    uint8_t *host = calloc(CELLS, row_bytes);
    float *want = calloc(CELLS * DIM, sizeof *want);
    cpu.ops->cache_store(&cpu, type, x, N, DIM, host, row_bytes, where);
    cpu.ops->cache_load(&cpu, type, host, row_bytes, want, CELLS, DIM, cell_pos);
    uint8_t *dcache = up(host, CELLS * row_bytes); /* the same zeros in the rows not stored */
    gpu.ops->zero(&gpu, (float *)dcache, CELLS * row_bytes / 4);
    float *dx = up(x, N * DIM * 4), *dy = up(want, CELLS * DIM * 4); /* free cells' rows kept */
    int32_t *dwhere = up(where, sizeof where), *dpos = up(cell_pos, sizeof cell_pos);
    gpu.ops->cache_store(&gpu, type, dx, N, DIM, dcache, row_bytes, dwhere);
    gpu.ops->cache_load(&gpu, type, dcache, row_bytes, dy, CELLS, DIM, dpos);
    float *got = down(dy, CELLS * DIM);
    char name[48];
    snprintf(name, sizeof name, "cache store and load %s", ox_dtype_name(type));
    CHECK_CLOSE(got, want, CELLS * DIM, 0.0, "%s", name);
    printf("  %-36s relative error %.2g\n", name, rel_err(got, want, CELLS * DIM));
    gpu.ops->free(&gpu, dcache), gpu.ops->free(&gpu, dx), gpu.ops->free(&gpu, dy);
    gpu.ops->free(&gpu, dwhere), gpu.ops->free(&gpu, dpos);
    free(x), free(host), free(want), free(got);
}

/* rope_store (RoPE of q and k, k and v into the cache's rows, one op) against the CPU's rope and
 * cache_store one at a time: partial rotation, NeoX pairs, f32 and f16 rows; q8_0 rows are
 * declined (the caller's ops then). */
static void test_rope_store(enum ox_dtype type, int n_rot, bool neox) {
    enum { N = 3, HEADS = 4, KV = 2, HD_K = 64, HD_V = 48, CELLS = 8 };
    int32_t pos[N] = {0, 9, 700}, cells[N] = {5, 1, 7};
    struct rope_params rp = {.n_rot = n_rot,
                             .neox = neox,
                             .freq_base = 10000.0f,
                             .freq_scale = 1.0f,
                             .attn_factor = 1.0f};
    size_t nq = (size_t)N * HEADS * HD_K, nk = (size_t)N * KV * HD_K, nv = (size_t)N * KV * HD_V;
    size_t k_row = KV * HD_K * ox_dtype_type_size(type) / ox_dtype_block_size(type);
    size_t v_row = KV * HD_V * ox_dtype_type_size(type) / ox_dtype_block_size(type);
    float *q = random_floats(nq, 2.0f), *k = random_floats(nk, 2.0f), *v = random_floats(nv, 2.0f);
    uint8_t *kc = calloc(CELLS, k_row), *vc = calloc(CELLS, v_row);
    struct rope_store_args d = {up(q, nq * 4),
                                up(k, nk * 4),
                                up(v, nv * 4),
                                up(pos, sizeof pos),
                                N,
                                HEADS,
                                KV,
                                HD_K,
                                HD_V,
                                &rp,
                                type,
                                up(kc, CELLS * k_row),
                                up(vc, CELLS * v_row),
                                k_row,
                                v_row,
                                up(cells, sizeof cells)};
    bool took = gpu.ops->rope_store(&gpu, &d);
    CHECK_MSG(took == (type != OX_DTYPE_Q8_0), "rope_store %s taken: %d", ox_dtype_name(type),
              took);
    if (took) {
        cpu.ops->rope(&cpu, q, pos, N, HEADS, HD_K, &rp),
            cpu.ops->rope(&cpu, k, pos, N, KV, HD_K, &rp);
        cpu.ops->cache_store(&cpu, type, k, N, KV * HD_K, kc, k_row, cells);
        cpu.ops->cache_store(&cpu, type, v, N, KV * HD_V, vc, v_row, cells);
        float *gq = down(d.q, nq), *gk = down(d.k, nk);
        uint8_t *gkc = malloc(CELLS * k_row), *gvc = malloc(CELLS * v_row);
        CHECK(gpu.ops->download(&gpu, gkc, d.k_cache, CELLS * k_row) == OX_OK);
        CHECK(gpu.ops->download(&gpu, gvc, d.v_cache, CELLS * v_row) == OX_OK);
        char name[64];
        snprintf(name, sizeof name, "rope_store %s n_rot %d%s", ox_dtype_name(type), n_rot,
                 neox ? " neox" : "");
        CHECK_CLOSE(gq, q, nq, 2e-5, "%s q", name);
        CHECK_CLOSE(gk, k, nk, 2e-5, "%s k", name);
        /* the rotated k rows: an ulp apart in float can round to f16 either way */
        int32_t all[CELLS] = {0};
        float *want_k = malloc(CELLS * KV * HD_K * 4), *got_k = malloc(CELLS * KV * HD_K * 4);
        cpu.ops->cache_load(&cpu, type, kc, k_row, want_k, CELLS, KV * HD_K, all);
        cpu.ops->cache_load(&cpu, type, gkc, k_row, got_k, CELLS, KV * HD_K, all);
        CHECK_CLOSE(got_k, want_k, CELLS * KV * HD_K, 1e-3, "%s k rows", name);
        free(want_k), free(got_k);
        CHECK_MSG(memcmp(gvc, vc, CELLS * v_row) == 0, "%s v rows", name);
        printf("  %-36s relative error %.2g\n", name, rel_err(gk, k, nk));
        free(gq), free(gk), free(gkc), free(gvc);
    }
    const void *dev[] = {d.q, d.k, d.v, d.pos, d.k_cache, d.v_cache, d.cells};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        gpu.ops->free(&gpu, (void *)dev[i]);
    free(q), free(k), free(v), free(kc), free(vc);
}

/* Whether n tokens' products with this weight type take integer dot products (matvec.comp's
 * X_Q8): x made int8 first. */
static bool on_dot8(enum ox_dtype type, int n) {
    return n <= 8 && vk_backend_dot8() && vk_backend_q8_type(type);
}

/* Each group of 32 of x with its scale d = max|x| / 127 and reciprocal, as quantize_q8.comp
 * computes them. */
static void group_scale(const float *v, float *d, float *id) {
    float amax = 0.0f;
    for (int i = 0; i < 32; i++)
        amax = fmaxf(amax, fabsf(v[i]));
    *d = amax / 127.0f, *id = *d != 0.0f ? 1.0f / *d : 0.0f;
}

/* x's values moved off the rounding ties of quantize_q8.comp (|x| / d within 1e-3 of a half):
 * Vulkan lets the device's division be 2.5 ulp off, so near a tie its level could differ from
 * the host's. The largest of a group is 127 levels, never near one, so d stays. */
static void clear_of_ties(float *x, size_t count) {
    for (size_t g = 0; g < count / 32; g++) {
        float *v = x + 32 * g, d, id;
        group_scale(v, &d, &id);
        for (int i = 0; i < 32; i++)
            while (fabsf(fabsf(v[i]) * id - floorf(fabsf(v[i]) * id) - 0.5f) < 1e-3f)
                v[i] *= 0.99f;
    }
}

/* x rounded as the shaders round it for n tokens' products with a weight type: to int8 levels
 * times their group's scale on the integer path, to f16 or bf16 for those weights (as ggml's
 * CPU does), as it is for the others. */
static void round_like_weights(enum ox_dtype type, int n, float *x, size_t count) {
    if (on_dot8(type, n)) {
        for (size_t g = 0; g < count / 32; g++) {
            float *v = x + 32 * g, d, id;
            group_scale(v, &d, &id);
            for (int i = 0; i < 32; i++)
                v[i] = copysignf(floorf(fabsf(v[i]) * id + 0.5f), v[i]) * d;
        }
        return;
    }
    if (type != OX_DTYPE_BF16 && type != OX_DTYPE_F16)
        return;
    uint16_t *h = malloc(count * 2);
    CHECK(ox_quantize(type, x, h, 1, (int64_t)count, NULL) == OX_OK);
    CHECK(ox_dequantize(type, h, x, (int64_t)count) == OX_OK);
    free(h);
}

/* Whether the tiled product of n tokens takes weights and activations as f16: on cooperative
 * matrices (gemm_cm.comp, gemm_cm2.comp), or with quantized weights made f16 first (from
 * vk_backend_dequant_tokens' tokens), whose f16 product rounds x to f16 on every path. */
static bool on_coopmat(enum ox_dtype type, int n) {
    bool quantized = type != OX_DTYPE_F32 && type != OX_DTYPE_F16 && type != OX_DTYPE_BF16;
    uint32_t from = vk_backend_dequant_tokens();
    return n > 8 && type != OX_DTYPE_F32 && type != OX_DTYPE_BF16 &&
           (vk_backend_coopmat() || (quantized && from && (uint32_t)n >= from));
}

/* matmul_ref for the cooperative-matrix product: the dequantized rows and x rounded to f16 first
 * (to nearest, as the shader's conversions). */
static void matmul_ref_f16(enum ox_dtype type, const void *w, int rows, int cols, const float *x,
                           int n, float *y) {
    size_t row_bytes = (size_t)cols / ox_dtype_block_size(type) * ox_dtype_type_size(type);
    float *wf = malloc((size_t)rows * cols * 4), *xf = malloc((size_t)n * cols * 4);
    uint16_t *f16 = malloc((size_t)rows * cols * 2);
    for (int r = 0; r < rows; r++)
        ox_dequantize(type, (const uint8_t *)w + (size_t)r * row_bytes, wf + (size_t)r * cols,
                      cols);
    CHECK(ox_quantize(OX_DTYPE_F16, wf, f16, rows, cols, NULL) == OX_OK);
    memcpy(xf, x, (size_t)n * cols * 4);
    round_like_weights(OX_DTYPE_F16, n, xf, (size_t)n * cols);
    matmul_ref(OX_DTYPE_F16, f16, rows, cols, xf, n, y);
    free(wf), free(xf), free(f16);
}

/* The product the device computes, in double: matmul_ref, or matmul_ref_f16 on coopmat. */
static void device_ref(enum ox_dtype type, const void *w, int rows, int cols, const float *x, int n,
                       float *y) {
    (on_coopmat(type, n) ? matmul_ref_f16 : matmul_ref)(type, w, rows, cols, x, n, y);
}

/* A weight type's products against the double product of its dequantized rows, for each batch
 * size in ns (0 ends it: up to 8 take the matrix-vector shader, more the tiled one), and its row
 * lookups against the CPU's dequantization, bit for bit. */
static void test_weight_type(enum ox_dtype type, int rows, int cols, const int *ns) {
    size_t row_bytes = (size_t)cols / ox_dtype_block_size(type) * ox_dtype_type_size(type);
    float *wf = random_floats((size_t)rows * cols, 1.0f);
    uint8_t *w = malloc(row_bytes * rows);
    CHECK(ox_quantize(type, wf, w, rows, cols, NULL) == OX_OK);
    struct mat m = {type, up(w, row_bytes * rows), rows, cols, row_bytes, NULL, NULL};
    double worst = 0.0;
    for (size_t k = 0; ns[k]; k++) {
        int n = ns[k];
        float *x = random_floats((size_t)n * cols, 1.0f), *want = malloc((size_t)n * rows * 4);
        clear_of_ties(x, (size_t)n * cols);
        float *dx = up(x, (size_t)n * cols * 4), *dy = gpu.ops->alloc(&gpu, (size_t)n * rows * 4);
        round_like_weights(type, n, x, (size_t)n * cols);
        device_ref(type, w, rows, cols, x, n, want);
        gpu.ops->matmul(&gpu, &m, dx, dy, n);
        float *got = down(dy, (size_t)n * rows);
        CHECK_CLOSE(got, want, (size_t)n * rows, 2e-5, "matmul %s %d x %d, n=%d",
                    ox_dtype_name(type), rows, cols, n);
        double e = rel_err(got, want, (size_t)n * rows);
        worst = e > worst ? e : worst;
        free(x), free(want), free(got);
        gpu.ops->free(&gpu, dx), gpu.ops->free(&gpu, dy);
    }
    check_get_rows(&m, w);
    printf("  matmul %-8s %4d x %4d: relative error %.2g\n", ox_dtype_name(type), rows, cols,
           worst);
    free(wf), free(w);
    gpu.ops->free(&gpu, (void *)m.data);
}

/* Every weight type the backend takes that can be quantized here without an importance matrix:
 * a few rows, then rows of many groups, then tiles of rows and tokens cut at both ends. */
static void test_weight_types(void) {
    static const int all[] = {1, 3, 8, 9, 70, 0}, one[] = {1, 2, 0}, wide[] = {130, 0};
    int tested = 0;
    for (int t = 0; t < 64; t++) {
        enum ox_dtype type = (enum ox_dtype)t;
        if (!ox_dtype_valid(t) || !gpu.ops->supports(BACKEND_OP_MATMUL, type))
            continue;
        bool float_type = t == OX_DTYPE_F32 || t == OX_DTYPE_F16 || t == OX_DTYPE_BF16;
        if (!float_type && (!ox_dtype_can_quantize(type) || ox_dtype_needs_imatrix(type)))
            continue;
        test_weight_type(type, 67, 512, all);
        test_weight_type(type, 37, 4608, one);
        test_weight_type(type, 150, 256, wide);
        static const int tail[] = {1, 20, 0}; /* 7 groups: the tiled product's last step half */
        if (ox_dtype_block_size(type) <= 32)
            test_weight_type(type, 45, 224, tail);
        tested++;
    }
    CHECK_MSG(tested >= 20, "only %d weight types tested", tested);
    printf("matmul and get_rows: %d weight types\n", tested);
}

static void test_fusions(enum ox_dtype type, int n, const int rows[3]);
static void test_fusions_over(enum ox_dtype type, int n, const int rows[3], int cols);
static void test_prompt_copies(enum ox_dtype type);

/* Where gemm_cm2.comp runs (f16, q4_K and q6_K weights): products large enough for f16's tiles
 * of 128 x 256 (their loop's trip 8 steps of 64 columns at 4096 columns, 3 at 2112: cm2_unroll),
 * q4_K's and q6_K's of 64 x 256 (33 x 5, over one superblock a row and over four) and each
 * type's of 64 x 64, with tiles inside the matrices
 * (its loads without bounds checks: the smaller shapes above have none) and at their edges, and
 * y += W x on each kind of tile; and the few-row products that go to gemm_cm.comp instead (of
 * fewer tokens than the device makes weights f16 for: test_dequant_products). */
/* A prompt's products of one x by up to three matrices through matmul_multi (gate and up; q, k
 * and v): runs of one type in one gemm_cm2.comp dispatch (their tiles in one grid, each after the
 * one before's, the tile chosen for all their rows), each product as the CPU's and as the same
 * product alone (to 1e-6); matrices of two widths are refused. */
static void test_coopmat2_multi(int count, const enum ox_dtype types[3], const int rows[3],
                                int cols, int n) {
    uint8_t *hw[3];
    struct mat dw[3];
    float *dy[3], *x = random_floats((size_t)n * cols, 1.0f);
    for (int m = 0; m < count; m++) {
        dw[m] = random_weight(types[m], rows[m], cols, &hw[m]);
        dy[m] = gpu.ops->alloc(&gpu, (size_t)n * rows[m] * 4);
    }
    clear_of_ties(x, (size_t)n * cols);
    float *dx = up(x, (size_t)n * cols * 4);
    round_like_weights(types[0], n, x, (size_t)n * cols); /* f16 or not alike for all */
    CHECK_MSG(gpu.ops->matmul_multi(&gpu, count, dw, dx, NULL, dy, n), "%d products refused",
              count);
    for (int m = 0; m < count; m++) {
        float *want = malloc((size_t)n * rows[m] * 4),
              *alone = gpu.ops->alloc(&gpu, (size_t)n * rows[m] * 4);
        device_ref(types[m], hw[m], rows[m], cols, x, n, want);
        gpu.ops->matmul(&gpu, &dw[m], dx, alone, n);
        float *got = down(dy[m], (size_t)n * rows[m]), *one = down(alone, (size_t)n * rows[m]);
        CHECK_CLOSE(got, want, (size_t)n * rows[m], 2e-5, "multi %s %d x %d matrix %d n=%d",
                    ox_dtype_name(types[m]), rows[m], cols, m, n);
        /* alone it may take another tile (cm2_takes chooses for all the rows) */
        CHECK_CLOSE(got, one, (size_t)n * rows[m], 1e-6, "multi %s matrix %d against alone",
                    ox_dtype_name(types[m]), m);
        free(got), free(one), free(want), gpu.ops->free(&gpu, alone);
    }
    dw[1].n_cols /= 2; /* two widths: not one dispatch */
    CHECK(!gpu.ops->matmul_multi(&gpu, count, dw, dx, NULL, dy, n));
    printf("  prompt products %-6s %-6s %d, rows %d %d, n=%d\n", ox_dtype_name(types[0]),
           ox_dtype_name(types[count - 1]), count, rows[0], rows[count - 1], n);
    for (int m = 0; m < count; m++)
        free(hw[m]), gpu.ops->free(&gpu, (void *)dw[m].data), gpu.ops->free(&gpu, dy[m]);
    free(x), gpu.ops->free(&gpu, dx);
}

static void test_coopmat2_tiles(void) {
    if (!vk_backend_coopmat2()) {
        printf("workgroup matrices: none on this device\n");
        return;
    }
    static const enum ox_dtype types[] = {OX_DTYPE_F16, OX_DTYPE_Q4_K, OX_DTYPE_Q6_K};
    static const int big[] = {1100, 0}, small[] = {130, 0}, rows[3] = {200, 64, 64};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        test_weight_type(types[i], 2112, 256, big);
        test_weight_type(types[i], 200, 512, small);
        test_fusions(types[i], 130, rows);
    }
    test_weight_type(OX_DTYPE_Q4_K, 2112, 1024, big); /* four superblocks a row */
    test_weight_type(OX_DTYPE_Q6_K, 2112, 1024, big);
    static const int pair[3] = {2112, 2112, 0}, qkv[3] = {200, 64, 67}, wide[3] = {600, 600, 0};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) { /* large tiles, then 64 x 64 */
        const enum ox_dtype three[3] = {types[i], types[i], types[i]};
        test_coopmat2_multi(2, three, pair, 512, 1100),
            test_coopmat2_multi(3, three, qkv, 512, 130);
    }
    static const enum ox_dtype mixed[3] = {OX_DTYPE_Q4_K, OX_DTYPE_Q4_K, OX_DTYPE_Q6_K};
    test_coopmat2_multi(3, mixed, qkv, 512, 300); /* q and k in one, v apart */
    test_coopmat2_multi(2, mixed, wide, 1024, 300);
    /* f16 products whose 128 x 256 tiles are too few, cut into column slices (vk_matmul.c's
     * cm2_slices): inside the matrices (1024 x 4096 of 512 tokens: 8 slices), at the row and
     * token edges (600 x 2112 of 300: 3, as its 33 steps of 64 columns divide), added to y, and
     * for q, k and v in one dispatch (each its own slab of sums) */
    uint64_t cuts = vk_backend_cm2_cuts_taken();
    static const int cut_n[] = {512, 0}, edge_n[] = {300, 0}, cut_rows[3] = {600, 64, 64};
    test_weight_type(OX_DTYPE_F16, 1024, 4096, cut_n);
    test_weight_type(OX_DTYPE_F16, 600, 2112, edge_n);
    test_fusions_over(OX_DTYPE_F16, 300, cut_rows, 2112); /* y += W x, then q, k and v */
    static const enum ox_dtype f16x3[3] = {OX_DTYPE_F16, OX_DTYPE_F16, OX_DTYPE_F16};
    static const int qkv_cut[3] = {512, 128, 132};
    test_coopmat2_multi(3, f16x3, qkv_cut, 1024, 300); /* 2 slices of 512 for all three */
    cuts = vk_backend_cm2_cuts_taken() - cuts;
    const char *off = getenv("OX_VK_CM2_SLICES");
    int expect = off && !strcmp(off, "0") ? 0 : 8; /* 1, 1, 2, then 4 (the three alone too) */
    CHECK_MSG(cuts == (uint64_t)expect, "f16 products cut into slices: %llu of %d",
              (unsigned long long)cuts, expect);
    /* 32 x 256 tiles: where 64 x 256 makes fewer than 128 (alone, and for q, k and v together,
     * whose k alone would take 64 x 64), cut at the row and token edges */
    static const int mid[] = {300, 0}, qkv_mid[3] = {2100, 512, 520};
    test_weight_type(OX_DTYPE_Q4_K, 2100, 512, mid);
    test_weight_type(OX_DTYPE_Q6_K, 2100, 512, mid);
    test_coopmat2_multi(3, mixed, qkv_mid, 512, 300);
    static const enum ox_dtype q4k3[3] = {OX_DTYPE_Q4_K, OX_DTYPE_Q4_K, OX_DTYPE_Q4_K};
    test_coopmat2_multi(3, q4k3, qkv_mid, 512, 300);
    /* quantized products of 64 x 64 tiles, 1024 rows or fewer of 4096 columns: on gemm_cm.comp
     * instead, inside the matrices and at their edges, and added to y */
    static const int kv_rows[3] = {1024, 64, 64};
    for (size_t i = 1; i < sizeof types / sizeof *types; i++) {
        test_weight_type(types[i], 1000, 4096, small);
        test_fusions_over(types[i], 128, kv_rows, 4096);
    }
}

/* Products of quantized weights made f16 first (dequant_f16.comp), then multiplied as f16 weights
 * are (gemm_cm2.comp, gemm_cm.comp or gemm.comp): from 9 tokens every quantized product that no
 * gemm_cm2.comp tiles of its type take (on a device without them: every one), in tiles cut at
 * both ends, products added to y; then the device's own choice of when (none, or long prompts:
 * 1100 tokens over 8 groups a row and over four superblocks, and 300 tokens of 1000 rows of q4_K
 * and q6_K, an 8B's k and v). */
static void test_dequant_products(void) {
    uint32_t dequant_from = vk_backend_dequant_tokens();
    vk_backend_set_dequant_tokens(9);
    static const int ns[] = {9, 70, 0}, wide[] = {130, 0}, rows[3] = {200, 64, 64},
                     big[] = {1100, 0};
    int tested = 0;
    for (int t = 0; t < 64; t++) {
        enum ox_dtype type = (enum ox_dtype)t;
        if (!ox_dtype_valid(t) || !gpu.ops->supports(BACKEND_OP_MATMUL, type) ||
            t == OX_DTYPE_F32 || t == OX_DTYPE_F16 || t == OX_DTYPE_BF16 ||
            !ox_dtype_can_quantize(type) || ox_dtype_needs_imatrix(type))
            continue;
        test_weight_type(type, 67, 512, ns);
        test_weight_type(type, 150, 256, wide);
        tested++;
    }
    CHECK_MSG(tested >= 17, "only %d quantized types made f16", tested);
    test_fusions(OX_DTYPE_Q5_K, 20, rows), test_fusions(OX_DTYPE_Q8_0, 20, rows);
    test_prompt_copies(OX_DTYPE_Q8_0);
    vk_backend_set_dequant_tokens(dequant_from);
    if (dequant_from) { /* and q4_K's and q6_K's that their own tiles do not take (k, v) */
        static const int kv[] = {300, 0};
        test_weight_type(OX_DTYPE_Q8_0, 2112, 256, big);
        test_weight_type(OX_DTYPE_Q5_K, 2112, 1024, big);
        test_weight_type(OX_DTYPE_Q4_K, 1000, 4096, kv);
        test_weight_type(OX_DTYPE_Q6_K, 1000, 4096, kv);
    }
    printf("weights made f16 first: %d quantized types\n", tested);
}

/* Decode steps of many sequences (32 tokens) through products of few 64 x 64 tiles: where the
 * device has gemm_cm.comp, cut into column slices whose sums split_sum.comp adds (32 tiles of
 * 8192 columns: 4 slices; 8 of 2048 added to y: 8 slices); gemm.comp's whole products elsewhere. */
static void test_decode_batch_products(void) {
    static const int n32[] = {32, 0}, kv_rows[3] = {512, 64, 64};
    static const enum ox_dtype types[] = {OX_DTYPE_Q4_K, OX_DTYPE_Q6_K};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        test_weight_type(types[i], 2048, 8192, n32);
        test_fusions_over(types[i], 32, kv_rows, 2048);
    }
}

/* Three products of one x back to back (q, k and v; the types of a mixed file), nothing read
 * back between them, then the same buffer rewritten (the next layer's x in it) and again: what
 * the device keeps of x between products (its int8 bytes or its halves, in one scratch buffer)
 * must follow it, and one form must never be taken for the other. */
static void test_shared_x(const enum ox_dtype types[3], int n) {
    enum { ROWS = 192, COLS = 512 };
    uint8_t *w[3];
    struct mat m[3];
    float *dy[3], *want = malloc((size_t)n * ROWS * 4);
    for (int i = 0; i < 3; i++) {
        m[i] = random_weight(types[i], ROWS, COLS, &w[i]);
        dy[i] = gpu.ops->alloc(&gpu, (size_t)ROWS * n * 4);
    }
    float *dx = gpu.ops->alloc(&gpu, (size_t)n * COLS * 4);
    for (int round = 0; round < 2; round++) {
        float *x = random_floats((size_t)n * COLS, 1.0f);
        clear_of_ties(x, (size_t)n * COLS);
        gpu.ops->upload(&gpu, dx, x, (size_t)n * COLS * 4);
        for (int i = 0; i < 3; i++)
            gpu.ops->matmul(&gpu, &m[i], dx, dy[i], n);
        for (int i = 0; i < 3; i++) {
            float *xr = malloc((size_t)n * COLS * 4);
            memcpy(xr, x, (size_t)n * COLS * 4);
            round_like_weights(types[i], n, xr, (size_t)n * COLS);
            device_ref(types[i], w[i], ROWS, COLS, xr, n, want);
            float *got = down(dy[i], (size_t)n * ROWS);
            CHECK_CLOSE(got, want, (size_t)n * ROWS, 2e-5, "one x, round %d, product %d (%s), n=%d",
                        round, i, ox_dtype_name(types[i]), n);
            free(got), free(xr);
        }
        free(x);
    }
    printf("  one x through three products, then rewritten: %s %s %s, n=%d\n",
           ox_dtype_name(types[0]), ox_dtype_name(types[1]), ox_dtype_name(types[2]), n);
    for (int i = 0; i < 3; i++)
        gpu.ops->free(&gpu, (void *)m[i].data), gpu.ops->free(&gpu, dy[i]), free(w[i]);
    gpu.ops->free(&gpu, dx), free(want);
}

/* The fused products against the CPU's ops one at a time: y += W x (decode and prompt shapes),
 * q, k and v in one dispatch (rows of the three in one grid, a pair of rows across two), and the
 * four GLUs of gate and up (as many rows as rows[0]). */
static void test_fusions_over(enum ox_dtype type, int n, const int rows[3], int cols) {
    uint8_t *hw[3];
    struct mat dw[3];
    for (int m = 0; m < 3; m++) {
        dw[m] = random_weight(type, rows[m], cols, &hw[m]);
    }
    float *x = random_floats((size_t)n * cols, 1.0f);
    clear_of_ties(x, (size_t)n * cols);
    float *dx = up(x, (size_t)n * cols * 4);
    round_like_weights(type, n, x, (size_t)n * cols); /* for the reference */
    float *want[3], *dy[3];
    for (int m = 0; m < 3; m++) {
        want[m] = random_floats((size_t)n * rows[m], 1.0f); /* y += W x adds to these */
        dy[m] = up(want[m], (size_t)n * rows[m] * 4);
    }
    float *tmp = malloc((size_t)n * rows[0] * 4);
    device_ref(type, hw[0], rows[0], cols, x, n, tmp);
    for (size_t i = 0; i < (size_t)n * rows[0]; i++)
        want[0][i] += tmp[i];
    CHECK(gpu.ops->matmul_add(&gpu, &dw[0], dx, dy[0], n));
    float *got = down(dy[0], (size_t)n * rows[0]);
    CHECK_CLOSE(got, want[0], (size_t)n * rows[0], 1e-4, "matmul_add %s n=%d", ox_dtype_name(type),
                n);
    free(got);
    /* decode's one dispatch, or a prompt's on gemm_cm2.comp's tiles (test_coopmat2_multi) */
    bool multi = gpu.ops->matmul_multi(&gpu, 3, dw, dx, NULL, dy, n);
    for (int m = 0; multi && m < 3; m++) {
        device_ref(type, hw[m], rows[m], cols, x, n, want[m]);
        got = down(dy[m], (size_t)n * rows[m]);
        CHECK_CLOSE(got, want[m], (size_t)n * rows[m], 1e-4, "matmul_multi %s matrix %d n=%d",
                    ox_dtype_name(type), m, n);
        free(got);
    }
    if (multi && n <= 8) {                                    /* the GLU's fusion: decode's alone */
        free(hw[1]), gpu.ops->free(&gpu, (void *)dw[1].data); /* up: as many rows as the gate */
        struct mat up_w = dw[1] = random_weight(type, rows[0], cols, &hw[1]);
        float *gate = malloc((size_t)n * rows[0] * 4), *upv = malloc((size_t)n * rows[0] * 4);
        matmul_ref(type, hw[0], rows[0], cols, x, n, gate);
        matmul_ref(type, hw[1], rows[0], cols, x, n, upv);
        for (int kind = GLU_SILU; kind <= GLU_SWIGLU_OAI; kind++) {
            cpu.ops->glu(&cpu, (enum glu_kind)kind, gate, upv, tmp, (size_t)n * rows[0]);
            CHECK(
                gpu.ops->matmul_glu(&gpu, (enum glu_kind)kind, &dw[0], &up_w, dx, NULL, dy[0], n));
            got = down(dy[0], (size_t)n * rows[0]);
            /* the CPU's GELU is ggml's f16 table: 5e-3, as the GELU op's own test */
            CHECK_CLOSE(got, tmp, (size_t)n * rows[0], kind == GLU_GELU ? 5e-3 : 1e-4,
                        "matmul_glu %s kind %d n=%d", ox_dtype_name(type), kind, n);
            free(got);
        }
        free(gate), free(upv);
    }
    printf("  fusions %-8s n=%d, rows %d %d %d\n", ox_dtype_name(type), n, rows[0], rows[1],
           rows[2]);
    for (int m = 0; m < 3; m++)
        free(hw[m]), free(want[m]), gpu.ops->free(&gpu, (void *)dw[m].data),
            gpu.ops->free(&gpu, dy[m]);
    free(x), free(tmp), gpu.ops->free(&gpu, dx);
}

/* test_fusions_over with 512 columns. */
static void test_fusions(enum ox_dtype type, int n, const int rows[3]) {
    test_fusions_over(type, n, rows, 512);
}

/* q, k and v (of two types: q4_K, q4_K, q6_K, as Q4_K_M files have them; or f16) and a GLU
 * with the RMSNorm given to the op: the same as the device's norm then the op (the norm writes
 * the integer form's bytes, or f16 weights' halves, in the op; else the op declines and the
 * caller norms), and q, k and v one at a time (the integer form makes x bytes once for the three)
 * as the double product. */
static void test_norm_fusions(int n, const enum ox_dtype types[3]) {
    const int cols = 512, rows[3] = {96, 32, 32};
    uint8_t *hw[3];
    struct mat dw[3];
    float *dy[3], *dz[3];
    for (int m = 0; m < 3; m++) {
        dw[m] = random_weight(types[m], rows[m], cols, &hw[m]);
        dy[m] = gpu.ops->alloc(&gpu, (size_t)n * rows[m] * 4);
        dz[m] = gpu.ops->alloc(&gpu, (size_t)n * rows[m] * 4);
    }
    float *x = random_floats((size_t)n * cols, 1.0f), *g = random_floats(cols, 1.0f);
    clear_of_ties(x, (size_t)n * cols);
    float *dx = up(x, (size_t)n * cols * 4), *dxn = gpu.ops->alloc(&gpu, (size_t)n * cols * 4);
    const struct norm_in norm = {up(g, cols * 4), 1e-6f};
    if (!gpu.ops->matmul_multi(&gpu, 3, dw, dx, &norm, dy, n)) {
        gpu.ops->rms_norm(&gpu, dx, norm.w, dxn, n, cols, norm.eps);
        CHECK(gpu.ops->matmul_multi(&gpu, 3, dw, dxn, NULL, dy, n) || types[2] != types[0]);
    }
    gpu.ops->rms_norm(&gpu, dx, norm.w, dxn, n, cols, norm.eps);
    if (gpu.ops->matmul_multi(&gpu, 3, dw, dxn, NULL, dz, n))
        for (int m = 0; m < 3; m++) {
            float *got = down(dy[m], (size_t)n * rows[m]), *want = down(dz[m], (size_t)n * rows[m]);
            CHECK_CLOSE(got, want, (size_t)n * rows[m], 1e-6, "matmul_multi with its norm %d", m);
            free(got), free(want);
        }
    for (int m = 0; m < 3; m++) { /* one at a time, from x itself */
        float *want = malloc((size_t)n * rows[m] * 4), *xr = malloc((size_t)n * cols * 4);
        memcpy(xr, x, (size_t)n * cols * 4);
        round_like_weights(types[m], n, xr, (size_t)n * cols);
        matmul_ref(types[m], hw[m], rows[m], cols, xr, n, want);
        gpu.ops->matmul(&gpu, &dw[m], dx, dz[m], n);
        float *got = down(dz[m], (size_t)n * rows[m]);
        CHECK_CLOSE(got, want, (size_t)n * rows[m], 2e-5, "matmul %d of q, k, v n=%d", m, n);
        free(got), free(want), free(xr);
    }
    free(hw[1]), gpu.ops->free(&gpu, (void *)dw[1].data); /* up: the gate's shape and type */
    dw[1] = random_weight(types[0], rows[0], cols, &hw[1]);
    if (gpu.ops->matmul_glu(&gpu, GLU_SILU, &dw[0], &dw[1], dx, &norm, dy[0], n)) {
        CHECK(gpu.ops->matmul_glu(&gpu, GLU_SILU, &dw[0], &dw[1], dxn, NULL, dz[0], n));
        float *got = down(dy[0], (size_t)n * rows[0]), *want = down(dz[0], (size_t)n * rows[0]);
        CHECK_CLOSE(got, want, (size_t)n * rows[0], 1e-6, "matmul_glu with its norm n=%d", n);
        free(got), free(want);
    }
    printf("  norm fusions %s %s %s n=%d\n", ox_dtype_name(types[0]), ox_dtype_name(types[1]),
           ox_dtype_name(types[2]), n);
    for (int m = 0; m < 3; m++)
        free(hw[m]), gpu.ops->free(&gpu, (void *)dw[m].data), gpu.ops->free(&gpu, dy[m]),
            gpu.ops->free(&gpu, dz[m]);
    gpu.ops->free(&gpu, dx), gpu.ops->free(&gpu, dxn), gpu.ops->free(&gpu, (void *)norm.w);
    free(x), free(g);
}

/* A prompt's RMSNorm, two products of its output, their GLU and a product of that (40 tokens:
 * the tiled products). Where the device has cooperative matrices, the norm and the GLU also
 * write the f16 copy the products after them read (vk_halves_target): each product must be that
 * of the f32 output the op left. */
static void test_prompt_copies(enum ox_dtype type) {
    enum { N = 40, COLS = 512 };
    uint8_t *hw[3];
    struct mat dw[3];
    float *dy[3];
    for (int m = 0; m < 3; m++) {
        dw[m] = random_weight(type, COLS, COLS, &hw[m]);
        dy[m] = gpu.ops->alloc(&gpu, (size_t)N * COLS * 4);
    }
    float *x = random_floats((size_t)N * COLS, 1.0f), *g = random_floats(COLS, 1.0f);
    float *dx = up(x, (size_t)N * COLS * 4), *dg = up(g, COLS * 4);
    float *dn = gpu.ops->alloc(&gpu, (size_t)N * COLS * 4);
    float *dh = gpu.ops->alloc(&gpu, (size_t)N * COLS * 4);
    gpu.ops->rms_norm(&gpu, dx, dg, dn, N, COLS, 1e-6f);
    gpu.ops->matmul(&gpu, &dw[0], dn, dy[0], N);
    gpu.ops->matmul(&gpu, &dw[1], dn, dy[1], N);
    gpu.ops->glu(&gpu, GLU_SILU, dy[0], dy[1], dh, (size_t)N * COLS);
    gpu.ops->matmul(&gpu, &dw[2], dh, dy[2], N);
    float *in[2] = {down(dn, (size_t)N * COLS), down(dh, (size_t)N * COLS)};
    float *want = malloc((size_t)N * COLS * 4);
    for (int m = 0; m < 3; m++) {
        float *xr = in[m / 2];
        round_like_weights(type, N, xr, (size_t)N * COLS); /* again for down: the same values */
        device_ref(type, hw[m], COLS, COLS, xr, N, want);
        float *got = down(dy[m], (size_t)N * COLS);
        CHECK_CLOSE(got, want, (size_t)N * COLS, 2e-5,
                    "after the norm and the GLU: product %d (%s)", m, ox_dtype_name(type));
        free(got);
    }
    printf("  products after a prompt's norm and GLU: %s\n", ox_dtype_name(type));
    for (int m = 0; m < 3; m++)
        free(hw[m]), gpu.ops->free(&gpu, (void *)dw[m].data), gpu.ops->free(&gpu, dy[m]);
    gpu.ops->free(&gpu, dx), gpu.ops->free(&gpu, dg), gpu.ops->free(&gpu, dn);
    gpu.ops->free(&gpu, dh);
    free(x), free(g), free(in[0]), free(in[1]), free(want);
}

/* One token's GLU and the product of its output (down), as a decode step runs them, twice: down's
 * product must be that of the f32 output the GLU left (on the integer form, GLU's output made
 * int8 between them). */
static void test_step_glu_down(enum ox_dtype type) {
    enum { ROWS = 256, COLS = 512 };
    uint8_t *hw[3];
    struct mat dw[3];
    dw[0] = random_weight(type, ROWS, COLS, &hw[0]);
    dw[1] = random_weight(type, ROWS, COLS, &hw[1]);
    dw[2] = random_weight(type, COLS, ROWS, &hw[2]);
    float *dh = gpu.ops->alloc(&gpu, ROWS * 4), *dy = gpu.ops->alloc(&gpu, COLS * 4);
    float *want = malloc(COLS * 4);
    for (int round = 0; round < 2; round++) {
        float *x = random_floats(COLS, 1.0f);
        clear_of_ties(x, COLS);
        float *dx = up(x, COLS * 4);
        CHECK(gpu.ops->matmul_glu(&gpu, GLU_SILU, &dw[0], &dw[1], dx, NULL, dh, 1));
        gpu.ops->matmul(&gpu, &dw[2], dh, dy, 1);
        float *h = down(dh, ROWS), *got = down(dy, COLS);
        round_like_weights(type, 1, h, ROWS);
        device_ref(type, hw[2], COLS, ROWS, h, 1, want);
        CHECK_CLOSE(got, want, COLS, 2e-5, "down after one token's GLU (%s), round %d",
                    ox_dtype_name(type), round);
        free(x), free(h), free(got), gpu.ops->free(&gpu, dx);
    }
    printf("  down after one token's GLU: %s\n", ox_dtype_name(type));
    for (int m = 0; m < 3; m++)
        free(hw[m]), gpu.ops->free(&gpu, (void *)dw[m].data);
    gpu.ops->free(&gpu, dh), gpu.ops->free(&gpu, dy), free(want);
}

/* What a bad call leaves: a weight type without a shader is refused at load (supports) and
 * fails the batch's download if called anyway. */
static void test_refusals(void) {
    CHECK(!gpu.ops->supports(BACKEND_OP_MATMUL, OX_DTYPE_IQ2_XXS));
    CHECK(gpu.ops->supports(BACKEND_OP_MATMUL, OX_DTYPE_Q4_K));
    struct mat m = {OX_DTYPE_IQ2_XXS, gpu.ops->alloc(&gpu, 66), 1, 256, 66, NULL, NULL};
    float *dx = gpu.ops->alloc(&gpu, 256 * 4), *dy = gpu.ops->alloc(&gpu, 4);
    gpu.ops->matmul(&gpu, &m, dx, dy, 1);
    CHECK(gpu.ops->download(&gpu, NULL, NULL, 0) != OX_OK);
    CHECK(gpu.ops->download(&gpu, NULL, NULL, 0) == OX_OK); /* reported once, then cleared */
    gpu.ops->free(&gpu, (void *)m.data), gpu.ops->free(&gpu, dx), gpu.ops->free(&gpu, dy);
}

/* Count floats from the device's d + from into host h, checked against want + from, and every
 * other float of h (total) still the sentinel. */
static void download_check(const float *d, float *h, size_t total, const float *want, size_t from,
                           size_t count, const char *what) {
    for (size_t i = 0; i < total; i++)
        h[i] = -7.0f;
    CHECK_MSG(gpu.ops->download(&gpu, h + from, d + from, count * 4) == OX_OK, "%s: %s", what,
              ox_last_error());
    size_t wrong = 0;
    for (size_t i = 0; i < total; i++)
        wrong += i >= from && i < from + count ? h[i] != want[i] : h[i] != -7.0f;
    CHECK_MSG(wrong == 0, "%s: %zu floats wrong", what, wrong);
    printf("  download %s: %zu floats\n", what, count);
}

/* Downloads into the pinned range (imported as device memory where the device can: one copy),
 * into part of it, across its end and after unpin (the staging buffer), and one past the staging
 * buffer's largest size (grown, then in pieces). */
static void test_downloads(void) {
    enum { PINNED = (3 << 20) / 4 + 37, HOST = PINNED + 1000, BIG = (70 << 20) / 4 };
    float *want = random_floats(BIG, 1.0f), *d = up(want, (size_t)BIG * 4);
    float *h = malloc((size_t)BIG * 4);
    gpu.ops->pin(&gpu, h + 3, (size_t)PINNED * 4); /* not page-aligned on purpose */
    download_check(d, h, HOST, want, 3, PINNED, "the whole pinned range");
    download_check(d, h, HOST, want, 1003, 4096, "inside it");
    download_check(d, h, HOST, want, PINNED - 500, 900, "across its end");
    download_check(d, h, HOST, want, 0, 2, "before it");
    gpu.ops->unpin(&gpu);
    download_check(d, h, HOST, want, 3, PINNED, "after unpin");
    download_check(d, h, BIG, want, 0, BIG, "of 70 MB");
    gpu.ops->free(&gpu, d);
    free(want), free(h);
}

/* Every op but attention against the CPU's. */
static void test_products(void) {
    test_vectors();
    test_rows(1, 4096, false);
    test_rows(7, 5120, false);
    test_rows(70000, 64, true); /* past 65535 rows: more than one dispatch */
    for (int neox = 0; neox < 2; neox++) {
        test_rope(neox, 128, 0.0f, false);
        test_rope(neox, 64, 0.0f, false);
        test_rope(neox, 128, 1.0f, false);
        test_rope(neox, 128, 0.0f, true);
    }
    for (int n = 1; n <= 9; n += 4) {
        test_matmul(OX_DTYPE_F32, 300, 1024, n);
        test_matmul(OX_DTYPE_F16, 4096, 512, n);
    }
    test_matmul(OX_DTYPE_F16, 32, 5000, 17);
    test_weight_types();
    test_coopmat2_tiles();
    test_dequant_products();
    test_decode_batch_products();
    static const enum ox_dtype q4k[3] = {OX_DTYPE_Q4_K, OX_DTYPE_Q4_K, OX_DTYPE_Q4_K},
                               f16s[3] = {OX_DTYPE_F16, OX_DTYPE_F16, OX_DTYPE_F16},
                               mixed[3] = {OX_DTYPE_Q4_K, OX_DTYPE_F16, OX_DTYPE_Q6_K};
    for (int n = 1; n <= 100; n += 99) /* one x's bytes or halves kept, and neither for the other */
        test_shared_x(q4k, n), test_shared_x(f16s, n), test_shared_x(mixed, n);
    static const int rows[3] = {193, 64, 67}, many[3] = {2051, 1024, 1027};
    for (int n = 1; n <= 20; n += 4) /* 1, 5: one dispatch; 9 and past: the tiled product */
        test_fusions(OX_DTYPE_Q4_K, n, rows), test_fusions(OX_DTYPE_F16, n, rows),
            test_fusions(OX_DTYPE_Q8_0, n, rows);
    test_fusions(OX_DTYPE_Q4_K, 1, many); /* rows past one workgroup's tile */
    static const enum ox_dtype km[3] = {OX_DTYPE_Q4_K, OX_DTYPE_Q4_K, OX_DTYPE_Q6_K},
                               f16[3] = {OX_DTYPE_F16, OX_DTYPE_F16, OX_DTYPE_F16};
    test_norm_fusions(1, km), test_norm_fusions(3, km), test_norm_fusions(1, f16);
    test_prompt_copies(OX_DTYPE_Q4_K), test_prompt_copies(OX_DTYPE_F16);
    test_prompt_copies(OX_DTYPE_Q8_0);
    test_step_glu_down(OX_DTYPE_Q4_K), test_step_glu_down(OX_DTYPE_Q6_K);
    test_step_glu_down(OX_DTYPE_F16);
    test_cache(OX_DTYPE_F32);
    test_cache(OX_DTYPE_F16);
    test_cache(OX_DTYPE_Q8_0);
    test_rope_store(OX_DTYPE_F32, 64, false), test_rope_store(OX_DTYPE_F16, 32, true);
    test_rope_store(OX_DTYPE_F16, 64, false), test_rope_store(OX_DTYPE_Q8_0, 64, false);
}

int main(void) {
    int rc = device_open(&backend_vulkan_ops, "Vulkan");
    if (rc)
        return rc;
    test_products();
    test_downloads();
    test_refusals();
    gpu.ops->release(&gpu);
    cpu.ops->release(&cpu);
    return test_finish("test_vulkan_ops");
}
