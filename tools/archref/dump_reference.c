/* dump_reference.c: llama.cpp's logits for one model, in the format of the shared reference
 * files (../shared/testdata/README.md, reference/): a 48-token prompt decoded as one batch (every
 * position's logits), 16 greedy tokens decoded one at a time, and a text prompt with 24 greedy
 * tokens. Built against llama.cpp's library by tools/archref/build.sh; never part of oxidize.
 *
 * usage: dump_reference MODEL.gguf OUTDIR NAME
 *   DUMP_NGL=N puts N layers on a GPU build's device (default 0: the references are the CPU's). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

enum { N_PROMPT = 48, N_GREEDY = 16, N_TEXT_GREEDY = 24, N_CTX = 512, N_THREADS = 2 };
static const char TEXT[] = "Once upon a time, there was a little robot who";

static void quiet(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level >= GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

/* Decodes n tokens at positions pos0.. as one batch; every position's logits when all_logits. */
static void decode(struct llama_context *ctx, const llama_token *toks, int n, int pos0,
                   int all_logits) {
    struct llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = toks[i], b.pos[i] = pos0 + i, b.n_seq_id[i] = 1, b.seq_id[i][0] = 0;
        b.logits[i] = all_logits || i == n - 1;
    }
    b.n_tokens = n;
    if (llama_decode(ctx, b) != 0) {
        fprintf(stderr, "dump_reference: llama_decode failed\n");
        exit(1);
    }
    llama_batch_free(b);
}

/* n greedy tokens after the prompt of n_prompt tokens already decoded (its last logits at
 * index last); each row of logits used goes to rows when it is not NULL. */
static void greedy(struct llama_context *ctx, int n_vocab, int n_prompt, int last, int n,
                   llama_token *out, float *rows) {
    const float *lg = llama_get_logits_ith(ctx, last);
    for (int g = 0; g < n; g++) {
        if (rows)
            memcpy(rows + (size_t)g * n_vocab, lg, (size_t)n_vocab * sizeof *lg);
        out[g] = argmax(lg, n_vocab);
        decode(ctx, &out[g], 1, n_prompt + g, 0);
        lg = llama_get_logits_ith(ctx, -1);
    }
}

static void write_f32(const char *dir, const char *file, const float *x, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(x, sizeof *x, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "dump_reference: cannot write %s\n", path);
        exit(1);
    }
}

static void json_ids(FILE *f, const char *key, const llama_token *t, int n) {
    fprintf(f, "  \"%s\": [", key);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%d", i ? ", " : "", t[i]);
    fprintf(f, "],\n");
}

/* What the reference files hold. */
struct reference {
    int n_vocab, n_text;
    llama_token prompt[N_PROMPT], greedy[N_GREEDY], text[256], text_greedy[N_TEXT_GREEDY];
    float *logits, *greedy_logits; /* [N_PROMPT][n_vocab], [N_GREEDY][n_vocab] */
};

/* The prompt: BOS when the vocab adds one, then ids from [3, n_vocab - 1) drawn from a seed
 * made of the reference's name. */
static void make_prompt(const struct llama_vocab *vocab, const char *name, struct reference *r) {
    int n = 0;
    if (llama_vocab_get_add_bos(vocab))
        r->prompt[n++] = llama_vocab_bos(vocab);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (const char *p = name; *p; p++)
        s = (s ^ (uint8_t)*p) * 0x100000001b3ull;
    while (n < N_PROMPT) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        r->prompt[n++] = 3 + (llama_token)((s >> 33) % (uint64_t)(r->n_vocab - 4));
    }
}

/* The prompt as one batch (every position's logits) and its greedy tokens; then, on a cleared
 * memory, the text (BOS as the vocab asks, special tokens not parsed) and its greedy tokens. */
static bool run(struct llama_context *ctx, const struct llama_vocab *vocab, struct reference *r) {
    int nv = r->n_vocab;
    decode(ctx, r->prompt, N_PROMPT, 0, 1);
    for (int i = 0; i < N_PROMPT; i++)
        memcpy(r->logits + (size_t)i * nv, llama_get_logits_ith(ctx, i),
               (size_t)nv * sizeof(float));
    greedy(ctx, nv, N_PROMPT, N_PROMPT - 1, N_GREEDY, r->greedy, r->greedy_logits);
    llama_memory_clear(llama_get_memory(ctx), true);
    r->n_text = llama_tokenize(vocab, TEXT, (int32_t)strlen(TEXT), r->text, 256, true, false);
    if (r->n_text <= 0)
        return false;
    decode(ctx, r->text, r->n_text, 0, 0);
    greedy(ctx, nv, r->n_text, -1, N_TEXT_GREEDY, r->text_greedy, NULL);
    return true;
}

/* dir/name.json, dir/name.logits.f32 and dir/name.greedy.f32. */
static bool write_reference(const char *dir, const char *name, const struct llama_vocab *vocab,
                            const struct reference *r) {
    char file[1024], path[4096];
    snprintf(file, sizeof file, "%s.logits.f32", name);
    write_f32(dir, file, r->logits, (size_t)N_PROMPT * r->n_vocab);
    snprintf(file, sizeof file, "%s.greedy.f32", name);
    write_f32(dir, file, r->greedy_logits, (size_t)N_GREEDY * r->n_vocab);
    snprintf(path, sizeof path, "%s/%s.json", dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    fprintf(f, "{\n  \"n_vocab\": %d,\n  \"n_ctx\": %d,\n", r->n_vocab, N_CTX);
    json_ids(f, "prompt", r->prompt, N_PROMPT);
    fprintf(f, "  \"logits\": \"%s.logits.f32\",\n", name);
    json_ids(f, "greedy", r->greedy, N_GREEDY);
    fprintf(f, "  \"greedy_logits\": \"%s.greedy.f32\",\n", name);
    fprintf(f, "  \"text\": \"%s\",\n", TEXT);
    json_ids(f, "text_tokens", r->text, r->n_text);
    json_ids(f, "text_greedy", r->text_greedy, N_TEXT_GREEDY);
    fprintf(f, "  \"text_greedy_detok_hex\": \"");
    for (int i = 0; i < N_TEXT_GREEDY; i++) {
        char piece[256];
        int len = llama_token_to_piece(vocab, r->text_greedy[i], piece, sizeof piece, 0, false);
        for (int k = 0; k < len; k++)
            fprintf(f, "%02x", (unsigned char)piece[k]);
    }
    fprintf(f, "\"\n}\n");
    return fclose(f) == 0;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: dump_reference MODEL.gguf OUTDIR NAME\n");
        return 2;
    }
    const char *dir = argv[2], *name = argv[3];
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = getenv("DUMP_NGL") ? atoi(getenv("DUMP_NGL")) : 0;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "dump_reference: llama.cpp cannot load %s\n", argv[1]);
        return 1;
    }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = N_CTX, cp.n_batch = N_CTX, cp.n_ubatch = N_CTX;
    cp.n_threads = cp.n_threads_batch = N_THREADS;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    static struct reference r;
    r.n_vocab = llama_vocab_n_tokens(vocab);
    r.logits = malloc((size_t)N_PROMPT * r.n_vocab * sizeof *r.logits);
    r.greedy_logits = malloc((size_t)N_GREEDY * r.n_vocab * sizeof *r.greedy_logits);
    make_prompt(vocab, name, &r);
    int rc = 0;
    if (!ctx || !r.logits || !r.greedy_logits || !run(ctx, vocab, &r)) {
        fprintf(stderr, "dump_reference: %s: cannot run the prompt or tokenize the text\n", name);
        rc = 1;
    } else if (!write_reference(dir, name, vocab, &r)) {
        fprintf(stderr, "dump_reference: cannot write %s/%s.json\n", dir, name);
        rc = 1;
    } else {
        printf("%s: %d positions, greedy %d ... , text %d tokens\n", name, N_PROMPT, r.greedy[0],
               r.n_text);
    }
    free(r.logits), free(r.greedy_logits);
    llama_free(ctx);
    llama_model_free(model);
    return rc;
}
