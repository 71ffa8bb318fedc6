/* server.h: `oxidize serve`: an HTTP server (libmicrohttpd) in front of an ox_engine; the
 * server's one public header (its options and server_run), for the command that starts it. */
#ifndef OX_APPS_SERVER_H
#define OX_APPS_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "oxidize.h"

#define SERVER_MAX_KEYS 64

struct server_opts {
    const char *model_path;
    const char *host; /* "127.0.0.1" unless asked */
    int port;
    int n_parallel, n_ctx, n_batch, n_ubatch, n_threads, n_gpu_layers;
    struct ox_model_params placement; /* the model's split over GPUs (-sm, -ts, -mg) */
    enum ox_dtype kv_type;     /* the KV cache's: f16 (default), f32 or q8_0 */
    const char *chat_template; /* template text for chat completions, or NULL: the model's */
    const char *api_keys[SERVER_MAX_KEYS]; /* every route but /health wants one of these */
    int n_api_keys;
    size_t max_body;         /* request bodies past this get 413 */
    int queue_size;          /* requests waiting for a slot past this get 429 */
    double timeout;          /* seconds a request may take (and a connection may idle) */
    double shutdown_timeout; /* seconds in-flight requests get to finish at SIGINT/SIGTERM */
    int http_threads;
    bool embeddings;            /* a context for /v1/embeddings */
    bool log_requests;          /* a line on stderr per request (time, method, path, status,
                                   tokens, ms) */
    enum ox_pooling pooling;    /* how its hidden states are pooled */
    const char *slot_save_path; /* POST /slots/N?action=save|restore files live here, or NULL */
    bool context_shift;     /* a generation that fills its slot's context shifts it (drops half of
                               what follows the request's n_keep tokens) rather than ending there */
    bool spec;              /* --spec ngram: prompt lookup drafts in every slot, */
    const char *draft_path; /* or -md: a draft model's (its layers on the GPU: */
    int draft_gpu_layers;   /* -ngld), */
    struct ox_spec_params spec_p; /* with --draft-max, --draft-min, --draft-p-min,
                                     --spec-ngram-min/max */
    const char *lora_path[8];     /* LoRA adapters (--lora, --lora-scaled), applied at these */
    float lora_scale[8];          /* scales until POST /lora-adapters sets others */
    int n_lora;
};

/* Serve until SIGINT or SIGTERM; returns the process exit status (messages on stderr). */
int server_run(const struct server_opts *o);

#endif
