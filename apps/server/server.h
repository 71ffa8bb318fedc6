/* server.h: `oxidize serve`: an HTTP server (libmicrohttpd) in front of an ox_engine. */
#ifndef OX_APPS_SERVER_H
#define OX_APPS_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oxidize.h"

#define SERVER_MAX_KEYS 64

struct server_opts {
    const char *model_path;
    const char *host; /* "127.0.0.1" unless asked */
    int port;
    int n_parallel, n_ctx, n_batch, n_ubatch, n_threads, n_gpu_layers;
    enum ox_dtype kv_type;     /* the KV cache's: f16 (default), f32 or q8_0 */
    const char *chat_template; /* template text for chat completions, or NULL: the model's */
    const char *api_keys[SERVER_MAX_KEYS]; /* every route but /health wants one of these */
    int n_api_keys;
    size_t max_body;         /* request bodies past this get 413 */
    int queue_size;          /* requests waiting for a slot past this get 429 */
    double timeout;          /* seconds a request may take (and a connection may idle) */
    double shutdown_timeout; /* seconds in-flight requests get to finish at SIGINT/SIGTERM */
    int http_threads;
    bool embeddings;         /* a context for /v1/embeddings */
    enum ox_pooling pooling; /* how its hidden states are pooled */
};

/* Serve until SIGINT or SIGTERM; returns the process exit status (messages on stderr). */
int server_run(const struct server_opts *o);

/* ---- between the HTTP layer (server.c), the routes and the generations ---- */

struct server;
struct gen;
struct MHD_Connection;
struct MHD_Response;

/* A reply: status and a body, or a generation to start (its answer comes later). */
struct reply {
    unsigned status;
    char *body;               /* malloc'd */
    const char *content_type; /* NULL: application/json */
    struct gen *gen;          /* with its prompt (malloc'd) */
    ox_token *prompt;
    unsigned retry_after; /* seconds, sent with a 429 or 503 */
};

/* An error in OpenAI's shape; param may be NULL. */
struct reply reply_error(unsigned status, const char *type, const char *param, const char *msg);

/* The route's answer to a request (method, path, body of len bytes). */
struct reply route_request(struct server *s, const char *method, const char *path, const char *body,
                           size_t len);

const struct ox_model *server_model(const struct server *s);
const char *server_model_id(const struct server *s);
const struct server_opts *server_options(const struct server *s);
int32_t server_slot_ctx(const struct server *s);
double server_timeout(const struct server *s);
/* The engine's counters and slots (n_parallel entries, or NULL), and the server's. */
struct server_counters {
    uint64_t requests, errors, rejected; /* rejected: 429 and 503 */
};
void server_stats(struct server *s, struct ox_engine_stats *st, struct ox_engine_slot *slots,
                  struct server_counters *c);

/* The embeddings context, held until server_embed_end; NULL when the server makes none, or
 * (*busy) while another request holds it: one at a time, and an HTTP thread never waits for
 * it. */
struct ox_context *server_embed_begin(struct server *s, bool *busy);
void server_embed_end(struct server *s);
enum ox_pooling server_pooling(const struct server *s);

/* Hand a request to the engine: OX_OK, OX_ERR_ABORTED (shutting down), OX_ERR_CONTEXT_FULL
 * (the queue is full), or the engine's refusal. */
enum ox_status server_submit(struct server *s, const struct ox_request *r);
/* A submitted request has ended (called once each, from its on_done). */
void server_generation_done(struct server *s);

/* text with every invalid UTF-8 sequence replaced by U+FFFD, NUL-terminated (malloc'd), or
 * NULL when out of memory (routes.c). */
char *server_valid_utf8(const char *text, size_t len);
/* The chat template requests are rendered with: --chat-template's text, else the model's (NULL
 * when it has none). */
const char *server_chat_template(const struct server *s);

#endif
