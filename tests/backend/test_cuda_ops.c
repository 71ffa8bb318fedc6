/* test_cuda_ops.c: every op of the CUDA backend against the CPU backend (or, for matmul, a
 * double-precision product of the dequantized weights) on random inputs, with per-op
 * tolerances. Needs a CUDA GPU; without one it reports itself skipped (exit 77). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "core/alloc.h"
#include "quant/dtype.h"
#include "test.h"

static struct backend cpu, gpu;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *random_floats(size_t n, float scale) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = frand() * scale;
    return x;
}

/* Device copy of host bytes. */
static void *up(const void *host, size_t bytes) {
    void *d = gpu.ops->alloc(&gpu, bytes);
    if (d && bytes)
        gpu.ops->upload(&gpu, d, host, bytes);
    return d;
}

static float *down(const float *d, size_t n) {
    float *h = malloc((n ? n : 1) * sizeof *h);
    CHECK_MSG(gpu.ops->download(&gpu, h, d, n * sizeof *h) == OX_OK, "download: %s",
              ox_last_error());
    return h;
}

/* ||got - want|| / ||want||; NaN anywhere counts as infinitely wrong. */
static double rel_err(const float *got, const float *want, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(got[i]) != isnan(want[i]))
            return INFINITY;
        double d = (double)got[i] - want[i];
        num += d * d, den += (double)want[i] * want[i];
    }
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

#define CHECK_CLOSE(got, want, n, tol, ...)                                                        \
    do {                                                                                           \
        double e_ = rel_err((got), (want), (n));                                                   \
        CHECK_MSG(e_ <= (tol), __VA_ARGS__);                                                       \
        if (e_ > (tol))                                                                            \
            fprintf(stderr, "  relative error %.3g, allowed %.3g\n", e_, (double)(tol));           \
    } while (0)

/* y = W x in double from the dequantized rows: what every matmul path must approach. */
static void matmul_ref(enum ox_dtype type, const void *w, int rows, int cols, const float *x, int n,
                       float *y) {
    float *row = malloc((size_t)cols * sizeof *row);
    size_t row_bytes = (size_t)cols / ox_dtype_block_size(type) * ox_dtype_type_size(type);
    for (int r = 0; r < rows; r++) {
        ox_dequantize(type, (const uint8_t *)w + (size_t)r * row_bytes, row, cols);
        for (int t = 0; t < n; t++) {
            double s = 0.0;
            for (int c = 0; c < cols; c++)
                s += (double)row[c] * x[(size_t)t * cols + c];
            y[(size_t)t * rows + r] = (float)s;
        }
    }
    free(row);
}

/* Types whose batches of up to 8 take the integer GEMV: x is rounded to int8 blocks (q8_1)
 * first, as llama.cpp's kernels do, which leaves 0.4 to 1.2% relative error (the most for the
 * types with an offset, whose levels are all positive); llama.cpp's own test allows 2.2%. */
static bool int8_gemv(enum ox_dtype t) {
    switch (t) {
    case OX_DTYPE_Q4_0:
    case OX_DTYPE_Q4_1:
    case OX_DTYPE_Q5_0:
    case OX_DTYPE_Q5_1:
    case OX_DTYPE_Q8_0:
    case OX_DTYPE_Q2_K:
    case OX_DTYPE_Q3_K:
    case OX_DTYPE_Q4_K:
    case OX_DTYPE_Q5_K:
    case OX_DTYPE_Q6_K:
    case OX_DTYPE_IQ4_NL:
    case OX_DTYPE_IQ4_XS: return true;
    default: return false;
    }
}

static double small_batch_tol(enum ox_dtype type) {
    return int8_gemv(type) ? 2e-2 : 2e-5;
}

/* rows x cols weights of a type against the reference for each batch size in ns (0 ends it),
 * and get_rows. */
static void test_matmul_shape(enum ox_dtype type, int rows, int cols, const int *ns) {
    size_t row_bytes = (size_t)cols / ox_dtype_block_size(type) * ox_dtype_type_size(type);
    float *wf = random_floats((size_t)rows * cols, 1.0f);
    uint8_t *w = malloc(row_bytes * rows);
    CHECK(ox_quantize(type, wf, w, rows, cols, NULL) == OX_OK);
    void *dw = up(w, row_bytes * rows);
    struct mat m = {type, dw, rows, cols, row_bytes, NULL};
    for (size_t k = 0; ns[k]; k++) {
        int n = ns[k];
        float *x = random_floats((size_t)n * cols, 1.0f), *want = malloc((size_t)n * rows * 4);
        matmul_ref(type, w, rows, cols, x, n, want);
        float *dx = up(x, (size_t)n * cols * 4), *dy = gpu.ops->alloc(&gpu, (size_t)n * rows * 4);
        gpu.ops->matmul(&gpu, &m, dx, dy, n);
        float *got = down(dy, (size_t)n * rows);
        /* batches over 8 multiply on the tensor cores: int8 for the integer types (x rounded
         * to q8_1 as for the GEMV), else f16 (bf16) operands; f32 sums */
        double tol = n <= 8 || int8_gemv(type) ? small_batch_tol(type)
                     : type == OX_DTYPE_F32    ? 2e-5
                     : type == OX_DTYPE_BF16   ? 1e-2
                                               : 2e-3;
        CHECK_CLOSE(got, want, (size_t)n * rows, tol, "matmul %s n=%d", ox_dtype_name(type), n);
        free(x), free(want), free(got);
        gpu.ops->free(&gpu, dx), gpu.ops->free(&gpu, dy);
    }
    /* get_rows dequantizes exactly as the CPU does */
    int32_t ids[5] = {0, rows - 1, 3, 3, rows / 2};
    int32_t *dids = up(ids, sizeof ids);
    float *dy = gpu.ops->alloc(&gpu, 5 * (size_t)cols * 4), *want = malloc(5 * (size_t)cols * 4);
    gpu.ops->get_rows(&gpu, &m, dids, dy, 5);
    float *got = down(dy, 5 * (size_t)cols);
    for (int t = 0; t < 5; t++)
        ox_dequantize(type, w + (size_t)ids[t] * row_bytes, want + (size_t)t * cols, cols);
    CHECK_MSG(!memcmp(got, want, 5 * (size_t)cols * 4), "get_rows %s", ox_dtype_name(type));
    free(got), free(want), free(wf), free(w);
    gpu.ops->free(&gpu, dids), gpu.ops->free(&gpu, dy), gpu.ops->free(&gpu, dw);
}

/* Weights whose dot products take q8_K activations (llama.cpp's CPU: the k-quants, iq4_xs):
 * their tensor-core batches round x as the CPU's q8_K does, so against the product with x
 * rounded on the CPU they differ by float rounding alone, not by the int8 tolerance. */
static void test_matmul_q8k(enum ox_dtype type) {
    /* 8 super-blocks: every type's rows are then 16-byte aligned, as the int8 kernel needs
     * (with 3, q2_K, q3_K, q6_K and iq4_xs rows are not, and their batches go to cuBLAS) */
    const int rows = 70, cols = 2048, n = 24;
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
    struct mat m = {type, dw, rows, cols, row_bytes, NULL};
    float *dx = up(x, (size_t)n * cols * 4), *dy = gpu.ops->alloc(&gpu, (size_t)n * rows * 4);
    gpu.ops->matmul(&gpu, &m, dx, dy, n);
    float *got = down(dy, (size_t)n * rows);
    CHECK_CLOSE(got, want, (size_t)n * rows, 1e-5, "matmul %s n=%d on q8_K activations",
                ox_dtype_name(type), n);
    free(wf), free(x), free(xr), free(want), free(w), free(xq), free(got);
    gpu.ops->free(&gpu, dw), gpu.ops->free(&gpu, dx), gpu.ops->free(&gpu, dy);
}

static void test_matmul_type(enum ox_dtype type) {
    static const int all[] = {1, 2, 5, 8, 9, 33, 128, 0}, one[] = {1, 2, 17, 0};
    test_matmul_shape(type, 67, 512, all);
    test_matmul_shape(type, 37, 4608, one); /* decode rows of several tiles */
    static const int wide[] = {200, 0};     /* several tiles of tokens and rows */
    test_matmul_shape(type, 300, 256, wide);
    static const int tail[] = {20, 0}; /* 7 groups of 32: a last stage of 3 */
    if (ox_dtype_block_size(type) == 32)
        test_matmul_shape(type, 45, 224, tail);
}

static void test_matmul(void) {
    int tested = 0;
    for (int t = 0; t < 64; t++) {
        if (!ox_dtype_valid(t) || !backend_cuda_supports((enum ox_dtype)t))
            continue;
        bool float_type = t == OX_DTYPE_F32 || t == OX_DTYPE_F16 || t == OX_DTYPE_BF16;
        if (!float_type &&
            (!ox_dtype_can_quantize((enum ox_dtype)t) || ox_dtype_needs_imatrix((enum ox_dtype)t)))
            continue;
        test_matmul_type((enum ox_dtype)t);
        if (int8_gemv((enum ox_dtype)t) && dtype_get(t)->vec_dot_type == OX_DTYPE_Q8_K)
            test_matmul_q8k((enum ox_dtype)t);
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
    struct mat m = {type, dw + skip, rows, w, row_bytes, NULL};
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
        double tol = n > 8 && !int8_gemv(type) ? 2e-3 : small_batch_tol(type);
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

/* A random rows x cols matrix of a type: host bytes in *host, the device copy in the result. */
static struct mat random_mat(enum ox_dtype type, int rows, int cols, uint8_t **host) {
    size_t row_bytes = (size_t)cols / ox_dtype_block_size(type) * ox_dtype_type_size(type);
    float *wf = random_floats((size_t)rows * cols, 1.0f);
    *host = malloc(row_bytes * rows);
    CHECK(ox_quantize(type, wf, *host, rows, cols, NULL) == OX_OK);
    free(wf);
    return (struct mat){type, up(*host, row_bytes * rows), rows, cols, row_bytes, NULL};
}

static float silu(float v) {
    return v / (1.0f + expf(-v));
}

/* The fused matmuls (q, k, v in one launch; gate and up with the GLU; y += W x) against the
 * reference, for batches the integer GEMV takes (y += W x also for the tensor-core matmul's
 * batches); they decline (false) everything else. */
static void test_fused_type(enum ox_dtype type) {
    const int cols = 2048, rows[3] = {96, 32, 96}; /* q6_K tiles need cols % 2048 == 0 */
    uint8_t *host[3];
    struct mat m[3];
    for (int i = 0; i < 3; i++)
        m[i] = random_mat(type, rows[i], cols, &host[i]);
    static const int ns[] = {1, 3, 8, 9, 40};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        int n = ns[k];
        bool plain = type == OX_DTYPE_F32 || type == OX_DTYPE_F16 || type == OX_DTYPE_BF16;
        /* plain types: float x, one token (f16 and bf16 without staging, f32 staged) */
        bool takes = plain ? n == 1 : n <= 8 && int8_gemv(type);
        double tol = plain ? 5e-5 : 2e-2; /* the integer types round x to int8 */
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
        /* y += W x: plain types take one token, every type cuBLAS's batches (past 8) */
        bool adds = n > 8 || (plain ? n == 1 : int8_gemv(type));
        double add_tol = !plain || n == 1        ? tol
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
    struct mat m = random_mat(OX_DTYPE_Q4_0, rows, cols, &host);
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

/* The gate/up GEMV quantizes its output for the down projection that reads it next. */
static void test_glu_then_down(void) {
    const int cols = 1024, ff = 256, rows = 32, n = 2;
    uint8_t *hg, *hu, *hd;
    struct mat g = random_mat(OX_DTYPE_Q4_0, ff, cols, &hg),
               u = random_mat(OX_DTYPE_Q4_0, ff, cols, &hu);
    struct mat d = random_mat(OX_DTYPE_Q4_0, rows, ff, &hd);
    float *x = random_floats((size_t)n * cols, 1.0f), *dx = up(x, (size_t)n * cols * 4);
    float *yg = malloc((size_t)n * ff * 4), *yu = malloc((size_t)n * ff * 4);
    float *want = malloc((size_t)n * rows * 4);
    matmul_ref(OX_DTYPE_Q4_0, hg, ff, cols, x, n, yg);
    matmul_ref(OX_DTYPE_Q4_0, hu, ff, cols, x, n, yu);
    for (int i = 0; i < n * ff; i++)
        yg[i] = silu(yg[i]) * yu[i];
    matmul_ref(OX_DTYPE_Q4_0, hd, rows, ff, yg, n, want);
    float *dh = gpu.ops->alloc(&gpu, (size_t)n * ff * 4),
          *dy = gpu.ops->alloc(&gpu, (size_t)n * rows * 4);
    CHECK(gpu.ops->matmul_glu(&gpu, GLU_SILU, &g, &u, dx, NULL, dh, n));
    gpu.ops->matmul(&gpu, &d, dh, dy, n);
    float *got = down(dy, (size_t)n * rows);
    CHECK_CLOSE(got, want, (size_t)n * rows, 3e-2, "glu, then down from its q8_1 output");
    free(got), free(x), free(yg), free(yu), free(want), free(hg), free(hu), free(hd);
    gpu.ops->free(&gpu, dx), gpu.ops->free(&gpu, dh), gpu.ops->free(&gpu, dy);
    gpu.ops->free(&gpu, (void *)g.data), gpu.ops->free(&gpu, (void *)u.data);
    gpu.ops->free(&gpu, (void *)d.data);
}

/* matmul_multi and matmul_glu with the RMSNorm inside (single tokens): as the CPU's norm, then
 * the reference. */
static void test_normed(enum ox_dtype type) {
    const int cols = 4096, rows = 64, n = 1;
    uint8_t *host[2];
    struct mat m[2] = {random_mat(type, rows, cols, &host[0]),
                       random_mat(type, rows, cols, &host[1])};
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
    /* two tokens would each block norm twice as much: declined */
    CHECK(!gpu.ops->matmul_multi(&gpu, 2, m, dx, &norm, dy, 2));
    CHECK(!gpu.ops->matmul_glu(&gpu, GLU_SILU, &m[0], &m[1], dx, &norm, dy[0], 2));
    CHECK(gpu.ops->matmul_multi(&gpu, 2, m, dx, &norm, dy, n));
    for (int i = 0; i < 2; i++) {
        float *got = down(dy[i], (size_t)n * rows);
        CHECK_CLOSE(got, want[i], (size_t)n * rows, small_batch_tol(type),
                    "normed multi %s matrix %d", ox_dtype_name(type), i);
        free(got);
    }
    CHECK(gpu.ops->matmul_glu(&gpu, GLU_SILU, &m[0], &m[1], dx, &norm, dy[0], n));
    for (int i = 0; i < n * rows; i++)
        want[0][i] = silu(want[0][i]) * want[1][i];
    float *got = down(dy[0], (size_t)n * rows);
    CHECK_CLOSE(got, want[0], (size_t)n * rows, int8_gemv(type) ? 3e-2 : 5e-5, "normed glu %s",
                ox_dtype_name(type));
    free(got), free(x), free(g), free(xn);
    gpu.ops->free(&gpu, dx), gpu.ops->free(&gpu, dg);
    for (int i = 0; i < 2; i++) {
        free(want[i]), free(host[i]);
        gpu.ops->free(&gpu, dy[i]), gpu.ops->free(&gpu, (void *)m[i].data);
    }
}

/* Long matrices: each warp streams several rows, across the q -> k -> v boundaries (at rows
 * that are no multiple of the rows per block). */
static void test_multi_long(enum ox_dtype type) {
    const int cols = 2048, rows[3] = {5000, 1000, 2440};
    uint8_t *host[3];
    struct mat m[3];
    float *want[3], *dy[3], *x = random_floats(cols, 1.0f), *dx = up(x, (size_t)cols * 4);
    for (int i = 0; i < 3; i++) {
        m[i] = random_mat(type, rows[i], cols, &host[i]);
        want[i] = malloc((size_t)rows[i] * 4);
        matmul_ref(type, host[i], rows[i], cols, x, 1, want[i]);
        dy[i] = gpu.ops->alloc(&gpu, (size_t)rows[i] * 4);
    }
    CHECK(gpu.ops->matmul_multi(&gpu, 3, m, dx, NULL, dy, 1));
    for (int i = 0; i < 3; i++) {
        float *got = down(dy[i], (size_t)rows[i]);
        CHECK_CLOSE(got, want[i], (size_t)rows[i], small_batch_tol(type), "long multi %s matrix %d",
                    ox_dtype_name(type), i);
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
    struct mat g = random_mat(type, n_expert * ff, d, &hg),
               u = random_mat(type, n_expert * ff, d, &hu);
    struct mat dn = random_mat(type, n_expert * d, ff, &hd);
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
    test_glu_then_down();
    test_multi_long(OX_DTYPE_Q4_0);
    test_multi_long(OX_DTYPE_Q6_K);
    test_multi_long(OX_DTYPE_F16);
    test_column_slice(OX_DTYPE_Q4_0);
    test_column_slice(OX_DTYPE_Q6_K);
    test_column_slice(OX_DTYPE_F16);
    test_normed(OX_DTYPE_Q4_0);
    test_normed(OX_DTYPE_Q6_K);
    test_moe();
}

/* Run a one-input row op on both backends: op(b, in, out) with n floats. */
typedef void (*row_op)(struct backend *b, const float *in, float *out);
static const float *g_row; /* the op's extra input (weights, ...), host and device */
static const float *g_row_dev;

static void compare_op(const char *name, row_op op, size_t n_in, size_t n_out, double tol) {
    float *x = random_floats(n_in, 3.0f), *want = calloc(n_out ? n_out : 1, 4);
    float *dx = up(x, n_in * 4), *dy = up(want, n_out * 4);
    op(&cpu, x, want);
    op(&gpu, dx, dy);
    float *got = down(dy, n_out);
    CHECK_CLOSE(got, want, n_out, tol, "%s", name);
    free(x), free(want), free(got);
    gpu.ops->free(&gpu, dx), gpu.ops->free(&gpu, dy);
}

static const float *extra(struct backend *b) {
    return b == &gpu ? g_row_dev : g_row;
}

enum { N = 7, DIM = 384 };

static void op_rms(struct backend *b, const float *x, float *y) {
    b->ops->rms_norm(b, x, extra(b), y, N, DIM, 1e-5f);
}
static void op_rms_nog(struct backend *b, const float *x, float *y) {
    b->ops->rms_norm(b, x, NULL, y, N, DIM, 1e-6f);
}
static void op_layer(struct backend *b, const float *x, float *y) {
    b->ops->layer_norm(b, x, extra(b), extra(b) + DIM, y, N, DIM, 1e-5f);
}
static void op_silu(struct backend *b, const float *x, float *y) {
    b->ops->glu(b, GLU_SILU, x, x + N * DIM, y, N * DIM);
}
static void op_geglu(struct backend *b, const float *x, float *y) {
    b->ops->glu(b, GLU_GELU, x, x + N * DIM, y, N * DIM);
}
static void op_gelu(struct backend *b, const float *x, float *y) {
    b->ops->gelu(b, x, y, N * DIM);
}
static void op_add(struct backend *b, const float *x, float *y) {
    b->ops->copy_rows(b, y, DIM, x, DIM, N, DIM);
    b->ops->add(b, y, x + N * DIM, N * DIM);
    b->ops->add_row(b, y, extra(b), N, DIM);
    b->ops->scale(b, y, 0.37f, N * DIM);
    b->ops->axpy(b, y, x, -1.5f, N * DIM);
}
static void op_softmax(struct backend *b, const float *x, float *y) {
    b->ops->copy_rows(b, y, DIM, x, DIM, N, DIM);
    b->ops->softmax(b, y, N, DIM);
}
static void op_softcap(struct backend *b, const float *x, float *y) {
    b->ops->copy_rows(b, y, DIM, x, DIM, N, DIM);
    b->ops->softcap(b, y, 2.5f, N * DIM);
}
static void op_copy_zero(struct backend *b, const float *x, float *y) {
    b->ops->copy_rows(b, y + 5, DIM, x + 2, DIM + 3, N, DIM - 9); /* strided */
    b->ops->zero(b, y + 2 * DIM, DIM);
}

/* The rope settings as each side reads them (frequency factors in its own memory). */
static struct rope_params g_rope, g_rope_dev;
static void op_rope(struct backend *b, const float *x, float *y) {
    b->ops->copy_rows(b, y, DIM, x, DIM, N, DIM);
    b->ops->rope(b, y, (const int32_t *)extra(b), N, DIM / 64, 64,
                 b == &gpu ? &g_rope_dev : &g_rope);
}

/* rope_store against the ops it fuses (rope of q and k, cache_store of k and v): the same
 * bits, for each cache type and rope variant. */
static void test_rope_store(const struct rope_params *rope) {
    enum { T = 3, HQ = 4, HKV = 2, HD = 64, CELLS = 6 };
    const int32_t pos[T] = {3, 900, 17}, cells[T] = {5, 0, 2};
    enum ox_dtype types[] = {OX_DTYPE_F32, OX_DTYPE_F16, OX_DTYPE_Q8_0};
    float *q = random_floats(T * HQ * HD, 2.0f), *k = random_floats(T * HKV * HD, 2.0f);
    float *v = random_floats(T * HKV * HD, 2.0f);
    int32_t *dpos = up(pos, sizeof pos), *dcells = up(cells, sizeof cells);
    float *dv = up(v, sizeof(float) * T * HKV * HD);
    for (size_t t = 0; t < 3; t++) {
        size_t row =
            (size_t)HKV * HD / ox_dtype_block_size(types[t]) * ox_dtype_type_size(types[t]);
        uint8_t *zero = calloc(CELLS, row), *got[2][2];
        float *qk[2][2];
        for (int fused = 0; fused < 2; fused++) {
            float *dq = up(q, sizeof(float) * T * HQ * HD),
                  *dk = up(k, sizeof(float) * T * HKV * HD);
            uint8_t *kc = up(zero, CELLS * row), *vc = up(zero, CELLS * row);
            if (fused) {
                struct rope_store_args a = {dq, dk,   dv,       dpos, T,  HQ,  HKV, HD,
                                            HD, rope, types[t], kc,   vc, row, row, dcells};
                CHECK_MSG(gpu.ops->rope_store(&gpu, &a), "rope_store declined");
            } else {
                gpu.ops->rope(&gpu, dq, dpos, T, HQ, HD, rope);
                gpu.ops->rope(&gpu, dk, dpos, T, HKV, HD, rope);
                gpu.ops->cache_store(&gpu, types[t], dk, T, HKV * HD, kc, row, dcells);
                gpu.ops->cache_store(&gpu, types[t], dv, T, HKV * HD, vc, row, dcells);
            }
            qk[fused][0] = down(dq, T * HQ * HD), qk[fused][1] = down(dk, T * HKV * HD);
            for (int c = 0; c < 2; c++) {
                got[fused][c] = malloc(CELLS * row);
                CHECK(gpu.ops->download(&gpu, got[fused][c], c ? vc : kc, CELLS * row) == OX_OK);
            }
            gpu.ops->free(&gpu, dq), gpu.ops->free(&gpu, dk), gpu.ops->free(&gpu, kc);
            gpu.ops->free(&gpu, vc);
        }
        CHECK_MSG(!memcmp(qk[0][0], qk[1][0], sizeof(float) * T * HQ * HD) &&
                      !memcmp(qk[0][1], qk[1][1], sizeof(float) * T * HKV * HD),
                  "rope_store q, k (%s, n_rot %d)", ox_dtype_name(types[t]), rope->n_rot);
        CHECK_MSG(!memcmp(got[0][0], got[1][0], CELLS * row) &&
                      !memcmp(got[0][1], got[1][1], CELLS * row),
                  "rope_store cache (%s, n_rot %d)", ox_dtype_name(types[t]), rope->n_rot);
        for (int f = 0; f < 2; f++)
            free(qk[f][0]), free(qk[f][1]), free(got[f][0]), free(got[f][1]);
        free(zero);
    }
    free(q), free(k), free(v);
    gpu.ops->free(&gpu, dpos), gpu.ops->free(&gpu, dcells), gpu.ops->free(&gpu, dv);
}

/* RMSNorm at the shapes its launch picks between: few rows (1024 threads: the weights the
 * registers hold before the wait cover 4096 dims, the rest come from memory) and many (256). */
static void test_rms_shapes(void) {
    static const int shapes[][2] = {{1, 4160}, {8, 5120}, {9, 4160}, {33, 2048}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int n = shapes[k][0], dim = shapes[k][1];
        float *x = random_floats((size_t)n * dim, 2.0f), *g = random_floats(dim, 1.0f);
        float *want = malloc((size_t)n * dim * 4), *dx = up(x, (size_t)n * dim * 4);
        float *dg = up(g, (size_t)dim * 4), *dy = gpu.ops->alloc(&gpu, (size_t)n * dim * 4);
        for (int weighted = 0; weighted < 2; weighted++) {
            cpu.ops->rms_norm(&cpu, x, weighted ? g : NULL, want, n, dim, 1e-5f);
            gpu.ops->rms_norm(&gpu, dx, weighted ? dg : NULL, dy, n, dim, 1e-5f);
            float *got = down(dy, (size_t)n * dim);
            CHECK_CLOSE(got, want, (size_t)n * dim, 1e-5, "rms_norm %d x %d, weight %d", n, dim,
                        weighted);
            free(got);
        }
        free(x), free(g), free(want);
        gpu.ops->free(&gpu, dx), gpu.ops->free(&gpu, dg), gpu.ops->free(&gpu, dy);
    }
}

static void test_rows(void) {
    float *g = random_floats(2 * DIM, 1.0f);
    g_row = g, g_row_dev = up(g, 2 * DIM * 4);
    compare_op("rms_norm", op_rms, N * DIM, N * DIM, 1e-5);
    compare_op("rms_norm without weight", op_rms_nog, N * DIM, N * DIM, 1e-5);
    test_rms_shapes();
    compare_op("layer_norm", op_layer, N * DIM, N * DIM, 1e-5);
    compare_op("glu silu", op_silu, 2 * N * DIM, N * DIM, 1e-5);
    compare_op("glu gelu", op_geglu, 2 * N * DIM, N * DIM, 2e-3); /* the CPU's f16 table */
    compare_op("gelu", op_gelu, N * DIM, N * DIM, 2e-3);
    compare_op("add, add_row, scale, axpy", op_add, 2 * N * DIM, N * DIM, 1e-6);
    compare_op("softmax", op_softmax, N * DIM, N * DIM, 1e-5);
    compare_op("softcap", op_softcap, N * DIM, N * DIM, 1e-5);
    compare_op("copy_rows, zero", op_copy_zero, N * (DIM + 3) + 8, N * DIM + 8, 0.0);
    gpu.ops->free(&gpu, (void *)g_row_dev);
    /* rope: positions up to 4000, normal and NeoX, partial, YaRN, frequency factors */
    int32_t pos[N] = {0, 1, 7, 100, 511, 2048, 4000};
    float ff[32];
    for (int i = 0; i < 32; i++)
        ff[i] = 1.0f + (float)i / 8.0f;
    float *dff = up(ff, sizeof ff);
    g_row = (const float *)pos, g_row_dev = up(pos, sizeof pos);
    struct rope_params variants[] = {
        {.n_rot = 64, .neox = false, .freq_base = 10000.0f, .freq_scale = 1.0f, .attn_factor = 1},
        {.n_rot = 64, .neox = true, .freq_base = 500000.0f, .freq_scale = 1.0f, .attn_factor = 1},
        {.n_rot = 32, .neox = true, .freq_base = 10000.0f, .freq_scale = 0.25f, .attn_factor = 1},
        {.n_rot = 64,
         .neox = true,
         .freq_base = 10000.0f,
         .freq_scale = 0.25f,
         .ext_factor = 1.0f,
         .attn_factor = 1.0f,
         .corr_dims = {8.0f, 24.0f}},
    };
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        g_rope = g_rope_dev = variants[v];
        compare_op("rope", op_rope, N * DIM, N * DIM, 2e-4);
    }
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++)
        test_rope_store(&variants[v]);
    g_rope = g_rope_dev = variants[1];
    g_rope.freq_factors = ff, g_rope_dev.freq_factors = dff;
    compare_op("rope with frequency factors", op_rope, N * DIM, N * DIM, 2e-4);
    gpu.ops->free(&gpu, (void *)g_row_dev), gpu.ops->free(&gpu, dff);
    free(g);
}

static void test_cache(void) {
    const int n = 5, dim = 256, cells = 9;
    enum ox_dtype types[] = {OX_DTYPE_F32, OX_DTYPE_F16, OX_DTYPE_Q8_0};
    int32_t where[5] = {8, 0, 3, 4, 6}, cell_pos[9] = {1, -1, -1, 2, 3, -1, 4, -1, 0};
    float *x = random_floats((size_t)n * dim, 2.0f);
    float *dx = up(x, (size_t)n * dim * 4);
    int32_t *dwhere = up(where, sizeof where), *dpos = up(cell_pos, sizeof cell_pos);
    for (size_t k = 0; k < 3; k++) {
        size_t row = (size_t)dim / ox_dtype_block_size(types[k]) * ox_dtype_type_size(types[k]);
        uint8_t *base = calloc(cells, row);
        float *want = calloc((size_t)cells * dim, 4);
        uint8_t *dbase = up(base, cells * row);
        float *dy = up(want, (size_t)cells * dim * 4);
        cpu.ops->cache_store(&cpu, types[k], x, n, dim, base, row, where);
        cpu.ops->cache_load(&cpu, types[k], base, row, want, cells, dim, cell_pos);
        gpu.ops->cache_store(&gpu, types[k], dx, n, dim, dbase, row, dwhere);
        gpu.ops->cache_load(&gpu, types[k], dbase, row, dy, cells, dim, dpos);
        float *got = down(dy, (size_t)cells * dim);
        CHECK_MSG(!memcmp(got, want, (size_t)cells * dim * 4), "cache %s", ox_dtype_name(types[k]));
        free(base), free(want), free(got);
        gpu.ops->free(&gpu, dbase), gpu.ops->free(&gpu, dy);
    }
    free(x);
    gpu.ops->free(&gpu, dx), gpu.ops->free(&gpu, dwhere), gpu.ops->free(&gpu, dpos);
}

/* Two sequences, free cells, GQA, then a window and soft-capping. */
/* A matmul of one row x (on the device at dx, and its host copy) that an op just wrote, by m
 * (64 rows, made before the op: an upload would make the backend forget its q8_1 copy),
 * against the reference from the host copy: a q8_1 copy the op left must be these rows. */
static void check_matmul_after(const struct mat *m, const uint8_t *host, const float *dx,
                               const float *x, const char *what) {
    float *want = malloc(64 * 4), *dy = gpu.ops->alloc(&gpu, 64 * 4);
    matmul_ref(m->type, host, 64, (int)m->n_cols, x, 1, want);
    gpu.ops->matmul(&gpu, m, dx, dy, 1);
    float *got = down(dy, 64);
    CHECK_CLOSE(got, want, 64, 2e-2, "matmul after %s", what);
    free(got), free(want);
    gpu.ops->free(&gpu, dy);
}

static void test_attention(void) {
    enum { NT = 6, CELLS = 300, HEADS = 8, KV_HEADS = 2, HD = 128 };
    int32_t q_pos[NT] = {3, 150, 151, 152, 0, 290}, q_seq[NT] = {0, 0, 0, 0, 77, 77};
    int32_t *cell_pos = malloc(CELLS * 4);
    uint64_t *cell_seq = calloc(CELLS * SEQ_WORDS, 8);
    for (int c = 0; c < CELLS; c++) { /* sequence 0 in even cells, 77 (word 1) in odd; some free */
        cell_pos[c] = c % 17 == 5 ? -1 : c / 2;
        if (cell_pos[c] >= 0 && c % 2)
            cell_seq[c * SEQ_WORDS + 1] = 1ull << (77 - 64);
        else if (cell_pos[c] >= 0)
            cell_seq[c * SEQ_WORDS] = 1;
    }
    float *q = random_floats(NT * HEADS * HD, 1.0f), *k = random_floats(CELLS * KV_HEADS * HD, 1);
    float *v = random_floats(CELLS * KV_HEADS * HD, 1.0f);
    float *dq = up(q, sizeof(float) * NT * HEADS * HD), *dk = up(k, 4 * CELLS * KV_HEADS * HD);
    float *dv = up(v, 4 * CELLS * KV_HEADS * HD), *dy = gpu.ops->alloc(&gpu, 4 * NT * HEADS * HD);
    int32_t *dqp = up(q_pos, sizeof q_pos), *dqs = up(q_seq, sizeof q_seq);
    int32_t *dcp = up(cell_pos, CELLS * 4);
    uint64_t *dcs = up(cell_seq, CELLS * SEQ_WORDS * 8);
    struct {
        int window;
        float softcap;
    } variants[] = {{0, 0.0f}, {64, 0.0f}, {0, 30.0f}, {20, 5.0f}};
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        float *want = malloc(4 * NT * HEADS * HD);
        struct attn_args a = {.q = q,
                              .k = k,
                              .v = v,
                              .y = want,
                              .n = NT,
                              .n_cells = CELLS,
                              .n_head = HEADS,
                              .n_head_kv = KV_HEADS,
                              .hd_k = HD,
                              .hd_v = HD,
                              .q_pos = q_pos,
                              .q_seq = q_seq,
                              .cell_pos = cell_pos,
                              .cell_seq = cell_seq,
                              .scale = 0.088f,
                              .softcap = variants[i].softcap,
                              .window = variants[i].window};
        cpu_attention_ref(&cpu, &a);
        struct attn_args d = a;
        d.q = dq, d.k = dk, d.v = dv, d.y = dy, d.q_pos = dqp, d.q_seq = dqs, d.cell_pos = dcp;
        d.cell_seq = dcs;
        gpu.ops->attention(&gpu, &d);
        float *got = down(dy, NT * HEADS * HD);
        CHECK_CLOSE(got, want, NT * HEADS * HD, 1e-5, "attention window %d softcap %g",
                    variants[i].window, variants[i].softcap);
        free(want), free(got);
    }
    /* the same from the cache's own rows (f32, f16, q8_0), as the forward pass hands them: the
     * CPU reads the rows back as floats first */
    enum ox_dtype types[] = {OX_DTYPE_F32, OX_DTYPE_F16, OX_DTYPE_Q8_0};
    int32_t *cells = malloc(CELLS * 4);
    for (int c = 0; c < CELLS; c++)
        cells[c] = c;
    int32_t *dcells = up(cells, CELLS * 4);
    uint8_t *wo_host;
    struct mat wo = random_mat(OX_DTYPE_Q4_0, 64, HEADS * HD, &wo_host);
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        size_t row =
            (size_t)KV_HEADS * HD / ox_dtype_block_size(types[i]) * ox_dtype_type_size(types[i]);
        uint8_t *kc = malloc(CELLS * row), *vc = malloc(CELLS * row);
        float *kf = malloc(4 * CELLS * KV_HEADS * HD), *vf = malloc(4 * CELLS * KV_HEADS * HD);
        float *want = malloc(4 * NT * HEADS * HD);
        cpu.ops->cache_store(&cpu, types[i], k, CELLS, KV_HEADS * HD, kc, row, cells);
        cpu.ops->cache_store(&cpu, types[i], v, CELLS, KV_HEADS * HD, vc, row, cells);
        cpu.ops->cache_load(&cpu, types[i], kc, row, kf, CELLS, KV_HEADS * HD, NULL);
        cpu.ops->cache_load(&cpu, types[i], vc, row, vf, CELLS, KV_HEADS * HD, NULL);
        struct attn_args a = {.q = q,
                              .k = kf,
                              .v = vf,
                              .y = want,
                              .n = NT,
                              .n_cells = CELLS,
                              .n_head = HEADS,
                              .n_head_kv = KV_HEADS,
                              .hd_k = HD,
                              .hd_v = HD,
                              .q_pos = q_pos,
                              .q_seq = q_seq,
                              .cell_pos = cell_pos,
                              .cell_seq = cell_seq,
                              .scale = 0.088f,
                              .window = 100};
        cpu_attention_ref(&cpu, &a);
        uint8_t *dkc = gpu.ops->alloc(&gpu, CELLS * row), *dvc = gpu.ops->alloc(&gpu, CELLS * row);
        gpu.ops->cache_store(&gpu, types[i], dk, CELLS, KV_HEADS * HD, dkc, row, dcells);
        gpu.ops->cache_store(&gpu, types[i], dv, CELLS, KV_HEADS * HD, dvc, row, dcells);
        for (int n = 1; n <= NT; n += NT - 1) { /* the decode kernel, then the tiled one */
            struct attn_args d = a;
            d.n = n, d.q = dq, d.k = d.v = NULL, d.y = dy, d.q_pos = dqp, d.q_seq = dqs;
            d.cell_pos = dcp, d.cell_seq = dcs, d.k_cache = dkc, d.v_cache = dvc;
            d.cache_type = types[i], d.k_row = d.v_row = row;
            gpu.ops->attention(&gpu, &d);
            float *got = down(dy, (size_t)n * HEADS * HD);
            CHECK_CLOSE(got, want, (size_t)n * HEADS * HD, 1e-5, "attention over a %s cache, n %d",
                        ox_dtype_name(types[i]), n);
            if (n == 1) /* the decode kernel left its output in q8_1 for the matmul next */
                check_matmul_after(&wo, wo_host, dy, got, "attention");
            free(got);
        }
        gpu.ops->free(&gpu, dkc), gpu.ops->free(&gpu, dvc);
        free(kc), free(vc), free(kf), free(vf), free(want);
    }
    gpu.ops->free(&gpu, dcells), gpu.ops->free(&gpu, (void *)wo.data);
    free(cells), free(wo_host);
    void *bufs[] = {dq, dk, dv, dy, dqp, dqs, dcp, dcs};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        gpu.ops->free(&gpu, bufs[i]);
    free(q), free(k), free(v), free(cell_pos), free(cell_seq);
}

/* Prompts over the cache on the tensor cores (f16 operands, P rounded to f16): 70 queries of
 * two sequences against the reference over the cache's values, for head sizes 64 to 256, GQA,
 * windows and soft-capping; free cells hold NaN values that must not reach the output. */
static void test_flash_attention(int hd, enum ox_dtype type, int window, float softcap, int nq) {
    enum { NQ = 70, CELLS = 300, HEADS = 8, KV_HEADS = 2 };
    int32_t q_pos[NQ], q_seq[NQ], cell_pos[CELLS], cells[CELLS];
    uint64_t *cell_seq = calloc(CELLS * SEQ_WORDS, 8);
    /* nq < 0: a decode step of -nq sequences (one query each, one_per_seq), sequence s
     * holding cells s, s - nq, ...; else the prompt's two sequences, one position per cell */
    int n_seq = nq < 0 ? -nq : 2;
    bool one_per_seq = nq < 0;
    nq = nq < 0 ? -nq : nq;
    for (int t = 0; t < NQ; t++)
        q_seq[t] = one_per_seq ? t % n_seq : t % 2 ? 77 : 0, q_pos[t] = 80 + t / 2;
    for (int c = 0; c < CELLS; c++) {
        int s = one_per_seq ? c % n_seq : c % 2 ? 77 : 0;
        cells[c] = c;
        cell_pos[c] = c % 17 == 5 ? -1 : c / n_seq;
        if (cell_pos[c] >= 0)
            cell_seq[c * SEQ_WORDS + s / 64] = 1ull << (s % 64);
    }
    size_t kv = (size_t)CELLS * KV_HEADS * hd;
    float *q = random_floats((size_t)NQ * HEADS * hd, 1.0f), *k = random_floats(kv, 1.0f);
    float *v = random_floats(kv, 1.0f);
    for (int c = 0; c < CELLS; c++)
        if (cell_pos[c] < 0)
            for (int i = 0; i < KV_HEADS * hd; i++)
                k[(size_t)c * KV_HEADS * hd + i] = v[(size_t)c * KV_HEADS * hd + i] = NAN;
    size_t row = (size_t)KV_HEADS * hd / ox_dtype_block_size(type) * ox_dtype_type_size(type);
    uint8_t *kc = malloc(CELLS * row), *vc = malloc(CELLS * row);
    float *kf = malloc(4 * kv), *vf = malloc(4 * kv), *want = malloc(4 * (size_t)NQ * HEADS * hd);
    cpu.ops->cache_store(&cpu, type, k, CELLS, KV_HEADS * hd, kc, row, cells);
    cpu.ops->cache_store(&cpu, type, v, CELLS, KV_HEADS * hd, vc, row, cells);
    cpu.ops->cache_load(&cpu, type, kc, row, kf, CELLS, KV_HEADS * hd, NULL);
    cpu.ops->cache_load(&cpu, type, vc, row, vf, CELLS, KV_HEADS * hd, NULL);
    struct attn_args a = {.q = q,
                          .k = kf,
                          .v = vf,
                          .y = want,
                          .n = nq,
                          .n_cells = CELLS,
                          .n_head = HEADS,
                          .n_head_kv = KV_HEADS,
                          .hd_k = hd,
                          .hd_v = hd,
                          .q_pos = q_pos,
                          .q_seq = q_seq,
                          .cell_pos = cell_pos,
                          .cell_seq = cell_seq,
                          .scale = 1.0f / sqrtf((float)hd),
                          .softcap = softcap,
                          .window = window,
                          .one_per_seq = one_per_seq};
    cpu_attention_ref(&cpu, &a);
    struct attn_args d = a;
    d.q = up(q, 4 * (size_t)NQ * HEADS * hd), d.k = d.v = NULL;
    d.y = gpu.ops->alloc(&gpu, 4 * (size_t)NQ * HEADS * hd);
    d.q_pos = up(q_pos, sizeof q_pos), d.q_seq = up(q_seq, sizeof q_seq);
    d.cell_pos = up(cell_pos, sizeof cell_pos), d.cell_seq = up(cell_seq, CELLS * SEQ_WORDS * 8);
    d.k_cache = up(kc, CELLS * row), d.v_cache = up(vc, CELLS * row);
    d.cache_type = type, d.k_row = d.v_row = row;
    gpu.ops->attention(&gpu, &d);
    float *got = down(d.y, (size_t)nq * HEADS * hd);
    CHECK_CLOSE(got, want, (size_t)nq * HEADS * hd, 3e-3,
                "flash attention hd %d over %s, window %d softcap %g, %d queries", hd,
                ox_dtype_name(type), window, softcap, nq);
    void *bufs[] = {(void *)d.q,        d.y,
                    (void *)d.q_pos,    (void *)d.q_seq,
                    (void *)d.cell_pos, (void *)d.cell_seq,
                    (void *)d.k_cache,  (void *)d.v_cache};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        gpu.ops->free(&gpu, bufs[i]);
    free(got), free(q), free(k), free(v), free(kc), free(vc), free(kf), free(vf), free(want);
    free(cell_seq);
}

static void test_flash(void) {
    static const int hds[] = {64, 80, 96, 128, 256};
    for (size_t i = 0; i < sizeof hds / sizeof hds[0]; i++) {
        test_flash_attention(hds[i], OX_DTYPE_F16, 0, 0.0f, 70);
        test_flash_attention(hds[i], OX_DTYPE_Q8_0, 0, 0.0f, 70);
    }
    /* decode steps of more sequences than a recorded step takes: the per-query kernel */
    test_flash_attention(64, OX_DTYPE_F16, 0, 0.0f, -20);
    test_flash_attention(128, OX_DTYPE_Q8_0, 0, 0.0f, -12);
    test_flash_attention(128, OX_DTYPE_F16, 20, 0.0f, 70);
    test_flash_attention(256, OX_DTYPE_F16, 50, 30.0f, 70);
    test_flash_attention(96, OX_DTYPE_F16, 0, 0.0f, 20); /* one block, partly filled */
}

int main(void) {
    if (!backend_cuda_available()) {
        printf("test_cuda_ops: no CUDA GPU here: skipped\n");
        return 77;
    }
    int64_t cols = 4096;
    cpu.ops = &backend_cpu_ops;
    cpu.scratch_per_thread = backend_cpu_scratch(cols);
    cpu.scratch = ox_aligned_alloc(OX_ALIGN, 2 * cpu.scratch_per_thread * sizeof(float));
    cpu.x_rounded = ox_aligned_alloc(OX_ALIGN, 256 * (size_t)cols * sizeof(float));
    cpu.x_packed = ox_aligned_alloc(OX_ALIGN, (size_t)cols * sizeof(float));
    /* batches of up to 256 rows of 4096, chunks of 1024 rows dequantized */
    struct cuda_sizes small = {256, cols, cols, (size_t)cols * 2048, false}, big = small;
    big.early_launch = true;
    if (threadpool_create(2, &cpu.pool) != OX_OK || backend_cuda_init(&gpu, &small) != OX_OK) {
        fprintf(stderr, "setup: %s\n", ox_last_error());
        return 1;
    }
    test_matmul(); /* as for a small model, then everything as for a big one */
    test_fused();
    backend_cuda_release(&gpu);
    if (backend_cuda_init(&gpu, &big) != OX_OK) {
        fprintf(stderr, "setup: %s\n", ox_last_error());
        return 1;
    }
    test_matmul();
    test_fused();
    test_rows();
    test_cache();
    test_attention();
    test_flash();
    backend_cuda_release(&gpu);
    threadpool_free(cpu.pool);
    ox_aligned_free(cpu.scratch), ox_aligned_free(cpu.x_rounded), ox_aligned_free(cpu.x_packed);
    return test_finish("test_cuda_ops");
}
