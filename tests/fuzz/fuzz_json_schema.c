/* fuzz_json_schema.c: libFuzzer target for JSON Schema -> GBNF: the input is a schema; the
 * conversion must stay within its bounds, never crash, and whatever it returns must parse as a
 * grammar (abort otherwise), which is then fed the schema text itself. */
#include <stdint.h>
#include <stdlib.h>

#include "grammar/grammar.h"
#include "oxidize.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *gbnf = NULL;
    size_t len = 0;
    if (ox_json_schema_to_grammar((const char *)data, size, &gbnf, &len) != OX_OK) {
        if (gbnf)
            abort(); /* a failure returns no text */
        return 0;
    }
    struct gram *g = NULL;
    struct gram_state *s = NULL;
    if (!gbnf || gram_parse(gbnf, len, &g) != OX_OK)
        abort();
    if (gram_state_create(g, &s) == OX_OK) {
        bool ok;
        size_t n_ok;
        gram_state_accept(s, (const char *)data, size < 256 ? size : 256, &ok, &n_ok);
        gram_state_can_end(s);
    }
    gram_state_free(s);
    gram_free(g);
    free(gbnf);
    return 0;
}
