/* sampling_opts.h: sampling command-line options shared by the generating commands. */
#ifndef OX_APPS_SAMPLING_OPTS_H
#define OX_APPS_SAMPLING_OPTS_H

#include <stddef.h>
#include <stdint.h>

#include "common/sampling.h"
#include "oxidize.h"

/* 1: name was a sampling option and value was valid; 0: not one; -1: bad value. */
int sampling_opts_set(struct sampling_opts *o, const char *name, const char *value);
/* Read the grammar or schema file and convert a schema to GBNF (into o->grammar); on failure
 * prints "oxidize OPTION: ..." with the file or the schema error. Call after the options. */
enum ox_status sampling_opts_load(struct sampling_opts *o);
void sampling_opts_free(struct sampling_opts *o);
/* The options' help lines. */
const char *sampling_opts_usage(void);

#endif
