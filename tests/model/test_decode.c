/* test_decode.c: decoding invariants: a prompt fed one token at a time gives the logits of one
 * batch; two sequences in one batch give what each gives alone; KV cache operations and the
 * context limits behave. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "oxidize.h"
#include "test.h"

#define N 24

static struct ox_model *model;
static int n_vocab;

static struct ox_context *new_context(uint32_t n_ctx, uint32_t n_seq) {
    struct ox_context_params p = ox_context_params_default();
    p.n_ctx = n_ctx;
    p.n_seq_max = n_seq;
    p.n_threads = 2;
    struct ox_context *c = NULL;
    CHECK_MSG(ox_context_create(model, &p, &c) == OX_OK, "%s", ox_last_error());
    return c;
}

/* How far batches of different sizes may round apart: the CPU's kernels give one order for any
 * batch; a GPU's matmuls pick their kernels by batch size, and its prompt attention rounds the
 * probabilities to f16 per tile of cells (as much as the f16 cache itself moves this model's
 * logits, about 2e-3). A sequence that sees another's cells is off by far more. */
static double batch_tolerance(void) {
    return strcmp(ox_model_backend(model), "CPU") ? 1e-2 : 1e-4;
}

static double max_diff(const float *a, const float *b) {
    double m = 0;
    for (int i = 0; i < n_vocab; i++)
        m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

static void prompt(ox_token *t, int seed) {
    for (int i = 0; i < N; i++)
        t[i] = (ox_token)(3 + (i * 37 + seed * 101) % (n_vocab - 3));
}

/* The spread of a row of logits (a soft-capped model's reach +-cap). */
static double spread(const float *a) {
    double lo = a[0], hi = a[0];
    for (int i = 1; i < n_vocab; i++)
        lo = fmin(lo, a[i]), hi = fmax(hi, a[i]);
    return hi - lo;
}

/* S sequences decoded together a token a step (the batches a server decodes its streams in:
 * on a GPU, f16 weights take their tensor-core kernel from 2 to 16 tokens) against each decoded
 * alone a token at a time: the same logits within what the f16 rounding of x allows. */
static void check_parallel_steps(const char *name, int S) {
    enum { STEPS = 6, MOST = 16 };
    char path[1024];
    snprintf(path, sizeof path, "%s/models/%s", test_data_dir(), name);
    struct ox_model *saved = model, *m = NULL;
    struct ox_model_params mp = test_model_params();
    CHECK_MSG(ox_model_load(path, &mp, &m) == OX_OK, "%s", ox_last_error());
    if (!m || S > MOST)
        return;
    const int saved_vocab = n_vocab;
    model = m, n_vocab = ox_model_n_vocab(m);
    ox_token t[MOST][STEPS];
    for (int k = 0; k < S; k++)
        for (int i = 0; i < STEPS; i++)
            t[k][i] = (ox_token)(3 + (i * 37 + k * 101 + 7) % (n_vocab - 3));
    float *together = malloc((size_t)S * STEPS * (size_t)n_vocab * sizeof *together);
    struct ox_context *c = new_context(S * STEPS + 8, (uint32_t)S);
    for (int i = 0; i < STEPS; i++) {
        ox_token step[MOST];
        int32_t pos[MOST], seq[MOST];
        bool all[MOST];
        for (int k = 0; k < S; k++)
            step[k] = t[k][i], pos[k] = i, seq[k] = k, all[k] = true;
        struct ox_batch b = {
            .n_tokens = S, .token = step, .pos = pos, .seq_id = seq, .logits = all};
        CHECK_EQ(ox_decode(c, &b), OX_OK);
        for (int k = 0; k < S; k++)
            memcpy(together + ((size_t)k * STEPS + i) * n_vocab, ox_get_logits(c, k),
                   (size_t)n_vocab * sizeof *together);
    }
    double worst = 0, rel = 0;
    for (int k = 0; k < S; k++) {
        struct ox_context *alone = new_context(STEPS + 8, 1);
        for (int i = 0; i < STEPS; i++) {
            struct ox_batch one = {.n_tokens = 1, .token = &t[k][i]};
            CHECK_EQ(ox_decode(alone, &one), OX_OK);
            const float *a = together + ((size_t)k * STEPS + i) * n_vocab;
            double d = max_diff(a, ox_get_logits(alone, 0));
            worst = fmax(worst, d), rel = fmax(rel, d / spread(a));
        }
        ox_context_free(alone);
    }
    printf("  %s, %d sequences a token a step vs alone: max |logit diff| %.3g (%.2g of the "
           "spread)\n",
           name, S, worst, rel);
    CHECK(rel < 5e-3);
    ox_context_free(c);
    free(together);
    ox_model_free(m);
    model = saved, n_vocab = saved_vocab;
}

/* Batch vs one at a time: the same math on the same cache, summed in different orders (float
 * matmuls follow llama.cpp's GEMM for batches and its vec_dot for single tokens, which rounds
 * the activations to f16 for f16 weights), so the logits agree to the last bits, amplified by
 * the f16 cache, an f16 model's matmuls (llama-f16: 2.6e-4 of the logits' spread, gemma4-f16's
 * seven layers 1.2e-3) and on a GPU its prompt attention's f16 probabilities: within 5e-3 of
 * the spread, where a wrong position or mask moves them by a tenth or more. */
static void check_incremental(void) {
    ox_token t[N];
    prompt(t, 1);
    bool all[N];
    for (int i = 0; i < N; i++)
        all[i] = true;
    struct ox_context *a = new_context(64, 1), *b = new_context(64, 1);
    struct ox_batch batch = {.n_tokens = N, .token = t, .logits = all};
    CHECK_EQ(ox_decode(a, &batch), OX_OK);
    double worst = 0, rel = 0;
    for (int i = 0; i < N; i++) {
        struct ox_batch one = {.n_tokens = 1, .token = &t[i]};
        CHECK_EQ(ox_decode(b, &one), OX_OK);
        double d = max_diff(ox_get_logits(a, i), ox_get_logits(b, 0));
        worst = fmax(worst, d), rel = fmax(rel, d / spread(ox_get_logits(a, i)));
    }
    printf("  batch vs incremental: max |logit diff| %.3g (%.2g of the spread)\n", worst, rel);
    CHECK(rel < 5e-3);
    CHECK_EQ(ox_kv_seq_pos_max(b, 0), N - 1);
    ox_context_free(a);
    ox_context_free(b);
}

/* The same past 512 cells: decode steps of one sequence whose context grows from 496 to 600
 * cells (on Vulkan its decode attention splits each head's cells among workgroups from 512 on,
 * and the steps on either side are recorded apart: graph_long_cells) against those 104 tokens
 * as one batch after the same 496. */
static void check_long_incremental(void) {
    enum { LONG = 600, FROM = 496 };
    ox_token *t = malloc(LONG * sizeof *t);
    bool want[LONG - FROM];
    for (int i = 0; i < LONG; i++)
        t[i] = (ox_token)(3 + (i * 37 + 11) % (n_vocab - 3));
    for (int i = 0; i < LONG - FROM; i++)
        want[i] = true;
    struct ox_context *a = new_context(640, 1), *b = new_context(640, 1);
    struct ox_batch head = {.n_tokens = FROM, .token = t}; /* both: the first 496 as a prompt */
    CHECK_EQ(ox_decode(a, &head), OX_OK);
    CHECK_EQ(ox_decode(b, &head), OX_OK);
    struct ox_batch rest = {.n_tokens = LONG - FROM, .token = t + FROM, .logits = want};
    CHECK_EQ(ox_decode(a, &rest), OX_OK);
    double rel = 0;
    for (int i = FROM; i < LONG; i++) {
        struct ox_batch one = {.n_tokens = 1, .token = &t[i]};
        CHECK_EQ(ox_decode(b, &one), OX_OK);
        const float *all = ox_get_logits(a, i - FROM);
        rel = fmax(rel, max_diff(all, ox_get_logits(b, 0)) / spread(all));
    }
    printf("  batch vs incremental from %d to %d cells: %.2g of the spread\n", FROM, LONG, rel);
    CHECK(rel < 5e-3);
    ox_context_free(a);
    ox_context_free(b);
    free(t);
}

/* Two sequences interleaved in one batch see only their own tokens. */
static void check_two_sequences(void) {
    ox_token t0[N], t1[N], both[2 * N];
    int32_t seq[2 * N], pos[2 * N];
    bool all[2 * N];
    prompt(t0, 2);
    prompt(t1, 3);
    for (int i = 0; i < N; i++) {
        both[2 * i] = t0[i], seq[2 * i] = 0, pos[2 * i] = i;
        both[2 * i + 1] = t1[i], seq[2 * i + 1] = 1, pos[2 * i + 1] = i;
    }
    for (int i = 0; i < 2 * N; i++)
        all[i] = true;
    struct ox_context *c = new_context(128, 2), *s0 = new_context(64, 1), *s1 = new_context(64, 1);
    struct ox_batch b = {
        .n_tokens = 2 * N, .token = both, .pos = pos, .seq_id = seq, .logits = all};
    CHECK_EQ(ox_decode(c, &b), OX_OK);
    struct ox_batch b0 = {.n_tokens = N, .token = t0, .logits = all};
    struct ox_batch b1 = {.n_tokens = N, .token = t1, .logits = all};
    CHECK_EQ(ox_decode(s0, &b0), OX_OK);
    CHECK_EQ(ox_decode(s1, &b1), OX_OK);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        worst = fmax(worst, max_diff(ox_get_logits(c, 2 * i), ox_get_logits(s0, i)));
        worst = fmax(worst, max_diff(ox_get_logits(c, 2 * i + 1), ox_get_logits(s1, i)));
    }
    printf("  two sequences in one batch vs alone: max |logit diff| %.3g\n", worst);
    CHECK(worst < batch_tolerance());
    /* removing sequence 1 leaves sequence 0 decodable as before */
    ox_kv_seq_rm(c, 1, 0, -1);
    CHECK_EQ(ox_kv_seq_pos_max(c, 1), -1);
    CHECK_EQ(ox_kv_seq_pos_max(c, 0), N - 1);
    ox_context_free(c);
    ox_context_free(s0);
    ox_context_free(s1);
}

/* Sequence ids across the words of the sequence sets (0, 63, 64, 130, 255), positions left to
 * the context: each sees only its own tokens; copying and removing work on any word. */
static void check_many_sequences(void) {
    enum {
        S = 5,
        M = 12
    }; /* 60 tokens: under 64, the CPU matmul keeps the summation order of
          each sequence alone (bigger batches tile differently) */
    static const int32_t ids[S] = {0, 63, 64, 130, OX_SEQ_MAX - 1};
    ox_token t[S][N], all_t[S * M];
    int32_t seq[S * M];
    bool all[S * M];
    for (int k = 0; k < S; k++)
        prompt(t[k], 10 + k);
    for (int i = 0; i < M; i++)
        for (int k = 0; k < S; k++)
            all_t[i * S + k] = t[k][i], seq[i * S + k] = ids[k], all[i * S + k] = true;
    struct ox_context *c = new_context(S * M + 8, OX_SEQ_MAX);
    struct ox_batch b = {.n_tokens = S * M, .token = all_t, .seq_id = seq, .logits = all};
    CHECK_EQ(ox_decode(c, &b), OX_OK);
    double worst = 0;
    for (int k = 0; k < S; k++) {
        struct ox_context *alone = new_context(64, 1);
        struct ox_batch one = {.n_tokens = M, .token = t[k], .logits = all};
        CHECK_EQ(ox_decode(alone, &one), OX_OK);
        for (int i = 0; i < M; i++)
            worst = fmax(worst, max_diff(ox_get_logits(c, i * S + k), ox_get_logits(alone, i)));
        CHECK_EQ(ox_kv_seq_pos_max(c, ids[k]), M - 1);
        ox_context_free(alone);
    }
    printf("  %d sequences up to id %d in one batch vs alone: max |logit diff| %.3g\n", S,
           OX_SEQ_MAX - 1, worst);
    CHECK(worst < batch_tolerance());
    ox_kv_seq_cp(c, 130, 200, 0, -1);
    CHECK_EQ(ox_kv_seq_pos_max(c, 200), M - 1);
    ox_kv_seq_rm(c, 130, 0, -1); /* the cells stay: sequence 200 holds them */
    CHECK_EQ(ox_kv_seq_pos_max(c, 130), -1);
    CHECK_EQ(ox_kv_seq_pos_max(c, 200), M - 1);
    ox_context_free(c);
    struct ox_context_params p = ox_context_params_default();
    p.n_seq_max = OX_SEQ_MAX + 1;
    struct ox_context *bad = NULL;
    CHECK_EQ(ox_context_create(model, &p, &bad), OX_ERR_INVALID_ARG);
    CHECK(bad == NULL);
}

static void check_limits(void) {
    struct ox_context *c = new_context(16, 1);
    ox_token t[N];
    prompt(t, 4);
    struct ox_batch b = {.n_tokens = N, .token = t};
    CHECK_EQ(ox_decode(c, &b), OX_ERR_CONTEXT_FULL);
    CHECK(strstr(ox_last_error(), "context") != NULL);
    CHECK_EQ(ox_kv_seq_pos_max(c, 0), -1); /* nothing was stored */
    b.n_tokens = 8;
    CHECK_EQ(ox_decode(c, &b), OX_OK);
    ox_token bad = n_vocab;
    struct ox_batch bb = {.n_tokens = 1, .token = &bad};
    CHECK_EQ(ox_decode(c, &bb), OX_ERR_INVALID_ARG);
    int32_t seq = 3;
    struct ox_batch bs = {.n_tokens = 1, .token = t, .seq_id = &seq};
    CHECK_EQ(ox_decode(c, &bs), OX_ERR_INVALID_ARG);
    CHECK(ox_get_logits(c, 0) == NULL); /* a failed decode leaves no logits */
    ox_kv_clear(c);
    CHECK_EQ(ox_kv_seq_pos_max(c, 0), -1);
    ox_context_free(c);
}

/* The KV cache in f32 or q8_0 gives logits close to the default f16 one. */
static void check_kv_types(void) {
    ox_token t[N];
    prompt(t, 5);
    const enum ox_dtype types[] = {OX_DTYPE_F16, OX_DTYPE_F32, OX_DTYPE_Q8_0};
    const float *base = NULL;
    static float saved[1 << 16];
    for (int k = 0; k < 3; k++) {
        struct ox_context_params p = ox_context_params_default();
        p.n_ctx = 64;
        p.kv_type = types[k];
        struct ox_context *c = NULL;
        CHECK_MSG(ox_context_create(model, &p, &c) == OX_OK, "%s", ox_last_error());
        struct ox_batch b = {.n_tokens = N, .token = t};
        CHECK_EQ(c ? ox_decode(c, &b) : OX_ERR_INVALID_ARG, OX_OK);
        const float *l = c ? ox_get_logits(c, N - 1) : NULL;
        if (l && k == 0) {
            memcpy(saved, l, (size_t)n_vocab * sizeof *l);
            base = saved;
        } else if (l && base) {
            double d = max_diff(base, l);
            printf("  KV cache %s vs f16: max |logit diff| %.3g\n", ox_dtype_name(types[k]), d);
            CHECK(d < 0.05);
        }
        ox_context_free(c);
    }
    struct ox_context_params p = ox_context_params_default();
    p.kv_type = OX_DTYPE_Q4_K;
    struct ox_context *c = NULL;
    CHECK_EQ(ox_context_create(model, &p, &c), OX_ERR_INVALID_ARG);
}

/* A learned-position model (gpt2, 1024 positions) refuses positions past its table. */
static void check_learned_positions(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/gpt2-f16.gguf", test_data_dir());
    struct ox_model *m = NULL;
    struct ox_model_params mp = test_model_params();
    CHECK_MSG(ox_model_load(path, &mp, &m) == OX_OK, "%s", ox_last_error());
    struct ox_context_params p = ox_context_params_default();
    p.n_ctx = 2048;
    struct ox_context *c = NULL;
    CHECK_EQ(m ? ox_context_create(m, &p, &c) : OX_ERR_INVALID_ARG, OX_OK);
    ox_token t = 5;
    int32_t pos = 1024;
    struct ox_batch b = {.n_tokens = 1, .token = &t, .pos = &pos};
    CHECK_EQ(c ? ox_decode(c, &b) : OX_OK, OX_ERR_CONTEXT_FULL);
    CHECK(strstr(ox_last_error(), "1024 learned positions") != NULL);
    pos = 1023;
    CHECK_EQ(c ? ox_decode(c, &b) : OX_ERR_INVALID_ARG, OX_OK);
    ox_context_free(c);
    ox_model_free(m);
}

/* llama-f32 rewritten to out with its architecture renamed (arch != NULL) or one tensor's
 * dimensions swapped (bad_tensor != NULL). */
static void write_variant(const char *out, const char *arch, const char *bad_tensor) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/llama-f32.gguf", test_data_dir());
    struct ox_gguf *g = NULL;
    struct gguf_writer *w = NULL;
    CHECK_EQ(gguf_open(path, true, &g), OX_OK);
    CHECK_EQ(gguf_writer_create(&w), OX_OK);
    for (int64_t i = 0; g && i < g->n_kv; i++)
        gguf_writer_set(w, g->kv[i].key, &g->kv[i].value);
    if (arch)
        CHECK_EQ(gguf_writer_set_str(w, "general.architecture", arch), OX_OK);
    for (int64_t i = 0; g && i < g->n_tensors; i++) {
        const struct gguf_tensor *t = &g->tensors[i];
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        if (bad_tensor && !strcmp(t->name, bad_tensor)) /* [256, 128] stored as [128, 256] */
            ne[0] = t->ne[1], ne[1] = t->ne[0];
        gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, ne, t->data);
    }
    CHECK_EQ(gguf_writer_write_file(w, out), OX_OK);
    gguf_writer_free(w);
    gguf_free(g);
}

/* A fresh file name under /tmp (mkstemp: unique also where getpid() is one number for every
 * process, as in WebAssembly under node, and two runs would write one file). */
static void temp_path(char *out, size_t cap, const char *stem) {
    snprintf(out, cap, "/tmp/%s_XXXXXX", stem);
    int fd = mkstemp(out);
    CHECK_MSG(fd >= 0, "mkstemp %s", out);
    if (fd >= 0)
        close(fd);
}

/* A file whose tensor has the wrong shape is refused, naming the tensor; an architecture the
 * engine does not know is refused, naming the ones it does and the nearest of them. */
static void check_bad_files(void) {
    char out[256];
    temp_path(out, sizeof out, "ox_bad_shape");
    write_variant(out, NULL, "blk.1.attn_k.weight");
    struct ox_model *m = NULL;
    CHECK_EQ(ox_model_load(out, NULL, &m), OX_ERR_FORMAT);
    CHECK(strstr(ox_last_error(), "blk.1.attn_k.weight") != NULL);
    CHECK(m == NULL);
    write_variant(out, "mamba", NULL);
    CHECK_EQ(ox_model_load(out, NULL, &m), OX_ERR_UNSUPPORTED);
    CHECK(strstr(ox_last_error(), "mamba") && strstr(ox_last_error(), "qwen3moe"));
    write_variant(out, "gemma3n", NULL); /* and names the family nearest to it */
    CHECK_EQ(ox_model_load(out, NULL, &m), OX_ERR_UNSUPPORTED);
    CHECK(strstr(ox_last_error(), "nearest supported is 'gemma3'") != NULL);
    unlink(out);
}

/* Context shift: after dropping the first K cells, moving the rest back by K (keys re-rotated)
 * must not change what comes next, since attention only sees relative positions: compare with
 * the same cache left in place. (A fresh decode of the kept tokens would differ: their cached
 * states still carry what the dropped tokens contributed.) */
static void check_shift(void) {
    enum { K = 8 };
    ox_token t[N + 1];
    prompt(t, 6);
    t[N] = 7;
    struct ox_context *a = new_context(64, 1), *b = new_context(64, 1);
    struct ox_batch all = {.n_tokens = N, .token = t};
    CHECK_EQ(ox_decode(a, &all), OX_OK);
    CHECK_EQ(ox_decode(b, &all), OX_OK);
    ox_kv_seq_rm(a, 0, 0, K);
    ox_kv_seq_rm(b, 0, 0, K);
    ox_kv_seq_add(a, 0, K, -1, -K);
    CHECK_EQ(ox_kv_seq_pos_max(a, 0), N - K - 1);
    CHECK_EQ(ox_kv_seq_pos_max(b, 0), N - 1);
    struct ox_batch next = {.n_tokens = 1, .token = &t[N]}; /* positions continue each cache */
    CHECK_EQ(ox_decode(a, &next), OX_OK);
    CHECK_EQ(ox_decode(b, &next), OX_OK);
    double d = max_diff(ox_get_logits(a, 0), ox_get_logits(b, 0));
    printf("  shifted cache vs unshifted: max |logit diff| %.3g\n", d);
    CHECK(d < 0.01);
    ox_context_free(a);
    ox_context_free(b);
}

static bool cancel_at_half(float progress, void *user) {
    (*(int *)user)++;
    return progress < 0.5f;
}

/* ox_context_memory: the KV cache is n_ctx cells of f16 keys and values for each layer where
 * the model runs (a split model's GPU layers only); the other buffers grow with n_ctx only
 * through the float copy the CPU's attention reads. */
static void check_memory(void) {
    struct ox_context *a = new_context(64, 1), *b = new_context(128, 1);
    uint64_t kv_a, buf_a, kv_b, buf_b;
    ox_context_memory(a, &kv_a, &buf_a);
    ox_context_memory(b, &kv_b, &buf_b);
    /* llama-f32: 4 heads, 2 of them for keys and values, so a row is n_embd / 2 f16 values */
    uint64_t row = (uint64_t)ox_model_n_embd(model) / 2 * 2;
    uint64_t layers = (uint64_t)ox_model_n_layer(model);
    if (!strcmp(ox_model_backend(model), "CPU+CUDA")) /* the last n_gpu_layers on the GPU */
        layers = (uint64_t)test_model_params().n_gpu_layers;
    CHECK_MSG(kv_a == 64ull * layers * 2 * row && kv_b == 2 * kv_a, "kv %llu %llu",
              (unsigned long long)kv_a, (unsigned long long)kv_b);
    CHECK(buf_a > 0 && buf_b > buf_a);
    /* GPU memory exactly when (some of) the model runs there */
    CHECK_EQ(ox_model_gpu_bytes(model) == 0, !strcmp(ox_model_backend(model), "CPU"));
    ox_context_free(a), ox_context_free(b);
}

/* A copy of the repository's reference file name (tests/data/arch) at out, with key set to the
 * u32 value, or removed (value < 0), or set to the n i32 values of arr (arr not NULL). */
static void write_arch_variant(const char *name, const char *out, const char *key, int64_t value,
                               const int32_t *arr, uint64_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/arch/models/%s.gguf", OX_SOURCE_DIR, name);
    struct ox_gguf *g = NULL;
    struct gguf_writer *w = NULL;
    CHECK_EQ(gguf_open(path, true, &g), OX_OK);
    CHECK_EQ(gguf_writer_create(&w), OX_OK);
    for (int64_t i = 0; g && w && i < g->n_kv; i++)
        gguf_writer_set(w, g->kv[i].key, &g->kv[i].value);
    if (w && arr)
        CHECK_EQ(gguf_writer_set_array(w, key, OX_GGUF_INT32, arr, n), OX_OK);
    else if (w && value < 0)
        gguf_writer_remove(w, key);
    else if (w)
        CHECK_EQ(gguf_writer_set_u32(w, key, (uint32_t)value), OX_OK);
    for (int64_t i = 0; g && w && i < g->n_tensors; i++) {
        const struct gguf_tensor *t = &g->tensors[i];
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, ne, t->data);
    }
    CHECK_EQ(w ? gguf_writer_write_file(w, out) : OX_ERR_OOM, OX_OK);
    gguf_writer_free(w);
    gguf_free(g);
}

/* Files whose new hyper-parameters do not hold together are refused with a reason: shared-KV
 * layers with no earlier layer of their kind, per-layer arrays of the wrong length, latent
 * attention from before attn_kv_b was split, Mamba-2 groups that do not divide its heads,
 * expert groups that do not divide the experts. */
static void check_bad_hparams(void) {
    static const int32_t six[6] = {2, 1, 2, 1, 2, 2};
    static const struct {
        const char *file, *key;
        int64_t value;
        const int32_t *arr;
        enum ox_status want;
        const char *says;
    } cases[] = {
        {"gemma4-f16", "gemma4.attention.shared_kv_layers", 6, NULL, OX_ERR_FORMAT,
         "shares the cache"},
        {"gemma4-f16", "gemma4.attention.head_count_kv", 0, six, OX_ERR_FORMAT,
         "6 values for 7 layers"},
        {"deepseek2-f16", "deepseek2.attention.key_length_mla", -1, NULL, OX_ERR_UNSUPPORTED,
         "convert the model again"},
        {"deepseek2-f16", "deepseek2.expert_group_count", 3, NULL, OX_ERR_FORMAT, "in 3 groups"},
        {"granitehybrid-f16", "granitehybrid.ssm.group_count", 3, NULL, OX_ERR_FORMAT,
         "do not divide"},
    };
    char out[256];
    temp_path(out, sizeof out, "ox_bad_hparams");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_arch_variant(cases[i].file, out, cases[i].key, cases[i].value, cases[i].arr, 6);
        struct ox_model *m = NULL;
        enum ox_status st = ox_model_load(out, NULL, &m);
        CHECK_MSG(st == cases[i].want && strstr(ox_last_error(), cases[i].says) && !m,
                  "%s with %s: %d, '%s'", cases[i].file, cases[i].key, (int)st, ox_last_error());
        ox_model_free(m);
    }
    unlink(out);
}

/* The same invariants on caches laid out otherwise: gemma4's per-layer shapes and shared layers
 * (a sliding window, too), deepseek2's latent cache whose rotary part is its rows' tail. */
static void check_cache_layouts(struct ox_model_params mp) {
    static const char *const names[] = {"gemma4-f16", "deepseek2-f16"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/tests/data/arch/models/%s.gguf", OX_SOURCE_DIR, names[i]);
        printf("%s:\n", names[i]);
        CHECK_MSG(ox_model_load(path, &mp, &model) == OX_OK, "%s", ox_last_error());
        if (!model)
            continue;
        n_vocab = ox_model_n_vocab(model);
        check_incremental();
        check_two_sequences();
        check_shift();
        ox_model_free(model);
    }
}

int main(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/llama-f32.gguf", test_data_dir());
    struct ox_model_params mp = test_model_params();
    CHECK_MSG(ox_model_load(path, &mp, &model) == OX_OK, "%s", ox_last_error());
    if (!model)
        return test_finish("test_decode");
    n_vocab = ox_model_n_vocab(model);
    check_incremental();
    check_long_incremental();
    check_two_sequences();
    check_many_sequences();
    for (int s = 2; s <= 16; s += 7) /* 2, 9 and 16 sequences */
        check_parallel_steps("llama-f16.gguf", s);
    check_parallel_steps("llama-bf16.gguf", 5);
    check_limits();
    check_kv_types();
    check_shift();
    check_bad_files();
    check_learned_positions();
    check_memory();
    int calls = 0;
    mp = ox_model_params_default();
    mp.progress = cancel_at_half;
    mp.progress_user = &calls;
    struct ox_model *cancelled = NULL;
    CHECK_EQ(ox_model_load(path, &mp, &cancelled), OX_ERR_ABORTED);
    CHECK(calls == 2 && cancelled == NULL);
    struct ox_model *m = NULL;
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-llama-spm.gguf", test_data_dir());
    CHECK_EQ(ox_model_load(path, NULL, &m), OX_ERR_FORMAT); /* a vocabulary, not a model */
    CHECK(strstr(ox_last_error(), "llama.") != NULL || strstr(ox_last_error(), "tensor") != NULL);
    ox_model_free(model);
    check_cache_layouts(test_model_params());
    check_bad_hparams();
    return test_finish("test_decode");
}
