/* sampling.h: sampling settings (llama.cpp's defaults) and the sampler chain they build. */
#ifndef OX_APPS_COMMON_SAMPLING_H
#define OX_APPS_COMMON_SAMPLING_H

#include <stddef.h>
#include <stdint.h>

#include "oxidize.h"

struct sampling_opts {
    float temp, top_p, min_p, typical, top_n_sigma;
    int top_k;
    float repeat_penalty, presence_penalty, frequency_penalty;
    int repeat_last_n;
    float dry_multiplier, dry_base;
    int dry_allowed_length, dry_penalty_last_n;
    float xtc_probability, xtc_threshold;
    int mirostat;
    float mirostat_lr, mirostat_ent;
    uint32_t seed;
    /* The output constraint: at most one of --grammar-file, --grammar, --json-schema and
     * --json-schema-file (grammar_opt names it, grammar_arg is its value); sampling_opts_load
     * turns it into GBNF text. */
    const char *grammar_opt, *grammar_arg;
    char *grammar; /* GBNF text (owned; sampling_opts_free), or NULL */
    size_t grammar_len;
    const struct ox_logit_bias *bias; /* added before the penalties (borrowed) */
    size_t n_bias;
};

/* The numeric settings: the command-line option, the JSON field (llama.cpp's /completion
 * names), the range both take, and where the value goes (an int or a float field). */
struct sampling_field {
    const char *option, *json;
    double lo, hi;
    size_t offset;
    bool is_int;
};
extern const struct sampling_field sampling_fields[];
extern const size_t n_sampling_fields;
/* Store v into the field's place in o. */
void sampling_field_set(struct sampling_opts *o, const struct sampling_field *f, double v);
double sampling_field_get(const struct sampling_opts *o, const struct sampling_field *f);

/* llama.cpp's defaults. */
void sampling_opts_default(struct sampling_opts *o);
/* The chain for these settings (n_ctx: what "last n = -1" means); a grammar option needs
 * o->grammar loaded. */
enum ox_status sampling_opts_chain(const struct sampling_opts *o, const struct ox_model *m,
                                   int32_t n_ctx, struct ox_sampler **out);

#endif
