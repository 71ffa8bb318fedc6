/* sampling_opts.h: sampling command-line options shared by the generating commands. */
#ifndef OX_APPS_SAMPLING_OPTS_H
#define OX_APPS_SAMPLING_OPTS_H

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
    const char *grammar; /* GBNF text (owned by the caller), or NULL */
    size_t grammar_len;
};

/* llama.cpp's defaults. */
void sampling_opts_default(struct sampling_opts *o);
/* 1: name was a sampling option and value was valid; 0: not one; -1: bad value. */
int sampling_opts_set(struct sampling_opts *o, const char *name, const char *value);
/* The options' help lines. */
const char *sampling_opts_usage(void);
/* The chain for these options (n_ctx: what "last n = -1" means). */
enum ox_status sampling_opts_chain(const struct sampling_opts *o, const struct ox_model *m,
                                   int32_t n_ctx, struct ox_sampler **out);

#endif
