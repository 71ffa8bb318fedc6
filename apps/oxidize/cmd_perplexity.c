/* cmd_perplexity.c: `oxidize perplexity -m MODEL -f TEXT`: perplexity as llama-perplexity does. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "oxidize.h"

struct ppl_opts {
    const char *model, *file;
    int n_ctx, n_batch, n_threads; /* n_batch 0: n_ctx; n_threads 0: all CPUs */
};

/* One measurement: the text's tokens, the context they go through, the batch being built and
 * the running sums of -log p (in double, so 15k terms lose nothing). */
struct ppl_run {
    struct ox_context *ctx;
    const ox_token *tokens;
    ox_token bos;      /* written over the first token of every chunk; -1: leave it */
    int n_ctx, n_batch; /* tokens per chunk, per ox_decode call */
    int n_seq;          /* chunks decoded side by side (n_batch / n_ctx when n_batch > n_ctx) */
    int n_vocab;
    ox_token *b_tok;    /* [n_batch] the batch under construction */
    int32_t *b_pos, *b_seq;
    bool *b_logits;
    double nll, nll2;   /* sums of -log p and of its square over the scored tokens */
    int64_t count;
};

static void usage(FILE *f) {
    fprintf(f,
            "usage: oxidize perplexity -m MODEL.gguf -f TEXT [-c CTX] [-b BATCH] [-t THREADS]\n"
            "  Perplexity of the model on TEXT, as llama-perplexity computes it: the text is\n"
            "  cut into chunks of CTX tokens (BOS first when the model uses one), each decoded\n"
            "  from an empty cache, and the second half of each chunk is scored. Prints the\n"
            "  running estimate per chunk, '[1]52.1234,[2]...', then the final estimate\n"
            "  'Final estimate: PPL = X +/- Y'.\n"
            "  -c, --ctx-size N    tokens per chunk (default 512; the text needs 2*N tokens)\n"
            "  -b, --batch-size N  tokens per decode call (default CTX); below CTX any value,\n"
            "                      above it a multiple of CTX (that many chunks at once)\n"
            "  -t, --threads N     worker threads (default: all CPUs)\n" CMD_SPLIT_USAGE);
}

/* A decimal integer in [lo, hi], or false with a message. */
static bool parse_int(const char *opt, const char *s, long lo, long hi, int *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "oxidize perplexity: %s wants an integer in [%ld, %ld], got '%s'\n", opt,
                lo, hi, s);
        return false;
    }
    *out = (int)v;
    return true;
}

/* Values each option accepts; returns 1 when consumed, 0 when not an option with a value,
 * -1 on a bad value. */
static int value_option(struct ppl_opts *o, const char *opt, const char *val) {
    if (!strcmp(opt, "-m") || !strcmp(opt, "--model"))
        o->model = val;
    else if (!strcmp(opt, "-f") || !strcmp(opt, "--file"))
        o->file = val;
    else if (!strcmp(opt, "-c") || !strcmp(opt, "--ctx-size"))
        return parse_int(opt, val, 4, 1 << 20, &o->n_ctx) ? 1 : -1;
    else if (!strcmp(opt, "-b") || !strcmp(opt, "--batch-size"))
        return parse_int(opt, val, 1, 1 << 16, &o->n_batch) ? 1 : -1;
    else if (!strcmp(opt, "-t") || !strcmp(opt, "--threads"))
        return parse_int(opt, val, 1, 1024, &o->n_threads) ? 1 : -1;
    else
        return 0;
    return 1;
}

/* Returns -1 to go on, else an exit status. */
static int parse_args(int argc, char **argv, struct ppl_opts *o) {
    *o = (struct ppl_opts){.n_ctx = 512};
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
            fprintf(stderr, "oxidize perplexity: unknown option or missing value: '%s'\n", a);
            return usage(stderr), 2;
        }
    }
    if (!o->model || !o->file) {
        fprintf(stderr, "oxidize perplexity: need -m MODEL and -f TEXT\n");
        return usage(stderr), 2;
    }
    if (!o->n_batch)
        o->n_batch = o->n_ctx;
    /* Above one chunk, a batch holds whole chunks side by side (llama.cpp's rule). */
    if (o->n_batch > o->n_ctx && o->n_batch % o->n_ctx) {
        fprintf(stderr, "oxidize perplexity: batch size %d is above the context %d but not a "
                        "multiple of it\n", o->n_batch, o->n_ctx);
        return usage(stderr), 2;
    }
    return -1;
}

/* The text's tokens with the BOS the vocabulary asks for (special tokens in the text stay
 * text, as in llama-perplexity), or NULL with a message. */
static ox_token *tokenize_all(const struct ox_vocab *v, const char *text, size_t len,
                              size_t *n) {
    ox_token *ids = NULL;
    enum ox_status s = ox_tokenize(v, text, len, NULL, 0, n, true, false);
    if (s == OX_OK && !(ids = malloc((*n ? *n : 1) * sizeof *ids)))
        s = OX_ERR_OOM;
    if (s == OX_OK)
        s = ox_tokenize(v, text, len, ids, *n, n, true, false);
    if (s != OX_OK) {
        fprintf(stderr, "oxidize perplexity: %s\n",
                s == OX_ERR_OOM ? "out of memory for the tokens" : ox_last_error());
        free(ids);
        return NULL;
    }
    return ids;
}

/* -log p(tok) under softmax(logits). The maximum is taken in float and the exponentials are
 * summed in double, as llama-perplexity does, so both agree to the digits they print. */
static double neg_log_prob(const float *logits, int n_vocab, ox_token tok) {
    float max = logits[0];
    for (int i = 1; i < n_vocab; i++)
        if (logits[i] > max)
            max = logits[i];
    double sum = 0.0;
    for (int i = 0; i < n_vocab; i++)
        sum += expf(logits[i] - max);
    return log(sum) - (double)(logits[tok] - max);
}

/* Fill the batch with slice j (n tokens from position j*n_batch) of each of n_chunks chunks
 * from chunk c0. Only positions in the scored half ask for logits, and not the chunk's last
 * one, which has no next token to predict. */
static int32_t fill_batch(struct ppl_run *r, int c0, int n_chunks, int j, int n) {
    const int first = r->n_ctx / 2;
    int32_t idx = 0;
    for (int s = 0; s < n_chunks; s++) {
        const ox_token *chunk = r->tokens + (size_t)(c0 + s) * (size_t)r->n_ctx;
        for (int k = 0; k < n; k++, idx++) {
            int32_t pos = j * r->n_batch + k;
            /* Every chunk starts as a document would: with BOS in place of its first token. */
            r->b_tok[idx] = pos == 0 && r->bos >= 0 ? r->bos : chunk[pos];
            r->b_pos[idx] = pos;
            r->b_seq[idx] = s;
            r->b_logits[idx] = pos >= first && pos < r->n_ctx - 1;
        }
    }
    return idx;
}

/* Add -log p(next token) for the rows of sequence s (n tokens from batch index s*n) of the
 * last decode; false when a row's logits are missing. */
static bool score_rows(struct ppl_run *r, int c0, int s, int n) {
    const ox_token *chunk = r->tokens + (size_t)(c0 + s) * (size_t)r->n_ctx;
    for (int32_t idx = s * n; idx < (s + 1) * n; idx++) {
        if (!r->b_logits[idx])
            continue;
        const float *logits = ox_get_logits(r->ctx, idx);
        if (!logits) {
            fprintf(stderr, "oxidize perplexity: no logits for batch row %d\n", (int)idx);
            return false;
        }
        double v = neg_log_prob(logits, r->n_vocab, chunk[r->b_pos[idx] + 1]);
        r->nll += v;
        r->nll2 += v * v;
        r->count++;
    }
    return true;
}

/* Decode chunks c0 .. c0+n_chunks-1 from an empty cache and score them, printing the running
 * perplexity after each chunk. */
static bool eval_chunks(struct ppl_run *r, int c0, int n_chunks) {
    const int n_slices = (r->n_ctx + r->n_batch - 1) / r->n_batch;
    ox_kv_clear(r->ctx);
    for (int j = 0; j < n_slices; j++) {
        int n = r->n_ctx - j * r->n_batch < r->n_batch ? r->n_ctx - j * r->n_batch : r->n_batch;
        struct ox_batch b = {fill_batch(r, c0, n_chunks, j, n), r->b_tok, r->b_pos, r->b_seq,
                             r->b_logits};
        if (ox_decode(r->ctx, &b) != OX_OK) {
            fprintf(stderr, "\noxidize perplexity: chunk %d: %s\n", c0 + 1, ox_last_error());
            return false;
        }
        for (int s = 0; s < n_chunks; s++) {
            if (!score_rows(r, c0, s, n))
                return false;
            if (j == n_slices - 1)
                printf("[%d]%.4f,", c0 + s + 1, exp(r->nll / (double)r->count));
        }
        fflush(stdout);
    }
    return true;
}

/* The final estimate with its standard error: the spread of -log p over the scored tokens,
 * divided by sqrt(count - 1), carried through exp() to first order (times PPL). */
static bool print_final(const struct ppl_run *r) {
    double n = (double)r->count, mean = r->nll / n, ppl = exp(mean);
    double var = r->nll2 / n - mean * mean;
    printf("\n");
    if (!(var > 0) || r->count < 2) {
        printf("Final estimate: PPL = %.4f\n", ppl);
        fprintf(stderr, "oxidize perplexity: unexpected non-positive variance of log(prob)\n");
        return false;
    }
    printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, sqrt(var / (n - 1)) * ppl);
    fflush(stdout); /* before the timing line on stderr */
    return true;
}

/* Run every whole chunk of the text through the model; false with a message on failure. */
static bool measure(struct ppl_run *r, size_t n_tokens) {
    const int n_chunk = (int)(n_tokens / (size_t)r->n_ctx);
    fprintf(stderr, "perplexity: %d chunks of %d tokens, batches of %d tokens (%d chunk%s each)\n",
            n_chunk, r->n_ctx, r->n_seq * r->n_batch, r->n_seq, r->n_seq > 1 ? "s" : "");
    double t0 = cmd_now_s();
    for (int c = 0; c < n_chunk; c += r->n_seq)
        if (!eval_chunks(r, c, n_chunk - c < r->n_seq ? n_chunk - c : r->n_seq))
            return false;
    double secs = cmd_now_s() - t0;
    bool ok = print_final(r);
    fprintf(stderr, "perplexity: %d tokens in %.2f s (%.1f tokens/s)\n", n_chunk * r->n_ctx,
            secs, (double)n_chunk * r->n_ctx / (secs > 0 ? secs : 1e-9));
    return ok;
}

/* Context for n_seq chunks side by side, and the batch buffers; false with a message. */
static bool setup_run(struct ppl_run *r, const struct ox_model *m, const struct ppl_opts *o) {
    r->n_ctx = o->n_ctx;
    r->n_seq = o->n_batch > o->n_ctx ? o->n_batch / o->n_ctx : 1;
    r->n_batch = o->n_batch > o->n_ctx ? o->n_ctx : o->n_batch; /* per chunk, per decode */
    r->n_vocab = ox_model_n_vocab(m);
    struct ox_context_params cp = ox_context_params_default();
    cp.n_ctx = (uint32_t)(r->n_seq * r->n_ctx);
    cp.n_batch = (uint32_t)(r->n_seq * r->n_batch);
    cp.n_threads = o->n_threads;
    cp.n_seq_max = (uint32_t)r->n_seq;
    if (ox_context_create(m, &cp, &r->ctx) != OX_OK) {
        fprintf(stderr, "oxidize perplexity: %s\n", ox_last_error());
        return false;
    }
    if (cmd_lora_apply(r->ctx) != OX_OK) {
        fprintf(stderr, "oxidize perplexity: %s\n", ox_last_error());
        return false;
    }
    size_t nb = cp.n_batch;
    r->b_tok = malloc(nb * sizeof *r->b_tok);
    r->b_pos = malloc(nb * sizeof *r->b_pos);
    r->b_seq = malloc(nb * sizeof *r->b_seq);
    r->b_logits = malloc(nb * sizeof *r->b_logits);
    if (!r->b_tok || !r->b_pos || !r->b_seq || !r->b_logits) {
        fprintf(stderr, "oxidize perplexity: out of memory for a batch of %zu tokens\n", nb);
        return false;
    }
    return true;
}

static void free_run(struct ppl_run *r) {
    free(r->b_tok);
    free(r->b_pos);
    free(r->b_seq);
    free(r->b_logits);
    ox_context_free(r->ctx);
}

/* Load the model and tokenize the text; false with a message. */
static bool load_inputs(const struct ppl_opts *o, struct ox_model **m, ox_token **tokens,
                        size_t *n_tokens) {
    size_t len;
    char *text = cmd_read_file("perplexity", o->file, &len);
    if (!text)
        return false;
    struct ox_model_params mp = ox_model_params_default();
    cmd_split_apply(&mp);
    if (ox_model_load(o->model, &mp, m) != OX_OK) {
        fprintf(stderr, "oxidize perplexity: %s\n", ox_last_error());
        free(text);
        return false;
    }
    if (cmd_lora_load(*m) != OX_OK) {
        fprintf(stderr, "oxidize perplexity: %s\n", ox_last_error());
        free(text);
        return false;
    }
    char desc[256];
    ox_model_desc(*m, desc, sizeof desc);
    fprintf(stderr, "perplexity: model %s (%s), %llu parameters, n_ctx_train %d\n", o->model,
            desc, (unsigned long long)ox_model_n_params(*m), (int)ox_model_n_ctx_train(*m));
    double t0 = cmd_now_s();
    *tokens = tokenize_all(ox_model_vocab(*m), text, len, n_tokens);
    free(text);
    if (*tokens)
        fprintf(stderr, "perplexity: %s: %zu bytes -> %zu tokens in %.1f ms\n", o->file, len,
                *n_tokens, (cmd_now_s() - t0) * 1e3);
    return *tokens != NULL;
}

/* The text has to fill two chunks, and the model may not append EOS (a chunk is a prefix of
 * a document, so an EOS would score the wrong thing). */
static bool check_inputs(const struct ppl_opts *o, const struct ox_model *m, size_t n_tokens) {
    const struct ox_vocab *v = ox_model_vocab(m);
    if (ox_vocab_add_eos(v)) {
        fprintf(stderr, "oxidize perplexity: models whose vocabulary appends EOS are not "
                        "supported\n");
        return false;
    }
    if (n_tokens < 2 * (size_t)o->n_ctx) {
        fprintf(stderr, "oxidize perplexity: you need at least %d tokens to evaluate perplexity "
                        "with a context of %d; %s tokenizes to only %zu tokens\n",
                2 * o->n_ctx, o->n_ctx, o->file, n_tokens);
        return false;
    }
    if (o->n_ctx > ox_model_n_ctx_train(m))
        fprintf(stderr, "perplexity: warning: the model was trained on only %d context tokens "
                        "(%d asked)\n", (int)ox_model_n_ctx_train(m), o->n_ctx);
    return true;
}

int cmd_perplexity(int argc, char **argv) {
    struct ppl_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    struct ox_model *m = NULL;
    ox_token *tokens = NULL;
    size_t n_tokens = 0;
    struct ppl_run r = {0};
    bool ok = load_inputs(&o, &m, &tokens, &n_tokens) && check_inputs(&o, m, n_tokens) &&
              setup_run(&r, m, &o);
    if (ok) {
        const struct ox_vocab *v = ox_model_vocab(m);
        r.tokens = tokens;
        r.bos = ox_vocab_add_bos(v) ? ox_vocab_bos(v) : -1;
        ok = measure(&r, n_tokens);
    }
    free_run(&r);
    free(tokens);
    ox_model_free(m);
    return ok ? 0 : 1;
}
