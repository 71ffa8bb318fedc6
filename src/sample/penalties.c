/* penalties.c: repetition, frequency and presence penalties over the last n accepted tokens. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "sample/sample.h"

struct penalties {
    struct smp_ext base;
    int32_t last_n;
    float repeat, freq, present;
    struct smp_ring hist;
    int32_t *by_token; /* [last_n] the history sorted by id: counts by binary search */
};

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* How many times t occurs in the sorted a[0..n). */
static int count_of(const int32_t *a, size_t n, int32_t t) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    int c = 0;
    while (lo < n && a[lo++] == t)
        c++;
    return c;
}

/* As llama.cpp: a seen token's logit is divided by repeat when positive, multiplied when not
 * (dividing a negative logit would raise it), then count * freq + present is subtracted. */
static void penalties_apply(struct smp_ext *e, struct smp_array *c, struct smp_scratch *s) {
    (void)s;
    struct penalties *p = (struct penalties *)e;
    if (p->last_n == 0 || (p->repeat == 1.0f && p->freq == 0.0f && p->present == 0.0f))
        return;
    const size_t n = p->hist.n;
    if (n == 0)
        return;
    for (size_t i = 0; i < n; i++)
        p->by_token[i] = smp_ring_rat(&p->hist, i);
    qsort(p->by_token, n, sizeof *p->by_token, cmp_i32);
    for (size_t i = 0; i < c->size; i++) {
        const int count = count_of(p->by_token, n, c->data[i].id);
        if (count == 0)
            continue;
        if (c->data[i].logit <= 0)
            c->data[i].logit *= p->repeat;
        else
            c->data[i].logit /= p->repeat;
        c->data[i].logit -= (float)count * p->freq + p->present;
    }
    c->sorted = false;
}

static bool penalties_inert(const struct smp_ext *e) {
    const struct penalties *p = (const struct penalties *)e;
    return p->last_n == 0 || (p->repeat == 1.0f && p->freq == 0.0f && p->present == 0.0f) ||
           p->hist.n == 0;
}

static void penalties_accept(struct smp_ext *e, int32_t token) {
    struct penalties *p = (struct penalties *)e;
    smp_ring_push(&p->hist, token);
}

static void penalties_reset(struct smp_ext *e) {
    struct penalties *p = (struct penalties *)e;
    p->hist.n = 0;
    p->hist.first = 0;
}

static void penalties_save(struct smp_ext *e, struct smp_bytes *b) {
    smp_ring_save(&((struct penalties *)e)->hist, b);
}

static bool penalties_load(struct smp_ext *e, struct smp_bytes *b) {
    return smp_ring_load(&((struct penalties *)e)->hist, b);
}

static void penalties_free(struct smp_ext *e) {
    struct penalties *p = (struct penalties *)e;
    free(p->hist.tok);
    free(p->by_token);
    free(p);
}

/* last_n = 0 disables (llama.cpp's -1 = "context size" is the caller's to resolve);
 * repeat = 1, freq = present = 0 is a no-op. */
enum ox_status ox_sampler_add_penalties(struct ox_sampler *s, int32_t last_n, float repeat,
                                        float freq, float present) {
    if (!s)
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: add_penalties on a NULL sampler");
    if (last_n < 0)
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: penalties last_n %d is negative", (int)last_n);
    if (!(repeat > 0.0f) || !isfinite(repeat) || !isfinite(freq) || !isfinite(present))
        return ox_fail(OX_ERR_INVALID_ARG,
                       "sampler: penalties need repeat > 0 and finite values (%g, %g, %g)",
                       (double)repeat, (double)freq, (double)present);
    struct penalties *p = calloc(1, sizeof *p);
    if (!p)
        return ox_fail(OX_ERR_OOM, "sampler: out of memory");
    p->base = (struct smp_ext){.apply = penalties_apply,
                               .inert = penalties_inert,
                               .accept = penalties_accept,
                               .reset = penalties_reset,
                               .free = penalties_free,
                               .save = penalties_save,
                               .load = penalties_load,
                               .name = "penalties"};
    p->last_n = last_n;
    p->repeat = repeat;
    p->freq = freq;
    p->present = present;
    p->by_token = last_n ? malloc((size_t)last_n * sizeof *p->by_token) : NULL;
    if (!smp_ring_init(&p->hist, (size_t)last_n) || (last_n && !p->by_token)) {
        penalties_free(&p->base);
        return ox_fail(OX_ERR_OOM, "sampler: out of memory for %d history tokens", (int)last_n);
    }
    return smp_sampler_push_ext(s, &p->base);
}
