/* ggml_numerics.c: the summation orders of llama.cpp's AVX-512 dot products and its vector exp.
 * Float sums are not associative, and bf16/f16 activations turn a last-bit difference in one
 * layer into a visible one a few layers on; following ggml's order instead of summing in
 * double makes float models match llama.cpp's logits exactly rather than approximately. */
#include "backend/cpu/ggml_numerics.h"

#include <math.h>

#include "core/fp16.h"

enum { LANES = 16 }; /* floats in a 512-bit register */

/* GCC 12's -O3 loop vectorizer miscompiles the bf16 lane loops below (on real data it returned
 * sums 10-150% off, where -O2 and clang are right), so those loops are kept scalar. */
#if defined(__GNUC__) && !defined(__clang__)
#define NO_LOOP_VECTORIZE __attribute__((optimize("no-tree-loop-vectorize")))
#else
#define NO_LOOP_VECTORIZE
#endif

/* The tree of _mm512_reduce_add_ps: 512 -> 256 -> 128 bits, then pairs. Clobbers r. */
static float reduce_lanes(float *r) {
    for (int w = LANES / 2; w >= 4; w /= 2)
        for (int l = 0; l < w; l++)
            r[l] = r[l + w] + r[l];
    return (r[0] + r[2]) + (r[1] + r[3]);
}

/* One VDPBF16PS over 32 elements: lane l adds its odd product, then its even one. A product of
 * two bf16 values is exact in float, so each step is one rounded add. */
NO_LOOP_VECTORIZE static void dpbf16(float *acc, const float *x, const float *y) {
    for (int l = 0; l < LANES; l++) {
        acc[l] += x[2 * l + 1] * y[2 * l + 1];
        acc[l] += x[2 * l] * y[2 * l];
    }
}

/* tinyBLAS for bf16: one 16-lane accumulator over 32-element steps. n % 32 == 0. */
static float gemm_bf16(const float *w, const float *x, int64_t n) {
    float acc[LANES] = {0};
    for (int64_t i = 0; i < n; i += 2 * LANES)
        dpbf16(acc, w + i, x + i);
    return reduce_lanes(acc);
}

/* tinyBLAS for f32 and f16: one 16-lane accumulator of fused multiply-adds. n % 16 == 0. */
static float gemm_fma(const float *w, const float *x, int64_t n) {
    float acc[LANES] = {0};
    for (int64_t i = 0; i < n; i += LANES)
        for (int l = 0; l < LANES; l++)
            acc[l] = fmaf(w[i + l], x[i + l], acc[l]);
    return reduce_lanes(acc);
}

/* ggml_vec_dot_bf16: two accumulators, for the two halves of each 64-element step, each reduced
 * on its own; the tail in double. */
static float vec_dot_bf16(const float *w, const float *x, int64_t n) {
    float c1[LANES] = {0}, c2[LANES] = {0};
    int64_t i = 0;
    for (; i + 4 * LANES <= n; i += 4 * LANES) {
        dpbf16(c1, w + i, x + i);
        dpbf16(c2, w + i + 2 * LANES, x + i + 2 * LANES);
    }
    double sum = (double)reduce_lanes(c1);
    sum += (double)reduce_lanes(c2);
    for (; i < n; i++)
        sum += (double)(w[i] * x[i]);
    return (float)sum;
}

/* The shared body of ggml_vec_dot_f32/f16: four 16-lane accumulators of fused multiply-adds
 * over 64-element steps, folded 0+2, 1+3, then 0+1, then reduced. Sets *done to the elements
 * covered; the callers add the tail each their own way. */
static float vec_dot_body(const float *w, const float *x, int64_t n, int64_t *done) {
    enum { ARR = 4, STEP = ARR * LANES };
    float acc[ARR][LANES] = {{0}};
    int64_t np = n - n % STEP;
    for (int64_t i = 0; i < np; i += STEP)
        for (int j = 0; j < ARR; j++)
            for (int l = 0; l < LANES; l++)
                acc[j][l] = fmaf(w[i + j * LANES + l], x[i + j * LANES + l], acc[j][l]);
    float r[LANES];
    for (int l = 0; l < LANES; l++)
        r[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
    *done = np;
    return reduce_lanes(r);
}

/* ggml_vec_dot_f32: the tail fused into a float sum (ggml-cpu builds with -ffp-contract=fast). */
static float vec_dot_f32(const float *w, const float *x, int64_t n) {
    int64_t i;
    float sum = vec_dot_body(w, x, n, &i);
    for (; i < n; i++)
        sum = fmaf(w[i], x[i], sum);
    return sum;
}

float ggml_dot_f16(const float *x, const float *y, int64_t n) {
    int64_t i;
    double sum = (double)vec_dot_body(x, y, n, &i);
    for (; i < n; i++)
        sum += (double)(x[i] * y[i]);
    return (float)sum;
}

bool ggml_float_dot(enum ox_dtype type, bool gemm, const float *w, const float *x, int64_t n,
                    float *out) {
    switch (type) {
    case OX_DTYPE_BF16:
        *out = gemm && n % (2 * LANES) == 0 ? gemm_bf16(w, x, n) : vec_dot_bf16(w, x, n);
        return true;
    case OX_DTYPE_F16:
        *out = gemm && n % LANES == 0 ? gemm_fma(w, x, n) : ggml_dot_f16(w, x, n);
        return true;
    case OX_DTYPE_F32:
        *out = gemm && n % LANES == 0 ? gemm_fma(w, x, n) : vec_dot_f32(w, x, n);
        return true;
    default: return false;
    }
}

/* x = n*ln2 + b with n an integer (rounded by the 1.5*2^23 trick), ln2 split in two parts; a
 * degree-5 polynomial in b; scaled by 2^n; saturating to 0 or infinity out of range. The
 * coefficients are ggml's (ggml-cpu/vec.h, ggml_v_expf), required bit for bit. */
float ggml_expf(float x) {
    const float round_magic = 0x1.8p23f;
    float n = fmaf(x, 0x1.715476p+0f, round_magic) - round_magic;
    float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    if (fabsf(n) > 192.0f)
        return n <= 0.0f ? 0.0f : INFINITY;
    float u = b * b;
    float hi =
        fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f));
    float j = fmaf(hi, u, fmaf(0x1.ffffecp-1f, b, 1.0f));
    return ldexpf(j, (int)n);
}

/* The table entry: ggml fills it with the tanh approximation of GELU computed in float (GCC
 * fuses 1 + a*x*x into one multiply-add there) and rounded to f16. */
float ggml_gelu(float x) {
    const float coef_a = 0.044715f, sqrt_2_over_pi = 0.79788456080286535587989211986876f;
    if (x <= -10.0f)
        return 0.0f;
    if (x >= 10.0f)
        return x;
    float h = fp16_to_fp32(fp32_to_fp16(x));
    float g = (0.5f * h) * (1.0f + tanhf((sqrt_2_over_pi * h) * fmaf(coef_a * h, h, 1.0f)));
    return fp16_to_fp32(fp32_to_fp16(g));
}

/* The mean: a double sum rounded to float, divided in float. The variance: squares of
 * (x - mean) reduced 16 lanes at a time as a tree, the partial sums and tail in double. */
void ggml_mean_var(const float *x, int64_t n, float *mean, float *var) {
    double total = 0.0;
    for (int64_t i = 0; i < n; i++)
        total += (double)x[i];
    float m = (float)total / (float)n;
    double sq = 0.0;
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        float r[LANES];
        for (int l = 0; l < LANES; l++) {
            float d = x[i + l] - m;
            r[l] = d * d;
        }
        sq += (double)reduce_lanes(r);
    }
    for (; i < n; i++) {
        float d = x[i] - m;
        sq += (double)(d * d);
    }
    *mean = m;
    *var = (float)(sq / (double)n);
}

void ggml_softmax(float *x, int n) {
    float max = -INFINITY;
    for (int i = 0; i < n; i++)
        max = x[i] > max ? x[i] : max;
    double sum = 0.0;
    int i = 0;
    for (; i + LANES <= n; i += LANES) {
        float r[LANES];
        for (int l = 0; l < LANES; l++)
            r[l] = x[i + l] = ggml_expf(x[i + l] - max);
        sum += (double)reduce_lanes(r);
    }
    for (; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += (double)x[i];
    }
    float inv = (float)(1.0 / sum);
    for (i = 0; i < n; i++)
        x[i] *= inv;
}
