/* typical.c: locally typical sampling (keep tokens whose surprise is closest to the entropy). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "sample/sample.h"

struct typical {
    struct smp_ext base;
    float p;
    size_t min_keep;
};

/* Rank by |-log p - H| ascending and keep the shortest prefix whose mass exceeds p (and at
 * least min_keep). llama.cpp ranks with std::sort over indices; smp_sort on keys -score runs
 * the same algorithm with the same comparisons, so ties land in the same order. */
static void typical_apply(struct smp_ext *e, struct smp_array *c, struct smp_scratch *s) {
    struct typical *t = (struct typical *)e;
    if (t->p >= 1.0f || c->size == 0)
        return;
    smp_softmax(c, true, s);
    float entropy = 0.0f;
    for (size_t i = 0; i < c->size; i++)
        entropy += -c->data[i].p * logf(c->data[i].p);
    struct smp_cand *key = s->tmp; /* [size]: id = index into c->data, logit = -score */
    for (size_t i = 0; i < c->size; i++)
        key[i] =
            (struct smp_cand){.id = (int32_t)i, .logit = -fabsf(-logf(c->data[i].p) - entropy)};
    smp_sort(key, c->size);
    float cum = 0.0f;
    size_t last = c->size;
    for (size_t i = 0; i < c->size; i++) {
        cum += c->data[key[i].id].p;
        if (cum > t->p && (t->min_keep == 0 || i >= t->min_keep - 1)) {
            last = i + 1;
            break;
        }
    }
    int32_t *idx = s->bucket; /* free the keys' buffer to gather the kept candidates */
    for (size_t i = 0; i < last; i++)
        idx[i] = key[i].id;
    for (size_t i = 0; i < last; i++)
        s->tmp[i] = c->data[idx[i]];
    memcpy(c->data, s->tmp, last * sizeof *c->data);
    c->size = last;
    c->sorted = false;
}

static void typical_free(struct smp_ext *e) {
    free(e);
}

/* p >= 1 keeps everything (llama.cpp's empty typical). */
enum ox_status ox_sampler_add_typical(struct ox_sampler *s, float p, size_t min_keep) {
    if (!s)
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: add_typical on a NULL sampler");
    if (!(p >= 0.0f && p <= 1.0f))
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: typical p = %g is outside [0, 1]", (double)p);
    struct typical *t = calloc(1, sizeof *t);
    if (!t)
        return ox_fail(OX_ERR_OOM, "sampler: out of memory");
    t->base = (struct smp_ext){.apply = typical_apply, .free = typical_free};
    t->p = p;
    t->min_keep = min_keep;
    return smp_sampler_push_ext(s, &t->base);
}
