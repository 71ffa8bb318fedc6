/* embeddings.h: POST /v1/embeddings (embeddings.c). */
#ifndef OX_APPS_SERVER_EMBEDDINGS_H
#define OX_APPS_SERVER_EMBEDDINGS_H

#include <jansson.h>

#include "reply.h"

struct state;

struct reply embeddings_route(struct state *s, json_t *req);

/* Why a request found no embeddings context: another request holds it (429, retry in a second),
 * or the server has none (501, with the message given). */
struct reply embeddings_refusal(bool busy, const char *none);

#endif
