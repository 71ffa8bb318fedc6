/* gbnf_match.c: the matcher: parse stacks expanded until a terminal is on top, advanced one code
 * point at a time (llama.cpp's llama_grammar_accept), within fixed work and memory limits. */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"

static bool is_alt_end(uint32_t type) {
    return type == GRAM_END || type == GRAM_ALT;
}

/* Does the class starting at e take cp? *after: the element following the class. */
static bool class_match(const struct gram_elem *e, uint32_t cp, const struct gram_elem **after) {
    if (e->type == GRAM_ANY) {
        *after = e + 1;
        return true;
    }
    bool negated = e->type == GRAM_CHAR_NOT, found = false;
    do {
        if (e[1].type == GRAM_RNG_UPPER) {
            found |= e->value <= cp && cp <= e[1].value;
            e += 2;
        } else {
            found |= e->value == cp;
            e += 1;
        }
    } while (e->type == GRAM_CHAR_ALT);
    *after = e;
    return found != negated;
}

/* Could the class take some code point in [lo, hi]? Conservative (true) for a negated class
 * unless one of its ranges covers all of [lo, hi]. */
static bool class_overlaps(const struct gram_elem *e, uint32_t lo, uint32_t hi) {
    if (e->type == GRAM_ANY)
        return true;
    bool negated = e->type == GRAM_CHAR_NOT;
    do {
        uint32_t a = e->value, b = e[1].type == GRAM_RNG_UPPER ? e[1].value : a;
        e += e[1].type == GRAM_RNG_UPPER ? 2 : 1;
        if (!negated && a <= hi && b >= lo)
            return true;
        if (negated && a <= lo && b >= hi)
            return false;
    } while (e->type == GRAM_CHAR_ALT);
    return negated;
}

/* Expand every stack on s->work until a terminal (or nothing) is on top; collect those in out.
 * Stacks already seen this step are skipped: that ends the cycles of nullable repetitions.
 * The work is counted in stack entries, not stacks: an ambiguous grammar whose stacks grow
 * deeper with every code point (root ::= x+ (root y x+)*, from the fuzzer) has as many stacks
 * as code points read and each as deep, so a limit on stacks alone let its cost per code point
 * grow with the square of the text (0.7 s for 900 bytes); the live entries are capped too. */
static enum ox_status expand(struct gram_state *s, struct gram_stacks *out) {
    const struct gram *g = s->g;
    uint32_t budget = GRAM_MAX_WORK, *buf = s->buf;
    while (s->work.count) {
        uint32_t n = gram_stacks_pop(&s->work, buf);
        bool added;
        OX_TRY(gram_stacks_add(&s->seen, buf, n, &added));
        if (!added)
            continue;
        uint32_t cost = n ? n : 1;
        if (cost >= budget || s->seen.n_data + s->work.n_data > GRAM_MAX_WORK_DATA)
            return ox_fail(OX_ERR_UNSUPPORTED,
                           "grammar: expansion exceeds %u stack entries for one "
                           "character (grammar too ambiguous)",
                           GRAM_MAX_WORK);
        budget -= cost;
        uint32_t top = n ? buf[n - 1] : 0;
        if (n == 0 || g->elems[top].type != GRAM_REF) {
            OX_TRY(gram_stacks_add(out, buf, n, &added));
            if (out->count > GRAM_MAX_STACKS || out->n_data > GRAM_MAX_LIVE_DATA)
                return ox_fail(OX_ERR_UNSUPPORTED,
                               "grammar: more than %u parse stacks or %u entries in them "
                               "(grammar too ambiguous)",
                               GRAM_MAX_STACKS, GRAM_MAX_LIVE_DATA);
            continue;
        }
        if (n + 1 > GRAM_MAX_DEPTH)
            return ox_fail(OX_ERR_UNSUPPORTED, "grammar: parse stack deeper than %u",
                           GRAM_MAX_DEPTH);
        /* Replace the reference by its continuation, then push each alternative's start. */
        uint32_t next = top + 1, base = n - 1;
        if (!is_alt_end(g->elems[next].type))
            buf[base++] = next;
        for (uint32_t a = g->rule_start[g->elems[top].value];;) {
            uint32_t k = base;
            if (!is_alt_end(g->elems[a].type))
                buf[k++] = a;
            OX_TRY(gram_stacks_push(&s->work, buf, k));
            while (!is_alt_end(g->elems[a].type))
                a++;
            if (g->elems[a].type == GRAM_END)
                break;
            a++;
        }
    }
    return OX_OK;
}

enum ox_status gram_step(struct gram_state *s, const struct gram_stacks *in, uint32_t cp,
                         struct gram_stacks *out) {
    const struct gram *g = s->g;
    gram_stacks_clear(out);
    gram_stacks_clear(&s->seen);
    gram_stacks_clear(&s->work);
    for (size_t i = 0; i < in->count; i++) {
        const uint32_t *st = in->data + in->off[i];
        uint32_t n = in->len[i];
        const struct gram_elem *after;
        if (n == 0 || !class_match(&g->elems[st[n - 1]], cp, &after))
            continue;
        memcpy(s->buf, st, (n - 1) * sizeof(*st));
        uint32_t k = n - 1;
        if (!is_alt_end(after->type))
            s->buf[k++] = (uint32_t)(after - g->elems);
        OX_TRY(gram_stacks_push(&s->work, s->buf, k));
    }
    return expand(s, out);
}

bool gram_stacks_may_take(const struct gram *g, const struct gram_stacks *in, uint32_t lo,
                          uint32_t hi) {
    for (size_t i = 0; i < in->count; i++) {
        uint32_t n = in->len[i];
        if (n && class_overlaps(&g->elems[in->data[in->off[i] + n - 1]], lo, hi))
            return true;
    }
    return false;
}

static enum ox_status state_alloc(const struct gram *g, struct gram_state **out) {
    struct gram_state *s = calloc(1, sizeof(*s));
    if (s)
        s->buf = malloc((GRAM_MAX_DEPTH + 2) * sizeof(*s->buf));
    if (!s || !s->buf) {
        free(s);
        return ox_fail(OX_ERR_OOM, "grammar: out of memory");
    }
    s->g = g;
    *out = s;
    return OX_OK;
}

enum ox_status gram_state_create(const struct gram *g, struct gram_state **out) {
    *out = NULL;
    if (!g)
        return ox_fail(OX_ERR_INVALID_ARG, "grammar: NULL grammar");
    struct gram_state *s = NULL;
    OX_TRY(state_alloc(g, &s));
    enum ox_status st = OX_OK;
    for (uint32_t a = g->rule_start[g->root]; st == OX_OK;) {
        uint32_t n = is_alt_end(g->elems[a].type) ? 0 : 1;
        st = gram_stacks_push(&s->work, &a, n);
        while (!is_alt_end(g->elems[a].type))
            a++;
        if (g->elems[a].type == GRAM_END)
            break;
        a++;
    }
    if (st == OX_OK)
        st = expand(s, &s->cur);
    if (st != OX_OK) {
        gram_state_free(s);
        return st;
    }
    *out = s;
    return OX_OK;
}

enum ox_status gram_state_clone(const struct gram_state *src, struct gram_state **out) {
    *out = NULL;
    struct gram_state *s = NULL;
    OX_TRY(state_alloc(src->g, &s));
    s->u8 = src->u8;
    enum ox_status st = gram_stacks_copy(&s->cur, &src->cur);
    if (st != OX_OK) {
        gram_state_free(s);
        return st;
    }
    *out = s;
    return OX_OK;
}

void gram_state_free(struct gram_state *s) {
    if (!s)
        return;
    gram_stacks_free(&s->cur);
    gram_stacks_free(&s->tmp[0]);
    gram_stacks_free(&s->tmp[1]);
    gram_stacks_free(&s->seen);
    gram_stacks_free(&s->work);
    for (int i = 0; i < 128; i++)
        gram_stacks_free(&s->first[i]);
    free(s->buf);
    free(s);
}

enum ox_status gram_state_accept_cp(struct gram_state *s, uint32_t cp, bool *ok) {
    *ok = false;
    if (s->u8.need)
        return ox_fail(OX_ERR_INVALID_ARG, "grammar: code point fed while a UTF-8 sequence is "
                                           "incomplete");
    OX_TRY(gram_step(s, &s->cur, cp, &s->tmp[0]));
    if (s->tmp[0].count == 0)
        return OX_OK;
    struct gram_stacks t = s->cur;
    s->cur = s->tmp[0];
    s->tmp[0] = t;
    *ok = true;
    return OX_OK;
}

bool gram_state_can_end(const struct gram_state *s) {
    if (s->u8.need)
        return false;
    for (size_t i = 0; i < s->cur.count; i++)
        if (s->cur.len[i] == 0)
            return true;
    return false;
}

bool gram_state_is_dead(const struct gram_state *s) {
    for (size_t i = 0; i < s->cur.count; i++)
        if (s->cur.len[i] != 0)
            return false;
    return true;
}
