/* cmd_bench.c: `oxidize bench -m MODEL`: prompt and generation speed, as llama-bench measures. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cmd.h"
#include "json_out.h"
#include "oxidize.h"

#define MAX_LIST   64         /* values per -p / -n list */
#define MAX_PAR    OX_SEQ_MAX /* sequences decoded together (a context holds at most that) */
#define MAX_TOKENS (1 << 20)  /* per test; the context (max -p + max -n) stays far below 2^24 */
#define MAX_TESTS  (MAX_LIST + MAX_LIST * MAX_LIST) /* rows of one run */

struct bench_opts {
    const char *model;
    int prompts[MAX_LIST], n_prompts; /* -p values; 0 skips */
    int gens[MAX_LIST], n_gens;       /* -n values; 0 skips */
    int depths[MAX_LIST], n_depths;   /* -d values: tokens in the cache before each test */
    int pars[MAX_LIST], n_pars;       /* --batch values: sequences decoded together */
    int n_batch, n_threads, reps;
    int n_gpu_layers; /* -ngl: -1 all on a GPU when there is one, 0 the CPU */
    bool json;
};

/* One test: pp<P> (n_gen 0) or tg<N> (n_prompt 0; with n_par > 1 sequences at once, each
 * generating N: aggregate tokens/s), after n_depth tokens already in the cache ("@ d<D>"),
 * with its tokens/s per repetition. */
struct bench_test {
    char name[48];
    int n_prompt, n_gen, n_par, n_depth;
    double *samples_ts; /* [reps] */
    double avg_ts, stddev_ts;
};

/* What the tables repeat on every row: the model and how it was run. */
struct bench_env {
    char desc[256];
    uint64_t size_bytes, n_params;
    double load_ms, peak_rss_mib;
    const char *backend;  /* "CPU" or "CUDA" */
    uint64_t gpu_weights; /* bytes of weights on the GPU */
};

static void usage(FILE *f) {
    fprintf(f,
            "usage: oxidize bench -m MODEL.gguf [-p 512] [-n 128] [-d 0] [-b 512] [-t N] [-r 5]\n"
            "                      [-o md]\n"
            "  Prompt processing and generation speed, measured as llama-bench does: pp<P>\n"
            "  decodes P random tokens from an empty cache in batches of -b tokens, tg<N> decodes\n"
            "  N random tokens one at a time. Each test runs once to warm up, then -r times;\n"
            "  the table shows the mean and sample standard deviation of tokens/s.\n"
            "  -p, --n-prompt LIST     prompt lengths, comma separated (0 skips; default 512)\n"
            "  -n, --n-gen LIST        generation lengths, comma separated (0 skips; default 128)\n"
            "  -d, --n-depth LIST      tokens decoded into the cache (untimed) before each test,\n"
            "                          comma separated (default 0); rows read \"tg128 @ d2048\"\n"
            "  -b, --batch-size N      most tokens per decode call (default 512)\n"
            "  -t, --threads N         worker threads (default: physical cores)\n"
            "  --batch LIST            tg also with this many sequences decoded together\n"
            "                          (aggregate tokens/s; 1..256, comma separated)\n"
            "  -ngl, --n-gpu-layers N  layers on the GPU (default -1: all, when there is one;\n"
            "                          0: the CPU)\n" CMD_SPLIT_USAGE
            "  -r, --repetitions N     timed runs per test (default 5)\n"
            "  -o, --output md|json    a markdown table (default) or a JSON array\n");
}

/* A decimal integer in [lo, hi], or false with a message. */
static bool parse_int(const char *opt, const char *s, long lo, long hi, int *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "oxidize bench: %s wants an integer in [%ld, %ld], got '%s'\n", opt, lo, hi,
                s);
        return false;
    }
    *out = (int)v;
    return true;
}

/* "128,512" into vals; each value in [0, MAX_TOKENS]. False with a message. */
static bool parse_list(const char *opt, const char *s, int *vals, int *n) {
    char item[32];
    *n = 0;
    for (const char *p = s;; p++) {
        size_t len = strcspn(p, ",");
        if (*n == MAX_LIST || len >= sizeof item) {
            fprintf(stderr, "oxidize bench: %s: too many or too long values in '%s'\n", opt, s);
            return false;
        }
        memcpy(item, p, len);
        item[len] = 0;
        if (!parse_int(opt, item, 0, MAX_TOKENS, &vals[(*n)++]))
            return false;
        p += len;
        if (!*p)
            return true;
    }
}

/* Options with a value; 1 when consumed, 0 when not one of them, -1 on a bad value. */
static int value_option(struct bench_opts *o, const char *opt, const char *val) {
    if (!strcmp(opt, "-m") || !strcmp(opt, "--model"))
        o->model = val;
    else if (!strcmp(opt, "-p") || !strcmp(opt, "--n-prompt"))
        return parse_list(opt, val, o->prompts, &o->n_prompts) ? 1 : -1;
    else if (!strcmp(opt, "-n") || !strcmp(opt, "--n-gen"))
        return parse_list(opt, val, o->gens, &o->n_gens) ? 1 : -1;
    else if (!strcmp(opt, "-d") || !strcmp(opt, "--n-depth"))
        return parse_list(opt, val, o->depths, &o->n_depths) ? 1 : -1;
    else if (!strcmp(opt, "-b") || !strcmp(opt, "--batch-size"))
        return parse_int(opt, val, 1, 1 << 16, &o->n_batch) ? 1 : -1;
    else if (!strcmp(opt, "-t") || !strcmp(opt, "--threads"))
        return parse_int(opt, val, 1, 1024, &o->n_threads) ? 1 : -1;
    else if (!strcmp(opt, "--batch")) {
        if (!parse_list(opt, val, o->pars, &o->n_pars))
            return -1;
        for (int i = 0; i < o->n_pars; i++)
            if (o->pars[i] < 1 || o->pars[i] > MAX_PAR) {
                fprintf(stderr, "oxidize bench: --batch values are 1..%d\n", MAX_PAR);
                return -1;
            }
    } else if (!strcmp(opt, "-ngl") || !strcmp(opt, "--n-gpu-layers"))
        return parse_int(opt, val, -1, 1 << 20, &o->n_gpu_layers) ? 1 : -1;
    else if (!strcmp(opt, "-r") || !strcmp(opt, "--repetitions"))
        return parse_int(opt, val, 1, 1000, &o->reps) ? 1 : -1;
    else if (!strcmp(opt, "-o") || !strcmp(opt, "--output")) {
        if (strcmp(val, "md") && strcmp(val, "json")) {
            fprintf(stderr, "oxidize bench: %s wants md or json, got '%s'\n", opt, val);
            return -1;
        }
        o->json = !strcmp(val, "json");
    } else
        return 0;
    return 1;
}

/* Returns -1 to go on, else an exit status. */
static int parse_args(int argc, char **argv, struct bench_opts *o) {
    *o = (struct bench_opts){.prompts = {512},
                             .n_prompts = 1,
                             .gens = {128},
                             .n_gens = 1,
                             .n_depths = 1,
                             .n_batch = 512,
                             .reps = 5,
                             .n_gpu_layers = -1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int r = i + 1 < argc ? value_option(o, a, argv[i + 1]) : 0;
        if (r < 0)
            return usage(stderr), 2;
        if (r > 0) {
            i++;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "oxidize bench: unknown option or missing value: '%s'\n", a);
            return usage(stderr), 2;
        }
    }
    if (!o->model) {
        fprintf(stderr, "oxidize bench: need -m MODEL\n");
        return usage(stderr), 2;
    }
    long per_depth = o->n_prompts + (long)o->n_gens * (o->n_pars ? o->n_pars : 1);
    if (o->n_depths * per_depth > MAX_TESTS) {
        fprintf(stderr,
                "oxidize bench: more than %d tests; shorten the -p, -n, -d or --batch lists\n",
                MAX_TESTS);
        return 2;
    }
    for (int d = 0; d < o->n_depths; d++)
        for (int j = 0; o->depths[d] > 0 && j < o->n_pars; j++)
            if (o->pars[j] > 1) {
                fprintf(stderr, "oxidize bench: -d takes one sequence: not with --batch > 1\n");
                return 2;
            }
    if (!o->n_threads)
        o->n_threads = ox_default_threads();
    return -1;
}

/* A test's row name: "pp512", "tg128 x4", "tg128 @ d2048" (llama-bench's form). */
static void name_test(struct bench_test *t) {
    int len = t->n_prompt ? snprintf(t->name, sizeof t->name, "pp%d", t->n_prompt)
                          : snprintf(t->name, sizeof t->name, "tg%d", t->n_gen);
    if (t->n_par > 1)
        len += snprintf(t->name + len, sizeof t->name - (size_t)len, " x%d", t->n_par);
    if (t->n_depth > 0)
        snprintf(t->name + len, sizeof t->name - (size_t)len, " @ d%d", t->n_depth);
}

/* The tests in llama-bench's order: per depth, every prompt length, then every generation
 * length. */
static int make_tests(const struct bench_opts *o, struct bench_test *t) {
    int n = 0;
    for (int d = 0; d < o->n_depths; d++) {
        for (int i = 0; i < o->n_prompts; i++)
            if (o->prompts[i] > 0) {
                t[n] = (struct bench_test){.n_prompt = o->prompts[i], .n_depth = o->depths[d]};
                name_test(&t[n++]);
            }
        for (int i = 0; i < o->n_gens; i++)
            for (int j = 0; o->gens[i] > 0 && j < (o->n_pars ? o->n_pars : 1); j++) {
                t[n] = (struct bench_test){.n_gen = o->gens[i],
                                           .n_par = o->n_pars ? o->pars[j] : 1,
                                           .n_depth = o->depths[d]};
                name_test(&t[n++]);
            }
    }
    return n;
}

/* A fixed-seed generator (splitmix64), so every run decodes the same "random" tokens. */
static uint64_t rng_state = 0x0123456789abcdefull;

static ox_token random_token(int n_vocab) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (ox_token)(((z >> 32) * (uint64_t)n_vocab) >> 32); /* uniform over [0, n_vocab) */
}

/* What llama-bench's test_prompt and test_gen share: the model's vocabulary size, BOS to start
 * with when the model adds one (-1 when not), and a batch buffer. */
struct bench_run {
    struct ox_context *ctx;
    int n_vocab, n_batch;
    ox_token bos;
    ox_token *tokens; /* [n_batch] */
};

static bool decode(struct bench_run *r, const ox_token *tok, int n, const char *test) {
    /* NULL pos/seq/logits: positions continue the sequence and only the last token's logits
     * are kept, as llama_batch_get_one does. */
    struct ox_batch b = {n, tok, NULL, NULL, NULL};
    if (ox_decode(r->ctx, &b) == OX_OK)
        return true;
    fprintf(stderr, "oxidize bench: %s: %s\n", test, ox_last_error());
    return false;
}

/* llama-bench's test_prompt: n_prompt random tokens (BOS first) in decodes of n_batch. */
static bool run_prompt(struct bench_run *r, int n_prompt, const char *test) {
    for (int done = 0; done < n_prompt;) {
        int n = n_prompt - done < r->n_batch ? n_prompt - done : r->n_batch;
        for (int i = 0; i < n; i++)
            r->tokens[i] = done == 0 && i == 0 && r->bos >= 0 ? r->bos : random_token(r->n_vocab);
        if (!decode(r, r->tokens, n, test))
            return false;
        done += n;
    }
    return true;
}

/* llama-bench's test_gen: n_gen single-token decodes (BOS first), each a random token. */
static bool run_gen(struct bench_run *r, int n_gen, const char *test) {
    ox_token tok = r->bos >= 0 ? r->bos : random_token(r->n_vocab);
    for (int i = 0; i < n_gen; i++) {
        if (!decode(r, &tok, 1, test))
            return false;
        tok = random_token(r->n_vocab);
    }
    return true;
}

/* Batched generation: n_par sequences, each a random first token then n_gen - 1 more, decoded
 * together one token per sequence per step, every row's logits kept (as a server's slots). */
static bool run_gen_par(struct bench_run *r, int n_gen, int n_par, const char *test) {
    int32_t pos[MAX_PAR], seq[MAX_PAR];
    bool want[MAX_PAR];
    for (int s = 0; s < n_par; s++)
        seq[s] = s, want[s] = true;
    for (int i = 0; i < n_gen; i++) {
        for (int s = 0; s < n_par; s++) {
            pos[s] = i;
            r->tokens[s] = i == 0 && r->bos >= 0 ? r->bos : random_token(r->n_vocab);
        }
        struct ox_batch b = {n_par, r->tokens, pos, seq, want};
        if (ox_decode(r->ctx, &b) != OX_OK) {
            fprintf(stderr, "oxidize bench: %s: %s\n", test, ox_last_error());
            return false;
        }
    }
    return true;
}

static bool run_once(struct bench_run *r, const struct bench_test *t, bool warm_up) {
    if (t->n_prompt)
        return run_prompt(r, t->n_prompt, t->name);
    if (t->n_par > 1)
        return run_gen_par(r, warm_up ? 1 : t->n_gen, t->n_par, t->name);
    return run_gen(r, warm_up ? 1 : t->n_gen, t->name);
}

/* Mean and sample standard deviation (n - 1; 0 for one sample, as llama-bench). */
static void summarize(struct bench_test *t, int reps) {
    double sum = 0, sq = 0;
    for (int i = 0; i < reps; i++)
        sum += t->samples_ts[i];
    t->avg_ts = sum / reps;
    for (int i = 0; i < reps; i++)
        sq += (t->samples_ts[i] - t->avg_ts) * (t->samples_ts[i] - t->avg_ts);
    t->stddev_ts = reps > 1 ? sqrt(sq / (reps - 1)) : 0.0;
}

/* One warm-up (untimed; a single token for tg, as llama-bench), then reps timed runs, each
 * from a cleared cache filled to the test's depth first (untimed, as a prompt: BOS first). */
static bool run_test(struct bench_run *r, struct bench_test *t, int reps) {
    ox_kv_clear(r->ctx);
    if ((t->n_depth && !run_prompt(r, t->n_depth, t->name)) || !run_once(r, t, true))
        return false;
    for (int i = 0; i < reps; i++) {
        ox_kv_clear(r->ctx);
        if (t->n_depth && !run_prompt(r, t->n_depth, t->name))
            return false;
        double t0 = cmd_now_s();
        if (!run_once(r, t, false))
            return false;
        double secs = cmd_now_s() - t0;
        t->samples_ts[i] = (t->n_prompt + (double)t->n_gen * (t->n_par > 1 ? t->n_par : 1)) /
                           (secs > 0 ? secs : 1e-9);
    }
    summarize(t, reps);
    return true;
}

/* Sum of the tensors' bytes (what llama-bench's model_size counts), or 0 if unreadable. */
static uint64_t tensor_bytes(const char *path) {
    struct ox_gguf *g = NULL;
    uint64_t sum = 0;
    if (ox_gguf_open(path, &g) != OX_OK)
        return 0;
    for (int64_t i = 0; i < ox_gguf_n_tensors(g); i++) {
        struct ox_tensor_info ti;
        if (ox_gguf_tensor(g, i, &ti) == OX_OK)
            sum += ti.n_bytes;
    }
    ox_gguf_free(g);
    return sum;
}

static double peak_rss_mib(void) {
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (double)ru.ru_maxrss / 1024.0 : 0.0; /* KiB */
}

static void print_md_header(void) {
    printf("| %-30s | %10s | %10s | %-10s | %7s | %15s | %20s |\n", "model", "size", "params",
           "backend", "threads", "test", "t/s");
    printf("| ------------------------------ | ---------: | ---------: | ---------- | ------: | "
           "--------------: | -------------------: |\n");
    fflush(stdout); /* the header shows at once; a long test can take minutes */
}

/* One row, llama-bench's units: MiB below 1 GiB, M parameters below 1 B. */
static void print_md_row(const struct bench_env *e, const struct bench_test *t, int n_threads) {
    char size[32], params[32], ts[64];
    double gib = (double)e->size_bytes / (1024.0 * 1024.0 * 1024.0);
    if (gib < 1)
        snprintf(size, sizeof size, "%.2f MiB", gib * 1024.0);
    else
        snprintf(size, sizeof size, "%.2f GiB", gib);
    if (e->n_params < 1000000000ull)
        snprintf(params, sizeof params, "%.2f M", (double)e->n_params / 1e6);
    else
        snprintf(params, sizeof params, "%.2f B", (double)e->n_params / 1e9);
    snprintf(ts, sizeof ts, "%.2f \xc2\xb1 %.2f", t->avg_ts, t->stddev_ts);
    /* "±" is two bytes but one column: widen the field by one so the table lines up. */
    printf("| %-30s | %10s | %10s | %-10s | %7d | %15s | %21s |\n", e->desc, size, params,
           e->backend, n_threads, t->name, ts);
    fflush(stdout);
}

static void print_json_test(const struct bench_env *e, const struct bench_test *t,
                            const struct bench_opts *o) {
    printf("  {\"test\": ");
    json_write_string(stdout, t->name, strlen(t->name));
    printf(", \"n_prompt\": %d, \"n_gen\": %d, \"n_depth\": %d, \"n_parallel\": %d, \"avg_ts\": ",
           t->n_prompt, t->n_gen, t->n_depth, t->n_par > 1 ? t->n_par : 1);
    json_write_f64(stdout, t->avg_ts);
    printf(", \"stddev_ts\": ");
    json_write_f64(stdout, t->stddev_ts);
    printf(", \"samples_ts\": [");
    for (int i = 0; i < o->reps; i++) {
        printf(i ? ", " : "");
        json_write_f64(stdout, t->samples_ts[i]);
    }
    printf("], \"model_type\": ");
    json_write_string(stdout, e->desc, strlen(e->desc));
    printf(", \"backends\": \"%s\", \"model_size\": %llu, \"model_n_params\": %llu, "
           "\"n_threads\": %d, \"n_batch\": %d, \"load_ms\": ",
           e->backend, (unsigned long long)e->size_bytes, (unsigned long long)e->n_params,
           o->n_threads, o->n_batch);
    json_write_f64(stdout, e->load_ms);
    printf(", \"peak_rss_mib\": ");
    json_write_f64(stdout, e->peak_rss_mib);
    printf("}");
}

/* JSON waits for the end so every object carries the final peak RSS. */
static void print_json(const struct bench_env *e, const struct bench_test *t, int n,
                       const struct bench_opts *o) {
    printf("[\n");
    for (int i = 0; i < n; i++) {
        print_json_test(e, &t[i], o);
        printf(i + 1 < n ? ",\n" : "\n");
    }
    printf("]\n");
}

/* The model, timed, and what the table says about it; false with a message. */
static bool load_model(const struct bench_opts *o, struct ox_model **m, struct bench_env *e) {
    struct ox_model_params mp = ox_model_params_default();
    cmd_split_apply(&mp);
    mp.n_gpu_layers = o->n_gpu_layers;
    double t0 = cmd_now_s();
    if (ox_model_load(o->model, &mp, m) != OX_OK) {
        fprintf(stderr, "oxidize bench: %s\n", ox_last_error());
        return false;
    }
    if (cmd_lora_load(*m) != OX_OK) {
        fprintf(stderr, "oxidize bench: %s\n", ox_last_error());
        return false;
    }
    e->load_ms = (cmd_now_s() - t0) * 1e3;
    ox_model_desc(*m, e->desc, sizeof e->desc);
    e->backend = ox_model_backend(*m);
    e->gpu_weights = ox_model_gpu_bytes(*m);
    e->n_params = ox_model_n_params(*m);
    e->size_bytes = tensor_bytes(o->model);
    return true;
}

/* One context for all tests, as long as the deepest cache plus the longest prompt plus the
 * longest generation (attention only visits used cells, so the extra room costs the short
 * tests nothing). */
static bool setup_run(struct bench_run *r, const struct ox_model *m, const struct bench_opts *o) {
    int max_p = 0, max_n = 0, max_d = 0;
    for (int i = 0; i < o->n_depths; i++)
        max_d = o->depths[i] > max_d ? o->depths[i] : max_d;
    for (int i = 0; i < o->n_prompts; i++)
        max_p = o->prompts[i] > max_p ? o->prompts[i] : max_p;
    for (int i = 0; i < o->n_gens; i++)
        max_n = o->gens[i] > max_n ? o->gens[i] : max_n;
    int max_par = 1;
    for (int i = 0; i < o->n_pars; i++)
        max_par = o->pars[i] > max_par ? o->pars[i] : max_par;
    struct ox_context_params cp = ox_context_params_default();
    cp.n_ctx =
        (uint32_t)(max_d + max_p + max_n * max_par > 0 ? max_d + max_p + max_n * max_par : 1);
    cp.n_seq_max = (uint32_t)max_par;
    cp.n_batch = (uint32_t)o->n_batch;
    cp.n_threads = o->n_threads;
    if (ox_context_create(m, &cp, &r->ctx) != OX_OK) {
        fprintf(stderr, "oxidize bench: %s\n", ox_last_error());
        return false;
    }
    if (cmd_lora_apply(r->ctx) != OX_OK) {
        fprintf(stderr, "oxidize bench: %s\n", ox_last_error());
        return false;
    }
    if (max_p > ox_model_n_ctx_train(m) || max_n > ox_model_n_ctx_train(m))
        fprintf(stderr,
                "bench: warning: tests run past the %d positions the model was trained on\n",
                (int)ox_model_n_ctx_train(m));
    const struct ox_vocab *v = ox_model_vocab(m);
    r->n_vocab = ox_model_n_vocab(m);
    r->n_batch = o->n_batch;
    r->bos = ox_vocab_add_bos(v) ? ox_vocab_bos(v) : -1;
    if (!(r->tokens = malloc((size_t)o->n_batch * sizeof *r->tokens))) {
        fprintf(stderr, "oxidize bench: out of memory for a batch of %d tokens\n", o->n_batch);
        return false;
    }
    return true;
}

/* Run every test, printing markdown rows as they finish; false with a message. */
static bool run_all(struct bench_run *r, struct bench_test *t, int n, const struct bench_opts *o,
                    struct bench_env *e) {
    if (!o->json)
        print_md_header();
    for (int i = 0; i < n; i++) {
        if (!(t[i].samples_ts = calloc((size_t)o->reps, sizeof *t[i].samples_ts))) {
            fprintf(stderr, "oxidize bench: out of memory\n");
            return false;
        }
        if (!run_test(r, &t[i], o->reps))
            return false;
        if (!o->json)
            print_md_row(e, &t[i], o->n_threads);
    }
    e->peak_rss_mib = peak_rss_mib();
    if (o->json)
        print_json(e, t, n, o);
    fflush(stdout); /* before the summary on stderr */
    fprintf(stderr, "bench: load %.1f ms, peak RSS %.1f MiB\n", e->load_ms, e->peak_rss_mib);
    uint64_t kv, buffers, weights = e->gpu_weights;
    ox_context_memory(r->ctx, &kv, &buffers);
    if (weights) /* what the model and this context hold on the GPU */
        fprintf(stderr,
                "bench: GPU memory: weights %.1f MiB, KV cache %.1f MiB, buffers %.1f MiB "
                "(%.1f%% of weights + KV)\n",
                weights / 1048576.0, kv / 1048576.0, buffers / 1048576.0,
                100.0 * (double)buffers / (double)(weights + kv));
    return true;
}

int cmd_bench(int argc, char **argv) {
    struct bench_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    struct bench_test tests[MAX_TESTS];
    int n_tests = make_tests(&o, tests);
    if (n_tests == 0) {
        fprintf(stderr, "oxidize bench: nothing to measure (every -p and -n value is 0)\n");
        return 2;
    }
    struct ox_model *m = NULL;
    struct bench_run r = {0};
    struct bench_env e = {0};
    bool ok = load_model(&o, &m, &e) && setup_run(&r, m, &o) && run_all(&r, tests, n_tests, &o, &e);
    for (int i = 0; i < n_tests; i++)
        free(tests[i].samples_ts);
    free(r.tokens);
    ox_context_free(r.ctx);
    ox_model_free(m);
    return ok ? 0 : 1;
}
