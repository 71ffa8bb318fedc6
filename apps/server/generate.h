/* generate.h: the requests that generate (generate.c), in any API's answer shape. */
#ifndef OX_APPS_SERVER_GENERATE_H
#define OX_APPS_SERVER_GENERATE_H

#include <jansson.h>

#include "gen.h"
#include "reply.h"

struct state;

/* A completion of req's "prompt" (a string, or token ids and strings; control tokens in the text
 * are parsed as such except for OpenAI's completions), with req's settings (params.c). */
struct reply generate_completion(struct state *s, json_t *req, enum gen_api api);
/* A completion of req's "messages" (and "tools") rendered in the chat template. */
struct reply generate_chat(struct state *s, json_t *req, enum gen_api api);
/* The rendering alone (malloc'd, *len bytes), or NULL with *err set. */
char *generate_render_chat(struct state *s, json_t *req, size_t *len, struct reply *err);

#endif
