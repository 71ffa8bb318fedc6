/* test_quantize_iq.c: the i-quant quantizers (iq4_nl ... iq1_m) checked byte for byte against
 * llama.cpp (the shared llama-<type> files re-made from llama-f32, and golden hashes of ggml's
 * own quantizers on seeded rows with and without an importance matrix), plus round-trip error
 * bounds, the imatrix requirement and concurrent first use of the lazily built grids. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>

#include "oxidize.h"
#include "quant/dtype.h"
#include "test.h"

/* ---- seeded inputs ------------------------------------------------------------------------
 * The golden hashes below were computed by llama.cpp's ggml/src/ggml-quants.c (commit
 * d32676d7 of the unslothai mirror) built alone in a scratch folder (gcc 12 -O0 and -O3, clang 14
 * -O2: the same hashes; default x86-64 target, as ggml-base is built, so no FMA contraction),
 * from exactly these rows: the generator is a verbatim copy of the one in that throwaway
 * harness. Plain float arithmetic on 24-bit uniforms, no libm: the same bits everywhere. */
#define GD_ROWS    20
#define GD_PER_ROW 512

static uint64_t gd_next(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* uniform in [0, 1), 24 random bits: exact in float */
static float gd_uniform(uint64_t *s) {
    return (float)(gd_next(s) >> 40) * 0x1p-24f;
}

/* roughly normal(0, 1): the sum of four uniforms (Irwin-Hall), no libm involved */
static float gd_normal(uint64_t *s) {
    float a = gd_uniform(s);
    a += gd_uniform(s);
    a += gd_uniform(s);
    a += gd_uniform(s);
    return (a - 2.0f) * 1.7320508f;
}

/* Row r of the input: plain normal rows plus the awkward ones. */
static void gd_row(int r, float *x, uint64_t *s) {
    for (int j = 0; j < GD_PER_ROW; j++) {
        float v = gd_normal(s);
        switch (r) {
        case 0: v = 0.0f; break;                          /* all zero */
        case 1: v = 0.75f; break;                         /* all equal */
        case 2: v = -3.0f; break;                         /* all equal, negative */
        case 3: v *= 3e4f; break;                         /* huge */
        case 4: v *= 2e7f; break;                         /* scales overflow fp16 */
        case 5: v *= 1e-6f; break;                        /* tiny */
        case 6: v *= 1e-10f; break;                       /* below some group epsilons */
        case 7: v = j % 40 == 7 ? 2.0f * v : 0.0f; break; /* sparse: whole sub-blocks zero */
        case 8: v = (j / 32) % 2 ? v : 0.0f; break;       /* every other 32 zero */
        case 9: v = (float)(int)(1.5f * v); break;        /* few distinct values: ties */
        case 10: v = j == 100 ? 50.0f : v; break;         /* one outlier */
        case 11: v = v < 0 ? -v : v; break;               /* all positive */
        case 12: v *= 1.0f + (float)(j / 16 % 8); break;  /* sub-block scales differ */
        case 13: v = (j / 16) % 3 == 0 ? 0.0f : v; break; /* zero groups of 16 */
        default: break;                                   /* plain normal */
        }
        x[j] = v;
    }
}

static void gd_inputs(float *x, float *imatrix) {
    uint64_t s = 0x1d2c3b4a59687786ull;
    for (int r = 0; r < GD_ROWS; r++)
        gd_row(r, x + (size_t)r * GD_PER_ROW, &s);
    for (int j = 0; j < GD_PER_ROW; j++) /* some zero columns, and one zero run of 32 */
        imatrix[j] = j % 61 == 5 || (j >= 448 && j < 480) ? 0.0f : 0.05f + 3.0f * gd_uniform(&s);
}

static uint64_t gd_fnv1a(const void *p, size_t n) {
    const uint8_t *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* ---- the types ----------------------------------------------------------------------------- */

struct iq_case {
    enum ox_dtype type;
    uint64_t golden_plain;   /* FNV-1a 64 of ggml's output without an imatrix (0: not allowed) */
    uint64_t golden_imatrix; /* ... with the seeded imatrix */
};

static const struct iq_case cases[] = {
    {OX_DTYPE_IQ4_NL, 0x0f783f98d76c316dull, 0x4e5524ff6b14aac1ull},
    {OX_DTYPE_IQ4_XS, 0x43ebdff101ca77f3ull, 0x5d62394fb53dd481ull},
    {OX_DTYPE_IQ3_S, 0xa18f5ee363aa86ccull, 0xf3d1e335d831a4fcull},
    {OX_DTYPE_IQ3_XXS, 0x954f0b03e1a02a4cull, 0x7e0920d3a55b9f56ull},
    {OX_DTYPE_IQ2_S, 0x81b5f8056b8a32caull, 0x12800b9f57aeadfdull},
    {OX_DTYPE_IQ2_XS, 0, 0xc42e9a8359662585ull},
    {OX_DTYPE_IQ2_XXS, 0, 0x3113c29c870475caull},
    {OX_DTYPE_IQ1_M, 0x706363fce32f4684ull, 0xa5ed3497f6326317ull},
    {OX_DTYPE_IQ1_S, 0, 0xb2791159b4b1b97cull},
};
#define N_CASES (sizeof cases / sizeof cases[0])

static size_t row_bytes(enum ox_dtype t, int64_t n_per_row) {
    return (size_t)(n_per_row / ox_dtype_block_size(t)) * ox_dtype_type_size(t);
}

/* ---- 1. the shared files ------------------------------------------------------------------- */

/* Re-quantizes every tensor that llama-<type>.gguf holds in that type from llama-f32.gguf and
 * compares the bytes; returns how many matched (*n_total: how many there were). */
static int check_shared_file(enum ox_dtype type, int *n_total) {
    char path[1024];
    struct ox_gguf *f32 = NULL, *q = NULL;
    int matched = 0;
    *n_total = 0;
    snprintf(path, sizeof path, "%s/models/llama-f32.gguf", test_data_dir());
    CHECK_MSG(ox_gguf_open(path, &f32) == OX_OK, "%s: %s", path, ox_last_error());
    snprintf(path, sizeof path, "%s/models/llama-%s.gguf", test_data_dir(), ox_dtype_name(type));
    CHECK_MSG(ox_gguf_open(path, &q) == OX_OK, "%s: %s", path, ox_last_error());
    for (int64_t i = 0; f32 && q && i < ox_gguf_n_tensors(q); i++) {
        struct ox_tensor_info tq, tf;
        CHECK(ox_gguf_tensor(q, i, &tq) == OX_OK);
        if (tq.type != type)
            continue; /* norms stay f32 */
        (*n_total)++;
        const int64_t idx = ox_gguf_find_tensor(f32, tq.name);
        CHECK_MSG(idx >= 0 && ox_gguf_tensor(f32, idx, &tf) == OX_OK, "%s missing", tq.name);
        if (idx < 0 || tf.type != OX_DTYPE_F32)
            continue;
        const int64_t rows = tf.ne[1] * tf.ne[2] * tf.ne[3];
        const size_t size = (size_t)rows * row_bytes(type, tf.ne[0]);
        uint8_t *out = malloc(size);
        CHECK(out && size == tq.n_bytes);
        if (out && ox_quantize(type, tf.data, out, rows, tf.ne[0], NULL) == OX_OK &&
            size == tq.n_bytes && memcmp(out, tq.data, size) == 0)
            matched++;
        else
            fprintf(stderr, "  %s %s: bytes differ\n", ox_dtype_name(type), tq.name);
        free(out);
    }
    ox_gguf_free(f32);
    ox_gguf_free(q);
    return matched;
}

static void test_shared_files(void) {
    const enum ox_dtype types[] = {OX_DTYPE_IQ4_NL, OX_DTYPE_IQ4_XS, OX_DTYPE_IQ3_S};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        int total = 0;
        const int matched = check_shared_file(types[i], &total);
        printf("llama-%s.gguf: %d of %d tensors byte-identical\n", ox_dtype_name(types[i]), matched,
               total);
        CHECK(total > 0);
        CHECK_EQ(matched, total);
    }
}

/* ---- 2. golden hashes of ggml's output ----------------------------------------------------- */

static float gd_x[GD_ROWS * GD_PER_ROW], gd_imatrix[GD_PER_ROW];

static void test_golden(void) {
    uint8_t *out = malloc(GD_ROWS * row_bytes(OX_DTYPE_IQ4_NL, GD_PER_ROW));
    for (size_t c = 0; c < N_CASES; c++) {
        const struct iq_case *k = &cases[c];
        const size_t size = GD_ROWS * row_bytes(k->type, GD_PER_ROW);
        for (int with_im = 0; with_im < 2; with_im++) {
            const uint64_t want = with_im ? k->golden_imatrix : k->golden_plain;
            if (!want)
                continue;
            /* through the traits, to see the returned byte count too */
            memset(out, 0xaa, size);
            const size_t n = dtype_get(k->type)->from_float(gd_x, out, GD_ROWS, GD_PER_ROW,
                                                            with_im ? gd_imatrix : NULL);
            CHECK_EQ(n, size);
            const uint64_t got = gd_fnv1a(out, size);
            CHECK_MSG(got == want, "%s %s: hash 0x%016llx, ggml 0x%016llx", ox_dtype_name(k->type),
                      with_im ? "imatrix" : "plain", (unsigned long long)got,
                      (unsigned long long)want);
        }
    }
    free(out);
}

/* ---- 3. round-trip error ------------------------------------------------------------------- */

#define RT_ROWS    16
#define RT_PER_ROW 1024

/* Quantizes x to type and back; the plain and imatrix-weighted RMSE of the round trip. */
static void round_trip(enum ox_dtype type, const float *x, const float *im, bool use_im, uint8_t *q,
                       float *y, double *rmse, double *wrmse) {
    const int64_t n = RT_ROWS * RT_PER_ROW;
    CHECK(ox_quantize(type, x, q, RT_ROWS, RT_PER_ROW, use_im ? im : NULL) == OX_OK);
    CHECK(ox_dequantize(type, q, y, n) == OX_OK);
    double e2 = 0, we2 = 0, wsum = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = (double)x[i] - y[i];
        e2 += d * d;
        we2 += im[i % RT_PER_ROW] * d * d;
        wsum += im[i % RT_PER_ROW];
    }
    *rmse = sqrt(e2 / n);
    *wrmse = sqrt(we2 / wsum);
}

/* Unit normal data and a skewed imatrix (a tenth of the columns up to 20x more important).
 * Bounds: each type's error (with the imatrix for the types that need one) and its
 * imatrix-weighted error with the imatrix, at about 1.5x what was measured; the imatrix must
 * also lower the weighted error wherever the type can do without one. */
static void test_round_trip(void) {
    static const struct {
        enum ox_dtype type;
        double max_rmse, max_wrmse;
    } bounds[] = {
        {OX_DTYPE_IQ4_NL, 0.11, 0.088}, {OX_DTYPE_IQ4_XS, 0.11, 0.089},
        {OX_DTYPE_IQ3_S, 0.24, 0.145},  {OX_DTYPE_IQ3_XXS, 0.31, 0.18},
        {OX_DTYPE_IQ2_S, 0.39, 0.28},   {OX_DTYPE_IQ2_XS, 0.51, 0.31},
        {OX_DTYPE_IQ2_XXS, 0.58, 0.38}, {OX_DTYPE_IQ1_M, 0.86, 0.46},
        {OX_DTYPE_IQ1_S, 0.80, 0.55},
    };
    float *x = malloc(sizeof(float) * RT_ROWS * RT_PER_ROW);
    float *y = malloc(sizeof(float) * RT_ROWS * RT_PER_ROW);
    float im[RT_PER_ROW];
    uint8_t *q = malloc(RT_ROWS * row_bytes(OX_DTYPE_IQ4_NL, RT_PER_ROW));
    uint64_t s = 42;
    for (int i = 0; i < RT_ROWS * RT_PER_ROW; i++)
        x[i] = gd_normal(&s);
    for (int j = 0; j < RT_PER_ROW; j++)
        im[j] = gd_uniform(&s) < 0.1f ? 20.0f * gd_uniform(&s) : gd_uniform(&s);
    printf("%-8s %6s | %-17s | %-17s\n", "", "", "    no imatrix", "   with imatrix");
    printf("%-8s %6s | %8s %8s | %8s %8s\n", "type", "bpw", "rmse", "w-rmse", "rmse", "w-rmse");
    for (size_t c = 0; c < sizeof bounds / sizeof bounds[0]; c++) {
        const enum ox_dtype t = bounds[c].type;
        const bool optional = !ox_dtype_needs_imatrix(t);
        double rmse = 0, wrmse = 0, rmse_im, wrmse_im;
        if (optional)
            round_trip(t, x, im, false, q, y, &rmse, &wrmse);
        round_trip(t, x, im, true, q, y, &rmse_im, &wrmse_im);
        const double bpw = 8.0 * ox_dtype_type_size(t) / ox_dtype_block_size(t);
        if (optional)
            printf("%-8s %6.4f | %8.5f %8.5f | %8.5f %8.5f\n", ox_dtype_name(t), bpw, rmse, wrmse,
                   rmse_im, wrmse_im);
        else
            printf("%-8s %6.4f | %8s %8s | %8.5f %8.5f\n", ox_dtype_name(t), bpw, "-", "-", rmse_im,
                   wrmse_im);
        CHECK_MSG((optional ? rmse : rmse_im) <= bounds[c].max_rmse, "%s rmse %g", ox_dtype_name(t),
                  optional ? rmse : rmse_im);
        CHECK_MSG(wrmse_im <= bounds[c].max_wrmse, "%s w-rmse %g", ox_dtype_name(t), wrmse_im);
        if (optional)
            CHECK_MSG(wrmse_im < wrmse, "%s: imatrix does not help (%g vs %g)", ox_dtype_name(t),
                      wrmse_im, wrmse);
    }
    free(x);
    free(y);
    free(q);
}

/* ---- 4. the imatrix requirement ------------------------------------------------------------ */

static void test_needs_imatrix(void) {
    float x[256] = {0}, im[256];
    uint8_t out[256];
    for (int i = 0; i < 256; i++)
        im[i] = 1.0f;
    const enum ox_dtype need[] = {OX_DTYPE_IQ2_XXS, OX_DTYPE_IQ2_XS, OX_DTYPE_IQ1_S};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        CHECK(ox_dtype_needs_imatrix(need[i]));
        CHECK_EQ(ox_quantize(need[i], x, out, 1, 256, NULL), OX_ERR_INVALID_ARG);
        CHECK(strstr(ox_last_error(), "importance matrix") != NULL);
        CHECK_EQ(ox_quantize(need[i], x, out, 1, 256, im), OX_OK);
    }
    const enum ox_dtype optional[] = {OX_DTYPE_IQ2_S, OX_DTYPE_IQ3_XXS, OX_DTYPE_IQ3_S,
                                      OX_DTYPE_IQ1_M, OX_DTYPE_IQ4_NL,  OX_DTYPE_IQ4_XS};
    for (size_t i = 0; i < sizeof optional / sizeof optional[0]; i++) {
        CHECK(!ox_dtype_needs_imatrix(optional[i]));
        CHECK_EQ(ox_quantize(optional[i], x, out, 1, 256, NULL), OX_OK);
    }
}

/* ---- 5. concurrent first use of the grids -------------------------------------------------- */

#define N_THREADS 4

struct thread_job {
    enum ox_dtype type;
    uint8_t out[4 * 110]; /* 4 rows of 256 in any i-quant */
};

static void *quantize_job(void *arg) {
    struct thread_job *job = arg;
    ox_quantize(job->type, gd_x + 8 * GD_PER_ROW, job->out, 4, GD_PER_ROW / 2, gd_imatrix);
    return NULL;
}

/* Runs before anything else has touched the grids: several threads race to build each one
 * and must all see the same, complete index. */
static void test_concurrent_init(void) {
    const enum ox_dtype types[] = {OX_DTYPE_IQ2_XS, OX_DTYPE_IQ1_S, OX_DTYPE_IQ3_XXS};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        struct thread_job jobs[N_THREADS];
        pthread_t th[N_THREADS];
        for (int i = 0; i < N_THREADS; i++) {
            memset(&jobs[i], 0, sizeof jobs[i]);
            jobs[i].type = types[t];
            CHECK(pthread_create(&th[i], NULL, quantize_job, &jobs[i]) == 0);
        }
        for (int i = 0; i < N_THREADS; i++)
            pthread_join(th[i], NULL);
        for (int i = 1; i < N_THREADS; i++)
            CHECK_MSG(memcmp(jobs[0].out, jobs[i].out, sizeof jobs[0].out) == 0, "%s thread %d",
                      ox_dtype_name(types[t]), i);
    }
}

int main(void) {
    gd_inputs(gd_x, gd_imatrix);
    test_concurrent_init();
    test_golden();
    test_needs_imatrix();
    test_round_trip();
    test_shared_files();
    return test_finish("test_quantize_iq");
}
