/* xtc.c: exclude top choices: with some probability, drop all but the least likely of the
 * tokens above a threshold. */
#include <math.h>
#include <stdlib.h>

#include "core/status.h"
#include "sample/sample.h"

struct xtc {
    struct smp_ext base;
    float p, t;
    size_t min_keep;
    uint32_t seed;
    struct smp_mt19937 rng;
};

/* One float draw per call (only when enabled and there are 2+ candidates); above p nothing
 * happens. Else the candidates sorted by probability lose their head up to the last one
 * with p >= t, if at least min_keep remain and the head is not empty. */
static void xtc_apply(struct smp_ext *e, struct smp_array *c, struct smp_scratch *s) {
    struct xtc *x = (struct xtc *)e;
    if (x->p <= 0.0f || x->t > 0.5f || c->size < 2)
        return;
    if (smp_mt_canonical_float(&x->rng) > x->p)
        return;
    smp_softmax(c, true, s);
    size_t pos_last = 0;
    for (size_t i = 0; i < c->size; i++) {
        if (c->data[i].p >= x->t)
            pos_last = i;
        else
            break;
    }
    if (c->size - pos_last >= x->min_keep && pos_last > 0) {
        c->data += pos_last; /* still sorted; the sampler's buffer is untouched */
        c->size -= pos_last;
    }
}

static void xtc_reset(struct smp_ext *e) {
    struct xtc *x = (struct xtc *)e;
    smp_mt_seed(&x->rng, x->seed);
}

static void xtc_save(struct smp_ext *e, struct smp_bytes *b) {
    smp_mt_save(&((struct xtc *)e)->rng, b);
}

static bool xtc_load(struct smp_ext *e, struct smp_bytes *b) {
    return smp_mt_load(&((struct xtc *)e)->rng, b);
}

static void xtc_free(struct smp_ext *e) {
    free(e);
}

/* p <= 0 or t > 0.5 disable it (llama.cpp's empty XTC); seed as ox_sampler_add_dist's. */
enum ox_status ox_sampler_add_xtc(struct ox_sampler *s, float p, float t, size_t min_keep,
                                  uint32_t seed) {
    if (!s)
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: add_xtc on a NULL sampler");
    if (!(p >= 0.0f && p <= 1.0f) || !(t >= 0.0f && t <= 1.0f))
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: xtc p = %g, t = %g must be in [0, 1]",
                       (double)p, (double)t);
    struct xtc *x = calloc(1, sizeof *x);
    if (!x)
        return ox_fail(OX_ERR_OOM, "sampler: out of memory");
    x->base = (struct smp_ext){.apply = xtc_apply,
                               .reset = xtc_reset,
                               .free = xtc_free,
                               .save = xtc_save,
                               .load = xtc_load,
                               .name = "xtc"};
    x->p = p;
    x->t = t;
    x->min_keep = min_keep;
    x->seed = seed;
    smp_mt_seed(&x->rng, seed);
    return smp_sampler_push_ext(s, &x->base);
}
