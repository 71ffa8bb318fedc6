/* reply.c: building replies: OpenAI's and Ollama's error shapes, JSON bodies, times, valid UTF-8.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reply.h"

struct reply reply_error(unsigned status, const char *type, const char *param, const char *msg) {
    char *text = reply_valid_utf8(msg, strlen(msg)); /* a message cut mid-character too */
    json_t *e = json_pack("{s:{s:s, s:s, s:s?, s:n}}", "error", "message", text ? text : "", "type",
                          type, "param", param, "code");
    char *body = e ? json_dumps(e, JSON_COMPACT) : NULL;
    json_decref(e), free(text);
    return (struct reply){.status = status, .body = body};
}

struct reply reply_error_plain(unsigned status, const char *msg) {
    char *text = reply_valid_utf8(msg, strlen(msg));
    json_t *e = json_pack("{s:s}", "error", text ? text : "");
    char *body = e ? json_dumps(e, JSON_COMPACT) : NULL;
    json_decref(e), free(text);
    return (struct reply){.status = status, .body = body};
}

void reply_time(const struct timespec *t, char *out, size_t cap) {
    struct timespec now;
    if (!t)
        clock_gettime(CLOCK_REALTIME, &now), t = &now;
    struct tm tm;
    gmtime_r(&t->tv_sec, &tm);
    char day[32];
    strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, cap, "%s.%09ldZ", day, (long)t->tv_nsec);
}

struct reply reply_json(json_t *j) {
    char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return body ? (struct reply){.status = 200, .body = body}
                : reply_error(500, "server_error", NULL, "out of memory");
}

char *reply_valid_utf8(const char *text, size_t len) {
    char *out = malloc(3 * len + 1), *o = out;
    for (size_t i = 0; out && i < len;) {
        const unsigned char *p = (const unsigned char *)text + i;
        size_t n = p[0] < 0x80             ? 1
                   : (p[0] & 0xe0) == 0xc0 ? 2
                   : (p[0] & 0xf0) == 0xe0 ? 3
                   : (p[0] & 0xf8) == 0xf0 ? 4
                                           : 0;
        bool ok = n > 0 && i + n <= len && (n != 2 || p[0] >= 0xc2);
        for (size_t k = 1; ok && k < n; k++)
            ok = (p[k] & 0xc0) == 0x80;
        if (ok && n == 3) /* no overlong forms or surrogates */
            ok = !(p[0] == 0xe0 && p[1] < 0xa0) && !(p[0] == 0xed && p[1] >= 0xa0);
        if (ok && n == 4)
            ok = !(p[0] == 0xf0 && p[1] < 0x90) && !(p[0] == 0xf4 && p[1] >= 0x90) && p[0] <= 0xf4;
        if (!ok) {
            memcpy(o, "\xef\xbf\xbd", 3), o += 3, i++;
            continue;
        }
        memcpy(o, p, n), o += n, i += n;
    }
    if (out)
        *o = '\0';
    return out;
}
