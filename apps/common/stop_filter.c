/* stop_filter.c: stop strings over a stream of generated text (see stop_filter.h). */
#include "stop_filter.h"

#include <stdlib.h>
#include <string.h>

/* The earliest stop string in f->held, as its offset (f->matched names it), or -1. */
static long first_stop(struct stop_filter *f) {
    long best = -1;
    for (int i = 0; i < f->n_stop; i++) {
        size_t n = strlen(f->stop[i]);
        for (size_t at = 0; n && at + n <= f->n_held; at++)
            if (!memcmp(f->held + at, f->stop[i], n)) {
                if (best < 0 || (long)at < best)
                    best = (long)at, f->matched = f->stop[i];
                break;
            }
    }
    return best;
}

/* How many trailing bytes of f->held could still grow into a stop string. */
static size_t partial_tail(const struct stop_filter *f) {
    size_t keep = 0;
    for (int i = 0; i < f->n_stop; i++) {
        size_t n = strlen(f->stop[i]);
        for (size_t k = n > 0 ? n - 1 : 0; k > keep; k--)
            if (k <= f->n_held && !memcmp(f->held + f->n_held - k, f->stop[i], k)) {
                keep = k;
                break;
            }
    }
    return keep;
}

bool stop_filter_push(struct stop_filter *f, const char *text, size_t len, FILE *out) {
    if (f->stopped)
        return true;
    if (len == 0) /* nothing new to match (a token that ends no character, a request cancelled
                   * before its first token); and text may be NULL, held too */
        return false;
    if (f->n_stop == 0) {
        fwrite(text, 1, len, out);
        return false;
    }
    if (f->n_held + len > f->cap) {
        size_t cap = (f->n_held + len) * 2 + 64;
        char *p = realloc(f->held, cap);
        if (!p) { /* cannot hold text back: write it as it comes */
            fwrite(f->held, 1, f->n_held, out), fwrite(text, 1, len, out);
            f->n_held = 0;
            return false;
        }
        f->held = p, f->cap = cap;
    }
    memcpy(f->held + f->n_held, text, len);
    f->n_held += len;
    long at = first_stop(f);
    if (at >= 0) {
        fwrite(f->held, 1, (size_t)at, out);
        f->n_held = 0, f->stopped = true;
        return true;
    }
    size_t safe = f->n_held - partial_tail(f);
    fwrite(f->held, 1, safe, out);
    memmove(f->held, f->held + safe, f->n_held - safe);
    f->n_held -= safe;
    return false;
}

void stop_filter_finish(struct stop_filter *f, FILE *out) {
    if (!f->stopped)
        fwrite(f->held, 1, f->n_held, out);
    free(f->held);
    f->held = NULL, f->n_held = f->cap = 0;
}
