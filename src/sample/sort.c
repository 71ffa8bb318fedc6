/* sort.c: descending-logit sorts that order ties exactly as libstdc++ and llama.cpp do. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "sample/sample.h"

/* The one ordering everything uses: llama.cpp's comparator (a.logit > b.logit). */
static inline int before(const struct smp_cand *x, const struct smp_cand *y) {
    return x->logit > y->logit;
}

static inline void cand_swap(struct smp_cand *x, struct smp_cand *y) {
    struct smp_cand t = *x;
    *x = *y;
    *y = t;
}

/* ---- binary heap (libstdc++ stl_heap.h layout): the top is the candidate that sorts last */

static void heap_push(struct smp_cand *a, ptrdiff_t hole, ptrdiff_t top, struct smp_cand v) {
    ptrdiff_t parent = (hole - 1) / 2;
    while (hole > top && before(&a[parent], &v)) {
        a[hole] = a[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    a[hole] = v;
}

/* Sift the hole down to a leaf along the larger child, then push v back up from there. */
static void heap_adjust(struct smp_cand *a, ptrdiff_t hole, ptrdiff_t len, struct smp_cand v) {
    const ptrdiff_t top = hole;
    ptrdiff_t child = hole;
    while (child < (len - 1) / 2) {
        child = 2 * (child + 1);
        if (before(&a[child], &a[child - 1]))
            child--;
        a[hole] = a[child];
        hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) {
        child = 2 * (child + 1);
        a[hole] = a[child - 1];
        hole = child - 1;
    }
    heap_push(a, hole, top, v);
}

static void heap_make(struct smp_cand *a, ptrdiff_t len) {
    if (len < 2)
        return;
    for (ptrdiff_t parent = (len - 2) / 2;; parent--) {
        heap_adjust(a, parent, len, a[parent]);
        if (parent == 0)
            return;
    }
}

/* Move the heap top to a[out] and heap a[out]'s old value in its place. */
static void heap_pop(struct smp_cand *a, ptrdiff_t len, ptrdiff_t out) {
    struct smp_cand v = a[out];
    a[out] = a[0];
    heap_adjust(a, 0, len, v);
}

void smp_partial_sort(struct smp_cand *a, size_t mid, size_t n) {
    if (mid == 0 || mid > n)
        return;
    const ptrdiff_t m = (ptrdiff_t)mid;
    heap_make(a, m);
    for (ptrdiff_t i = m; i < (ptrdiff_t)n; i++)
        if (before(&a[i], &a[0]))
            heap_pop(a, m, i);
    for (ptrdiff_t len = m; len > 1;) {
        len--;
        heap_pop(a, len, len);
    }
}

void smp_top_k_direct(const float *logits, size_t n, size_t mid, struct smp_cand *out) {
    if (mid == 0 || mid > n)
        return;
    const ptrdiff_t m = (ptrdiff_t)mid;
    for (ptrdiff_t i = 0; i < m; i++)
        out[i] = (struct smp_cand){.id = (int32_t)i, .logit = logits[i], .p = 0.0f};
    heap_make(out, m);
    size_t i = mid;
    for (; i + 16 <= n; i += 16) { /* most blocks hold nothing above the heap's least */
        float top = -INFINITY;     /* a NaN never counts: nor does it in the heap's test */
        for (size_t j = 0; j < 16; j++)
            top = logits[i + j] > top ? logits[i + j] : top;
        if (!(top > out[0].logit))
            continue;
        for (size_t j = i; j < i + 16; j++)
            if (logits[j] > out[0].logit)
                heap_adjust(out, 0, m,
                            (struct smp_cand){.id = (int32_t)j, .logit = logits[j], .p = 0.0f});
    }
    for (; i < n; i++)
        if (logits[i] > out[0].logit)
            heap_adjust(out, 0, m,
                        (struct smp_cand){.id = (int32_t)i, .logit = logits[i], .p = 0.0f});
    for (ptrdiff_t len = m; len > 1;) {
        len--;
        heap_pop(out, len, len);
    }
}

/* ---- introsort (libstdc++ stl_algo.h): quicksort down to runs of 16, heapsort when the
 * recursion gets too deep, then one insertion sort over everything. The scans keep explicit
 * bounds where libstdc++ relies on sentinels, so NaN logits cannot walk out of the array. */

enum { SORT_THRESHOLD = 16 };

static void median_to_first(struct smp_cand *a, size_t r, size_t x, size_t y, size_t z) {
    size_t pick;
    if (before(&a[x], &a[y]))
        pick = before(&a[y], &a[z]) ? y : before(&a[x], &a[z]) ? z : x;
    else
        pick = before(&a[x], &a[z]) ? x : before(&a[y], &a[z]) ? z : y;
    cand_swap(&a[r], &a[pick]);
}

/* Partition a[first+1, last) around the pivot at a[first]; returns the cut. */
static size_t partition_pivot(struct smp_cand *a, size_t first, size_t last) {
    median_to_first(a, first, first + 1, first + (last - first) / 2, last - 1);
    const struct smp_cand *pivot = &a[first];
    size_t lo = first + 1, hi = last;
    for (;;) {
        while (lo < last && before(&a[lo], pivot))
            lo++;
        hi--;
        while (hi > first && before(pivot, &a[hi]))
            hi--;
        if (!(lo < hi))
            return lo;
        cand_swap(&a[lo], &a[hi]);
        lo++;
    }
}

static void introsort_loop(struct smp_cand *a, size_t first, size_t last, int depth) {
    while (last - first > SORT_THRESHOLD) {
        if (depth == 0) {
            smp_partial_sort(a + first, last - first, last - first);
            return;
        }
        depth--;
        size_t cut = partition_pivot(a, first, last);
        introsort_loop(a, cut, last, depth);
        last = cut;
    }
}

/* Insert a[i] into the sorted run before it; stops at index `floor` at the latest. */
static void linear_insert(struct smp_cand *a, size_t floor, size_t i) {
    struct smp_cand v = a[i];
    while (i > floor && before(&v, &a[i - 1])) {
        a[i] = a[i - 1];
        i--;
    }
    a[i] = v;
}

static void insertion_sort(struct smp_cand *a, size_t first, size_t last) {
    for (size_t i = first + 1; i < last; i++) {
        if (before(&a[i], &a[first])) {
            struct smp_cand v = a[i];
            memmove(&a[first + 1], &a[first], (i - first) * sizeof *a);
            a[first] = v;
        } else {
            linear_insert(a, first, i);
        }
    }
}

void smp_sort(struct smp_cand *a, size_t n) {
    if (n < 2)
        return;
    int lg = 0;
    while (((size_t)1 << (lg + 1)) <= n)
        lg++;
    introsort_loop(a, 0, n, 2 * lg);
    if (n > SORT_THRESHOLD) {
        insertion_sort(a, 0, SORT_THRESHOLD);
        for (size_t i = SORT_THRESHOLD; i < n; i++)
            linear_insert(a, 0, i);
    } else {
        insertion_sort(a, 0, n);
    }
}

/* ---- llama.cpp's bucketed partial sort: 128 histogram buckets over logits [-10, 10) find
 * the few buckets holding the top npartial, only those get sorted. */

enum { N_BUCKETS = 128 };

/* Bucket of one logit. llama.cpp computes int(scale * v + inter) and clamps to [0, 127]; on
 * x86 a NaN or out-of-int-range value converts to INT_MIN, so those land in bucket 0 (we
 * reproduce that without the undefined conversion). */
static int bucket_of(float v) {
    const float scale = (float)N_BUCKETS / (10.0f - -10.0f);
    const float inter = 10.0f * scale;
    const float x = scale * v + inter;
    if (!(x > -1.0f) || x >= 2147483648.0f)
        return 0;
    const int ib = (int)x;
    return ib > N_BUCKETS - 1 ? N_BUCKETS - 1 : ib;
}

size_t smp_bucket_partial_sort(const struct smp_cand *a, size_t n, size_t npartial,
                               struct smp_scratch *s) {
    size_t histo[N_BUCKETS] = {0};
    size_t offs[N_BUCKETS];
    if (npartial > n)
        npartial = n;
    for (size_t i = 0; i < n; i++) {
        s->bucket[i] = bucket_of(a[i].logit);
        histo[s->bucket[i]]++;
    }
    /* lowest bucket still needed: buckets N_BUCKETS-1 down to ib hold >= npartial */
    size_t nhave = 0;
    int ib = N_BUCKETS - 1;
    for (; ib > 0; ib--) {
        nhave += histo[ib];
        if (nhave >= npartial)
            break;
    }
    if (ib == 0)
        nhave += histo[0];
    size_t off = 0;
    for (int j = N_BUCKETS - 1; j >= ib; j--) {
        offs[j] = off;
        off += histo[j];
    }
    for (size_t i = 0; i < n; i++)
        if (s->bucket[i] >= ib)
            s->tmp[offs[s->bucket[i]]++] = a[i];
    struct smp_cand *p = s->tmp;
    size_t ndone = 0;
    for (int j = N_BUCKETS - 1; j > ib; j--) {
        smp_sort(p, histo[j]);
        p += histo[j];
        ndone += histo[j];
    }
    smp_partial_sort(p, npartial - ndone, histo[ib]);
    return nhave;
}

void smp_partial_sort_inplace(struct smp_cand *a, size_t n, size_t npartial,
                              struct smp_scratch *s) {
    if (npartial <= 128) {
        smp_partial_sort(a, npartial, n);
        return;
    }
    smp_bucket_partial_sort(a, n, npartial, s);
    memcpy(a, s->tmp, npartial * sizeof *a);
}
