/* static_pages.h: the chat page and the OpenAPI document (static_pages.c). */
#ifndef OX_APPS_SERVER_STATIC_PAGES_H
#define OX_APPS_SERVER_STATIC_PAGES_H

#include "reply.h"

struct reply static_chat_page(void);
struct reply static_openapi(void);

#endif
