/* stop_filter.h: stop strings over streamed text: text that might begin a stop string is held
 * back until it is known not to, and generation ends at the first stop string (not printed). */
#ifndef OX_APPS_COMMON_STOP_FILTER_H
#define OX_APPS_COMMON_STOP_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define STOP_MAX 16

struct stop_filter {
    const char *stop[STOP_MAX];
    int n_stop;
    char *held; /* text not yet written */
    size_t n_held, cap;
    bool stopped;
    const char *matched; /* the stop string that ended it */
};

/* Add text; writes what is safe to out. Returns true once a stop string has been seen (the
 * text before it is written; nothing after). False also on out of memory (text is written). */
bool stop_filter_push(struct stop_filter *f, const char *text, size_t len, FILE *out);
/* Write whatever is still held (the stream ended without a stop string) and free. */
void stop_filter_finish(struct stop_filter *f, FILE *out);

#endif
