/* test_speculative.c: speculative decoding keeps plain decoding's output. A batch computed in
 * one-token order gives every row the logits of decoding it alone, bit for bit, for each weight
 * type (and the cache rows it leaves continue alike); greedy and seeded sampled text with prompt
 * lookup or a draft model equals plain decoding's token for token; drafts do get accepted;
 * a full context, bad parameters, another vocabulary and a recurrent target are refused. On a
 * GPU the same, for batches up to the step it records (ox_context_recorded_tokens). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "oxidize.h"
#include "reference_files.h"
#include "test.h"

enum { PROMPT = 6, BATCH = 11, AFTER = 3 };

static struct ox_model *load(const char *path) {
    struct ox_model_params p = test_model_params();
    struct ox_model *m = NULL;
    CHECK_MSG(ox_model_load(path, &p, &m) == OX_OK, "%s: %s", path, ox_last_error());
    return m;
}

static struct ox_model *load_shared(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/%s", test_data_dir(), name);
    return load(path);
}

static struct ox_context *context(struct ox_model *m, uint32_t n_ctx) {
    struct ox_context_params p = ox_context_params_default();
    p.n_ctx = n_ctx, p.n_threads = 2;
    struct ox_context *c = NULL;
    CHECK_MSG(ox_context_create(m, &p, &c) == OX_OK, "%s", ox_last_error());
    return c;
}

/* Tokens t[0, n) from position p0, every row's logits copied to out (n x n_vocab). */
static bool feed(struct ox_context *c, const ox_token *t, int n, int32_t p0, float *out) {
    int32_t pos[BATCH + PROMPT], seq[BATCH + PROMPT];
    bool want[BATCH + PROMPT];
    for (int i = 0; i < n; i++)
        pos[i] = p0 + i, seq[i] = 0, want[i] = true;
    struct ox_batch b = {.n_tokens = n, .token = t, .pos = pos, .seq_id = seq, .logits = want};
    if (ox_decode(c, &b) != OX_OK)
        return false;
    int32_t nv = ox_model_n_vocab(ox_context_model(c));
    for (int i = 0; out && i < n; i++)
        memcpy(out + (size_t)i * nv, ox_get_logits(c, i), (size_t)nv * sizeof *out);
    return true;
}

/* BATCH tokens after a prompt (fewer where a GPU records fewer), one at a time and then as one
 * batch in one-token order (and AFTER more one at a time behind each): every row's logits the
 * same bits. */
static void check_one_token_order(const char *name) {
    struct ox_model *m = load_shared(name);
    if (!m)
        return;
    int32_t nv = ox_model_n_vocab(m), n_tok = ox_vocab_n_tokens(ox_model_vocab(m));
    ox_token t[PROMPT + BATCH + AFTER];
    for (int i = 0; i < PROMPT + BATCH + AFTER; i++)
        t[i] = (ox_token)((7 + 131 * i) % n_tok);
    struct ox_context *a = context(m, 64), *b = context(m, 64);
    int batch = BATCH, recorded = (int)ox_context_recorded_tokens(b);
    batch = recorded > 0 && recorded < batch ? recorded : batch;
    size_t rows = (size_t)batch + AFTER;
    float *one = calloc(rows * (size_t)nv, sizeof *one), *wide = calloc(rows * (size_t)nv, 4);
    bool ok = feed(a, t, PROMPT, 0, NULL) && feed(b, t, PROMPT, 0, NULL);
    for (int i = 0; ok && i < (int)rows; i++)
        ok = feed(a, t + PROMPT + i, 1, PROMPT + i, one + (size_t)i * nv);
    ox_context_set_one_token_order(b, true);
    ok = ok && feed(b, t + PROMPT, batch, PROMPT, wide);
    ox_context_set_one_token_order(b, false);
    for (int i = 0; ok && i < AFTER; i++)
        ok =
            feed(b, t + PROMPT + batch + i, 1, PROMPT + batch + i, wide + (size_t)(batch + i) * nv);
    CHECK_MSG(ok, "%s: %s", name, ox_last_error());
    size_t differ = 0;
    for (size_t r = 0; ok && r < rows; r++)
        differ += memcmp(one + r * nv, wide + r * nv, (size_t)nv * sizeof *one) != 0;
    CHECK_MSG(ok && differ == 0, "%s (%s): %zu of %zu rows differ from one-token decoding", name,
              ox_model_backend(m), differ, rows);
    free(one);
    free(wide);
    ox_context_free(a);
    ox_context_free(b);
    ox_model_free(m);
}

/* ---- generation ------------------------------------------------------------------------ */

enum { GEN = 120 };

struct gen {
    ox_token t[GEN];
    int n;
    struct ox_spec_stats stats;
};

static struct ox_sampler *sampler(bool greedy) {
    struct ox_sampler *s = NULL;
    CHECK(ox_sampler_create(&s) == OX_OK);
    if (greedy) {
        ox_sampler_add_greedy(s);
    } else {
        ox_sampler_add_top_k(s, 40);
        ox_sampler_add_temp(s, 0.8f);
        ox_sampler_add_dist(s, 1234);
    }
    return s;
}

/* The prompt's tokens (BOS first) decoded into a fresh context of c_ctx cells. */
static struct ox_context *prompt_context(struct ox_model *m, const char *text, uint32_t n_ctx,
                                         ox_token *prompt, size_t *n) {
    CHECK(ox_tokenize(ox_model_vocab(m), text, strlen(text), prompt, 512, n, true, false) == OX_OK);
    struct ox_context *c = context(m, n_ctx);
    struct ox_batch b = {.n_tokens = (int32_t)*n, .token = prompt};
    CHECK(ox_decode(c, &b) == OX_OK);
    return c;
}

/* GEN tokens (or until end of text or a full context), plainly or with a drafter (spec: its
 * parameters, or NULL). */
static void generate(struct ox_model *m, const char *text, bool greedy,
                     const struct ox_spec_params *spec, uint32_t n_ctx, struct gen *g) {
    ox_token prompt[512];
    size_t n_prompt = 0;
    struct ox_context *c = prompt_context(m, text, n_ctx, prompt, &n_prompt);
    struct ox_sampler *smp = sampler(greedy);
    const struct ox_vocab *v = ox_model_vocab(m);
    int32_t nv = ox_model_n_vocab(m);
    struct ox_spec *sp = NULL;
    if (spec) {
        CHECK_MSG(ox_spec_create(c, 0, spec, &sp) == OX_OK, "%s", ox_last_error());
        CHECK(sp && ox_spec_begin(sp, prompt, n_prompt) == OX_OK);
    }
    memset(g, 0, sizeof *g);
    ox_token t = ox_sampler_sample(smp, ox_get_logits(c, (int32_t)n_prompt - 1), nv);
    bool end = t < 0 || ox_vocab_is_eog(v, t);
    if (!end) {
        CHECK(ox_sampler_accept(smp, t) == OX_OK);
        g->t[g->n++] = t;
    }
    while (!end && g->n < GEN) {
        if (sp) { /* the tokens it samples are accepted; the last one is the next to decode */
            ox_token out[GEN];
            int32_t n_out = 0;
            enum ox_status st = ox_spec_step(sp, smp, t, out, GEN - g->n, &n_out);
            CHECK_MSG(st == OX_OK || st == OX_ERR_CONTEXT_FULL, "%s", ox_last_error());
            CHECK(st != OX_OK || (n_out >= 1 && n_out <= GEN - g->n));
            end = st != OX_OK;
            for (int i = 0; i < n_out && !end; i++) {
                end = out[i] < 0 || ox_vocab_is_eog(v, out[i]);
                if (!end)
                    g->t[g->n++] = out[i];
            }
            t = n_out ? out[n_out - 1] : t;
            continue;
        }
        struct ox_batch b = {.n_tokens = 1, .token = &t};
        if (ox_decode(c, &b) != OX_OK)
            break;
        t = ox_sampler_sample(smp, ox_get_logits(c, 0), nv);
        end = t < 0 || ox_vocab_is_eog(v, t);
        if (!end) {
            CHECK(ox_sampler_accept(smp, t) == OX_OK);
            g->t[g->n++] = t;
        }
    }
    if (sp)
        ox_spec_stats(sp, &g->stats);
    ox_spec_free(sp);
    ox_sampler_free(smp);
    ox_context_free(c);
}

/* The same tokens. */
static void check_same(const char *what, const struct gen *plain, const struct gen *spec) {
    int same = 0;
    while (same < plain->n && same < spec->n && plain->t[same] == spec->t[same])
        same++;
    CHECK_MSG(plain->n == spec->n && same == plain->n,
              "%s: %d and %d tokens, the same for the first %d", what, plain->n, spec->n, same);
}

/* A passage, then its start again: the continuation repeats what the prompt holds, so prompt
 * lookup's drafts are mostly right. */
static const char *REPEAT =
    "And I saw a new heaven and a new earth: for the first heaven and the first earth were "
    "passed away; and there was no more sea. And I John saw the holy city, new Jerusalem, "
    "coming down from God out of heaven, prepared as a bride adorned for her husband. And I "
    "heard a great voice out of heaven saying, Behold, the tabernacle of God is with men, and "
    "he will dwell with them, and they shall be his people, and God himself shall be with them, "
    "and be their God. And I saw a new heaven and a new earth: for the first heaven";

static void check_kjv(void) {
    struct ox_model *m = load_shared("kjv-15m-q4_k_m.gguf");
    if (!m)
        return;
    struct ox_spec_params lookup = ox_spec_params_default();
    struct ox_spec_params self = ox_spec_params_default();
    self.draft_model = m, self.draft_max = 5, self.draft_p_min = 0, self.n_threads = 2;
    for (int greedy = 1; greedy >= 0; greedy--) {
        struct gen plain, spec;
        generate(m, REPEAT, greedy, NULL, 512, &plain);
        CHECK(plain.n == GEN);
        generate(m, REPEAT, greedy, &lookup, 512, &spec);
        check_same(greedy ? "kjv, greedy, prompt lookup" : "kjv, sampled, prompt lookup", &plain,
                   &spec);
        /* the text repeats itself: drafts hold, and fewer steps than tokens */
        CHECK_MSG(
            (spec.stats.accepted * 10 > spec.stats.drafted && spec.stats.steps < GEN * 9 / 10) ||
                !greedy,
            "prompt lookup: %llu of %llu drafted tokens accepted in %llu steps",
            (unsigned long long)spec.stats.accepted, (unsigned long long)spec.stats.drafted,
            (unsigned long long)spec.stats.steps);
        /* the model as its own draft: greedy drafts hold but where the draft's batches round
         * a near tie the other way (its context keeps the batch kernels) */
        generate(m, REPEAT, greedy, &self, 512, &spec);
        check_same(greedy ? "kjv, greedy, draft model" : "kjv, sampled, draft model", &plain,
                   &spec);
        CHECK_MSG(spec.stats.accepted * 10 >= spec.stats.drafted * 9 || !greedy,
                  "self-draft: %llu of %llu accepted", (unsigned long long)spec.stats.accepted,
                  (unsigned long long)spec.stats.drafted);
        /* a context that fills up: the same tokens until it does */
        generate(m, REPEAT, greedy, NULL, 160, &plain);
        generate(m, REPEAT, greedy, &lookup, 160, &spec);
        check_same("kjv, a full context", &plain, &spec);
        CHECK(plain.n < GEN && plain.n > 0);
    }
    ox_model_free(m);
}

/* A draft model of another size and type than the target, the same vocabulary. */
static void check_draft_pair(void) {
    struct ox_model *target = load_shared("llama-q8_0.gguf"),
                    *draft = load_shared("llama-q4_0.gguf");
    if (target && draft) {
        struct ox_spec_params p = ox_spec_params_default();
        p.draft_model = draft, p.draft_p_min = 0, p.draft_max = 4, p.n_threads = 2;
        for (int greedy = 1; greedy >= 0; greedy--) {
            struct gen plain, spec;
            generate(target, "Once upon a time", greedy, NULL, 512, &plain);
            generate(target, "Once upon a time", greedy, &p, 512, &spec);
            check_same(greedy ? "llama q8_0 with a q4_0 draft, greedy" : "q4_0 draft, sampled",
                       &plain, &spec);
            CHECK(spec.stats.drafted > 0 && spec.stats.accepted > 0);
        }
    }
    ox_model_free(target);
    ox_model_free(draft);
}

/* Bad parameters, a draft of another vocabulary, a recurrent target: refused with a message. */
static void check_refusals(void) {
    struct ox_model *m = load_shared("llama-q4_0.gguf"), *kjv = load_shared("kjv-15m-q4_k_m.gguf");
    if (!m || !kjv)
        return;
    struct ox_context *c = context(m, 64);
    struct ox_spec *sp = (struct ox_spec *)1;
    struct ox_spec_params p = ox_spec_params_default();
    p.draft_max = 0;
    CHECK(ox_spec_create(c, 0, &p, &sp) == OX_ERR_INVALID_ARG && sp == NULL);
    p = ox_spec_params_default(), p.draft_min = 17;
    CHECK(ox_spec_create(c, 0, &p, &sp) == OX_ERR_INVALID_ARG);
    p = ox_spec_params_default(), p.draft_p_min = 1.5f;
    CHECK(ox_spec_create(c, 0, &p, &sp) == OX_ERR_INVALID_ARG);
    p = ox_spec_params_default(), p.ngram_min = 0;
    CHECK(ox_spec_create(c, 0, &p, &sp) == OX_ERR_INVALID_ARG);
    p = ox_spec_params_default(), p.draft_model = kjv;
    CHECK(ox_spec_create(c, 0, &p, &sp) == OX_ERR_INVALID_ARG && sp == NULL);
    CHECK_MSG(strstr(ox_last_error(), "vocabulary") != NULL, "%s", ox_last_error());
    p = ox_spec_params_default();
    CHECK(ox_spec_create(c, 0, &p, &sp) == OX_OK && sp);
    ox_token out[4];
    int32_t n_out = 5;
    struct ox_sampler *smp = sampler(true);
    CHECK(ox_spec_step(sp, smp, 1, out, 0, &n_out) == OX_ERR_INVALID_ARG && n_out == 0);
    CHECK(ox_spec_step(sp, NULL, 1, out, 4, &n_out) == OX_ERR_INVALID_ARG);
    CHECK(ox_spec_begin(NULL, out, 1) == OX_ERR_INVALID_ARG &&
          ox_spec_begin(sp, NULL, 3) == OX_ERR_INVALID_ARG);
    CHECK(ox_spec_create(NULL, 0, &p, &sp) == OX_ERR_INVALID_ARG);
    CHECK(ox_spec_top(NULL, 4, NULL) == -1 && ox_spec_lookup(NULL, 3, 1, 2, 4, out) == 0);
    ox_sampler_free(smp);
    ox_spec_free(sp);
    ox_context_free(c);
    ox_model_free(m);
    ox_model_free(kjv);
    struct ox_model *rec = load(OX_SOURCE_DIR "/tests/data/arch/models/qwen35-f16.gguf");
    if (!rec)
        return;
    c = context(rec, 64);
    p = ox_spec_params_default();
    CHECK(ox_spec_create(c, 0, &p, &sp) == OX_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(ox_last_error(), "recurrent") != NULL, "%s", ox_last_error());
    ox_context_free(c);
    ox_model_free(rec);
}

int main(void) {
    /* every shared model: each weight type the kernels treat apart, the kjv model's mix (q5_0
     * at 288 columns), MoE routing, q/k norms, soft-capping, parallel blocks, learned positions */
    const char *types[] = {
        "llama-f32.gguf",     "llama-f16.gguf",       "llama-bf16.gguf",   "llama-q1_0.gguf",
        "llama-q2_0.gguf",    "llama-tq1_0.gguf",     "llama-tq2_0.gguf",  "llama-q4_0.gguf",
        "llama-q4_1.gguf",    "llama-q5_0.gguf",      "llama-q5_1.gguf",   "llama-q8_0.gguf",
        "llama-q2_k.gguf",    "llama-q3_k.gguf",      "llama-q3_k_m.gguf", "llama-q4_k.gguf",
        "llama-q4_k_m.gguf",  "llama-q5_k.gguf",      "llama-q5_k_m.gguf", "llama-q6_k.gguf",
        "llama-iq4_nl.gguf",  "llama-iq4_xs.gguf",    "llama-iq3_s.gguf",  "kjv-15m-q4_k_m.gguf",
        "llama-moe-f16.gguf", "llama-mxfp4_moe.gguf", "qwen3moe-f16.gguf", "qwen2-f16.gguf",
        "qwen3-f16.gguf",     "gemma2-f16.gguf",      "gemma3-f16.gguf",   "phi2-f16.gguf",
        "phi3-f16.gguf",      "falcon-f16.gguf",      "gpt2-f16.gguf",     "starcoder2-f16.gguf"};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        /* under an emulator's lower levels a representative few (OX_TEST_MODELS, as
         * test_reference: tests/model/neon_models_qemu.sh) */
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(strlen(types[i]) - 5), types[i]);
        if (reference_wanted(name))
            check_one_token_order(types[i]);
    }
    /* speculation itself (drafts, lookup, refusals) once a run: at the levels below the best
     * (tests/CMakeLists.txt's name@level runs, qemu's lower NEON levels) OX_TEST_ENGINE_CHECKS=0
     * leaves it out, the kernels' one-token orders above being what differs there (at scalar
     * it was 22 of the test's 27 s here) */
    const char *engine = getenv("OX_TEST_ENGINE_CHECKS");
    if (!engine || strcmp(engine, "0") != 0) {
        check_kjv();
        check_draft_pair();
        check_refusals();
    }
    printf("%d checks, %d failures\n", test_checks, test_failures);
    return test_failures != 0;
}
