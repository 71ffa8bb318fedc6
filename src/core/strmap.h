/* strmap.h: an open-addressing hash index from byte strings to integer ids. */
#ifndef OX_CORE_STRMAP_H
#define OX_CORE_STRMAP_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* Keys are borrowed (the caller keeps them alive); values are non-negative ids. */
struct strmap {
    struct strmap_slot { const char *key; size_t len; int64_t value; } *slots;
    size_t cap;   /* power of two, or 0 before the first insert */
    size_t count;
};

/* Size for n keys up front (optional). */
enum ox_status strmap_reserve(struct strmap *m, size_t n);
/* Insert key -> value. If the key is present, leaves the map unchanged and sets *existing to
 * its value (else -1), so callers can detect duplicates in one step. */
enum ox_status strmap_insert(struct strmap *m, const char *key, size_t len, int64_t value,
                             int64_t *existing);
/* Insert key -> value, or point an existing key at the new value (last one wins). */
enum ox_status strmap_put(struct strmap *m, const char *key, size_t len, int64_t value);
/* The value of key, or -1. */
int64_t strmap_find(const struct strmap *m, const char *key, size_t len);
void strmap_free(struct strmap *m);

#endif
