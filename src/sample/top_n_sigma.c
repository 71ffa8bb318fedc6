/* top_n_sigma.c: keep logits within n standard deviations of the maximum (top-n-sigma). */
#include <math.h>
#include <stdlib.h>

#include "core/status.h"
#include "sample/sample.h"

struct top_n_sigma {
    struct smp_ext base;
    float n;
};

/* Mean and deviation over the finite-from-below logits (-inf ones are already masked); the
 * rest below max - n * sigma become -inf, the size stays. Arithmetic as llama.cpp's: float
 * sums, the squares in double (pow) folded back into a float accumulator. */
static void top_n_sigma_apply(struct smp_ext *e, struct smp_array *c, struct smp_scratch *s) {
    (void)s;
    const float n = ((struct top_n_sigma *)e)->n;
    if (n <= 0.0f || c->size <= 1)
        return;
    float max = c->data[0].logit, sum = 0.0f;
    size_t valid = 0;
    for (size_t i = 0; i < c->size; i++) {
        const float l = c->data[i].logit;
        if (l != -INFINITY) {
            max = max < l ? l : max;
            sum += l;
            valid++;
        }
    }
    const float mean = valid > 0 ? sum / (float)valid : 0.0f;
    float acc = 0.0f;
    for (size_t i = 0; i < c->size; i++)
        if (c->data[i].logit != -INFINITY)
            acc = (float)((double)acc + pow((double)(c->data[i].logit - mean), 2.0));
    const float sd = valid > 0 ? (float)sqrt((double)(acc / (float)valid)) : 0.0f;
    for (size_t i = 0; i < c->size; i++)
        if (c->data[i].logit < max - n * sd)
            c->data[i].logit = -INFINITY;
}

static void top_n_sigma_free(struct smp_ext *e) {
    free(e);
}

/* n <= 0 keeps everything (llama.cpp's empty top-n-sigma). */
enum ox_status ox_sampler_add_top_n_sigma(struct ox_sampler *s, float n) {
    if (!s)
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: add_top_n_sigma on a NULL sampler");
    if (!isfinite(n))
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: top-n-sigma n = %g is not finite", (double)n);
    struct top_n_sigma *t = calloc(1, sizeof *t);
    if (!t)
        return ox_fail(OX_ERR_OOM, "sampler: out of memory");
    t->base = (struct smp_ext){.apply = top_n_sigma_apply, .free = top_n_sigma_free};
    t->n = n;
    return smp_sampler_push_ext(s, &t->base);
}
