/* cmd_embed.c: `oxidize embed -m MODEL -p TEXT`: a text's embedding (its final hidden states,
 * pooled and normalized as llama.cpp's llama-embedding does) as one JSON array on stdout; with a
 * reranker (--pooling rank), the relevance of each --doc to the text. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "oxidize.h"

enum { MAX_DOCS = 64 };

struct embed_opts {
    const char *model, *prompt;
    const char *docs[MAX_DOCS]; /* --doc: documents a reranker scores against the prompt */
    int n_docs;
    int pooling; /* an enum ox_pooling, or -1: the model's pooling_type, else mean */
    bool no_normalize;
    int n_ctx, n_threads, n_gpu_layers; /* n_ctx 0: as many as the text's tokens */
};

static void usage(FILE *f) {
    fprintf(f,
            "usage: oxidize embed -m MODEL.gguf -p TEXT [options]\n"
            "  Print TEXT's embedding: the model's final hidden states (after the output norm)\n"
            "  pooled into one vector of n_embd floats, as a JSON array.\n"
            "  --pooling mean|cls|last|rank  average all tokens, or take the first or the last;\n"
            "                           rank: a reranker's classifier scores (default: the\n"
            "                           model's pooling_type key, else mean)\n"
            "  --doc TEXT               with rank: score this document's relevance to TEXT (the\n"
            "                           query); repeat for more; prints one score per document\n"
            "  --no-normalize           leave the vector as pooled (default: unit L2 norm)\n"
            "  -c CTX                   context size in tokens (default: the text's length)\n"
            "  -t THREADS               threads (default: the physical cores)\n"
            "  -ngl N                   layers on the GPU (default -1: all when there is one)\n"
            CMD_SPLIT_USAGE);
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
    static const char *const names[] = {"none", "mean", "cls", "last", "rank"};
    if (!strcmp(a, "-m"))
        return (o->model = v) != NULL;
    if (!strcmp(a, "-p"))
        return (o->prompt = v) != NULL;
    if (!strcmp(a, "--pooling")) {
        for (int i = OX_POOLING_MEAN; i <= OX_POOLING_RANK; i++)
            if (!strcmp(v, names[i]))
                return (o->pooling = i), true;
        return false;
    }
    if (!strcmp(a, "--doc"))
        return o->n_docs < MAX_DOCS && (o->docs[o->n_docs++] = v) != NULL;
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
    if (o->n_docs > 0 && o->pooling >= 0 && o->pooling != OX_POOLING_RANK) {
        fprintf(stderr, "oxidize embed: --doc is for a reranker (--pooling rank)\n");
        return 2;
    }
    return -1;
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

/* The query and document's tokens as llama.cpp's server gives them to a reranker (malloc'd). */
static enum ox_status tokenize_pair(const struct ox_model *m, const char *query, const char *doc,
                                    ox_token **ids, size_t *n) {
    CMD_TRY(ox_tokenize_rerank(m, query, doc, NULL, 0, n));
    if (!(*ids = malloc((*n ? *n : 1) * sizeof **ids)))
        return OX_ERR_OOM;
    return ox_tokenize_rerank(m, query, doc, *ids, *n, n);
}

/* The model's pooling: the option's, else the file's, else mean. */
static enum ox_pooling pooling_of(const struct embed_opts *o, const struct ox_model *m) {
    if (o->pooling >= 0)
        return (enum ox_pooling)o->pooling;
    if (o->n_docs > 0)
        return OX_POOLING_RANK;
    return ox_model_pooling(m) != OX_POOLING_NONE ? ox_model_pooling(m) : OX_POOLING_MEAN;
}

/* Each input's tokens: the prompt's, or with documents each (prompt, document) pair's. */
static enum ox_status tokenize_all(const struct embed_opts *o, const struct ox_model *m,
                                   ox_token **ids, size_t *lens, size_t *longest) {
    int n_in = o->n_docs > 0 ? o->n_docs : 1;
    *longest = 1;
    for (int i = 0; i < n_in; i++) {
        CMD_TRY(o->n_docs > 0 ? tokenize_pair(m, o->prompt, o->docs[i], &ids[i], &lens[i])
                              : tokenize(m, o->prompt, &ids[i], &lens[i]));
        *longest = lens[i] > *longest ? lens[i] : *longest;
    }
    return OX_OK;
}

static enum ox_status run(const struct embed_opts *o, struct ox_model **m, struct ox_context **c,
                          ox_token **ids, float **out) {
    struct ox_model_params mp = ox_model_params_default();
    cmd_split_apply(&mp);
    mp.n_gpu_layers = o->n_gpu_layers;
    CMD_TRY(ox_model_load(o->model, &mp, m));
    CMD_TRY(cmd_lora_load(*m));
    size_t lens[MAX_DOCS], longest;
    CMD_TRY(tokenize_all(o, *m, ids, lens, &longest));
    struct ox_context_params cp = ox_context_params_default();
    cp.n_ctx = o->n_ctx > 0 ? (uint32_t)o->n_ctx : (uint32_t)longest;
    cp.n_batch = cp.n_ctx < 512 ? cp.n_ctx : 512;
    cp.n_threads = o->n_threads;
    cp.embeddings = true;
    CMD_TRY(ox_context_create(*m, &cp, c));
    CMD_TRY(cmd_lora_apply(*c));
    enum ox_pooling pooling = pooling_of(o, *m);
    int width = pooling == OX_POOLING_RANK ? ox_model_n_cls_out(*m) : ox_model_n_embd(*m);
    if (!(*out = malloc((size_t)(width > 0 ? width : 1) * sizeof **out)))
        return OX_ERR_OOM;
    if (o->n_docs == 0) {
        CMD_TRY(ox_embed(*c, ids[0], (int32_t)lens[0], pooling, !o->no_normalize, *out));
        print_vector(*out, width);
        return OX_OK;
    }
    float scores[MAX_DOCS]; /* a reranker's relevance: the first of its scores */
    for (int i = 0; i < o->n_docs; i++) {
        CMD_TRY(ox_embed(*c, ids[i], (int32_t)lens[i], pooling, false, *out));
        scores[i] = (*out)[0];
    }
    print_vector(scores, o->n_docs);
    return OX_OK;
}

int cmd_embed(int argc, char **argv) {
    struct embed_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    struct ox_model *m = NULL;
    struct ox_context *c = NULL;
    ox_token *ids[MAX_DOCS] = {NULL};
    float *out = NULL;
    enum ox_status s = run(&o, &m, &c, ids, &out);
    if (s != OX_OK)
        fprintf(stderr, "oxidize embed: %s\n", s == OX_ERR_OOM ? "out of memory" : ox_last_error());
    free(out);
    for (int i = 0; i < MAX_DOCS; i++)
        free(ids[i]);
    ox_context_free(c);
    ox_model_free(m);
    return s == OX_OK ? 0 : 1;
}
