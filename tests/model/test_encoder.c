/* test_encoder.c: the embedding models (bert, nomic-bert, gemma-embedding) against llama.cpp's
 * pooled embeddings (tests/data/arch/reference/embedding/, tools/archref/dump_embedding.c): the
 * prompts' tokens, each pooling's vector (cosine > 0.9999 for float files), a reranker's tokens
 * and scores; then what an encoder does differently: sequences of one batch do not see each
 * other, nothing is kept between batches, no context without embeddings. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <math.h>

#include "oxidize.h"
#include "reference_files.h"
#include "test.h"

#define MAX_TOKENS 512
#define MAX_EMBD   1024

static const char *const POOLING_KEYS[] = {"none", "mean", "cls", "last", "rank"};
static double worst_float_cos = 1.0, worst_quant_cos = 1.0, worst_float_score, worst_quant_score;
static double model_cos, model_score; /* the model's worst, for its line */

static int json_ints(json_t *arr, ox_token *out, int cap) {
    int n = 0;
    for (size_t i = 0; i < json_array_size(arr) && n < cap; i++)
        out[n++] = (ox_token)json_integer_value(json_array_get(arr, i));
    return n;
}

static int json_floats(json_t *arr, float *out, int cap) {
    int n = 0;
    for (size_t i = 0; i < json_array_size(arr) && n < cap; i++)
        out[n++] = (float)json_number_value(json_array_get(arr, i));
    return n;
}

static double cosine(const float *a, const float *b, int n) {
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < n; i++)
        ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
    return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 0.0;
}

static bool same_tokens(const ox_token *a, int na, const ox_token *b, int nb) {
    return na == nb && !memcmp(a, b, (size_t)na * sizeof *a);
}

static struct ox_context *new_context(const struct ox_model *m) {
    struct ox_context_params cp = ox_context_params_default();
    cp.n_ctx = 512, cp.n_threads = 2, cp.embeddings = true;
    struct ox_context *c = NULL;
    CHECK_MSG(ox_context_create(m, &cp, &c) == OX_OK, "context: %s", ox_last_error());
    return c;
}

/* A score's distance from llama.cpp's, relative to the larger of 1 and the score. */
static double score_error(float want, float got) {
    return fabs((double)want - got) / fmax(1.0, fabs((double)want));
}

/* The bound on it: the classifier head (ModernBERT's: a mean, GELU and a LayerNorm) magnifies
 * the hidden states' last bits, and a GPU's matmuls round activations their own way (H100:
 * f16 1.2e-3, Q4_K_M 3.5e-2, against the CPU's 3.7e-4 and 4.2e-3). */
static double score_bound(const struct ox_model *m, bool is_float) {
    bool cpu = !strcmp(ox_model_backend(m), "CPU");
    return is_float ? (cpu ? 1e-3 : 3e-3) : (cpu ? 2e-2 : 5e-2);
}

/* One prompt: its tokens (the text's as the tokenizer makes them), then each pooling. */
static void check_prompt(const char *name, struct ox_context *c, const struct ox_model *m,
                         json_t *p, bool is_float) {
    ox_token want[MAX_TOKENS], got[MAX_TOKENS];
    int n = json_ints(json_object_get(p, "tokens"), want, MAX_TOKENS);
    const char *text = json_string_value(json_object_get(p, "text"));
    size_t nt = 0;
    if (text && *text) {
        CHECK(ox_tokenize(ox_model_vocab(m), text, strlen(text), got, MAX_TOKENS, &nt, true,
                          true) == OX_OK);
        CHECK_MSG(same_tokens(want, n, got, (int)nt), "%s: '%s' tokenizes apart from llama.cpp",
                  name, text);
    }
    for (int pool = OX_POOLING_MEAN; pool <= OX_POOLING_RANK; pool++) {
        float ref[MAX_EMBD], out[MAX_EMBD];
        int nr = json_floats(json_object_get(p, POOLING_KEYS[pool]), ref, MAX_EMBD);
        if (nr == 0) /* rank: only models with a classifier head */
            continue;
        enum ox_status st = ox_embed(c, want, n, (enum ox_pooling)pool, false, out);
        CHECK_MSG(st == OX_OK, "%s: %s pooling: %s", name, POOLING_KEYS[pool], ox_last_error());
        if (st != OX_OK)
            continue;
        if (pool == OX_POOLING_RANK) {
            double e = score_error(ref[0], out[0]);
            CHECK_MSG(e < score_bound(m, is_float), "%s: score %g, llama.cpp %g", name, out[0],
                      ref[0]);
            double *worst = is_float ? &worst_float_score : &worst_quant_score;
            *worst = fmax(*worst, e), model_score = fmax(model_score, e);
            continue;
        }
        double cs = cosine(ref, out, nr);
        CHECK_MSG(cs > (is_float ? 0.9999 : 0.999), "%s: %s pooling: cosine %.7f", name,
                  POOLING_KEYS[pool], cs);
        double *worst = is_float ? &worst_float_cos : &worst_quant_cos;
        *worst = fmin(*worst, cs), model_cos = fmin(model_cos, cs);
    }
}

/* The reranker's query and documents: llama.cpp's server tokens, and the scores. */
static void check_rerank(const char *name, struct ox_context *c, const struct ox_model *m,
                         json_t *pairs, bool is_float) {
    for (size_t i = 0; i < json_array_size(pairs); i++) {
        json_t *r = json_array_get(pairs, i);
        ox_token want[MAX_TOKENS], got[MAX_TOKENS];
        int n = json_ints(json_object_get(r, "tokens"), want, MAX_TOKENS);
        size_t ng = 0;
        CHECK(ox_tokenize_rerank(m, json_string_value(json_object_get(r, "query")),
                                 json_string_value(json_object_get(r, "document")), got, MAX_TOKENS,
                                 &ng) == OX_OK);
        CHECK_MSG(same_tokens(want, n, got, (int)ng), "%s: rerank pair %zu's tokens", name, i);
        float score;
        CHECK(ox_embed(c, got, (int32_t)ng, OX_POOLING_RANK, true, &score) == OX_OK);
        float ref = (float)json_number_value(json_object_get(r, "score"));
        CHECK_MSG(score_error(ref, score) < score_bound(m, is_float), "%s: pair %zu: %g vs %g",
                  name, i, score, ref);
    }
}

static void check_reference(const char *root, const char *name, json_t *ref) {
    char model_file[2048];
    if (!reference_model_path(root, name, model_file, sizeof model_file))
        return;
    struct ox_model *m = NULL;
    struct ox_model_params mp = test_model_params();
    CHECK_MSG(ox_model_load(model_file, &mp, &m) == OX_OK, "%s: %s", name, ox_last_error());
    reference_model_release(model_file);
    struct ox_context *c = m ? new_context(m) : NULL;
    if (c) {
        bool is_float = strstr(name, "f16") || strstr(name, "f32");
        int n_cls = (int)json_integer_value(json_object_get(ref, "n_cls_out"));
        CHECK_EQ(ox_model_n_embd(m), json_integer_value(json_object_get(ref, "n_embd")));
        CHECK_EQ(ox_model_n_cls_out(m), n_cls);
        /* the BERT family has no LM head; EmbeddingGemma keeps gemma's (tied) */
        CHECK_MSG(ox_model_has_logits(m) == !strstr(name, "bert-"), "%s: has logits", name);
        json_t *prompts = json_object_get(ref, "prompts");
        model_cos = 1.0, model_score = 0.0;
        for (size_t i = 0; i < json_array_size(prompts); i++)
            check_prompt(name, c, m, json_array_get(prompts, i), is_float);
        check_rerank(name, c, m, json_object_get(ref, "rerank"), is_float);
        printf("  %-22s %zu prompts, worst cosine %.8f", name, json_array_size(prompts), model_cos);
        if (n_cls)
            printf(", reranked: worst score error %.2e", model_score);
        putchar('\n');
    }
    ox_context_free(c);
    ox_model_free(m);
}

/* Two sequences in one batch each see only themselves (their states equal those of each alone),
 * a later batch does not see an earlier one, and the model's pooling comes from its file. */
static void check_batches(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/bert-f16.gguf", ARCH_REFERENCE_DIR);
    struct ox_model *m = NULL;
    struct ox_model_params mp = test_model_params();
    CHECK_MSG(ox_model_load(path, &mp, &m) == OX_OK, "%s", ox_last_error());
    if (!m)
        return;
    CHECK_EQ(ox_model_pooling(m), OX_POOLING_CLS);
    struct ox_context_params cp = ox_context_params_default();
    struct ox_context *c = NULL;
    CHECK(ox_context_create(m, &cp, &c) == OX_ERR_INVALID_ARG); /* no embeddings: nothing to do */
    CHECK(c == NULL && strstr(ox_last_error(), "embeddings") != NULL);
    cp.n_ctx = 64, cp.n_seq_max = 2, cp.embeddings = true;
    CHECK(ox_context_create(m, &cp, &c) == OX_OK);
    int e = ox_model_n_embd(m);
    ox_token a[5] = {101, 2054, 2003, 1996, 102}, b[3] = {101, 3007, 102}, both[8];
    int32_t seq[8] = {0, 0, 0, 0, 0, 1, 1, 1};
    memcpy(both, a, sizeof a), memcpy(both + 5, b, sizeof b);
    bool out[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    float alone[8][MAX_EMBD], together[8][MAX_EMBD];
    struct ox_batch ba = {.n_tokens = 5, .token = a, .logits = out};
    struct ox_batch bb = {.n_tokens = 3, .token = b, .logits = out};
    struct ox_batch bab = {.n_tokens = 8, .token = both, .seq_id = seq, .logits = out};
    bool ok = c && ox_decode(c, &ba) == OX_OK;
    for (int t = 0; ok && t < 5; t++)
        memcpy(alone[t], ox_get_embeddings(c, t), (size_t)e * sizeof(float));
    ok = ok && ox_decode(c, &bb) == OX_OK; /* sees nothing of a's batch */
    for (int t = 0; ok && t < 3; t++)
        memcpy(alone[5 + t], ox_get_embeddings(c, t), (size_t)e * sizeof(float));
    ok = ok && ox_decode(c, &bab) == OX_OK;
    for (int t = 0; ok && t < 8; t++)
        memcpy(together[t], ox_get_embeddings(c, t), (size_t)e * sizeof(float));
    CHECK_MSG(ok, "%s", ox_last_error());
    double worst = 1.0;
    for (int t = 0; ok && t < 8; t++)
        worst = fmin(worst, cosine(alone[t], together[t], e));
    CHECK_MSG(worst > 0.99999, "sequences of one batch mix: cosine %.7f", worst);
    CHECK(c && ox_get_logits(c, 0) == NULL);
    ox_context_free(c);
    ox_model_free(m);
}

int main(void) {
    int n = for_each_reference_in(ARCH_REFERENCE_DIR, "reference/embedding", check_reference);
    printf(
        "%d embedding model references: worst cosine float %.8f, quantized %.6f; worst score error "
        "float %.2e, quantized %.2e\n",
        n, worst_float_cos, worst_quant_cos, worst_float_score, worst_quant_score);
    CHECK(n >= 4 || getenv("OX_TEST_MODELS"));
    check_batches();
    return test_finish("test_encoder");
}
