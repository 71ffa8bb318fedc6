/* ops_ref.c: the CPU backend's scalar reference ops (the oracle later SIMD kernels are tested
 * against). Matmul dequantizes each weight row once per call and reuses it for every token;
 * float weights follow ggml's summation orders (ggml_numerics.c), quantized ones sum in double. */
#include <math.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/ggml_numerics.h"
#include "backend/cpu/ops_simd.h"
#include "backend/cpu/qmatmul.h"
#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/dtype.h"

size_t cpu_scratch_floats(int64_t max_cols) {
    /* a dequantized row for the reference, or 16 repacked rows for the fast GEMM */
    return (size_t)max_cols * 5 + 1024;
}

struct matmul_job {
    struct backend *b;
    const struct mat *w;
    const float *x;
    float *y;
    int n;
};

/* ggml's q4_1 / q5_1 dot product with its q8_1 activations (packed, as round_activations leaves
 * them): per block d_w d_a sum(q_w q_a) + m_w s_a, where s_a is the activations' f16 d * sum(q);
 * with the row dequantized (d_w q_w + m_w) that is row . (d_a q_a) plus m_w (s_a - d_a sum(q_a)).
 * Both weight blocks begin with f16 d, then f16 m. */
static double dot_q8_1(const float *row, const uint8_t *wrow, size_t w_block,
                       const struct block_q8_1 *xa, int64_t n) {
    double sum = 0.0;
    for (int64_t b = 0; b < n / 32; b++, row += 32) {
        const float da = fp16_to_fp32(xa[b].d);
        int qsum = 0;
        for (int i = 0; i < 32; i++)
            sum += (double)row[i] * (double)(da * (float)xa[b].qs[i]), qsum += xa[b].qs[i];
        uint16_t m;
        memcpy(&m, wrow + (size_t)b * w_block + 2, sizeof m);
        sum += (double)fp16_to_fp32(m) * ((double)fp16_to_fp32(xa[b].s) - (double)da * qsum);
    }
    return sum;
}

/* Thread ith takes an interleaved share of the weight rows. */
static void matmul_rows(void *arg, int ith, int nth) {
    struct matmul_job *j = arg;
    const struct mat *w = j->w;
    dtype_to_float_fn to_float = dtype_get((int)w->type)->to_float;
    float *row = cpu_of(j->b)->scratch + (size_t)ith * cpu_of(j->b)->scratch_per_thread;
    int64_t chunk = (w->n_rows + nth - 1) / nth, r0 = chunk * ith;
    int64_t r1 = r0 + chunk < w->n_rows ? r0 + chunk : w->n_rows;
    /* llama.cpp's GEMM takes batches, vec_dot single tokens (and, in one-token order, all) */
    bool gemm = j->n >= 2 && !j->b->one_token_order;
    const struct dtype_traits *wt = dtype_get((int)w->type);
    const bool q8_1 = wt->vec_dot_type == OX_DTYPE_Q8_1;
    const size_t xq_row = (size_t)(w->n_cols / 32) * sizeof(struct block_q8_1);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *wrow = (const uint8_t *)w->data + (size_t)r * w->row_bytes;
        to_float(wrow, row, w->n_cols);
        for (int t = 0; q8_1 && t < j->n; t++) {
            const uint8_t *xa = (const uint8_t *)j->x + (size_t)t * xq_row;
            j->y[(size_t)t * (size_t)w->n_rows + (size_t)r] =
                (float)dot_q8_1(row, wrow, wt->type_size, (const struct block_q8_1 *)xa, w->n_cols);
        }
        for (int t = 0; !q8_1 && t < j->n; t++) {
            const float *x = j->x + (size_t)t * (size_t)w->n_cols;
            float *y = j->y + (size_t)t * (size_t)w->n_rows + (size_t)r;
            if (ggml_float_dot(w->type, gemm, row, x, w->n_cols, y))
                continue;
            double sum = 0.0; /* double: the reference should not add rounding of its own */
            for (int64_t c = 0; c < w->n_cols; c++)
                sum += (double)row[c] * (double)x[c];
            *y = (float)sum;
        }
    }
}

/* llama.cpp's CPU backend converts activations to the weight's vec_dot_type (q8_0, q8_K, f16,
 * bf16, ...) before its dot products; rounding them the same way here is what brings our
 * logits within its own run-to-run noise. Returns the activations to multiply with. */
static const float *round_activations(struct backend *b, const struct mat *w, const float *x,
                                      int n) {
    const struct dtype_traits *vt = dtype_get((int)dtype_get((int)w->type)->vec_dot_type);
    if (vt->block_size == 1 && vt->type_size == 4)
        return x; /* f32: nothing to round */
    /* q8_1 stays packed: the dot product reads each block's s */
    if (vt == dtype_get(OX_DTYPE_Q8_1)) {
        const size_t row = (size_t)(w->n_cols / 32) * vt->type_size;
        for (int t = 0; t < n; t++)
            vt->from_float(x + (size_t)t * (size_t)w->n_cols,
                           (uint8_t *)cpu_of(b)->x_rounded + t * row, 1, w->n_cols, NULL);
        return cpu_of(b)->x_rounded;
    }
    for (int t = 0; t < n; t++) {
        vt->from_float(x + (size_t)t * (size_t)w->n_cols, cpu_of(b)->x_packed, 1, w->n_cols, NULL);
        vt->to_float(cpu_of(b)->x_packed, cpu_of(b)->x_rounded + (size_t)t * (size_t)w->n_cols,
                     w->n_cols);
    }
    return cpu_of(b)->x_rounded;
}

static void cpu_matmul_ref(struct backend *b, const struct mat *w, const float *x, float *y,
                           int n) {
    struct matmul_job j = {b, w, round_activations(b, w, x, n), y, n};
    threadpool_run(cpu_of(b)->pool, matmul_rows, &j);
}

/* The fast kernels where this CPU has one for the weight type, else the reference. */
void cpu_matmul(struct backend *b, const struct mat *w, const float *x, float *y, int n) {
    if (!qmatmul(b, w, x, y, n))
        cpu_matmul_ref(b, w, x, y, n);
}

void cpu_get_rows(struct backend *b, const struct mat *w, const int32_t *ids, float *y, int n) {
    dtype_to_float_fn to_float = dtype_get((int)w->type)->to_float;
    for (int t = 0; t < n; t++) {
        const uint8_t *row = (const uint8_t *)w->data + (size_t)ids[t] * w->row_bytes;
        if (qmatmul_file_row(w, ids[t], cpu_of(b)->x_packed)) /* a packed matrix may have no file */
            row = cpu_of(b)->x_packed;
        to_float(row, y + (size_t)t * (size_t)w->n_cols, w->n_cols);
    }
}

/* As ggml: the mean square summed in double, the scale in float. */
void cpu_rms_norm(struct backend *b, const float *x, const float *g, float *y, int n, int dim,
                  float eps) {
    (void)b;
    for (int t = 0; t < n; t++) {
        const float *xr = x + (size_t)t * (size_t)dim;
        float *yr = y + (size_t)t * (size_t)dim;
        double sum = 0.0;
        for (int i = 0; i < dim; i++)
            sum += (double)(xr[i] * xr[i]);
        float scale = 1.0f / sqrtf((float)(sum / dim) + eps);
        for (int i = 0; i < dim; i++)
            yr[i] = g ? (xr[i] * scale) * g[i] : xr[i] * scale;
    }
}

/* As ggml: x - mean scaled by 1/sqrt(var + eps), then the weight and the bias as separate
 * steps. */
void cpu_layer_norm(struct backend *b, const float *x, const float *g, const float *bias, float *y,
                    int n, int dim, float eps) {
    (void)b;
    for (int t = 0; t < n; t++) {
        const float *xr = x + (size_t)t * (size_t)dim;
        float *yr = y + (size_t)t * (size_t)dim, mean, var;
        ggml_mean_var(xr, dim, &mean, &var);
        float scale = 1.0f / sqrtf(var + eps);
        for (int i = 0; i < dim; i++) {
            float v = (xr[i] - mean) * scale;
            v = g ? v * g[i] : v;
            yr[i] = bias ? v + bias[i] : v;
        }
    }
}

/* ggml's YaRN ramp: 1 below the low correction dim, 0 above the high one. */
static float yarn_ramp(float low, float high, int i0) {
    float y = (float)(i0 / 2 - low) / fmaxf(0.001f, high - low);
    return 1.0f - fminf(1.0f, fmaxf(0.0f, y));
}

/* One head: pairs (i, i+1) (normal) or (i, i+n_rot/2) (NeoX) rotated by pos * base^(-i/n_rot),
 * the angle advanced by multiplication and mixed as ggml's rope_yarn so rounding matches,
 * including the multiply-adds GCC fuses there (ggml-cpu builds as gnu++17: -ffp-contract=fast). */
static void rope_head(float *x, int32_t pos, float theta_scale, const struct rope_params *p) {
    float theta_base = (float)pos;
    for (int i = 0; i < p->n_rot; i += 2) {
        float ff = p->freq_factors ? p->freq_factors[i / 2] : 1.0f;
        float extrap = theta_base / ff, interp = p->freq_scale * extrap, theta = interp;
        float mscale = p->attn_factor;
        if (p->ext_factor != 0.0f) {
            float mix = yarn_ramp(p->corr_dims[0], p->corr_dims[1], i) * p->ext_factor;
            theta = fmaf(interp, 1 - mix, extrap * mix);
            mscale *= fmaf(0.1f, logf(1.0f / p->freq_scale), 1.0f);
        }
        float c = cosf(theta) * mscale, s = sinf(theta) * mscale;
        int a = p->neox ? i / 2 : i, bidx = p->neox ? i / 2 + p->n_rot / 2 : i + 1;
        float x0 = x[a], x1 = x[bidx];
        x[a] = fmaf(x0, c, -(x1 * s));
        x[bidx] = fmaf(x0, s, x1 * c);
        theta_base *= theta_scale;
    }
}

void cpu_rope(struct backend *b, float *x, const int32_t *pos, int n, int n_heads, int head_dim,
              const struct rope_params *p) {
    (void)b;
    float theta_scale = powf(p->freq_base, -2.0f / (float)p->n_rot);
    for (int t = 0; t < n; t++)
        for (int h = 0; h < n_heads; h++)
            rope_head(x + ((size_t)t * (size_t)n_heads + (size_t)h) * (size_t)head_dim, pos[t],
                      theta_scale, p);
}

void cpu_glu(struct backend *b, enum glu_kind kind, const float *gate, const float *up, float *y,
             size_t n) {
    (void)b;
#ifdef OX_HAVE_X86_KERNELS /* built only for x86-64 */
    if (glu_avx512(kind, gate, up, y, n) || glu_avx2(kind, gate, up, y, n))
        return;
#endif
#ifdef OX_HAVE_ARM_KERNELS /* built only for AArch64 */
    if (glu_neon(kind, gate, up, y, n))
        return;
#endif
#ifdef OX_HAVE_WASM_KERNELS /* built only for WebAssembly */
    if (glu_wasm(kind, gate, up, y, n))
        return;
#endif
    for (size_t i = 0; i < n; i++) {
        if (kind == GLU_SILU) /* x * sigmoid(x), ggml's division and vector exp */
            y[i] = gate[i] / (1.0f + ggml_expf(-gate[i])) * up[i];
        else if (kind == GLU_SIGMOID) /* ggml_sigmoid's libm exp, then the product */
            y[i] = 1.0f / (1.0f + expf(-gate[i])) * up[i];
        else if (kind == GLU_SWIGLU_OAI) { /* ggml_swiglu_oai, alpha 1.702 and limit 7 */
            float x = fminf(gate[i], 7.0f), u = fminf(fmaxf(up[i], -7.0f), 7.0f);
            y[i] = x / (1.0f + expf(1.702f * (-x))) * (u + 1.0f);
        } else
            y[i] = ggml_gelu(gate[i]) * up[i];
    }
}

void cpu_sigmoid_scale_rows(struct backend *b, float *y, const float *g, int n, int dim) {
    (void)b;
    for (int t = 0; t < n; t++) {
        float s = 1.0f / (1.0f + expf(-g[t])); /* ggml_sigmoid, then ggml_mul's broadcast */
        for (int i = 0; i < dim; i++)
            y[(size_t)t * (size_t)dim + (size_t)i] *= s;
    }
}

void cpu_gelu(struct backend *b, const float *x, float *y, size_t n) {
    (void)b;
    for (size_t i = 0; i < n; i++)
        y[i] = ggml_gelu(x[i]);
}

void cpu_add(struct backend *b, float *y, const float *x, size_t n) {
    (void)b;
    for (size_t i = 0; i < n; i++)
        y[i] += x[i];
}

void cpu_add_row(struct backend *b, float *y, const float *row, int n, int dim) {
    (void)b;
    for (int t = 0; t < n; t++)
        for (int i = 0; i < dim; i++)
            y[(size_t)t * (size_t)dim + (size_t)i] += row[i];
}

void cpu_scale(struct backend *b, float *y, float s, size_t n) {
    (void)b;
    for (size_t i = 0; i < n; i++)
        y[i] *= s;
}

void cpu_softmax(struct backend *b, float *x, int n, int dim) {
    (void)b;
    for (int t = 0; t < n; t++)
        ggml_softmax(x + (size_t)t * (size_t)dim, dim);
}

/* As ggml builds it: scale by 1/cap, tanh, scale by cap. */
void cpu_softcap(struct backend *b, float *y, float cap, size_t n) {
    (void)b;
    float inv = 1.0f / cap;
    for (size_t i = 0; i < n; i++)
        y[i] = tanhf(y[i] * inv) * cap;
}
