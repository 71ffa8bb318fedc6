/* test_embed.c: embeddings (ox_get_embeddings, ox_embed). For every reference model, the last
 * prompt token's pooled state times the model's output matrix gives llama.cpp's logits for that
 * token; mean / cls / last pooling, normalization and n_batch pieces agree with the per-token
 * states of one batch; refusals leave the cache alone. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <math.h>

#include "core/fp16.h"
#include "model/model.h"
#include "quant/dtype.h"
#include "oxidize.h"
#include "reference_files.h"
#include "test.h"

#define MAX_PROMPT 512

static double max_diff(const float *a, const float *b, int n) {
    double m = 0;
    for (int i = 0; i < n; i++)
        m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

static int json_ints(json_t *arr, ox_token *out, int cap) {
    int n = 0;
    for (size_t i = 0; i < json_array_size(arr) && n < cap; i++)
        out[n++] = (ox_token)json_integer_value(json_array_get(arr, i));
    return n;
}

/* h as the dot products with weights of type wt see it: rounded to ggml's vec_dot_type (f16,
 * bf16, or 8-bit blocks for quantized weights), as llama.cpp's CPU matmul rounds it. */
static void round_for_dot(enum ox_dtype wt, const float *h, float *hq, int n) {
    const struct dtype_traits *vt = dtype_get((int)dtype_get((int)wt)->vec_dot_type);
    void *buf = malloc((size_t)n * sizeof(float) + 512);
    memcpy(hq, h, (size_t)n * sizeof *hq);
    if (buf && vt != dtype_get(OX_DTYPE_F32)) {
        vt->from_float(h, buf, 1, n, NULL);
        vt->to_float(buf, hq, n);
    }
    free(buf);
}

/* What ggml's q4_1 / q5_1 dot products add to row . hq: their min term is m_w * s, s being
 * ggml's q8_1 f16 d * sum(q) of the block of h (d = amax / 127 before its own rounding), not
 * m_w times the sum of the rounded values; 0 for the other types. */
static double q8_1_min_term(enum ox_dtype wt, const uint8_t *wrow, const float *h, const float *hq,
                            int n) {
    if (wt != OX_DTYPE_Q4_1 && wt != OX_DTYPE_Q5_1)
        return 0.0;
    size_t block = dtype_get((int)wt)->type_size;
    double extra = 0.0;
    for (int b = 0; b < n / 32; b++) {
        float amax = 0.0f, d;
        double seen = 0.0;
        for (int i = 0; i < 32; i++)
            amax = fmaxf(amax, fabsf(h[b * 32 + i])), seen += hq[b * 32 + i];
        d = amax / 127.0f;
        const float id = d ? 1.0f / d : 0.0f; /* the reference quantizer's, as round_for_dot's */
        int qsum = 0;
        for (int i = 0; i < 32; i++)
            qsum += (int)roundf(h[b * 32 + i] * id);
        uint16_t m; /* both blocks begin with f16 d, then f16 m */
        memcpy(&m, wrow + (size_t)b * block + 2, sizeof m);
        extra +=
            (double)fp16_to_fp32(m) * ((double)fp16_to_fp32(fp32_to_fp16(d * (float)qsum)) - seen);
    }
    return extra;
}

/* The logits the model makes from a final hidden state h, computed here and not by the engine:
 * h rounded as the matmul rounds it, each row of the output matrix (or the tied token
 * embeddings) by the library's reference dequantization, a dot product in double, the output
 * bias, then the final softcap and logit scale, as llama.cpp's graph applies them after
 * result_norm. */
static void logits_from_hidden(const struct ox_model *m, const float *h, float *z) {
    const struct model_config *c = &m->cfg;
    const struct weight *w = m->output;
    float *row = malloc((size_t)c->n_embd * sizeof *row), *hq = malloc((size_t)c->n_embd * 4);
    if (hq)
        round_for_dot(w->type, h, hq, c->n_embd);
    bool ok = row && hq;
    for (int v = 0; ok && v < c->n_vocab; v++) {
        ok = ox_dequantize(w->type, w->data + (size_t)v * w->row_bytes, row, c->n_embd) == OX_OK;
        double s = 0;
        for (int j = 0; j < c->n_embd; j++)
            s += (double)row[j] * hq[j];
        s += q8_1_min_term(w->type, w->data + (size_t)v * w->row_bytes, h, hq, c->n_embd);
        if (m->output_b)
            s += ((const float *)m->output_b->data)[v];
        if (c->final_softcap != 0.0f)
            s = c->final_softcap * tanh(s / c->final_softcap);
        if (c->logit_scale != 0.0f)
            s = c->arch->logit_scale == LOGIT_SCALE_DIV ? s / c->logit_scale : s * c->logit_scale;
        z[v] = (float)s;
    }
    CHECK_MSG(ok, "%s: %s", w->name, ox_last_error());
    free(row), free(hq);
}

static struct ox_context *new_context(const struct ox_model *m, uint32_t n_ctx, uint32_t n_batch,
                                      bool embeddings) {
    struct ox_context_params p = ox_context_params_default();
    p.n_ctx = n_ctx, p.n_batch = n_batch, p.n_threads = 2, p.embeddings = embeddings;
    struct ox_context *c = NULL;
    CHECK_MSG(ox_context_create(m, &p, &c) == OX_OK, "%s", ox_last_error());
    return c;
}

static double worst_float_kl, worst_quant_kl, worst_abs, worst_self_kl;

/* Last pooling without normalization gives the state llama.cpp multiplies by the output
 * matrix: the logits made from it here match the reference row of the last prompt token within
 * test_reference.c's bounds (float files: KL < 1e-5 and the same top token; quantized ones: its
 * per-position bound, KL < 1e-2). It is also exactly the state behind ox_decode's own logits. */
static void check_reference(const char *dir, const char *name, json_t *ref) {
    char path[2048], model_file[2048];
    if (!reference_model_path(dir, name, model_file, sizeof model_file))
        return;
    struct ox_model *m = NULL;
    struct ox_model_params mp = test_model_params();
    CHECK_MSG(ox_model_load(model_file, &mp, &m) == OX_OK, "%s: %s", name, ox_last_error());
    reference_model_release(model_file); /* loaded: the mapping outlives the name */
    struct ox_context *ctx = m ? new_context(m, 512, 512, true) : NULL;
    if (!ctx) {
        ox_model_free(m);
        return;
    }
    int nv = ox_model_n_vocab(m), ne = ox_model_n_embd(m);
    ox_token prompt[MAX_PROMPT];
    int n = json_ints(json_object_get(ref, "prompt"), prompt, MAX_PROMPT);
    snprintf(path, sizeof path, "%s/reference/%s.logits.f32", dir, name);
    float *ref_logits = read_f32(path, (size_t)n * nv);
    float *h = malloc((size_t)ne * sizeof *h), *z = malloc((size_t)nv * sizeof *z);
    CHECK_MSG(ox_embed(ctx, prompt, n, OX_POOLING_LAST, false, h) == OX_OK, "%s: %s", name,
              ox_last_error());
    logits_from_hidden(m, h, z);
    const float *want = ref_logits ? ref_logits + (size_t)(n - 1) * nv : NULL;
    CHECK_MSG(want != NULL, "%s: no reference logits", name);
    bool is_float = strstr(name, "f32") || strstr(name, "f16"); /* bf16 too */
    double k = want ? kl(want, z, nv) : 1e9, d = want ? max_diff(want, z, nv) : 1e9;
    /* the engine's own logits for the same token: the same state through its own kernels */
    bool wants[MAX_PROMPT] = {false};
    wants[n - 1] = true;
    struct ox_batch b = {.n_tokens = n, .token = prompt, .logits = wants};
    ox_kv_clear(ctx);
    CHECK_MSG(ox_decode(ctx, &b) == OX_OK, "%s: %s", name, ox_last_error());
    const float *own = ox_get_logits(ctx, n - 1), *own_h = ox_get_embeddings(ctx, n - 1);
    double self = own ? kl(own, z, nv) : 1e9;
    bool same_h = !strcmp(ox_model_backend(m), "CPU")
                      ? own_h && !memcmp(own_h, h, (size_t)ne * sizeof *h)
                      : own_h && max_diff(own_h, h, ne) < 1e-4;
    printf("  %-18s vs llama.cpp: KL %.2e max |logit diff| %.2e top-1 %s | vs own logits: KL "
           "%.2e\n",
           name, k, d, want && argmax(want, nv) == argmax(z, nv) ? "same" : "DIFFERENT", self);
    CHECK_MSG(same_h, "%s: the last token's state from ox_decode differs from ox_embed's", name);
    /* rounded as the CPU's matmul rounds it, h gives the engine's logits to the last bits; a
     * GPU's kernels round the activations their own way */
    double self_bound = strcmp(ox_model_backend(m), "CPU") ? 1e-3 : 1e-9;
    CHECK_MSG(self < self_bound, "%s: own logits KL %g", name, self);
    if (is_float) {
        CHECK_MSG(k < 1e-5 && want && argmax(want, nv) == argmax(z, nv), "%s: float bounds", name);
        worst_float_kl = fmax(worst_float_kl, k);
        worst_abs = fmax(worst_abs, d);
    } else {
        CHECK_MSG(k < 1e-2, "%s: quantized bound", name);
        worst_quant_kl = fmax(worst_quant_kl, k);
    }
    worst_self_kl = fmax(worst_self_kl, self);
    /* single-token steps (which a GPU replays as a recorded graph from the second on): each
     * step's state still gives its own logits */
    ox_token greedy[4];
    int ng = json_ints(json_object_get(ref, "greedy"), greedy, 4);
    for (int g = 0; g < ng; g++) {
        struct ox_batch one = {.n_tokens = 1, .token = &greedy[g]};
        const float *s = ox_decode(ctx, &one) == OX_OK ? ox_get_embeddings(ctx, 0) : NULL;
        CHECK_MSG(s != NULL, "%s: step %d: %s", name, g, ox_last_error());
        if (!s)
            break;
        logits_from_hidden(m, s, z);
        double step = kl(ox_get_logits(ctx, 0), z, nv);
        CHECK_MSG(step < self_bound, "%s: step %d: own logits KL %g", name, g, step);
        worst_self_kl = fmax(worst_self_kl, step);
    }
    free(h), free(z), free(ref_logits);
    ox_context_free(ctx);
    ox_model_free(m);
}

static void check_references(void) {
    int n_models = for_each_reference(check_reference);
    printf("%d reference models: worst KL float %.2e (max |logit diff| %.2e), quantized %.2e; "
           "worst KL vs own logits %.2e\n",
           n_models, worst_float_kl, worst_abs, worst_quant_kl, worst_self_kl);
    CHECK(n_models >= 3);
}

/* ---- pooling against the per-token states ------------------------------------------------- */

#define NP 40 /* prompt tokens: several pieces of n_batch 7 */

struct pooled {
    float mean[1024], cls[1024], last[1024];
};

/* All three poolings of t, normalized or not. */
static void embed_all(struct ox_context *c, const ox_token *t, bool normalize, struct pooled *p) {
    CHECK_MSG(ox_embed(c, t, NP, OX_POOLING_MEAN, normalize, p->mean) == OX_OK, "%s",
              ox_last_error());
    CHECK_MSG(ox_embed(c, t, NP, OX_POOLING_CLS, normalize, p->cls) == OX_OK, "%s",
              ox_last_error());
    CHECK_MSG(ox_embed(c, t, NP, OX_POOLING_LAST, normalize, p->last) == OX_OK, "%s",
              ox_last_error());
}

static double norm2(const float *x, int n) {
    double s = 0;
    for (int i = 0; i < n; i++)
        s += (double)x[i] * x[i];
    return sqrt(s);
}

static double cosine(const float *a, const float *b, int n) {
    double ab = 0;
    for (int i = 0; i < n; i++)
        ab += (double)a[i] * b[i];
    return ab / (norm2(a, n) * norm2(b, n));
}

/* mean = the average of the states ox_decode keeps for a batch asking every output, cls = the
 * first, last = the last; normalized = the same direction at unit length; pieces of 7 tokens =
 * one batch. The tolerances: how far batches of different shapes may round apart
 * (test_decode.c). With quantized weights batches of other sizes (7 tokens, 40, or the 1 row
 * cls and last keep for the last FFN on a GPU) take other kernels, summing in other orders,
 * and a last-bit difference flips some 8-bit roundings of the activations downstream. */
static void check_pooling(const char *name) {
    char path[2048];
    snprintf(path, sizeof path, "%s/models/%s.gguf", test_data_dir(), name);
    struct ox_model *m = NULL;
    struct ox_model_params mp = test_model_params();
    CHECK_MSG(ox_model_load(path, &mp, &m) == OX_OK, "%s: %s", name, ox_last_error());
    if (!m)
        return;
    int ne = ox_model_n_embd(m), nv = ox_model_n_vocab(m);
    bool cpu = !strcmp(ox_model_backend(m), "CPU");
    bool quantized = !strstr(name, "f32") && !strstr(name, "f16");
    double tol = cpu ? 1e-4 : quantized ? 5e-2 : 1e-2, piece_tol = quantized ? 5e-2 : tol;
    ox_token t[NP];
    bool all[NP];
    for (int i = 0; i < NP; i++)
        t[i] = (ox_token)(3 + (i * 37 + 11) % (nv - 3)), all[i] = true;
    struct ox_context *one = new_context(m, 64, 64, true), *pieces = new_context(m, 64, 7, true);
    static float states[NP][1024], mean[1024];
    static struct pooled a, b, an;
    CHECK(ne <= 1024);
    struct ox_batch batch = {.n_tokens = NP, .token = t, .logits = all};
    CHECK_MSG(ox_decode(one, &batch) == OX_OK, "%s: %s", name, ox_last_error());
    for (int i = 0; i < NP; i++) {
        const float *s = ox_get_embeddings(one, i);
        CHECK(s != NULL && ox_get_logits(one, i) != NULL); /* logits are still made */
        memcpy(states[i], s ? s : mean, (size_t)ne * sizeof(float));
    }
    CHECK(!ox_get_embeddings(one, -1) && !ox_get_embeddings(one, NP));
    for (int j = 0; j < ne; j++) {
        double s = 0;
        for (int i = 0; i < NP; i++)
            s += states[i][j];
        mean[j] = (float)(s / NP);
    }
    embed_all(one, t, false, &a);
    embed_all(pieces, t, false, &b);
    embed_all(one, t, true, &an);
    double d_mean = max_diff(a.mean, mean, ne), d_cls = max_diff(a.cls, states[0], ne);
    double d_last = max_diff(a.last, states[NP - 1], ne);
    double d_pieces = fmax(max_diff(a.mean, b.mean, ne),
                           fmax(max_diff(a.cls, b.cls, ne), max_diff(a.last, b.last, ne)));
    double cos_gap = fmax(1 - cosine(a.mean, b.mean, ne), 1 - cosine(a.last, b.last, ne));
    printf("  %-18s mean %.2e cls %.2e last %.2e vs per-token states; pieces of 7 vs one "
           "batch %.2e (1 - cos %.1e)\n",
           name, d_mean, d_cls, d_last, d_pieces, cos_gap);
    CHECK_MSG(d_mean < tol && d_cls < tol && d_last < tol, "%s: pooling", name);
    CHECK_MSG(d_pieces < piece_tol && cos_gap < 1e-4, "%s: n_batch pieces", name);
    CHECK(max_diff(a.mean, a.last, ne) > 1e-2 && max_diff(a.cls, a.last, ne) > 1e-2);
    float *raw[3] = {a.mean, a.cls, a.last}, *unit[3] = {an.mean, an.cls, an.last};
    for (int k = 0; k < 3; k++) {
        double len = norm2(raw[k], ne), worst = 0;
        CHECK_NEAR(norm2(unit[k], ne), 1.0, 1e-5);
        for (int j = 0; j < ne; j++)
            worst = fmax(worst, fabs(unit[k][j] - raw[k][j] / len));
        CHECK_MSG(worst < 1e-6, "%s: normalized pooling %d off by %g", name, k, worst);
    }
    /* afterwards: no rows to read, the tokens cached, decoding goes on */
    CHECK(!ox_get_logits(one, 0) && !ox_get_embeddings(one, 0));
    CHECK_EQ(ox_kv_seq_pos_max(one, 0), NP - 1);
    struct ox_batch next = {.n_tokens = 1, .token = t};
    CHECK(ox_decode(one, &next) == OX_OK && ox_get_logits(one, 0) && ox_get_embeddings(one, 0));
    ox_context_free(one);
    ox_context_free(pieces);
    ox_model_free(m);
}

/* ---- refusals -------------------------------------------------------------------------------- */

static void check_errors(void) {
    char path[2048];
    snprintf(path, sizeof path, "%s/models/llama-f16.gguf", test_data_dir());
    struct ox_model *m = NULL;
    struct ox_model_params mp = test_model_params();
    CHECK_MSG(ox_model_load(path, &mp, &m) == OX_OK, "%s", ox_last_error());
    if (!m)
        return;
    int nv = ox_model_n_vocab(m), ne = ox_model_n_embd(m);
    struct ox_context *plain = new_context(m, 32, 16, false), *c = new_context(m, 32, 16, true);
    float out[1024];
    ox_token t[40];
    for (int i = 0; i < 40; i++)
        t[i] = 5 + i;
    /* without embeddings: no states kept, ox_embed refused (and no host buffer for them) */
    struct ox_batch b = {.n_tokens = 4, .token = t};
    CHECK(ox_decode(plain, &b) == OX_OK && ox_get_logits(plain, 3) && !ox_get_embeddings(plain, 3));
    CHECK_EQ(ox_embed(plain, t, 4, OX_POOLING_MEAN, true, out), OX_ERR_INVALID_ARG);
    CHECK(strstr(ox_last_error(), "embeddings") != NULL);
    uint64_t kv0, buf0, kv1, buf1;
    ox_context_memory(plain, &kv0, &buf0);
    ox_context_memory(c, &kv1, &buf1);
    if (!strcmp(ox_model_backend(m), "CPU"))
        CHECK_EQ(buf1 - buf0, (uint64_t)16 * ne * sizeof(float));
    /* a refused call changes nothing: the 4 tokens decoded here stay cached */
    CHECK(ox_decode(c, &b) == OX_OK);
    CHECK_EQ(ox_embed(c, t, 0, OX_POOLING_MEAN, true, out), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_embed(c, t, -3, OX_POOLING_MEAN, true, out), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_embed(c, NULL, 4, OX_POOLING_MEAN, true, out), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_embed(c, t, 4, OX_POOLING_MEAN, true, NULL), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_embed(NULL, t, 4, OX_POOLING_MEAN, true, out), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_embed(c, t, 4, OX_POOLING_NONE, true, out), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_embed(c, t, 4, (enum ox_pooling)7, true, out), OX_ERR_INVALID_ARG);
    ox_token bad[3] = {5, nv, 6}, neg[2] = {-1, 5};
    CHECK_EQ(ox_embed(c, bad, 3, OX_POOLING_LAST, true, out), OX_ERR_INVALID_ARG);
    CHECK(strstr(ox_last_error(), "vocabulary") != NULL);
    CHECK_EQ(ox_embed(c, neg, 2, OX_POOLING_LAST, true, out), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_embed(c, t, 33, OX_POOLING_MEAN, true, out), OX_ERR_CONTEXT_FULL);
    CHECK_EQ(ox_kv_seq_pos_max(c, 0), 3);
    CHECK(ox_get_embeddings(c, 3) != NULL);
    /* exactly the context fits, in pieces of n_batch */
    CHECK_MSG(ox_embed(c, t, 32, OX_POOLING_MEAN, true, out) == OX_OK, "%s", ox_last_error());
    CHECK_NEAR(norm2(out, ne), 1.0, 1e-5);
    CHECK_EQ(ox_kv_seq_pos_max(c, 0), 31);
    ox_context_free(plain);
    ox_context_free(c);
    ox_model_free(m);
}

/* Learned positions end at the model's table (gpt2-f16: 1024) even in a bigger context. */
static void check_learned_positions(void) {
    char path[2048];
    snprintf(path, sizeof path, "%s/models/gpt2-f16.gguf", test_data_dir());
    struct ox_model *m = NULL;
    struct ox_model_params mp = test_model_params();
    CHECK_MSG(ox_model_load(path, &mp, &m) == OX_OK, "%s", ox_last_error());
    int32_t train = m ? ox_model_n_ctx_train(m) : 0;
    struct ox_context *c = m ? new_context(m, (uint32_t)train + 8, 512, true) : NULL;
    ox_token *t = calloc((size_t)train + 1, sizeof *t);
    float out[1024];
    if (c && t && ox_model_n_embd(m) <= 1024) {
        CHECK_EQ(ox_embed(c, t, train + 1, OX_POOLING_LAST, true, out), OX_ERR_CONTEXT_FULL);
        CHECK_EQ(ox_kv_seq_pos_max(c, 0), -1);
    }
    free(t);
    ox_context_free(c);
    ox_model_free(m);
}

int main(void) {
    check_references();
    const char *pooled[] = {"llama-f32", "llama-q4_k_m", "gemma2-f16", "gpt2-f16", "qwen3moe-f16"};
    for (size_t i = 0; i < sizeof pooled / sizeof pooled[0]; i++)
        check_pooling(pooled[i]);
    check_errors();
    check_learned_positions();
    return test_finish("test_embed");
}
