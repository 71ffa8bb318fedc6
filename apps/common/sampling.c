/* sampling.c: sampling settings with llama.cpp's defaults, and the sampler chain they build in
 * llama.cpp's order (shared by the generating commands and the server). */
#include <stdbool.h>
#include <stdio.h>

#include "sampling.h"

#define F(option, json, lo, hi, field)                                                             \
    { option, json, lo, hi, offsetof(struct sampling_opts, field), false }
#define I(option, json, lo, hi, field)                                                             \
    { option, json, lo, hi, offsetof(struct sampling_opts, field), true }
const struct sampling_field sampling_fields[] = {
    F("--temp", "temperature", -1, 100, temp), /* <= 0: greedy */
    I("--top-k", "top_k", 0, 1 << 24, top_k),
    F("--top-p", "top_p", 0, 1, top_p),
    F("--min-p", "min_p", 0, 1, min_p),
    F("--typical", "typical_p", 0, 1, typical),
    F("--top-n-sigma", "top_n_sigma", -1, 100, top_n_sigma),
    F("--repeat-penalty", "repeat_penalty", 0.01, 100, repeat_penalty),
    I("--repeat-last-n", "repeat_last_n", -1, 1 << 24, repeat_last_n), /* -1: the context */
    F("--presence-penalty", "presence_penalty", -100, 100, presence_penalty),
    F("--frequency-penalty", "frequency_penalty", -100, 100, frequency_penalty),
    F("--dry-multiplier", "dry_multiplier", 0, 100, dry_multiplier),
    F("--dry-base", "dry_base", 1, 100, dry_base),
    I("--dry-allowed-length", "dry_allowed_length", 0, 1 << 24, dry_allowed_length),
    I("--dry-penalty-last-n", "dry_penalty_last_n", -1, 1 << 24, dry_penalty_last_n),
    F("--xtc-probability", "xtc_probability", 0, 1, xtc_probability),
    F("--xtc-threshold", "xtc_threshold", 0, 1, xtc_threshold),
    I("--mirostat", "mirostat", 0, 2, mirostat),
    F("--mirostat-lr", "mirostat_eta", 0, 10, mirostat_lr),
    F("--mirostat-ent", "mirostat_tau", 0, 100, mirostat_ent),
};
#undef F
#undef I
const size_t n_sampling_fields = sizeof sampling_fields / sizeof sampling_fields[0];

void sampling_field_set(struct sampling_opts *o, const struct sampling_field *f, double v) {
    char *at = (char *)o + f->offset;
    if (f->is_int)
        *(int *)at = (int)v;
    else
        *(float *)at = (float)v;
}

double sampling_field_get(const struct sampling_opts *o, const struct sampling_field *f) {
    const char *at = (const char *)o + f->offset;
    return f->is_int ? *(const int *)at : *(const float *)at;
}

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
        st = ox_sampler_add_penalties(s, o->repeat_last_n < 0 ? n_ctx : o->repeat_last_n,
                                      o->repeat_penalty, o->frequency_penalty, o->presence_penalty);
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
