/* test_quantize.c: the reference quantizers checked byte for byte against llama.cpp (the shared
 * llama-<type> files re-made from llama-f32, and golden hashes of ggml's own quantizers on
 * seeded data with and without an importance matrix), plus round-trip error bounds, the
 * imatrix's effect and the API's error cases. */
#include <stdint.h>
#include <time.h>

#include "oxidize.h"
#include "quant/dtype.h"
#include "test.h"

/* ---- seeded inputs ----------------------------------------------------------------------------
 * The golden hashes below were computed by llama.cpp's ggml-quants.c (commit d32676d7, built
 * alone in a scratch folder with gcc -O2 -std=gnu11, and identical with -O0, -O3 and clang) from
 * exactly these rows and imatrices: this generator is a verbatim copy of the one in that
 * throwaway harness. Everything is plain float arithmetic on 24-bit uniforms, no libm. */
#define GEN_N_PER_ROW 512
#define GEN_N_KINDS   15

static uint64_t gen_next(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* uniform in [0, 1) with 24 random bits: exact in float */
static float gen_uniform(uint64_t *s) {
    return (float)(gen_next(s) >> 40) * 0x1p-24f;
}

/* roughly N(0, 1): a sum of four uniforms (Irwin-Hall), scaled to unit variance */
static float gen_normal(uint64_t *s) {
    float a = gen_uniform(s) + gen_uniform(s);
    float b = gen_uniform(s) + gen_uniform(s);
    return (a + b - 2.0f) * 1.7320508f;
}

static const uint32_t gen_specials[16] = {
    0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, /* inf, -inf, NaNs */
    0x7f80f000u, 0x00000001u, 0x80400000u, 0x477fefffu, /* NaN payload, subnormals, < 65520 */
    0x477ff000u, 0x33000000u, 0x33000001u, 0x387fc000u, /* 65520 (-> inf), fp16 tie cases */
    0x80000000u, 0x3f808000u, 0x3f818000u, 0x7f7fffffu, /* -0, bf16 ties, FLT_MAX */
};

/* One row of kind 0..GEN_N_KINDS-1. Kind 14 holds specials (inf, NaN, subnormals, rounding
 * ties, random bit patterns) and is fed only to the float types. */
static void gen_row(int kind, uint64_t seed, float *x, int n) {
    uint64_t s = seed * 1000003u + (uint64_t)kind;
    for (int j = 0; j < n; j++) {
        float v;
        switch (kind) {
        case 0: v = 0.02f * gen_normal(&s); break;                           /* weight-like */
        case 1: v = gen_normal(&s) * (j % 37 == 5 ? 8.0f : 1.0f); break;     /* outliers */
        case 2: v = 0.0f; break;                                             /* all zero */
        case 3: v = (j / 64) % 2 ? gen_normal(&s) : 0.0f; break;             /* zero sub-blocks */
        case 4: v = 1e-6f * gen_normal(&s); break;                           /* tiny */
        case 5: v = 1e4f * gen_normal(&s); break;                            /* huge */
        case 6: v = 0.37f; break;                                            /* all equal > 0 */
        case 7: v = -1.25f; break;                                           /* all equal < 0 */
        case 8: v = gen_uniform(&s); break;                                  /* all >= 0 */
        case 9: v = -gen_uniform(&s) - 0.5f; break;                          /* all < 0 */
        case 10: v = gen_uniform(&s) < 0.05f ? gen_normal(&s) : 0.0f; break; /* sparse */
        case 11: v = gen_normal(&s) * (float)(1 << ((j / 16) % 12)) * 0x1p-6f; break; /* scales */
        case 12: v = (float)((int)(gen_next(&s) % 17) - 8) * 0.5f; break; /* rounding ties */
        case 13: v = gen_normal(&s) + 3.0f; break;                        /* offset */
        default: {
            uint32_t u = j % 3 == 0 ? gen_specials[(j / 3) % 16] : (uint32_t)gen_next(&s);
            memcpy(&v, &u, 4);
        }
        }
        x[j] = v;
    }
}

/* Importance matrix variant 0: spread-out positive weights with a few zeros; variant 1: every
 * 13th column about 100 times more important than the rest. */
static void gen_imatrix(int variant, float *w, int n) {
    uint64_t s = 777u + (uint64_t)variant;
    for (int j = 0; j < n; j++) {
        float u = gen_uniform(&s);
        if (variant == 0)
            w[j] = j % 41 == 7 ? 0.0f : u * u * 4.0f + 0.001f;
        else
            w[j] = j % 13 == 0 ? 100.0f * (u + 0.5f) : u + 0.01f;
    }
}

/* FNV-1a 64 with the standard offset basis */
static uint64_t fnv1a64(const void *p, size_t n) {
    const uint8_t *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static size_t row_bytes(enum ox_dtype t, int64_t n_per_row) {
    return (size_t)(n_per_row / ox_dtype_block_size(t)) * ox_dtype_type_size(t);
}

/* ---- 1. the shared model files -------------------------------------------------------------
 * llama-<type>.gguf were made by llama.cpp's llama-quantize --pure from llama-f32.gguf without
 * an imatrix: every tensor of the type must come out byte-identical from the f32 weights. */

static const struct {
    const char *file;
    enum ox_dtype type;
} model_files[] = {
    {"llama-q4_0.gguf", OX_DTYPE_Q4_0},       {"llama-q4_1.gguf", OX_DTYPE_Q4_1},
    {"llama-q5_0.gguf", OX_DTYPE_Q5_0},       {"llama-q5_1.gguf", OX_DTYPE_Q5_1},
    {"llama-q8_0.gguf", OX_DTYPE_Q8_0},       {"llama-q2_k.gguf", OX_DTYPE_Q2_K},
    {"llama-q3_k.gguf", OX_DTYPE_Q3_K},       {"llama-q4_k.gguf", OX_DTYPE_Q4_K},
    {"llama-q5_k.gguf", OX_DTYPE_Q5_K},       {"llama-q6_k.gguf", OX_DTYPE_Q6_K},
    {"llama-tq1_0.gguf", OX_DTYPE_TQ1_0},     {"llama-tq2_0.gguf", OX_DTYPE_TQ2_0},
    {"llama-mxfp4_moe.gguf", OX_DTYPE_MXFP4}, {"llama-q1_0.gguf", OX_DTYPE_Q1_0},
    {"llama-q2_0.gguf", OX_DTYPE_Q2_0},       {"llama-f16.gguf", OX_DTYPE_F16},
    {"llama-bf16.gguf", OX_DTYPE_BF16},
};

static struct ox_gguf *open_model(const char *file) {
    char path[2048];
    snprintf(path, sizeof path, "%s/models/%s", test_data_dir(), file);
    struct ox_gguf *g = NULL;
    enum ox_status s = ox_gguf_open(path, &g);
    CHECK_MSG(s == OX_OK, "%s: %s (set OX_TESTDATA)", path, ox_last_error());
    return s == OX_OK ? g : NULL;
}

/* Re-quantizes one tensor t of type `type` from the f32 file; true when the bytes are equal. */
static bool requantize_matches(const struct ox_gguf *f32, const struct ox_tensor_info *t,
                               uint8_t *buf) {
    struct ox_tensor_info src;
    int64_t idx = ox_gguf_find_tensor(f32, t->name);
    CHECK_MSG(idx >= 0 && ox_gguf_tensor(f32, idx, &src) == OX_OK, "%s: not in llama-f32", t->name);
    if (idx < 0 || src.type != OX_DTYPE_F32 || memcmp(src.ne, t->ne, sizeof t->ne) != 0)
        return false;
    const int64_t n_rows = t->ne[1] * t->ne[2] * t->ne[3], n_per_row = t->ne[0];
    const size_t n_bytes = (size_t)n_rows * row_bytes(t->type, n_per_row);
    CHECK_EQ(n_bytes, t->n_bytes);
    memset(buf, 0xa5, n_bytes);
    CHECK_EQ(ox_quantize(t->type, src.data, buf, n_rows, n_per_row, NULL), OX_OK);
    bool same = memcmp(buf, t->data, n_bytes) == 0;
    if (!same) {
        size_t k = 0;
        while (buf[k] == ((const uint8_t *)t->data)[k])
            k++;
        fprintf(stderr, "  %s (%s): first byte difference at %zu of %zu (block %zu)\n", t->name,
                ox_dtype_name(t->type), k, n_bytes, k / ox_dtype_type_size(t->type));
    }
    return same;
}

static void test_model_files(void) {
    struct ox_gguf *f32 = open_model("llama-f32.gguf");
    if (!f32)
        return;
    uint8_t *buf = malloc((size_t)8 << 20);
    printf(
        "1. llama-<type>.gguf re-made from llama-f32 (tensors byte-identical / of the type):\n  ");
    for (size_t i = 0; i < sizeof model_files / sizeof model_files[0]; i++) {
        struct ox_gguf *g = open_model(model_files[i].file);
        if (!g)
            continue;
        int n = 0, same = 0;
        for (int64_t k = 0; k < ox_gguf_n_tensors(g); k++) {
            struct ox_tensor_info t;
            if (ox_gguf_tensor(g, k, &t) != OX_OK || t.type != model_files[i].type)
                continue;
            CHECK(t.n_bytes <= ((size_t)8 << 20));
            n++;
            same += t.n_bytes <= ((size_t)8 << 20) && requantize_matches(f32, &t, buf);
        }
        CHECK_MSG(n > 0 && same == n, "%s: %d of %d %s tensors identical", model_files[i].file,
                  same, n, ox_dtype_name(model_files[i].type));
        printf(" %s %d/%d", ox_dtype_name(model_files[i].type), same, n);
        ox_gguf_free(g);
    }
    printf("\n");
    free(buf);
    ox_gguf_free(f32);
}

/* ---- 2. golden hashes of ggml's quantizers on the seeded rows ------------------------------
 * Rows: kinds 0..13 (float types: 0..14) of gen_row(kind, 42, ., 512), quantized as one call
 * of n_rows x 512 with no imatrix, with gen_imatrix(0) and with gen_imatrix(1). ggml's output
 * buffer was zeroed first (it leaves q8_K's bsums of an all-zero block unwritten). */

static const struct {
    enum ox_dtype type;
    uint64_t hash[3]; /* no imatrix, imatrix 0, imatrix 1 */
} golden[] = {
    {OX_DTYPE_F32, {0xae4a76ac2651daedull, 0xae4a76ac2651daedull, 0xae4a76ac2651daedull}},
    {OX_DTYPE_F16, {0x4d3ac4718f383b4full, 0x4d3ac4718f383b4full, 0x4d3ac4718f383b4full}},
    {OX_DTYPE_BF16, {0xd5642faa43917602ull, 0xd5642faa43917602ull, 0xd5642faa43917602ull}},
    {OX_DTYPE_Q1_0, {0x222530d988836155ull, 0x222530d988836155ull, 0x222530d988836155ull}},
    {OX_DTYPE_Q2_0, {0x7f4f6262bb90a403ull, 0x7f4f6262bb90a403ull, 0x7f4f6262bb90a403ull}},
    {OX_DTYPE_Q4_0, {0xfb6ed3d082001082ull, 0xf2d7e27aeb8fe4f5ull, 0x3cee94bdb41ba468ull}},
    {OX_DTYPE_Q4_1, {0x8abae280949709deull, 0x1f87444d81765c80ull, 0x6461f9f2c4000ce8ull}},
    {OX_DTYPE_Q5_0, {0x757575aa1468ddabull, 0x88a4208a6acdf031ull, 0x99f85bec9e5beddcull}},
    {OX_DTYPE_Q5_1, {0x4b869fbc44bf1909ull, 0x95a6ef3fe3ded3f0ull, 0x3f5666bc8c69bd44ull}},
    {OX_DTYPE_Q8_0, {0xe5322f1587e810c6ull, 0xe5322f1587e810c6ull, 0xe5322f1587e810c6ull}},
    {OX_DTYPE_Q8_1, {0xe11ec441ebfebaadull, 0xe11ec441ebfebaadull, 0xe11ec441ebfebaadull}},
    {OX_DTYPE_Q2_K, {0x0aff125a704710a9ull, 0x16ea9d38f109ac36ull, 0x6f1980eba9e681dfull}},
    {OX_DTYPE_Q3_K, {0x2e848550f52a25eaull, 0x2cfde6760c195455ull, 0xd9dfea7d7b2940d4ull}},
    {OX_DTYPE_Q4_K, {0x4d846fac8a614e50ull, 0x380fdb4958d3c779ull, 0x7caa80717ec35aafull}},
    {OX_DTYPE_Q5_K, {0xa14db228b92761f7ull, 0x631ae24d92c47822ull, 0xba7f7ee098aa841bull}},
    {OX_DTYPE_Q6_K, {0x5f09f0538383f8ffull, 0xe88a5a868a4bce56ull, 0xd03dd68595d656dfull}},
    {OX_DTYPE_Q8_K, {0x11e0de69172cffb5ull, 0x11e0de69172cffb5ull, 0x11e0de69172cffb5ull}},
    {OX_DTYPE_TQ1_0, {0xa22f08686590101aull, 0xa22f08686590101aull, 0xa22f08686590101aull}},
    {OX_DTYPE_TQ2_0, {0x9f8428f7b33739bcull, 0x9f8428f7b33739bcull, 0x9f8428f7b33739bcull}},
    {OX_DTYPE_MXFP4, {0x8fefde061b5410a7ull, 0x8fefde061b5410a7ull, 0x8fefde061b5410a7ull}},
    {OX_DTYPE_NVFP4, {0x43051511c31de5cdull, 0x43051511c31de5cdull, 0x43051511c31de5cdull}},
};

static bool is_float_type(enum ox_dtype t) {
    return t == OX_DTYPE_F32 || t == OX_DTYPE_F16 || t == OX_DTYPE_BF16;
}

static void test_golden(void) {
    const int np = GEN_N_PER_ROW;
    float *x = malloc(sizeof(float) * GEN_N_KINDS * np);
    float imx[2][GEN_N_PER_ROW];
    for (int k = 0; k < GEN_N_KINDS; k++)
        gen_row(k, 42, x + k * np, np);
    gen_imatrix(0, imx[0], np);
    gen_imatrix(1, imx[1], np);
    uint8_t *out = malloc(4 * GEN_N_KINDS * np);
    printf("2. golden hashes of ggml's quantize_* (no imatrix / imatrix 0 / imatrix 1):\n  ");
    for (size_t i = 0; i < sizeof golden / sizeof golden[0]; i++) {
        const enum ox_dtype t = golden[i].type;
        const int n_rows = is_float_type(t) ? GEN_N_KINDS : GEN_N_KINDS - 1;
        const size_t n_bytes = (size_t)n_rows * row_bytes(t, np);
        int ok = 0;
        for (int v = 0; v < 3; v++) {
            memset(out, 0, 4 * GEN_N_KINDS * np);
            const float *im = v ? imx[v - 1] : NULL;
            CHECK_EQ(dtype_get(t)->from_float(x, out, n_rows, np, im), n_bytes);
            const uint64_t h = fnv1a64(out, n_bytes);
            CHECK_MSG(h == golden[i].hash[v], "%s variant %d: hash 0x%016llx, ggml 0x%016llx",
                      ox_dtype_name(t), v, (unsigned long long)h,
                      (unsigned long long)golden[i].hash[v]);
            ok += h == golden[i].hash[v];
        }
        printf(" %s %d/3", ox_dtype_name(t), ok);
    }
    printf("\n");
    free(out);
    free(x);
}

/* ---- 3. round-trip error ---------------------------------------------------------------------
 * N(0, 1)-like data, 64 rows x 512: quantize, dequantize with ox_dequantize, RMSE. The bounds
 * are 1.5x the values measured when the byte-identical quantizers were written (for the
 * coarsest types, whose RMSE is above 0.5, about halfway to 1.0, the RMSE of an all-zero
 * output), so a quantizer that goes wrong (levels off by one, a bad scale) fails them.
 * uses_imatrix: ggml's quantize_<type> reads quant_weights; for those the imatrix-weighted error
 * with the skewed imatrix 1 must not exceed the error without it. */

#define RT_ROWS 64

static const struct {
    enum ox_dtype type;
    double rmse_bound;
    bool uses_imatrix;
} roundtrip[] = {
    {OX_DTYPE_F32, 0.0, false},     {OX_DTYPE_F16, 3.2e-4, false},  {OX_DTYPE_BF16, 2.6e-3, false},
    {OX_DTYPE_Q1_0, 0.70, false},   {OX_DTYPE_Q2_0, 0.80, false},   {OX_DTYPE_Q4_0, 0.124, true},
    {OX_DTYPE_Q4_1, 0.115, true},   {OX_DTYPE_Q5_0, 0.061, true},   {OX_DTYPE_Q5_1, 0.056, true},
    {OX_DTYPE_Q8_0, 7.7e-3, false}, {OX_DTYPE_Q8_1, 7.7e-3, false}, {OX_DTYPE_Q2_K, 0.435, true},
    {OX_DTYPE_Q3_K, 0.22, true},    {OX_DTYPE_Q4_K, 0.104, true},   {OX_DTYPE_Q5_K, 0.053, true},
    {OX_DTYPE_Q6_K, 0.0255, true},  {OX_DTYPE_Q8_K, 9.4e-3, false}, {OX_DTYPE_TQ1_0, 0.85, false},
    {OX_DTYPE_TQ2_0, 0.85, false},  {OX_DTYPE_MXFP4, 0.173, false}, {OX_DTYPE_NVFP4, 0.145, false},
};

struct rt_error {
    double rmse, weighted; /* weighted: sum imatrix[col] * err^2 / sum imatrix, per element */
};

static struct rt_error roundtrip_error(enum ox_dtype t, const float *x, const float *imx,
                                       const float *quant_imx, uint8_t *q, float *y) {
    const int64_t np = GEN_N_PER_ROW, n = RT_ROWS * np;
    CHECK_EQ(ox_quantize(t, x, q, RT_ROWS, np, quant_imx), OX_OK);
    CHECK_EQ(ox_dequantize(t, q, y, n), OX_OK);
    double se = 0, wse = 0, wsum = 0;
    for (int64_t i = 0; i < n; i++) {
        const double e = (double)x[i] - (double)y[i];
        se += e * e;
        wse += imx[i % np] * e * e;
        wsum += imx[i % np];
    }
    return (struct rt_error){sqrt(se / (double)n), wse / wsum};
}

static void test_roundtrip(void) {
    const int64_t np = GEN_N_PER_ROW, n = RT_ROWS * np;
    float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
    uint8_t *q = malloc(sizeof(float) * (size_t)n);
    float imx[GEN_N_PER_ROW];
    uint64_t s = 2024;
    for (int64_t i = 0; i < n; i++)
        x[i] = gen_normal(&s);
    gen_imatrix(1, imx, GEN_N_PER_ROW);
    printf("3. round trip on N(0,1) data, %d x %d (weighted: error^2 under imatrix 1):\n", RT_ROWS,
           GEN_N_PER_ROW);
    printf("   type     bits/w   RMSE       weighted    | with imatrix: RMSE   weighted\n");
    for (size_t i = 0; i < sizeof roundtrip / sizeof roundtrip[0]; i++) {
        const enum ox_dtype t = roundtrip[i].type;
        const double bpw = 8.0 * (double)ox_dtype_type_size(t) / (double)ox_dtype_block_size(t);
        const struct rt_error plain = roundtrip_error(t, x, imx, NULL, q, y);
        printf("   %-8s %6.4f   %-9.3e  %-10.3e", ox_dtype_name(t), bpw, plain.rmse,
               plain.weighted);
        CHECK_MSG(plain.rmse <= roundtrip[i].rmse_bound, "%s: RMSE %g above %g", ox_dtype_name(t),
                  plain.rmse, roundtrip[i].rmse_bound);
        if (roundtrip[i].uses_imatrix) {
            const struct rt_error w = roundtrip_error(t, x, imx, imx, q, y);
            printf("  |               %-9.3e  %-10.3e", w.rmse, w.weighted);
            CHECK_MSG(w.weighted <= plain.weighted,
                      "%s: imatrix raised the weighted error %g -> %g", ox_dtype_name(t),
                      plain.weighted, w.weighted);
            CHECK_MSG(w.rmse <= 1.5 * roundtrip[i].rmse_bound, "%s: imatrix RMSE %g",
                      ox_dtype_name(t), w.rmse);
        }
        printf("\n");
    }
    free(q);
    free(y);
    free(x);
}

/* ---- 4. API behaviour --------------------------------------------------------------------- */

static void test_errors(void) {
    float src[256] = {0};
    uint8_t dst[1024];
    CHECK_EQ(ox_quantize(OX_DTYPE_Q4_0, src, dst, 1, 33, NULL), OX_ERR_INVALID_ARG);
    CHECK_STR(ox_last_error(), "quantize: 1 x 33 does not fit q4_0's block size 32");
    CHECK_EQ(ox_quantize(OX_DTYPE_Q4_K, src, dst, 1, 128, NULL), OX_ERR_INVALID_ARG);
    CHECK(strstr(ox_last_error(), "q4_K's block size 256") != NULL);
    CHECK_EQ(ox_quantize(OX_DTYPE_Q1_0, src, dst, 1, 64, NULL), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_quantize(OX_DTYPE_Q8_0, src, dst, 1, 0, NULL), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_quantize(OX_DTYPE_Q8_0, src, dst, -1, 32, NULL), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_quantize(OX_DTYPE_Q8_0, NULL, dst, 1, 32, NULL), OX_ERR_INVALID_ARG);
    CHECK_STR(ox_last_error(), "quantize: src is NULL");
    CHECK_EQ(ox_quantize(OX_DTYPE_Q8_0, src, NULL, 1, 32, NULL), OX_ERR_INVALID_ARG);
    CHECK_STR(ox_last_error(), "quantize: dst is NULL");
    CHECK_EQ(ox_quantize(OX_DTYPE_F64, src, dst, 1, 32, NULL), OX_ERR_UNSUPPORTED);
    CHECK_STR(ox_last_error(), "quantize: cannot quantize to f64");
    CHECK_EQ(ox_quantize(OX_DTYPE_I32, src, dst, 1, 32, NULL), OX_ERR_UNSUPPORTED);
    CHECK_EQ(ox_quantize(OX_DTYPE_I8, src, dst, 1, 32, NULL), OX_ERR_UNSUPPORTED);
    CHECK_EQ(ox_quantize((enum ox_dtype)4, src, dst, 1, 32, NULL), OX_ERR_UNSUPPORTED);
    CHECK_EQ(ox_quantize((enum ox_dtype)99, src, dst, 1, 32, NULL), OX_ERR_UNSUPPORTED);
    CHECK(!ox_dtype_can_quantize(OX_DTYPE_F64) && !ox_dtype_can_quantize(OX_DTYPE_I16));
    /* every type here quantizes without an imatrix; q8_1 and q8_K are activation types, made by
     * ox_quantize but not offered as weight types */
    for (size_t i = 0; i < sizeof golden / sizeof golden[0]; i++) {
        const enum ox_dtype t = golden[i].type;
        const bool activation = t == OX_DTYPE_Q8_1 || t == OX_DTYPE_Q8_K;
        CHECK_MSG(ox_dtype_can_quantize(t) == !activation, "%s", ox_dtype_name(t));
        CHECK(!ox_dtype_needs_imatrix(t));
    }
    /* zero rows is a valid empty call that writes nothing */
    memset(dst, 0x5a, sizeof dst);
    CHECK_EQ(ox_quantize(OX_DTYPE_Q4_K, src, dst, 0, 256, NULL), OX_OK);
    CHECK_EQ(dst[0], 0x5a);
}

/* Any dst alignment gives the same bytes, and rows are independent: quantizing row by row
 * (with the same imatrix) equals one call over all rows. */
static void test_alignment_and_rows(void) {
    const int np = GEN_N_PER_ROW, n_rows = GEN_N_KINDS - 1;
    float *x = malloc(sizeof(float) * (size_t)(n_rows * np));
    float imx[GEN_N_PER_ROW];
    for (int k = 0; k < n_rows; k++)
        gen_row(k, 7, x + k * np, np);
    gen_imatrix(0, imx, np);
    uint8_t *a = malloc(4 * (size_t)(n_rows * np) + 1), *b = malloc(4 * (size_t)(n_rows * np) + 1);
    for (size_t i = 0; i < sizeof golden / sizeof golden[0]; i++) {
        const enum ox_dtype t = golden[i].type;
        const size_t rb = row_bytes(t, np);
        CHECK_EQ(ox_quantize(t, x, a, n_rows, np, imx), OX_OK);
        for (int r = 0; r < n_rows; r++)
            CHECK_EQ(ox_quantize(t, x + r * np, b + 1 + r * rb, 1, np, imx), OX_OK);
        CHECK_MSG(memcmp(a, b + 1, rb * (size_t)n_rows) == 0, "%s: rows or alignment differ",
                  ox_dtype_name(t));
    }
    free(b);
    free(a);
    free(x);
}

int main(void) {
    const clock_t t0 = clock();
    test_model_files();
    test_golden();
    test_roundtrip();
    test_errors();
    test_alignment_and_rows();
    printf("(%.2f s CPU)\n", (double)(clock() - t0) / CLOCKS_PER_SEC);
    return test_finish("test_quantize");
}
