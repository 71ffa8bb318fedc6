/* gen_int.h: the state of a generation, shared by gen.c (its life and the engine's callbacks)
 * and answer.c (the JSON it is answered with, and its events). answer.c is the lower of the two:
 * gen.c calls it, and it calls nothing of gen.c's. */
#ifndef OX_APPS_SERVER_GEN_INT_H
#define OX_APPS_SERVER_GEN_INT_H

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>

#include "gen.h"

/* One generated token's log-probability and its best alternatives. */
struct logprob {
    ox_token token;
    float logprob;
    int n_top;
    ox_token top[GEN_TOP_MAX];
    float top_logprob[GEN_TOP_MAX];
};

enum gen_end {
    END_NONE,      /* still running */
    END_EOS,       /* an end-of-generation token */
    END_WORD,      /* a stop string */
    END_LENGTH,    /* max_tokens or the slot's context */
    END_CANCELLED, /* the client left, or the server stopped it */
    END_ERROR,
    END_TIMEOUT,
};

struct gen {
    struct state *s;
    struct gen_opts o;
    struct ox_sampler *sampler;
    const struct ox_vocab *vocab;
    pthread_mutex_t lock; /* everything below that both sides touch */
    int refs;             /* the HTTP side, the engine while it runs, a streamed response */
    struct MHD_Connection *conn;
    int fd;         /* the connection's socket: a whole answer's generation peeks at it */
    bool suspended; /* the connection waits for gen_wake */
    bool done;      /* on_done ran */
    bool gone;      /* the streamed response is finished with (sent or dropped) */
    /* the worker's side */
    struct ox_detok_stream *detok;
    struct stop_filter stops;
    FILE *mem; /* the text let through the stop strings, into text/text_len */
    char *text;
    size_t text_len, text_streamed; /* bytes of text already sent as events */
    int32_t n_prompt, n_out;
    struct logprob *lp;
    size_t n_lp, cap_lp, lp_streamed;
    enum gen_end end;
    const char *stop_word;
    double t_start, t_first, t_end;
    char id[64];
    long long created;
    /* Ollama's /api/generate: the prompt's tokens, then those generated (its "context") */
    ox_token *toks;
    size_t n_toks, cap_toks;
    /* events not yet read by the connection: [ev_sent, ev_len) */
    char *ev;
    size_t ev_len, ev_sent, ev_cap;
};

/* answer.c: the shapes of the answers. */
struct tool_calls;
/* The calls a chat's text makes (the request offered tools and the text has some), into *tc
 * (tool_calls_free it); false with *tc empty otherwise. */
bool answer_tool_calls(const struct gen *g, struct tool_calls *tc);
/* Bytes for the connection to send (under the lock); read_events (gen.c) sends them. */
void answer_append(struct gen *g, const char *bytes, size_t n);
/* A streamed piece of text (valid UTF-8) with the logprobs of lp[from, to). */
void answer_chunk(struct gen *g, const char *text, size_t from, size_t to);
/* The first events of a stream (a chat's role, an echoed prompt). */
void answer_stream_begin(struct gen *g);
/* The events that end a stream (after the last piece). */
void answer_stream_end(struct gen *g);
/* The whole answer. */
struct reply answer_whole(struct gen *g);

/* answer_ollama.c: the same in Ollama's shapes (NDJSON lines when streamed; no first events),
 * which gen.c calls instead for Ollama's APIs. */
void answer_ollama_chunk(struct gen *g, const char *text);
void answer_ollama_stream_end(struct gen *g);
struct reply answer_ollama_whole(struct gen *g);

#endif
