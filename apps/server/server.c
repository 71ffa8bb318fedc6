/* server.c: the HTTP layer of `oxidize serve`, and the top of the server: a libmicrohttpd
 * daemon (a few polling threads; a connection waiting on a generation is suspended, not a
 * blocked thread) that makes the shared state (state.c: the model, its engine and worker),
 * answers each request through routes.c and starts the generations they ask for (gen.c); limits,
 * keys and the graceful shutdown. Nothing in the server calls into this file. */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gen.h"
#include "routes.h"
#include "state.h"

/* One request's body, gathered across calls, and its generation once started. */
struct upload {
    char *data;
    size_t len;
    bool too_big;
    struct gen *gen; /* a whole answer's: the handler is called again when it is done */
    /* for --log-requests */
    char method[16], path[256];
    double t0;
    int status;
    struct gen *logged; /* a stream's generation (a reference until the connection closes) */
};

/* --log-requests: "2026-11-25T15:20:01Z POST /v1/completions 200 12+35 tokens 84.2 ms". */
static void log_request(const char *method, const char *path, int status, struct gen *g,
                        double ms) {
    char when[32];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    int32_t prompt = 0, generated = 0;
    if (g)
        gen_tokens(g, &prompt, &generated);
    fprintf(stderr, "%s %s %s %d %d+%d tokens %.1f ms\n", when, method, path, status, (int)prompt,
            (int)generated, ms);
}

static enum MHD_Result send_reply(struct state *s, struct MHD_Connection *c, struct upload *u,
                                  struct reply r) {
    if (u)
        u->status = r.status;
    const char *body = r.body ? r.body : "{}";
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    free(r.body);
    state_count_reply(s, r.status);
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
static bool authorized(const struct state *s, struct MHD_Connection *c, const char *url) {
    const struct server_opts *o = state_options(s);
    if (o->n_api_keys == 0 || !strcmp(url, "/health"))
        return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7))
        return false;
    h += 7;
    size_t m = strlen(h);
    bool any = false;
    for (int k = 0; k < o->n_api_keys; k++) {
        const char *key = o->api_keys[k];
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
static enum MHD_Result start_generation(struct state *s, struct MHD_Connection *c, struct upload *u,
                                        struct reply r) {
    struct gen *g = r.gen;
    if (gen_streams(g)) {
        struct MHD_Response *resp = gen_response(g);
        enum ox_status st = resp ? gen_start(g, c, r.prompt) : OX_ERR_OOM;
        free(r.prompt);
        if (st != OX_OK) {
            if (resp)
                MHD_destroy_response(resp); /* drops its reference */
            gen_release(g);
            return send_reply(s, c, u, refused(st));
        }
        state_count_reply(s, 200);
        enum MHD_Result ok = MHD_queue_response(c, 200, resp);
        MHD_destroy_response(resp);
        u->status = 200;
        if (state_options(s)->log_requests)
            gen_retain(g), u->logged = g;
        gen_release(g);
        return ok;
    }
    enum ox_status st = gen_start(g, c, r.prompt);
    free(r.prompt);
    if (st != OX_OK) {
        gen_release(g);
        return send_reply(s, c, u, refused(st));
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
    struct state *s = cls;
    (void)version;
    struct upload *u = *con_cls;
    if (!u) { /* the headers: a request without the key is answered before its body is kept
               * (a body past the cap is read and dropped, so the client sees its 413) */
        if (!authorized(s, c, url)) {
            if (state_options(s)->log_requests)
                log_request(method, url, 401, NULL, 0.0);
            return send_reply(s, c, NULL, bad_key());
        }
        if (!(u = calloc(1, sizeof *u)))
            return MHD_NO;
        *con_cls = u;
        snprintf(u->method, sizeof u->method, "%s", method);
        snprintf(u->path, sizeof u->path, "%s", url);
        u->t0 = state_clock();
        state_request_opened(s);
        return MHD_YES;
    }
    if (*data_size) {
        if (u->len + *data_size > state_options(s)->max_body) {
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
        return send_reply(s, c, u, gen_reply(u->gen));
    if (u->too_big)
        return send_reply(s, c, u, too_big());
    if (!state_ready(s))
        return send_reply(s, c, u, loading());
    const char *action = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "action");
    struct reply r = route_request(s, method, url, action, u->data ? u->data : "", u->len);
    return r.gen ? start_generation(s, c, u, r) : send_reply(s, c, u, r);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode code) {
    struct state *s = cls;
    (void)c, (void)code;
    struct upload *u = *con_cls;
    if (!u)
        return;
    if (state_options(s)->log_requests)
        log_request(u->method, u->path, u->status, u->logged ? u->logged : u->gen,
                    (state_clock() - u->t0) * 1e3);
    gen_release(u->logged);
    gen_release(u->gen);
    free(u->data);
    free(u);
    *con_cls = NULL;
    state_request_closed(s);
}

/* A new connection: taken until the shutdown begins, closed at once after. This, not
 * MHD_quiesce_daemon, is how the server stops accepting: with a pool of threads on epoll (what
 * MHD_USE_AUTO_INTERNAL_THREAD picks on Linux) quiescing removes the listening socket from each
 * thread's epoll set while that thread, if awake, may be removing it too, and the loser's
 * ENOENT is an MHD_PANIC: abort() (libmicrohttpd 0.9.75, and upstream since). */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t len) {
    (void)addr, (void)len;
    return state_stopping(cls) ? MHD_NO : MHD_YES;
}

static struct MHD_Daemon *listen_on(struct state *s, const struct sockaddr_in *addr) {
    const struct server_opts *o = state_options(s);
    unsigned idle = (unsigned)ceil(o->timeout);
    return MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME,
                            (uint16_t)o->port, on_accept, s, on_request, s, MHD_OPTION_SOCK_ADDR,
                            (const struct sockaddr *)addr, MHD_OPTION_NOTIFY_COMPLETED,
                            on_completed, s, MHD_OPTION_CONNECTION_TIMEOUT, idle,
                            MHD_OPTION_THREAD_POOL_SIZE, (unsigned)o->http_threads, MHD_OPTION_END);
}

int server_run(const struct server_opts *o) {
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    if (inet_pton(AF_INET, o->host, &addr.sin_addr) != 1) {
        fprintf(stderr, "oxidize serve: --host %s is not an IPv4 address\n", o->host);
        return 1;
    }
    struct state *s = state_create(o);
    if (!s) {
        fprintf(stderr, "oxidize serve: out of memory\n");
        return 1;
    }
    /* the signals wait for the main thread only: every thread started after this inherits the
     * mask */
    sigset_t sigs;
    sigemptyset(&sigs), sigaddset(&sigs, SIGINT), sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    struct MHD_Daemon *d = listen_on(s, &addr);
    if (!d) {
        fprintf(stderr, "oxidize serve: cannot listen on %s:%d\n", o->host, o->port);
        state_free(s);
        return 1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    fprintf(stderr, "oxidize serve: listening on http://%s:%u, loading %s\n", o->host,
            info ? info->port : (unsigned)o->port, state_model_id(s));
    int rc = 1;
    if (state_start(s)) {
        fprintf(stderr, "oxidize serve: %s ready (%d slots of %d tokens)\n", state_model_id(s),
                o->n_parallel, state_slot_ctx(s));
        int sig = 0;
        sigwait(&sigs, &sig);
        fprintf(stderr, "oxidize serve: shutting down\n");
        /* SIGINT/SIGTERM: from here on_accept turns new connections away while the state
         * drains its generations */
        state_stop(s);
        rc = 0;
    } else {
        fprintf(stderr, "oxidize serve: %s\n", ox_last_error());
    }
    /* no connection is suspended now, as libmicrohttpd requires (it panics otherwise): each
     * one waits on a generation, and state_stop returns after the worker that ends them (each
     * on_done resumes its connection) has exited */
    MHD_stop_daemon(d);
    state_free(s);
    return rc;
}
