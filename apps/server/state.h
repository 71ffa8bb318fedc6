/* state.h: what every part of `oxidize serve` shares: the model and its settings, the engine's
 * queue and counters, the embeddings context (state.c); the server's calls end here.
 *
 * Why a module of its own: the routes and the generations need the model and the engine, and
 * server.c (the HTTP side) needs the routes. With the shared state below both, every call goes
 * one way, down: server.c -> routes.c -> the routes' files and gen.c -> state.c and reply.c.
 * server.c makes the state and drives its life (the first block below); the rest is what the
 * routes and generations ask of it. It includes no server header but server.h, for the
 * options' type. */
#ifndef OX_APPS_SERVER_STATE_H
#define OX_APPS_SERVER_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "oxidize.h"
#include "server.h"

struct state;

/* ---- its life (server.c) ---- */

/* A state with nothing loaded yet (made before the daemon listens, whose requests meanwhile
 * get 503 "Loading model"); it borrows o. NULL when out of memory. */
struct state *state_create(const struct server_opts *o);
/* Load the model (with its engine, or an encoder's context) and start the worker thread that
 * steps the engine; ready from then. False with ox_last_error() saying why. */
bool state_start(struct state *s);
bool state_ready(struct state *s);
/* After state_start, at SIGINT/SIGTERM: refuse new generations (503), let those in flight
 * finish for --shutdown-timeout seconds, cancel the rest, give open requests a moment to
 * complete, and join the worker. */
void state_stop(struct state *s);
/* Whether state_stop has begun (the server turns new connections away from then). */
bool state_stopping(struct state *s);
void state_free(struct state *s);

/* The HTTP side's counts: a reply sent with this status; a request libmicrohttpd began and
 * completed (the shutdown waits for those open). */
void state_count_reply(struct state *s, unsigned status);
void state_request_opened(struct state *s);
void state_request_closed(struct state *s);

/* ---- what the routes and generations read ---- */

const struct ox_model *state_model(const struct state *s);
const char *state_model_id(const struct state *s);
const struct server_opts *state_options(const struct state *s);
int32_t state_slot_ctx(const struct state *s);
double state_timeout(const struct state *s);
/* Seconds on the monotonic clock (generations' deadlines, the request log's times). */
double state_clock(void);
/* The engine's counters and slots (n_parallel entries, or NULL), and the server's. */
struct state_counters {
    uint64_t requests, errors, rejected; /* rejected: 429 and 503 */
};
void state_stats(struct state *s, struct ox_engine_stats *st, struct ox_engine_slot *slots,
                 struct state_counters *c);

/* The embeddings context, held until state_embed_end; NULL when the server makes none, or
 * (*busy) while another request holds it: one at a time, and an HTTP thread never waits for
 * it. */
struct ox_context *state_embed_begin(struct state *s, bool *busy);
void state_embed_end(struct state *s);
enum ox_pooling state_pooling(const struct state *s);

/* A slot's saved state (action 's'ave, 'r'estore, 'e'rase; path: the file), between two of
 * the engine's steps; *n_tokens as ox_engine_slot_*. OX_ERR_UNSUPPORTED: the server has no
 * engine (an embeddings model). */
enum ox_status state_slot(struct state *s, char action, int32_t slot, const char *path,
                          size_t *n_tokens);

/* --lora's adapters: how many; adapter i's file and scale now; adapter i; new scales for all
 * of them (count values; 0 takes one off) for the requests submitted from now on that do not
 * name their own (ox_engine_set_lora). */
int state_lora_count(const struct state *s);
const char *state_lora_info(struct state *s, int i, float *scale);
struct ox_lora *state_lora(struct state *s, int i);
enum ox_status state_lora_set(struct state *s, const float *scales);

/* Hand a request to the engine: OX_OK, OX_ERR_ABORTED (shutting down), OX_ERR_CONTEXT_FULL
 * (the queue is full), or the engine's refusal. */
enum ox_status state_submit(struct state *s, const struct ox_request *r);
/* A submitted request has ended (called once each, from its on_done). */
void state_generation_done(struct state *s);

/* The chat template requests are rendered with: --chat-template's text, else the model's (NULL
 * when it has none). */
const char *state_chat_template(const struct state *s);

#endif
