/* test_shard.c: a model split over ranks by heads and FFN rows (tensor parallelism), the ranks
 * as threads on the CPU whose partial outputs meet in sums: every rank's logits equal the whole
 * model's up to the order of the sums (a prompt, then single steps), on the shared reference
 * models of every kind the split takes (biases, q and k norms, post-norms and softcaps, layer
 * norms and GELU FFNs, fused q, k, v and fused gate and up), in equal or unequal shares; the
 * models it cannot split are refused saying why. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>

#include "backend/backend.h"
#include "model/context.h"
#include "model/shard.h"
#include "oxidize.h"
#include "test.h"

enum { N = 20, STEPS = 3, WORLD_MAX = 4 };

/* A rank (or the whole model): its context, and the logits of the prompt's rows then of each
 * step's token. */
struct run {
    struct ox_context *ctx;
    const ox_token *tokens;
    float *logits; /* [N + STEPS][n_vocab] */
    int n_vocab;
    enum ox_status st;
};

static void *decode_all(void *arg) {
    struct run *r = arg;
    bool all[N];
    memset(all, 1, sizeof all);
    struct ox_batch prompt = {.n_tokens = N, .token = (ox_token *)r->tokens, .logits = all};
    if ((r->st = ox_decode(r->ctx, &prompt)) != OX_OK)
        return NULL;
    for (int i = 0; i < N; i++)
        memcpy(r->logits + (size_t)i * r->n_vocab, ox_get_logits(r->ctx, i),
               (size_t)r->n_vocab * sizeof(float));
    for (int k = 0; k < STEPS; k++) { /* the next tokens as the whole model's greedy ones */
        struct ox_batch one = {.n_tokens = 1, .token = (ox_token *)&r->tokens[N + k]};
        if ((r->st = ox_decode(r->ctx, &one)) != OX_OK)
            return NULL;
        memcpy(r->logits + (size_t)(N + k) * r->n_vocab, ox_get_logits(r->ctx, 0),
               (size_t)r->n_vocab * sizeof(float));
    }
    return NULL;
}

static struct ox_context *context(const struct ox_model *m) {
    struct ox_context_params p = ox_context_params_default();
    p.n_ctx = 64, p.n_threads = 1;
    struct ox_context *c = NULL;
    CHECK_MSG(ox_context_create(m, &p, &c) == OX_OK, "%s", ox_last_error());
    return c;
}

/* KL(p || q) of two rows of logits, and whether their largest entries agree. */
static double kl_rows(const float *p, const float *q, int n, bool *same_top) {
    double mp = -INFINITY, mq = -INFINITY, zp = 0, zq = 0, kl = 0;
    int tp = 0, tq = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] > mp)
            mp = p[i], tp = i;
        if (q[i] > mq)
            mq = q[i], tq = i;
    }
    for (int i = 0; i < n; i++)
        zp += exp(p[i] - mp), zq += exp(q[i] - mq);
    for (int i = 0; i < n; i++) {
        double lp = p[i] - mp - log(zp), lq = q[i] - mq - log(zq);
        kl += exp(lp) * (lp - lq);
    }
    *same_top = tp == tq;
    return kl;
}

/* The model's rank shards over world threads (in proportion to share: NULL equal) against the
 * whole model, on the same tokens; rank 0's FFN rows ff0 (0: not checked). */
static void check_split(const char *name, struct ox_model *m, int world, const float *share,
                        int ff0, const ox_token *tokens, const float *whole, double tol) {
    int nv = ox_model_n_vocab(m);
    struct ox_model *shard[WORLD_MAX] = {0};
    struct run runs[WORLD_MAX];
    pthread_t t[WORLD_MAX];
    const int failed = test_failures;
    struct backend_group *g = backend_cpu_group_create(world);
    CHECK(g != NULL);
    for (int r = 0; r < world; r++) {
        CHECK_MSG(model_shard(m, r, world, share, false, &shard[r]) == OX_OK, "%s: %s", name,
                  ox_last_error());
        if (r == 0 && shard[0] && ff0) /* the shares were honoured, not made equal */
            CHECK_MSG(shard[0]->cfg.layer[0].n_ff == ff0 && shard[0]->cfg.n_ff == ff0,
                      "%s: rank 0 has %d FFN rows, not %d", name, shard[0]->cfg.layer[0].n_ff, ff0);
        runs[r] = (struct run){.ctx = shard[r] ? context(shard[r]) : NULL,
                               .tokens = tokens,
                               .logits = malloc((size_t)(N + STEPS) * nv * sizeof(float)),
                               .n_vocab = nv};
        CHECK(runs[r].ctx && context_join_group(runs[r].ctx, g, r) == OX_OK);
    }
    if (test_failures == failed) { /* every rank must reach every sum, or the others wait */
        for (int r = 0; r < world; r++)
            pthread_create(&t[r], NULL, decode_all, &runs[r]);
        for (int r = 0; r < world; r++)
            pthread_join(t[r], NULL);
    }
    double worst = 0;
    int agree = 0, rows = 0;
    for (int r = 0; r < world && test_failures == failed; r++) {
        CHECK_MSG(runs[r].st == OX_OK, "%s rank %d: %s", name, r, ox_last_error());
        for (int i = 0; i < N + STEPS; i++, rows++) {
            bool same;
            worst = fmax(
                worst, kl_rows(whole + (size_t)i * nv, runs[r].logits + (size_t)i * nv, nv, &same));
            agree += same;
        }
    }
    CHECK_MSG(worst < tol && agree == rows, "%s over %d ranks: KL %.3g, top token %d of %d", name,
              world, worst, agree, rows);
    printf("%-18s %d ranks%s: worst KL %.2e, top token %d of %d\n", name, world,
           share ? " (unequal shares)" : "", worst, agree, rows);
    for (int r = 0; r < world; r++) {
        ox_context_free(runs[r].ctx);
        free(runs[r].logits);
        ox_model_free(shard[r]);
    }
    backend_cpu_group_free(g);
}

/* A shared test model, or with "arch/" one of the repository's architecture models. */
static struct ox_model *load(const char *name) {
    char path[512];
    if (!strncmp(name, "arch/", 5))
        snprintf(path, sizeof path, "%s/tests/data/arch/models/%s.gguf", OX_SOURCE_DIR, name + 5);
    else
        snprintf(path, sizeof path, "%s/models/%s.gguf", test_data_dir(), name);
    struct ox_model_params mp = ox_model_params_default();
    mp.n_gpu_layers = 0;
    struct ox_model *m = NULL;
    CHECK_MSG(ox_model_load(path, &mp, &m) == OX_OK, "%s: %s", name, ox_last_error());
    return m;
}

static void test_model(const char *name, int world, const float *share, int ff0, double tol) {
    struct ox_model *m = load(name);
    if (!m)
        return;
    int nv = ox_model_n_vocab(m);
    ox_token tokens[N + STEPS];
    for (int i = 0; i < N; i++)
        tokens[i] = (ox_token)((i * 7919 + 13) % nv);
    struct run whole = {.ctx = context(m),
                        .tokens = tokens,
                        .logits = malloc((size_t)(N + STEPS) * nv * sizeof(float)),
                        .n_vocab = nv};
    /* the steps' tokens: the whole model's greedy choices after the prompt, found first */
    bool all[N];
    memset(all, 1, sizeof all);
    struct ox_batch prompt = {.n_tokens = N, .token = tokens, .logits = all};
    CHECK(ox_decode(whole.ctx, &prompt) == OX_OK);
    for (int k = 0; k < STEPS; k++) {
        const float *l = ox_get_logits(whole.ctx, k ? 0 : N - 1);
        int best = 0;
        for (int i = 1; i < nv; i++)
            best = l[i] > l[best] ? i : best;
        tokens[N + k] = best;
        struct ox_batch one = {.n_tokens = 1, .token = &tokens[N + k]};
        CHECK(ox_decode(whole.ctx, &one) == OX_OK);
    }
    ox_context_free(whole.ctx);
    whole.ctx = context(m); /* again from an empty cache, as the ranks run */
    decode_all(&whole);
    CHECK_MSG(whole.st == OX_OK, "%s: %s", name, ox_last_error());
    check_split(name, m, world, share, ff0, tokens, whole.logits, tol);
    ox_context_free(whole.ctx);
    free(whole.logits);
    ox_model_free(m);
}

#ifdef OX_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"

/* A rank on its GPU: its shard and context made on the thread that runs it, then (once every
 * rank is ready: one that is not would leave the others waiting in NCCL) the same decoding. */
struct gpu_rank {
    struct run run;
    const struct ox_model *whole;
    struct backend_group *g;
    pthread_barrier_t *ready;
    bool *all_ready;
    const float *share;
    int rank, world;
    char error[256];
};

static void *gpu_rank_main(void *arg) {
    struct gpu_rank *r = arg;
    struct ox_model *sh = NULL;
    bool ok = backend_cuda_group_enter(r->g, r->rank) == OX_OK &&
              model_shard(r->whole, r->rank, r->world, r->share, true, &sh) == OX_OK &&
              (r->run.ctx = context(sh)) && context_join_group(r->run.ctx, r->g, r->rank) == OX_OK;
    if (!ok) {
        snprintf(r->error, sizeof r->error, "%s", ox_last_error());
        *r->all_ready = false;
    }
    pthread_barrier_wait(r->ready);
    if (*r->all_ready)
        decode_all(&r->run);
    if (*r->all_ready && r->run.st)
        snprintf(r->error, sizeof r->error, "%s", ox_last_error());
    ox_context_free(r->run.ctx);
    ox_model_free(sh);
    return NULL;
}

/* The model's 2 ranks on GPUs 0 and 1 (through NCCL; in proportion to share, NULL equal)
 * against the whole model on GPU 0; or, with refused, each rank's context refusing to join the
 * group with that reason. */
static void test_gpus(const char *name, double tol, const char *refused, const float *share) {
    enum { WORLD = 2 };
    struct backend_group *g = backend_cuda_group_create(WORLD, NULL);
    if (!g) {
        printf("%s: GPU ranks skipped (%s)\n", name, ox_last_error());
        return;
    }
    struct ox_model *cpu = load(name), *gpu = NULL;
    char path[512];
    snprintf(path, sizeof path, "%s/models/%s.gguf", test_data_dir(), name);
    struct ox_model_params mp = ox_model_params_default();
    mp.n_gpu_layers = 99;
    CHECK_MSG(ox_model_load(path, &mp, &gpu) == OX_OK, "%s: %s", name, ox_last_error());
    if (cpu && gpu) {
        int nv = ox_model_n_vocab(gpu);
        ox_token tokens[N + STEPS];
        for (int i = 0; i < N + STEPS; i++)
            tokens[i] = (ox_token)((i * 7919 + 13) % nv);
        struct run whole = {.ctx = context(gpu),
                            .tokens = tokens,
                            .n_vocab = nv,
                            .logits = malloc((size_t)(N + STEPS) * nv * sizeof(float))};
        decode_all(&whole);
        CHECK_MSG(whole.st == OX_OK, "%s on GPU 0: %s", name, ox_last_error());
        pthread_barrier_t ready;
        pthread_barrier_init(&ready, NULL, WORLD);
        bool all_ready = true;
        struct gpu_rank r[WORLD];
        pthread_t t[WORLD];
        for (int i = 0; i < WORLD; i++) {
            r[i] = (struct gpu_rank){.run = {.tokens = tokens, .n_vocab = nv},
                                     .whole = cpu,
                                     .g = g,
                                     .ready = &ready,
                                     .all_ready = &all_ready,
                                     .share = share,
                                     .rank = i,
                                     .world = WORLD};
            r[i].run.logits = malloc((size_t)(N + STEPS) * nv * sizeof(float));
            pthread_create(&t[i], NULL, gpu_rank_main, &r[i]);
        }
        for (int i = 0; i < WORLD; i++)
            pthread_join(t[i], NULL);
        double worst = 0;
        int agree = 0, rows = 0;
        for (int i = 0; i < WORLD; i++) {
            if (refused)
                CHECK_MSG(!all_ready && strstr(r[i].error, refused), "%s GPU rank %d: %s", name, i,
                          r[i].error);
            else
                CHECK_MSG(all_ready && r[i].run.st == OX_OK, "%s GPU rank %d: %s", name, i,
                          r[i].error);
            for (int k = 0; all_ready && !r[i].run.st && k < N + STEPS; k++, rows++) {
                bool same;
                worst = fmax(worst, kl_rows(whole.logits + (size_t)k * nv,
                                            r[i].run.logits + (size_t)k * nv, nv, &same));
                agree += same;
            }
            free(r[i].run.logits);
        }
        CHECK_MSG(worst <= tol && agree == rows, "%s on 2 GPUs: KL %.3g, top token %d of %d", name,
                  worst, agree, rows);
        if (refused)
            printf("%-18s 2 GPUs: refused (%s)\n", name, refused);
        else
            printf("%-18s 2 GPUs%s: worst KL %.2e, top token %d of %d\n", name,
                   share ? " (unequal shares)" : "", worst, agree, rows);
        pthread_barrier_destroy(&ready);
        ox_context_free(whole.ctx);
        free(whole.logits);
    }
    ox_model_free(gpu);
    ox_model_free(cpu);
    backend_cuda_group_free(g);
}
#endif

/* Models the split does not take: refused, naming why, with nothing made. */
static void test_refused(const char *name, int world, const char *why) {
    struct ox_model *m = load(name), *s = (struct ox_model *)1;
    if (!m)
        return;
    CHECK_MSG(model_shard(m, 0, world, NULL, false, &s) == OX_ERR_UNSUPPORTED && !s &&
                  strstr(ox_last_error(), why),
              "%s: %s", name, ox_last_error());
    CHECK(model_shard(m, 2, 2, NULL, false, &s) == OX_ERR_INVALID_ARG && !s);
    ox_model_free(m);
}

int main(void) {
    static const char *const split[] = {
        "llama-f32", "llama-f16", "llama-bf16",    "llama-q8_0",  "llama-q4_0",
        "qwen2-f16", "qwen3-f16", "gemma2-f16",    "gemma3-f16",  "starcoder2-f16",
        "phi3-f16",  "gpt2-f16",  "llama-moe-f16", "qwen3moe-f16"};
    /* float-order differences only: the ranks' sums go in another order than one matmul's */
    for (size_t i = 0; i < sizeof split / sizeof split[0]; i++)
        test_model(split[i], 2, NULL, 0, 1e-6);
    /* AVX-512's iq4_nl kernels round a share's 128-column rows otherwise than the whole's 256
     * (KL 1.5e-5; at the AVX2 and scalar levels the split is as exact as the others) */
    test_model("llama-iq4_nl", 2, NULL, 0, 1e-4);
    /* unequal shares (--tensor-split 3,1 by rows): the 768 FFN rows cut 576 / 192 (f32: any
     * row), 256 / 512 for 1 : 2 (q8_0: blocks of 32), 512 / 256 for 2 : 1; the 2 kv heads one
     * each whatever the shares (a rank keeps at least one) */
    test_model("llama-f32", 2, (const float[]){3.0f, 1.0f}, 576, 1e-6);
    test_model("llama-q8_0", 2, (const float[]){1.0f, 2.0f}, 256, 1e-6);
    test_model("qwen3-f16", 2, (const float[]){2.0f, 1.0f}, 512, 1e-6);
    test_model("phi3-f16", 2, (const float[]){1.0f, 3.0f}, 192, 1e-6);   /* fused: copied rows */
    test_model("qwen3moe-f16", 2, (const float[]){1.0f, 3.0f}, 0, 1e-6); /* experts 64 / 192 */
    /* experts with a gated shared expert (qwen2moe), biases, attention sinks and the clamped
     * SwiGLU (gpt-oss), others' routing (granitemoe, glm4moe's sigmoid and dense first layer) */
    static const char *const experts[] = {"arch/qwen2moe-f16", "arch/gpt-oss-f16",
                                          "arch/granitemoe-f16", "arch/glm4moe-f16"};
    for (size_t i = 0; i < sizeof experts / sizeof experts[0]; i++)
        test_model(experts[i], 2, NULL, 0, 1e-6);
    /* parallel blocks (phi2, command-r, cohere2); latent attention, each rank all of the
     * cached latent and its own heads' queries, k_b and v_b (deepseek2, its experts too) */
    static const char *const others[] = {"phi2-f16", "arch/command-r-f16", "arch/cohere2-f16",
                                         "arch/deepseek2-f16"};
    /* q and k normed over all heads: the ranks' heads gathered for each norm (OLMo 2, and
     * OLMoE's and MiniMax-M2's experts beside it; MiniMax-M2's q twice n_embd wide) */
    test_model("arch/olmo2-f16", 2, NULL, 0, 1e-6);
    test_model("arch/olmoe-f16", 2, NULL, 0, 1e-6);
    test_model("arch/minimax-m2-f16", 2, NULL, 0, 1e-6);
    /* experts beside a dense FFN, each branch whole before its own norm (Gemma 4's MoE, its
     * full layer with 2 kv heads: make_model.py's gemma4-moe-kv2), v copied from k */
    test_model("arch/gemma4-moe-kv2-f16", 2, NULL, 0, 1e-6);
    /* gated delta-net layers by key heads and the value heads that read them, beside gated
     * attention (Qwen 3.5, dense and MoE) */
    test_model("arch/qwen35-f16", 2, NULL, 0, 1e-6);
    test_model("arch/qwen35moe-f16", 2, NULL, 0, 1e-6);
    /* Mamba-2 layers by groups of B and C and their heads (Granite 4's hybrid), and by heads
     * around one group, the norm over them gathered (make_model.py's granitehybrid-g1) */
    test_model("arch/granitehybrid-f16", 2, NULL, 0, 1e-6);
    test_model("arch/granitehybrid-g1-f16", 2, NULL, 0, 1e-6);
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
        test_model(others[i], 2, NULL, 0, 1e-6);
#ifdef OX_HAVE_CUDA
    /* on 2 GPUs (where there are), against the whole model on one: the integer types (the
     * GPU picks its kernels by a matrix's size, and the ranks' halves round x otherwise than the
     * whole: 2 H100s, KL 1.1e-3 with every top token the same); the f16 model's contexts slice
     * their FFN there (ffn_sliced's sums of a rank's slices) */
    test_gpus("llama-q8_0", 2e-3, NULL, NULL);
    test_gpus("llama-q4_0", 2e-3, NULL, NULL);
    test_gpus("llama-f16", 1e-4, NULL, NULL);
    test_gpus("llama-q8_0", 2e-3, NULL, (const float[]){1.0f, 2.0f});
    test_gpus("llama-f16", 1e-4, NULL, (const float[]){3.0f, 1.0f});
#endif
    test_refused("llama-q4_k", 2, "cut a block");
    test_refused("falcon-f16", 2, "fewer than the ranks");          /* one kv head */
    test_refused("llama-f16", 3, "fewer than the ranks");           /* 2 kv heads */
    test_refused("arch/gemma4-moe-f16", 2, "fewer than the ranks"); /* its full layer's one */

    return test_finish("test_shard");
}
