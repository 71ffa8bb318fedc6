/* split_ops.c: the calls on a split model's context that change it, run on every rank: each
 * rank makes the call on its own context as a whole model's context would (rank 0's with the
 * split detached meanwhile), so the ranks place the same tokens in the same cells and meet at
 * the same sums. Ranks of other processes get the call as a message first and answer once this
 * process's ranks are done. A saved state is the ranks' states one after another, after a table
 * of their sizes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/split.h"

#define SPLIT_STATE_MAGIC "OXSPLIT1"

static void kv_call(struct ox_context *ctx, enum split_kv_op op, const int32_t *a) {
    switch (op) {
    case SPLIT_KV_CLEAR: ox_kv_clear(ctx); break;
    case SPLIT_SEQ_RM: ox_kv_seq_rm(ctx, a[0], a[1], a[2]); break;
    case SPLIT_SEQ_CP: ox_kv_seq_cp(ctx, a[0], a[1], a[2], a[3]); break;
    case SPLIT_SEQ_ADD: ox_kv_seq_add(ctx, a[0], a[1], a[2], a[3]); break;
    case SPLIT_ONE_TOKEN: ox_context_set_one_token_order(ctx, a[0] != 0); break;
    }
}

enum ox_status split_apply(struct ox_context **slot, const struct ox_model *sh,
                           struct backend_group *g, int rank, struct split_call *c) {
    struct ox_context *ctx = *slot;
    if (c->kind == SPLIT_CREATE) {
        if (ctx) /* a number rank 0 gave out again while this rank still holds it */
            return ox_fail(OX_ERR_IO, "split: rank %d holds context %u already", rank, c->ctx);
        OX_TRY(ox_context_create(sh, &c->params, slot));
        return context_join_group(*slot, g, rank);
    }
    if (!ctx) /* the ranks are out of step: not a failure every rank shares */
        return ox_fail(OX_ERR_IO, "split: rank %d has no context %u", rank, c->ctx);
    uint8_t *part = c->buf ? c->buf + c->at[rank] : NULL;
    switch (c->kind) {
    case SPLIT_FREE: ox_context_free(ctx), *slot = NULL; return OX_OK;
    case SPLIT_DECODE: return ox_decode(ctx, &c->batch);
    case SPLIT_EMBED: return ox_embed(ctx, c->tokens, c->n, c->pooling, c->normalize, c->out[rank]);
    case SPLIT_KV: kv_call(ctx, c->kv, c->a); return OX_OK;
    case SPLIT_STATE_SIZE: c->size[rank] = ox_state_seq_size(ctx, c->a[0]); return OX_OK;
    case SPLIT_SAVE: return ox_state_seq_save(ctx, c->a[0], part, c->size[rank], NULL);
    case SPLIT_LOAD: return ox_state_seq_load(ctx, c->a[0], part, c->size[rank]);
    case SPLIT_LORA: /* the shard keeps the rank's share of the adapter: the split's own */
        return split_lora_call(ctx, (struct ox_model *)sh, c, part, c->size[rank]);
    case SPLIT_CREATE: break;
    }
    return ox_fail(OX_ERR_INVALID_ARG, "split: call %d", (int)c->kind);
}

/* This process's ranks, each on its thread. */
struct local_call {
    struct model_split *sp;
    struct ox_context **contexts; /* by local rank */
    struct split_call *c;
};

static enum ox_status on_rank(int rank, void *user) {
    struct local_call *u = user;
    int i = rank - u->sp->first;
    enum ox_status st = split_apply(&u->contexts[i], u->sp->shard[i], u->sp->group, rank, u->c);
    if (split_fails_alone(u->c, st)) /* the other ranks may wait in its sums */
        split_break(u->sp);
    return st;
}

/* Rank r's answer: its status (and message), a STATE_SIZE's number, a SAVE's part. */
static enum ox_status take_answer(struct model_split *sp, int r, struct split_call *c,
                                  uint8_t **buf, size_t *cap) {
    size_t len = 0, msg_len = 0, n = 0;
    OX_TRY(dist_recv_reply(sp->dist, r, buf, cap, DIST_RECV_MAX, &len, -1));
    enum ox_status st;
    const char *msg;
    uint64_t value;
    const uint8_t *bytes;
    OX_TRY(split_wire_read_answer(*buf, len, &st, &msg, &msg_len, &value, &bytes, &n));
    if (st != OX_OK)
        return ox_fail((unsigned)st < OX_STATUS_COUNT ? st : OX_ERR_FORMAT, "%.*s", (int)msg_len,
                       msg);
    if (c->kind == SPLIT_STATE_SIZE)
        c->size[r] = (size_t)value;
    if (c->kind == SPLIT_SAVE && n != c->size[r])
        return ox_fail(OX_ERR_FORMAT, "split: rank %d saved %zu bytes, not %zu", r, n, c->size[r]);
    if (c->kind == SPLIT_SAVE)
        memcpy(c->buf + c->at[r], bytes, n);
    return OX_OK;
}

static enum ox_status call_all(struct model_split *sp, struct ox_context **contexts,
                               struct split_call *c) {
    enum ox_status st = OX_OK;
    /* rank 0's process (first 0) drives: the others' ranks follow its local ones */
    if (sp->broken && c->kind != SPLIT_FREE) /* a free still frees this process's contexts */
        return ox_fail(OX_ERR_IO, "split: the ranks' group ended earlier (a rank was lost or "
                                  "failed in a call): load the model again");
    int remote = sp->dist && !sp->broken ? sp->world - sp->n_local : 0, sent = 0;
    for (int r = sp->n_local; r < sp->n_local + remote && st == OX_OK; r++, sent++) {
        size_t len;
        const uint8_t *msg = split_wire_call(c, r, &sp->wire, &len);
        st = msg ? dist_send_to(sp->dist, r, msg, len) : ox_fail(OX_ERR_OOM, "split: no memory");
    }
    sent -= st != OX_OK;
    if (st != OX_OK) /* those that got the call would wait for that rank: the group is over */
        split_break(sp);
    if (st != OX_OK && c->kind != SPLIT_FREE)
        return st;
    struct local_call u = {sp, contexts, c};
    split_watch_begin(sp); /* a rank lost meanwhile ends the sums that wait for it */
    enum ox_status local = split_run(sp, on_rank, &u); /* a FREE goes here whatever came first */
    st = st != OX_OK ? st : local;
    split_watch_end(sp);
    remote = sent;
    char first[512] = "";
    enum ox_status sr = OX_OK; /* a rank of another process that failed says why first: one
                                  that is gone failed this process's sums too */
    for (int r = sp->n_local; r < sp->n_local + remote; r++) { /* every answer, in order */
        enum ox_status e = take_answer(sp, r, c, &sp->answers, &sp->answers_cap);
        if (e != OX_OK && sr == OX_OK)
            sr = e, snprintf(first, sizeof first, "rank %d: %s", r, ox_last_error());
    }
    return sr != OX_OK ? ox_fail(sr, "%s", first) : st;
}

enum ox_status split_call_run(struct model_split *sp, struct ox_context **contexts,
                              struct split_call *c) {
    pthread_mutex_lock(&sp->calls);
    enum ox_status st = call_all(sp, contexts, c);
    pthread_mutex_unlock(&sp->calls);
    return st;
}

/* The call on every rank of ctx's split, rank 0's context detached from it meanwhile. */
static enum ox_status run_call(struct ox_context *ctx, struct split_call *c) {
    struct split_context *sc = ctx->split;
    c->ctx = sc->id;
    ctx->split = NULL;
    enum ox_status st = split_call_run(sc->sp, sc->rank, c);
    ctx->split = sc;
    return st;
}

enum ox_status split_decode(struct ox_context *ctx, const struct ox_batch *b) {
    return run_call(ctx, &(struct split_call){.kind = SPLIT_DECODE, .batch = *b});
}

enum ox_status split_embed(struct ox_context *ctx, const ox_token *tokens, int32_t n,
                           enum ox_pooling pooling, bool normalize, float *out) {
    struct split_call c = {
        .kind = SPLIT_EMBED, .tokens = tokens, .n = n, .pooling = pooling, .normalize = normalize};
    const struct ox_model *m = ctx->split->model;
    size_t e = (size_t)m->cfg.n_embd, cls = (size_t)ox_model_n_cls_out(m);
    size_t width = e > cls ? e : cls;
    int local = ctx->split->sp->n_local;
    float *room = malloc((size_t)local * width * sizeof *room);
    if (!room)
        return ox_fail(OX_ERR_OOM, "embed: out of memory");
    for (int r = 0; r < local; r++)
        c.out[r] = r ? room + (size_t)r * width : out;
    enum ox_status st = run_call(ctx, &c);
    free(room);
    return st;
}

void split_kv(struct ox_context *ctx, enum split_kv_op op, int32_t a, int32_t b, int32_t c,
              int32_t d) {
    struct split_call call = {.kind = SPLIT_KV, .kv = op, .a = {a, b, c, d}};
    run_call(ctx, &call); /* the calls cannot fail but for a lost rank, which the next says */
}

/* The ranks' parts of sequence seq's state: their sizes, and where each starts after the
 * header (the end). */
static size_t parts(struct ox_context *ctx, struct split_call *c, int32_t seq) {
    int world = ctx->split->sp->world;
    c->kind = SPLIT_STATE_SIZE, c->a[0] = seq;
    if (run_call(ctx, c) != OX_OK)
        return 0;
    size_t at = 8 + 8 + 8 * (size_t)world;
    for (int r = 0; r < world; r++) {
        if (c->size[r] == 0)
            return 0;
        c->at[r] = at, at += c->size[r];
    }
    return at;
}

size_t split_state_size(struct ox_context *ctx, int32_t seq) {
    struct split_call c = {0};
    return parts(ctx, &c, seq);
}

enum ox_status split_state_save(struct ox_context *ctx, int32_t seq, uint8_t *buf, size_t cap,
                                size_t *written) {
    struct split_call c = {0};
    size_t need = parts(ctx, &c, seq);
    if (need == 0)
        return ox_fail(OX_ERR_INVALID_ARG, "state: no sequence %d in this context", seq);
    if (!buf || cap < need)
        return ox_fail(OX_ERR_INVALID_ARG, "state: %zu bytes needed (ox_state_seq_size), %zu given",
                       need, cap);
    uint64_t world = (uint64_t)ctx->split->sp->world;
    memcpy(buf, SPLIT_STATE_MAGIC, 8), memcpy(buf + 8, &world, 8);
    for (uint64_t r = 0; r < world; r++)
        memcpy(buf + 16 + 8 * r, &(uint64_t){c.size[r]}, 8);
    c.kind = SPLIT_SAVE, c.buf = buf;
    OX_TRY(run_call(ctx, &c));
    if (written)
        *written = need;
    return OX_OK;
}

/* The ranks' parts of the state in len bytes (more may follow) into c, and where they end. */
static enum ox_status read_parts(const struct ox_context *ctx, const uint8_t *buf, size_t len,
                                 struct split_call *c, size_t *end) {
    int world = ctx->split->sp->world;
    uint64_t n = 0;
    if (buf && len >= 16)
        memcpy(&n, buf + 8, 8);
    if (!buf || len < 16 || memcmp(buf, SPLIT_STATE_MAGIC, 8) != 0 || n != (uint64_t)world ||
        len < 16 + 8 * n)
        return ox_fail(OX_ERR_FORMAT,
                       "state: not the saved state of a model split over %d "
                       "ranks",
                       world);
    size_t at = 16 + 8 * (size_t)world;
    for (int r = 0; r < world; r++) {
        uint64_t size;
        memcpy(&size, buf + 16 + 8 * (size_t)r, 8);
        if (size > len - at)
            return ox_fail(OX_ERR_FORMAT, "state: rank %d's part runs past the end", r);
        c->at[r] = at, c->size[r] = (size_t)size, at += (size_t)size;
    }
    *end = at;
    return OX_OK;
}

enum ox_status split_state_length(const struct ox_context *ctx, const uint8_t *buf, size_t size,
                                  size_t *len) {
    struct split_call c = {0};
    return read_parts(ctx, buf, size, &c, len);
}

enum ox_status split_state_load(struct ox_context *ctx, int32_t seq, const uint8_t *buf,
                                size_t len) {
    struct split_call c = {.kind = SPLIT_LOAD, .buf = (uint8_t *)buf, .a = {seq}};
    size_t end = 0;
    OX_TRY(read_parts(ctx, buf, len, &c, &end));
    if (end != len)
        return ox_fail(OX_ERR_FORMAT, "state: %zu bytes after the ranks' parts", len - end);
    enum ox_status st = run_call(ctx, &c);
    if (st != OX_OK) /* a rank that took its part gives it up: the sequence is empty on all */
        split_kv(ctx, SPLIT_SEQ_RM, seq, -1, -1, 0);
    return st;
}
