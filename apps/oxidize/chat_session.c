/* chat_session.c: one answer at a time in a conversation, reusing the KV cache: the new
 * rendering is compared with the text already processed and only what follows it is decoded. */
#define _POSIX_C_SOURCE 200809L
#include "chat_session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_file.h"
#include "cmd.h"
#include "spec_opts.h"

/* Grow *p (of *cap elements of size sz) to hold need elements. */
static bool reserve(void **p, size_t *cap, size_t need, size_t sz) {
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * sz);
    if (!q)
        return false;
    *p = q, *cap = c;
    return true;
}

void chat_session_init(struct chat_session *s) {
    *s = (struct chat_session){.n_predict = -1};
}

static void free_messages(struct chat_session *s, size_t from) {
    for (size_t i = from; i < s->n_msgs; i++) {
        free((char *)s->msgs[i].role);
        free((char *)s->msgs[i].content);
    }
    s->n_msgs = from;
}

void chat_session_free(struct chat_session *s) {
    free_messages(s, 0);
    free(s->msgs);
    free(s->kv);
    free(s->kv_text);
    chat_session_init(s);
}

enum ox_status chat_session_add(struct chat_session *s, const char *role, const char *content) {
    if (!reserve((void **)&s->msgs, &s->cap_msgs, s->n_msgs + 1, sizeof *s->msgs))
        return OX_ERR_OOM;
    char *r = strdup(role), *c = strdup(content);
    if (!r || !c) {
        free(r), free(c);
        return OX_ERR_OOM;
    }
    s->msgs[s->n_msgs++] = (struct ox_chat_message){r, c};
    return OX_OK;
}

/* Drop messages [i, j). */
static void remove_messages(struct chat_session *s, size_t i, size_t j) {
    for (size_t k = i; k < j; k++) {
        free((char *)s->msgs[k].role);
        free((char *)s->msgs[k].content);
    }
    memmove(s->msgs + i, s->msgs + j, (s->n_msgs - j) * sizeof *s->msgs);
    s->n_msgs -= j - i;
}

static size_t first_non_system(const struct chat_session *s) {
    return s->n_msgs > 0 && !strcmp(s->msgs[0].role, "system") ? 1 : 0;
}

static void clear_cache(struct chat_session *s) {
    ox_kv_clear(s->ctx);
    s->n_kv = s->n_kv_text = 0;
    s->kv_text_valid = false;
}

void chat_session_reset(struct chat_session *s) {
    free_messages(s, first_non_system(s));
    clear_cache(s);
}

enum ox_status chat_session_replace(struct chat_session *s, const struct ox_chat_message *msgs,
                                    size_t n) {
    free_messages(s, 0);
    for (size_t i = 0; i < n; i++)
        CMD_TRY(chat_session_add(s, msgs[i].role, msgs[i].content));
    s->kv_text_valid = false; /* the next answer finds the shared prefix token by token */
    return OX_OK;
}

enum ox_status chat_render(const struct ox_model *m, const char *tmpl,
                           const struct ox_chat_message *msgs, size_t n, bool add_generation,
                           char **out, size_t *len) {
    *out = NULL;
    size_t need = 0;
    CMD_TRY(ox_chat_apply_template(m, tmpl, msgs, n, add_generation, NULL, NULL, 0, &need));
    char *buf = malloc(need + 1);
    if (!buf)
        return OX_ERR_OOM;
    enum ox_status st =
        ox_chat_apply_template(m, tmpl, msgs, n, add_generation, NULL, buf, need, &need);
    if (st != OX_OK) {
        free(buf);
        return st;
    }
    buf[need] = '\0';
    *out = buf, *len = need;
    return OX_OK;
}

bool chat_starts_with_bos(const struct ox_vocab *v, const char *text) {
    char bos[64];
    ox_token t = ox_vocab_bos(v);
    int32_t n = t >= 0 ? ox_token_to_piece(v, t, bos, sizeof bos, 0, true) : 0;
    return n > 0 && (size_t)n <= sizeof bos && !strncmp(text, bos, (size_t)n);
}

static enum ox_status tokenize(const struct ox_vocab *v, const char *text, size_t len, bool bos,
                               ox_token **out, size_t *n) {
    size_t need = 0;
    *out = NULL, *n = 0;
    CMD_TRY(ox_tokenize(v, text, len, NULL, 0, &need, bos, true));
    ox_token *t = malloc((need ? need : 1) * sizeof *t);
    if (!t)
        return OX_ERR_OOM;
    enum ox_status st = ox_tokenize(v, text, len, t, need, n, bos, true);
    if (st != OX_OK)
        free(t);
    else
        *out = t;
    return st;
}

static bool append_text(struct chat_session *s, const char *text, size_t len) {
    if (!reserve((void **)&s->kv_text, &s->cap_kv_text, s->n_kv_text + len + 1, 1))
        return false;
    memcpy(s->kv_text + s->n_kv_text, text, len);
    s->kv_text[s->n_kv_text += len] = '\0';
    return true;
}

/* The tokens to decode for this rendering: after the cached text when the rendering extends
 * it (the usual case), else after the longest shared token prefix (the cache is cut there).
 * At least one token is left to decode, since its logits start the answer. */
static enum ox_status new_tokens(struct chat_session *s, const char *text, size_t len,
                                 ox_token **out, size_t *n) {
    const struct ox_vocab *v = ox_model_vocab(s->model);
    if (s->kv_text_valid && s->n_kv > 0 && len > s->n_kv_text &&
        !memcmp(text, s->kv_text, s->n_kv_text)) {
        CMD_TRY(tokenize(v, text + s->n_kv_text, len - s->n_kv_text, false, out, n));
        if (*n > 0)
            return OX_OK;
        free(*out);
    }
    ox_token *all;
    size_t n_all, p = 0;
    CMD_TRY(tokenize(v, text, len, !chat_starts_with_bos(v, text), &all, &n_all));
    while (p < n_all && p < s->n_kv && all[p] == s->kv[p])
        p++;
    if (p == n_all && p > 0)
        p--;
    ox_kv_seq_rm(s->ctx, 0, (int32_t)p, -1);
    if (ox_kv_seq_pos_max(s->ctx, 0) < 0) /* a recurrent model's sequence goes whole */
        p = 0;
    s->n_kv = p;
    memmove(all, all + p, (n_all - p) * sizeof *all);
    *out = all, *n = n_all - p;
    return OX_OK;
}

/* How many tokens the system prompt (if any) and the last message take on their own. */
static enum ox_status tokens_alone(struct chat_session *s, size_t *n) {
    struct ox_chat_message m[2] = {s->msgs[0], s->msgs[s->n_msgs - 1]};
    size_t first = first_non_system(s), len;
    char *text;
    CMD_TRY(chat_render(s->model, s->tmpl, m + 1 - first, 1 + first, true, &text, &len));
    const struct ox_vocab *v = ox_model_vocab(s->model);
    enum ox_status st = ox_tokenize(v, text, len, NULL, 0, n, !chat_starts_with_bos(v, text), true);
    free(text);
    return st;
}

static enum ox_status refuse(size_t need, uint32_t n_ctx, size_t room) {
    fprintf(stderr,
            "oxidize chat: the message needs %zu tokens; the context holds %u (with %zu kept "
            "for the answer)\n",
            need, n_ctx, room);
    return OX_ERR_CONTEXT_FULL;
}

/* Render the conversation and find its new tokens, dropping the oldest exchanges while the
 * prompt and room for an answer do not fit. */
static enum ox_status prepare(struct chat_session *s, ox_token **toks, size_t *n,
                              struct chat_stats *stats) {
    uint32_t n_ctx = ox_context_n_ctx(s->ctx);
    size_t room =
        s->n_predict > 0 && (uint32_t)s->n_predict < n_ctx / 4 ? (size_t)s->n_predict : n_ctx / 8;
    for (;;) {
        char *text;
        size_t len;
        CMD_TRY(chat_render(s->model, s->tmpl, s->msgs, s->n_msgs, true, &text, &len));
        enum ox_status st = new_tokens(s, text, len, toks, n);
        if (st == OX_OK && s->n_kv + *n + room <= n_ctx) {
            s->n_kv_text = 0; /* the cache will spell exactly this rendering */
            s->kv_text_valid = append_text(s, text, len);
            free(text);
            return OX_OK;
        }
        free(text);
        if (st != OX_OK)
            return st;
        free(*toks);
        *toks = NULL;
        /* Too long: drop the oldest exchange (a user message and what answered it), unless
         * even the system prompt and this message alone would not fit. */
        size_t first = first_non_system(s), end = first + 1, alone;
        while (end < s->n_msgs && strcmp(s->msgs[end].role, "user"))
            end++;
        if (end >= s->n_msgs || (!stats->n_dropped && (st = tokens_alone(s, &alone)) != OX_OK)) {
            stats->refused = st == OX_OK;
            return st != OX_OK ? st : refuse(s->n_kv + *n, n_ctx, room);
        }
        if (!stats->n_dropped && alone + room > n_ctx)
            return stats->refused = true, refuse(alone, n_ctx, room);
        remove_messages(s, first, end);
        stats->n_dropped += end - first;
        s->kv_text_valid = false;
    }
}

/* Decode the prompt's new tokens in batches; OX_ERR_ABORTED when interrupted first. */
static enum ox_status decode_prompt(struct chat_session *s, const ox_token *toks, size_t n,
                                    volatile sig_atomic_t *interrupt, int32_t *last) {
    const size_t n_batch = 512;
    for (size_t i = 0; i < n; i += n_batch) {
        if (*interrupt)
            return OX_ERR_ABORTED;
        size_t k = n - i < n_batch ? n - i : n_batch;
        struct ox_batch b = {.n_tokens = (int32_t)k, .token = toks + i};
        CMD_TRY(ox_decode(s->ctx, &b));
        memcpy(s->kv + s->n_kv, toks + i, k * sizeof *toks);
        s->n_kv += k;
        *last = (int32_t)k - 1;
    }
    return OX_OK;
}

/* The answer as it is released: kept in a memory stream and echoed to out as it grows. */
struct answer_echo {
    FILE *mem, *out;
    char *buf;
    size_t len, shown;
};

static void echo(struct answer_echo *a) {
    fflush(a->mem);
    fwrite(a->buf + a->shown, 1, a->len - a->shown, a->out);
    fflush(a->out);
    a->shown = a->len;
}

/* A generated token the answer goes on after: into the cache's list and its text. */
static void keep_token(struct chat_session *s, const struct ox_vocab *v, ox_token t) {
    s->kv[s->n_kv++] = t;
    char text[256];
    int32_t n_text = ox_token_to_piece(v, t, text, sizeof text, 0, false);
    if (n_text < 0 || (size_t)n_text > sizeof text || !append_text(s, text, (size_t)n_text))
        s->kv_text_valid = false;
    /* a control token is in the cache but not in the text: the next turn matches tokens */
    if (n_text == 0 && ox_token_to_piece(v, t, text, sizeof text, 0, true) > 0)
        s->kv_text_valid = false;
}

/* Generate until end of turn, a stop string, the budget, a full context or an interrupt; the
 * visible answer (stop string excluded) goes to a. The cache gets every token but the last
 * (an end of turn, or one that completed a stop string, is never kept: a speculative step may
 * have decoded tokens past it, which go again). */
static enum ox_status generate(struct chat_session *s, const float *logits, struct answer_echo *a,
                               volatile sig_atomic_t *interrupt, struct chat_stats *stats) {
    const struct ox_vocab *v = ox_model_vocab(s->model);
    struct ox_detok_stream *stream;
    CMD_TRY(ox_detok_stream_create(v, false, &stream));
    struct stop_filter stops = {.n_stop = s->n_stop};
    memcpy(stops.stop, s->stop, sizeof s->stop);
    uint32_t n_ctx = ox_context_n_ctx(s->ctx);
    /* the tokens sampled and not yet shown (a step gives at most a draft of 256 and one more);
     * all but the last are in the cache */
    ox_token next[257];
    int n_next = 1;
    next[0] = ox_sampler_sample(s->sampler, logits, ox_model_n_vocab(s->model));
    enum ox_status st = OX_OK;
    if (next[0] >= 0 && !ox_vocab_is_eog(v, next[0]))
        st = ox_sampler_accept(s->sampler, next[0]);
    for (bool done = st != OX_OK; !done;) {
        for (int i = 0; i < n_next && !done; i++) {
            ox_token t = next[i];
            stats->interrupted = *interrupt != 0;
            done = stats->interrupted || (s->n_predict >= 0 && stats->n_gen >= s->n_predict) ||
                   t < 0 || ox_vocab_is_eog(v, t);
            if (done)
                break;
            const char *piece;
            size_t len;
            if (ox_detok_stream_push(stream, t, &piece, &len) == OX_OK)
                done = stop_filter_push(&stops, piece, len, a->mem);
            stats->n_gen++;
            echo(a);
            if (!done && i + 1 < n_next) /* the step decoded it */
                keep_token(s, v, t);
        }
        /* the last token: decoded by the next step, or alone when it was shown and the budget
         * ends with it (every answered token is in the cache for the next turn) */
        ox_token t = next[n_next - 1];
        bool budget = !done && s->n_predict >= 0 && stats->n_gen >= s->n_predict;
        if (done)
            break;
        if (s->n_kv + 1 >= n_ctx) {
            stats->context_full = true;
            break;
        }
        if (budget) {
            struct ox_batch b = {.n_tokens = 1, .token = &t};
            if ((st = ox_decode(s->ctx, &b)) == OX_OK)
                keep_token(s, v, t);
            break;
        }
        /* a step decodes t and at most max - 1 drafted tokens: the cache keeps a cell free */
        int max = (int)(n_ctx - 1 - s->n_kv);
        if (s->n_predict >= 0 && s->n_predict - stats->n_gen < max)
            max = s->n_predict - stats->n_gen;
        if ((st = gen_step(s->ctx, s->sampler, s->spec, t, next, max, &n_next)) != OX_OK)
            break;
        keep_token(s, v, t);
    }
    ox_kv_seq_rm(s->ctx, 0, (int32_t)s->n_kv, -1);
    const char *rest;
    size_t len;
    if (ox_detok_stream_flush(stream, &rest, &len) == OX_OK)
        stop_filter_push(&stops, rest, len, a->mem);
    stop_filter_finish(&stops, a->mem);
    echo(a);
    ox_detok_stream_free(stream);
    return st;
}

enum ox_status chat_session_answer(struct chat_session *s, FILE *out,
                                   volatile sig_atomic_t *interrupt, struct chat_stats *stats) {
    *stats = (struct chat_stats){0};
    uint32_t n_ctx = ox_context_n_ctx(s->ctx);
    if (!reserve((void **)&s->kv, &s->cap_kv, n_ctx, sizeof *s->kv))
        return OX_ERR_OOM;
    ox_token *toks = NULL;
    size_t n = 0;
    double t0 = cmd_now_s();
    enum ox_status st = prepare(s, &toks, &n, stats);
    int32_t last = 0;
    stats->n_reused = s->n_kv;
    if (st == OX_OK) {
        /* a fresh answer: grammar and seed restart; the penalties' history is the whole
         * conversation, as run's is its whole prompt */
        ox_sampler_reset(s->sampler);
        for (size_t i = 0; i < s->n_kv && st == OX_OK; i++)
            st = ox_sampler_accept_prompt(s->sampler, s->kv[i]);
        for (size_t i = 0; i < n && st == OX_OK; i++)
            st = ox_sampler_accept_prompt(s->sampler, toks[i]);
    }
    if (st == OX_OK)
        st = decode_prompt(s, toks, n, interrupt, &last);
    if (st == OX_OK && s->spec) /* lookup searches the whole conversation */
        st = ox_spec_begin(s->spec, s->kv, s->n_kv);
    free(toks);
    stats->n_prompt = s->n_kv - stats->n_reused;
    stats->t_prompt = cmd_now_s() - t0;
    if (st != OX_OK) { /* nothing answered: the question is taken back */
        s->kv_text_valid = false;
        free_messages(s, s->n_msgs - 1);
        stats->interrupted = st == OX_ERR_ABORTED;
        return st == OX_ERR_ABORTED ? OX_OK : st;
    }
    struct answer_echo a = {.out = out};
    if (!(a.mem = open_memstream(&a.buf, &a.len)))
        return OX_ERR_OOM;
    double t1 = cmd_now_s();
    st = generate(s, ox_get_logits(s->ctx, last), &a, interrupt, stats);
    stats->t_gen = cmd_now_s() - t1;
    fclose(a.mem);
    enum ox_status added = chat_session_add(s, "assistant", a.buf ? a.buf : "");
    free(a.buf);
    return st != OX_OK ? st : added;
}

/* FILE.kv: the state of sequence 0 beside the conversation's JSON; FILE.kvtext: the text its
 * tokens spell (kv_text), so the next answer finds the new part by text as in one session. */
static void state_path(const char *path, const char *ext, char *out, size_t cap) {
    snprintf(out, cap, "%s.%s", path, ext);
}

enum ox_status chat_session_save_state(struct chat_session *s, const char *path) {
    char kv[4200], text[4200];
    state_path(path, "kv", kv, sizeof kv), state_path(path, "kvtext", text, sizeof text);
    if (!chat_file_save(path, s->msgs, s->n_msgs))
        return OX_ERR_IO;
    remove(text);
    FILE *f = s->kv_text_valid ? fopen(text, "wb") : NULL;
    if (f) {
        bool ok = fwrite(s->kv_text, 1, s->n_kv_text, f) == s->n_kv_text;
        if (fclose(f) != 0 || !ok)
            remove(text); /* without it the next answer compares tokens: slower, as right */
    }
    return ox_state_seq_save_file(s->ctx, 0, kv, s->kv, s->n_kv);
}

/* kv_text from FILE.kvtext, when there is one. */
static void load_kv_text(struct chat_session *s, const char *path) {
    FILE *f = fopen(path, "rb");
    long len = f && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    s->n_kv_text = 0;
    s->kv_text_valid = len >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
                       reserve((void **)&s->kv_text, &s->cap_kv_text, (size_t)len + 1, 1) &&
                       fread(s->kv_text, 1, (size_t)len, f) == (size_t)len;
    if (s->kv_text_valid)
        s->kv_text[s->n_kv_text = (size_t)len] = '\0';
    if (f)
        fclose(f);
}

enum ox_status chat_session_load_state(struct chat_session *s, const char *path, size_t *n_kv) {
    char kv[4200], text[4200];
    state_path(path, "kv", kv, sizeof kv), state_path(path, "kvtext", text, sizeof text);
    size_t n = 0, cap = ox_context_n_ctx(s->ctx);
    struct ox_chat_message *msgs = chat_file_load(path, &n);
    if (!msgs)
        return OX_ERR_IO;
    enum ox_status st = chat_session_replace(s, msgs, n);
    chat_file_free(msgs, n);
    if (st == OX_OK && !reserve((void **)&s->kv, &s->cap_kv, cap, sizeof *s->kv))
        st = OX_ERR_OOM;
    if (st == OX_OK)
        st = ox_state_seq_load_file(s->ctx, 0, kv, s->kv, cap, &n);
    if (st != OX_OK) { /* the messages stay; the next answer reads them from scratch */
        ox_kv_seq_rm(s->ctx, 0, -1, -1);
        s->n_kv = 0;
        return st;
    }
    s->n_kv = n;
    load_kv_text(s, text);
    if (n_kv)
        *n_kv = n;
    return OX_OK;
}
