/* gen.c: a generation's life: created by a route, submitted to the engine, fed tokens on the
 * worker thread (text through the stop strings, logprobs, the deadline, a client that left),
 * and answered through a connection that sleeps (suspended) until there is something to send:
 * no HTTP thread waits on a generation. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "gen_int.h"
#include "params.h"
#include "state.h"

/* The request's id for the answers ("cmpl-...", "chatcmpl-..."). */
static void gen_new_id(char *out, size_t cap, const char *prefix) {
    static unsigned long counter;
    unsigned long n = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    snprintf(out, cap, "%s-%lx%lx", prefix, (unsigned long)time(NULL), n);
}

struct gen *gen_create(struct state *s, struct gen_opts *opts, struct ox_sampler *sampler,
                       int32_t n_prompt) {
    struct gen *g = calloc(1, sizeof *g);
    if (g)
        g->mem = open_memstream(&g->text, &g->text_len);
    if (!g || !g->mem ||
        ox_detok_stream_create(ox_model_vocab(state_model(s)), opts->tool_family >= 0, &g->detok) !=
            OX_OK) { /* tool calls' markers may be tokens */
        if (g && g->mem)
            fclose(g->mem);
        if (g)
            free(g->text);
        free(g), params_free(opts), ox_sampler_free(sampler);
        return NULL;
    }
    g->s = s, g->o = *opts, g->sampler = sampler, g->n_prompt = n_prompt, g->refs = 1;
    g->vocab = ox_model_vocab(state_model(s)), g->fd = -1;
    g->stops.n_stop = opts->n_stop;
    for (int i = 0; i < opts->n_stop; i++)
        g->stops.stop[i] = g->o.stop[i];
    gen_new_id(g->id, sizeof g->id, opts->api == API_CHAT ? "chatcmpl" : "cmpl");
    g->created = (long long)time(NULL);
    pthread_mutex_init(&g->lock, NULL);
    return g;
}

void gen_retain(struct gen *g) {
    pthread_mutex_lock(&g->lock);
    g->refs++;
    pthread_mutex_unlock(&g->lock);
}

void gen_tokens(struct gen *g, int32_t *prompt, int32_t *generated) {
    pthread_mutex_lock(&g->lock);
    *prompt = g->n_prompt, *generated = g->n_out;
    pthread_mutex_unlock(&g->lock);
}

void gen_release(struct gen *g) {
    if (!g)
        return;
    pthread_mutex_lock(&g->lock);
    bool last = --g->refs == 0;
    pthread_mutex_unlock(&g->lock);
    if (!last)
        return;
    if (g->mem)
        fclose(g->mem);
    free(g->text), free(g->lp), free(g->ev), free(g->stops.held), free(g->toks);
    ox_detok_stream_free(g->detok), ox_sampler_free(g->sampler);
    params_free(&g->o);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

/* Under the lock: wake the connection if it sleeps. */
static void wake(struct gen *g) {
    if (g->suspended && g->conn) {
        g->suspended = false;
        MHD_resume_connection(g->conn);
    }
}

/* The answer's pieces in the shape of the request's API (answer.c, answer_ollama.c). */
static void answer_piece(struct gen *g, const char *text, size_t from, size_t to) {
    if (GEN_OLLAMA(g->o.api))
        answer_ollama_chunk(g, text);
    else
        answer_chunk(g, text, from, to);
}

static void answer_end(struct gen *g) {
    if (GEN_OLLAMA(g->o.api))
        answer_ollama_stream_end(g);
    else
        answer_stream_end(g);
}

/* ---- the engine's callbacks (the worker thread, or with a GPU the engine's own) ---- */

/* The token's log-probability and its best alternatives, from the raw logits. */
static void on_logits(void *user, const float *logits, int32_t n_vocab, ox_token token) {
    struct gen *g = user; /* set only for requests asking for logprobs (gen_start) */
    if (g->n_lp == g->cap_lp) {
        size_t cap = g->cap_lp ? 2 * g->cap_lp : 64;
        struct logprob *grown = realloc(g->lp, cap * sizeof *grown);
        if (!grown)
            return;
        g->lp = grown, g->cap_lp = cap;
    }
    float max = logits[0];
    for (int32_t i = 1; i < n_vocab; i++)
        max = logits[i] > max ? logits[i] : max;
    double sum = 0;
    for (int32_t i = 0; i < n_vocab; i++)
        sum += exp((double)(logits[i] - max));
    float lse = max + (float)log(sum);
    struct logprob *e = &g->lp[g->n_lp];
    e->token = token, e->logprob = logits[token] - lse, e->n_top = 0;
    int k = g->o.top_logprobs;
    for (int32_t i = 0; i < n_vocab && k > 0; i++) { /* insertion into the k best so far */
        float lp = logits[i] - lse;
        if (e->n_top == k && lp <= e->top_logprob[k - 1])
            continue;
        int at = e->n_top < k ? e->n_top++ : k - 1;
        while (at > 0 && e->top_logprob[at - 1] < lp) {
            e->top[at] = e->top[at - 1], e->top_logprob[at] = e->top_logprob[at - 1];
            at--;
        }
        e->top[at] = i, e->top_logprob[at] = lp;
    }
    pthread_mutex_lock(&g->lock);
    g->n_lp++;
    pthread_mutex_unlock(&g->lock);
}

/* Whether the client of a whole answer hung up: its socket reads end-of-file (which a client
 * that only shut down its sending side looks like too, as in llama.cpp's check). */
static bool client_left(const struct gen *g) {
    char c;
    return g->fd >= 0 && recv(g->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* Text from the detokenizer through the stop strings; the new text is streamed unless tool
 * calls are parsed at the end. Under the lock. */
static void add_text(struct gen *g, const char *piece, size_t len) {
    if (g->end == END_WORD)
        return;
    if (stop_filter_push(&g->stops, piece, len, g->mem))
        g->end = END_WORD;
    fflush(g->mem);
}

/* Stream the text and logprobs not yet sent (under the lock). */
static void stream_new(struct gen *g) {
    if (!g->o.stream || g->o.tool_family >= 0 || g->gone)
        return;
    size_t n = g->text_len - g->text_streamed;
    if (n == 0 && g->lp_streamed == g->n_lp)
        return;
    char *text = reply_valid_utf8(g->text + g->text_streamed, n);
    if (!text)
        return;
    answer_piece(g, text, g->lp_streamed, g->n_lp);
    g->text_streamed = g->text_len, g->lp_streamed = g->n_lp;
    free(text);
    wake(g);
}

/* A token of Ollama's context (under the lock; lost when out of memory). */
static void keep_token(struct gen *g, ox_token t) {
    if (g->n_toks == g->cap_toks) {
        size_t cap = g->cap_toks ? 2 * g->cap_toks : 256;
        ox_token *grown = realloc(g->toks, cap * sizeof *grown);
        if (!grown)
            return;
        g->toks = grown, g->cap_toks = cap;
    }
    g->toks[g->n_toks++] = t;
}

static bool on_token(void *user, ox_token t) {
    struct gen *g = user;
    const char *piece = NULL;
    size_t n = 0;
    if (ox_detok_stream_push(g->detok, t, &piece, &n) != OX_OK)
        n = 0;
    pthread_mutex_lock(&g->lock);
    g->n_out++;
    if (g->o.api == API_OLLAMA_GENERATE)
        keep_token(g, t);
    if (g->n_out == 1)
        g->t_first = state_clock();
    add_text(g, piece, n);
    stream_new(g);
    if (g->end == END_NONE && state_clock() - g->t_start > g->o.timeout)
        g->end = END_TIMEOUT;
    bool go_on = g->end == END_NONE && !g->gone;
    pthread_mutex_unlock(&g->lock);
    /* a sleeping connection does not notice its client leave; a stream does when a send fails,
     * unless it holds its text back (tool calls) */
    bool sends = g->o.stream && g->o.tool_family < 0;
    if (go_on && !sends && g->n_out % 8 == 0 && client_left(g))
        go_on = false;
    return go_on;
}

static void on_done(void *user, enum ox_finish reason, int32_t n_generated) {
    struct gen *g = user;
    (void)n_generated;
    const char *piece = NULL;
    size_t n = 0;
    if (ox_detok_stream_flush(g->detok, &piece, &n) != OX_OK)
        n = 0;
    pthread_mutex_lock(&g->lock);
    add_text(g, piece, n);
    stop_filter_finish(&g->stops, g->mem);
    fflush(g->mem);
    if (g->end == END_NONE)
        g->end = reason == OX_FINISH_STOP     ? END_EOS
                 : reason == OX_FINISH_LENGTH ? END_LENGTH
                 : reason == OX_FINISH_ERROR  ? END_ERROR
                                              : END_CANCELLED;
    g->stop_word = g->end == END_WORD ? g->stops.matched : NULL;
    g->t_end = state_clock();
    if (g->t_first == 0)
        g->t_first = g->t_end;
    if (g->o.stream && !g->gone) {
        stream_new(g);
        answer_end(g);
    }
    g->done = true;
    wake(g);
    pthread_mutex_unlock(&g->lock);
    state_generation_done(g->s);
    gen_release(g); /* the engine's reference */
}

/* ---- the HTTP side ---- */

enum ox_status gen_start(struct gen *g, struct MHD_Connection *c, const ox_token *prompt) {
    struct ox_request r = {.prompt = prompt,
                           .n_prompt = g->n_prompt,
                           .max_tokens = g->o.max_tokens,
                           .sampler = g->sampler,
                           .on_token = on_token,
                           .on_done = on_done,
                           .user = g,
                           /* only when asked: a request without it may be called back
                            * beside the steps (callbacks_aside) */
                           .on_logits = g->o.logprobs ? on_logits : NULL,
                           .fresh = g->o.fresh,
                           .context_shift = state_options(g->s)->context_shift,
                           .n_keep = g->o.n_keep,
                           .draft_max = g->o.draft_max,
                           .lora = g->o.has_lora ? g->o.lora : NULL,
                           .n_lora = g->o.n_lora};
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    pthread_mutex_lock(&g->lock);
    g->conn = c, g->fd = info ? info->connect_fd : -1, g->t_start = state_clock();
    g->refs++; /* the engine's, from here to on_done */
    for (int32_t i = 0; g->o.api == API_OLLAMA_GENERATE && i < g->n_prompt; i++)
        keep_token(g, prompt[i]);
    if (g->o.stream && !GEN_OLLAMA(g->o.api))
        answer_stream_begin(g);
    enum ox_status st = state_submit(g->s, &r);
    if (st != OX_OK) {
        g->refs--;
    } else if (!g->o.stream) {
        /* asleep before on_done (which takes the lock) can wake it; the handler is called
         * again then */
        g->suspended = true;
        MHD_suspend_connection(c);
    }
    pthread_mutex_unlock(&g->lock);
    return st;
}

bool gen_streams(const struct gen *g) {
    return g->o.stream;
}

struct reply gen_reply(struct gen *g) {
    pthread_mutex_lock(&g->lock);
    struct reply r = GEN_OLLAMA(g->o.api) ? answer_ollama_whole(g) : answer_whole(g);
    pthread_mutex_unlock(&g->lock);
    return r;
}

/* libmicrohttpd asks for the next bytes of a stream: none yet puts the connection to sleep
 * until the worker has more. */
static ssize_t read_events(void *cls, uint64_t pos, char *out, size_t max) {
    struct gen *g = cls;
    (void)pos;
    pthread_mutex_lock(&g->lock);
    size_t n = g->ev_len - g->ev_sent < max ? g->ev_len - g->ev_sent : max;
    if (n)
        memcpy(out, g->ev + g->ev_sent, n);
    g->ev_sent += n;
    if (g->ev_sent == g->ev_len)
        g->ev_len = g->ev_sent = 0;
    bool end = n == 0 && g->done;
    if (n == 0 && !g->done && !g->suspended) {
        g->suspended = true;
        MHD_suspend_connection(g->conn);
    }
    pthread_mutex_unlock(&g->lock);
    return end ? MHD_CONTENT_READER_END_OF_STREAM : (ssize_t)n;
}

/* The stream's response is finished with (all sent, or the client left). */
static void response_freed(void *cls) {
    struct gen *g = cls;
    pthread_mutex_lock(&g->lock);
    g->gone = true, g->conn = NULL;
    pthread_mutex_unlock(&g->lock);
    gen_release(g);
}

struct MHD_Response *gen_response(struct gen *g) {
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, read_events, g, response_freed);
    if (!r)
        return NULL;
    pthread_mutex_lock(&g->lock);
    g->refs++;
    pthread_mutex_unlock(&g->lock);
    MHD_add_response_header(r, "Content-Type",
                            GEN_OLLAMA(g->o.api) ? "application/x-ndjson" : "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    return r;
}
