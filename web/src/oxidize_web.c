/* oxidize_web.c: the library as the browser module's worker calls it (web/js/worker.js): one
 * session (model, context, sampler) per loaded model, a prompt read in chunks and tokens
 * generated one call at a time, so the worker returns to its event loop between them (an abort
 * is seen at the next chunk or token). Plain C types only: the JavaScript side passes numbers
 * and strings through the module's heap. Uses only oxidize.h and the apps' sampling settings. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <emscripten/emscripten.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sampling.h"
#include "oxidize.h"

#define EXPORT EMSCRIPTEN_KEEPALIVE

struct oxw_session {
    struct ox_model *model;
    struct ox_context *ctx;
    struct ox_sampler *sampler; /* built by oxw_begin from opts */
    struct sampling_opts opts;
    struct ox_logit_bias *eog_bans; /* ignore_eos: -inf on every end-of-generation token */
    size_t n_eog;
    struct ox_detok_stream *detok;
    ox_token *tokens; /* what the cache holds for sequence 0, then the pending prompt */
    int32_t n_cached, n_tokens, n_ctx, n_batch;
    int32_t last_row; /* the batch row of the last decode whose logits sample the next token */
    ox_token next;    /* sampled, handed out, not yet decoded (-1: none) */
    char *text;       /* the last description, text or rendering handed out */
    char *piece;      /* the last token's text (piece_cap bytes) */
    size_t piece_cap;
};

/* A failure of this file's own (the library keeps its own last error): cleared by each call
 * that can fail, so the message is always the last failure's. */
static char glue_error[200];

EXPORT const char *oxw_last_error(void) {
    return glue_error[0] ? glue_error : ox_last_error();
}

EXPORT void oxw_free(struct oxw_session *s) {
    if (!s)
        return;
    ox_sampler_free(s->sampler);
    ox_detok_stream_free(s->detok);
    free(s->opts.grammar);
    ox_context_free(s->ctx);
    ox_model_free(s->model);
    free(s->tokens);
    free(s->eog_bans);
    free(s->text);
    free(s->piece);
    free(s);
}

/* The model at path (the module's file system: a mounted File or a downloaded copy), read into
 * memory, with a context of n_ctx tokens (0: the model's, at most 4096) on n_threads threads. */
EXPORT struct oxw_session *oxw_load(const char *path, int n_ctx, int n_threads) {
    glue_error[0] = 0;
    struct oxw_session *s = calloc(1, sizeof *s);
    struct ox_model_params mp = ox_model_params_default();
    mp.use_mmap = false;
    if (!s || ox_model_load(path, &mp, &s->model) != OX_OK) {
        free(s);
        return NULL;
    }
    struct ox_context_params cp = ox_context_params_default();
    int32_t train = ox_model_n_ctx_train(s->model);
    cp.n_ctx = n_ctx > 0 ? (uint32_t)n_ctx : (uint32_t)(train > 0 && train < 4096 ? train : 4096);
    cp.n_threads = n_threads;
    sampling_opts_default(&s->opts);
    if (ox_context_create(s->model, &cp, &s->ctx) != OX_OK ||
        ox_detok_stream_create(ox_model_vocab(s->model), false, &s->detok) != OX_OK) {
        oxw_free(s);
        return NULL;
    }
    s->n_ctx = (int32_t)ox_context_n_ctx(s->ctx);
    s->n_batch = (int32_t)ox_context_n_batch(s->ctx);
    s->tokens = malloc((size_t)s->n_ctx * sizeof *s->tokens);
    s->next = -1;
    if (!s->tokens) {
        snprintf(glue_error, sizeof glue_error, "no memory for %d tokens", s->n_ctx);
        oxw_free(s);
        return NULL;
    }
    return s;
}

EXPORT int oxw_n_ctx(const struct oxw_session *s) {
    return s->n_ctx;
}

EXPORT int oxw_n_vocab(const struct oxw_session *s) {
    return ox_model_n_vocab(s->model);
}

/* The model's one-line description (architecture, size, type), NUL-terminated. */
EXPORT const char *oxw_describe(struct oxw_session *s) {
    glue_error[0] = 0;
    size_t need = ox_model_desc(s->model, NULL, 0) + 1;
    char *t = malloc(need);
    if (!t)
        return "";
    ox_model_desc(s->model, t, need);
    free(s->text);
    return s->text = t;
}

/* text's tokens into out (at most cap); returns how many the text has, or -1. */
EXPORT int oxw_tokenize(struct oxw_session *s, const char *text, int add_special, int parse_special,
                        ox_token *out, int cap) {
    glue_error[0] = 0;
    size_t n = 0;
    enum ox_status st = ox_tokenize(ox_model_vocab(s->model), text, strlen(text), out,
                                    cap > 0 ? (size_t)cap : 0, &n, add_special, parse_special);
    return st == OX_OK ? (int)n : -1;
}

/* The text of n tokens, NUL-terminated (valid until the next call that returns text). */
EXPORT const char *oxw_detokenize(struct oxw_session *s, const ox_token *tokens, int n,
                                  int special) {
    glue_error[0] = 0;
    const struct ox_vocab *v = ox_model_vocab(s->model);
    int64_t need = ox_detokenize(v, tokens, (size_t)n, NULL, 0, false, special);
    char *t = need >= 0 ? malloc((size_t)need + 1) : NULL;
    if (!t)
        return NULL;
    ox_detokenize(v, tokens, (size_t)n, t, (size_t)need, false, special);
    t[need] = 0;
    free(s->text);
    return s->text = t;
}

/* A conversation (a JSON array of {role, content}) in the model's chat template, ending with the
 * assistant's turn opened; NULL (oxw_last_error) when the model has none or it fails. */
EXPORT const char *oxw_chat_render(struct oxw_session *s, const char *messages_json) {
    const struct ox_vocab *v = ox_model_vocab(s->model);
    const char *tmpl = ox_model_chat_template(s->model, NULL);
    if (!tmpl)
        tmpl = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
               "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
    ox_token bos = ox_vocab_bos(v), eos = ox_vocab_eos(v);
    glue_error[0] = 0;
    char *out = NULL;
    size_t len = 0;
    if (ox_chat_render_json(tmpl, messages_json, NULL, true,
                            bos >= 0 ? ox_vocab_token_text(v, bos) : NULL,
                            eos >= 0 ? ox_vocab_token_text(v, eos) : NULL, 0, &out, &len) != OX_OK)
        return NULL;
    free(s->text);
    return s->text = out;
}

/* Sampling settings: back to llama.cpp's defaults, or one by its /completion name
 * ("temperature", "top_k", "seed", ...). 0: set; -1: no such setting; -2: out of range. */
EXPORT void oxw_sampling_defaults(struct oxw_session *s) {
    free(s->opts.grammar);
    sampling_opts_default(&s->opts);
}

/* ignore_eos as llama.cpp's server has it: every end-of-generation token banned (for benchmarks:
 * a fixed number of tokens). */
static int ignore_eos(struct oxw_session *s, bool on) {
    s->opts.bias = NULL, s->opts.n_bias = 0;
    if (!on)
        return 0;
    const struct ox_vocab *v = ox_model_vocab(s->model);
    if (!s->eog_bans) {
        int32_t n = ox_vocab_n_tokens(v);
        s->eog_bans = malloc(sizeof *s->eog_bans * (size_t)(n > 0 ? n : 1));
        if (!s->eog_bans)
            return -1;
        for (ox_token t = 0; t < n; t++)
            if (ox_vocab_is_eog(v, t))
                s->eog_bans[s->n_eog++] = (struct ox_logit_bias){t, -INFINITY};
    }
    s->opts.bias = s->eog_bans, s->opts.n_bias = s->n_eog;
    return 0;
}

EXPORT int oxw_sampling_set(struct oxw_session *s, const char *name, double value) {
    if (!strcmp(name, "ignore_eos"))
        return ignore_eos(s, value != 0);
    if (!strcmp(name, "seed")) {
        if (!(value >= 0 && value <= 4294967295.0))
            return -2;
        s->opts.seed = (uint32_t)value;
        return 0;
    }
    for (size_t i = 0; i < n_sampling_fields; i++) {
        const struct sampling_field *f = &sampling_fields[i];
        if (strcmp(f->json, name))
            continue;
        if (!(value >= f->lo && value <= f->hi))
            return -2;
        sampling_field_set(&s->opts, f, value);
        return 0;
    }
    return -1;
}

/* A GBNF grammar the next generation keeps to (NULL or "": none). */
EXPORT int oxw_sampling_grammar(struct oxw_session *s, const char *gbnf) {
    free(s->opts.grammar);
    s->opts.grammar = gbnf && *gbnf ? strdup(gbnf) : NULL;
    s->opts.grammar_len = s->opts.grammar ? strlen(gbnf) : 0;
    s->opts.grammar_opt = s->opts.grammar ? "grammar" : NULL;
    return gbnf && *gbnf && !s->opts.grammar ? -1 : 0;
}

/* ---- generation ---- */

/* A generation from prompt (n tokens) with the current settings. The part of the cache that
 * matches the prompt's start is kept (a chat's earlier turns are not read again); the rest waits
 * for oxw_prefill. Returns how many prompt tokens the cache already held, or -1 (oxw_last_error).
 */
EXPORT int oxw_begin(struct oxw_session *s, const ox_token *prompt, int n) {
    glue_error[0] = 0;
    if (n <= 0 || n >= s->n_ctx) {
        snprintf(glue_error, sizeof glue_error, "the prompt has %d tokens, the context %d", n,
                 s->n_ctx);
        return -1;
    }
    int32_t keep = 0;
    while (keep < s->n_cached && keep < n && s->tokens[keep] == prompt[keep])
        keep++;
    if (keep == n) /* the last prompt token is decoded again for its logits */
        keep--;
    ox_kv_seq_rm(s->ctx, 0, keep, -1);
    if (ox_kv_seq_pos_max(s->ctx, 0) < 0) /* a recurrent layer's state cannot go back: anew */
        keep = 0;
    s->n_cached = keep;
    memcpy(s->tokens, prompt, (size_t)n * sizeof *prompt);
    s->n_tokens = n;
    s->next = -1;
    ox_sampler_free(s->sampler);
    s->sampler = NULL;
    ox_detok_stream_free(s->detok);
    s->detok = NULL;
    if (sampling_opts_chain(&s->opts, s->model, s->n_ctx, &s->sampler) != OX_OK ||
        ox_detok_stream_create(ox_model_vocab(s->model), false, &s->detok) != OX_OK)
        return -1;
    for (int i = 0; i < n; i++)
        if (ox_sampler_accept_prompt(s->sampler, prompt[i]) != OX_OK)
            return -1;
    return keep;
}

/* Forgets what the cache holds: the next generation reads its whole prompt (benchmarks). */
EXPORT void oxw_forget(struct oxw_session *s) {
    ox_kv_clear(s->ctx);
    s->n_cached = s->n_tokens = 0;
    s->next = -1;
}

/* Reads the next chunk (at most n_batch tokens) of the prompt; returns how many are left (0:
 * ready to generate), or -1. */
EXPORT int oxw_prefill(struct oxw_session *s) {
    glue_error[0] = 0;
    int32_t n = s->n_tokens - s->n_cached;
    if (n > s->n_batch)
        n = s->n_batch;
    struct ox_batch b = {.n_tokens = n, .token = s->tokens + s->n_cached};
    if (n > 0 && ox_decode(s->ctx, &b) != OX_OK)
        return -1;
    if (n > 0)
        s->n_cached += n, s->last_row = n - 1;
    return s->n_tokens - s->n_cached;
}

/* Keeps a copy of text (len bytes) as s->piece, NUL-terminated, in a buffer that only grows (no
 * allocation per token once it holds the longest piece); false without memory. */
static bool keep_piece(struct oxw_session *s, const char *text, size_t len) {
    if (len + 1 > s->piece_cap) {
        size_t cap = len + 1 > 64 ? len + 1 : 64;
        char *t = realloc(s->piece, cap);
        if (!t)
            return false;
        s->piece = t, s->piece_cap = cap;
    }
    memcpy(s->piece, text, len);
    s->piece[len] = 0;
    return true;
}

/* The next token: the one handed out before is decoded first, then one is sampled from the
 * logits. Returns its id (its text: oxw_piece), -1 at the end of generation (the model's
 * end-of-turn token), -2 when the context is full, -3 on an error (oxw_last_error). */
EXPORT int oxw_next(struct oxw_session *s) {
    glue_error[0] = 0;
    if (s->next >= 0) {
        if (s->n_cached >= s->n_ctx)
            return -2;
        struct ox_batch b = {.n_tokens = 1, .token = &s->next};
        if (ox_decode(s->ctx, &b) != OX_OK)
            return -3;
        s->tokens[s->n_cached++] = s->next;
        s->n_tokens = s->n_cached;
        s->last_row = 0;
        s->next = -1;
    }
    const float *logits = s->sampler ? ox_get_logits(s->ctx, s->last_row) : NULL;
    if (!logits) {
        snprintf(glue_error, sizeof glue_error,
                 "no logits to sample from (oxw_begin and "
                 "oxw_prefill first)");
        return -3;
    }
    ox_token t = ox_sampler_sample(s->sampler, logits, ox_model_n_vocab(s->model));
    if (t < 0) {
        snprintf(glue_error, sizeof glue_error,
                 "the sampler could pick no token (a grammar "
                 "that allows none?)");
        return -3;
    }
    if (ox_sampler_accept(s->sampler, t) != OX_OK)
        return -3;
    if (ox_vocab_is_eog(ox_model_vocab(s->model), t))
        return -1;
    const char *text = NULL;
    size_t len = 0;
    if (ox_detok_stream_push(s->detok, t, &text, &len) != OX_OK || !keep_piece(s, text, len))
        return -3;
    s->next = t;
    return t;
}

/* The text the last token completes (a character split across tokens waits for its last
 * byte), NUL-terminated; with flush, whatever is still held back at the end instead. */
EXPORT const char *oxw_piece(struct oxw_session *s, int flush) {
    const char *text = NULL;
    size_t len = 0;
    if (flush &&
        (ox_detok_stream_flush(s->detok, &text, &len) != OX_OK || !keep_piece(s, text, len)))
        return NULL;
    return s->piece ? s->piece : "";
}
