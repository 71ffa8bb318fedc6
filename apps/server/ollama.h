/* ollama.h: Ollama's API in `oxidize serve` (ollama.c). */
#ifndef OX_APPS_SERVER_OLLAMA_H
#define OX_APPS_SERVER_OLLAMA_H

#include <jansson.h>
#include <stdbool.h>

#include "reply.h"

struct state;

/* Whether a path is one of Ollama's (/api/...). */
bool ollama_path(const char *path);
/* The answer to GET /api/version, /api/tags, /api/ps; NULL req. Or POST /api/show,
 * /api/generate, /api/chat, /api/embed, /api/embeddings with the body. A 404 for another path. */
struct reply ollama_route(struct state *s, const char *path, json_t *req);
/* An error reply in OpenAI's shape (the server's own refusals) in Ollama's, {"error": "..."}. */
struct reply ollama_error_shape(struct reply r);

#endif
