/* test_cuda_matmul.c: the CUDA backend's matmuls (every weight type and batch size, column
 * slices, the fused decode ops, MoE experts) against a double-precision product of the
 * dequantized weights or the CPU backend, on random inputs. Needs a CUDA GPU; without one it
 * reports itself skipped (exit 77). */
#include "cuda_ops_common.h"

/* rows x cols weights of a type against the reference for each batch size in ns (0 ends it),
 * and get_rows. */
static void test_matmul_shape(enum ox_dtype type, int rows, int cols, const int *ns) {
    size_t row_bytes = (size_t)cols / ox_dtype_block_size(type) * ox_dtype_type_size(type);
    float *wf = random_floats((size_t)rows * cols, 1.0f);
    uint8_t *w = malloc(row_bytes * rows);
    CHECK(ox_quantize(type, wf, w, rows, cols, NULL) == OX_OK);
    void *dw = up(w, row_bytes * rows);
    struct mat m = {type, dw, rows, cols, row_bytes, NULL, NULL};
    for (size_t k = 0; ns[k]; k++) {
        int n = ns[k];
        float *x = random_floats((size_t)n * cols, 1.0f), *want = malloc((size_t)n * rows * 4);
        matmul_ref(type, w, rows, cols, x, n, want);
        float *dx = up(x, (size_t)n * cols * 4), *dy = gpu.ops->alloc(&gpu, (size_t)n * rows * 4);
        gpu.ops->matmul(&gpu, &m, dx, dy, n);
        float *got = down(dy, (size_t)n * rows);
        /* the integer types round x to int8 at every size (the GEMV, then the int8 tensor
         * cores past gemv_max_n); the others multiply f16 (bf16) operands on the tensor cores
         * past 8 tokens, f16 and bf16 weights from 2 where their kernel takes them; f32 sums */
        double tol = half_mma(type, n, cols)     ? half_batch_tol(type)
                     : n <= 8 || int8_gemv(type) ? small_batch_tol(type)
                     : type == OX_DTYPE_F32      ? 2e-5
                     : type == OX_DTYPE_BF16     ? 1e-2
                                                 : 2e-3;
        CHECK_CLOSE(got, want, (size_t)n * rows, tol, "matmul %s n=%d", ox_dtype_name(type), n);
        free(x), free(want), free(got);
        gpu.ops->free(&gpu, dx), gpu.ops->free(&gpu, dy);
    }
    check_get_rows(&m, w); /* get_rows dequantizes exactly as the CPU does */
    free(wf), free(w);
    gpu.ops->free(&gpu, dw);
}

/* Weights whose dot products take q8_K activations (llama.cpp's CPU: the k-quants, iq4_xs):
 * their tensor-core batches round x as the CPU's q8_K does, so against the product with x
 * rounded on the CPU they differ by float rounding alone, not by the int8 tolerance. */
static void test_matmul_q8k(enum ox_dtype type, int n) {
    /* 8 super-blocks: every type's rows are then 16-byte aligned, as the int8 kernel needs
     * (with 3, q2_K, q3_K, q6_K and iq4_xs rows are not, and their batches go to cuBLAS) */
    const int rows = 70, cols = 2048;
    size_t row_bytes = (size_t)cols / ox_dtype_block_size(type) * ox_dtype_type_size(type);
    size_t xq_row = (size_t)cols / 256 * ox_dtype_type_size(OX_DTYPE_Q8_K);
    float *wf = random_floats((size_t)rows * cols, 1.0f),
          *x = random_floats((size_t)n * cols, 1.0f);
    float *xr = malloc((size_t)n * cols * 4), *want = malloc((size_t)n * rows * 4);
    uint8_t *w = malloc(row_bytes * rows), *xq = malloc(xq_row * n);
    CHECK(ox_quantize(type, wf, w, rows, cols, NULL) == OX_OK);
    CHECK(ox_quantize(OX_DTYPE_Q8_K, x, xq, n, cols, NULL) == OX_OK);
    for (int t = 0; t < n; t++)
        ox_dequantize(OX_DTYPE_Q8_K, xq + (size_t)t * xq_row, xr + (size_t)t * cols, cols);
    matmul_ref(type, w, rows, cols, xr, n, want);
    void *dw = up(w, row_bytes * rows);
    struct mat m = {type, dw, rows, cols, row_bytes, NULL, NULL};
    float *dx = up(x, (size_t)n * cols * 4), *dy = gpu.ops->alloc(&gpu, (size_t)n * rows * 4);
    gpu.ops->matmul(&gpu, &m, dx, dy, n);
    float *got = down(dy, (size_t)n * rows);
    CHECK_CLOSE(got, want, (size_t)n * rows, 1e-5, "matmul %s n=%d on q8_K activations",
                ox_dtype_name(type), n);
    free(wf), free(x), free(xr), free(want), free(w), free(xq), free(got);
    gpu.ops->free(&gpu, dw), gpu.ops->free(&gpu, dx), gpu.ops->free(&gpu, dy);
}

static void test_matmul_type(enum ox_dtype type) {
    /* 4: the GEMV's most; 5 and 8: the int8 matmul's narrowest tiles; 6 over 18 stages, split */
    static const int all[] = {1, 2, 4, 5, 8, 9, 33, 128, 0}, one[] = {1, 2, 6, 17, 0};
    test_matmul_shape(type, 67, 512, all);
    test_matmul_shape(type, 37, 4608, one); /* decode rows of several tiles */
    static const int wide[] = {200, 0};     /* several tiles of tokens and rows */
    test_matmul_shape(type, 300, 256, wide);
    static const int tail[] = {20, 0}; /* 7 groups of 32: a last stage of 3 */
    if (ox_dtype_block_size(type) == 32)
        test_matmul_shape(type, 45, 224, tail);
    /* 8M weights or more: the int8 matmul's 128 x 32 tiles (8 warps) from 17 tokens, 128 x 128
     * (16 warps) past 64, rows and tokens both ending inside a tile; 128 x 160 (160), 128 x 192
     * (184: 16 warps, or 8 for q2_K and q6_K, one buffer of stored bytes), 128 x 224 for the
     * types scaled in float (200) and 128 x 128 for the others, and 128 x 128 again (256); a few
     * types of each way of scaling */
    static const int big[] = {24, 72, 160, 184, 200, 256, 0};
    if (type == OX_DTYPE_Q4_0 || type == OX_DTYPE_Q4_1 || type == OX_DTYPE_Q8_0 ||
        type == OX_DTYPE_Q2_K || type == OX_DTYPE_Q4_K || type == OX_DTYPE_Q6_K ||
        type == OX_DTYPE_IQ4_XS)
        test_matmul_shape(type, 4100, 2048, big);
}

static void test_matmul(void) {
    int tested = 0;
    for (int t = 0; t < 64; t++) {
        if (!ox_dtype_valid(t) || !backend_cuda_ops.supports(BACKEND_OP_MATMUL, (enum ox_dtype)t))
            continue;
        bool float_type = t == OX_DTYPE_F32 || t == OX_DTYPE_F16 || t == OX_DTYPE_BF16;
        if (!float_type &&
            (!ox_dtype_can_quantize((enum ox_dtype)t) || ox_dtype_needs_imatrix((enum ox_dtype)t)))
            continue;
        test_matmul_type((enum ox_dtype)t);
        if (int8_gemv((enum ox_dtype)t) && dtype_get(t)->vec_dot_type == OX_DTYPE_Q8_K)
            for (int n = 5; n <= 48; n *= 2) /* each tile shape up to 64 tokens */
                test_matmul_q8k((enum ox_dtype)t, n);
        tested++;
    }
    CHECK_MSG(tested >= 15, "only %d weight types tested", tested);
    printf("matmul and get_rows: %d weight types\n", tested);
}

/* Columns [c0, c0 + w) of a matrix (its rows' stride kept), as a sliced FFN's down projection
 * reads them, through every path by batch size: y = W x and y += W x against the reference on
 * the slice's dequantized values. */
static void test_column_slice(enum ox_dtype type) {
    const int rows = 96, cols = 4096, c0 = 2048, w = 2048;
    static const int ns[] = {1, 5, 40, 200};
    size_t row_bytes = (size_t)cols / ox_dtype_block_size(type) * ox_dtype_type_size(type);
    size_t skip = (size_t)c0 / ox_dtype_block_size(type) * ox_dtype_type_size(type);
    float *wf = random_floats((size_t)rows * cols, 1.0f), *row = malloc((size_t)cols * 4);
    float *ws = malloc((size_t)rows * w * 4);
    uint8_t *host = malloc(row_bytes * rows);
    CHECK(ox_quantize(type, wf, host, rows, cols, NULL) == OX_OK);
    for (int r = 0; r < rows; r++) {
        ox_dequantize(type, host + (size_t)r * row_bytes, row, cols);
        memcpy(ws + (size_t)r * w, row + c0, (size_t)w * 4);
    }
    uint8_t *dw = up(host, row_bytes * rows);
    struct mat m = {type, dw + skip, rows, w, row_bytes, NULL, NULL};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        int n = ns[k];
        float *x = random_floats((size_t)n * w, 1.0f), *want = malloc((size_t)n * rows * 4);
        for (int t = 0; t < n; t++)
            for (int r = 0; r < rows; r++) {
                double s = 0.0;
                for (int c = 0; c < w; c++)
                    s += (double)ws[(size_t)r * w + c] * x[(size_t)t * w + c];
                want[(size_t)t * rows + r] = (float)s;
            }
        float *dx = up(x, (size_t)n * w * 4), *dy = gpu.ops->alloc(&gpu, (size_t)n * rows * 4);
        double tol =
            (n > 8 && !int8_gemv(type)) || half_mma(type, n, w) ? 2e-3 : small_batch_tol(type);
        gpu.ops->matmul(&gpu, &m, dx, dy, n);
        float *got = down(dy, (size_t)n * rows);
        CHECK_CLOSE(got, want, (size_t)n * rows, tol, "column slice %s n=%d", ox_dtype_name(type),
                    n);
        free(got);
        if (gpu.ops->matmul_add(&gpu, &m, dx, dy, n)) { /* y was W x: now 2 W x */
            for (size_t i = 0; i < (size_t)n * rows; i++)
                want[i] *= 2.0f;
            got = down(dy, (size_t)n * rows);
            CHECK_CLOSE(got, want, (size_t)n * rows, tol,
                        "column slice %s n=%d, y +=", ox_dtype_name(type), n);
            free(got);
        } else {
            CHECK_MSG(n <= 8, "column slice %s n=%d: y += declined", ox_dtype_name(type), n);
        }
        free(x), free(want);
        gpu.ops->free(&gpu, dx), gpu.ops->free(&gpu, dy);
    }
    free(wf), free(row), free(ws), free(host);
    gpu.ops->free(&gpu, dw);
}

static float silu(float v) {
    return v / (1.0f + expf(-v));
}

/* The fused matmuls (q, k, v in one launch; gate and up with the GLU; y += W x) against the
 * reference: the integer types at every batch size (the GEMV up to gemv_max_n, the int8 tensor
 * cores past it, the matrices' row tiles in one launch), the float types' single tokens, f16
 * and bf16 up to half_mma_max_n tokens; they decline (false) everything else. */
static void test_fused_type(enum ox_dtype type) {
    const int cols = 2048, rows[3] = {96, 32, 96}; /* q6_K tiles need cols % 2048 == 0 */
    uint8_t *host[3];
    struct mat m[3];
    for (int i = 0; i < 3; i++)
        m[i] = random_weight(type, rows[i], cols, &host[i]);
    static const int ns[] = {1, 3, 8, 9, 40, 100, 200};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        int n = ns[k];
        bool plain = type == OX_DTYPE_F32 || type == OX_DTYPE_F16 || type == OX_DTYPE_BF16;
        /* plain types: float x, one token (f16 and bf16 without staging, f32 staged); f16
         * and bf16 a few tokens on the tensor cores, x rounded to their type */
        bool mma = half_mma(type, n, cols);
        bool takes = plain ? n == 1 || mma : int8_gemv(type);
        double tol = mma ? half_batch_tol(type) : plain ? 5e-5 : 2e-2; /* integer types: int8 x */
        float *x = random_floats((size_t)n * cols, 1.0f), *dx = up(x, (size_t)n * cols * 4);
        float *want[3], *dy[3], *got;
        for (int i = 0; i < 3; i++) {
            want[i] = malloc((size_t)n * rows[i] * 4);
            matmul_ref(type, host[i], rows[i], cols, x, n, want[i]);
            dy[i] = gpu.ops->alloc(&gpu, (size_t)n * rows[i] * 4);
        }
        if (n == 1 && (type == OX_DTYPE_F16 || type == OX_DTYPE_BF16)) {
            /* their norm stays a kernel of its own: declined with one */
            struct norm_in norm = {dx, 1e-5f};
            CHECK_MSG(!gpu.ops->matmul_multi(&gpu, 3, m, dx, &norm, dy, n), "normed multi %s",
                      ox_dtype_name(type));
            CHECK_MSG(!gpu.ops->matmul_glu(&gpu, GLU_SILU, &m[0], &m[2], dx, &norm, dy[0], n),
                      "normed glu %s", ox_dtype_name(type));
        }
        CHECK_MSG(gpu.ops->matmul_multi(&gpu, 3, m, dx, NULL, dy, n) == takes, "multi %s n=%d",
                  ox_dtype_name(type), n);
        for (int i = 0; takes && i < 3; i++) {
            got = down(dy[i], (size_t)n * rows[i]);
            CHECK_CLOSE(got, want[i], (size_t)n * rows[i], tol, "multi %s n=%d matrix %d",
                        ox_dtype_name(type), n, i);
            free(got);
        }
        for (int kind = GLU_SILU; kind <= GLU_GELU; kind++) { /* gate m[0], up m[2] */
            CHECK_MSG(gpu.ops->matmul_glu(&gpu, kind, &m[0], &m[2], dx, NULL, dy[0], n) == takes,
                      "glu %s n=%d", ox_dtype_name(type), n);
            if (!takes)
                continue;
            float *h = malloc((size_t)n * rows[0] * 4), *dg = up(want[0], (size_t)n * rows[0] * 4);
            float *du = up(want[2], (size_t)n * rows[0] * 4),
                  *dh = gpu.ops->alloc(&gpu, (size_t)n * rows[0] * 4);
            if (kind == GLU_SILU) {
                for (size_t i = 0; i < (size_t)n * rows[0]; i++)
                    h[i] = silu(want[0][i]) * want[2][i];
            } else { /* the unfused GPU op on the reference products */
                gpu.ops->glu(&gpu, GLU_GELU, dg, du, dh, (size_t)n * rows[0]);
                free(h);
                h = down(dh, (size_t)n * rows[0]);
            }
            got = down(dy[0], (size_t)n * rows[0]);
            CHECK_CLOSE(got, h, (size_t)n * rows[0], tol, "glu %s kind %d n=%d",
                        ox_dtype_name(type), kind, n);
            free(got), free(h);
            gpu.ops->free(&gpu, dg), gpu.ops->free(&gpu, du), gpu.ops->free(&gpu, dh);
        }
        float *y0 = random_floats((size_t)n * rows[1], 1.0f);
        gpu.ops->upload(&gpu, dy[1], y0, (size_t)n * rows[1] * 4);
        /* y += W x: plain types take one token (f16 and bf16 a few), every type cuBLAS's
         * batches (past 8) */
        bool adds = n > 8 || (plain ? n == 1 || mma : int8_gemv(type));
        double add_tol = !plain || n == 1 || mma ? tol
                         : type == OX_DTYPE_F32  ? 2e-5
                         : type == OX_DTYPE_BF16 ? 1e-2
                                                 : 2e-3; /* x rounded to f16 for cuBLAS */
        CHECK_MSG(gpu.ops->matmul_add(&gpu, &m[1], dx, dy[1], n) == adds, "add %s n=%d",
                  ox_dtype_name(type), n);
        if (adds) {
            for (size_t i = 0; i < (size_t)n * rows[1]; i++)
                want[1][i] += y0[i];
            got = down(dy[1], (size_t)n * rows[1]);
            CHECK_CLOSE(got, want[1], (size_t)n * rows[1], add_tol, "add %s n=%d",
                        ox_dtype_name(type), n);
            free(got);
        }
        free(y0), free(x), gpu.ops->free(&gpu, dx);
        for (int i = 0; i < 3; i++)
            free(want[i]), gpu.ops->free(&gpu, dy[i]);
    }
    for (int i = 0; i < 3; i++)
        free(host[i]), gpu.ops->free(&gpu, (void *)m[i].data);
}

/* An RMSNorm of a few rows leaves their q8_1 copy for the matmul after it; any op that writes
 * the rows in between must make the matmul quantize them again. */
static void test_q8_reuse(void) {
    const int cols = 2048, rows = 64, n = 3;
    uint8_t *host;
    struct mat m = random_weight(OX_DTYPE_Q4_0, rows, cols, &host);
    float *x = random_floats((size_t)n * cols, 3.0f), *xn = malloc((size_t)n * cols * 4);
    float *want = malloc((size_t)n * rows * 4), *dx = up(x, (size_t)n * cols * 4);
    float *dn = gpu.ops->alloc(&gpu, (size_t)n * cols * 4),
          *dy = gpu.ops->alloc(&gpu, (size_t)n * rows * 4);
    cpu.ops->rms_norm(&cpu, x, NULL, xn, n, cols, 1e-5f);
    for (int scaled = 0; scaled < 2; scaled++) {
        if (scaled)
            for (size_t i = 0; i < (size_t)n * cols; i++)
                xn[i] *= 2.0f;
        matmul_ref(OX_DTYPE_Q4_0, host, rows, cols, xn, n, want);
        gpu.ops->rms_norm(&gpu, dx, NULL, dn, n, cols, 1e-5f);
        if (scaled)
            gpu.ops->scale(&gpu, dn, 2.0f, (size_t)n * cols);
        for (int rep = 0; rep < 2; rep++) { /* the second one reuses the first's copy */
            gpu.ops->matmul(&gpu, &m, dn, dy, n);
            float *got = down(dy, (size_t)n * rows);
            CHECK_CLOSE(got, want, (size_t)n * rows, 2e-2, "norm then matmul, scaled %d rep %d",
                        scaled, rep);
            free(got);
        }
    }
    free(host), free(x), free(xn), free(want);
    gpu.ops->free(&gpu, (void *)m.data), gpu.ops->free(&gpu, dx), gpu.ops->free(&gpu, dn);
    gpu.ops->free(&gpu, dy);
}

/* The GLU's output read by the down projection: its q8_1 copy from the GEMV, or (the tensor
 * cores' batches) the copy the GLU's sums were quantized into, in the form of gate's type;
 * a down matrix of the other form quantizes them again. */
static void test_glu_then_down(enum ox_dtype gate_type, enum ox_dtype down_type, int n, int ff,
                               int cols) {
    const int rows = 32;
    uint8_t *hg, *hu, *hd;
    struct mat g = random_weight(gate_type, ff, cols, &hg),
               u = random_weight(gate_type, ff, cols, &hu);
    struct mat d = random_weight(down_type, rows, ff, &hd);
    float *x = random_floats((size_t)n * cols, 1.0f), *dx = up(x, (size_t)n * cols * 4);
    float *yg = malloc((size_t)n * ff * 4), *yu = malloc((size_t)n * ff * 4);
    float *want = malloc((size_t)n * rows * 4);
    matmul_ref(gate_type, hg, ff, cols, x, n, yg);
    matmul_ref(gate_type, hu, ff, cols, x, n, yu);
    for (int i = 0; i < n * ff; i++)
        yg[i] = silu(yg[i]) * yu[i];
    matmul_ref(down_type, hd, rows, ff, yg, n, want);
    float *dh = gpu.ops->alloc(&gpu, (size_t)n * ff * 4),
          *dy = gpu.ops->alloc(&gpu, (size_t)n * rows * 4);
    CHECK(gpu.ops->matmul_glu(&gpu, GLU_SILU, &g, &u, dx, NULL, dh, n));
    gpu.ops->matmul(&gpu, &d, dh, dy, n);
    float *got = down(dy, (size_t)n * rows);
    CHECK_CLOSE(got, want, (size_t)n * rows, 3e-2, "glu %s, then down %s from its output, n=%d",
                ox_dtype_name(gate_type), ox_dtype_name(down_type), n);
    free(got), free(x), free(yg), free(yu), free(want), free(hg), free(hu), free(hd);
    gpu.ops->free(&gpu, dx), gpu.ops->free(&gpu, dh), gpu.ops->free(&gpu, dy);
    gpu.ops->free(&gpu, (void *)g.data), gpu.ops->free(&gpu, (void *)u.data);
    gpu.ops->free(&gpu, (void *)d.data);
}

/* matmul_multi over matrices of one width but different types (Q4_K_M's q and k are q4_K, its
 * v may be q6_K): x quantized once, a launch per type, with and without the norm inside. */
static void test_multi_mixed(int n) {
    const int cols = 2048, rows[3] = {96, 32, 64};
    const enum ox_dtype types[3] = {OX_DTYPE_Q4_K, OX_DTYPE_Q4_K, OX_DTYPE_Q6_K};
    uint8_t *host[3];
    struct mat m[3];
    float *x = random_floats((size_t)n * cols, 2.0f), *g = random_floats(cols, 1.0f);
    float *xn = malloc((size_t)n * cols * 4), *dx = up(x, (size_t)n * cols * 4);
    float *dg = up(g, (size_t)cols * 4), *want[3], *dy[3];
    cpu.ops->rms_norm(&cpu, x, g, xn, n, cols, 1e-5f);
    for (int normed = 0; normed < 2; normed++) {
        for (int i = 0; i < 3; i++) {
            m[i] = random_weight(types[i], rows[i], cols, &host[i]);
            want[i] = malloc((size_t)n * rows[i] * 4);
            matmul_ref(types[i], host[i], rows[i], cols, normed ? xn : x, n, want[i]);
            dy[i] = gpu.ops->alloc(&gpu, (size_t)n * rows[i] * 4);
        }
        struct norm_in norm = {dg, 1e-5f};
        CHECK_MSG(gpu.ops->matmul_multi(&gpu, 3, m, dx, normed ? &norm : NULL, dy, n),
                  "mixed multi n=%d normed %d", n, normed);
        for (int i = 0; i < 3; i++) {
            float *got = down(dy[i], (size_t)n * rows[i]);
            CHECK_CLOSE(got, want[i], (size_t)n * rows[i], 2e-2,
                        "mixed multi n=%d normed %d matrix %d", n, normed, i);
            free(got), free(want[i]), free(host[i]);
            gpu.ops->free(&gpu, dy[i]), gpu.ops->free(&gpu, (void *)m[i].data);
        }
    }
    free(x), free(g), free(xn);
    gpu.ops->free(&gpu, dx), gpu.ops->free(&gpu, dg);
}

/* matmul_multi and matmul_glu with the RMSNorm inside: as the CPU's norm, then the reference.
 * A single token: cols / 32 groups of x are quantized by pairs of lanes, 128 groups a round
 * (2304: some lanes idle); the int8 tensor cores' batches (n past gemv_max_n) norm and quantize
 * each row in one block, its threads holding 32 values each (2304: the last of the four rounds
 * past the row). */
static void test_normed(enum ox_dtype type, int cols, int n) {
    const int rows = 64;
    uint8_t *host[2];
    struct mat m[2] = {random_weight(type, rows, cols, &host[0]),
                       random_weight(type, rows, cols, &host[1])};
    float *x = random_floats((size_t)n * cols, 3.0f), *g = random_floats(cols, 1.0f);
    float *xn = malloc((size_t)n * cols * 4), *want[2], *dy[2];
    cpu.ops->rms_norm(&cpu, x, g, xn, n, cols, 1e-5f);
    float *dx = up(x, (size_t)n * cols * 4), *dg = up(g, (size_t)cols * 4);
    for (int i = 0; i < 2; i++) {
        want[i] = malloc((size_t)n * rows * 4);
        matmul_ref(type, host[i], rows, cols, xn, n, want[i]);
        dy[i] = gpu.ops->alloc(&gpu, (size_t)n * rows * 4);
    }
    struct norm_in norm = {dg, 1e-5f};
    if (n == 1) { /* two tokens would each GEMV block norm twice as much: declined */
        CHECK(!gpu.ops->matmul_multi(&gpu, 2, m, dx, &norm, dy, 2));
        CHECK(!gpu.ops->matmul_glu(&gpu, GLU_SILU, &m[0], &m[1], dx, &norm, dy[0], 2));
    }
    CHECK_MSG(gpu.ops->matmul_multi(&gpu, 2, m, dx, &norm, dy, n), "normed multi %s n=%d",
              ox_dtype_name(type), n);
    for (int i = 0; i < 2; i++) {
        float *got = down(dy[i], (size_t)n * rows);
        CHECK_CLOSE(got, want[i], (size_t)n * rows, small_batch_tol(type),
                    "normed multi %s %d cols n=%d matrix %d", ox_dtype_name(type), cols, n, i);
        free(got);
    }
    CHECK_MSG(gpu.ops->matmul_glu(&gpu, GLU_SILU, &m[0], &m[1], dx, &norm, dy[0], n),
              "normed glu %s n=%d", ox_dtype_name(type), n);
    for (int i = 0; i < n * rows; i++)
        want[0][i] = silu(want[0][i]) * want[1][i];
    float *got = down(dy[0], (size_t)n * rows);
    CHECK_CLOSE(got, want[0], (size_t)n * rows, int8_gemv(type) ? 3e-2 : 5e-5,
                "normed glu %s %d cols n=%d", ox_dtype_name(type), cols, n);
    free(got), free(x), free(g), free(xn);
    gpu.ops->free(&gpu, dx), gpu.ops->free(&gpu, dg);
    for (int i = 0; i < 2; i++) {
        free(want[i]), free(host[i]);
        gpu.ops->free(&gpu, dy[i]), gpu.ops->free(&gpu, (void *)m[i].data);
    }
}

/* A norm's weight folded into f16 matrices (the table's fold_norm), the multi and GLU kernels
 * scaling by the rms themselves (norm_in with no weight): as the CPU's norm with its weight,
 * then the reference, within the extra rounding of each product to f16 (and of x past one
 * token: the tensor cores' batches); batches past those decline. A product past f16's range is
 * caught before anything changes. */
static void test_folded_norm(void) {
    const int cols = 4096, rows = 64, most = half_mma_max_n() > 0 ? half_mma_max_n() : 1;
    uint8_t *host[2];
    struct mat m[2] = {random_weight(OX_DTYPE_F16, rows, cols, &host[0]),
                       random_weight(OX_DTYPE_F16, rows, cols, &host[1])};
    float *g = random_floats(cols, 1.0f), *dg = up(g, (size_t)cols * 4);
    bool folded = false;
    struct backend_weights bw = {0};
    CHECK(gpu.ops->download(&gpu, NULL, NULL, 0) == OX_OK); /* fold_norm is off the stream */
    CHECK(gpu.ops->fold_norm(&bw, dg, m, 2, &folded) == OX_OK && folded);
    struct norm_in norm = {NULL, 1e-5f};
    const int ns[] = {1, 3, most, most + 1};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        const int n = ns[k];
        float *x = random_floats((size_t)n * cols, 3.0f), *xn = malloc((size_t)n * cols * 4);
        float *want[2], *dy[2], *dx = up(x, (size_t)n * cols * 4);
        cpu.ops->rms_norm(&cpu, x, g, xn, n, cols, 1e-5f);
        for (int i = 0; i < 2; i++) {
            want[i] = malloc((size_t)n * rows * 4);
            matmul_ref(OX_DTYPE_F16, host[i], rows, cols, xn, n, want[i]);
            dy[i] = gpu.ops->alloc(&gpu, (size_t)n * rows * 4);
        }
        const bool takes = n == 1 || half_mma(OX_DTYPE_F16, n, cols);
        const double tol = n == 1 ? 1e-3 : 3e-3;
        CHECK_MSG(gpu.ops->matmul_multi(&gpu, 2, m, dx, &norm, dy, n) == takes, "folded multi n=%d",
                  n);
        for (int i = 0; takes && i < 2; i++) {
            float *got = down(dy[i], (size_t)n * rows);
            CHECK_CLOSE(got, want[i], (size_t)n * rows, tol, "folded multi n=%d matrix %d", n, i);
            free(got);
        }
        CHECK_MSG(gpu.ops->matmul_glu(&gpu, GLU_SILU, &m[0], &m[1], dx, &norm, dy[0], n) == takes,
                  "folded glu n=%d", n);
        if (takes) {
            for (size_t i = 0; i < (size_t)n * rows; i++)
                want[0][i] = silu(want[0][i]) * want[1][i];
            float *got = down(dy[0], (size_t)n * rows);
            CHECK_CLOSE(got, want[0], (size_t)n * rows, 2 * tol, "folded glu n=%d", n);
            free(got);
        }
        free(x), free(xn), gpu.ops->free(&gpu, dx);
        for (int i = 0; i < 2; i++)
            free(want[i]), gpu.ops->free(&gpu, dy[i]);
    }
    /* 60000 x 2 is past 65504: not foldable, and left as it was */
    uint16_t big[8] = {0x7b53, 0x3c00, 0x3c00, 0x3c00, 0x3c00, 0x3c00, 0x3c00, 0x3c00};
    float two[8] = {2, 2, 2, 2, 2, 2, 2, 2};
    void *dbig = up(big, sizeof big);
    float *dtwo = up(two, sizeof two);
    CHECK(gpu.ops->download(&gpu, NULL, NULL, 0) == OX_OK);
    struct mat mbig = {OX_DTYPE_F16, dbig, 1, 8, sizeof big, NULL, NULL};
    CHECK(gpu.ops->fold_norm(&bw, dtwo, &mbig, 1, &folded) == OX_OK && !folded);
    uint16_t back[8];
    CHECK(gpu.ops->download(&gpu, back, dbig, sizeof back) == OX_OK &&
          !memcmp(back, big, sizeof big));
    two[0] = 1.0f;
    gpu.ops->upload(&gpu, dtwo, two, sizeof two);
    CHECK(gpu.ops->download(&gpu, NULL, NULL, 0) == OX_OK);
    CHECK(gpu.ops->fold_norm(&bw, dtwo, &mbig, 1, &folded) == OX_OK && folded);
    /* not f16: declined, unchanged */
    struct mat bf = {OX_DTYPE_BF16, m[0].data, rows, cols, m[0].row_bytes, NULL, NULL};
    CHECK(gpu.ops->fold_norm(&bw, dg, &bf, 1, &folded) == OX_OK && !folded);
    gpu.ops->free(&gpu, dbig), gpu.ops->free(&gpu, dtwo);
    free(g), gpu.ops->free(&gpu, dg);
    for (int i = 0; i < 2; i++)
        free(host[i]), gpu.ops->free(&gpu, (void *)m[i].data);
}

/* Long matrices: each warp streams several rows, across the q -> k -> v boundaries (at rows
 * that are no multiple of the rows per block). */
static void test_multi_long(enum ox_dtype type, int n) {
    const int cols = 2048, rows[3] = {5000, 1000, 2440};
    uint8_t *host[3];
    struct mat m[3];
    float *want[3], *dy[3], *x = random_floats((size_t)n * cols, 1.0f);
    float *dx = up(x, (size_t)n * cols * 4);
    for (int i = 0; i < 3; i++) {
        m[i] = random_weight(type, rows[i], cols, &host[i]);
        want[i] = malloc((size_t)n * rows[i] * 4);
        matmul_ref(type, host[i], rows[i], cols, x, n, want[i]);
        dy[i] = gpu.ops->alloc(&gpu, (size_t)n * rows[i] * 4);
    }
    CHECK_MSG(gpu.ops->matmul_multi(&gpu, 3, m, dx, NULL, dy, n), "long multi %s n=%d",
              ox_dtype_name(type), n);
    const double tol = n > 1 && !int8_gemv(type) ? half_batch_tol(type) : small_batch_tol(type);
    for (int i = 0; i < 3; i++) {
        float *got = down(dy[i], (size_t)n * rows[i]);
        CHECK_CLOSE(got, want[i], (size_t)n * rows[i], tol, "long multi %s n=%d matrix %d",
                    ox_dtype_name(type), n, i);
        free(got), free(want[i]), free(host[i]);
        gpu.ops->free(&gpu, dy[i]), gpu.ops->free(&gpu, (void *)m[i].data);
    }
    free(x), gpu.ops->free(&gpu, dx);
}

/* Token t's k most likely experts of probs (ties to the lower index) and their weights. */
static void top_experts(const float *p, int n_expert, int k, int32_t *ids, float *w) {
    double sum = 0.0;
    for (int j = 0; j < k; j++) {
        ids[j] = -1;
        for (int e = 0; e < n_expert; e++) {
            bool taken = false;
            for (int q = 0; q < j; q++)
                taken |= ids[q] == e;
            if (!taken && (ids[j] < 0 || p[e] > p[ids[j]]))
                ids[j] = e;
        }
        sum += p[ids[j]];
    }
    for (int j = 0; j < k; j++)
        w[j] = p[ids[j]] / (float)sum;
}

/* The MoE FFN op against the reference: the same experts chosen (a tie among them), the weighted
 * sum of their SwiGLU FFNs in double. Up to 8 token-expert pairs take the integer GEMV with the
 * choice read on the device; more wait for the host, which groups the tokens by expert. */
static void test_moe_case(enum ox_dtype type, int n_expert, int k, int n) {
    const int d = 512, ff = 256, pairs = n * k;
    uint8_t *hg, *hu, *hd;
    struct mat g = random_weight(type, n_expert * ff, d, &hg),
               u = random_weight(type, n_expert * ff, d, &hu);
    struct mat dn = random_weight(type, n_expert * d, ff, &hd);
    g.n_rows = u.n_rows = ff, dn.n_rows = d; /* expert 0's; the rest follow */
    float *x = random_floats((size_t)n * d, 1.0f), *p = random_floats((size_t)n * n_expert, 1.0f);
    for (int i = 0; i < n * n_expert; i++)
        p[i] = fabsf(p[i]) + 0.01f;
    p[1] = p[n_expert - 1] = 2.0f; /* token 0: a tie for the top */
    float *dx = up(x, (size_t)n * d * 4), *dp = up(p, (size_t)n * n_expert * 4);
    const int nb = pairs; /* rows of each buffer: as many as the pairs */
    int32_t *dids = gpu.ops->alloc(&gpu, (size_t)pairs * 4);
    float *dw = gpu.ops->alloc(&gpu, (size_t)pairs * 4),
          *dy = gpu.ops->alloc(&gpu, (size_t)n * d * 4);
    float *buf[5];
    for (int i = 0; i < 5; i++) /* gate_out, up_out, glu (ff wide), rows, out (d wide) */
        buf[i] = gpu.ops->alloc(&gpu, (size_t)nb * (i < 3 ? ff : d) * 4);
    struct moe_args a = {.kind = GLU_SILU,
                         .gate = &g,
                         .up = &u,
                         .down = &dn,
                         .probs = dp,
                         .x = dx,
                         .y = dy,
                         .n = n,
                         .n_expert = n_expert,
                         .k = k,
                         .n_batch = nb,
                         .ids = dids,
                         .weights = dw,
                         .gate_out = buf[0],
                         .up_out = buf[1],
                         .glu = buf[2],
                         .rows = buf[3],
                         .out = buf[4]};
    bool plain = type == OX_DTYPE_F32 || type == OX_DTYPE_F16 || type == OX_DTYPE_BF16;
    CHECK_MSG(gpu.ops->moe_ffn(&gpu, &a), "moe %s n=%d k=%d", ox_dtype_name(type), n, k);
    CHECK_MSG(a.waited == (pairs > 8), "moe %s n=%d k=%d: waited %d", ox_dtype_name(type), n, k,
              a.waited);
    {
        int32_t *ids = malloc((size_t)pairs * 4), *got_ids = malloc((size_t)pairs * 4);
        float *w = malloc((size_t)pairs * 4), *want = calloc((size_t)n * d, 4);
        float *gh = malloc(ff * 4), *uh = malloc(ff * 4), *oh = malloc(d * 4);
        size_t gbytes = (size_t)ff * g.row_bytes, dbytes = (size_t)d * dn.row_bytes;
        for (int t = 0; t < n; t++) {
            top_experts(p + (size_t)t * n_expert, n_expert, k, ids + t * k, w + t * k);
            for (int j = 0; j < k; j++) {
                int e = ids[t * k + j];
                matmul_ref(type, hg + e * gbytes, ff, d, x + (size_t)t * d, 1, gh);
                matmul_ref(type, hu + e * gbytes, ff, d, x + (size_t)t * d, 1, uh);
                for (int i = 0; i < ff; i++)
                    gh[i] = silu(gh[i]) * uh[i];
                matmul_ref(type, hd + e * dbytes, d, ff, gh, 1, oh);
                for (int i = 0; i < d; i++)
                    want[(size_t)t * d + i] += w[t * k + j] * oh[i];
            }
        }
        if (!a.waited) { /* the grouped path reorders ids by expert */
            CHECK(gpu.ops->download(&gpu, got_ids, dids, (size_t)pairs * 4) == OX_OK);
            CHECK_MSG(!memcmp(ids, got_ids, (size_t)pairs * 4), "moe %s n=%d k=%d: experts chosen",
                      ox_dtype_name(type), n, k);
        }
        float *got = down(dy, (size_t)n * d);
        /* plain types: float activations, but f16 ones in the grouped path's cuBLAS products */
        double tol = !plain ? 3e-2 : a.waited ? 5e-3 : 1e-4;
        CHECK_CLOSE(got, want, (size_t)n * d, tol, "moe %s n=%d k=%d", ox_dtype_name(type), n, k);
        free(got), free(ids), free(got_ids), free(w), free(want), free(gh), free(uh), free(oh);
    }
    void *dev[] = {dx,
                   dp,
                   dids,
                   dw,
                   dy,
                   buf[0],
                   buf[1],
                   buf[2],
                   buf[3],
                   buf[4],
                   (void *)g.data,
                   (void *)u.data,
                   (void *)dn.data};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        gpu.ops->free(&gpu, dev[i]);
    free(x), free(p), free(hg), free(hu), free(hd);
}

static void test_moe(void) {
    static const enum ox_dtype types[] = {OX_DTYPE_Q4_0, OX_DTYPE_Q8_0, OX_DTYPE_Q4_K, OX_DTYPE_F16,
                                          OX_DTYPE_F32};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        static const int ns[] = {1, 3, 4, 5, 40};
        for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++)
            test_moe_case(types[i], 8, 2, ns[j]);
        test_moe_case(types[i], 8, 8, 1);  /* every expert */
        test_moe_case(types[i], 8, 8, 12); /* every expert, many tokens each (cuBLAS) */
    }
}

static void test_fused(void) {
    static const enum ox_dtype types[] = {OX_DTYPE_Q4_0, OX_DTYPE_Q8_0,   OX_DTYPE_Q4_K,
                                          OX_DTYPE_Q6_K, OX_DTYPE_IQ4_XS, OX_DTYPE_F16,
                                          OX_DTYPE_BF16, OX_DTYPE_F32};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        test_fused_type(types[i]);
    test_q8_reuse();
    test_glu_then_down(OX_DTYPE_Q4_0, OX_DTYPE_Q4_0, 2, 256, 1024);
    test_glu_then_down(OX_DTYPE_Q4_0, OX_DTYPE_Q4_0, 24, 256, 1024);
    test_glu_then_down(OX_DTYPE_Q4_K, OX_DTYPE_Q6_K, 40, 256, 1024);
    test_glu_then_down(OX_DTYPE_Q4_0, OX_DTYPE_Q4_K, 24, 256, 1024);
    /* gate and up of 8M weights together at 161-224 tokens: their 128 x 192 and 128 x 224
     * tiles */
    test_glu_then_down(OX_DTYPE_Q4_K, OX_DTYPE_Q6_K, 184, 2048, 2048);
    test_glu_then_down(OX_DTYPE_Q6_K, OX_DTYPE_Q4_K, 170, 2048, 2048);
    test_glu_then_down(OX_DTYPE_Q4_0, OX_DTYPE_Q4_0, 192, 2048, 2048);
    test_glu_then_down(OX_DTYPE_Q4_0, OX_DTYPE_Q4_0, 216, 2048, 2048);
    test_multi_mixed(24);
    test_multi_long(OX_DTYPE_Q4_0, 1);
    test_multi_long(OX_DTYPE_Q6_K, 1);
    test_multi_long(OX_DTYPE_F16, 1);
    if (half_mma(OX_DTYPE_F16, 5, 2048)) /* blocks of rows across the matrices' ends */
        test_multi_long(OX_DTYPE_F16, 5), test_multi_long(OX_DTYPE_BF16, 13);
    test_column_slice(OX_DTYPE_Q4_0);
    test_column_slice(OX_DTYPE_Q6_K);
    test_column_slice(OX_DTYPE_F16);
    test_normed(OX_DTYPE_Q4_0, 4096, 1);
    test_normed(OX_DTYPE_Q4_0, 2304, 1);
    test_normed(OX_DTYPE_Q6_K, 4096, 1);
    test_normed(OX_DTYPE_Q4_0, 4096, 24);
    test_normed(OX_DTYPE_Q4_0, 2304, 9);
    test_normed(OX_DTYPE_Q4_K, 4096, 40);
    test_normed(OX_DTYPE_Q6_K, 4096, 130);
    test_folded_norm();
    test_moe();
}

int main(void) {
    int st = ct_open(false);
    if (st)
        return st;
    test_matmul(); /* as for a small model, then as for a big one */
    test_fused();
    gpu.ops->release(&gpu);
    if (!ct_open_gpu(true))
        return 1;
    test_matmul();
    test_fused();
    ct_close();
    return test_finish("test_cuda_matmul");
}
