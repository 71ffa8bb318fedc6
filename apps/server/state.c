/* state.c: the state every part of `oxidize serve` shares (state.h says why it is a module of
 * its own): the model, its engine stepped by a worker thread, the embeddings context, and the
 * counts the queue and the shutdown go by, under one lock. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "state.h"

struct state {
    const struct server_opts *o;
    struct ox_model *model;
    struct ox_engine *engine;
    char model_id[256];
    int32_t slot_ctx;
    struct ox_context *embed; /* serve --embeddings: used under embed_lock */
    pthread_mutex_t embed_lock;
    pthread_mutex_t step_lock; /* held by the worker for each engine step, and by a slot's save,
                                  restore or erase (state_slot) */
    pthread_t worker;
    pthread_mutex_t lock; /* everything below */
    pthread_cond_t wake;  /* the worker: a request arrived, or stop */
    pthread_cond_t quiet; /* the shutdown: a generation or a request ended */
    uint64_t submitted;   /* requests handed to the engine: the worker compares */
    int in_flight;        /* generations submitted and not yet done */
    int open_requests;    /* requests libmicrohttpd has not completed */
    bool ready, stopping;
    struct state_counters counters;
    struct ox_model *draft;  /* -md's draft model, or NULL */
    struct ox_lora *lora[8]; /* --lora's adapters, */
    float lora_scale[8];     /* at these scales (set under step_lock, read under lock) */
};

const struct ox_model *state_model(const struct state *s) {
    return s->model;
}

const char *state_model_id(const struct state *s) {
    return s->model_id;
}

const struct server_opts *state_options(const struct state *s) {
    return s->o;
}

int32_t state_slot_ctx(const struct state *s) {
    return s->slot_ctx;
}

double state_timeout(const struct state *s) {
    return s->o->timeout;
}

const char *state_chat_template(const struct state *s) {
    return s->o->chat_template ? s->o->chat_template : ox_model_chat_template(s->model, NULL);
}

struct ox_context *state_embed_begin(struct state *s, bool *busy) {
    *busy = s->embed && pthread_mutex_trylock(&s->embed_lock) != 0;
    return s->embed && !*busy ? s->embed : NULL;
}

void state_embed_end(struct state *s) {
    if (s->embed)
        pthread_mutex_unlock(&s->embed_lock);
}

enum ox_pooling state_pooling(const struct state *s) {
    if (s->o->pooling != OX_POOLING_NONE)
        return s->o->pooling;
    enum ox_pooling own = ox_model_pooling(s->model); /* the file's, else mean */
    return own != OX_POOLING_NONE ? own : OX_POOLING_MEAN;
}

void state_stats(struct state *s, struct ox_engine_stats *st, struct ox_engine_slot *slots,
                 struct state_counters *c) {
    if (!s->engine && st) /* an embedding model's server generates nothing */
        memset(st, 0, sizeof *st);
    if (!s->engine && slots)
        memset(slots, 0, (size_t)s->o->n_parallel * sizeof *slots);
    ox_engine_stats(s->engine, st, slots);
    if (c) {
        pthread_mutex_lock(&s->lock);
        *c = s->counters;
        pthread_mutex_unlock(&s->lock);
    }
}

enum ox_status state_submit(struct state *s, const struct ox_request *r) {
    pthread_mutex_lock(&s->lock);
    enum ox_status st = OX_OK;
    if (s->stopping)
        st = OX_ERR_ABORTED;
    else if (s->in_flight >= s->o->n_parallel + s->o->queue_size)
        st = OX_ERR_CONTEXT_FULL;
    else
        st = ox_engine_submit(s->engine, r, NULL);
    if (st == OX_OK) {
        s->submitted++, s->in_flight++;
        pthread_cond_signal(&s->wake);
    }
    pthread_mutex_unlock(&s->lock);
    return st;
}

enum ox_status state_slot(struct state *s, char action, int32_t slot, const char *path,
                          size_t *n_tokens) {
    if (!s->engine) /* an embeddings model's server */
        return OX_ERR_UNSUPPORTED;
    pthread_mutex_lock(&s->step_lock); /* the worker steps no batch meanwhile */
    enum ox_status st = action == 's'   ? ox_engine_slot_save(s->engine, slot, path, n_tokens)
                        : action == 'r' ? ox_engine_slot_restore(s->engine, slot, path, n_tokens)
                                        : ox_engine_slot_erase(s->engine, slot, n_tokens);
    pthread_mutex_unlock(&s->step_lock);
    return st;
}

void state_generation_done(struct state *s) {
    pthread_mutex_lock(&s->lock);
    s->in_flight--;
    pthread_cond_broadcast(&s->quiet);
    pthread_mutex_unlock(&s->lock);
}

/* The worker: steps the engine while it has work, and otherwise sleeps until a request is
 * submitted (counted, so one submitted while it stepped is not missed) or the server stops,
 * which it does once the requests in flight are done. */
static void *worker(void *arg) {
    struct state *s = arg;
    uint64_t seen = 0;
    bool idle = true;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        while (idle && !s->stopping && s->submitted == seen)
            pthread_cond_wait(&s->wake, &s->lock);
        bool stop = s->stopping;
        seen = s->submitted;
        pthread_mutex_unlock(&s->lock);
        int32_t busy = 0;
        pthread_mutex_lock(&s->step_lock);
        enum ox_status st = s->engine ? ox_engine_step(s->engine, &busy) : OX_OK;
        pthread_mutex_unlock(&s->step_lock);
        if (st != OX_OK)
            fprintf(stderr, "oxidize serve: %s\n", ox_last_error());
        idle = busy == 0;
        if (stop && idle)
            return NULL;
    }
}

/* The engine (or an encoder's context) and the embeddings context. */
static bool make_contexts(struct state *s) {
    const struct server_opts *o = s->o;
    struct ox_context_params cp = ox_context_params_default();
    cp.n_batch = (uint32_t)o->n_batch;
    cp.n_threads = o->n_threads, cp.n_seq_max = 1, cp.embeddings = true;
    if (!ox_model_has_logits(s->model)) { /* an encoder: embeddings (or reranking) only */
        s->slot_ctx =
            o->n_ctx < ox_model_n_ctx_train(s->model) ? o->n_ctx : ox_model_n_ctx_train(s->model);
        cp.n_ctx = (uint32_t)s->slot_ctx;
        return ox_context_create(s->model, &cp, &s->embed) == OX_OK;
    }
    struct ox_engine_params ep = ox_engine_params_default();
    ep.n_parallel = o->n_parallel, ep.n_ctx = (uint32_t)o->n_ctx, ep.n_batch = (uint32_t)o->n_batch;
    ep.n_ubatch = (uint32_t)o->n_ubatch;
    ep.n_threads = o->n_threads, ep.kv_type = o->kv_type;
    struct ox_spec_params spec = o->spec_p;
    spec.draft_model = s->draft;
    ep.spec = o->spec || s->draft ? &spec : NULL;
    /* a GPU's step leaves the host idle: the tokens of the last one go out meanwhile (on the
     * CPU the callbacks' thread would take a core from the step's) */
    ep.callbacks_aside = ox_model_gpu_bytes(s->model) > 0;
    if (ox_engine_create(s->model, &ep, &s->engine) != OX_OK)
        return false;
    s->slot_ctx = (int32_t)(ep.n_ctx / (uint32_t)ep.n_parallel);
    cp.n_ctx = (uint32_t)s->slot_ctx;
    return !o->embeddings || ox_context_create(s->model, &cp, &s->embed) == OX_OK;
}

/* Adapter i at scale for the engine's requests from now on, and on the embeddings context. */
static enum ox_status apply_lora(struct state *s, int i, float scale) {
    enum ox_status st = s->engine ? ox_engine_set_lora(s->engine, s->lora[i], scale) : OX_OK;
    if (st == OX_OK && s->embed) {
        pthread_mutex_lock(&s->embed_lock);
        st = ox_context_set_lora(s->embed, s->lora[i], scale);
        pthread_mutex_unlock(&s->embed_lock);
    }
    return st;
}

static bool load(struct state *s) {
    const struct server_opts *o = s->o;
    struct ox_model_params mp = o->placement;
    mp.n_gpu_layers = o->n_gpu_layers;
    if (ox_model_load(o->model_path, &mp, &s->model) != OX_OK)
        return false;
    mp = ox_model_params_default(); /* the draft on one GPU */
    mp.n_gpu_layers = o->draft_gpu_layers, mp.split_mode = OX_SPLIT_NONE;
    if (o->draft_path && ox_model_load(o->draft_path, &mp, &s->draft) != OX_OK)
        return false;
    for (int i = 0; i < o->n_lora; i++) {
        if (ox_lora_load(s->model, o->lora_path[i], &s->lora[i]) != OX_OK)
            return false;
        s->lora_scale[i] = o->lora_scale[i];
    }
    if (!make_contexts(s))
        return false;
    for (int i = 0; i < o->n_lora; i++)
        if (apply_lora(s, i, s->lora_scale[i]) != OX_OK)
            return false;
    return true;
}

struct state *state_create(const struct server_opts *o) {
    struct state *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->o = o;
    const char *base = strrchr(o->model_path, '/');
    snprintf(s->model_id, sizeof s->model_id, "%s", base ? base + 1 : o->model_path);
    pthread_mutex_init(&s->lock, NULL), pthread_mutex_init(&s->embed_lock, NULL);
    pthread_mutex_init(&s->step_lock, NULL);
    pthread_cond_init(&s->wake, NULL), pthread_cond_init(&s->quiet, NULL);
    return s;
}

bool state_start(struct state *s) {
    if (!load(s) || pthread_create(&s->worker, NULL, worker, s) != 0)
        return false;
    pthread_mutex_lock(&s->lock);
    s->ready = true;
    pthread_mutex_unlock(&s->lock);
    return true;
}

bool state_ready(struct state *s) {
    pthread_mutex_lock(&s->lock);
    bool ready = s->ready;
    pthread_mutex_unlock(&s->lock);
    return ready;
}

/* Wait on s->quiet (under the lock) until done() or the deadline; false at the deadline. */
static bool wait_until(struct state *s, bool (*done)(const struct state *), double seconds) {
    struct timespec end;
    clock_gettime(CLOCK_REALTIME, &end);
    double whole = floor(seconds);
    end.tv_sec += (time_t)whole;
    end.tv_nsec += (long)((seconds - whole) * 1e9);
    if (end.tv_nsec >= 1000000000L)
        end.tv_sec++, end.tv_nsec -= 1000000000L;
    while (!done(s))
        if (pthread_cond_timedwait(&s->quiet, &s->lock, &end) != 0)
            return done(s);
    return true;
}

static bool nothing_in_flight(const struct state *s) {
    return s->in_flight == 0;
}

static bool no_open_requests(const struct state *s) {
    return s->open_requests == 0;
}

/* The shutdown's part (server.c turns new connections away from here, state_stopping). The
 * worker exits only once the engine has nothing running or queued, so after the join every
 * generation's on_done has run, which resumes its connection: server.c may stop the daemon. */
void state_stop(struct state *s) {
    pthread_mutex_lock(&s->lock);
    s->stopping = true; /* new generations are refused (503) from here */
    pthread_cond_signal(&s->wake);
    if (!wait_until(s, nothing_in_flight, s->o->shutdown_timeout)) {
        fprintf(stderr, "oxidize serve: cancelling %d requests still running\n", s->in_flight);
        ox_engine_cancel(s->engine, 0);
        wait_until(s, nothing_in_flight, 60);
    }
    wait_until(s, no_open_requests, 2);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->worker, NULL);
}

bool state_stopping(struct state *s) {
    pthread_mutex_lock(&s->lock);
    bool stopping = s->stopping;
    pthread_mutex_unlock(&s->lock);
    return stopping;
}

void state_free(struct state *s) {
    if (!s)
        return;
    ox_context_free(s->embed), ox_engine_free(s->engine), ox_model_free(s->model);
    ox_model_free(s->draft);
    pthread_cond_destroy(&s->wake), pthread_cond_destroy(&s->quiet);
    pthread_mutex_destroy(&s->lock), pthread_mutex_destroy(&s->embed_lock);
    pthread_mutex_destroy(&s->step_lock);
    free(s);
}

void state_count_reply(struct state *s, unsigned status) {
    pthread_mutex_lock(&s->lock);
    s->counters.requests++;
    s->counters.errors += status >= 400;
    s->counters.rejected += status == 429 || status == 503;
    pthread_mutex_unlock(&s->lock);
}

void state_request_opened(struct state *s) {
    pthread_mutex_lock(&s->lock);
    s->open_requests++;
    pthread_mutex_unlock(&s->lock);
}

void state_request_closed(struct state *s) {
    pthread_mutex_lock(&s->lock);
    s->open_requests--;
    pthread_cond_broadcast(&s->quiet);
    pthread_mutex_unlock(&s->lock);
}

double state_clock(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int state_lora_count(const struct state *s) {
    return s->o->n_lora;
}

const char *state_lora_info(struct state *s, int i, float *scale) {
    pthread_mutex_lock(&s->lock);
    *scale = s->lora_scale[i];
    pthread_mutex_unlock(&s->lock);
    return s->o->lora_path[i];
}

struct ox_lora *state_lora(struct state *s, int i) {
    return s->lora[i];
}

enum ox_status state_lora_set(struct state *s, const float *scales) {
    enum ox_status st = OX_OK;
    for (int i = 0; i < s->o->n_lora && st == OX_OK; i++) {
        st = apply_lora(s, i, scales[i]);
        if (st == OX_OK) {
            pthread_mutex_lock(&s->lock);
            s->lora_scale[i] = scales[i];
            pthread_mutex_unlock(&s->lock);
        }
    }
    return st;
}
