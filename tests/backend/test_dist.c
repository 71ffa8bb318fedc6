/* test_dist.c: the group of ranks over TCP on this host's loopback: joining, rank 0's shared
 * bytes and messages, every misconfiguration and lost rank as an error on every rank within
 * its timeout (never a hang), the wire's encodings and the addresses users write. */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/dist/dist.h"
#include "core/status.h"
#include "test.h"
#include "test_port.h"

enum { SHARED = 128, TIMEOUT = 2000 };

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* One rank on a thread: joins, then (rank > 0) takes messages until the group ends. */
struct rank_run {
    struct dist_params p;
    uint8_t shared[SHARED];
    size_t shared_len;
    int late_ms;           /* starts this late */
    int leave_after;       /* messages taken before leaving (-1: until the group ends) */
    enum ox_status joined; /* dist_join's status */
    enum ox_status ended;  /* the status that ended its messages */
    char error[256];
    int messages;
    size_t bytes;
    uint32_t sum; /* of every byte received */
    struct dist_group *g;
};

static void *run_rank(void *arg) {
    struct rank_run *r = arg;
    if (r->late_ms)
        usleep((useconds_t)r->late_ms * 1000);
    r->joined = dist_join(&r->p, r->shared, r->shared_len, &r->g);
    if (r->joined) {
        snprintf(r->error, sizeof r->error, "%s", ox_last_error());
        return NULL;
    }
    if (r->p.rank == 0)
        return NULL; /* the test drives rank 0 */
    uint8_t *buf = malloc(1 << 20);
    for (; r->leave_after < 0 || r->messages < r->leave_after; r->messages++) {
        size_t len;
        r->ended = dist_recv(r->g, buf, 1 << 20, &len, -1);
        if (r->ended) {
            snprintf(r->error, sizeof r->error, "%s", ox_last_error());
            break;
        }
        r->bytes += len;
        for (size_t i = 0; i < len; i++)
            r->sum += buf[i];
    }
    free(buf);
    dist_leave(r->g);
    r->g = NULL;
    return NULL;
}

static void init_run(struct rank_run *r, const char *addr, int rank, int world, uint64_t key) {
    memset(r, 0, sizeof *r);
    r->p = (struct dist_params){addr, rank, world, TIMEOUT, key};
    r->shared_len = SHARED;
    r->leave_after = -1;
    if (rank == 0)
        for (int i = 0; i < SHARED; i++)
            r->shared[i] = (uint8_t)(i * 7 + 3);
}

/* A loopback address with a free port into addr (32 bytes), then ranks 0 .. n - 1 of world as
 * init_run makes them. */
static void init_ranks(struct rank_run *r, int n, char *addr, int world, uint64_t key) {
    snprintf(addr, 32, "127.0.0.1:%d", test_free_port());
    for (int i = 0; i < n; i++)
        init_run(&r[i], addr, i, world, key);
}

static void start_ranks(struct rank_run *r, pthread_t *t, int n) {
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, run_rank, &r[i]);
}

/* Four ranks, rank 0 starting last: every rank gets rank 0's bytes and its messages (empty,
 * small, 1 MB), then the goodbye. */
static void test_group(void) {
    char addr[32];
    struct rank_run r[4];
    pthread_t t[4];
    init_ranks(r, 4, addr, 4, 0x5eed);
    r[0].late_ms = 300;
    start_ranks(r, t, 4);
    pthread_join(t[0], NULL);
    CHECK_MSG(r[0].joined == OX_OK, "rank 0: %s", r[0].error);
    static uint8_t big[1 << 20];
    uint32_t sum = 0;
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (uint8_t)(i * 31 >> 3), sum += big[i];
    if (r[0].g) {
        CHECK(dist_rank(r[0].g) == 0 && dist_world(r[0].g) == 4);
        CHECK(dist_send(r[0].g, NULL, 0) == OX_OK);
        CHECK(dist_send(r[0].g, "hello", 5) == OX_OK);
        CHECK(dist_send(r[0].g, big, sizeof big) == OX_OK);
        dist_leave(r[0].g);
    }
    for (int i = 1; i < 4; i++) {
        pthread_join(t[i], NULL);
        CHECK_MSG(r[i].joined == OX_OK, "rank %d: %s", i, r[i].error);
        CHECK(!memcmp(r[i].shared, r[0].shared, SHARED));
        CHECK_EQ(r[i].messages, 3);
        CHECK_EQ(r[i].bytes, 5 + sizeof big);
        CHECK_EQ(r[i].sum, sum + 'h' + 'e' + 'l' + 'l' + 'o');
        CHECK_MSG(r[i].ended == OX_ERR_ABORTED && strstr(r[i].error, "ended the group"),
                  "rank %d: %s", i, r[i].error);
    }
}

/* A rank that answers rank 0's messages (into a buffer that grows, up to 64 KiB): its rank
 * number, then the message; `mute` of them it leaves unanswered, leaving the group instead. */
struct answerer {
    struct dist_params p;
    int mute, answered;
    enum ox_status ended;
    char error[256];
};

static void *answer_all(void *arg) {
    struct answerer *a = arg;
    uint8_t shared[SHARED], *buf = NULL, out[1 << 16];
    size_t cap = 4, len;
    struct dist_group *g = NULL;
    buf = malloc(cap);
    a->ended = dist_join(&a->p, shared, SHARED, &g);
    while (a->ended == OX_OK) {
        a->ended = dist_recv_grow(g, &buf, &cap, 1 << 16, &len, -1);
        if (a->ended != OX_OK || a->mute-- > 0)
            break;
        out[0] = (uint8_t)a->p.rank;
        memcpy(out + 1, buf, len < sizeof out - 1 ? len : sizeof out - 1);
        a->ended = dist_reply(g, out, len + 1);
        a->answered++;
    }
    snprintf(a->error, sizeof a->error, "%s", ox_last_error());
    free(buf);
    dist_leave(g);
    return NULL;
}

/* Rank 0 sends each rank its own messages and takes their answers; a message past a rank's
 * room, and a rank that leaves without answering, are errors rank 0 and that rank report. */
static void test_answers(void) {
    char addr[32];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", test_free_port());
    struct answerer a[3];
    pthread_t t[3];
    for (int r = 1; r < 3; r++) {
        a[r] = (struct answerer){.p = {addr, r, 3, TIMEOUT, 9}, .mute = r == 2 ? 1 : 0};
        pthread_create(&t[r], NULL, answer_all, &a[r]);
    }
    uint8_t shared[SHARED] = {1}, *got = NULL;
    size_t cap = 0, len = 0;
    struct dist_group *g = NULL;
    struct dist_params p = {addr, 0, 3, TIMEOUT, 9};
    CHECK(dist_join(&p, shared, SHARED, &g) == OX_OK);
    static uint8_t big[40000];
    memset(big, 0xab, sizeof big);
    CHECK(g && dist_send_to(g, 1, "one", 3) == OX_OK);
    CHECK(g && dist_recv_reply(g, 1, &got, &cap, 1 << 20, &len, TIMEOUT) == OX_OK && len == 4 &&
          got[0] == 1 && !memcmp(got + 1, "one", 3));
    CHECK(g && dist_send_to(g, 1, big, sizeof big) == OX_OK); /* rank 1's room grows for it */
    CHECK(g && dist_recv_reply(g, 1, &got, &cap, 1 << 20, &len, TIMEOUT) == OX_OK &&
          len == sizeof big + 1 && got[sizeof big] == 0xab && cap >= len);
    free(got), got = NULL, cap = 0;
    CHECK(g && dist_send_to(g, 1, big, 8) == OX_OK); /* an answer past what rank 0 allows */
    CHECK(g && dist_recv_reply(g, 1, &got, &cap, 4, &len, TIMEOUT) == OX_ERR_FORMAT);
    CHECK(g && dist_send_to(g, 2, "two", 3) == OX_OK); /* rank 2 leaves without answering */
    CHECK_MSG(g && dist_recv_reply(g, 2, &got, &cap, 1 << 20, &len, TIMEOUT) == OX_ERR_IO &&
                  strstr(ox_last_error(), "rank 2"),
              "%s", ox_last_error());
    CHECK(g && dist_send_to(g, 0, "x", 1) == OX_ERR_INVALID_ARG);
    CHECK(g && dist_reply(g, "x", 1) == OX_ERR_INVALID_ARG);
    free(got);
    dist_leave(g);
    for (int r = 1; r < 3; r++)
        pthread_join(t[r], NULL);
    CHECK_MSG(a[1].answered == 3 && a[1].ended == OX_ERR_ABORTED, "rank 1: %d, %s", a[1].answered,
              a[1].error);
    CHECK_EQ(a[2].answered, 0);
}

/* Rank 0 and rank 1 (other settings in *odd), and the errors each reports. */
static void pair(const struct rank_run *odd, struct rank_run *r0, struct rank_run *r1) {
    char addr[32];
    struct rank_run r[2];
    pthread_t t[2];
    init_ranks(r, 1, addr, 2, 1);
    r[1] = *odd;
    r[1].p.addr = addr;
    start_ranks(r, t, 2);
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
    dist_leave(r[0].g);
    *r0 = r[0], *r1 = r[1];
}

/* Misconfigured ranks end the group on both sides, each with the reason. */
static void test_refusals(void) {
    struct rank_run odd, r0, r1;
    init_run(&odd, "", 1, 2, 2); /* another model */
    pair(&odd, &r0, &r1);
    CHECK_MSG(r0.joined == OX_ERR_INVALID_ARG && strstr(r0.error, "another model"), "%s", r0.error);
    CHECK_MSG(r1.joined == OX_ERR_INVALID_ARG && strstr(r1.error, "another model"), "%s", r1.error);
    init_run(&odd, "", 1, 3, 1); /* another world size */
    pair(&odd, &r0, &r1);
    CHECK_MSG(r0.joined && r1.joined && strstr(r1.error, "counts 3 ranks"), "%s", r1.error);
    init_run(&odd, "", 1, 2, 1); /* another length of shared bytes */
    odd.shared_len = 64;
    pair(&odd, &r0, &r1);
    CHECK_MSG(r0.joined && r1.joined && strstr(r1.error, "shared bytes"), "%s", r1.error);
}

/* A rank that never comes: rank 0 gives up at its timeout naming it, and the rank that came
 * hears why; a rank with no rank 0 gives up too. */
static void test_missing(void) {
    char addr[32];
    struct rank_run r[2];
    pthread_t t[2];
    init_ranks(r, 2, addr, 3, 9);
    r[0].p.timeout_ms = r[1].p.timeout_ms = 300;
    start_ranks(r, t, 2);
    double t0 = seconds();
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    CHECK(seconds() - t0 < 2.0);
    CHECK_MSG(r[0].joined && strstr(r[0].error, "rank 2 did not join"), "%s", r[0].error);
    CHECK_MSG(r[1].joined && strstr(r[1].error, "rank 2 did not join"), "%s", r[1].error);

    struct rank_run alone[2]; /* rank 1 of 2, rank 0 never started */
    init_ranks(alone, 2, addr, 2, 9);
    alone[1].p.timeout_ms = 200;
    t0 = seconds();
    run_rank(&alone[1]);
    CHECK(seconds() - t0 < 2.0);
    CHECK_MSG(alone[1].joined == OX_ERR_IO && strstr(alone[1].error, "no rank 0"), "%s",
              alone[1].error);
}

/* A connection that is not a rank (garbage, then closed) does not end the group. */
static void test_stray(void) {
    char addr[32];
    struct rank_run r[2];
    pthread_t t[2];
    init_ranks(r, 2, addr, 2, 4);
    r[1].late_ms = 400, r[1].leave_after = 0;
    start_ranks(r, t, 2);
    const int port = atoi(strchr(addr, ':') + 1);
    usleep(150 * 1000);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        uint8_t junk[DIST_HELLO_BYTES];
        memset(junk, 'G', sizeof junk); /* "GGGG...": an HTTP client, say */
        CHECK(write(fd, junk, sizeof junk) == (ssize_t)sizeof junk);
    }
    close(fd);
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
    CHECK_MSG(r[0].joined == OX_OK, "%s", r[0].error);
    CHECK_MSG(r[1].joined == OX_OK, "%s", r[1].error);
    dist_leave(r[0].g);
}

/* Rank 1 leaves (as if it died): rank 0's sends fail naming it. Rank 0 dies (a process killed
 * without its goodbye): rank 1 hears the connection broke, not that the group ended. */
static void test_lost(void) {
    char addr[32];
    struct rank_run r[2];
    pthread_t t[2];
    init_ranks(r, 2, addr, 2, 5);
    r[1].leave_after = 1;
    start_ranks(r, t, 2);
    pthread_join(t[0], NULL);
    enum ox_status st = r[0].g ? dist_send(r[0].g, "x", 1) : OX_ERR_IO;
    CHECK(st == OX_OK);
    pthread_join(t[1], NULL); /* rank 1 took one message and left */
    static uint8_t block[1 << 16];
    for (int i = 0; i < 100 && st == OX_OK; i++)
        st = dist_send(r[0].g, block, sizeof block);
    CHECK_MSG(st == OX_ERR_IO && strstr(ox_last_error(), "rank 1 is gone"), "%s", ox_last_error());
    dist_leave(r[0].g);

    struct rank_run r1[2]; /* rank 0 runs in a child process */
    init_ranks(r1, 2, addr, 2, 6);
    pid_t child = fork();
    if (child == 0) { /* rank 0: joins, sends one message, then is killed */
        struct dist_group *g;
        struct dist_params p = {addr, 0, 2, TIMEOUT, 6};
        uint8_t shared[SHARED] = {0};
        if (dist_join(&p, shared, SHARED, &g) == OX_OK && dist_send(g, "y", 1) == OX_OK)
            pause();
        _exit(1);
    }
    r1[1].leave_after = 2;
    pthread_create(&t[1], NULL, run_rank, &r1[1]);
    usleep(300 * 1000);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    pthread_join(t[1], NULL);
    CHECK_MSG(r1[1].joined == OX_OK && r1[1].messages == 1, "%s", r1[1].error);
    CHECK_MSG(r1[1].ended == OX_ERR_IO && strstr(r1[1].error, "without a goodbye"), "%s",
              r1[1].error);
}

static void test_wire(void) {
    struct dist_hello h = {3, 8, 128, 0x0123456789abcdefull}, back;
    uint8_t b[DIST_HELLO_BYTES];
    dist_hello_encode(&h, b);
    CHECK(dist_hello_decode(b, &back) && back.rank == 3 && back.world == 8 &&
          back.shared_len == 128 && back.key == h.key);
    CHECK(b[8] == 3 && b[16] == 0xef); /* little-endian on every host */
    b[4] = 2;                          /* another version */
    CHECK(!dist_hello_decode(b, &back));
    uint8_t f[DIST_HEADER_BYTES];
    struct dist_header fr;
    dist_header_encode(DIST_MESSAGE, 70000, f);
    CHECK(dist_header_decode(f, &fr) && fr.kind == DIST_MESSAGE && fr.len == 70000);
    CHECK(f[12] == 0 && f[13] == 0 && f[14] == 0 && f[15] == 0); /* as before 64-bit lengths */
    /* a rank's part of a long context's saved state: past 4 GiB, up to DIST_MESSAGE_MAX */
    const uint64_t big = ((uint64_t)5 << 30) + 7;
    dist_header_encode(DIST_REPLY, big, f);
    CHECK(dist_header_decode(f, &fr) && fr.kind == DIST_REPLY && fr.len == big);
    CHECK(f[8] == 7 && f[12] == 1); /* low word, then high word */
    dist_header_encode(DIST_MESSAGE, DIST_MESSAGE_MAX, f);
    CHECK(dist_header_decode(f, &fr) && fr.len == DIST_MESSAGE_MAX);
    dist_header_encode(DIST_MESSAGE, DIST_MESSAGE_MAX + 1, f);
    CHECK(!dist_header_decode(f, &fr));
    dist_header_encode(DIST_REFUSAL, DIST_NOTE_MAX + 1, f); /* notes are short */
    CHECK(!dist_header_decode(f, &fr));
    dist_header_encode(DIST_HELLO, 0, f); /* ranks send hellos, rank 0 does not */
    CHECK(!dist_header_decode(f, &fr));
}

static void test_addresses(void) {
    char host[64];
    uint16_t port;
    CHECK(dist_parse_addr("10.0.0.2:29500", host, sizeof host, &port) && port == 29500);
    CHECK_STR(host, "10.0.0.2");
    CHECK(dist_parse_addr("[fe80::1]:1", host, sizeof host, &port) && port == 1);
    CHECK_STR(host, "fe80::1");
    CHECK(dist_parse_addr("node-7.cluster:65535", host, sizeof host, &port) && port == 65535);
    static const char *const bad[] = {"node",     "node:",       ":80",     "node:0",  "node:65536",
                                      "node:8o",  "::1:80",      "[::1]80", "[::1:80", "no de:80",
                                      "node:+80", "node:123456", "a\x01:80"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(!dist_parse_addr(bad[i], host, sizeof host, &port), "'%s' accepted", bad[i]);
    CHECK(!dist_parse_addr("abcdefgh:80", host, 8, &port)); /* no room for the NUL */

    struct dist_params p = {.rank = 7, .world = 9};
    char buf[300];
    setenv("MASTER_ADDR", "::1", 1), setenv("MASTER_PORT", "4000", 1);
    setenv("RANK", "2", 1), setenv("WORLD_SIZE", "4", 1);
    CHECK(dist_params_from_env(&p, buf, sizeof buf) == OX_OK);
    CHECK(p.rank == 2 && p.world == 4 && p.addr && !strcmp(p.addr, "[::1]:4000"));
    setenv("RANK", "two", 1);
    CHECK(dist_params_from_env(&p, buf, sizeof buf) == OX_ERR_INVALID_ARG);
    unsetenv("MASTER_ADDR"), unsetenv("MASTER_PORT"), unsetenv("RANK"), unsetenv("WORLD_SIZE");
    struct dist_group *g;
    p = (struct dist_params){"127.0.0.1:1", 2, 2, 100, 0};
    CHECK(dist_join(&p, NULL, 0, &g) == OX_ERR_INVALID_ARG && !g);
}

int main(void) {
    alarm(120); /* a hang is a failure, not a wait for ctest's timeout */
    test_wire();
    test_addresses();
    test_group();
    test_answers();
    test_refusals();
    test_missing();
    test_stray();
    test_lost();
    return test_finish("test_dist");
}
