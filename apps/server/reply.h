/* reply.h: what a route answers (status and JSON body, or a generation to start) and the
 * helpers that build replies; the bottom of the server's headers: it includes none of them. */
#ifndef OX_APPS_SERVER_REPLY_H
#define OX_APPS_SERVER_REPLY_H

#include <jansson.h>
#include <stddef.h>
#include <time.h>

#include "oxidize.h"

struct gen;

/* A reply: status and a body, or a generation to start (its answer comes later). */
struct reply {
    unsigned status;
    char *body;               /* malloc'd */
    const char *content_type; /* NULL: application/json */
    struct gen *gen;          /* with its prompt (malloc'd) */
    ox_token *prompt;
    unsigned retry_after; /* seconds, sent with a 429 or 503 */
};

/* An error in OpenAI's shape; param may be NULL. */
struct reply reply_error(unsigned status, const char *type, const char *param, const char *msg);

/* An error in Ollama's shape, {"error": msg}. */
struct reply reply_error_plain(unsigned status, const char *msg);

/* A time as RFC 3339 in UTC with nanoseconds ("2026-11-25T17:20:01.123456789Z"), as Ollama
 * writes created_at and modified_at; t NULL: now. */
void reply_time(const struct timespec *t, char *out, size_t cap);

/* A 200 with j as its body (takes j; NULL, or out of memory: a 500). */
struct reply reply_json(json_t *j);

/* text with every invalid UTF-8 sequence replaced by U+FFFD, NUL-terminated (malloc'd), or
 * NULL when out of memory: JSON strings are UTF-8, generated text may not be. */
char *reply_valid_utf8(const char *text, size_t len);

#endif
