/* spec_opts.h: speculative decoding's command-line options (llama.cpp's names) and the
 * generation step run and chat take with or without it. */
#ifndef OX_APPS_SPEC_OPTS_H
#define OX_APPS_SPEC_OPTS_H

#include <stdbool.h>

#include "oxidize.h"

struct spec_opts {
    bool ngram;             /* --spec ngram: prompt lookup */
    const char *draft_path; /* -md FILE: a draft model */
    int draft_gpu_layers;   /* -ngld N (-1: as many as fit, like -ngl) */
    struct ox_spec_params p;
    struct ox_model *draft; /* loaded by spec_opts_start */
};

void spec_opts_default(struct spec_opts *o);
/* 1: name was one of these options and value was valid; 0: not one; -1: bad value. */
int spec_opts_set(struct spec_opts *o, const char *name, const char *value);
const char *spec_opts_usage(void);
/* The drafter for sequence 0 of ctx (NULL when the options ask for none), begun with the
 * tokens the sequence holds; loads the draft model the first time. */
enum ox_status spec_opts_start(struct spec_opts *o, struct ox_context *ctx, const ox_token *tokens,
                               size_t n, struct ox_spec **out);
/* "speculative: ..." on stderr: steps, drafted and accepted tokens, tokens a step. */
void spec_opts_report(const struct ox_spec *spec);
void spec_opts_free(struct spec_opts *o);

/* One step of generation after token t (sampled, accepted, not yet decoded): plainly, t decoded
 * and one token sampled after it; with spec, a speculative step. out gets 1 .. max tokens,
 * each accepted by the sampler unless it ends generation (< 0 or end of generation); t and
 * all of out but the last are then in the cache. OX_ERR_CONTEXT_FULL: nothing changed. */
enum ox_status gen_step(struct ox_context *ctx, struct ox_sampler *smp, struct ox_spec *spec,
                        ox_token t, ox_token *out, int max, int *n_out);

#endif
