/* server.c: the HTTP layer of `oxidize serve`: a libmicrohttpd daemon (a thread per connection,
 * which waits for its generation) in front of one ox_engine stepped by a worker thread. */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server.h"

struct server {
    struct ox_model *model;
    struct ox_engine *engine;
    char model_id[256];
    const char *chat_template;
    const char *api_key;
    int32_t slot_ctx;
    size_t max_body;
    pthread_mutex_t lock; /* wake, stopping and each waiting generation's fields */
    pthread_cond_t wake;  /* the worker: a request arrived, or stop */
    pthread_cond_t done;  /* the connections: a generation ended */
    uint64_t submitted;   /* requests handed to the engine: the worker compares */
    bool stopping;
};

/* One connection's request body, gathered across calls. */
struct upload {
    char *data;
    size_t len;
    bool too_big;
};

/* A generation a connection waits for; the callbacks run on the worker thread. */
struct waiter {
    struct server *s;
    ox_token *tokens;
    int32_t n, cap;
    enum ox_finish reason;
    bool finished;
};

const struct ox_model *server_model(const struct server *s) {
    return s->model;
}

const char *server_model_id(const struct server *s) {
    return s->model_id;
}

int32_t server_slot_ctx(const struct server *s) {
    return s->slot_ctx;
}

const char *server_chat_template(const struct server *s) {
    return s->chat_template ? s->chat_template : ox_model_chat_template(s->model, NULL);
}

static bool collect(void *user, ox_token t) {
    struct waiter *w = user;
    if (w->n == w->cap) {
        int32_t cap = w->cap ? 2 * w->cap : 64;
        ox_token *grown = realloc(w->tokens, (size_t)cap * sizeof *grown);
        if (!grown)
            return false; /* ends the request (cancelled): the reply says so */
        w->tokens = grown, w->cap = cap;
    }
    w->tokens[w->n++] = t;
    return true;
}

static void finished(void *user, enum ox_finish reason, int32_t n_generated) {
    struct waiter *w = user;
    (void)n_generated;
    pthread_mutex_lock(&w->s->lock);
    w->reason = reason, w->finished = true;
    pthread_cond_broadcast(&w->s->done);
    pthread_mutex_unlock(&w->s->lock);
}

enum ox_status server_submit(struct server *s, const ox_token *prompt, int32_t n_prompt,
                             int32_t max, struct ox_sampler *sampler,
                             bool (*on_token)(void *, ox_token),
                             void (*on_done)(void *, enum ox_finish, int32_t), void *user) {
    struct ox_request r = {prompt, n_prompt, max, sampler, on_token, on_done, user};
    pthread_mutex_lock(&s->lock);
    enum ox_status st = s->stopping ? OX_ERR_ABORTED : ox_engine_submit(s->engine, &r, NULL);
    if (st == OX_OK) {
        s->submitted++;
        pthread_cond_signal(&s->wake);
    }
    pthread_mutex_unlock(&s->lock);
    return st;
}

enum ox_status server_generate(struct server *s, const ox_token *prompt, int32_t n_prompt,
                               int32_t max, struct ox_sampler *sampler, ox_token **out,
                               int32_t *n_out, enum ox_finish *reason) {
    struct waiter w = {.s = s};
    enum ox_status st = server_submit(s, prompt, n_prompt, max, sampler, collect, finished, &w);
    pthread_mutex_lock(&s->lock);
    while (st == OX_OK && !w.finished)
        pthread_cond_wait(&s->done, &s->lock);
    pthread_mutex_unlock(&s->lock);
    *out = w.tokens, *n_out = w.n, *reason = w.reason;
    return st;
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
        if (ox_engine_step(s->engine, &busy) != OX_OK)
            fprintf(stderr, "oxidize serve: %s\n", ox_last_error());
        idle = busy == 0;
        if (stop && idle)
            return NULL;
    }
}

static enum MHD_Result send_reply(struct MHD_Connection *c, struct reply r) {
    if (r.stream) {
        enum MHD_Result ok = MHD_queue_response(c, 200, r.stream);
        MHD_destroy_response(r.stream);
        return ok;
    }
    const char *body = r.body ? r.body : "{}";
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    free(r.body);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", "application/json");
    enum MHD_Result ok = MHD_queue_response(c, r.status, resp);
    MHD_destroy_response(resp);
    return ok;
}

/* Whether the request carries the API key (when there is one), compared in constant time. */
static bool authorized(const struct server *s, struct MHD_Connection *c, const char *url) {
    if (!s->api_key || !strcmp(url, "/health"))
        return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7))
        return false;
    h += 7;
    size_t n = strlen(s->api_key), m = strlen(h);
    unsigned char diff = n != m;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(s->api_key[i] ^ (i < m ? h[i] : 0));
    return diff == 0;
}

/* libmicrohttpd calls this for the headers, then for each piece of the body, then once more
 * with none left: the request is answered then. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *data_size, void **con_cls) {
    struct server *s = cls;
    (void)version;
    struct upload *u = *con_cls;
    if (!u) {
        if (!(u = calloc(1, sizeof *u)))
            return MHD_NO;
        *con_cls = u;
        return MHD_YES;
    }
    if (*data_size) {
        if (u->len + *data_size > s->max_body) {
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
    if (!authorized(s, c, url)) {
        char *body = strdup("{\"error\":{\"message\":\"invalid API key\","
                            "\"type\":\"invalid_request_error\",\"param\":null,"
                            "\"code\":\"invalid_api_key\"}}");
        return send_reply(c, (struct reply){401, body, NULL});
    }
    if (u->too_big) {
        char *body = strdup("{\"error\":{\"message\":\"the request body is too large\","
                            "\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}");
        return send_reply(c, (struct reply){413, body, NULL});
    }
    return send_reply(c, route_request(s, method, url, u->data ? u->data : "", u->len));
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode code) {
    (void)cls, (void)c, (void)code;
    struct upload *u = *con_cls;
    if (u)
        free(u->data);
    free(u);
    *con_cls = NULL;
}

static bool load(struct server *s, const struct server_opts *o) {
    struct ox_model_params mp = ox_model_params_default();
    mp.n_gpu_layers = o->n_gpu_layers;
    if (ox_model_load(o->model_path, &mp, &s->model) != OX_OK)
        return false;
    struct ox_engine_params ep = ox_engine_params_default();
    ep.n_parallel = o->n_parallel, ep.n_ctx = (uint32_t)o->n_ctx, ep.n_batch = (uint32_t)o->n_batch;
    ep.n_threads = o->n_threads;
    if (ox_engine_create(s->model, &ep, &s->engine) != OX_OK)
        return false;
    const char *base = strrchr(o->model_path, '/');
    snprintf(s->model_id, sizeof s->model_id, "%s", base ? base + 1 : o->model_path);
    s->slot_ctx = (int32_t)(ep.n_ctx / (uint32_t)ep.n_parallel);
    return true;
}

int server_run(const struct server_opts *o) {
    struct server s = {
        .max_body = o->max_body, .chat_template = o->chat_template, .api_key = o->api_key};
    pthread_mutex_init(&s.lock, NULL);
    pthread_cond_init(&s.wake, NULL), pthread_cond_init(&s.done, NULL);
    if (!load(&s, o)) {
        fprintf(stderr, "oxidize serve: %s\n", ox_last_error());
        ox_engine_free(s.engine), ox_model_free(s.model);
        return 1;
    }
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    if (inet_pton(AF_INET, o->host, &addr.sin_addr) != 1) {
        fprintf(stderr, "oxidize serve: --host %s is not an IPv4 address\n", o->host);
        ox_engine_free(s.engine), ox_model_free(s.model);
        return 1;
    }
    /* the signals wait for the main thread only: every thread started after this inherits the
     * mask */
    sigset_t sigs;
    sigemptyset(&sigs), sigaddset(&sigs, SIGINT), sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    pthread_t th;
    bool worker_up = pthread_create(&th, NULL, worker, &s) == 0;
    struct MHD_Daemon *d =
        worker_up
            ? MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD,
                               (uint16_t)o->port, NULL, NULL, on_request, &s, MHD_OPTION_SOCK_ADDR,
                               (struct sockaddr *)&addr, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
                               &s, MHD_OPTION_CONNECTION_TIMEOUT, 600u, MHD_OPTION_END)
            : NULL;
    if (d) {
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
        fprintf(stderr, "oxidize serve: %s on http://%s:%u (%d slots of %d tokens)\n", s.model_id,
                o->host, info ? info->port : (unsigned)o->port, o->n_parallel, s.slot_ctx);
        int sig = 0;
        sigwait(&sigs, &sig);
        fprintf(stderr, "oxidize serve: shutting down\n");
    } else {
        fprintf(stderr, "oxidize serve: cannot listen on %s:%d\n", o->host, o->port);
    }
    pthread_mutex_lock(&s.lock); /* new generations are refused (503) from here */
    s.stopping = true;
    pthread_cond_signal(&s.wake);
    pthread_mutex_unlock(&s.lock);
    if (worker_up)
        pthread_join(th, NULL); /* after the requests in flight */
    if (d)
        MHD_stop_daemon(d);
    ox_engine_free(s.engine), ox_model_free(s.model);
    pthread_cond_destroy(&s.wake), pthread_cond_destroy(&s.done);
    pthread_mutex_destroy(&s.lock);
    return d ? 0 : 1;
}
