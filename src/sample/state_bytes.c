/* state_bytes.c: a sampler's state as bytes: the appender and reader its stages write and read
 * through (smp_bytes), and the pieces they share: a token history, a random stream. */
#include <string.h>

#include "sample/sample.h"

void smp_put(struct smp_bytes *b, const void *p, size_t n) {
    if (n && b->buf && b->n + n <= b->cap) /* n 0: p may be NULL (an empty history) */
        memcpy(b->buf + b->n, p, n);
    b->n += n;
}

bool smp_get(struct smp_bytes *b, void *p, size_t n) {
    if (b->in_n - b->at < n)
        return false;
    if (n)
        memcpy(p, b->in + b->at, n);
    b->at += n;
    return true;
}

void smp_ring_save(const struct smp_ring *r, struct smp_bytes *b) {
    uint64_t n = r->n;
    smp_put(b, &n, sizeof n);
    for (size_t i = 0; i < r->n; i++) {
        int32_t t = smp_ring_rat(r, r->n - 1 - i); /* oldest first */
        smp_put(b, &t, sizeof t);
    }
}

bool smp_ring_load(struct smp_ring *r, struct smp_bytes *b) {
    uint64_t n;
    if (!smp_get(b, &n, sizeof n) || n > r->cap || b->in_n - b->at < n * sizeof(int32_t))
        return false;
    r->n = r->first = 0;
    for (uint64_t i = 0; i < n; i++) {
        int32_t t = 0;
        smp_get(b, &t, sizeof t); /* there are n of them: counted above */
        smp_ring_push(r, t);
    }
    return true;
}

void smp_mt_save(const struct smp_mt19937 *r, struct smp_bytes *b) {
    smp_put(b, r, sizeof *r);
}

bool smp_mt_load(struct smp_mt19937 *r, struct smp_bytes *b) {
    struct smp_mt19937 in;
    if (!smp_get(b, &in, sizeof in) || in.idx > 624)
        return false;
    *r = in;
    return true;
}
