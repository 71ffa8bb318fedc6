/* ring.c: the last-n token history penalties and DRY look back over. */
#include <stdlib.h>

#include "sample/sample.h"

bool smp_ring_init(struct smp_ring *r, size_t cap) {
    *r = (struct smp_ring){.cap = cap};
    if (cap == 0)
        return true;
    r->tok = malloc(cap * sizeof *r->tok);
    return r->tok != NULL;
}

/* When full, the oldest token is overwritten. */
void smp_ring_push(struct smp_ring *r, int32_t t) {
    if (r->cap == 0)
        return;
    if (r->n < r->cap) {
        r->tok[(r->first + r->n) % r->cap] = t;
        r->n++;
    } else {
        r->tok[r->first] = t;
        r->first = (r->first + 1) % r->cap;
    }
}
