/* stacks.c: a deduplicated set of parse stacks in one flat buffer, and incremental UTF-8. */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"

static uint64_t hash_stack(const uint32_t *st, uint32_t n) {
    uint64_t h = 1469598103934665603ull ^ n;
    for (uint32_t i = 0; i < n; i++)
        h = (h ^ st[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap && *p) /* allocate even for zero, so data + n_data is never NULL + 0 */
        return true;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

static bool rehash(struct gram_stacks *s, size_t tcap) {
    uint32_t *t = calloc(tcap, sizeof(*t));
    if (!t)
        return false;
    for (size_t i = 0; i < s->count; i++) {
        size_t h = hash_stack(s->data + s->off[i], s->len[i]) & (tcap - 1);
        while (t[h])
            h = (h + 1) & (tcap - 1);
        t[h] = (uint32_t)i + 1;
    }
    free(s->table);
    s->table = t;
    s->tcap = tcap;
    return true;
}

void gram_stacks_clear(struct gram_stacks *s) {
    s->n_data = s->count = 0;
    if (s->table)
        memset(s->table, 0, s->tcap * sizeof(*s->table));
}

void gram_stacks_free(struct gram_stacks *s) {
    free(s->data);
    free(s->off);
    free(s->len);
    free(s->table);
    memset(s, 0, sizeof(*s));
}

enum ox_status gram_stacks_add(struct gram_stacks *s, const uint32_t *st, uint32_t n, bool *added) {
    *added = false;
    if ((s->count + 1) * 2 > s->tcap && !rehash(s, s->tcap ? s->tcap * 2 : 64))
        return ox_fail(OX_ERR_OOM, "grammar: out of memory");
    size_t h = hash_stack(st, n) & (s->tcap - 1);
    for (; s->table[h]; h = (h + 1) & (s->tcap - 1)) {
        size_t i = s->table[h] - 1;
        if (s->len[i] == n && memcmp(s->data + s->off[i], st, n * sizeof(*st)) == 0)
            return OX_OK;
    }
    size_t cap_len = s->cap; /* off and len share one capacity */
    if (!grow((void **)&s->data, &s->cap_data, s->n_data + n, sizeof(*s->data)) ||
        !grow((void **)&s->len, &cap_len, s->count + 1, sizeof(*s->len)) ||
        !grow((void **)&s->off, &s->cap, cap_len, sizeof(*s->off)))
        return ox_fail(OX_ERR_OOM, "grammar: out of memory");
    memcpy(s->data + s->n_data, st, n * sizeof(*st));
    s->off[s->count] = s->n_data;
    s->len[s->count] = n;
    s->n_data += n;
    s->table[h] = (uint32_t)++s->count;
    *added = true;
    return OX_OK;
}

enum ox_status gram_stacks_copy(struct gram_stacks *dst, const struct gram_stacks *src) {
    gram_stacks_clear(dst);
    for (size_t i = 0; i < src->count; i++) {
        bool added;
        OX_TRY(gram_stacks_add(dst, src->data + src->off[i], src->len[i], &added));
    }
    return OX_OK;
}

int gram_u8_feed(struct gram_u8 *d, uint8_t b, uint32_t *cp) {
    if (d->need == 0) {
        if (b < 0x80) {
            *cp = b;
            return 1;
        }
        if (b >= 0xC2 && b <= 0xDF)
            *d = (struct gram_u8){b & 0x1Fu, 1, 2};
        else if (b >= 0xE0 && b <= 0xEF)
            *d = (struct gram_u8){b & 0x0Fu, 2, 3};
        else if (b >= 0xF0 && b <= 0xF4)
            *d = (struct gram_u8){b & 0x07u, 3, 4};
        else
            return -1;
        return 0;
    }
    if ((b & 0xC0) != 0x80)
        return -1;
    d->acc = (d->acc << 6) | (b & 0x3Fu);
    /* Reject overlong forms and surrogates as soon as the second byte shows them. */
    if (d->need == d->total - 1) {
        uint32_t lo = d->acc << (6 * (d->need - 1)), hi = lo | ((1u << (6 * (d->need - 1))) - 1);
        if ((d->total == 3 && hi < 0x800) || (d->total == 3 && lo >= 0xD800 && hi <= 0xDFFF) ||
            (d->total == 4 && (hi < 0x10000 || lo > 0x10FFFF)))
            return -1;
    }
    if (--d->need)
        return 0;
    *cp = d->acc;
    return 1;
}

enum ox_status gram_stacks_push(struct gram_stacks *s, const uint32_t *st, uint32_t n) {
    size_t cap_len = s->cap;
    if (!grow((void **)&s->data, &s->cap_data, s->n_data + n, sizeof(*s->data)) ||
        !grow((void **)&s->len, &cap_len, s->count + 1, sizeof(*s->len)) ||
        !grow((void **)&s->off, &s->cap, cap_len, sizeof(*s->off)))
        return ox_fail(OX_ERR_OOM, "grammar: out of memory");
    memcpy(s->data + s->n_data, st, n * sizeof(*st));
    s->off[s->count] = s->n_data;
    s->len[s->count++] = n;
    s->n_data += n;
    return OX_OK;
}

uint32_t gram_stacks_pop(struct gram_stacks *s, uint32_t *buf) {
    uint32_t n = s->len[--s->count];
    s->n_data = s->off[s->count];
    memcpy(buf, s->data + s->n_data, n * sizeof(*buf));
    return n;
}

void gram_u8_range(const struct gram_u8 *d, uint32_t *lo, uint32_t *hi) {
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    static const uint32_t max_cp[5] = {0, 0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
    uint32_t shift = 6u * d->need;
    *lo = d->acc << shift;
    *hi = *lo | ((1u << shift) - 1);
    if (*lo < min_cp[d->total])
        *lo = min_cp[d->total];
    if (*hi > max_cp[d->total])
        *hi = max_cp[d->total];
}
