/* dump_embedding.c: llama.cpp's pooled embeddings of an embedding model, for the encoder
 * references (tests/data/arch/reference/embedding/NAME.json): for each prompt its tokens (as
 * llama-embedding makes them: special tokens added and parsed) and the raw, unnormalized pooled
 * vector of each pooling type (mean, cls, last; and rank, the classifier's scores, when the model
 * has a head); for each query and document its reranking tokens (as llama.cpp's server formats
 * them, format_prompt_rerank) and score. Built against llama.cpp's library by make_refs.sh; never
 * part of oxidize.
 *
 * usage: dump_embedding MODEL.gguf OUT.json [rank]     (rank: the model has a classifier head) */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

enum { N_CTX = 512, N_THREADS = 2, MAX_TOKENS = 512, N_RANDOM = 48 };

static const char *const PROMPTS[] = {
    "what is the capital of france?",
    "Paris is the capital and largest city of France.",
    "The quick brown fox jumps over the lazy dog",
    "a b c",
    "In the summer the children played by the river, and their parents watched from the old "
    "bridge while the sun went down over the hills of the north.",
};
static const char *const QUERY = "what is the capital of france?";
static const char *const DOCUMENTS[] = {
    "Paris is the capital and largest city of France.",
    "The quick brown fox jumps over the lazy dog",
    "france is a country in europe",
};
static const char *const POOLINGS[] = {"none", "mean", "cls", "last", "rank"};
#define COUNT(a) (int)(sizeof(a) / sizeof(a)[0])

static void quiet(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level >= GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

static void die(const char *what) {
    fprintf(stderr, "dump_embedding: %s\n", what);
    exit(1);
}

static int tokenize(const struct llama_vocab *v, const char *text, llama_token *out, bool special,
                    bool parse) {
    int n = llama_tokenize(v, text, (int32_t)strlen(text), out, MAX_TOKENS, special, parse);
    if (n < 0)
        die("too many tokens");
    return n;
}

/* The server's reranking input: the model's "rerank" template, else BOS query EOS SEP doc EOS as
 * the vocabulary adds them (EOS falling back to SEP). */
static int rerank_tokens(const struct llama_model *m, const char *q, const char *d,
                         llama_token *out) {
    const struct llama_vocab *v = llama_model_get_vocab(m);
    const char *tmpl = llama_model_chat_template(m, "rerank");
    if (tmpl)
        die("a rerank template: not written here");
    int n = 0;
    llama_token eos = llama_vocab_eos(v) != LLAMA_TOKEN_NULL ? llama_vocab_eos(v)
                                                             : llama_vocab_sep(v);
    if (llama_vocab_get_add_bos(v))
        out[n++] = llama_vocab_bos(v);
    n += tokenize(v, q, out + n, false, false);
    if (llama_vocab_get_add_eos(v))
        out[n++] = eos;
    if (llama_vocab_get_add_sep(v))
        out[n++] = llama_vocab_sep(v);
    n += tokenize(v, d, out + n, false, false);
    if (llama_vocab_get_add_eos(v))
        out[n++] = eos;
    return n;
}

/* The pooled vector (n floats) of one token sequence on sequence 0 of a cleared memory. */
static const float *pooled(struct llama_context *ctx, const llama_token *t, int n) {
    struct llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++)
        b.token[i] = t[i], b.pos[i] = i, b.n_seq_id[i] = 1, b.seq_id[i][0] = 0, b.logits[i] = 1;
    b.n_tokens = n;
    llama_memory_clear(llama_get_memory(ctx), true);
    if (llama_decode(ctx, b) != 0)
        die("llama_decode failed");
    llama_batch_free(b);
    const float *e = llama_get_embeddings_seq(ctx, 0);
    if (!e)
        die("no pooled embedding");
    return e;
}

static void json_ints(FILE *f, const char *key, const llama_token *t, int n) {
    fprintf(f, "\"%s\": [", key);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%d", i ? ", " : "", t[i]);
    fprintf(f, "]");
}

static void json_floats(FILE *f, const char *key, const float *x, int n) {
    fprintf(f, ", \"%s\": [", key);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%.9g", i ? ", " : "", x[i]);
    fprintf(f, "]");
}

/* A context of the pooling type p (1..4), NULL when llama.cpp refuses it. */
static struct llama_context *context(struct llama_model *m, int p) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = N_CTX, cp.n_batch = N_CTX, cp.n_ubatch = N_CTX;
    cp.n_threads = cp.n_threads_batch = N_THREADS;
    cp.embeddings = true;
    cp.pooling_type = (enum llama_pooling_type)p;
    return llama_init_from_model(m, cp);
}

/* The prompts: the texts, then N_RANDOM ids drawn between the specials and the vocabulary's end
 * framed as the vocabulary frames a text. */
static int make_prompts(const struct llama_vocab *v, llama_token toks[][MAX_TOKENS], int *len) {
    int np = 0;
    for (; np < COUNT(PROMPTS); np++)
        len[np] = tokenize(v, PROMPTS[np], toks[np], true, true);
    int n = tokenize(v, "", toks[np], true, true), nv = llama_vocab_n_tokens(v);
    llama_token last = n > 1 ? toks[np][n - 1] : -1; /* SEP after the ids */
    n = n > 1 ? n - 1 : n;
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < N_RANDOM; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        toks[np][n++] = 1000 + (llama_token)((s >> 33) % (uint64_t)(nv - 1000));
    }
    if (last >= 0)
        toks[np][n++] = last;
    len[np++] = n;
    return np;
}

int main(int argc, char **argv) {
    if (argc != 3 && !(argc == 4 && !strcmp(argv[3], "rank")))
        die("usage: dump_embedding MODEL.gguf OUT.json [rank]");
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *m = llama_model_load_from_file(argv[1], mp);
    if (!m)
        die("llama.cpp cannot load the model");
    const struct llama_vocab *v = llama_model_get_vocab(m);
    static llama_token toks[COUNT(PROMPTS) + 1][MAX_TOKENS];
    int len[COUNT(PROMPTS) + 1], np = make_prompts(v, toks, len);
    int n_embd = llama_model_n_embd(m), n_cls = (int)llama_model_n_cls_out(m);
    bool rank = argc == 4;
    FILE *f = fopen(argv[2], "w");
    if (!f)
        die("cannot write the output");
    fprintf(f, "{\"n_embd\": %d, \"n_cls_out\": %d, \"prompts\": [\n", n_embd, rank ? n_cls : 0);
    struct llama_context *ctx[5] = {0};
    for (int p = 1; p <= 4; p++)
        if ((p < 4 || rank) && !(ctx[p] = context(m, p)))
            die("llama.cpp refuses a pooling type");
    for (int i = 0; i < np; i++) {
        fprintf(f, "  {\"text\": \"%s\", ", i < COUNT(PROMPTS) ? PROMPTS[i] : "");
        json_ints(f, "tokens", toks[i], len[i]);
        for (int p = 1; p <= 4; p++)
            if (ctx[p])
                json_floats(f, POOLINGS[p], pooled(ctx[p], toks[i], len[i]), p == 4 ? n_cls : n_embd);
        fprintf(f, "}%s\n", i + 1 < np ? "," : "");
    }
    fprintf(f, "], \"rerank\": [\n");
    for (int d = 0; rank && d < COUNT(DOCUMENTS); d++) {
        llama_token t[MAX_TOKENS];
        int n = rerank_tokens(m, QUERY, DOCUMENTS[d], t);
        fprintf(f, "  {\"query\": \"%s\", \"document\": \"%s\", ", QUERY, DOCUMENTS[d]);
        json_ints(f, "tokens", t, n);
        fprintf(f, ", \"score\": %.9g}%s\n", pooled(ctx[4], t, n)[0],
                d + 1 < COUNT(DOCUMENTS) ? "," : "");
    }
    fprintf(f, "]}\n");
    if (fclose(f) != 0)
        die("cannot write the output");
    for (int p = 1; p <= 4; p++)
        llama_free(ctx[p]);
    llama_model_free(m);
    printf("%s: %d prompts, n_embd %d%s\n", argv[2], np, n_embd, rank ? ", rank" : "");
    return 0;
}
