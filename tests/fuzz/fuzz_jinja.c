/* fuzz_jinja.c: libFuzzer target for the chat-template engine: the input is a template, a NUL,
 * then the JSON context; parsing and rendering must fail cleanly or succeed within the caps,
 * never crash, hang or run past memory. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t tlen = nul ? (size_t)(nul - data) : size;
    const char *ctx = nul ? (const char *)nul + 1 : "{\"messages\": []}";
    size_t clen = nul ? size - tlen - 1 : strlen(ctx);
    struct jtemplate *t = NULL;
    if (jinja_parse((const char *)data, tlen, &t) == 0) {
        struct jinja_opts o = jinja_opts_default();
        o.max_output = 1 << 20, o.max_memory = 64 << 20, o.max_iterations = 100000, o.now = 1;
        char *out = NULL;
        size_t len;
        if (jinja_render_json(t, ctx, clen, &o, &out, &len) == 0)
            free(out);
    }
    jinja_free(t);
    return 0;
}
