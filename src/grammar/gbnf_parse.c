/* gbnf_parse.c: GBNF text -> rules of flat elements; groups and repetitions become generated
 * rules, the way llama.cpp's parser rewrites them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strmap.h"
#include "grammar/grammar.h"

struct evec {
    struct gram_elem *v;
    size_t n, cap;
};

struct brule {
    char *name;
    struct evec body;
    bool defined;
    size_t first_ref; /* source offset of the first reference, for "undefined rule" */
};

struct gp {
    const char *src, *pos, *end;
    struct brule *rules;
    uint32_t n_rules, cap_rules;
    struct strmap names;
    size_t total_elems;
    int depth;
};

/* Record an error at the current position as "grammar: line L col C: ...". */
static enum ox_status gp_fail(struct gp *p, const char *at, const char *msg, const char *arg) {
    int line = 1, col = 1;
    for (const char *c = p->src; c < at && c < p->end; c++) {
        if (*c == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    return ox_fail(OX_ERR_FORMAT, "grammar: line %d col %d: %s%s", line, col, msg, arg ? arg : "");
}

static enum ox_status ev_push(struct gp *p, struct evec *e, uint32_t type, uint32_t value) {
    if (++p->total_elems > GRAM_MAX_ELEMS)
        return gp_fail(p, p->pos, "grammar too large after expanding repetitions", NULL);
    if (e->n == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 16;
        struct gram_elem *v = realloc(e->v, cap * sizeof(*v));
        if (!v)
            return ox_fail(OX_ERR_OOM, "grammar: out of memory");
        e->v = v;
        e->cap = cap;
    }
    e->v[e->n++] = (struct gram_elem){type, value};
    return OX_OK;
}

static enum ox_status ev_append(struct gp *p, struct evec *e, const struct gram_elem *src,
                                size_t n) {
    for (size_t i = 0; i < n; i++)
        OX_TRY(ev_push(p, e, src[i].type, src[i].value));
    return OX_OK;
}

/* A new rule with this name (copied); names are unique, so the caller checked first. */
static enum ox_status add_rule(struct gp *p, const char *name, size_t len, uint32_t *id) {
    if (p->n_rules == p->cap_rules) {
        uint32_t cap = p->cap_rules ? p->cap_rules * 2 : 32;
        struct brule *r = realloc(p->rules, cap * sizeof(*r));
        if (!r)
            return ox_fail(OX_ERR_OOM, "grammar: out of memory");
        p->rules = r;
        p->cap_rules = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy)
        return ox_fail(OX_ERR_OOM, "grammar: out of memory");
    memcpy(copy, name, len);
    copy[len] = 0;
    p->rules[p->n_rules] = (struct brule){.name = copy, .first_ref = (size_t)-1};
    *id = p->n_rules++;
    return strmap_put(&p->names, copy, len, *id);
}

static enum ox_status rule_id(struct gp *p, const char *name, size_t len, uint32_t *id) {
    int64_t v = strmap_find(&p->names, name, len);
    if (v >= 0) {
        *id = (uint32_t)v;
        return OX_OK;
    }
    return add_rule(p, name, len, id);
}

/* A generated rule "<parent>~<n>": '~' cannot appear in user names, so no clash. */
static enum ox_status gen_rule(struct gp *p, uint32_t parent, uint32_t *id) {
    char name[96];
    int n = snprintf(name, sizeof(name), "%.64s~%u", p->rules[parent].name, p->n_rules);
    OX_TRY(add_rule(p, name, (size_t)n, id));
    p->rules[*id].defined = true;
    return OX_OK;
}

static bool is_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

/* Skip blanks and # comments; newlines too when inside a group or after '|' / '::='. */
static void skip_space(struct gp *p, bool newline_ok) {
    while (p->pos < p->end) {
        char c = *p->pos;
        if (c == ' ' || c == '\t') {
            p->pos++;
        } else if (c == '#') {
            while (p->pos < p->end && *p->pos != '\n' && *p->pos != '\r')
                p->pos++;
        } else if ((c == '\n' || c == '\r') && newline_ok) {
            p->pos++;
        } else {
            break;
        }
    }
}

static enum ox_status parse_hex(struct gp *p, int digits, uint32_t *cp) {
    uint32_t v = 0;
    for (int i = 0; i < digits; i++, p->pos++) {
        char c = p->pos < p->end ? *p->pos : 0;
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return gp_fail(p, p->pos, "bad hex digit in escape", NULL);
        v = v * 16 + (uint32_t)d;
    }
    if (v > 0x10FFFF)
        return gp_fail(p, p->pos, "escape beyond U+10FFFF", NULL);
    *cp = v;
    return OX_OK;
}

/* One character of a literal or class: an escape or one UTF-8 code point. */
static enum ox_status parse_char(struct gp *p, uint32_t *cp) {
    if (*p->pos == '\\') {
        const char *at = p->pos++;
        if (p->pos >= p->end)
            return gp_fail(p, at, "escape at end of input", NULL);
        char c = *p->pos++;
        switch (c) {
        case 'x': return parse_hex(p, 2, cp);
        case 'u': return parse_hex(p, 4, cp);
        case 'U': return parse_hex(p, 8, cp);
        case 't': *cp = '\t'; return OX_OK;
        case 'r': *cp = '\r'; return OX_OK;
        case 'n': *cp = '\n'; return OX_OK;
        case '\\':
        case '"':
        case '[':
        case ']': *cp = (uint8_t)c; return OX_OK;
        default: {
            char s[2] = {c, 0};
            return gp_fail(p, at, "unknown escape \\", s);
        }
        }
    }
    struct gram_u8 d = {0};
    while (p->pos < p->end) {
        int r = gram_u8_feed(&d, (uint8_t)*p->pos++, cp);
        if (r == 1)
            return OX_OK;
        if (r < 0)
            break;
    }
    return gp_fail(p, p->pos, "invalid UTF-8", NULL);
}

static enum ox_status parse_literal(struct gp *p, struct evec *out) {
    const char *start = p->pos++;
    while (p->pos < p->end && *p->pos != '"') {
        uint32_t cp;
        OX_TRY(parse_char(p, &cp));
        OX_TRY(ev_push(p, out, GRAM_CHAR, cp));
    }
    if (p->pos >= p->end)
        return gp_fail(p, start, "unterminated string literal", NULL);
    p->pos++;
    return OX_OK;
}

static enum ox_status parse_class(struct gp *p, struct evec *out) {
    const char *start = p->pos++;
    uint32_t type = GRAM_CHAR;
    if (p->pos < p->end && *p->pos == '^') {
        type = GRAM_CHAR_NOT;
        p->pos++;
    }
    size_t first = out->n;
    while (p->pos < p->end && *p->pos != ']') {
        uint32_t lo, hi;
        OX_TRY(parse_char(p, &lo));
        OX_TRY(ev_push(p, out, out->n == first ? type : GRAM_CHAR_ALT, lo));
        if (p->pos + 1 < p->end && p->pos[0] == '-' && p->pos[1] != ']') {
            const char *at = p->pos++;
            OX_TRY(parse_char(p, &hi));
            if (hi < lo)
                return gp_fail(p, at, "character range upper end below lower end", NULL);
            OX_TRY(ev_push(p, out, GRAM_RNG_UPPER, hi));
        }
    }
    if (p->pos >= p->end)
        return gp_fail(p, start, "unterminated character class", NULL);
    if (out->n == first)
        return gp_fail(p, start, "empty character class", NULL);
    p->pos++;
    return OX_OK;
}

/* Parse a decimal count of {m,n}; *present false when there are no digits. */
static enum ox_status parse_count(struct gp *p, uint32_t *v, bool *present) {
    *v = 0;
    *present = false;
    while (p->pos < p->end && *p->pos >= '0' && *p->pos <= '9') {
        *v = *v * 10 + (uint32_t)(*p->pos++ - '0');
        *present = true;
        if (*v > GRAM_MAX_REPEAT)
            return gp_fail(p, p->pos, "repetition count too large", NULL);
    }
    return OX_OK;
}

#define REP_INF UINT32_MAX

/* Rewrite out[sym..] repeated {min,max}: min copies, then S* as R ::= S R | , or the optional
 * tail (S (S (S)?)?)? as nested generated rules. */
static enum ox_status repeat(struct gp *p, uint32_t rule, struct evec *out, size_t sym,
                             uint32_t min, uint32_t max) {
    struct evec s = {0};
    enum ox_status st = ev_append(p, &s, out->v + sym, out->n - sym);
    p->total_elems -= out->n - sym;
    out->n = sym;
    for (uint32_t i = 0; i < min && st == OX_OK; i++)
        st = ev_append(p, out, s.v, s.n);
    uint32_t tail = REP_INF, id = 0;
    for (uint32_t i = 0; st == OX_OK && (max == REP_INF ? i < 1 : i < max - min); i++) {
        struct evec body = {0};
        st = gen_rule(p, rule, &id);
        if (st == OX_OK)
            st = ev_append(p, &body, s.v, s.n);
        if (st == OX_OK && (max == REP_INF || tail != REP_INF))
            st = ev_push(p, &body, GRAM_REF, max == REP_INF ? id : tail);
        if (st == OX_OK)
            st = ev_push(p, &body, GRAM_ALT, 0);
        if (st == OX_OK)
            st = ev_push(p, &body, GRAM_END, 0);
        if (st == OX_OK)
            p->rules[id].body = body;
        else
            free(body.v);
        tail = id;
    }
    if (st == OX_OK && tail != REP_INF)
        st = ev_push(p, out, GRAM_REF, tail);
    p->total_elems -= s.n;
    free(s.v);
    return st;
}

static enum ox_status parse_alternates(struct gp *p, uint32_t rule, struct evec *out, bool nested);

static enum ox_status parse_group(struct gp *p, uint32_t rule, struct evec *out) {
    const char *start = p->pos++;
    if (++p->depth > GRAM_MAX_NEST)
        return gp_fail(p, start, "parentheses nested too deeply", NULL);
    uint32_t id;
    OX_TRY(gen_rule(p, rule, &id));
    struct evec body = {0};
    skip_space(p, true);
    enum ox_status st = parse_alternates(p, rule, &body, true);
    if (st == OX_OK && (p->pos >= p->end || *p->pos != ')'))
        st = gp_fail(p, start, "unmatched '('", NULL);
    if (st != OX_OK) {
        free(body.v);
        return st;
    }
    p->pos++;
    p->depth--;
    p->rules[id].body = body;
    return ev_push(p, out, GRAM_REF, id);
}

/* The quantifier at p->pos applied to out[sym..]. */
static enum ox_status parse_quantifier(struct gp *p, uint32_t rule, struct evec *out, size_t sym) {
    const char *at = p->pos;
    if (sym == out->n)
        return gp_fail(p, at, "repetition with nothing before it", NULL);
    char c = *p->pos++;
    if (c == '*')
        return repeat(p, rule, out, sym, 0, REP_INF);
    if (c == '+')
        return repeat(p, rule, out, sym, 1, REP_INF);
    if (c == '?')
        return repeat(p, rule, out, sym, 0, 1);
    uint32_t min, max;
    bool has_min, has_max;
    skip_space(p, false);
    OX_TRY(parse_count(p, &min, &has_min));
    skip_space(p, false);
    max = min;
    if (p->pos < p->end && *p->pos == ',') {
        p->pos++;
        skip_space(p, false);
        OX_TRY(parse_count(p, &max, &has_max));
        if (!has_max)
            max = REP_INF;
        skip_space(p, false);
    } else if (!has_min) {
        return gp_fail(p, at, "expected a count in '{'", NULL);
    }
    if (p->pos >= p->end || *p->pos != '}')
        return gp_fail(p, at, "expected '}' to close the repetition", NULL);
    p->pos++;
    if (max < min)
        return gp_fail(p, at, "repetition {m,n} with n < m", NULL);
    return repeat(p, rule, out, sym, min, max);
}

static enum ox_status parse_sequence(struct gp *p, uint32_t rule, struct evec *out, bool nested) {
    size_t sym = out->n; /* start of the last symbol, for a following quantifier */
    while (p->pos < p->end) {
        char c = *p->pos;
        size_t start = out->n;
        if (c == '"') {
            OX_TRY(parse_literal(p, out));
        } else if (c == '[') {
            OX_TRY(parse_class(p, out));
        } else if (c == '(') {
            OX_TRY(parse_group(p, rule, out));
        } else if (c == '.') {
            p->pos++;
            OX_TRY(ev_push(p, out, GRAM_ANY, 0));
        } else if (is_word(c)) {
            const char *name = p->pos;
            while (p->pos < p->end && is_word(*p->pos))
                p->pos++;
            uint32_t id;
            OX_TRY(rule_id(p, name, (size_t)(p->pos - name), &id));
            if (p->rules[id].first_ref == (size_t)-1)
                p->rules[id].first_ref = (size_t)(name - p->src);
            OX_TRY(ev_push(p, out, GRAM_REF, id));
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            OX_TRY(parse_quantifier(p, rule, out, sym));
            start = out->n; /* a quantifier cannot apply twice */
        } else {
            break;
        }
        sym = start;
        skip_space(p, nested);
    }
    return OX_OK;
}

static enum ox_status parse_alternates(struct gp *p, uint32_t rule, struct evec *out, bool nested) {
    OX_TRY(parse_sequence(p, rule, out, nested));
    while (p->pos < p->end && *p->pos == '|') {
        OX_TRY(ev_push(p, out, GRAM_ALT, 0));
        p->pos++;
        skip_space(p, true);
        OX_TRY(parse_sequence(p, rule, out, nested));
    }
    return ev_push(p, out, GRAM_END, 0);
}

static enum ox_status parse_rule(struct gp *p) {
    const char *name = p->pos;
    while (p->pos < p->end && is_word(*p->pos))
        p->pos++;
    if (p->pos == name)
        return gp_fail(p, name, "expected a rule name", NULL);
    uint32_t id;
    OX_TRY(rule_id(p, name, (size_t)(p->pos - name), &id));
    if (p->rules[id].defined)
        return gp_fail(p, name, "rule defined twice: ", p->rules[id].name);
    p->rules[id].defined = true;
    skip_space(p, false);
    if (p->end - p->pos < 3 || memcmp(p->pos, "::=", 3) != 0)
        return gp_fail(p, p->pos, "expected '::=' after rule name ", p->rules[id].name);
    p->pos += 3;
    skip_space(p, true);
    struct evec body = {0};
    enum ox_status st = parse_alternates(p, id, &body, false);
    if (st == OX_OK && p->pos < p->end && *p->pos != '\n' && *p->pos != '\r')
        st = gp_fail(p, p->pos, "unexpected character in rule ", p->rules[id].name);
    if (st != OX_OK) {
        free(body.v);
        return st;
    }
    p->rules[id].body = body;
    return OX_OK;
}

/* Flatten the builder's rules into a struct gram (rules with no body get an empty one, which
 * gram_parse reports as undefined through first_ref). */
static enum ox_status flatten(struct gp *p, struct gram *g, size_t **first_ref) {
    size_t total = 0;
    for (uint32_t i = 0; i < p->n_rules; i++)
        total += p->rules[i].body.n ? p->rules[i].body.n : 1;
    g->elems = malloc(total * sizeof(*g->elems));
    g->rule_start = malloc((p->n_rules + 1) * sizeof(*g->rule_start));
    g->rule_names = calloc(p->n_rules + 1, sizeof(*g->rule_names));
    *first_ref = malloc((p->n_rules + 1) * sizeof(**first_ref));
    if (!g->elems || !g->rule_start || !g->rule_names || !*first_ref)
        return ox_fail(OX_ERR_OOM, "grammar: out of memory");
    g->n_rules = p->n_rules;
    for (uint32_t i = 0; i < p->n_rules; i++) {
        struct brule *r = &p->rules[i];
        g->rule_start[i] = (uint32_t)g->n_elems;
        g->rule_names[i] = r->name;
        r->name = NULL;
        (*first_ref)[i] = r->defined ? (size_t)-1 : r->first_ref;
        if (r->body.n) {
            memcpy(g->elems + g->n_elems, r->body.v, r->body.n * sizeof(*g->elems));
            g->n_elems += r->body.n;
        } else {
            g->elems[g->n_elems++] = (struct gram_elem){GRAM_END, 0};
        }
    }
    return OX_OK;
}

static void gp_free(struct gp *p) {
    for (uint32_t i = 0; i < p->n_rules; i++) {
        free(p->rules[i].name);
        free(p->rules[i].body.v);
    }
    free(p->rules);
    strmap_free(&p->names);
}

enum ox_status gram_parse(const char *src, size_t len, struct gram **out) {
    *out = NULL;
    if (!src)
        return ox_fail(OX_ERR_INVALID_ARG, "grammar: NULL source");
    struct gp p = {.src = src, .pos = src, .end = src + len};
    struct gram *g = calloc(1, sizeof(*g));
    size_t *first_ref = NULL;
    enum ox_status st = g ? OX_OK : ox_fail(OX_ERR_OOM, "grammar: out of memory");
    skip_space(&p, true);
    while (st == OX_OK && p.pos < p.end) {
        st = parse_rule(&p);
        skip_space(&p, true);
    }
    if (st == OX_OK)
        st = flatten(&p, g, &first_ref);
    if (st == OX_OK) {
        for (uint32_t i = 0; i < g->n_rules; i++) {
            if (first_ref[i] != (size_t)-1) {
                p.pos = src + first_ref[i];
                st = gp_fail(&p, p.pos, "undefined rule ", g->rule_names[i]);
                break;
            }
        }
    }
    if (st == OX_OK)
        st = gram_check(g);
    free(first_ref);
    gp_free(&p);
    if (st != OX_OK) {
        gram_free(g);
        return st;
    }
    *out = g;
    return OX_OK;
}

void gram_free(struct gram *g) {
    if (!g)
        return;
    for (uint32_t i = 0; g->rule_names && i < g->n_rules; i++)
        free(g->rule_names[i]);
    free(g->rule_names);
    free(g->rule_start);
    free(g->elems);
    free(g->nullable);
    free(g);
}
