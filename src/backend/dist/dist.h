/* dist.h: the processes that run one model together (a rank per GPU, on one host or several):
 * they meet at rank 0's TCP address, which hands each the bytes all ranks must share (NCCL's
 * unique id), then sends the others its messages (the batches they follow). Every wait is
 * bounded or watched, so a rank that dies ends the group with an error on every rank, never a
 * hang. */
#ifndef OX_BACKEND_DIST_H
#define OX_BACKEND_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oxidize.h"

struct dist_group;

struct dist_params {
    const char *addr; /* rank 0's HOST:PORT ([IPv6]:PORT); rank 0 listens there */
    int rank, world;  /* 0 <= rank < world */
    int timeout_ms;   /* joining, and any message once it has begun */
    uint64_t key;     /* what every rank must agree on (the model's identity) */
};

/* Rank, world and address from the environment variables torchrun and most launchers set
 * (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE); fields whose variable is unset keep their
 * value. OX_ERR_INVALID_ARG naming the variable that does not parse. */
enum ox_status dist_params_from_env(struct dist_params *p, char *addr_buf, size_t addr_cap);

/* Joins the group. Rank 0 waits up to timeout_ms for every other rank, then sends each the
 * shared_len bytes at shared; the others receive them there. A rank with another world size,
 * key or shared_len, or a rank number taken twice, ends the group on every rank that joined
 * (each gets the reason); connections that are not ranks of ours are dropped. */
enum ox_status dist_join(const struct dist_params *p, void *shared, size_t shared_len,
                         struct dist_group **out);

int dist_rank(const struct dist_group *g);
int dist_world(const struct dist_group *g);

/* Rank 0: len bytes to every other rank, in order. An error names the rank that is gone (or
 * took no bytes for timeout_ms); the group is then unusable: dist_leave it. */
enum ox_status dist_send(struct dist_group *g, const void *msg, size_t len);

/* The other ranks: rank 0's next message into buf (cap bytes; *len its size). wait_ms < 0
 * waits as long as rank 0 lives (TCP keepalive notices a host that vanished). OX_ERR_ABORTED
 * when rank 0 ended the group; OX_ERR_IO when its connection broke; OX_ERR_FORMAT for a
 * message over cap or not of ours. */
enum ox_status dist_recv(struct dist_group *g, void *buf, size_t cap, size_t *len, int wait_ms);

/* dist_send to rank r alone. */
enum ox_status dist_send_to(struct dist_group *g, int r, const void *msg, size_t len);

/* dist_recv into *buf, made larger (realloc, *cap its size) for a message of up to max bytes. */
enum ox_status dist_recv_grow(struct dist_group *g, uint8_t **buf, size_t *cap, size_t max,
                              size_t *len, int wait_ms);

/* The other ranks: their answer to rank 0's message; rank 0 takes rank r's (as dist_recv_grow:
 * OX_ERR_IO where the rank is gone or sent nothing for wait_ms). */
enum ox_status dist_reply(struct dist_group *g, const void *msg, size_t len);
enum ox_status dist_recv_reply(struct dist_group *g, int r, uint8_t **buf, size_t *cap, size_t max,
                               size_t *len, int wait_ms);

/* Whether a rank this one talks to (rank 0: the others; the others: rank 0) is gone, seen
 * within wait_ms: its connection closed or broke (*which: that rank); for the others, also any
 * bytes from rank 0 (it sends none while they work on its call but a goodbye). On rank 0 a rank
 * with bytes waiting (an answer) is alive: its bit in *ready (all 0 at first) spares it the
 * next looks. */
bool dist_peer_lost(struct dist_group *g, int wait_ms, uint64_t *ready, int *which);

/* Ends every connection at once (both ways): the other ranks see the group end. */
void dist_shutdown(struct dist_group *g);

/* Leaves the group (rank 0 first tells the others it ends); NULL is a no-op. */
void dist_leave(struct dist_group *g);

/* ---- the wire (dist_wire.c): what a rank sends when it joins and what rank 0 answers ---- */

/* A frame's payload may be as long as a rank's part of a saved state (a long context's cache
 * rows: past 4 GiB for a 70B model's); its header holds 64 bits of length, up to this. */
#define DIST_MESSAGE_MAX ((uint64_t)1 << 40)
/* The most a receive may grow its buffer to: that, or all a 32-bit address space holds. */
#define DIST_RECV_MAX (SIZE_MAX < DIST_MESSAGE_MAX ? SIZE_MAX : (size_t)DIST_MESSAGE_MAX)
enum { DIST_HELLO_BYTES = 32, DIST_HEADER_BYTES = 16, DIST_NOTE_MAX = 255 };
enum dist_kind { DIST_HELLO = 1, DIST_WELCOME, DIST_REFUSAL, DIST_MESSAGE, DIST_BYE, DIST_REPLY };

struct dist_hello {
    uint32_t rank, world, shared_len;
    uint64_t key;
};

/* A frame's header: its kind and the payload bytes after it. */
struct dist_header {
    enum dist_kind kind;
    uint64_t len;
};

void dist_hello_encode(const struct dist_hello *h, uint8_t out[DIST_HELLO_BYTES]);
/* false for bytes that are not a hello of this version. */
bool dist_hello_decode(const uint8_t in[DIST_HELLO_BYTES], struct dist_hello *h);
void dist_header_encode(enum dist_kind kind, uint64_t len, uint8_t out[DIST_HEADER_BYTES]);
/* false for bytes that are not a header of this version, of a kind rank 0 sends or an answer,
 * or of a length past DIST_MESSAGE_MAX. */
bool dist_header_decode(const uint8_t in[DIST_HEADER_BYTES], struct dist_header *h);

/* "HOST:PORT" or "[IPv6]:PORT" into host (NUL-terminated, at most host_cap - 1 bytes) and a
 * port of 1-65535; false with nothing promised for anything else. */
bool dist_parse_addr(const char *s, char *host, size_t host_cap, uint16_t *port);

#endif
