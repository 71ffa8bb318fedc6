/* alloc.c: aligned allocation for compute buffers. */
#define _DEFAULT_SOURCE /* madvise's MADV_HUGEPAGE */
#include "core/alloc.h"

#include <stdlib.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

void *ox_aligned_alloc(size_t align, size_t size) {
    void *p = NULL;
    if (posix_memalign(&p, align, size ? size : align) != 0)
        return NULL;
    return p;
}

void ox_aligned_free(void *p) {
    free(p);
}

void ox_advise_huge_pages(void *p, size_t size) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t huge = (uintptr_t)2 << 20;
    uintptr_t lo = ((uintptr_t)p + huge - 1) & ~(huge - 1),
              hi = ((uintptr_t)p + size) & ~(huge - 1);
    if (p && hi > lo) /* advice only: without transparent huge pages it fails, harmlessly */
        (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)p, (void)size;
#endif
}
