/* dist_wire.c: the bytes ranks exchange when they join (a hello, rank 0's welcome or refusal)
 * and the frames of rank 0's messages, little-endian whatever the hosts; and rank 0's address
 * as users write it. */
#include <stdlib.h>
#include <string.h>

#include "backend/dist/dist.h"

static const uint8_t DIST_MAGIC[4] = {'O', 'X', 'D', 'G'};
enum { DIST_VERSION = 1 };

static void put16(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8);
}
static void put32(uint8_t *p, uint32_t v) {
    put16(p, v), put16(p + 2, v >> 16);
}
static uint32_t get16(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}
static uint32_t get32(const uint8_t *p) {
    return get16(p) | get16(p + 2) << 16;
}

/* magic, version, kind: the first 8 bytes of every frame */
static void put_lead(uint8_t *p, enum dist_kind kind) {
    memcpy(p, DIST_MAGIC, 4);
    put16(p + 4, DIST_VERSION), put16(p + 6, (uint32_t)kind);
}
static bool lead_is(const uint8_t *p, uint32_t *kind) {
    *kind = get16(p + 6);
    return !memcmp(p, DIST_MAGIC, 4) && get16(p + 4) == DIST_VERSION;
}

void dist_hello_encode(const struct dist_hello *h, uint8_t out[DIST_HELLO_BYTES]) {
    memset(out, 0, DIST_HELLO_BYTES);
    put_lead(out, DIST_HELLO);
    put32(out + 8, h->rank), put32(out + 12, h->world);
    put32(out + 16, (uint32_t)h->key), put32(out + 20, (uint32_t)(h->key >> 32));
    put32(out + 24, h->shared_len);
}

bool dist_hello_decode(const uint8_t in[DIST_HELLO_BYTES], struct dist_hello *h) {
    uint32_t kind;
    if (!lead_is(in, &kind) || kind != DIST_HELLO || get32(in + 28) != 0)
        return false;
    h->rank = get32(in + 8), h->world = get32(in + 12);
    h->key = (uint64_t)get32(in + 16) | (uint64_t)get32(in + 20) << 32;
    h->shared_len = get32(in + 24);
    return true;
}

/* The length's low word at 8, its high word at 12 (zero below 4 GiB, as before it was read). */
void dist_header_encode(enum dist_kind kind, uint64_t len, uint8_t out[DIST_HEADER_BYTES]) {
    memset(out, 0, DIST_HEADER_BYTES);
    put_lead(out, kind);
    put32(out + 8, (uint32_t)len), put32(out + 12, (uint32_t)(len >> 32));
}

bool dist_header_decode(const uint8_t in[DIST_HEADER_BYTES], struct dist_header *h) {
    uint32_t kind;
    if (!lead_is(in, &kind) || kind < DIST_WELCOME || kind > DIST_REPLY)
        return false;
    h->kind = (enum dist_kind)kind;
    h->len = (uint64_t)get32(in + 8) | (uint64_t)get32(in + 12) << 32;
    if (h->len > DIST_MESSAGE_MAX)
        return false;
    /* a refusal's note is short; a goodbye carries nothing */
    return !(h->kind == DIST_REFUSAL && h->len > DIST_NOTE_MAX) && !(h->kind == DIST_BYE && h->len);
}

bool dist_parse_addr(const char *s, char *host, size_t host_cap, uint16_t *port) {
    const char *h = s, *colon;
    size_t n;
    if (*s == '[') { /* [IPv6]:PORT */
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':')
            return false;
        h = s + 1, n = (size_t)(close - h), colon = close + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon || memchr(s, ':', (size_t)(colon - s))) /* a bare IPv6 address is ambiguous */
            return false;
        n = (size_t)(colon - s);
    }
    if (n == 0 || n >= host_cap)
        return false;
    for (size_t i = 0; i < n; i++) /* names and addresses: printable, no spaces */
        if (h[i] <= ' ' || h[i] >= 127)
            return false;
    const char *digits = colon + 1;
    if (!*digits || strlen(digits) > 5 || strspn(digits, "0123456789") != strlen(digits))
        return false;
    long v = strtol(digits, NULL, 10);
    if (v < 1 || v > 65535)
        return false;
    memcpy(host, h, n);
    host[n] = 0;
    *port = (uint16_t)v;
    return true;
}
