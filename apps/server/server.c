/* server.c: the HTTP layer of `oxidize serve`: a libmicrohttpd daemon (a few polling threads;
 * a connection waiting on a generation is suspended, not a blocked thread) in front of one
 * ox_engine stepped by a worker thread; loading, limits, keys and the graceful shutdown. */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gen.h"
#include "routes.h"
#include "server_int.h"

struct server {
    const struct server_opts *o;
    struct ox_model *model;
    struct ox_engine *engine;
    char model_id[256];
    int32_t slot_ctx;
    struct ox_context *embed; /* serve --embeddings: used under embed_lock */
    pthread_mutex_t embed_lock;
    pthread_mutex_t lock; /* everything below */
    pthread_cond_t wake;  /* the worker: a request arrived, or stop */
    pthread_cond_t quiet; /* the shutdown: a generation or a request ended */
    uint64_t submitted;   /* requests handed to the engine: the worker compares */
    int in_flight;        /* generations submitted and not yet done */
    int open_requests;    /* requests libmicrohttpd has not completed */
    bool ready, stopping;
    struct server_counters counters;
};

/* One request's body, gathered across calls, and its generation once started. */
struct upload {
    char *data;
    size_t len;
    bool too_big;
    struct gen *gen; /* a whole answer's: the handler is called again when it is done */
};

const struct ox_model *server_model(const struct server *s) {
    return s->model;
}

const char *server_model_id(const struct server *s) {
    return s->model_id;
}

const struct server_opts *server_options(const struct server *s) {
    return s->o;
}

int32_t server_slot_ctx(const struct server *s) {
    return s->slot_ctx;
}

double server_timeout(const struct server *s) {
    return s->o->timeout;
}

const char *server_chat_template(const struct server *s) {
    return s->o->chat_template ? s->o->chat_template : ox_model_chat_template(s->model, NULL);
}

struct ox_context *server_embed_begin(struct server *s, bool *busy) {
    *busy = s->embed && pthread_mutex_trylock(&s->embed_lock) != 0;
    return s->embed && !*busy ? s->embed : NULL;
}

void server_embed_end(struct server *s) {
    if (s->embed)
        pthread_mutex_unlock(&s->embed_lock);
}

enum ox_pooling server_pooling(const struct server *s) {
    if (s->o->pooling != OX_POOLING_NONE)
        return s->o->pooling;
    enum ox_pooling own = ox_model_pooling(s->model); /* the file's, else mean */
    return own != OX_POOLING_NONE ? own : OX_POOLING_MEAN;
}

void server_stats(struct server *s, struct ox_engine_stats *st, struct ox_engine_slot *slots,
                  struct server_counters *c) {
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

enum ox_status server_submit(struct server *s, const struct ox_request *r) {
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

void server_generation_done(struct server *s) {
    pthread_mutex_lock(&s->lock);
    s->in_flight--;
    pthread_cond_broadcast(&s->quiet);
    pthread_mutex_unlock(&s->lock);
}

/* The worker: steps the engine while it has work, and otherwise sleeps until a request is
 * submitted (counted, so one submitted while it stepped is not missed) or the server stops,
 * which it does once the requests in flight are done. */
static void *worker(void *arg) {
    struct server *s = arg;
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
        if (s->engine && ox_engine_step(s->engine, &busy) != OX_OK)
            fprintf(stderr, "oxidize serve: %s\n", ox_last_error());
        idle = busy == 0;
        if (stop && idle)
            return NULL;
    }
}

static enum MHD_Result send_reply(struct server *s, struct MHD_Connection *c, struct reply r) {
    const char *body = r.body ? r.body : "{}";
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    free(r.body);
    pthread_mutex_lock(&s->lock);
    s->counters.requests++;
    s->counters.errors += r.status >= 400;
    s->counters.rejected += r.status == 429 || r.status == 503;
    pthread_mutex_unlock(&s->lock);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, "Content-Type",
                            r.content_type ? r.content_type : "application/json");
    if (r.retry_after) {
        char secs[16];
        snprintf(secs, sizeof secs, "%u", r.retry_after);
        MHD_add_response_header(resp, "Retry-After", secs);
    }
    enum MHD_Result ok = MHD_queue_response(c, r.status, resp);
    MHD_destroy_response(resp);
    return ok;
}

/* Whether the request carries one of the API keys (when there are any), each compared in
 * constant time. */
static bool authorized(const struct server *s, struct MHD_Connection *c, const char *url) {
    if (s->o->n_api_keys == 0 || !strcmp(url, "/health"))
        return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7))
        return false;
    h += 7;
    size_t m = strlen(h);
    bool any = false;
    for (int k = 0; k < s->o->n_api_keys; k++) {
        const char *key = s->o->api_keys[k];
        size_t n = strlen(key);
        unsigned char diff = n != m;
        for (size_t i = 0; i < n; i++)
            diff |= (unsigned char)(key[i] ^ (i < m ? h[i] : 0));
        any |= diff == 0;
    }
    return any;
}

/* The engine refused a generation: why, as a reply. */
static struct reply refused(enum ox_status st) {
    struct reply r = st == OX_ERR_ABORTED
                         ? reply_error(503, "server_error", NULL, "the server is shutting down")
                     : st == OX_ERR_CONTEXT_FULL
                         ? reply_error(429, "rate_limit_error", NULL,
                                       "every slot is busy and the queue is full: retry later")
                         : reply_error(500, "server_error", NULL, ox_last_error());
    r.retry_after = st == OX_ERR_CONTEXT_FULL || st == OX_ERR_ABORTED ? 1 : 0;
    return r;
}

/* Start the generation a route asked for: streamed now, or answered when done. */
static enum MHD_Result start_generation(struct server *s, struct MHD_Connection *c,
                                        struct upload *u, struct reply r) {
    struct gen *g = r.gen;
    if (gen_streams(g)) {
        struct MHD_Response *resp = gen_response(g);
        enum ox_status st = resp ? gen_start(g, c, r.prompt) : OX_ERR_OOM;
        free(r.prompt);
        if (st != OX_OK) {
            if (resp)
                MHD_destroy_response(resp); /* drops its reference */
            gen_release(g);
            return send_reply(s, c, refused(st));
        }
        pthread_mutex_lock(&s->lock);
        s->counters.requests++;
        pthread_mutex_unlock(&s->lock);
        enum MHD_Result ok = MHD_queue_response(c, 200, resp);
        MHD_destroy_response(resp);
        gen_release(g);
        return ok;
    }
    enum ox_status st = gen_start(g, c, r.prompt);
    free(r.prompt);
    if (st != OX_OK) {
        gen_release(g);
        return send_reply(s, c, refused(st));
    }
    u->gen = g; /* suspended: the handler is called again once the answer is whole */
    return MHD_YES;
}

static struct reply bad_key(void) {
    return (struct reply){.status = 401,
                          .body = strdup("{\"error\":{\"message\":\"invalid API key\","
                                         "\"type\":\"invalid_request_error\",\"param\":null,"
                                         "\"code\":\"invalid_api_key\"}}")};
}

static struct reply too_big(void) {
    return reply_error(413, "invalid_request_error", NULL, "the request body is too large");
}

static struct reply loading(void) {
    struct reply r = reply_error(503, "unavailable_error", NULL, "Loading model");
    r.retry_after = 1;
    return r;
}

/* libmicrohttpd calls this for the headers, then for each piece of the body, then once more
 * with none left: the request is answered then (or its generation started, and then once more
 * when a whole answer is done). */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *data_size, void **con_cls) {
    struct server *s = cls;
    (void)version;
    struct upload *u = *con_cls;
    if (!u) { /* the headers: a request without the key is answered before its body is kept
               * (a body past the cap is read and dropped, so the client sees its 413) */
        if (!authorized(s, c, url))
            return send_reply(s, c, bad_key());
        if (!(u = calloc(1, sizeof *u)))
            return MHD_NO;
        *con_cls = u;
        pthread_mutex_lock(&s->lock);
        s->open_requests++;
        pthread_mutex_unlock(&s->lock);
        return MHD_YES;
    }
    if (*data_size) {
        if (u->len + *data_size > s->o->max_body) {
            u->too_big = true;
        } else if (!u->too_big) {
            char *grown = realloc(u->data, u->len + *data_size + 1);
            if (!grown)
                return MHD_NO;
            memcpy(grown + u->len, data, *data_size);
            u->data = grown, u->len += *data_size, u->data[u->len] = '\0';
        }
        *data_size = 0;
        return MHD_YES;
    }
    if (u->gen)
        return send_reply(s, c, gen_reply(u->gen));
    if (u->too_big)
        return send_reply(s, c, too_big());
    pthread_mutex_lock(&s->lock);
    bool ready = s->ready;
    pthread_mutex_unlock(&s->lock);
    if (!ready)
        return send_reply(s, c, loading());
    struct reply r = route_request(s, method, url, u->data ? u->data : "", u->len);
    return r.gen ? start_generation(s, c, u, r) : send_reply(s, c, r);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode code) {
    struct server *s = cls;
    (void)c, (void)code;
    struct upload *u = *con_cls;
    if (!u)
        return;
    gen_release(u->gen);
    free(u->data);
    free(u);
    *con_cls = NULL;
    pthread_mutex_lock(&s->lock);
    s->open_requests--;
    pthread_cond_broadcast(&s->quiet);
    pthread_mutex_unlock(&s->lock);
}

static bool load(struct server *s) {
    const struct server_opts *o = s->o;
    struct ox_model_params mp = ox_model_params_default();
    mp.n_gpu_layers = o->n_gpu_layers;
    if (ox_model_load(o->model_path, &mp, &s->model) != OX_OK)
        return false;
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
    if (ox_engine_create(s->model, &ep, &s->engine) != OX_OK)
        return false;
    s->slot_ctx = (int32_t)(ep.n_ctx / (uint32_t)ep.n_parallel);
    cp.n_ctx = (uint32_t)s->slot_ctx;
    return !o->embeddings || ox_context_create(s->model, &cp, &s->embed) == OX_OK;
}

/* Wait on s->quiet (under the lock) until done() or the deadline; false at the deadline. */
static bool wait_until(struct server *s, bool (*done)(const struct server *), double seconds) {
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

static bool nothing_in_flight(const struct server *s) {
    return s->in_flight == 0;
}

static bool no_open_requests(const struct server *s) {
    return s->open_requests == 0;
}

/* SIGINT/SIGTERM: accept no more connections, let the generations in flight finish for
 * --shutdown-timeout seconds, cancel the rest, and give their answers a moment to leave. */
static MHD_socket shut_down(struct server *s, struct MHD_Daemon *d) {
    MHD_socket listen = MHD_quiesce_daemon(d); /* closed after MHD_stop_daemon, as it asks */
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
    return listen;
}

static struct MHD_Daemon *listen_on(struct server *s, const struct sockaddr_in *addr) {
    const struct server_opts *o = s->o;
    unsigned idle = (unsigned)ceil(o->timeout);
    return MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME,
                            (uint16_t)o->port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
                            (const struct sockaddr *)addr, MHD_OPTION_NOTIFY_COMPLETED,
                            on_completed, s, MHD_OPTION_CONNECTION_TIMEOUT, idle,
                            MHD_OPTION_THREAD_POOL_SIZE, (unsigned)o->http_threads, MHD_OPTION_END);
}

int server_run(const struct server_opts *o) {
    struct server s = {.o = o};
    const char *base = strrchr(o->model_path, '/');
    snprintf(s.model_id, sizeof s.model_id, "%s", base ? base + 1 : o->model_path);
    pthread_mutex_init(&s.lock, NULL), pthread_mutex_init(&s.embed_lock, NULL);
    pthread_cond_init(&s.wake, NULL), pthread_cond_init(&s.quiet, NULL);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    if (inet_pton(AF_INET, o->host, &addr.sin_addr) != 1) {
        fprintf(stderr, "oxidize serve: --host %s is not an IPv4 address\n", o->host);
        return 1;
    }
    /* the signals wait for the main thread only: every thread started after this inherits the
     * mask */
    sigset_t sigs;
    sigemptyset(&sigs), sigaddset(&sigs, SIGINT), sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    struct MHD_Daemon *d = listen_on(&s, &addr);
    if (!d) {
        fprintf(stderr, "oxidize serve: cannot listen on %s:%d\n", o->host, o->port);
        return 1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    fprintf(stderr, "oxidize serve: listening on http://%s:%u, loading %s\n", o->host,
            info ? info->port : (unsigned)o->port, s.model_id);
    pthread_t th;
    bool up = load(&s) && pthread_create(&th, NULL, worker, &s) == 0;
    int rc = 1;
    MHD_socket listen = MHD_INVALID_SOCKET;
    if (up) {
        pthread_mutex_lock(&s.lock);
        s.ready = true;
        pthread_mutex_unlock(&s.lock);
        fprintf(stderr, "oxidize serve: %s ready (%d slots of %d tokens)\n", s.model_id,
                o->n_parallel, s.slot_ctx);
        int sig = 0;
        sigwait(&sigs, &sig);
        fprintf(stderr, "oxidize serve: shutting down\n");
        listen = shut_down(&s, d);
        pthread_join(th, NULL);
        rc = 0;
    } else {
        fprintf(stderr, "oxidize serve: %s\n", ox_last_error());
    }
    MHD_stop_daemon(d);
    if (listen != MHD_INVALID_SOCKET)
        close(listen);
    ox_context_free(s.embed), ox_engine_free(s.engine), ox_model_free(s.model);
    pthread_cond_destroy(&s.wake), pthread_cond_destroy(&s.quiet);
    pthread_mutex_destroy(&s.lock), pthread_mutex_destroy(&s.embed_lock);
    return rc;
}
