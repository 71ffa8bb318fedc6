/* server.h: `oxidize serve`: an HTTP server (libmicrohttpd) in front of an ox_engine. */
#ifndef OX_APPS_SERVER_H
#define OX_APPS_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oxidize.h"

struct server_opts {
    const char *model_path;
    const char *host; /* "127.0.0.1" unless asked */
    int port;
    int n_parallel, n_ctx, n_batch, n_threads, n_gpu_layers;
    const char *chat_template; /* template text for chat completions, or NULL: the model's */
    const char *api_key;       /* every route but /health wants "Authorization: Bearer KEY" */
    size_t max_body;           /* request bodies past this get 413 */
};

/* Serve until SIGINT or SIGTERM; returns the process exit status (messages on stderr). */
int server_run(const struct server_opts *o);

/* ---- between the HTTP layer and the routes (server.c, routes.c) ---- */

struct server;

struct MHD_Response;

/* A reply: status and a JSON body (owned, malloc'd), or a response streamed as it is made. */
struct reply {
    unsigned status;
    char *body;
    struct MHD_Response *stream;
};

/* The route's answer to a request (method, path, body of len bytes). */
struct reply route_request(struct server *s, const char *method, const char *path, const char *body,
                           size_t len);

/* What the routes need of the server: the model, and generation through the engine. */
const struct ox_model *server_model(const struct server *s);
const char *server_model_id(const struct server *s);
int32_t server_slot_ctx(const struct server *s);

/* Generate for a prompt on the engine and wait: *out gets the tokens (malloc'd, also on
 * failure), *reason how it ended. OX_ERR_ABORTED while the server shuts down; the engine's
 * refusal otherwise (ox_last_error() says why). */
enum ox_status server_generate(struct server *s, const ox_token *prompt, int32_t n_prompt,
                               int32_t max, struct ox_sampler *sampler, ox_token **out,
                               int32_t *n_out, enum ox_finish *reason);
/* The same without waiting: the callbacks (on the worker thread) see the tokens and the end. */
enum ox_status server_submit(struct server *s, const ox_token *prompt, int32_t n_prompt,
                             int32_t max, struct ox_sampler *sampler,
                             bool (*on_token)(void *, ox_token),
                             void (*on_done)(void *, enum ox_finish, int32_t), void *user);

/* text with every invalid UTF-8 sequence replaced by U+FFFD, NUL-terminated (malloc'd), or
 * NULL when out of memory (routes.c). */
char *server_valid_utf8(const char *text, size_t len);

/* A completion streamed as Server-Sent Events (stream.c): the response to queue, or NULL with
 * *status saying why. The stream takes the sampler (freed when done, also on failure). */
struct MHD_Response *stream_start(struct server *s, const ox_token *prompt, int32_t n_prompt,
                                  int32_t max, struct ox_sampler *sampler, bool chat,
                                  enum ox_status *status);
/* The chat template requests are rendered with: --chat-template's text, else the model's (NULL
 * when it has none). */
const char *server_chat_template(const struct server *s);

#endif
