/* dist.c: a group's TCP connections: rank 0 listens, takes the other ranks' hellos and hands
 * out the shared bytes, then frames its messages to them. Sockets are non-blocking and every
 * wait is a poll with a deadline, except a rank's wait for rank 0's next message, which
 * watches rank 0's connection alone (with TCP keepalive for a host that vanished). */
#define _GNU_SOURCE /* accept4, MSG_NOSIGNAL, TCP_KEEPIDLE */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "backend/dist/dist.h"
#include "core/status.h"

struct dist_group {
    int rank, world, timeout_ms;
    int fds[]; /* rank 0: fds[r], r >= 1, rank r's connection; the others: fds[0], rank 0's */
};

enum { DIST_RETRY_MS = 100 };

static int64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Waits for fd to be ready for ev until deadline (< 0: forever). 0 ready, ETIMEDOUT, or the
 * poll's error. */
static int wait_fd(int fd, short ev, int64_t deadline) {
    for (;;) {
        int64_t left = deadline < 0 ? -1 : deadline - now_ms();
        if (deadline >= 0 && left <= 0)
            return ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = ev};
        int r = poll(&p, 1, left > 1 << 30 ? 1 << 30 : (int)left);
        if (r > 0)
            return 0; /* ready, or an error / hang-up the next read or write reports */
        if (r < 0 && errno != EINTR)
            return errno;
    }
}

/* Exactly n bytes through fd, each piece before the deadline (which moves on by as much
 * whenever bytes move: a large message on a slow link is not cut short). 0, ETIMEDOUT, EPIPE
 * for a connection closed by the other end (reads), or the call's error. */
static int read_full(int fd, void *buf, size_t n, int64_t deadline) {
    const int64_t idle = deadline - now_ms();
    for (size_t got = 0; got < n;) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r > 0) {
            got += (size_t)r, deadline = now_ms() + idle;
        } else if (r == 0) {
            return EPIPE;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int e = wait_fd(fd, POLLIN, deadline);
            if (e)
                return e;
        } else if (errno != EINTR) {
            return errno;
        }
    }
    return 0;
}

static int write_full(int fd, const void *buf, size_t n, int64_t deadline) {
    const int64_t idle = deadline - now_ms();
    for (size_t put = 0; put < n;) {
        ssize_t r = send(fd, (const char *)buf + put, n - put, MSG_NOSIGNAL);
        if (r >= 0) {
            put += (size_t)r, deadline = now_ms() + idle;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int e = wait_fd(fd, POLLOUT, deadline);
            if (e)
                return e;
        } else if (errno != EINTR) {
            return errno;
        }
    }
    return 0;
}

/* Non-blocking, no Nagle delay (a batch goes out at once), keepalive probes after 10 s of
 * silence every 5 s, 3 missed: a vanished host is noticed within about 25 s. */
static void tune(int fd) {
    int one = 1;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
#ifdef TCP_KEEPIDLE
    int idle = 10, interval = 5, count = 3;
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
#endif
}

static struct addrinfo *resolve(const char *addr, bool passive, char *host, enum ox_status *st) {
    uint16_t port;
    char service[8];
    if (!dist_parse_addr(addr, host, 256, &port)) {
        *st = ox_fail(OX_ERR_INVALID_ARG, "dist: '%s' is not HOST:PORT", addr);
        return NULL;
    }
    snprintf(service, sizeof service, "%u", (unsigned)port);
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = passive ? AI_PASSIVE : 0};
    struct addrinfo *list = NULL;
    int e = getaddrinfo(host, service, &hints, &list);
    if (e) {
        *st = ox_fail(OX_ERR_IO, "dist: cannot resolve '%s': %s", host, gai_strerror(e));
        return NULL;
    }
    *st = OX_OK;
    return list;
}

static struct dist_group *group_new(const struct dist_params *p) {
    size_t n = p->rank == 0 ? (size_t)p->world : 1;
    struct dist_group *g = malloc(sizeof *g + n * sizeof(int));
    if (!g)
        return NULL;
    g->rank = p->rank, g->world = p->world, g->timeout_ms = p->timeout_ms;
    for (size_t i = 0; i < n; i++)
        g->fds[i] = -1;
    return g;
}

static void group_close(struct dist_group *g) {
    for (int i = 0; i < (g->rank == 0 ? g->world : 1); i++)
        if (g->fds[i] >= 0)
            close(g->fds[i]);
    free(g);
}

/* A frame of kind with payload to fd (rank 0 to one rank). */
static int send_frame(int fd, enum dist_kind kind, const void *payload, size_t len,
                      int64_t deadline) {
    uint8_t h[DIST_HEADER_BYTES];
    dist_header_encode(kind, (uint64_t)len, h);
    int e = write_full(fd, h, sizeof h, deadline);
    return e ? e : write_full(fd, payload, len, deadline);
}

/* Rank 0 refuses every rank that joined (and the one on fd, if any) with the same note, closes
 * the group and fails with it (status: a misconfiguration or a rank lost). */
static enum ox_status refuse_all(struct dist_group *g, int fd, enum ox_status status,
                                 const char *note) {
    int64_t deadline = now_ms() + 1000; /* a goodbye: no rank holds the others up */
    size_t len = strnlen(note, DIST_NOTE_MAX);
    if (fd >= 0)
        send_frame(fd, DIST_REFUSAL, note, len, deadline), close(fd);
    for (int r = 1; r < g->world; r++)
        if (g->fds[r] >= 0)
            send_frame(g->fds[r], DIST_REFUSAL, note, len, deadline);
    group_close(g);
    return ox_fail(status, "dist: %s", note);
}

/* Rank 0's listening socket on addr. */
static enum ox_status listen_on(const char *addr, int *out) {
    char host[256];
    enum ox_status st;
    struct addrinfo *list = resolve(addr, true, host, &st), *a;
    if (!list)
        return st;
    int fd = -1, err = 0, one = 1;
    for (a = list; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) || listen(fd, 64))
            err = errno, close(fd), fd = -1;
    }
    freeaddrinfo(list);
    if (fd < 0)
        return ox_fail(OX_ERR_IO, "dist: rank 0 cannot listen on %s: %s", addr, strerror(err));
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    *out = fd;
    return OX_OK;
}

/* Whether a hello fits the group: NULL, or why not (in note). */
static const char *hello_misfit(const struct dist_group *g, const struct dist_hello *h,
                                uint64_t key, size_t shared_len, char *note, size_t cap) {
    if (h->world != (uint32_t)g->world)
        snprintf(note, cap, "rank %u counts %u ranks, rank 0 %d", h->rank, h->world, g->world);
    else if (h->rank < 1 || h->rank >= (uint32_t)g->world)
        snprintf(note, cap, "rank %u is not one of 1..%d", h->rank, g->world - 1);
    else if (g->fds[h->rank] >= 0)
        snprintf(note, cap, "two processes joined as rank %u", h->rank);
    else if (h->key != key)
        snprintf(note, cap, "rank %u runs another model (key %016llx, rank 0 %016llx)", h->rank,
                 (unsigned long long)h->key, (unsigned long long)key);
    else if (h->shared_len != shared_len)
        snprintf(note, cap, "rank %u expects %u shared bytes, rank 0 has %zu", h->rank,
                 h->shared_len, shared_len);
    else
        return NULL;
    return note;
}

/* The ranks that have not joined, as "2, 5" (or the first few). */
static void list_missing(const struct dist_group *g, char *out, size_t cap) {
    size_t at = 0;
    out[0] = 0;
    for (int r = 1; r < g->world && at + 16 < cap; r++)
        if (g->fds[r] < 0)
            at += (size_t)snprintf(out + at, cap - at, "%s%d", at ? ", " : "", r);
}

static enum ox_status root_join(struct dist_group *g, const struct dist_params *p,
                                const void *shared, size_t shared_len) {
    int lfd = -1;
    enum ox_status st = listen_on(p->addr, &lfd);
    if (st) {
        group_close(g);
        return st;
    }
    const int64_t deadline = now_ms() + p->timeout_ms;
    char note[DIST_NOTE_MAX + 1];
    for (int joined = 1; joined < g->world;) {
        int fd = -1;
        if (wait_fd(lfd, POLLIN, deadline) == 0)
            fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0 && now_ms() >= deadline) {
            char missing[128];
            list_missing(g, missing, sizeof missing);
            snprintf(note, sizeof note, "rank 0 gave up: rank%s %s did not join within %d ms",
                     g->world - joined > 1 ? "s" : "", missing, p->timeout_ms);
            close(lfd);
            return refuse_all(g, -1, OX_ERR_IO, note);
        }
        if (fd < 0)
            continue;
        tune(fd);
        uint8_t buf[DIST_HELLO_BYTES];
        struct dist_hello h;
        int64_t hello_by = now_ms() + p->timeout_ms;
        if (read_full(fd, buf, sizeof buf, hello_by < deadline ? hello_by : deadline) ||
            !dist_hello_decode(buf, &h)) {
            close(fd); /* not a rank of ours (a scanner, another program): not the group's end */
            continue;
        }
        if (hello_misfit(g, &h, p->key, shared_len, note, sizeof note)) {
            close(lfd);
            return refuse_all(g, fd, OX_ERR_INVALID_ARG, note);
        }
        g->fds[h.rank] = fd, joined++;
    }
    close(lfd);
    const int64_t by = now_ms() + p->timeout_ms;
    for (int r = 1; r < g->world; r++) {
        int e = send_frame(g->fds[r], DIST_WELCOME, shared, shared_len, by);
        if (e) {
            snprintf(note, sizeof note, "rank %d left while joining (%s)", r, strerror(e));
            return refuse_all(g, -1, OX_ERR_IO, note);
        }
    }
    return OX_OK;
}

/* A connection to rank 0, tried again every DIST_RETRY_MS until the deadline: rank 0 may start
 * after the others. */
static enum ox_status connect_root(const char *addr, int64_t deadline, int timeout_ms, int *out) {
    char host[256];
    int err = 0;
    do {
        enum ox_status st;
        struct addrinfo *list = resolve(addr, false, host, &st);
        if (!list)
            return st;
        for (struct addrinfo *a = list; a; a = a->ai_next) {
            int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
            if (fd < 0) {
                err = errno;
                continue;
            }
            tune(fd);
            int e = connect(fd, a->ai_addr, a->ai_addrlen) ? errno : 0;
            if (e == EINPROGRESS && (e = wait_fd(fd, POLLOUT, deadline)) == 0) {
                socklen_t l = sizeof e;
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &l);
            }
            if (!e) {
                freeaddrinfo(list);
                *out = fd;
                return OX_OK;
            }
            err = e, close(fd);
        }
        freeaddrinfo(list);
        if (now_ms() + DIST_RETRY_MS < deadline)
            nanosleep(&(struct timespec){.tv_nsec = DIST_RETRY_MS * 1000000L}, NULL);
    } while (now_ms() < deadline);
    return ox_fail(OX_ERR_IO, "dist: no rank 0 at %s within %d ms (%s)", addr, timeout_ms,
                   strerror(err ? err : ETIMEDOUT));
}

static enum ox_status member_join(struct dist_group *g, const struct dist_params *p, void *shared,
                                  size_t shared_len) {
    /* rank 0 waits timeout_ms for all ranks; a rank allows it that long to start as well */
    const int64_t deadline = now_ms() + 2 * (int64_t)p->timeout_ms;
    enum ox_status st = connect_root(p->addr, deadline, p->timeout_ms, &g->fds[0]);
    if (st) {
        group_close(g);
        return st;
    }
    uint8_t hello[DIST_HELLO_BYTES], head[DIST_HEADER_BYTES];
    struct dist_hello h = {(uint32_t)p->rank, (uint32_t)p->world, (uint32_t)shared_len, p->key};
    struct dist_header fr;
    dist_hello_encode(&h, hello);
    int e = write_full(g->fds[0], hello, sizeof hello, deadline);
    if (!e)
        e = read_full(g->fds[0], head, sizeof head, deadline);
    if (e) {
        group_close(g);
        return ox_fail(OX_ERR_IO, "dist: rank %d joining rank 0 at %s: %s", p->rank, p->addr,
                       e == EPIPE ? "rank 0 closed the connection" : strerror(e));
    }
    if (!dist_header_decode(head, &fr) || (fr.kind == DIST_WELCOME && fr.len != shared_len) ||
        (fr.kind != DIST_WELCOME && fr.kind != DIST_REFUSAL)) {
        group_close(g);
        return ox_fail(OX_ERR_FORMAT, "dist: %s did not answer as an oxidize rank 0", p->addr);
    }
    char note[DIST_NOTE_MAX + 1] = {0};
    e = read_full(g->fds[0], fr.kind == DIST_WELCOME ? shared : note, (size_t)fr.len, deadline);
    if (e || fr.kind == DIST_REFUSAL) {
        group_close(g);
        return ox_fail(e ? OX_ERR_IO : OX_ERR_INVALID_ARG, "dist: rank %d: %s", p->rank,
                       e ? "rank 0 left while it joined" : note);
    }
    return OX_OK;
}

enum ox_status dist_join(const struct dist_params *p, void *shared, size_t shared_len,
                         struct dist_group **out) {
    *out = NULL;
    if (!p->addr || p->world < 1 || p->rank < 0 || p->rank >= p->world || p->timeout_ms < 1 ||
        shared_len > UINT32_MAX || (shared_len && !shared))
        return ox_fail(OX_ERR_INVALID_ARG, "dist: rank %d of %d, timeout %d ms: out of range",
                       p->rank, p->world, p->timeout_ms);
    struct dist_group *g = group_new(p);
    if (!g)
        return ox_fail(OX_ERR_OOM, "dist: out of memory");
    enum ox_status st = OX_OK;
    if (p->world > 1)
        st = p->rank == 0 ? root_join(g, p, shared, shared_len)
                          : member_join(g, p, shared, shared_len);
    if (st == OX_OK)
        *out = g; /* on failure the join freed it */
    return st;
}

int dist_rank(const struct dist_group *g) {
    return g->rank;
}

int dist_world(const struct dist_group *g) {
    return g->world;
}

static enum ox_status gone(int r, int e) {
    return ox_fail(OX_ERR_IO, "dist: rank %d is gone (%s)", r,
                   e == ETIMEDOUT ? "it took no bytes in time" : strerror(e));
}

enum ox_status dist_send(struct dist_group *g, const void *msg, size_t len) {
    for (int r = 1; r < g->world; r++)
        OX_TRY(dist_send_to(g, r, msg, len));
    return g->rank == 0 && (uint64_t)len <= DIST_MESSAGE_MAX
               ? OX_OK
               : ox_fail(OX_ERR_INVALID_ARG, "dist: only rank 0 sends (%zu bytes)", len);
}

enum ox_status dist_send_to(struct dist_group *g, int r, const void *msg, size_t len) {
    if (g->rank != 0 || (uint64_t)len > DIST_MESSAGE_MAX || r < 1 || r >= g->world)
        return ox_fail(OX_ERR_INVALID_ARG,
                       "dist: only rank 0 sends, to a rank of the group "
                       "(rank %d, %zu bytes)",
                       r, len);
    int e = send_frame(g->fds[r], DIST_MESSAGE, msg, len, now_ms() + g->timeout_ms);
    return e ? gone(r, e) : OX_OK;
}

enum ox_status dist_reply(struct dist_group *g, const void *msg, size_t len) {
    if (g->rank == 0 || g->world < 2 || (uint64_t)len > DIST_MESSAGE_MAX)
        return ox_fail(OX_ERR_INVALID_ARG, "dist: rank %d has no rank 0 to answer (%zu bytes)",
                       g->rank, len);
    int e = send_frame(g->fds[0], DIST_REPLY, msg, len, now_ms() + g->timeout_ms);
    return e ? gone(0, e) : OX_OK;
}

/* Where a message goes: a caller's buffer of cap bytes, or (grow) one realloc'd to fit, up to
 * max bytes. */
struct room {
    uint8_t **buf;
    size_t *cap, max;
    bool grow;
};

/* The next frame from rank `from` (on fd), of kind want (a goodbye from rank 0 too), into r:
 * its first byte whenever it comes (or by wait_ms), the rest promptly. */
static enum ox_status recv_frame(struct dist_group *g, int fd, int from, enum dist_kind want,
                                 const struct room *r, size_t *len, int wait_ms) {
    *len = 0;
    uint8_t head[DIST_HEADER_BYTES];
    struct dist_header fr;
    int e = wait_fd(fd, POLLIN, wait_ms < 0 ? -1 : now_ms() + wait_ms);
    const int64_t deadline = now_ms() + g->timeout_ms;
    if (!e)
        e = read_full(fd, head, sizeof head, deadline);
    if (e == ETIMEDOUT && wait_ms >= 0)
        return ox_fail(OX_ERR_IO, "dist: no message from rank %d within %d ms", from, wait_ms);
    if (e)
        return ox_fail(OX_ERR_IO, "dist: rank %d's connection broke (%s)", from,
                       e == EPIPE ? "closed without a goodbye" : strerror(e));
    if (!dist_header_decode(head, &fr) || (fr.kind != want && fr.kind != DIST_BYE) ||
        (fr.kind == DIST_BYE && from != 0))
        return ox_fail(OX_ERR_FORMAT, "dist: rank %d sent bytes that are not a message", from);
    if (fr.kind == DIST_BYE)
        return ox_fail(OX_ERR_ABORTED, "dist: rank 0 ended the group");
    if (fr.len > *r->cap && (!r->grow || fr.len > r->max))
        return ox_fail(OX_ERR_FORMAT, "dist: a message of %llu bytes, room for %zu",
                       (unsigned long long)fr.len, r->grow ? r->max : *r->cap);
    if (fr.len > *r->cap) {
        uint8_t *b = fr.len <= SIZE_MAX ? realloc(*r->buf, (size_t)fr.len) : NULL;
        if (!b)
            return ox_fail(OX_ERR_OOM, "dist: no memory for a message of %llu bytes",
                           (unsigned long long)fr.len);
        *r->buf = b, *r->cap = (size_t)fr.len;
    }
    e = read_full(fd, *r->buf, (size_t)fr.len, deadline);
    if (e)
        return ox_fail(OX_ERR_IO, "dist: rank %d's message cut short (%s)", from,
                       e == EPIPE ? "connection closed" : strerror(e));
    *len = (size_t)fr.len;
    return OX_OK;
}

enum ox_status dist_recv(struct dist_group *g, void *buf, size_t cap, size_t *len, int wait_ms) {
    uint8_t *b = buf;
    struct room r = {&b, &cap, cap, false};
    *len = 0;
    if (g->rank == 0 || g->world < 2)
        return ox_fail(OX_ERR_INVALID_ARG, "dist: rank %d has no rank 0 to hear", g->rank);
    return recv_frame(g, g->fds[0], 0, DIST_MESSAGE, &r, len, wait_ms);
}

enum ox_status dist_recv_grow(struct dist_group *g, uint8_t **buf, size_t *cap, size_t max,
                              size_t *len, int wait_ms) {
    struct room r = {buf, cap, max, true};
    *len = 0;
    if (g->rank == 0 || g->world < 2)
        return ox_fail(OX_ERR_INVALID_ARG, "dist: rank %d has no rank 0 to hear", g->rank);
    return recv_frame(g, g->fds[0], 0, DIST_MESSAGE, &r, len, wait_ms);
}

enum ox_status dist_recv_reply(struct dist_group *g, int from, uint8_t **buf, size_t *cap,
                               size_t max, size_t *len, int wait_ms) {
    struct room r = {buf, cap, max, true};
    *len = 0;
    if (g->rank != 0 || from < 1 || from >= g->world)
        return ox_fail(OX_ERR_INVALID_ARG, "dist: rank 0 hears the others' answers");
    return recv_frame(g, g->fds[from], from, DIST_REPLY, &r, len, wait_ms);
}

bool dist_peer_lost(struct dist_group *g, int wait_ms, uint64_t *ready, int *which) {
    struct pollfd p[64];
    int rank[64], n = 0;
    for (int r = g->rank == 0 ? 1 : 0; r < (g->rank == 0 ? g->world : 1) && n < 64; r++)
        if (!(*ready >> r & 1) && g->fds[g->rank == 0 ? r : 0] >= 0)
            p[n] =
                (struct pollfd){.fd = g->fds[g->rank == 0 ? r : 0], .events = POLLIN | POLLRDHUP},
            rank[n++] = r;
    if (n == 0) { /* every rank has answered: nothing to look at, but the time */
        poll(NULL, 0, wait_ms);
        return false;
    }
    if (poll(p, (nfds_t)n, wait_ms) <= 0)
        return false;
    for (int i = 0; i < n; i++) {
        char byte;
        ssize_t got = p[i].revents & POLLIN ? recv(p[i].fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) : -1;
        if (got > 0 && g->rank == 0) {
            *ready |= 1ull << rank[i]; /* an answer waits: alive */
        } else if (got > 0 || p[i].revents & (POLLERR | POLLHUP | POLLRDHUP) || got == 0) {
            /* the others: rank 0 sends nothing while they work on its call but a goodbye */
            *which = rank[i];
            return true;
        }
    }
    return false;
}

void dist_shutdown(struct dist_group *g) {
    for (int i = 0; g && i < (g->rank == 0 ? g->world : 1); i++)
        if (g->fds[i] >= 0)
            shutdown(g->fds[i], SHUT_RDWR);
}

void dist_leave(struct dist_group *g) {
    if (!g)
        return;
    if (g->rank == 0) { /* the others learn the group ended, rather than that rank 0 died */
        const int64_t deadline = now_ms() + 1000;
        for (int r = 1; r < g->world; r++)
            if (g->fds[r] >= 0)
                send_frame(g->fds[r], DIST_BYE, NULL, 0, deadline);
    }
    group_close(g);
}

enum ox_status dist_params_from_env(struct dist_params *p, char *addr_buf, size_t addr_cap) {
    static const char *const names[2] = {"RANK", "WORLD_SIZE"};
    int *fields[2] = {&p->rank, &p->world};
    for (int i = 0; i < 2; i++) {
        const char *v = getenv(names[i]);
        if (!v || !*v)
            continue;
        char *end;
        long x = strtol(v, &end, 10);
        if (*end || x < 0 || x > 65535)
            return ox_fail(OX_ERR_INVALID_ARG, "dist: %s='%s' is not a number of 0-65535", names[i],
                           v);
        *fields[i] = (int)x;
    }
    const char *host = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
    if (host && *host) {
        bool v6 = strchr(host, ':') != NULL;
        int n = snprintf(addr_buf, addr_cap, v6 ? "[%s]:%s" : "%s:%s", host,
                         port && *port ? port : "29500");
        uint16_t pt;
        char h[256];
        if (n < 0 || (size_t)n >= addr_cap || !dist_parse_addr(addr_buf, h, sizeof h, &pt))
            return ox_fail(OX_ERR_INVALID_ARG,
                           "dist: MASTER_ADDR='%s' MASTER_PORT='%s' is not "
                           "an address",
                           host, port ? port : "");
        p->addr = addr_buf;
    }
    return OX_OK;
}
