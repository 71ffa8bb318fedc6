/* attention_ref.c: the CPU backend's reference attention: causal, GQA/MQA, sliding window,
 * soft-capped scores and sinks, over a KV cache read back as floats; with an f16 cache it rounds
 * as llama.cpp's CPU flash attention does. */
#include <math.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/ggml_numerics.h"
#include "core/fp16.h"

struct attn_job {
    const struct attn_args *a;
    float *scratch;
    size_t per_thread;
};

/* One (token, head): scores over visible cells, softmax, weighted sum of values. */
static void attend(const struct attn_args *a, int t, int h, float *scores) {
    int kvh = h / (a->n_head / a->n_head_kv);
    const float *q = a->q + ((size_t)t * a->n_head + h) * a->hd_k;
    float *y = a->y + ((size_t)t * a->n_head + h) * a->hd_v;
    float max = -INFINITY;
    for (int c = 0; c < a->n_cells; c++) {
        scores[c] = -INFINITY;
        if (!visible(a, t, c))
            continue;
        const float *k = a->k + ((size_t)c * a->n_head_kv + kvh) * a->hd_k;
        double dot = 0.0;
        for (int i = 0; i < a->hd_k; i++)
            dot += (double)q[i] * k[i];
        scores[c] = score(a, (float)dot);
        max = scores[c] > max ? scores[c] : max;
    }
    memset(y, 0, (size_t)a->hd_v * sizeof *y);
    if (max == -INFINITY)
        return; /* nothing visible: a zero output, as a fully masked softmax row */
    float sink = a->sinks ? a->sinks[h] : -INFINITY; /* in the softmax, with no value */
    max = sink > max ? sink : max;
    double total = a->sinks ? (double)expf(sink - max) : 0.0;
    for (int c = 0; c < a->n_cells; c++) {
        scores[c] = scores[c] == -INFINITY ? 0.0f : expf(scores[c] - max);
        total += scores[c];
    }
    for (int c = 0; c < a->n_cells; c++) {
        if (scores[c] == 0.0f)
            continue;
        float p = (float)(scores[c] / total);
        const float *v = a->v + ((size_t)c * a->n_head_kv + kvh) * a->hd_v;
        for (int i = 0; i < a->hd_v; i++)
            y[i] += p * v[i];
    }
}

void attention_transpose_k(const struct attn_args *a) {
    int dk = a->n_head_kv * a->hd_k;
    for (int c = 0; c < a->n_cells; c++)
        for (int i = 0; i < dk; i++)
            a->k_t[(size_t)i * a->n_cells + c] = a->k[(size_t)c * dk + i];
}

void attention_visibility(const struct attn_args *a, int t, uint8_t *vis, int *lo, int *hi) {
    *lo = a->n_cells, *hi = 0;
    for (int c = 0; c < a->n_cells; c++) {
        vis[c] = visible(a, t, c);
        if (vis[c])
            *lo = c < *lo ? c : *lo, *hi = c + 1;
    }
}

static float round_f16(float x) {
    return fp16_to_fp32(fp32_to_fp16(x));
}

/* One (token, head) the way llama.cpp's CPU flash attention computes it over an f16 cache:
 * q rounded to f16, an online softmax, and the weighted values accumulated in f16. Matching
 * its roundings keeps our logits within the reference's noise. */
static void attend_f16(const struct attn_args *a, int t, int h, float *acc) {
    int kvh = h / (a->n_head / a->n_head_kv);
    const float *q = a->q + ((size_t)t * a->n_head + h) * a->hd_k;
    float *y = a->y + ((size_t)t * a->n_head + h) * a->hd_v;
    float *qh = acc + a->hd_v, m = -INFINITY, sum = 0.0f;
    for (int i = 0; i < a->hd_k; i++)
        qh[i] = round_f16(q[i]);
    memset(acc, 0, (size_t)a->hd_v * sizeof *acc);
    for (int c = 0; c < a->n_cells; c++) {
        if (!visible(a, t, c))
            continue;
        const float *k = a->k + ((size_t)c * a->n_head_kv + kvh) * a->hd_k;
        const float *v = a->v + ((size_t)c * a->n_head_kv + kvh) * a->hd_v;
        float ms = 1.0f, vs = 1.0f, s = score(a, ggml_dot_f16(qh, k, a->hd_k));
        if (s > m) {
            ms = expf(m - s);
            m = s;
            for (int i = 0; i < a->hd_v; i++)
                acc[i] = round_f16(acc[i] * ms);
        } else {
            vs = expf(s - m);
        }
        /* ggml's vec_mad and sum update compile to fused multiply-adds */
        for (int i = 0; i < a->hd_v; i++)
            acc[i] = round_f16(fmaf(v[i], vs, acc[i]));
        sum = fmaf(sum, ms, vs);
    }
    if (a->sinks) { /* the sink joins the softmax last, on the float accumulator, as ggml's */
        float s = a->sinks[h], ms = 1.0f, vs = 1.0f;
        if (s > m) {
            ms = expf(m - s);
            for (int i = 0; i < a->hd_v; i++)
                acc[i] *= ms;
        } else {
            vs = expf(s - m);
        }
        sum = sum * ms + vs;
    }
    float inv = sum == 0.0f ? 0.0f : 1.0f / sum;
    for (int i = 0; i < a->hd_v; i++)
        y[i] = acc[i] * inv;
}

static void attention_rows(void *arg, int ith, int nth) {
    struct attn_job *j = arg;
    const struct attn_args *a = j->a;
    float *scores = j->scratch + (size_t)ith * j->per_thread;
    for (int w = ith; w < a->n * a->n_head; w += nth) {
        if (a->f16_cache)
            attend_f16(a, w / a->n_head, w % a->n_head, scores);
        else
            attend(a, w / a->n_head, w % a->n_head, scores);
    }
}

/* As qmatmul.h's QMATMUL_MIN_MACS_PER_PART: about a microsecond of work per part, several
 * times what a hand-off to an awake worker costs (0.2 to 0.3 us). */
#define ATTN_MIN_MACS_PER_PART 32768.0

int attention_parts(const struct backend *b, const struct attn_args *a) {
    double macs = (double)a->n * a->n_head * a->n_cells * (a->hd_k + a->hd_v);
    return threadpool_parts(cpu_of(b)->pool, macs, ATTN_MIN_MACS_PER_PART);
}

/* ---- the driver of the SIMD attentions ---------------------------------------------------- */

/* Every head of token t: the visibility once, then the kv heads' query groups. */
static void token_tiled(const struct attention_kernels *k, const struct attn_args *a, int t,
                        float *scratch) {
    int group = a->n_head / a->n_head_kv, lo, hi;
    uint8_t *vis = (uint8_t *)(scratch + (size_t)ATTN_HEADS_AT_ONCE * a->n_cells);
    attention_visibility(a, t, vis, &lo, &hi);
    if (lo >= hi) { /* nothing visible: zero outputs, as a fully masked softmax */
        memset(a->y + (size_t)t * a->n_head * a->hd_v, 0, (size_t)a->n_head * a->hd_v * 4);
        return;
    }
    for (int kvh = 0; kvh < a->n_head_kv; kvh++)
        for (int g = 0; g < group; g += ATTN_HEADS_AT_ONCE) {
            int nh = group - g < ATTN_HEADS_AT_ONCE ? group - g : ATTN_HEADS_AT_ONCE;
            k->attend_tiled(a, t, kvh * group + g, nh, vis, lo, hi, scratch);
        }
}

struct simd_job {
    const struct attention_kernels *k;
    const struct attn_args *a;
    float *scratch;
    size_t per_thread;
    bool tiled;
};

static void simd_rows(void *arg, int ith, int nth) {
    struct simd_job *j = arg;
    const struct attn_args *a = j->a;
    float *scratch = j->scratch + (size_t)ith * j->per_thread;
    if (!j->tiled) { /* a contiguous share of the items each, as many at a time as fit */
        int items = a->n * a->n_head, w1 = (int)((int64_t)items * (ith + 1) / nth);
        size_t fit = j->per_thread / (size_t)a->hd_k;
        int most = fit < ATTN_ITEMS_AT_ONCE ? (int)fit : ATTN_ITEMS_AT_ONCE;
        for (int w = (int)((int64_t)items * ith / nth); w < w1; w += most)
            j->k->attend(a, w, w1 - w < most ? w1 - w : most, scratch);
        return;
    }
    for (int t = ith; t < a->n; t += nth)
        token_tiled(j->k, a, t, scratch);
}

void attention_run(struct backend *b, const struct attn_args *a,
                   const struct attention_kernels *k) {
    /* room for ATTN_HEADS_AT_ONCE rows of scores and the visibility bytes */
    bool tiled =
        a->n >= ATTN_TILED_FROM && a->k_t && a->softcap == 0.0f &&
        (size_t)(ATTN_HEADS_AT_ONCE + 1) * (size_t)a->n_cells <= cpu_of(b)->scratch_per_thread;
    if (tiled)
        attention_transpose_k(a);
    struct simd_job j = {k, a, cpu_of(b)->scratch, cpu_of(b)->scratch_per_thread, tiled};
    threadpool_run_n(cpu_of(b)->pool, simd_rows, &j, attention_parts(b, a));
}

void cpu_attention_ref(struct backend *b, const struct attn_args *a) {
    struct attn_job j = {a, cpu_of(b)->scratch, cpu_of(b)->scratch_per_thread};
    threadpool_run_n(cpu_of(b)->pool, attention_rows, &j, attention_parts(b, a));
}

/* The fastest attention this build and CPU have for the args; the reference otherwise. */
void cpu_attention(struct backend *b, const struct attn_args *a) {
    if (a->sinks) { /* the SIMD kernels have no sinks yet */
        cpu_attention_ref(b, a);
        return;
    }
#ifdef OX_HAVE_X86_KERNELS /* built only for x86-64 */
    if (attention_avx512(b, a) || attention_avx2(b, a))
        return;
#endif
#ifdef OX_HAVE_ARM_KERNELS /* built only for AArch64 */
    if (attention_neon(b, a))
        return;
#endif
#ifdef OX_HAVE_WASM_KERNELS /* built only for WebAssembly */
    if (attention_wasm(b, a))
        return;
#endif
    cpu_attention_ref(b, a);
}
