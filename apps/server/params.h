/* params.h: a generation request's JSON fields as a gen's options and sampler (params.c). */
#ifndef OX_APPS_SERVER_PARAMS_H
#define OX_APPS_SERVER_PARAMS_H

#include <jansson.h>

#include "gen.h"

/* The options (o) and sampler (*smp) a request asks for; tool_grammar (GBNF, or NULL)
 * constrains the output to a tool call. False with *err set (o then needs params_free). */
bool params_parse(struct state *s, json_t *req, enum gen_api api, const char *tool_grammar,
                  struct gen_opts *o, struct ox_sampler **smp, struct reply *err);
void params_free(struct gen_opts *o);

/* A number field in [lo, hi] (absent or null: *out stays); false with *err naming it. */
bool param_number(json_t *req, const char *key, double lo, double hi, double *out,
                  struct reply *err);

#endif
