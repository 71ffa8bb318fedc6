/* test_lora.c: LoRA adapters against llama.cpp: the shared llama-f16 model with
 * tests/data/lora's adapters (one, then two at other scales) gives llama.cpp's logits with them
 * (mean KL < 1e-5, top-1 equal: a float model's bounds), and the base model's again once they
 * are taken off, and a copy of the model with them merged in (ox_lora_export) does the same;
 * adapters that do not fit the model (another architecture or shape, a lone half,
 * a stray tensor, an embedding, not an adapter at all) are refused with a message. */
#include "gguf/gguf.h"
#include "oxidize.h"
#include "reference_files.h"

#define LORA_DIR   OX_SOURCE_DIR "/tests/data/lora"
#define MAX_PROMPT 64

static ox_token prompt[MAX_PROMPT];
static int n_prompt, n_vocab;

/* The prompt of the shared reference. */
static bool read_prompt(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/reference/llama-f16.json", test_data_dir());
    json_t *ref = json_load_file(path, 0, NULL);
    json_t *arr = json_object_get(ref, "prompt");
    for (size_t i = 0; i < json_array_size(arr) && n_prompt < MAX_PROMPT; i++)
        prompt[n_prompt++] = (ox_token)json_integer_value(json_array_get(arr, i));
    json_decref(ref);
    CHECK_MSG(n_prompt > 0, "%s: no prompt", path);
    return n_prompt > 0;
}

/* The logits of every prompt position, decoded as one batch into a cleared cache. */
static float *prompt_logits(struct ox_context *c) {
    int32_t pos[MAX_PROMPT], seq[MAX_PROMPT];
    bool want[MAX_PROMPT];
    for (int i = 0; i < n_prompt; i++)
        pos[i] = i, seq[i] = 0, want[i] = true;
    struct ox_batch b = {
        .n_tokens = n_prompt, .token = prompt, .pos = pos, .seq_id = seq, .logits = want};
    ox_kv_clear(c);
    CHECK_MSG(ox_decode(c, &b) == OX_OK, "%s", ox_last_error());
    float *out = malloc((size_t)n_prompt * n_vocab * sizeof *out);
    for (int i = 0; i < n_prompt; i++)
        memcpy(out + (size_t)i * n_vocab, ox_get_logits(c, i), (size_t)n_vocab * sizeof *out);
    return out;
}

/* Where the reference's top logit leads ours by less than this, the two are a near tie (as in
 * test_reference.c): on a GPU, whose f16 products round otherwise, one of the 48 positions of
 * the f32 adapter's prompt picks the other token at a mean KL of 1.3e-6. */
#define NEAR_TIE 0.25

/* Mean KL of got against the reference, and whether every top token agrees (or nearly ties). */
static double mean_kl(const float *want, const float *got, bool *top1) {
    double sum = 0;
    *top1 = true;
    for (int i = 0; i < n_prompt; i++) {
        const float *w = want + (size_t)i * n_vocab, *g = got + (size_t)i * n_vocab;
        int r = argmax(w, n_vocab), o = argmax(g, n_vocab);
        sum += kl(w, g, n_vocab);
        *top1 = *top1 && (r == o || w[r] - w[o] < NEAR_TIE);
    }
    return sum / n_prompt;
}

static void check_against(const char *ref_path, const float *got, const char *what) {
    float *want = read_f32(ref_path, (size_t)n_prompt * n_vocab);
    CHECK_MSG(want != NULL, "%s: cannot read %s", what, ref_path);
    if (!want)
        return;
    bool top1;
    double m = mean_kl(want, got, &top1);
    CHECK_MSG(m < 1e-5 && top1, "%s: mean KL %.3g against llama.cpp, top-1 %s", what, m,
              top1 ? "equal" : "differs");
    printf("  %s: mean KL %.3g against llama.cpp\n", what, m);
    free(want);
}

static struct ox_lora *load_lora(struct ox_model *m, const char *name) {
    struct ox_lora *l = NULL;
    CHECK_MSG(ox_lora_load(m, name, &l) == OX_OK, "%s: %s", name, ox_last_error());
    return l;
}

/* The logits of n_prompt tokens decoded one at a time with the adapters of c, the adapters
 * changed halfway (a recorded step must not keep the old ones), into out. */
static void one_at_a_time(struct ox_context *c, struct ox_lora *f32, struct ox_lora *f16,
                          float *out) {
    ox_kv_clear(c);
    ox_context_clear_lora(c);
    CHECK_EQ(ox_context_set_lora(c, f32, 1.0f), OX_OK);
    for (int i = 0; i < n_prompt; i++) {
        if (i == n_prompt / 2) {
            CHECK_EQ(ox_context_set_lora(c, f32, 0.25f), OX_OK);
            CHECK_EQ(ox_context_set_lora(c, f16, 1.0f), OX_OK);
        }
        int32_t pos = i, seq = 0;
        bool want = true;
        struct ox_batch b = {
            .n_tokens = 1, .token = &prompt[i], .pos = &pos, .seq_id = &seq, .logits = &want};
        CHECK_MSG(ox_decode(c, &b) == OX_OK, "%s", ox_last_error());
        memcpy(out + (size_t)i * n_vocab, ox_get_logits(c, 0), (size_t)n_vocab * sizeof *out);
    }
}

/* The logits of the last n_prompt of WIDE tokens decoded as one batch with adapter f32: wider
 * than a small model's FFN buffers on a GPU, which then goes by slices of the FFN (ffn.c's
 * ffn_sliced), the adapters' deltas sliced with it. */
#define WIDE 400
static void wide_batch(struct ox_context *c, struct ox_lora *f32, float *out) {
    static ox_token tok[WIDE];
    static int32_t pos[WIDE], seq[WIDE];
    static bool want[WIDE];
    for (int i = 0; i < WIDE; i++)
        tok[i] = (ox_token)((7 * i + 3) % n_vocab), pos[i] = i, seq[i] = 0,
        want[i] = i >= WIDE - n_prompt;
    ox_kv_clear(c);
    ox_context_clear_lora(c);
    CHECK_EQ(ox_context_set_lora(c, f32, 1.0f), OX_OK);
    struct ox_batch b = {.n_tokens = WIDE, .token = tok, .pos = pos, .seq_id = seq, .logits = want};
    CHECK_MSG(ox_decode(c, &b) == OX_OK, "%s", ox_last_error());
    for (int i = 0; i < n_prompt; i++)
        memcpy(out + (size_t)i * n_vocab, ox_get_logits(c, WIDE - n_prompt + i),
               (size_t)n_vocab * sizeof *out);
}

/* Decode steps of one token (on a GPU, recorded and replayed) with adapters that change on the
 * way, and a batch wide enough to slice the FFN, give the logits the CPU gives: m as loaded
 * against the same model on the CPU. */
static void check_steps(const char *path, struct ox_model *m, struct ox_lora *f32,
                        struct ox_lora *f16) {
    struct ox_model_params mp = ox_model_params_default();
    mp.n_gpu_layers = 0;
    struct ox_model *cpu = NULL;
    struct ox_context *c = NULL, *h = NULL;
    struct ox_context_params cp = ox_context_params_default();
    cp.n_ctx = 512, cp.n_threads = 2;
    CHECK_EQ(ox_model_load(path, &mp, &cpu), OX_OK);
    struct ox_lora *cf32 = cpu ? load_lora(cpu, LORA_DIR "/llama-lora-f32.gguf") : NULL;
    struct ox_lora *cf16 = cpu ? load_lora(cpu, LORA_DIR "/llama-lora-f16.gguf") : NULL;
    if (cf32 && cf16 && ox_context_create(m, &cp, &c) == OX_OK &&
        ox_context_create(cpu, &cp, &h) == OX_OK) {
        float *got = malloc((size_t)n_prompt * n_vocab * sizeof *got);
        float *want = malloc((size_t)n_prompt * n_vocab * sizeof *want);
        one_at_a_time(c, f32, f16, got);
        one_at_a_time(h, cf32, cf16, want);
        bool top1;
        double k = mean_kl(want, got, &top1);
        CHECK_MSG(k < 1e-5 && top1, "one token at a time (%s): mean KL %.3g against the CPU",
                  ox_model_backend(m), k);
        printf("  one token at a time, adapters changed halfway (%s): mean KL %.3g against the "
               "CPU\n",
               ox_model_backend(m), k);
        wide_batch(c, f32, got);
        wide_batch(h, cf32, want);
        k = mean_kl(want, got, &top1);
        CHECK_MSG(k < 1e-5 && top1, "a batch of %d (%s): mean KL %.3g against the CPU", WIDE,
                  ox_model_backend(m), k);
        printf("  a batch of %d (%s): mean KL %.3g against the CPU\n", WIDE, ox_model_backend(m),
               k);
        free(got), free(want);
    }
    ox_context_free(c), ox_context_free(h);
    ox_model_free(cpu);
}

/* The adapters merged into a copy of the model (ox_lora_export) give llama.cpp's logits with
 * them applied at run time: within a float model's bounds (the merged weights round to f16). */
static void check_export(struct ox_model *m, struct ox_lora *const *loras, const float *scales,
                         int n, const char *ref_path, const char *what) {
    char path[1024];
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/ox_merged_%d.gguf", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    CHECK_MSG(ox_lora_export(m, loras, scales, n, path) == OX_OK, "%s: %s", what, ox_last_error());
    struct ox_model_params mp = ox_model_params_default();
    mp.n_gpu_layers = 0;
    struct ox_model *merged = NULL;
    struct ox_context *c = NULL;
    struct ox_context_params cp = ox_context_params_default();
    cp.n_ctx = 512, cp.n_threads = 2;
    CHECK_MSG(ox_model_load(path, &mp, &merged) == OX_OK, "%s", ox_last_error());
    if (merged && ox_context_create(merged, &cp, &c) == OX_OK) {
        float *got = prompt_logits(c);
        check_against(ref_path, got, what);
        free(got);
    }
    ox_context_free(c);
    ox_model_free(merged);
    unlink(path);
}

/* An adapter written here from the f32 one with a change: key set to value (NULL: kept), the
 * tensors for which keep() is false left out, or one more tensor named extra (with pair, two:
 * extra.lora_a and extra.lora_b, of rank 4). */
static void write_variant(const char *out, const char *key, const char *value,
                          bool (*keep)(const char *name), const char *extra, bool pair) {
    struct ox_gguf *g = NULL;
    struct gguf_writer *w = NULL;
    CHECK_EQ(gguf_open(LORA_DIR "/llama-lora-f32.gguf", true, &g), OX_OK);
    CHECK_EQ(gguf_writer_create(&w), OX_OK);
    for (int64_t i = 0; g && i < g->n_kv; i++)
        gguf_writer_set(w, g->kv[i].key, &g->kv[i].value);
    if (key)
        gguf_writer_set_str(w, key, value);
    for (int64_t i = 0; g && i < g->n_tensors; i++) {
        const struct gguf_tensor *t = &g->tensors[i];
        if (!keep || keep(t->name))
            gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
    }
    static const float v[2048 * 4];
    char name[128];
    int64_t ne_a[2] = {256, 4}, ne_b[2] = {4, 2048};
    if (extra && !pair)
        gguf_writer_add_tensor(w, extra, OX_DTYPE_F32, 2, ne_a, v);
    if (extra && pair) {
        snprintf(name, sizeof name, "%s.lora_a", extra);
        gguf_writer_add_tensor(w, name, OX_DTYPE_F32, 2, ne_a, v);
        snprintf(name, sizeof name, "%s.lora_b", extra);
        gguf_writer_add_tensor(w, name, OX_DTYPE_F32, 2, ne_b, v);
    }
    CHECK_EQ(gguf_writer_write_file(w, out), OX_OK);
    gguf_writer_free(w);
    gguf_free(g);
}

static bool no_first_b(const char *name) {
    return strcmp(name, "blk.0.attn_q.weight.lora_b") != 0;
}

/* Each broken adapter is refused, naming what is wrong, and nothing changes for the model. */
static void check_refusals(struct ox_model *m) {
    char path[1024];
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/ox_lora_%d.gguf", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    struct {
        const char *key, *value;
        bool (*keep)(const char *);
        const char *extra;
        bool pair;
        enum ox_status st;
        const char *says;
    } cases[] = {
        {"general.architecture", "qwen2", NULL, NULL, false, OX_ERR_INVALID_ARG,
         "architecture 'qwen2'"},
        {"general.type", "model", NULL, NULL, false, OX_ERR_INVALID_ARG, "not an adapter"},
        {"adapter.type", "control_vector", NULL, NULL, false, OX_ERR_UNSUPPORTED, "not 'lora'"},
        {NULL, NULL, no_first_b, NULL, false, OX_ERR_FORMAT, "lora_a without lora_b"},
        {NULL, NULL, NULL, "blk.0.attn_q.weight.delta", false, OX_ERR_FORMAT, "neither"},
        {NULL, NULL, NULL, "token_embd.weight.lora_a", false, OX_ERR_FORMAT, "without lora_b"},
        {NULL, NULL, NULL, "token_embd.weight", true, OX_ERR_INVALID_ARG, "do not fit"},
        {NULL, NULL, NULL, "rope_freqs.weight", true, OX_ERR_INVALID_ARG, "not in the base"},
        {NULL, NULL, NULL, "output_norm.weight", true, OX_ERR_UNSUPPORTED, "not supported"},
        {NULL, NULL, NULL, "blk.9.ffn_up.weight", true, OX_ERR_INVALID_ARG, "not in the base"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_variant(path, cases[i].key, cases[i].value, cases[i].keep, cases[i].extra,
                      cases[i].pair);
        struct ox_lora *l = NULL;
        enum ox_status st = ox_lora_load(m, path, &l);
        CHECK_MSG(st == cases[i].st && !l && strstr(ox_last_error(), cases[i].says),
                  "case %zu: %s, '%s'", i, ox_status_name(st), ox_last_error());
    }
    unlink(path);
    /* a real adapter of the wrong model: the kjv model is a llama with other shapes */
    char kjv[1024];
    snprintf(kjv, sizeof kjv, "%s/models/kjv-15m-q4_k_m.gguf", test_data_dir());
    struct ox_model_params p = test_model_params();
    p.n_gpu_layers = 0;
    struct ox_model *other = NULL;
    CHECK_EQ(ox_model_load(kjv, &p, &other), OX_OK);
    struct ox_lora *l = NULL;
    enum ox_status st = other ? ox_lora_load(other, LORA_DIR "/llama-lora-f32.gguf", &l) : OX_OK;
    CHECK_MSG(st == OX_ERR_INVALID_ARG && strstr(ox_last_error(), "do not fit"), "kjv: %s",
              ox_last_error());
    ox_model_free(other);
    /* a model file is not an adapter; a missing file is an I/O error */
    CHECK_EQ(ox_lora_load(m, kjv, &l), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_lora_load(m, LORA_DIR "/missing.gguf", &l), OX_ERR_IO);
}

int main(void) {
    char path[1024], ref[1024];
    if (!read_prompt())
        return test_finish("test_lora");
    snprintf(path, sizeof path, "%s/models/llama-f16.gguf", test_data_dir());
    struct ox_model_params mp = test_model_params(); /* the GPU's, where there is one */
    struct ox_model *m = NULL;
    CHECK_MSG(ox_model_load(path, &mp, &m) == OX_OK, "%s", ox_last_error());
    if (!m)
        return test_finish("test_lora");
    n_vocab = ox_model_n_vocab(m);
    struct ox_context_params cp = ox_context_params_default();
    cp.n_ctx = 512, cp.n_threads = 2;
    struct ox_context *c = NULL, *plain = NULL;
    CHECK_EQ(ox_context_create(m, &cp, &c), OX_OK);
    CHECK_EQ(ox_context_create(m, &cp, &plain), OX_OK);
    struct ox_lora *f32 = load_lora(m, LORA_DIR "/llama-lora-f32.gguf");
    struct ox_lora *f16 = load_lora(m, LORA_DIR "/llama-lora-f16.gguf");
    CHECK_EQ(ox_lora_n_tensors(f32), 14);
    CHECK(ox_lora_alpha(f32) == 16.0f && ox_lora_alpha(f16) == 0.0f);
    snprintf(ref, sizeof ref, "%s/reference/llama-f16.logits.f32", test_data_dir());
    float *base = read_f32(ref, (size_t)n_prompt * n_vocab);

    CHECK_EQ(ox_context_set_lora(c, f32, 1.0f), OX_OK);
    float *got = prompt_logits(c);
    check_against(LORA_DIR "/llama-f16.lora-f32.logits.f32", got, "f32 adapter at 1.0");
    bool top1;
    CHECK_MSG(base && mean_kl(base, got, &top1) > 1e-2, "the adapter hardly changes the logits");
    free(got);

    CHECK_EQ(ox_context_set_lora(c, f32, 0.5f), OX_OK); /* a new scale for the same adapter */
    CHECK_EQ(ox_context_set_lora(c, f16, 1.0f), OX_OK);
    got = prompt_logits(c);
    check_against(LORA_DIR "/llama-f16.lora-mix.logits.f32", got, "f32 at 0.5 and f16 at 1.0");
    free(got);

    struct ox_lora *embd = load_lora(m, LORA_DIR "/llama-lora-embd.gguf");
    struct ox_context *e = NULL; /* the token embedding's rows too */
    CHECK_EQ(ox_context_create(m, &cp, &e), OX_OK);
    CHECK_EQ(e ? ox_context_set_lora(e, embd, 1.0f) : OX_ERR_INVALID_ARG, OX_OK);
    if (e) {
        got = prompt_logits(e);
        check_against(LORA_DIR "/llama-f16.lora-embd.logits.f32", got, "token_embd and wo");
        free(got);
        ox_context_free(e);
    }
    float one_scale = 1.0f;
    check_export(m, &embd, &one_scale, 1, LORA_DIR "/llama-f16.lora-embd.logits.f32",
                 "merged token_embd and wo");

    got = prompt_logits(plain); /* a context of the same model without adapters */
    check_against(ref, got, "a context without adapters");
    free(got);
    CHECK_EQ(ox_context_set_lora(c, f16, 0.0f), OX_OK); /* scale 0 takes one off */
    CHECK_EQ(ox_context_set_lora(c, f32, 2.0f), OX_OK);
    ox_context_clear_lora(c);
    got = prompt_logits(c);
    check_against(ref, got, "adapters cleared");
    free(got), free(base);

    struct ox_lora *both[2] = {f32, f16};
    float one = 1.0f, mix[2] = {0.5f, 1.0f};
    check_export(m, both, &one, 1, LORA_DIR "/llama-f16.lora-f32.logits.f32", "merged f32 adapter");
    check_export(m, both, mix, 2, LORA_DIR "/llama-f16.lora-mix.logits.f32", "merged pair");
    check_steps(path, m, f32, f16);
    check_refusals(m);
    ox_lora_free(f16); /* f32 goes with the model */
    ox_context_free(c), ox_context_free(plain);
    ox_model_free(m);
    return test_finish("test_lora");
}
