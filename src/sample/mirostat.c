/* mirostat.c: mirostat v1 and v2, pickers that steer the surprise of each pick toward tau. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include "core/status.h"
#include "sample/sample.h"

struct mirostat {
    struct smp_ext base;
    int version; /* 1 or 2 */
    int32_t n_vocab, m;
    float tau, eta, mu; /* mu starts at 2 * tau */
    uint32_t seed;
    struct smp_mt19937 rng;
};

/* (int)k as x86's cvttss2si gives it, which llama.cpp's int(k) compiles to: NaN and values
 * out of int range become INT_MIN (so the top-k below falls back to 1). C leaves that
 * undefined, hence the explicit test. */
static int x86_float_to_int(float k) {
    if (!(k > -2147483904.0f && k < 2147483648.0f))
        return INT_MIN;
    return (int)k;
}

/* v1: estimate the Zipf exponent s_hat from the m most probable tokens, turn mu into a
 * top-k, then draw. */
static void mirostat_v1_cut(struct mirostat *m, struct smp_array *c, struct smp_scratch *s) {
    float sum_ti_bi = 0.0f, sum_ti_sq = 0.0f;
    for (size_t i = 0; i < (size_t)(m->m - 1) && i < c->size - 1; i++) {
        const float t_i = logf((float)(i + 2) / (float)(i + 1));
        const float b_i = logf(c->data[i].p / c->data[i + 1].p);
        sum_ti_bi += t_i * b_i;
        sum_ti_sq += t_i * t_i;
    }
    const float s_hat = sum_ti_bi / sum_ti_sq;
    const float eps = s_hat - 1;
    const float k = powf((eps * powf(2, m->mu)) / (1 - powf((float)m->n_vocab, -eps)), 1 / s_hat);
    const int ki = x86_float_to_int(k);
    smp_top_k(c, ki > 1 ? ki : 1, s);
}

/* v2: drop the tokens whose surprise -log2 p exceeds mu (keeping at least one), then draw. */
static void mirostat_v2_cut(const struct mirostat *m, struct smp_array *c) {
    size_t n = 0;
    while (n < c->size && !(-log2f(c->data[n].p) > m->mu))
        n++;
    c->size = n ? n : 1;
}

static void mirostat_apply(struct smp_ext *e, struct smp_array *c, struct smp_scratch *s) {
    struct mirostat *m = (struct mirostat *)e;
    if (c->size == 0)
        return;
    smp_softmax(c, true, s);
    if (m->version == 1)
        mirostat_v1_cut(m, c, s);
    else
        mirostat_v2_cut(m, c);
    smp_softmax(c, true, s);
    const size_t idx = smp_discrete(c->data, c->size, &m->rng);
    c->selected = (ptrdiff_t)idx;
    const float e_obs = -log2f(c->data[idx].p) - m->tau; /* observed surprise error */
    m->mu = m->mu - m->eta * e_obs;
}

static void mirostat_reset(struct smp_ext *e) {
    struct mirostat *m = (struct mirostat *)e;
    m->mu = 2.0f * m->tau;
    smp_mt_seed(&m->rng, m->seed);
}

/* Its running mu (learnt from the logits it saw) and its random stream. */
static void mirostat_save(struct smp_ext *e, struct smp_bytes *b) {
    struct mirostat *m = (struct mirostat *)e;
    smp_put(b, &m->mu, sizeof m->mu);
    smp_mt_save(&m->rng, b);
}

static bool mirostat_load(struct smp_ext *e, struct smp_bytes *b) {
    struct mirostat *m = (struct mirostat *)e;
    float mu;
    struct smp_mt19937 rng = m->rng;
    if (!smp_get(b, &mu, sizeof mu) || !isfinite(mu) || !smp_mt_load(&rng, b))
        return false;
    m->mu = mu, m->rng = rng;
    return true;
}

static void mirostat_free(struct smp_ext *e) {
    free(e);
}

static enum ox_status add_mirostat(struct ox_sampler *s, int version, int32_t n_vocab,
                                   uint32_t seed, float tau, float eta, int32_t m) {
    if (!s)
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: add_mirostat on a NULL sampler");
    if (!isfinite(tau) || !isfinite(eta) || tau < 0.0f || eta < 0.0f)
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: mirostat tau = %g, eta = %g must be >= 0",
                       (double)tau, (double)eta);
    if (n_vocab < 1 || m < 1)
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: mirostat n_vocab = %d, m = %d must be >= 1",
                       (int)n_vocab, (int)m);
    struct mirostat *st = calloc(1, sizeof *st);
    if (!st)
        return ox_fail(OX_ERR_OOM, "sampler: out of memory");
    st->base = (struct smp_ext){.apply = mirostat_apply,
                                .reset = mirostat_reset,
                                .free = mirostat_free,
                                .picks = true,
                                .save = mirostat_save,
                                .load = mirostat_load,
                                .name = "mirostat"};
    *st = (struct mirostat){.base = st->base,
                            .version = version,
                            .n_vocab = n_vocab,
                            .m = m,
                            .tau = tau,
                            .eta = eta,
                            .seed = seed};
    mirostat_reset(&st->base);
    return smp_sampler_push_ext(s, &st->base);
}

/* n_vocab is the model's (llama.cpp uses it in the k estimate, whatever earlier stages cut);
 * m is how many top tokens estimate s_hat (llama.cpp uses 100). */
enum ox_status ox_sampler_add_mirostat(struct ox_sampler *s, int32_t n_vocab, uint32_t seed,
                                       float tau, float eta, int32_t m) {
    return add_mirostat(s, 1, n_vocab, seed, tau, eta, m);
}

enum ox_status ox_sampler_add_mirostat_v2(struct ox_sampler *s, uint32_t seed, float tau,
                                          float eta) {
    return add_mirostat(s, 2, 1, seed, tau, eta, 1);
}
