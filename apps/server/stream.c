/* stream.c: a completion sent as it is generated, as Server-Sent Events in OpenAI's form
 * (`data: {chunk}` per piece of text, a last chunk with the finish reason, `data: [DONE]`). The
 * engine's worker writes the events; the connection's thread reads them out as they come. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/types.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server.h"

struct stream {
    pthread_mutex_t lock;
    pthread_cond_t more;
    char *buf; /* events not yet sent: [sent, len) */
    size_t len, sent, cap;
    bool done, gone; /* the request ended; the client went away */
    bool chat;       /* chat.completion.chunk events (a delta), else text_completion */
    int refs;        /* the response and the request each hold one */
    struct ox_sampler *sampler;
    struct ox_detok_stream *detok;
    char id[64], model[256];
    long long created;
};

static void stream_release(struct stream *st) {
    pthread_mutex_lock(&st->lock);
    bool last = --st->refs == 0;
    pthread_mutex_unlock(&st->lock);
    if (!last)
        return;
    ox_sampler_free(st->sampler);
    ox_detok_stream_free(st->detok);
    pthread_mutex_destroy(&st->lock), pthread_cond_destroy(&st->more);
    free(st->buf);
    free(st);
}

/* Append one event (under the lock); out of memory ends the stream early. */
static void push_event(struct stream *st, const char *json) {
    size_t n = strlen(json) + 9; /* "data: " json "\n\n" and the NUL */
    if (st->len + n > st->cap) {
        size_t cap = 2 * (st->len + n);
        char *grown = realloc(st->buf, cap);
        if (!grown) {
            st->gone = true;
            return;
        }
        st->buf = grown, st->cap = cap;
    }
    st->len += (size_t)snprintf(st->buf + st->len, n, "data: %s\n\n", json);
}

/* One event: a piece of text (chat: the delta, empty at the end), and the finish reason last. */
static void push_chunk(struct stream *st, const char *text, const char *finish) {
    json_t *c;
    if (st->chat)
        c = json_pack("{s:s, s:s, s:I, s:s, s:[{s:i, s:o, s:n, s:s?}]}", "id", st->id, "object",
                      "chat.completion.chunk", "created", (json_int_t)st->created, "model",
                      st->model, "choices", "index", 0, "delta",
                      finish ? json_object() : json_pack("{s:s}", "content", text), "logprobs",
                      "finish_reason", finish);
    else
        c = json_pack("{s:s, s:s, s:I, s:s, s:[{s:s, s:i, s:n, s:s?}]}", "id", st->id, "object",
                      "text_completion", "created", (json_int_t)st->created, "model", st->model,
                      "choices", "text", text, "index", 0, "logprobs", "finish_reason", finish);
    char *json = c ? json_dumps(c, JSON_COMPACT) : NULL;
    json_decref(c);
    if (json)
        push_event(st, json);
    free(json);
}

static bool on_token(void *user, ox_token t) {
    struct stream *st = user;
    const char *piece = NULL;
    size_t n = 0;
    if (ox_detok_stream_push(st->detok, t, &piece, &n) != OX_OK)
        n = 0;
    char *text = n ? server_valid_utf8(piece, n) : NULL;
    pthread_mutex_lock(&st->lock);
    if (text)
        push_chunk(st, text, NULL);
    bool gone = st->gone;
    pthread_cond_signal(&st->more);
    pthread_mutex_unlock(&st->lock);
    free(text);
    return !gone; /* a client that left stops its generation */
}

static void on_done(void *user, enum ox_finish reason, int32_t n_generated) {
    struct stream *st = user;
    (void)n_generated;
    const char *piece = NULL;
    size_t n = 0;
    if (ox_detok_stream_flush(st->detok, &piece, &n) != OX_OK)
        n = 0;
    char *text = server_valid_utf8(n ? piece : "", n);
    pthread_mutex_lock(&st->lock);
    if (st->chat && text && *text) /* the held-back end of the text, then the closing delta */
        push_chunk(st, text, NULL);
    push_chunk(st, st->chat ? "" : text ? text : "", reason == OX_FINISH_STOP ? "stop" : "length");
    push_event(st, "[DONE]");
    st->done = true;
    pthread_cond_signal(&st->more);
    pthread_mutex_unlock(&st->lock);
    free(text);
    stream_release(st);
}

/* OpenAI's first chat chunk: the role, no content yet. */
static void push_event_role(struct stream *st) {
    json_t *c = json_pack("{s:s, s:s, s:I, s:s, s:[{s:i, s:{s:s, s:s}, s:n, s:n}]}", "id", st->id,
                          "object", "chat.completion.chunk", "created", (json_int_t)st->created,
                          "model", st->model, "choices", "index", 0, "delta", "role", "assistant",
                          "content", "", "logprobs", "finish_reason");
    char *json = c ? json_dumps(c, JSON_COMPACT) : NULL;
    json_decref(c);
    if (json)
        push_event(st, json);
    free(json);
}

/* libmicrohttpd asks for the next bytes of the body: wait until there are some. */
static ssize_t read_events(void *cls, uint64_t pos, char *out, size_t max) {
    struct stream *st = cls;
    (void)pos;
    pthread_mutex_lock(&st->lock);
    while (st->sent == st->len && !st->done)
        pthread_cond_wait(&st->more, &st->lock);
    size_t n = st->len - st->sent < max ? st->len - st->sent : max;
    memcpy(out, st->buf + st->sent, n);
    st->sent += n;
    bool end = n == 0 && st->done;
    pthread_mutex_unlock(&st->lock);
    return end ? MHD_CONTENT_READER_END_OF_STREAM : (ssize_t)n;
}

/* The response is gone (sent, or the client left). */
static void response_freed(void *cls) {
    struct stream *st = cls;
    pthread_mutex_lock(&st->lock);
    st->gone = true;
    pthread_mutex_unlock(&st->lock);
    stream_release(st);
}

struct MHD_Response *stream_start(struct server *s, const ox_token *prompt, int32_t n_prompt,
                                  int32_t max, struct ox_sampler *sampler, bool chat,
                                  enum ox_status *status) {
    struct stream *st = calloc(1, sizeof *st);
    *status = OX_ERR_OOM;
    if (!st ||
        ox_detok_stream_create(ox_model_vocab(server_model(s)), false, &st->detok) != OX_OK) {
        free(st);
        ox_sampler_free(sampler);
        return NULL;
    }
    static unsigned long counter;
    st->created = (long long)time(NULL);
    snprintf(st->id, sizeof st->id, "%s-%llx%lx", chat ? "chatcmpl" : "cmpl", st->created,
             ++counter);
    snprintf(st->model, sizeof st->model, "%s", server_model_id(s));
    st->sampler = sampler, st->refs = 2, st->chat = chat;
    pthread_mutex_init(&st->lock, NULL), pthread_cond_init(&st->more, NULL);
    if (chat) /* OpenAI's first chunk names the role (nothing else runs yet) */
        push_event_role(st);
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, read_events, st, response_freed);
    *status =
        r ? server_submit(s, prompt, n_prompt, max, sampler, on_token, on_done, st) : OX_ERR_OOM;
    if (*status != OX_OK) { /* the request never started: only the response holds it */
        st->refs--;
        if (r)
            MHD_destroy_response(r); /* releases the last reference */
        else
            stream_release(st);
        return NULL;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    return r;
}
