/* reply.c: building replies: OpenAI's error shape, JSON bodies, and text made valid UTF-8. */
#include <stdbool.h>
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
