/* lora_adapters.h: llama-server's GET and POST /lora-adapters (lora_adapters.c). */
#ifndef OX_APPS_SERVER_LORA_ADAPTERS_H
#define OX_APPS_SERVER_LORA_ADAPTERS_H

#include <jansson.h>

#include "reply.h"

struct state;

/* GET: each --lora adapter's id, file and scale. */
struct reply lora_adapters_list(struct state *s);
/* POST: body, a JSON array of {"id", "scale"}, the new scales (adapters left out: 0). */
struct reply lora_adapters_set(struct state *s, json_t *body);

#endif
