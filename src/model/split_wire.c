/* split_wire.c: a split model's calls as rank 0 sends them to ranks of other processes, and
 * their answers, little-endian whatever the hosts. A call: a fixed header (kind, context,
 * arguments, a context's parameters, counts and flags), then the batch's or text's tokens, its
 * positions, sequences and logit flags where it has them, then the rank's part of a state (or an
 * adapter's bytes). Every count is checked against the bytes there are before anything is read. */
#define _POSIX_C_SOURCE 200809L /* strnlen */
#include <stdlib.h>
#include <string.h>

#include "model/split.h"

enum {
    CALL_MAGIC = 0x4353584f,   /* "OXSC" */
    ANSWER_MAGIC = 0x4153584f, /* "OXSA" */
    HEADER_WORDS = 21,
    HEADER = HEADER_WORDS * 4 + 8, /* the words, then the state part's size */
    HAS_POS = 1,
    HAS_SEQ = 2,
    HAS_LOGITS = 4,
    NORMALIZE = 8,
    MAX_TOKENS = 1 << 24
};

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> 8 * i);
}
static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void put64(uint8_t *p, uint64_t v) {
    put32(p, (uint32_t)v), put32(p + 4, (uint32_t)(v >> 32));
}
static uint64_t get64(const uint8_t *p) {
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* The call's tokens and the arrays it carries (flags), and its part of a state for rank r. */
static int32_t call_tokens(const struct split_call *c) {
    return c->kind == SPLIT_DECODE ? c->batch.n_tokens : c->kind == SPLIT_EMBED ? c->n : 0;
}
static uint32_t call_flags(const struct split_call *c) {
    uint32_t f = c->normalize ? NORMALIZE : 0;
    if (c->kind == SPLIT_DECODE)
        f |= (c->batch.pos ? HAS_POS : 0) | (c->batch.seq_id ? HAS_SEQ : 0) |
             (c->batch.logits ? HAS_LOGITS : 0);
    return f;
}

/* *p made room for n items of `size` bytes (*cap of them now); false when out of memory. */
static bool fit(void **p, size_t *cap, size_t n, size_t size) {
    if (n <= *cap)
        return true;
    void *q = realloc(*p, n * size);
    if (!q)
        return false;
    *p = q, *cap = n;
    return true;
}

void split_wire_free(struct split_wire_room *room) {
    free(room->bytes), free(room->ints), free(room->flags);
    *room = (struct split_wire_room){0};
}

const uint8_t *split_wire_call(const struct split_call *c, int r, struct split_wire_room *room,
                               size_t *len) {
    size_t n = (size_t)call_tokens(c),
           part = c->kind == SPLIT_LOAD || c->kind == SPLIT_LORA ? c->size[r] : 0;
    uint32_t f = call_flags(c);
    size_t ints = n * (1 + !!(f & HAS_POS) + !!(f & HAS_SEQ)), bools = f & HAS_LOGITS ? n : 0;
    *len = HEADER + 4 * ints + bools + part;
    if (!fit((void **)&room->bytes, &room->bytes_cap, *len, 1))
        return NULL;
    uint8_t *out = room->bytes, *p = out;
    const struct ox_context_params *q = &c->params;
    const uint32_t w[HEADER_WORDS] = {CALL_MAGIC,
                                      (uint32_t)c->kind,
                                      c->ctx,
                                      (uint32_t)c->kv,
                                      (uint32_t)c->a[0],
                                      (uint32_t)c->a[1],
                                      (uint32_t)c->a[2],
                                      (uint32_t)c->a[3],
                                      q->n_ctx,
                                      q->n_batch,
                                      (uint32_t)q->n_threads,
                                      q->n_seq_max,
                                      (uint32_t)q->kv_type,
                                      q->embeddings,
                                      (uint32_t)n,
                                      f,
                                      (uint32_t)c->pooling,
                                      c->kind == SPLIT_SAVE ? (uint32_t)c->size[r] : 0,
                                      c->kind == SPLIT_SAVE ? (uint32_t)((uint64_t)c->size[r] >> 32)
                                                            : 0,
                                      0,
                                      0};
    for (int i = 0; i < HEADER_WORDS; i++, p += 4)
        put32(p, w[i]);
    put64(p, part), p += 8;
    const int32_t *arrays[3] = {c->kind == SPLIT_DECODE ? c->batch.token : c->tokens,
                                f & HAS_POS ? c->batch.pos : NULL,
                                f & HAS_SEQ ? c->batch.seq_id : NULL};
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; arrays[k] && i < n; i++, p += 4)
            put32(p, (uint32_t)arrays[k][i]);
    for (size_t i = 0; i < bools; i++)
        *p++ = c->batch.logits[i] ? 1 : 0;
    if (part)
        memcpy(p, c->buf + c->at[r], part);
    return out;
}

static enum ox_status bad(const char *what) {
    return ox_fail(OX_ERR_FORMAT, "split: rank 0 sent a call that does not parse (%s)", what);
}

enum ox_status split_wire_read_call(const uint8_t *in, size_t len, struct split_call *c,
                                    struct split_wire_room *room) {
    memset(c, 0, sizeof *c);
    if (len < HEADER || get32(in) != CALL_MAGIC)
        return bad("header");
    uint32_t w[HEADER_WORDS];
    for (int i = 0; i < HEADER_WORDS; i++)
        w[i] = get32(in + 4 * i);
    uint64_t part = get64(in + 4 * HEADER_WORDS);
    uint32_t n = w[14], f = w[15];
    if (w[1] > SPLIT_LORA || w[3] > SPLIT_ONE_TOKEN || f > 15 || w[16] >= OX_POOLING_COUNT ||
        n > MAX_TOKENS || ((w[1] == SPLIT_DECODE || w[1] == SPLIT_EMBED) != (n > 0)) ||
        (w[1] != SPLIT_DECODE && (f & (HAS_POS | HAS_SEQ | HAS_LOGITS))) ||
        (w[1] != SPLIT_LOAD && w[1] != SPLIT_LORA && part) ||
        (w[1] != SPLIT_SAVE && (w[17] || w[18])) || w[19] || w[20] || w[13] > 1)
        return bad("fields");
    size_t ints = (size_t)n * (1 + !!(f & HAS_POS) + !!(f & HAS_SEQ));
    size_t bools = f & HAS_LOGITS ? n : 0, body = len - HEADER;
    if (body < 4 * ints + bools || body - 4 * ints - bools != part)
        return bad("lengths");
    c->kind = (enum split_call_kind)w[1], c->ctx = w[2], c->kv = (enum split_kv_op)w[3];
    for (int i = 0; i < 4; i++)
        c->a[i] = (int32_t)w[4 + i];
    c->params = (struct ox_context_params){.n_ctx = w[8],
                                           .n_batch = w[9],
                                           .n_threads = (int32_t)w[10],
                                           .n_seq_max = w[11],
                                           .kv_type = (enum ox_dtype)w[12],
                                           .embeddings = w[13] != 0};
    c->pooling = (enum ox_pooling)(int32_t)w[16], c->normalize = f & NORMALIZE;
    c->size[0] = c->kind == SPLIT_SAVE ? (size_t)((uint64_t)w[18] << 32 | w[17]) : (size_t)part;
    if (!fit((void **)&room->ints, &room->ints_cap, ints ? ints : 1, sizeof *room->ints) ||
        !fit((void **)&room->flags, &room->flags_cap, bools ? bools : 1, 1))
        return ox_fail(OX_ERR_OOM, "split: out of memory for a call of %u tokens", n);
    const uint8_t *p = in + HEADER;
    for (size_t i = 0; i < ints; i++, p += 4)
        room->ints[i] = (int32_t)get32(p);
    for (size_t i = 0; i < bools; i++, p++) {
        if (*p > 1)
            return bad("logit flags");
        room->flags[i] = *p != 0;
    }
    const int32_t *next = room->ints + n;
    c->tokens = room->ints, c->n = (int32_t)n;
    c->batch = (struct ox_batch){.n_tokens = (int32_t)n, .token = room->ints};
    if (f & HAS_POS)
        c->batch.pos = next, next += n;
    if (f & HAS_SEQ)
        c->batch.seq_id = next;
    if (f & HAS_LOGITS)
        c->batch.logits = room->flags;
    c->buf = (uint8_t *)p; /* a LOAD's or LORA's part: at[0] = 0 */
    return OX_OK;
}

const uint8_t *split_wire_answer(enum ox_status st, const char *msg, uint64_t value,
                                 const uint8_t *bytes, size_t n_bytes, struct split_wire_room *room,
                                 size_t *len) {
    size_t m = st == OX_OK ? 0 : strnlen(msg, 1024);
    *len = 24 + m + n_bytes;
    if (!fit((void **)&room->bytes, &room->bytes_cap, *len, 1))
        return NULL;
    uint8_t *out = room->bytes;
    put32(out, ANSWER_MAGIC), put32(out + 4, (uint32_t)st), put32(out + 8, (uint32_t)m);
    put32(out + 12, 0), put64(out + 16, value);
    memcpy(out + 24, msg, m);
    if (n_bytes)
        memcpy(out + 24 + m, bytes, n_bytes);
    return out;
}

enum ox_status split_wire_read_answer(const uint8_t *in, size_t len, enum ox_status *st,
                                      const char **msg, size_t *msg_len, uint64_t *value,
                                      const uint8_t **bytes, size_t *n_bytes) {
    if (len < 24 || get32(in) != ANSWER_MAGIC || get32(in + 8) > 1024 || get32(in + 12) != 0 ||
        get32(in + 8) > len - 24)
        return ox_fail(OX_ERR_FORMAT, "split: a rank answered with bytes that do not parse");
    *st = (enum ox_status)get32(in + 4);
    *msg_len = get32(in + 8), *msg = (const char *)in + 24;
    *value = get64(in + 16);
    *bytes = in + 24 + *msg_len, *n_bytes = len - 24 - *msg_len;
    return OX_OK;
}
