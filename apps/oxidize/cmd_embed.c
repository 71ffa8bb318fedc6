/* cmd_embed.c: `oxidize embed -m MODEL -p TEXT`: a text's embedding (its final hidden states,
 * pooled and normalized as llama.cpp's llama-embedding does) as one JSON array on stdout. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "oxidize.h"

struct embed_opts {
    const char *model, *prompt;
    int pooling; /* an enum ox_pooling, or -1: the model's pooling_type, else mean */
    bool no_normalize;
    int n_ctx, n_threads, n_gpu_layers; /* n_ctx 0: as many as the text's tokens */
};

static void usage(FILE *f) {
    fprintf(f,
            "usage: oxidize embed -m MODEL.gguf -p TEXT [options]\n"
            "  Print TEXT's embedding: the model's final hidden states (after the output norm)\n"
            "  pooled into one vector of n_embd floats, as a JSON array.\n"
            "  --pooling mean|cls|last  average all tokens, or take the first or the last\n"
            "                           (default: the model's pooling_type key, else mean)\n"
            "  --no-normalize           leave the vector as pooled (default: unit L2 norm)\n"
            "  -c CTX                   context size in tokens (default: the text's length)\n"
            "  -t THREADS               threads (default: the physical cores)\n"
            "  -ngl N                   layers on the GPU (default -1: all when there is one)\n");
}

static bool parse_int(const char *s, long lo, long hi, int *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end != 0 || v < lo || v > hi)
        return false;
    *out = (int)v;
    return true;
}

/* One option with a value; false for an unknown option or a bad value. */
static bool set_option(struct embed_opts *o, const char *a, const char *v) {
    static const char *const names[] = {"none", "mean", "cls", "last"};
    if (!strcmp(a, "-m"))
        return (o->model = v) != NULL;
    if (!strcmp(a, "-p"))
        return (o->prompt = v) != NULL;
    if (!strcmp(a, "--pooling")) {
        for (int i = OX_POOLING_MEAN; i <= OX_POOLING_LAST; i++)
            if (!strcmp(v, names[i]))
                return (o->pooling = i), true;
        return false;
    }
    if (!strcmp(a, "-c"))
        return parse_int(v, 1, 1 << 24, &o->n_ctx);
    if (!strcmp(a, "-t"))
        return parse_int(v, 1, 1024, &o->n_threads);
    if (!strcmp(a, "-ngl") || !strcmp(a, "--n-gpu-layers"))
        return parse_int(v, -1, 1 << 20, &o->n_gpu_layers);
    return false;
}

/* Returns -1 to go on, else an exit status. */
static int parse_args(int argc, char **argv, struct embed_opts *o) {
    *o = (struct embed_opts){.pooling = -1, .n_gpu_layers = -1};
    for (int i = 1; i < argc; i += 2) { /* every option but --no-normalize takes a value */
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--no-normalize")) {
            o->no_normalize = true;
            i--;
            continue;
        }
        if (i + 1 >= argc || !set_option(o, argv[i], argv[i + 1])) {
            fprintf(stderr, "oxidize embed: bad option or value: '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!o->model || !o->prompt) {
        fprintf(stderr, "oxidize embed: need -m MODEL and -p TEXT\n");
        return 2;
    }
    return -1;
}

/* The model's own choice, as llama.cpp reads it: "<arch>.pooling_type" when it names mean, cls
 * or last (embedding models carry it); mean otherwise. */
static enum ox_pooling model_pooling(const char *path) {
    struct ox_gguf *g = NULL;
    struct ox_gguf_value arch, v;
    enum ox_pooling p = OX_POOLING_MEAN;
    int64_t i = ox_gguf_open(path, &g) == OX_OK ? ox_gguf_find_key(g, "general.architecture") : -1;
    if (i >= 0 && ox_gguf_value(g, i, &arch) == OX_OK && arch.type == OX_GGUF_STRING) {
        char key[256];
        snprintf(key, sizeof key, "%.*s.pooling_type", (int)arch.n, arch.v.s);
        int64_t k = ox_gguf_find_key(g, key);
        if (k >= 0 && ox_gguf_value(g, k, &v) == OX_OK && v.type <= OX_GGUF_INT32 &&
            v.v.u >= OX_POOLING_MEAN && v.v.u <= OX_POOLING_LAST)
            p = (enum ox_pooling)v.v.u;
    }
    ox_gguf_free(g);
    return p;
}

/* The text's tokens as llama-embedding makes them: BOS/EOS as the vocabulary asks, control
 * tokens written in the text parsed. *ids is malloc'd. */
static enum ox_status tokenize(const struct ox_model *m, const char *text, ox_token **ids,
                               size_t *n) {
    const struct ox_vocab *v = ox_model_vocab(m);
    size_t len = strlen(text);
    CMD_TRY(ox_tokenize(v, text, len, NULL, 0, n, true, true));
    if (!(*ids = malloc((*n ? *n : 1) * sizeof **ids)))
        return OX_ERR_OOM;
    return ox_tokenize(v, text, len, *ids, *n, n, true, true);
}

static void print_vector(const float *x, int n) {
    putchar('[');
    for (int i = 0; i < n; i++) {
        fputs(i ? ", " : "", stdout);
        if (isfinite(x[i]))
            printf("%.9g", x[i]);
        else
            fputs("null", stdout); /* JSON has no NaN or infinity */
    }
    puts("]");
}

static enum ox_status run(const struct embed_opts *o, struct ox_model **m, struct ox_context **c,
                          ox_token **ids, float **out) {
    struct ox_model_params mp = ox_model_params_default();
    mp.n_gpu_layers = o->n_gpu_layers;
    CMD_TRY(ox_model_load(o->model, &mp, m));
    size_t n = 0;
    CMD_TRY(tokenize(*m, o->prompt, ids, &n));
    struct ox_context_params cp = ox_context_params_default();
    cp.n_ctx = o->n_ctx > 0 ? (uint32_t)o->n_ctx : (uint32_t)n;
    cp.n_batch = cp.n_ctx < 512 ? cp.n_ctx : 512;
    cp.n_threads = o->n_threads;
    cp.embeddings = true;
    CMD_TRY(ox_context_create(*m, &cp, c));
    if (!(*out = malloc((size_t)ox_model_n_embd(*m) * sizeof **out)))
        return OX_ERR_OOM;
    enum ox_pooling pooling =
        o->pooling >= 0 ? (enum ox_pooling)o->pooling : model_pooling(o->model);
    CMD_TRY(ox_embed(*c, *ids, (int32_t)n, pooling, !o->no_normalize, *out));
    print_vector(*out, ox_model_n_embd(*m));
    return OX_OK;
}

int cmd_embed(int argc, char **argv) {
    struct embed_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    struct ox_model *m = NULL;
    struct ox_context *c = NULL;
    ox_token *ids = NULL;
    float *out = NULL;
    enum ox_status s = run(&o, &m, &c, &ids, &out);
    if (s != OX_OK)
        fprintf(stderr, "oxidize embed: %s\n", s == OX_ERR_OOM ? "out of memory" : ox_last_error());
    free(out);
    free(ids);
    ox_context_free(c);
    ox_model_free(m);
    return s == OX_OK ? 0 : 1;
}
