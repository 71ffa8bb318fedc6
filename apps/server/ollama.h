/* ollama.h: Ollama's API in `oxidize serve` (ollama.c). */
#ifndef OX_APPS_SERVER_OLLAMA_H
#define OX_APPS_SERVER_OLLAMA_H

#include <jansson.h>
#include <stdbool.h>

#include "reply.h"

struct state;

/* Whether a path is one of Ollama's (/api/...). */
bool ollama_path(const char *path);
/* Which of Ollama's routes path is (-1: none of them), and whether it wants POST (with a JSON
 * body) or GET (the listings). */
int ollama_find(const char *path, bool *post);
/* The route's answer (req: the body, NULL for a GET). */
struct reply ollama_route(struct state *s, int route, json_t *req);
/* An error reply in OpenAI's shape (the server's own refusals) in Ollama's, {"error": "..."}. */
struct reply ollama_error_shape(struct reply r);

#endif
