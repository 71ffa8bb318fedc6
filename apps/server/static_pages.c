/* static_pages.c: what the server answers from files built into it: the chat page at GET /
 * (web/chat.html) and its OpenAPI document at GET /openapi.json (web/openapi.json). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "static_pages.h"
#include "web_chat_html.h"
#include "web_openapi_json.h"

static struct reply page(const char *text, const char *type) {
    char *body = strdup(text);
    return body ? (struct reply){.status = 200, .body = body, .content_type = type}
                : reply_error(500, "server_error", NULL, "out of memory");
}

struct reply static_chat_page(void) {
    return page(web_chat_html, "text/html; charset=utf-8");
}

struct reply static_openapi(void) {
    return page(web_openapi_json, NULL);
}
