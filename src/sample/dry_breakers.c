/* dry_breakers.c: turns DRY's sequence-breaker strings into token sequences over a vocab. */
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "sample/sample.h"

enum { MAX_BREAKER_CHARS = 40, MAX_TAIL_TOKENS = 20 }; /* llama.cpp's caps */

/* Growable list of sequences (head, tail...) in one pool. */
struct seqs {
    int32_t *pool;
    size_t n_pool, cap_pool;
    size_t *off, *len;
    size_t n, cap;
};

static bool seqs_add(struct seqs *q, int32_t head, const int32_t *tail, size_t n_tail) {
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 64;
        size_t *off = realloc(q->off, cap * sizeof *off);
        if (off)
            q->off = off;
        size_t *len = realloc(q->len, cap * sizeof *len);
        if (len)
            q->len = len;
        if (!off || !len)
            return false;
        q->cap = cap;
    }
    if (q->n_pool + 1 + n_tail > q->cap_pool) {
        size_t cap = (q->cap_pool + 1 + n_tail) * 2;
        int32_t *p = realloc(q->pool, cap * sizeof *p);
        if (!p)
            return false;
        q->pool = p;
        q->cap_pool = cap;
    }
    q->off[q->n] = q->n_pool;
    q->len[q->n++] = 1 + n_tail;
    q->pool[q->n_pool++] = head;
    if (n_tail)
        memcpy(q->pool + q->n_pool, tail, n_tail * sizeof *tail);
    q->n_pool += n_tail;
    return true;
}

static void seqs_free(struct seqs *q) {
    free(q->pool);
    free(q->off);
    free(q->len);
}

/* For one token's text: containing the whole breaker makes the token a breaker by itself;
 * else every place where the text ends in a prefix of the breaker makes the token a head,
 * with the rest of the breaker (tokenized, at most 20 tokens) as its tail. Duplicate
 * entries, which llama.cpp drops, change no result and are kept. */
static enum ox_status token_breakers(const struct ox_vocab *v, int32_t id, const char *w, size_t wl,
                                     const char *b, size_t bl, struct seqs *q) {
    for (size_t pos = 0; pos + bl <= wl; pos++)
        if (memcmp(w + pos, b, bl) == 0)
            return seqs_add(q, id, NULL, 0) ? OX_OK : ox_fail(OX_ERR_OOM, "sampler: out of memory");
    for (size_t pos = 0; pos < wl; pos++) {
        if (w[pos] != b[0])
            continue;
        size_t i = 1;
        while (i < bl && i + pos < wl && w[pos + i] == b[i])
            i++;
        if (i < bl && i + pos < wl)
            continue; /* mismatch inside the text */
        int32_t tail[MAX_TAIL_TOKENS];
        size_t n_tail = 0;
        OX_TRY(ox_tokenize(v, b + i, bl - i, tail, MAX_TAIL_TOKENS, &n_tail, false, false));
        if (n_tail > MAX_TAIL_TOKENS)
            n_tail = MAX_TAIL_TOKENS;
        if (!seqs_add(q, id, tail, n_tail))
            return ox_fail(OX_ERR_OOM, "sampler: out of memory");
    }
    return OX_OK;
}

/* Every token's text (special tokens rendered) against one breaker string. */
static enum ox_status vocab_breakers(const struct ox_vocab *v, const char *b, struct seqs *q) {
    size_t bl = strlen(b);
    if (bl > MAX_BREAKER_CHARS)
        bl = MAX_BREAKER_CHARS;
    char small[256], *w = small;
    size_t cap = sizeof small;
    enum ox_status st = OX_OK;
    const int32_t n = ox_vocab_n_tokens(v);
    for (int32_t id = 0; id < n && st == OX_OK; id++) {
        int64_t wl = ox_detokenize(v, &id, 1, w, cap, false, true);
        if (wl > (int64_t)cap) {
            char *big = malloc((size_t)wl);
            if (!big) {
                st = ox_fail(OX_ERR_OOM, "sampler: out of memory");
                break;
            }
            if (w != small)
                free(w);
            w = big;
            cap = (size_t)wl;
            wl = ox_detokenize(v, &id, 1, w, cap, false, true);
        }
        if (wl > 0)
            st = token_breakers(v, id, w, (size_t)wl, b, bl, q);
    }
    if (w != small)
        free(w);
    return st;
}

/* Disabled settings (multiplier 0, base < 1, last_n 0) skip the vocab scan, as llama.cpp. */
enum ox_status ox_sampler_add_dry(struct ox_sampler *s, const struct ox_vocab *vocab,
                                  float multiplier, float base, int32_t allowed_length,
                                  int32_t penalty_last_n, const char *const *breakers,
                                  size_t n_breakers) {
    const bool enabled = multiplier != 0.0f && base >= 1.0f && penalty_last_n > 0;
    if (!enabled || n_breakers == 0)
        return smp_sampler_add_dry_tokens(s, multiplier, base, allowed_length, penalty_last_n, NULL,
                                          NULL, 0);
    if (!s || !vocab || !breakers)
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: add_dry needs a sampler, vocab and breakers");
    struct seqs q = {0};
    enum ox_status st = OX_OK;
    for (size_t i = 0; i < n_breakers && st == OX_OK; i++)
        if (breakers[i] && breakers[i][0]) /* NULL and empty ones are skipped */
            st = vocab_breakers(vocab, breakers[i], &q);
    const int32_t **ptr = NULL;
    if (st == OX_OK && q.n && !(ptr = malloc(q.n * sizeof *ptr)))
        st = ox_fail(OX_ERR_OOM, "sampler: out of memory");
    for (size_t i = 0; st == OX_OK && i < q.n; i++)
        ptr[i] = q.pool + q.off[i];
    if (st == OX_OK)
        st = smp_sampler_add_dry_tokens(s, multiplier, base, allowed_length, penalty_last_n,
                                        (const int32_t *const *)ptr, q.len, q.n);
    free(ptr);
    seqs_free(&q);
    return st;
}
