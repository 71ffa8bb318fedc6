/* gbnf_filter.c: byte-level entry points: feeding UTF-8 text, and rejecting sampling candidates
 * whose text cannot continue the parse (a code point may be split across tokens). */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"

/* Can the pending partial code point in d still become one the stacks take? */
static bool partial_ok(const struct gram *g, const struct gram_stacks *in,
                       const struct gram_u8 *d) {
    uint32_t lo, hi;
    gram_u8_range(d, &lo, &hi);
    return gram_stacks_may_take(g, in, lo, hi);
}

enum ox_status gram_state_accept(struct gram_state *s, const char *text, size_t len, bool *ok,
                                 size_t *n_ok) {
    *ok = false;
    *n_ok = 0;
    if (!text && len)
        return ox_fail(OX_ERR_INVALID_ARG, "grammar: NULL text");
    for (size_t i = 0; i < len; i++) {
        struct gram_u8 d = s->u8;
        uint32_t cp;
        int r = gram_u8_feed(&d, (uint8_t)text[i], &cp);
        if (r < 0)
            return OX_OK;
        if (r == 0) {
            if (!partial_ok(s->g, &s->cur, &d))
                return OX_OK;
            s->u8 = d;
        } else {
            struct gram_u8 pending = s->u8;
            s->u8 = (struct gram_u8){0};
            bool took;
            enum ox_status st = gram_state_accept_cp(s, cp, &took);
            if (st != OX_OK || !took) {
                s->u8 = pending; /* still past exactly *n_ok bytes */
                return st;
            }
        }
        *n_ok = i + 1;
    }
    *ok = true;
    return OX_OK;
}

/* Can text (after any pending partial code point) continue the parse from s->cur? */
static enum ox_status candidate_ok(struct gram_state *s, const uint8_t *text, size_t len,
                                   bool *ok) {
    const struct gram *g = s->g;
    const struct gram_stacks *cur = &s->cur;
    struct gram_u8 d = s->u8;
    int which = 0;
    *ok = false;
    if (len == 0)
        return OX_OK;
    for (size_t i = 0; i < len; i++) {
        uint32_t cp;
        int r = gram_u8_feed(&d, text[i], &cp);
        if (r < 0)
            return OX_OK;
        if (r == 0)
            continue;
        /* Cheap test first: most candidates fail on their first code point. */
        if (!gram_stacks_may_take(g, cur, cp, cp))
            return OX_OK;
        if (cur == &s->cur && cp < 128) {
            if (!s->first_done[cp])
                OX_TRY(gram_step(s, cur, cp, &s->first[cp]));
            s->first_done[cp] = true;
            cur = &s->first[cp];
        } else {
            OX_TRY(gram_step(s, cur, cp, &s->tmp[which]));
            cur = &s->tmp[which];
            which ^= 1;
        }
        if (cur->count == 0)
            return OX_OK;
    }
    *ok = d.need == 0 || partial_ok(g, cur, &d);
    return OX_OK;
}

enum ox_status gram_state_filter(struct gram_state *s, const char *const *texts, const size_t *lens,
                                 size_t n, bool *allowed) {
    if (n && (!texts || !lens || !allowed))
        return ox_fail(OX_ERR_INVALID_ARG, "grammar: NULL candidate arrays");
    memset(s->first_done, 0, sizeof(s->first_done));
    for (size_t i = 0; i < n; i++) {
        allowed[i] = false;
        if (texts[i])
            OX_TRY(candidate_ok(s, (const uint8_t *)texts[i], lens[i], &allowed[i]));
    }
    return OX_OK;
}
