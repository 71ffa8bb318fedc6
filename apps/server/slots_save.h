/* slots_save.h: POST /slots/{id}?action=save|restore|erase (slots_save.c). */
#ifndef OX_APPS_SERVER_SLOTS_SAVE_H
#define OX_APPS_SERVER_SLOTS_SAVE_H

#include <jansson.h>

#include "reply.h"

struct state;

/* path: "/slots/{id}"; action: the query's ?action= (or NULL). */
struct reply slots_action(struct state *s, const char *path, const char *action, json_t *req);

#endif
