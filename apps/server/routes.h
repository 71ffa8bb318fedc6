/* routes.h: a request's answer, chosen by its path (routes.c); server.c asks it for each one. */
#ifndef OX_APPS_SERVER_ROUTES_H
#define OX_APPS_SERVER_ROUTES_H

#include <stddef.h>

#include "reply.h"

struct state;

/* The route's answer to a request (method, path, body of len bytes; action: the query's
 * ?action= value, or NULL). */
struct reply route_request(struct state *s, const char *method, const char *path,
                           const char *action, const char *body, size_t len);

#endif
