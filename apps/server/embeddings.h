/* embeddings.h: POST /v1/embeddings (embeddings.c). */
#ifndef OX_APPS_SERVER_EMBEDDINGS_H
#define OX_APPS_SERVER_EMBEDDINGS_H

#include <jansson.h>

#include "server.h"

struct reply embeddings_route(struct server *s, json_t *req);

#endif
