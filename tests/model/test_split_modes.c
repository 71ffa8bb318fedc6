/* test_split_modes.c: a model split over ranks, by rows (heads and FFN rows, whose partial sums
 * the ranks add) and by layers (a pipeline), behind the public API (split.c, split_ops.c,
 * pipeline.c): its context gives the whole model's logits through a prompt, steps, the KV
 * cache's operations (removal, copy to another sequence, shift), a saved and restored state and
 * a cleared cache, and the whole model's embeddings; the ranks are CPU threads here, or ranks of
 * two "processes" that talk over TCP, and GPUs where there are two (ox_model_params.split_mode,
 * against the model on one GPU). A rank lost mid-call fails the call rather than hanging it;
 * the parameters that ask for a split that cannot be made are refused, saying why. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "model/context.h"
#include "model/shard.h"
#include "model/split.h"
#include "oxidize.h"
#include "test.h"
#include "test_port.h"

enum { ROWS_MAX = 32 };

/* The logits of the last ox_decode's output row i, appended to out as row (*rows)++. */
static void keep(struct ox_context *c, int i, float *out, int *rows, int nv) {
    const float *l = ox_get_logits(c, i);
    CHECK(l != NULL && *rows < ROWS_MAX);
    if (l && *rows < ROWS_MAX)
        memcpy(out + (size_t)(*rows)++ * nv, l, (size_t)nv * sizeof *l);
}

static enum ox_status step(struct ox_context *c, ox_token t, int32_t seq) {
    struct ox_batch b = {.n_tokens = 1, .token = &t, .seq_id = &seq};
    return ox_decode(c, &b);
}

/* One script of calls, the same on the whole model's context and the split's: the rows of
 * logits it reads, in order; false where a call failed. A recurrent model's state has no
 * positions to go back to or shift: its script skips those calls. */
static bool script(struct ox_context *c, const ox_token *tok, int nv, float *out, int *rows) {
    const bool recurrent = ox_model_is_recurrent(ox_context_model(c));
    bool all[12];
    memset(all, 1, sizeof all);
    struct ox_batch prompt = {.n_tokens = 12, .token = tok, .logits = all};
    if (ox_decode(c, &prompt) != OX_OK)
        return false;
    for (int i = 0; i < 12; i += 5)
        keep(c, i, out, rows, nv);
    if (step(c, tok[12], 0) != OX_OK)
        return false;
    keep(c, 0, out, rows, nv);
    if (!recurrent)
        ox_kv_seq_rm(c, 0, 8, -1); /* back to 8 tokens, then on with others */
    struct ox_batch again = {.n_tokens = 4, .token = tok + 14};
    if ((!recurrent && ox_kv_seq_pos_max(c, 0) != 7) || ox_decode(c, &again) != OX_OK)
        return false;
    keep(c, 3, out, rows, nv);
    ox_kv_seq_cp(c, 0, 1, -1, -1); /* sequence 1 shares its cells and goes its own way */
    if (step(c, tok[18], 1) != OX_OK)
        return false;
    keep(c, 0, out, rows, nv);
    if ((!recurrent && ox_kv_seq_shift(c, 0, 4) <= 0) || step(c, tok[19], 0) != OX_OK)
        return false; /* keys re-rotated */
    keep(c, 0, out, rows, nv);
    size_t size = ox_state_seq_size(c, 0), written = 0;
    uint8_t *state = malloc(size);
    bool ok = state && ox_state_seq_save(c, 0, state, size, &written) == OX_OK && written == size;
    ox_kv_seq_rm(c, 0, -1, -1);
    ok = ok && ox_state_seq_load(c, 0, state, size) == OX_OK && step(c, tok[20], 0) == OX_OK;
    free(state);
    if (!ok)
        return false;
    keep(c, 0, out, rows, nv);
    ox_kv_clear(c);
    struct ox_batch fresh = {.n_tokens = 5, .token = tok + 2};
    if (ox_decode(c, &fresh) != OX_OK)
        return false;
    keep(c, 4, out, rows, nv);
    return true;
}

static struct ox_context *context(const struct ox_model *m, bool embeddings) {
    struct ox_context_params p = ox_context_params_default();
    p.n_ctx = 96, p.n_threads = 1, p.n_seq_max = 2, p.embeddings = embeddings;
    struct ox_context *c = NULL;
    CHECK_MSG(ox_context_create(m, &p, &c) == OX_OK, "%s", ox_last_error());
    return c;
}

/* The largest KL(whole || split) over rows of logits, and whether every top token agrees. */
static double worst_kl(const float *p, const float *q, int rows, int n, bool *tops) {
    double worst = 0;
    *tops = true;
    for (int r = 0; r < rows; r++, p += n, q += n) {
        double mp = -INFINITY, mq = -INFINITY, zp = 0, zq = 0, kl = 0;
        int tp = 0, tq = 0;
        for (int i = 0; i < n; i++) {
            tp = p[i] > mp ? (mp = p[i], i) : tp;
            tq = q[i] > mq ? (mq = q[i], i) : tq;
        }
        for (int i = 0; i < n; i++)
            zp += exp(p[i] - mp), zq += exp(q[i] - mq);
        for (int i = 0; i < n; i++) {
            double lp = p[i] - mp - log(zp), lq = q[i] - mq - log(zq);
            kl += exp(lp) * (lp - lq);
        }
        worst = kl > worst ? kl : worst;
        *tops = *tops && tp == tq;
    }
    return worst;
}

static const char *mode_name(int mode) {
    return mode == OX_SPLIT_LAYER ? "layers" : "rows";
}

/* whole and split (the same file, one split over ranks) run the script and embed a text. */
static void compare(const char *name, const struct ox_model *whole, const struct ox_model *split,
                    double tol) {
    int nv = ox_model_n_vocab(whole), e = ox_model_n_embd(whole), rows[2] = {0, 0};
    ox_token tok[24];
    for (int i = 0; i < 24; i++)
        tok[i] = (ox_token)((i * 7919 + 13) % nv);
    float *logits[2], *embd[2];
    const struct ox_model *m[2] = {whole, split};
    bool ran[2];
    for (int k = 0; k < 2; k++) {
        logits[k] = calloc((size_t)ROWS_MAX * nv, sizeof(float));
        embd[k] = calloc((size_t)e, sizeof(float));
        struct ox_context *c = context(m[k], true);
        ran[k] = c && script(c, tok, nv, logits[k], &rows[k]);
        CHECK_MSG(ran[k], "%s (%s): %s", name, k ? "split" : "whole", ox_last_error());
        CHECK(!c || ox_embed(c, tok, 9, OX_POOLING_MEAN, true, embd[k]) == OX_OK);
        if (k && c) {
            CHECK(ox_context_model(c) == split);
            uint64_t kv = 0, buf = 0;
            ox_context_memory(c, &kv, &buf);
            CHECK(kv > 0 && buf > 0);
        }
        ox_context_free(c);
    }
    bool tops = false;
    double kl = ran[0] && ran[1] && rows[0] == rows[1]
                    ? worst_kl(logits[0], logits[1], rows[0], nv, &tops)
                    : INFINITY;
    double cos = 0;
    for (int i = 0; i < e; i++)
        cos += (double)embd[0][i] * embd[1][i];
    CHECK_MSG(kl <= tol && tops, "%s: %d rows, worst KL %.3g, top tokens %s", name, rows[1], kl,
              tops ? "agree" : "differ");
    /* where the logits may differ by kernel choice (a GPU's halves of integer matrices), the
     * pooled vectors do as much: 1.18e-3 worst KL came with a cosine of 1 - 4.4e-5 */
    double cos_tol = tol > 1e-4 ? 1e-4 : 1e-5;
    CHECK_MSG(cos > 1 - cos_tol, "%s: embeddings' cosine %.8f", name, cos);
    printf("%-16s %-9s by %-6s %d ranks, %d rows: worst KL %.2e, embeddings' cosine %.8f\n", name,
           ox_model_backend(split), mode_name(split->split->mode), split->split->world, rows[1], kl,
           cos);
    for (int k = 0; k < 2; k++)
        free(logits[k]), free(embd[k]);
}

/* The file of a shared test model, or with "arch/" of one of the repository's architecture
 * models. */
static void model_path(const char *name, char *path, size_t size) {
    if (!strncmp(name, "arch/", 5))
        snprintf(path, size, "%s/tests/data/arch/models/%s.gguf", OX_SOURCE_DIR, name + 5);
    else
        snprintf(path, size, "%s/models/%s.gguf", test_data_dir(), name);
}

static struct ox_model *load(const char *name, const struct ox_model_params *mp) {
    char path[512];
    model_path(name, path, sizeof path);
    struct ox_model *m = NULL;
    CHECK_MSG(ox_model_load(path, mp, &m) == OX_OK, "%s: %s", name, ox_last_error());
    return m;
}

/* The model whole on the CPU against it split by mode over world CPU ranks (threads; by layers
 * with shares 1 : 2 : ..., by rows so where unequal). */
static void test_cpu(const char *name, int mode, int world, bool unequal) {
    struct ox_model_params mp = ox_model_params_default();
    mp.n_gpu_layers = 0;
    struct ox_model *whole = load(name, &mp), *split = load(name, &mp);
    struct split_plan plan = {.mode = mode, .world = world};
    for (int r = 0; r < world; r++)
        plan.share[r] = mode == OX_SPLIT_LAYER || unequal ? (float)(r + 1) : 1.0f;
    CHECK_MSG(split && model_split(split, backend_host(), &plan) == OX_OK, "%s by %s: %s", name,
              mode_name(mode), ox_last_error());
    if (whole && split && split->split) {
        CHECK_STR(ox_model_backend(split), "CPU");
        struct ox_model *const *sh = split->split->shard;
        if (unequal && mode == OX_SPLIT_ROW) /* the shares' rows, not equal halves */
            CHECK_MSG(sh[0]->cfg.n_ff < sh[1]->cfg.n_ff &&
                          sh[0]->cfg.n_ff + sh[1]->cfg.n_ff == whole->cfg.n_ff,
                      "%s: FFN rows %d + %d", name, sh[0]->cfg.n_ff, sh[1]->cfg.n_ff);
        compare(name, whole, split, mode == OX_SPLIT_LAYER ? 1e-12 : 1e-6);
        /* a state of the split model is not one of the whole's, nor the other way round */
        struct ox_context *a = context(whole, false), *b = context(split, false);
        ox_token t[3] = {5, 6, 7};
        struct ox_batch batch = {.n_tokens = 3, .token = t};
        CHECK(a && b && ox_decode(a, &batch) == OX_OK && ox_decode(b, &batch) == OX_OK);
        size_t na = ox_state_seq_size(a, 0), nb = ox_state_seq_size(b, 0);
        uint8_t *sa = malloc(na), *sb = malloc(nb);
        CHECK(ox_state_seq_save(a, 0, sa, na, NULL) == OX_OK);
        CHECK(ox_state_seq_save(b, 0, sb, nb, NULL) == OX_OK);
        CHECK(ox_state_seq_load(b, 0, sa, na) == OX_ERR_FORMAT);
        CHECK(ox_state_seq_load(a, 0, sb, nb) == OX_ERR_FORMAT);
        CHECK(ox_state_seq_load(b, 0, sb, nb - 1) == OX_ERR_FORMAT);
        CHECK(ox_state_seq_load(b, 0, sb, nb) == OX_OK && ox_kv_seq_pos_max(b, 0) == 2);
        free(sa), free(sb);
        ox_context_free(a), ox_context_free(b);
    }
    ox_model_free(whole);
    ox_model_free(split);
}

/* A rank of another "process" (a thread with a model of its own): joins, follows rank 0's
 * calls until rank 0 frees its model. */
struct follower {
    const char *name;
    struct dist_params dp;
    struct backend_group *g;
    int calls; /* it leaves after these (< 0: it follows to the end) */
    int mode;
    enum ox_status st;
    char error[256];
};

static void *follow(void *arg) {
    struct follower *f = arg;
    int mode = f->mode;
    struct ox_model_params mp = ox_model_params_default();
    mp.n_gpu_layers = 0;
    char path[512];
    model_path(f->name, path, sizeof path);
    struct ox_model *m = NULL;
    f->st = ox_model_load(path, &mp, &m);
    if (f->st == OX_OK)
        f->st = model_split_join(m, backend_host(), f->g, &f->dp, 0, mode);
    if (f->st == OX_OK)
        f->st = f->calls < 0 ? ox_model_follow(m) : split_follow_calls(m, f->calls);
    snprintf(f->error, sizeof f->error, "%s", f->st ? ox_last_error() : "");
    ox_model_free(m);
    return NULL;
}

static void lora_compare(const char *name, struct ox_model *whole, struct ox_model *split,
                         const char *adapter, const char *where, double tol);

/* The model whole against it split over 2 processes' ranks: rank 0 here, rank 1 a thread that
 * follows rank 0's calls as they come over the connection (their sums meet in a CPU group the
 * two share, where GPU processes would meet in NCCL); with an adapter, that too (the follower
 * gets it over the connection). */
static void test_processes(const char *name, int mode, const char *adapter) {
    char addr[32];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", test_free_port());
    struct backend_group *g = backend_cpu_group_create(2);
    struct follower f = {.name = name,
                         .dp = {.addr = addr, .rank = 1, .world = 2, .timeout_ms = 10000},
                         .g = g,
                         .calls = -1,
                         .mode = mode};
    pthread_t t;
    pthread_create(&t, NULL, follow, &f);
    struct ox_model_params mp = ox_model_params_default();
    mp.n_gpu_layers = 0;
    struct ox_model *whole = load(name, &mp), *split = load(name, &mp);
    struct dist_params dp = {.addr = addr, .rank = 0, .world = 2, .timeout_ms = 10000};
    enum ox_status st =
        split ? model_split_join(split, backend_host(), g, &dp, 0, mode) : OX_ERR_IO;
    CHECK_MSG(st == OX_OK, "%s: %s", name, ox_last_error());
    if (st == OX_OK && whole) {
        compare(name, whole, split, 1e-6);
        struct ox_context *c = context(split, false);
        ox_token bad = ox_model_n_vocab(whole); /* refused by every rank alike */
        struct ox_batch b = {.n_tokens = 1, .token = &bad};
        CHECK(c && ox_decode(c, &b) == OX_ERR_INVALID_ARG && strstr(ox_last_error(), "vocabulary"));
        ox_context_free(c);
        int made = 0; /* contexts' numbers come back: more than the 256 that can be at once */
        for (int i = 0; i < 300; i++) {
            struct ox_context *k = NULL;
            made += ox_context_create(split, NULL, &k) == OX_OK;
            ox_context_free(k);
        }
        CHECK_EQ(made, 300);
        if (adapter)
            lora_compare(name, whole, split, adapter, "over 2 processes", 3e-6);
    }
    ox_model_free(split); /* the follower hears that the group ended */
    pthread_join(t, NULL);
    CHECK_MSG(st != OX_OK || f.st == OX_OK, "%s follower: %s", name, f.error);
    ox_model_free(whole);
    backend_cpu_group_free(g);
}

/* A follower that leaves when the decode after its context's making comes (as a process that
 * died in it would: its connection closes): rank 0's decode, whose sums wait for it, fails
 * within moments instead of hanging (the watcher ends the group), and so does every call
 * after. */
static void test_lost_rank(void) {
    char addr[32];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", test_free_port());
    struct backend_group *g = backend_cpu_group_create(2);
    struct follower f = {.name = "llama-q8_0",
                         .dp = {.addr = addr, .rank = 1, .world = 2, .timeout_ms = 5000},
                         .g = g,
                         .calls = 1,
                         .mode = OX_SPLIT_ROW};
    pthread_t t;
    pthread_create(&t, NULL, follow, &f);
    struct ox_model_params mp = ox_model_params_default();
    mp.n_gpu_layers = 0;
    struct ox_model *m = load("llama-q8_0", &mp);
    struct dist_params dp = {.addr = addr, .rank = 0, .world = 2, .timeout_ms = 5000};
    if (m && model_split_join(m, backend_host(), g, &dp, 0, OX_SPLIT_ROW) == OX_OK) {
        struct ox_context *c = context(m, false);
        ox_token tok[4] = {1, 2, 3, 4};
        struct ox_batch b = {.n_tokens = 4, .token = tok};
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        enum ox_status st = c ? ox_decode(c, &b) : OX_OK;
        CHECK_MSG(st == OX_ERR_IO && strstr(ox_last_error(), "rank 1"), "%s: %s",
                  ox_status_name(st), ox_last_error());
        printf("a lost rank: %s\n", ox_last_error());
        CHECK(c && ox_decode(c, &b) == OX_ERR_IO); /* and after */
        clock_gettime(CLOCK_MONOTONIC, &t1);
        CHECK((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec) < 5.0);
        ox_context_free(c);
        pthread_join(t, NULL);
    } else {
        CHECK_MSG(false, "join: %s", ox_last_error());
        pthread_join(t, NULL);
    }
    ox_model_free(m);
    backend_cpu_group_free(g);
}

/* OX_SPLIT_AUTO, the default, made a mode for a model on so many GPUs: by rows where the model
 * splits so, else by layers; none on one GPU or with layers left to the CPU; an asked mode as
 * asked. */
static void test_auto_mode(void) {
    struct ox_model_params mp = ox_model_params_default();
    CHECK(mp.split_mode == OX_SPLIT_AUTO);
    mp.n_gpu_layers = 0;
    struct ox_model *f32 = load("llama-f32", &mp), *kjv = load("kjv-15m-q4_k_m", &mp),
                    *moe = load("llama-moe-f16", &mp);
    struct ox_model_params p = ox_model_params_default();
    if (f32) {
        CHECK(split_auto_mode(f32, &p, 2) == OX_SPLIT_ROW);
        CHECK(split_auto_mode(f32, &p, 1) == OX_SPLIT_NONE);
        CHECK(split_auto_mode(f32, &p, 0) == OX_SPLIT_NONE);
        p.tensor_split[0] = 1.0f, p.tensor_split[1] = 3.0f; /* rows in those shares */
        CHECK(split_auto_mode(f32, &p, 2) == OX_SPLIT_ROW);
        p.tensor_split[2] = 1.0f; /* its 2 kv heads among 3: by layers */
        CHECK(split_auto_mode(f32, &p, 3) == OX_SPLIT_LAYER);
        p.tensor_split[2] = 0.0f;
        p.tensor_split[1] = 0.0f; /* one GPU given a share */
        CHECK(split_auto_mode(f32, &p, 4) == OX_SPLIT_NONE);
        p = ox_model_params_default();
        p.n_gpu_layers = 1; /* the rest on the CPU */
        CHECK(split_auto_mode(f32, &p, 2) == OX_SPLIT_NONE);
        p = ox_model_params_default();
        p.split_mode = OX_SPLIT_NONE;
        CHECK(split_auto_mode(f32, &p, 2) == OX_SPLIT_NONE);
        p.split_mode = OX_SPLIT_LAYER;
        CHECK(split_auto_mode(f32, &p, 2) == OX_SPLIT_LAYER);
        p = ox_model_params_default();
    }
    /* columns that would cut a quantization block: by layers; experts too (they split by rows
     * when asked, not measured so yet) */
    CHECK(!kjv || split_auto_mode(kjv, &p, 2) == OX_SPLIT_LAYER);
    CHECK(!moe || split_auto_mode(moe, &p, 2) == OX_SPLIT_LAYER);
    CHECK(!moe || !model_shard_refusal(moe, 2, NULL));
    /* recurrent layers as any: experts by layers (both splits take them), dense by rows */
    struct ox_model *rec = load("arch/qwen35moe-f16", &mp);
    CHECK(!rec || split_auto_mode(rec, &p, 2) == OX_SPLIT_LAYER);
    CHECK(!rec || !model_shard_refusal(rec, 2, NULL));
    CHECK(f32 && kjv && moe && rec);
    ox_model_free(f32), ox_model_free(kjv), ox_model_free(moe), ox_model_free(rec);
}

/* n rows of logits of a prompt of 12 tokens from an empty cache into out. */
static bool prompt_logits(struct ox_context *c, int nv, float *out) {
    ox_token tok[12];
    bool all[12];
    for (int i = 0; i < 12; i++)
        tok[i] = (ox_token)((i * 7919 + 13) % nv), all[i] = true;
    struct ox_batch b = {.n_tokens = 12, .token = tok, .logits = all};
    ox_kv_clear(c);
    if (ox_decode(c, &b) != OX_OK)
        return false;
    for (int i = 0; i < 12; i++)
        memcpy(out + (size_t)i * nv, ox_get_logits(c, i), (size_t)nv * sizeof(float));
    return true;
}

/* A LoRA adapter on a split model (split_lora.c: each rank its share of it) against the whole
 * model (split: the same file split by mode, where) with it, then both without it once cleared;
 * the whole's adapter refused by the split. */
static void lora_compare(const char *name, struct ox_model *whole, struct ox_model *split,
                         const char *adapter, const char *where, double tol) {
    char path[512];
    snprintf(path, sizeof path, "%s/tests/data/lora/%s", OX_SOURCE_DIR, adapter);
    struct ox_lora *lw = NULL, *ls = NULL;
    CHECK_MSG(whole && split && ox_lora_load(whole, path, &lw) == OX_OK &&
                  ox_lora_load(split, path, &ls) == OX_OK,
              "%s", ox_last_error());
    struct ox_context *cw = lw && ls ? context(whole, false) : NULL;
    struct ox_context *cs = cw ? context(split, false) : NULL;
    if (cs) {
        int nv = ox_model_n_vocab(whole);
        float *a = malloc((size_t)12 * nv * sizeof(float)), *b = malloc((size_t)12 * nv * 4),
              *plain = malloc((size_t)12 * nv * sizeof(float));
        bool tops;
        CHECK(ox_context_set_lora(cs, lw, 1.0f) == OX_ERR_INVALID_ARG); /* the whole's */
        CHECK(ox_context_set_lora(cw, lw, 0.75f) == OX_OK);
        CHECK_MSG(ox_context_set_lora(cs, ls, 0.75f) == OX_OK, "%s", ox_last_error());
        CHECK(prompt_logits(cw, nv, a) && prompt_logits(cs, nv, b));
        double kl = worst_kl(a, b, 12, nv, &tops);
        CHECK_MSG(kl <= tol && tops, "%s + adapter %s: KL %.3g", name, where, kl);
        ox_context_clear_lora(cw), ox_context_clear_lora(cs);
        CHECK(prompt_logits(cw, nv, a) && prompt_logits(cs, nv, plain));
        double off = worst_kl(a, plain, 12, nv, &tops), moved = worst_kl(b, plain, 12, nv, &tops);
        CHECK_MSG(off <= tol && moved > 1e-4, "%s cleared %s: KL %.3g (%.3g with it)", name, where,
                  off, moved);
        /* again: the ranks' shares (another process's copy of the adapter) kept */
        CHECK(ox_context_set_lora(cs, ls, 0.75f) == OX_OK && prompt_logits(cs, nv, a));
        CHECK_MSG(worst_kl(a, b, 12, nv, &tops) <= 1e-12 && tops, "%s set again %s", name, where);
        ox_context_clear_lora(cs);
        printf("%s + adapter %s: worst KL %.2e, cleared %.2e (adapter's own %.2e)\n", name, where,
               kl, off, moved);
        free(a), free(b), free(plain);
    }
    ox_context_free(cw), ox_context_free(cs);
}

/* lora_compare on CPU ranks (threads), 2 of them. */
static void test_lora(const char *name, const char *adapter, int mode, double tol) {
    struct ox_model_params mp = ox_model_params_default();
    mp.n_gpu_layers = 0;
    struct ox_model *whole = load(name, &mp), *split = load(name, &mp);
    struct split_plan plan = {.mode = mode, .world = 2};
    char where[32];
    snprintf(where, sizeof where, "by %s on 2 ranks", mode_name(mode));
    if (split && model_split(split, backend_host(), &plan) != OX_OK)
        ox_model_free(split), split = NULL;
    lora_compare(name, whole, split, adapter, where, tol);
    ox_model_free(whole), ox_model_free(split); /* the adapters with them */
}

/* Parameters asking for a split that cannot be: refused, naming why. */
static void test_refusals(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/models/llama-q8_0.gguf", test_data_dir());
    const struct {
        int mode, main_gpu;
        float share0, share5;
        const char *why;
    } bad[] = {{7, 0, 0, 0, "split_mode 7"},
               {OX_SPLIT_ROW, -1, 0, 0, "main_gpu -1"},
               {OX_SPLIT_ROW, 0, -1.0f, 0, "share -1"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct ox_model_params mp = ox_model_params_default();
        mp.split_mode = bad[i].mode, mp.main_gpu = bad[i].main_gpu;
        mp.tensor_split[0] = bad[i].share0, mp.tensor_split[5] = bad[i].share5;
        struct ox_model *m = (struct ox_model *)1;
        enum ox_status st = ox_model_load(path, &mp, &m);
        CHECK_MSG(st != OX_OK && !m && strstr(ox_last_error(), bad[i].why), "%s: %s", bad[i].why,
                  ox_last_error());
    }
    struct ox_model_params mp = ox_model_params_default();
    mp.n_gpu_layers = 0;
    struct ox_model *m = load("llama-q8_0", &mp);
    struct ox_model *kjv = load("kjv-15m-q4_k_m", &mp); /* 6 layers: not for 7 ranks */
    struct split_plan seven = {.mode = OX_SPLIT_LAYER, .world = 7};
    CHECK(kjv && model_split(kjv, backend_host(), &seven) == OX_ERR_UNSUPPORTED &&
          strstr(ox_last_error(), "no layers") && !kjv->split);
    ox_model_free(kjv);
    struct split_plan plan = {.mode = OX_SPLIT_ROW, .world = 2};
    if (m && model_split(m, backend_host(), &plan) == OX_OK) {
        struct ox_context_params bad = ox_context_params_default(); /* every rank refuses it */
        bad.kv_type = OX_DTYPE_Q4_0;
        struct ox_context *k = (struct ox_context *)1;
        CHECK_MSG(ox_context_create(m, &bad, &k) == OX_ERR_INVALID_ARG && !k &&
                      strstr(ox_last_error(), "KV cache type"),
                  "%s", ox_last_error());
    }
    ox_model_free(m);
}

#ifdef OX_HAVE_CUDA
/* The model on one GPU against it split by mode over two (where there are two). */
static void test_gpus(const char *name, int mode, double tol) {
    const struct backend_ops *gpu = backend_device();
    if (!gpu->available() || gpu->devices() < 2) {
        printf("%s: GPU split skipped (%d GPUs)\n", name, gpu->available() ? gpu->devices() : 0);
        return;
    }
    struct ox_model_params one = ox_model_params_default(), row = one;
    one.split_mode = OX_SPLIT_NONE; /* the default would split it */
    row.split_mode = mode;
    row.tensor_split[0] = row.tensor_split[1] = 1.0f;
    struct ox_model *whole = load(name, &one), *split = load(name, &row), *bad = NULL;
    row.tensor_split[OX_MAX_DEVICES - 1] = 1.0f; /* more GPUs than there are */
    char path[512];
    model_path(name, path, sizeof path);
    CHECK(gpu->devices() == OX_MAX_DEVICES || (ox_model_load(path, &row, &bad) != OX_OK && !bad &&
                                               strstr(ox_last_error(), "there are")));
    if (whole && split) {
        CHECK_STR(ox_model_backend(split), "CUDA x 2");
        CHECK(ox_model_gpu_bytes(split) > ox_model_gpu_bytes(whole) / 2);
        compare(name, whole, split, tol);
    }
    ox_model_free(whole);
    ox_model_free(split);
}

/* By layers with n_gpu_layers below the model's: rank 0 runs the first layers on the CPU, then
 * its share of the rest on its GPU, rank 1 the others; the same kernels in the same order as
 * the model on one GPU with those layers left to the CPU (KL 0). By rows it is refused, and so
 * are fewer GPU layers than GPUs, each saying why. */
static void test_gpus_partial(const char *name, int ngl) {
    const struct backend_ops *gpu = backend_device();
    if (!gpu->available() || gpu->devices() < 2)
        return;
    struct ox_model_params one = ox_model_params_default(), two = one;
    one.split_mode = OX_SPLIT_NONE, one.n_gpu_layers = ngl;
    two.split_mode = OX_SPLIT_LAYER, two.n_gpu_layers = ngl;
    two.tensor_split[0] = two.tensor_split[1] = 1.0f;
    struct ox_model *whole = load(name, &one), *split = load(name, &two), *bad = NULL;
    if (whole && split) {
        CHECK_STR(ox_model_backend(split), "CUDA x 2");
        compare(name, whole, split, 1e-12);
    }
    ox_model_free(whole), ox_model_free(split);
    char path[512];
    model_path(name, path, sizeof path);
    two.split_mode = OX_SPLIT_ROW;
    CHECK(ox_model_load(path, &two, &bad) == OX_ERR_UNSUPPORTED && !bad &&
          strstr(ox_last_error(), "split_mode layer can"));
    two.split_mode = OX_SPLIT_LAYER, two.n_gpu_layers = 1;
    CHECK(ox_model_load(path, &two, &bad) == OX_ERR_INVALID_ARG && !bad &&
          strstr(ox_last_error(), "fewer than the 2 GPUs"));
}

/* Model params for rank `rank` of 2 processes at addr, on GPU `rank`. */
static struct ox_model_params process_params(const char *addr, int rank, int mode) {
    struct ox_model_params p = ox_model_params_default();
    p.split_mode = mode, p.main_gpu = rank;
    p.dist_addr = addr, p.dist_rank = rank, p.dist_world = 2, p.dist_timeout_ms = 60000;
    return p;
}

/* This executable again as rank 1 of a model split across two processes (a fresh process:
 * CUDA does not survive a fork): `--follow ADDR NAME MODE`. */
static int follow_main(char **argv) {
    const struct backend_ops *gpu = backend_device();
    if (!gpu->available() || gpu->devices() < 2)
        return 0;
    struct ox_model_params p = process_params(argv[2], 1, atoi(argv[4]));
    struct ox_model *m = load(argv[3], &p);
    enum ox_status st = m ? ox_model_follow(m) : OX_ERR_IO;
    if (st != OX_OK)
        fprintf(stderr, "rank 1: %s\n", ox_last_error());
    ox_model_free(m);
    return st == OX_OK && test_failures == 0 ? 0 : 1;
}

/* Rank 1 of `name` split by mode across two processes: this executable again with `role`
 * (--follow, or --follow-die and the calls it follows), meeting rank 0 at a free port of
 * 127.0.0.1 (into addr). */
static pid_t start_rank1(const char *role, char addr[32], const char *name, int mode, int calls) {
    char mode_arg[16], calls_arg[16];
    snprintf(addr, 32, "127.0.0.1:%d", test_free_port());
    snprintf(mode_arg, sizeof mode_arg, "%d", mode);
    snprintf(calls_arg, sizeof calls_arg, "%d", calls);
    pid_t child = fork();
    if (child == 0) {
        execl("/proc/self/exe", "test_split_modes", role, addr, name, mode_arg, calls_arg,
              (char *)NULL);
        _exit(127);
    }
    CHECK_MSG(child > 0, "fork: %s", strerror(errno));
    return child;
}

/* `--follow-die ADDR NAME MODE CALLS`: rank 1 on GPU 1 that follows CALLS calls of rank 0 and
 * then dies as a crashed process would, in the next (a decode): no frees, no goodbyes. */
static int follow_die_main(char **argv) {
    struct ox_model_params p = process_params(argv[2], 1, atoi(argv[4]));
    struct ox_model *m = load(argv[3], &p);
    if (m)
        split_follow_calls(m, atoi(argv[5]));
    _exit(0);
}

/* A rank's process gone in a decode on the GPUs: rank 0's sums (one-shot kernels waiting for
 * the peer's words, or NCCL's) end within moments when the watcher ends the group, the decode
 * fails naming rank 1, and so does the next. With steps, rank 1 goes after the prompt and that
 * many one-token steps, in a step that replays the recorded graph. An alarm fails the test
 * where a wait never ends. */
static void test_gpu_lost_rank(const char *name, int mode, int steps) {
    const struct backend_ops *gpu = backend_device();
    if (!gpu->available() || gpu->devices() < 2)
        return;
    char addr[32];
    pid_t child = start_rank1("--follow-die", addr, name, mode, steps ? 2 + steps : 1);
    if (child < 0)
        return;
    struct ox_model_params p = process_params(addr, 0, mode);
    struct ox_model *m = load(name, &p);
    struct ox_context *c = m ? context(m, false) : NULL;
    CHECK_MSG(c != NULL, "%s: %s", name, ox_last_error());
    ox_token tok[4] = {1, 2, 3, 4};
    struct ox_batch b = {.n_tokens = 4, .token = tok};
    alarm(60);                                       /* a hang kills the test: SIGALRM */
    for (int i = 0; c && steps && i <= steps; i++) { /* the prompt, then one token at a time */
        CHECK_MSG(ox_decode(c, &b) == OX_OK, "%s: %s", name, ox_last_error());
        b = (struct ox_batch){.n_tokens = 1, .token = tok + i % 4};
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    enum ox_status st = c ? ox_decode(c, &b) : OX_ERR_IO;
    CHECK_MSG(st != OX_OK && strstr(ox_last_error(), "rank 1"), "%s by %s: %s: %s", name,
              mode_name(mode), ox_status_name(st), ox_last_error());
    printf("%s by %s on GPUs, a lost rank%s: %s\n", name, mode_name(mode),
           steps ? " in a recorded step" : "", ox_last_error());
    CHECK(c && ox_decode(c, &b) != OX_OK);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    alarm(0);
    CHECK((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec) < 20.0);
    ox_context_free(c);
    ox_model_free(m);
    int status = -1;
    waitpid(child, &status, 0);
}

/* The model on GPU 0 against it split by mode across two processes (rank 1 on GPU 1, this
 * executable again), where there are two GPUs. */
static void test_gpu_processes(const char *name, int mode, double tol) {
    const struct backend_ops *gpu = backend_device();
    if (!gpu->available() || gpu->devices() < 2)
        return;
    char addr[32];
    pid_t child = start_rank1("--follow", addr, name, mode, -1);
    if (child < 0)
        return;
    struct ox_model_params one = ox_model_params_default(), p = process_params(addr, 0, mode);
    one.split_mode = OX_SPLIT_NONE;
    struct ox_model *whole = load(name, &one), *split = load(name, &p);
    if (whole && split)
        compare(name, whole, split, tol);
    ox_model_free(split); /* rank 1 hears the group end */
    ox_model_free(whole);
    int status = -1;
    waitpid(child, &status, 0);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: rank 1's process: %d", name,
              status);
}

/* The lost-rank cases: by rows after the prompt and in a recorded step, by layers. */
static void test_gpu_lost(int which) {
    if (which == 0)
        test_gpu_lost_rank("llama-q8_0", OX_SPLIT_ROW, 0);
    else if (which == 1)
        test_gpu_lost_rank("llama-q8_0", OX_SPLIT_ROW, 3);
    else
        test_gpu_lost_rank("llama-f16", OX_SPLIT_LAYER, 0);
}

/* lora_compare on 2 GPUs against the model on one. */
static void test_gpu_lora(const char *name, const char *adapter, int mode, double tol) {
    struct ox_model_params one = ox_model_params_default(), two = one;
    one.split_mode = OX_SPLIT_NONE;
    two.split_mode = mode;
    two.tensor_split[0] = two.tensor_split[1] = 1.0f;
    struct ox_model *whole = load(name, &one), *split = load(name, &two);
    char where[32];
    snprintf(where, sizeof where, "by %s on 2 GPUs", mode_name(mode));
    lora_compare(name, whole, split, adapter, where, tol);
    ox_model_free(whole), ox_model_free(split);
}

/* Every split on two GPUs against the model on one, where there are two. By rows the ranks'
 * halves pick other kernels and round x otherwise than the whole (test_shard); by layers, the
 * same kernels; both record their steps as CUDA graphs unless OX_SPLIT_GRAPHS=0. */
static void test_all_gpus(void) {
    static const char *const rows[] = {
        "llama-f16", "qwen2-f16", "qwen3-f16", "gemma2-f16", "gemma3-f16", "starcoder2-f16",
        "phi3-f16", "gpt2-f16", "phi2-f16", "llama-moe-f16", "qwen3moe-f16",
        /* experts with biases or a shared expert, parallel blocks, latent attention, q and k
         * norms over all heads, Gemma 4's experts beside its FFN, delta-net and Mamba-2 layers */
        "arch/qwen2moe-f16", "arch/gpt-oss-f16", "arch/granitemoe-f16", "arch/glm4moe-f16",
        "arch/command-r-f16", "arch/cohere2-f16", "arch/deepseek2-f16", "arch/olmo2-f16",
        "arch/olmoe-f16", "arch/minimax-m2-f16", "arch/gemma4-moe-kv2-f16", "arch/qwen35-f16",
        "arch/qwen35moe-f16", "arch/granitehybrid-f16", "arch/granitehybrid-g1-f16"};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        test_gpus(rows[i], OX_SPLIT_ROW, 1e-4);
    test_gpus("llama-q8_0", OX_SPLIT_ROW, 2e-3);
    test_gpus("llama-q4_0", OX_SPLIT_ROW, 2e-3);
    static const char *const layers[] = {"llama-f16",          "llama-q4_k_m",          "qwen3-f16",
                                         "gemma2-f16",         "llama-moe-f16",         "phi3-f16",
                                         "arch/qwen35moe-f16", "arch/granitehybrid-f16"};
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++)
        test_gpus(layers[i], OX_SPLIT_LAYER, 1e-5);
    test_gpus_partial("kjv-15m-q4_k_m", 4); /* 2 of its 6 layers on the CPU */
    test_gpus_partial("kjv-15m-q4_k_m", 2); /* 4: rank 0 has one GPU layer */
    test_gpu_processes("llama-q8_0", OX_SPLIT_ROW, 2e-3);
    test_gpu_processes("llama-f16", OX_SPLIT_LAYER, 1e-5);
    for (int i = 0; i < 3; i++)
        test_gpu_lost(i);
    test_gpu_lora("llama-f16", "llama-lora-f32.gguf", OX_SPLIT_ROW, 1e-4);
    test_gpu_lora("llama-f16", "llama-lora-f32.gguf", OX_SPLIT_LAYER, 1e-5);
    test_gpu_lora("phi3-f16", "phi3-lora-f32.gguf", OX_SPLIT_ROW, 1e-4);
    test_gpu_lora("arch/qwen35-f16", "qwen35-lora-f32.gguf", OX_SPLIT_ROW, 1e-4);
}
#endif

int main(int argc, char **argv) {
#ifdef OX_HAVE_CUDA
    if (argc == 6 && !strcmp(argv[1], "--follow"))
        return follow_main(argv);
    if (argc == 6 && !strcmp(argv[1], "--follow-die"))
        return follow_die_main(argv);
    setvbuf(stdout, NULL, _IOLBF, 0); /* what ran is in the log, also where an alarm ends it */
    if (argc == 3 && !strcmp(argv[1], "--gpus-lost")) { /* one lost-rank case (0, 1, 2) alone */
        test_gpu_lost(atoi(argv[2]));
        return test_finish("test_split_modes");
    }
    if (argc == 2 && !strcmp(argv[1], "--gpus")) { /* the GPU checks alone (a GPU machine) */
        test_all_gpus();
        return test_finish("test_split_modes");
    }
#else
    (void)argc, (void)argv;
#endif
    static const char *const cpu[] = {"llama-f32", "llama-q8_0",   "qwen3-f16", "gemma2-f16",
                                      "phi3-f16",  "qwen3moe-f16", "phi2-f16"};
    for (size_t i = 0; i < sizeof cpu / sizeof cpu[0]; i++)
        test_cpu(cpu[i], OX_SPLIT_ROW, 2, false);
    test_cpu("llama-q8_0", OX_SPLIT_ROW, 2, true); /* FFN rows 256 / 512 */
    /* recurrent layers: each rank's share of every sequence's state, kept, copied, saved */
    test_cpu("arch/qwen35-f16", OX_SPLIT_ROW, 2, false);
    test_cpu("arch/granitehybrid-g1-f16", OX_SPLIT_ROW, 2, false);
    /* by layers the ranks run the whole's kernels in the whole's order: the same logits; MoE
     * and fused q, k, v split so too */
    static const char *const layers[] = {"llama-f32", "llama-q8_0", "gemma2-f16", "llama-moe-f16",
                                         "phi3-f16"};
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++)
        test_cpu(layers[i], OX_SPLIT_LAYER, 2, false);
    test_cpu("kjv-15m-q4_k_m", OX_SPLIT_LAYER, 3, false);
    test_cpu("arch/qwen35moe-f16", OX_SPLIT_LAYER, 2, false);
    test_cpu("arch/granitehybrid-f16", OX_SPLIT_LAYER, 2, false);
    test_processes("llama-q8_0", OX_SPLIT_ROW, NULL);
    test_processes("qwen3-f16", OX_SPLIT_ROW, NULL);
    test_processes("llama-moe-f16", OX_SPLIT_LAYER, NULL);
    test_processes("llama-f16", OX_SPLIT_ROW, "llama-lora-f32.gguf");
    test_processes("phi3-f16", OX_SPLIT_LAYER, "phi3-lora-f32.gguf");
    test_processes("arch/qwen35-f16", OX_SPLIT_ROW, "qwen35-lora-f32.gguf");
    test_lost_rank();
    /* by rows the ranks' shares of wo's and down's deltas join their sums (0.8e-6 against the
     * adapter's own 3.7: float order) */
    test_lora("llama-f16", "llama-lora-f32.gguf", OX_SPLIT_ROW, 3e-6);
    test_lora("llama-f16", "llama-lora-f32.gguf", OX_SPLIT_LAYER, 1e-12);
    /* matrices a rank holds spans of: phi3's fused q, k, v and gate | up (B's rows of them),
     * a delta-net layer's q, k, v and output (B's rows, A's columns) */
    test_lora("phi3-f16", "phi3-lora-f32.gguf", OX_SPLIT_ROW, 3e-6);
    test_lora("arch/qwen35-f16", "qwen35-lora-f32.gguf", OX_SPLIT_ROW, 3e-6);
    test_refusals();
    test_auto_mode();
#ifdef OX_HAVE_CUDA
    test_all_gpus();
#endif
    return test_finish("test_split_modes");
}
