/* server_int.h: what the routes and generations ask of the running server: its model and
 * settings, the engine's queue and counters, the embeddings context (server.c implements it). */
#ifndef OX_APPS_SERVER_SERVER_INT_H
#define OX_APPS_SERVER_SERVER_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "oxidize.h"
#include "server.h"

struct server;

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

/* The chat template requests are rendered with: --chat-template's text, else the model's (NULL
 * when it has none). */
const char *server_chat_template(const struct server *s);

#endif
