/* strmap.c: open-addressing (linear probing) string -> id index with FNV-1a hashing. */
#include "core/strmap.h"

#include <stdlib.h>
#include <string.h>

static uint64_t hash_bytes(const char *s, size_t len) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    return h;
}

static struct strmap_slot *probe(const struct strmap *m, const char *key, size_t len) {
    size_t mask = m->cap - 1;
    for (size_t i = hash_bytes(key, len) & mask;; i = (i + 1) & mask) {
        struct strmap_slot *s = &m->slots[i];
        if (!s->key || (s->len == len && memcmp(s->key, key, len) == 0))
            return s; /* an empty slot always exists: the load factor stays below 1/2 */
    }
}

static enum ox_status grow(struct strmap *m, size_t want) {
    size_t cap = 16;
    while (cap / 2 <= want) {
        if (cap > SIZE_MAX / 4 / sizeof(struct strmap_slot))
            return ox_fail(OX_ERR_OOM, "strmap: %zu keys is too many", want);
        cap *= 2;
    }
    if (cap <= m->cap)
        return OX_OK;
    struct strmap bigger = {calloc(cap, sizeof(struct strmap_slot)), cap, m->count};
    if (!bigger.slots)
        return ox_fail(OX_ERR_OOM, "strmap: cannot allocate %zu slots", cap);
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slots[i].key)
            *probe(&bigger, m->slots[i].key, m->slots[i].len) = m->slots[i];
    }
    free(m->slots);
    *m = bigger;
    return OX_OK;
}

enum ox_status strmap_reserve(struct strmap *m, size_t n) {
    return grow(m, n);
}

enum ox_status strmap_insert(struct strmap *m, const char *key, size_t len, int64_t value,
                             int64_t *existing) {
    OX_TRY(grow(m, m->count + 1));
    struct strmap_slot *s = probe(m, key, len);
    if (existing)
        *existing = s->key ? s->value : -1;
    if (!s->key) {
        *s = (struct strmap_slot){key, len, value};
        m->count++;
    }
    return OX_OK;
}

enum ox_status strmap_put(struct strmap *m, const char *key, size_t len, int64_t value) {
    OX_TRY(grow(m, m->count + 1));
    struct strmap_slot *s = probe(m, key, len);
    m->count += s->key == NULL;
    *s = (struct strmap_slot){key, len, value};
    return OX_OK;
}

int64_t strmap_find(const struct strmap *m, const char *key, size_t len) {
    if (!m->cap)
        return -1;
    const struct strmap_slot *s = probe(m, key, len);
    return s->key ? s->value : -1;
}

void strmap_free(struct strmap *m) {
    free(m->slots);
    memset(m, 0, sizeof *m);
}
