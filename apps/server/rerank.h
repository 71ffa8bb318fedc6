/* rerank.h: POST /v1/rerank and its aliases (rerank.c). */
#ifndef OX_APPS_SERVER_RERANK_H
#define OX_APPS_SERVER_RERANK_H

#include <jansson.h>

#include "reply.h"

struct state;

struct reply rerank_route(struct state *s, json_t *req);

#endif
