/* alloc.c: aligned allocation for compute buffers. */
#define _POSIX_C_SOURCE 200809L
#include "core/alloc.h"

#include <stdlib.h>

void *ox_aligned_alloc(size_t align, size_t size) {
    void *p = NULL;
    if (posix_memalign(&p, align, size ? size : align) != 0)
        return NULL;
    return p;
}

void ox_aligned_free(void *p) {
    free(p);
}
