/* jinja.h: a sandboxed Jinja template engine for the subset Hugging Face chat templates use. */
#ifndef OX_CHAT_JINJA_H
#define OX_CHAT_JINJA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* A compiled template; independent of any render. */
struct jtemplate;

enum ox_status jinja_parse(const char *src, size_t len, struct jtemplate **out);
void jinja_free(struct jtemplate *t);

struct jinja_opts {
    size_t max_output;      /* bytes of rendered text */
    size_t max_memory;      /* arena bytes during one render */
    int max_depth;          /* nested macro calls / expression recursion */
    int64_t max_iterations; /* loop iterations over the whole render */
    int64_t now;            /* unix seconds for strftime_now(); 0 = the real clock */
    bool jinja2_only;       /* what plain Jinja2 knows: transformers' {% generation %} is an
                               unknown tag (as in renders made without transformers) */
};
struct jinja_opts jinja_opts_default(void);

/* Render with ctx (a JSON object as text; its keys become globals). *out is malloc'd and
 * NUL-terminated; on failure it is NULL and ox_last_error() says why (with the line). */
enum ox_status jinja_render_json(const struct jtemplate *t, const char *ctx_json, size_t ctx_len,
                                 const struct jinja_opts *opts, char **out, size_t *out_len);

#endif
