/* fuzz_grammar.c: libFuzzer target for GBNF grammars: the input is a grammar, a NUL, then text
 * to feed; parsing, matching byte by byte and filtering candidate pieces must stay within their
 * bounds and never crash or hang. */
#include <stdint.h>
#include <string.h>

#include "grammar/grammar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t glen = nul ? (size_t)(nul - data) : size;
    const char *text = nul ? (const char *)nul + 1 : "";
    size_t tlen = nul ? size - glen - 1 : 0;
    struct gram *g = NULL;
    struct gram_state *s = NULL;
    if (gram_parse((const char *)data, glen, &g) == 0 && gram_state_create(g, &s) == 0) {
        /* candidates: every suffix of the text (up to 8 bytes), as token pieces would be */
        const char *cand[16];
        size_t lens[16];
        bool allowed[16];
        size_t n = 0;
        for (size_t i = 0; i < tlen && n < 16; i += 1 + tlen / 16)
            cand[n] = text + i, lens[n] = tlen - i < 8 ? tlen - i : 8, n++;
        gram_state_filter(s, cand, lens, n, allowed);
        bool ok;
        size_t n_ok;
        gram_state_accept(s, text, tlen, &ok, &n_ok);
        gram_state_can_end(s);
    }
    gram_state_free(s);
    gram_free(g);
    return 0;
}
