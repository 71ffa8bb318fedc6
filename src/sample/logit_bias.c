/* logit_bias.c: fixed per-token logit offsets (llama.cpp's logit-bias sampler). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "sample/sample.h"

struct logit_bias {
    struct smp_ext base;
    size_t n;
    struct ox_logit_bias *bias; /* [n] in the caller's order */
};

/* A bias whose token still sits at index == id (no stage has reordered yet) is added
 * directly; the others are looked up, each candidate taking the first matching entry. */
static void logit_bias_apply(struct smp_ext *e, struct smp_array *c, struct smp_scratch *s) {
    (void)s;
    struct logit_bias *b = (struct logit_bias *)e;
    bool search = false;
    for (size_t j = 0; j < b->n; j++) {
        const ox_token t = b->bias[j].token;
        if ((size_t)t < c->size && c->data[t].id == t)
            c->data[t].logit += b->bias[j].bias;
        else
            search = true;
    }
    if (!search)
        return;
    for (size_t i = 0; i < c->size; i++) {
        for (size_t j = 0; j < b->n; j++) {
            const ox_token t = b->bias[j].token;
            if ((size_t)t < c->size && c->data[t].id == t)
                continue; /* applied above */
            if (c->data[i].id == t) {
                c->data[i].logit += b->bias[j].bias;
                break;
            }
        }
    }
}

static void logit_bias_free(struct smp_ext *e) {
    struct logit_bias *b = (struct logit_bias *)e;
    free(b->bias);
    free(b);
}

/* Tokens must be >= 0; a bias of -INFINITY bans the token, +INFINITY and NaN are refused.
 * Tokens beyond n_vocab simply never match. The list is copied. */
enum ox_status ox_sampler_add_logit_bias(struct ox_sampler *s, const struct ox_logit_bias *bias,
                                         size_t n) {
    if (!s || (n && !bias))
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: add_logit_bias needs a sampler and a list");
    for (size_t j = 0; j < n; j++)
        if (bias[j].token < 0 || isnan(bias[j].bias) || bias[j].bias == INFINITY)
            return ox_fail(OX_ERR_INVALID_ARG, "sampler: logit bias %zu (token %d, %g) is invalid",
                           j, (int)bias[j].token, (double)bias[j].bias);
    struct logit_bias *b = calloc(1, sizeof *b);
    if (!b || (n && !(b->bias = malloc(n * sizeof *b->bias)))) {
        free(b);
        return ox_fail(OX_ERR_OOM, "sampler: out of memory");
    }
    b->base = (struct smp_ext){.apply = logit_bias_apply, .free = logit_bias_free};
    b->n = n;
    if (n)
        memcpy(b->bias, bias, n * sizeof *bias);
    return smp_sampler_push_ext(s, &b->base);
}
