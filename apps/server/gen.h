/* gen.h: one generation of `oxidize serve`: the engine's callbacks that turn its tokens into
 * text (stop strings, logprobs, a deadline, a client that left), and the answer in the shape
 * of the API asked: one JSON body, or Server-Sent Events as the tokens come. */
#ifndef OX_APPS_SERVER_GEN_H
#define OX_APPS_SERVER_GEN_H

#include <stdbool.h>
#include <stdint.h>

#include "common/stop_filter.h"
#include "oxidize.h"
#include "reply.h"

enum gen_api {
    API_COMPLETION,      /* OpenAI's /v1/completions */
    API_CHAT,            /* OpenAI's /v1/chat/completions */
    API_NATIVE,          /* llama.cpp's /completion */
    API_OLLAMA_GENERATE, /* Ollama's /api/generate: NDJSON lines, the tokens as its context */
    API_OLLAMA_CHAT,     /* Ollama's /api/chat */
};

/* Whether answers go in Ollama's shapes (answer_ollama.c). */
#define GEN_OLLAMA(api) ((api) == API_OLLAMA_GENERATE || (api) == API_OLLAMA_CHAT)

#define GEN_TOP_MAX 20 /* alternatives per token that logprobs report at most */

struct gen_opts {
    enum gen_api api;
    bool stream, include_usage;
    int32_t max_tokens; /* < 0: until the slot's context is full */
    bool logprobs;
    int32_t top_logprobs; /* 0..GEN_TOP_MAX */
    char *stop[STOP_MAX]; /* owned */
    int n_stop;
    char *echo;        /* completions' echo: the prompt's text, which the answer starts with */
    int tool_family;   /* tool_calls.h's family when the request offers tools; -1: none */
    bool fresh;        /* reuse no cached prompt prefix (native cache_prompt: false) */
    double timeout;    /* seconds the generation may take */
    int32_t n_keep;    /* tokens of the prompt a context shift (serve --context-shift) keeps (< 0:
                          all) */
    int32_t draft_max; /* speculative decoding ("speculative.n_max"): 0 the server's, < 0 none */
    bool has_lora;     /* the request's own LoRA adapters (its "lora" field): */
    struct ox_lora_use lora[8];
    int32_t n_lora;
};

struct gen;
struct state;
struct MHD_Connection;
struct MHD_Response;

/* A generation for n_prompt tokens (the tokens go to gen_start), taking opts' strings and the
 * sampler; NULL when out of memory (both freed then). */
struct gen *gen_create(struct state *s, struct gen_opts *opts, struct ox_sampler *sampler,
                       int32_t n_prompt);
/* Drop the HTTP side's reference. */
void gen_release(struct gen *g);
/* One more reference (the request log's, until the connection closes); gen_release drops it. */
void gen_retain(struct gen *g);
/* Its prompt's tokens and the tokens generated so far. */
void gen_tokens(struct gen *g, int32_t *prompt, int32_t *generated);

/* Submit it for the connection. A whole answer suspends the connection until it is done (the
 * request's handler then calls gen_reply); a stream's events are read through gen_response.
 * Fails with state_submit's refusal (OX_ERR_ABORTED: shutting down; OX_ERR_CONTEXT_FULL: the
 * queue is full) or the engine's. */
enum ox_status gen_start(struct gen *g, struct MHD_Connection *c, const ox_token *prompt);
bool gen_streams(const struct gen *g);
/* The whole answer, once done. */
struct reply gen_reply(struct gen *g);
/* The response that streams the events (takes a reference), or NULL when out of memory. */
struct MHD_Response *gen_response(struct gen *g);

#endif
