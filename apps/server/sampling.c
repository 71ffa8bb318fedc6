/* sampling.c: sampling settings with llama.cpp's defaults, and the sampler chain they build in
 * llama.cpp's order (shared by the generating commands and the server). */
#include <stdio.h>

#include "sampling.h"

void sampling_opts_default(struct sampling_opts *o) {
    *o = (struct sampling_opts){.temp = 0.8f,
                                .top_k = 40,
                                .top_p = 0.95f,
                                .min_p = 0.05f,
                                .typical = 1.0f,
                                .top_n_sigma = -1.0f,
                                .repeat_penalty = 1.0f,
                                .repeat_last_n = 64,
                                .dry_base = 1.75f,
                                .dry_allowed_length = 2,
                                .dry_penalty_last_n = -1,
                                .xtc_threshold = 0.1f,
                                .mirostat_lr = 0.1f,
                                .mirostat_ent = 5.0f,
                                .seed = 1234};
}

/* llama.cpp's chain: the grammar and logit biases, then penalties -> DRY -> top-n-sigma -> top-k ->
 * typical -> top-p
 * -> min-p -> XTC -> temperature -> dist, or temperature -> mirostat; temperature <= 0 picks
 * greedily after the penalties. */
enum ox_status sampling_opts_chain(const struct sampling_opts *o, const struct ox_model *m,
                                   int32_t n_ctx, struct ox_sampler **out) {
    static const char *const breakers[] = {"\n", ":", "\"", "*"};
    struct ox_sampler *s;
    enum ox_status st = ox_sampler_create(&s);
    if (st != OX_OK)
        return st;
    int32_t dry_last_n = o->dry_penalty_last_n < 0 ? n_ctx : o->dry_penalty_last_n;
    if (o->grammar_opt && !o->grammar) {
        fprintf(stderr, "oxidize: %s was given but not loaded (sampling_opts_load)\n",
                o->grammar_opt);
        st = OX_ERR_INVALID_ARG;
    }
    if (st == OX_OK && o->grammar)
        st = ox_sampler_add_grammar(s, ox_model_vocab(m), o->grammar, o->grammar_len);
    if (st == OX_OK && o->n_bias)
        st = ox_sampler_add_logit_bias(s, o->bias, o->n_bias);
    if (st == OX_OK)
        st = ox_sampler_add_penalties(s, o->repeat_last_n, o->repeat_penalty, o->frequency_penalty,
                                      o->presence_penalty);
    if (st == OX_OK && o->dry_multiplier > 0)
        st = ox_sampler_add_dry(s, ox_model_vocab(m), o->dry_multiplier, o->dry_base,
                                o->dry_allowed_length, dry_last_n, breakers, 4);
    if (st == OX_OK && o->temp <= 0) {
        st = ox_sampler_add_greedy(s);
    } else if (st == OX_OK && o->mirostat > 0) {
        st = ox_sampler_add_temp(s, o->temp);
        if (st == OX_OK)
            st = o->mirostat == 1
                     ? ox_sampler_add_mirostat(s, ox_model_n_vocab(m), o->seed, o->mirostat_ent,
                                               o->mirostat_lr, 100)
                     : ox_sampler_add_mirostat_v2(s, o->seed, o->mirostat_ent, o->mirostat_lr);
    } else if (st == OX_OK) {
        if (o->top_n_sigma > 0)
            st = ox_sampler_add_top_n_sigma(s, o->top_n_sigma);
        if (st == OX_OK && o->top_k > 0)
            st = ox_sampler_add_top_k(s, o->top_k);
        if (st == OX_OK && o->typical < 1)
            st = ox_sampler_add_typical(s, o->typical, 1);
        if (st == OX_OK)
            st = ox_sampler_add_top_p(s, o->top_p, 1);
        if (st == OX_OK)
            st = ox_sampler_add_min_p(s, o->min_p, 1);
        if (st == OX_OK && o->xtc_probability > 0)
            st = ox_sampler_add_xtc(s, o->xtc_probability, o->xtc_threshold, 1, o->seed);
        if (st == OX_OK)
            st = ox_sampler_add_temp(s, o->temp);
        if (st == OX_OK)
            st = ox_sampler_add_dist(s, o->seed);
    }
    if (st != OX_OK) {
        ox_sampler_free(s);
        return st;
    }
    *out = s;
    return OX_OK;
}
