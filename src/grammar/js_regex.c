/* js_regex.c: a JSON Schema `pattern` (ECMA-262 regex) as GBNF for the characters of a JSON
 * string: literals, escapes, classes, `.`, groups, alternation and quantifiers, with ^ and $ at
 * the ends of top-level alternatives (an unanchored side allows any text there). Characters
 * that JSON escapes (quote, backslash, controls) are matched in their escaped form. Lookaround,
 * backreferences, word boundaries and the like are refused. */
#include <stdio.h>
#include <stdlib.h>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"

#define RX_MAX_RANGES 512 /* ranges in one character class */
#define RX_MAX_NEST   32  /* nested groups */

struct rx {
    struct jsc *c;
    const uint32_t *cp;
    size_t n, pos;
    int depth;
};

struct cset {
    uint32_t lo[RX_MAX_RANGES], hi[RX_MAX_RANGES];
    int n;
};

static enum ox_status cs_add(struct cset *s, uint32_t lo, uint32_t hi) {
    if (s->n == RX_MAX_RANGES)
        return js_fail("pattern: character class with more than %d ranges", RX_MAX_RANGES);
    s->lo[s->n] = lo, s->hi[s->n] = hi, s->n++;
    return OX_OK;
}

static int cmp_lo(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sort and merge overlapping or adjacent ranges. */
static void cs_norm(struct cset *s) {
    uint64_t r[RX_MAX_RANGES];
    for (int i = 0; i < s->n; i++)
        r[i] = (uint64_t)s->lo[i] << 32 | s->hi[i];
    qsort(r, (size_t)s->n, sizeof r[0], cmp_lo);
    int m = 0;
    for (int i = 0; i < s->n; i++) {
        uint32_t lo = (uint32_t)(r[i] >> 32), hi = (uint32_t)r[i];
        if (m && lo <= s->hi[m - 1] + 1) {
            if (hi > s->hi[m - 1])
                s->hi[m - 1] = hi;
        } else {
            s->lo[m] = lo, s->hi[m] = hi, m++;
        }
    }
    s->n = m;
}

/* Complement within Unicode (a normalized set of n ranges has at most n + 1 gaps). */
static enum ox_status cs_negate(struct cset *s) {
    cs_norm(s);
    struct cset t = {.n = 0};
    uint32_t next = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->lo[i] > next)
            OX_TRY(cs_add(&t, next, s->lo[i] - 1));
        next = s->hi[i] + 1;
    }
    if (next <= 0x10FFFF)
        OX_TRY(cs_add(&t, next, 0x10FFFF));
    *s = t;
    return OX_OK;
}

static bool cs_has(const struct cset *s, uint32_t cp) {
    for (int i = 0; i < s->n; i++)
        if (cp >= s->lo[i] && cp <= s->hi[i])
            return true;
    return false;
}

/* One symbol for the set: a class of the characters JSON writes as they are, or'ed with the
 * escaped forms of quote, backslash and \b \f \n \r \t (other controls are never generated). */
static enum ox_status cs_put(const struct cset *in, struct jbuf *out) {
    static const char esc[][2] = {{'"', '"'},  {'\\', '\\'}, {'\b', 'b'}, {'\f', 'f'},
                                  {'\n', 'n'}, {'\r', 'r'},  {'\t', 't'}};
    struct cset s = *in;
    cs_norm(&s);
    struct jbuf cls = {0};
    enum ox_status st = OX_OK;
    int n_alt = 0;
    for (int i = 0; i < s.n && st == OX_OK; i++) {
        uint32_t lo = s.lo[i] < 0x20 ? 0x20 : s.lo[i], hi = s.hi[i];
        for (uint32_t cut = lo; cut <= hi && st == OX_OK;) { /* split around '"' and '\\' */
            uint32_t end = hi;
            if (cut <= '"' && end >= '"')
                end = cut == '"' ? '"' : '"' - 1;
            else if (cut <= '\\' && end >= '\\')
                end = cut == '\\' ? '\\' : '\\' - 1;
            if (cut != '"' && cut != '\\') {
                st = js_put_cp(&cls, cut);
                if (st == OX_OK && end > cut)
                    st = js_put(&cls, "-");
                if (st == OX_OK && end > cut)
                    st = js_put_cp(&cls, end);
            }
            cut = end + 1;
        }
    }
    st = st == OX_OK ? js_put(out, "(") : st;
    if (st == OX_OK && cls.len) {
        st = js_put(out, "[");
        if (st == OX_OK)
            st = js_putn(out, cls.p, cls.len);
        if (st == OX_OK)
            st = js_put(out, "]");
        n_alt++;
    }
    free(cls.p);
    for (size_t i = 0; i < sizeof esc / sizeof esc[0] && st == OX_OK; i++) {
        if (!cs_has(&s, (uint8_t)esc[i][0]))
            continue;
        char tmp[16];
        snprintf(tmp, sizeof tmp, "%s\"\\\\%s%c\"", n_alt++ ? " | " : "",
                 esc[i][1] == '"'    ? "\\"
                 : esc[i][1] == '\\' ? "\\"
                                     : "",
                 esc[i][1]);
        st = js_put(out, tmp);
    }
    if (st == OX_OK && !n_alt)
        return js_fail("pattern: a character class matches nothing that can be generated");
    return st == OX_OK ? js_put(out, ")") : st;
}

static bool at(const struct rx *r, uint32_t ch) {
    return r->pos < r->n && r->cp[r->pos] == ch;
}

/* \d \w \s and their negations into s; false when e is not one of them. */
static enum ox_status class_escape(uint32_t e, struct cset *s, bool *is_set) {
    struct cset t = {.n = 0};
    uint32_t lower = e | 0x20;
    *is_set = lower == 'd' || lower == 'w' || lower == 's';
    if (!*is_set)
        return OX_OK;
    if (lower == 'd' || lower == 'w')
        OX_TRY(cs_add(&t, '0', '9'));
    if (lower == 'w') {
        OX_TRY(cs_add(&t, 'a', 'z'));
        OX_TRY(cs_add(&t, 'A', 'Z'));
        OX_TRY(cs_add(&t, '_', '_'));
    }
    if (lower == 's') {
        OX_TRY(cs_add(&t, '\t', '\r')); /* \t \n \v \f \r */
        OX_TRY(cs_add(&t, ' ', ' '));
    }
    if (e != lower) /* \D \W \S */
        OX_TRY(cs_negate(&t));
    for (int i = 0; i < t.n; i++)
        OX_TRY(cs_add(s, t.lo[i], t.hi[i]));
    return OX_OK;
}

static enum ox_status hex_escape(struct rx *r, int digits, uint32_t *cp) {
    *cp = 0;
    for (int i = 0; i < digits; i++, r->pos++) {
        uint32_t h = r->pos < r->n ? r->cp[r->pos] : 0;
        int v = h >= '0' && h <= '9'                     ? (int)(h - '0')
                : (h | 0x20) >= 'a' && (h | 0x20) <= 'f' ? (int)((h | 0x20) - 'a' + 10)
                                                         : -1;
        if (v < 0)
            return js_fail("pattern: bad hex escape");
        *cp = *cp * 16 + (uint32_t)v;
    }
    return OX_OK;
}

/* After a backslash: a set (into s, *is_set) or one character (*cp). */
static enum ox_status escape(struct rx *r, struct cset *s, bool *is_set, uint32_t *cp) {
    if (r->pos >= r->n)
        return js_fail("pattern: ends with a backslash");
    uint32_t e = r->cp[r->pos++];
    OX_TRY(class_escape(e, s, is_set));
    if (*is_set)
        return OX_OK;
    static const char simple[] = "n\nt\tr\rf\fv\v0";
    const char *hit = e < 0x80 && e ? strchr(simple, (int)e) : NULL;
    if (hit && (hit - simple) % 2 == 0)
        return *cp = (uint8_t)hit[1], OX_OK;
    if (e == 'x' || e == 'u')
        return hex_escape(r, e == 'x' ? 2 : 4, cp);
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '1' && e <= '9'))
        return js_fail("pattern: escape \\%c (backreference, word boundary, ...) is not supported",
                       (char)e);
    *cp = e; /* an escaped punctuation character stands for itself */
    return OX_OK;
}

/* [...] after the '[': items, ranges a-b, escapes, and ^ for negation. */
static enum ox_status char_class(struct rx *r, struct cset *s) {
    bool neg = at(r, '^');
    r->pos += neg;
    while (r->pos < r->n && !at(r, ']')) {
        bool is_set = false;
        uint32_t lo = r->cp[r->pos++], hi;
        if (lo == '\\')
            OX_TRY(escape(r, s, &is_set, &lo));
        if (is_set)
            continue;
        hi = lo;
        if (at(r, '-') && r->pos + 1 < r->n && r->cp[r->pos + 1] != ']') {
            r->pos++;
            hi = r->cp[r->pos++];
            if (hi == '\\')
                OX_TRY(escape(r, s, &is_set, &hi));
            if (is_set || hi < lo)
                return js_fail("pattern: bad range in a character class");
        }
        OX_TRY(cs_add(s, lo, hi));
    }
    if (!at(r, ']'))
        return js_fail("pattern: unterminated character class");
    r->pos++;
    return neg ? cs_negate(s) : OX_OK;
}

/* One character in its JSON-escaped form, as a literal. */
static enum ox_status put_char(struct jbuf *out, uint32_t cp) {
    if (cp < 0x20 || cp == '"' || cp == '\\') {
        char ch = (char)cp;
        return js_put_json_str(out, &ch, 1, false);
    }
    OX_TRY(js_put(out, "\""));
    OX_TRY(js_put_cp(out, cp));
    return js_put(out, "\"");
}

/* {m}, {m,}, {m,n} at r->pos: true (and the counts; n < 0: none) when it is one. */
static bool braces(const struct rx *r, size_t *end, long *m, long *n) {
    size_t i = r->pos + 1;
    long v[2] = {-1, -1};
    int k = 0;
    for (; i < r->n && k < 2; i++) {
        uint32_t ch = r->cp[i];
        if (ch >= '0' && ch <= '9')
            v[k] = (v[k] < 0 ? 0 : v[k]) * 10 + (long)(ch - '0'),
            v[k] = v[k] > 1L << 30 ? 1L << 30 : v[k];
        else if (ch == ',' && k == 0 && v[0] >= 0)
            k = 1, v[1] = -2; /* -2: "{m,": open unless digits follow */
        else if (ch == '}')
            break;
        else
            return false;
    }
    if (i >= r->n || r->cp[i] != '}' || v[0] < 0)
        return false;
    *end = i + 1, *m = v[0], *n = k == 0 ? v[0] : v[1] == -2 ? -1 : v[1];
    return true;
}

static enum ox_status quantifier(struct rx *r, struct jbuf *out) {
    size_t end;
    long m, n;
    char tmp[64];
    if (at(r, '*') || at(r, '+') || at(r, '?')) {
        snprintf(tmp, sizeof tmp, "%c", (char)r->cp[r->pos++]);
    } else if (at(r, '{') && braces(r, &end, &m, &n)) {
        r->pos = end;
        if (m > GRAM_MAX_REPEAT || n > GRAM_MAX_REPEAT)
            return js_fail("pattern: repetition count over the limit of %d", GRAM_MAX_REPEAT);
        if (n >= 0 && n < m)
            return js_fail("pattern: repetition {%ld,%ld} with max < min", m, n);
        if (n < 0)
            snprintf(tmp, sizeof tmp, "{%ld,}", m);
        else
            snprintf(tmp, sizeof tmp, "{%ld,%ld}", m, n);
    } else {
        return OX_OK;
    }
    if (at(r, '+'))
        return js_fail("pattern: possessive quantifiers are not supported");
    r->pos += at(r, '?'); /* lazy matches the same strings */
    return js_put(out, tmp);
}

static enum ox_status alternatives(struct rx *r, bool top, struct jbuf *out);

static enum ox_status atom(struct rx *r, struct jbuf *out) {
    uint32_t ch = r->cp[r->pos++], cp = ch;
    struct cset s = {.n = 0};
    bool is_set = false;
    size_t end;
    long m, n;
    switch (ch) {
    case '(':
        if (at(r, '?')) {
            if (r->pos + 1 >= r->n || r->cp[r->pos + 1] != ':')
                return js_fail("pattern: only (...) and (?:...) groups are supported");
            r->pos += 2;
        }
        if (++r->depth > RX_MAX_NEST)
            return js_fail("pattern: groups nested deeper than %d", RX_MAX_NEST);
        OX_TRY(alternatives(r, false, out));
        r->depth--;
        if (!at(r, ')'))
            return js_fail("pattern: missing ')'");
        r->pos++;
        return OX_OK;
    case '[': OX_TRY(char_class(r, &s)); return cs_put(&s, out);
    case '.':
        OX_TRY(cs_add(&s, '\n', '\n'));
        OX_TRY(cs_add(&s, '\r', '\r'));
        OX_TRY(cs_negate(&s));
        return cs_put(&s, out);
    case '\\':
        OX_TRY(escape(r, &s, &is_set, &cp));
        return is_set ? cs_put(&s, out) : put_char(out, cp);
    case '^':
    case '$': return js_fail("pattern: ^ and $ are supported only at the ends");
    case '*':
    case '+':
    case '?': return js_fail("pattern: nothing to repeat before '%c'", (char)ch);
    case '{':
        r->pos--;
        if (braces(r, &end, &m, &n))
            return js_fail("pattern: nothing to repeat before '{'");
        r->pos++;
        return put_char(out, ch);
    default: return put_char(out, ch);
    }
}

/* A sequence up to '|' or ')' (or the end); at the top level with its anchors. */
static enum ox_status sequence(struct rx *r, bool top, struct jbuf *out) {
    bool start = top && at(r, '^'), end = false;
    r->pos += start;
    if (top && !start) {
        OX_TRY(js_put_prim(r->c, out, JS_CHAR));
        OX_TRY(js_put(out, "* "));
    }
    while (r->pos < r->n && !at(r, '|') && !at(r, ')')) {
        if (top && at(r, '$') && (r->pos + 1 == r->n || r->cp[r->pos + 1] == '|')) {
            r->pos++;
            end = true;
            break;
        }
        OX_TRY(atom(r, out));
        OX_TRY(quantifier(r, out));
        OX_TRY(js_put(out, " "));
    }
    if (top && !end) {
        OX_TRY(js_put_prim(r->c, out, JS_CHAR));
        OX_TRY(js_put(out, "*"));
    }
    return OX_OK;
}

static enum ox_status alternatives(struct rx *r, bool top, struct jbuf *out) {
    OX_TRY(js_put(out, "("));
    OX_TRY(sequence(r, top, out));
    while (at(r, '|')) {
        r->pos++;
        OX_TRY(js_put(out, " | "));
        OX_TRY(sequence(r, top, out));
    }
    return js_put(out, ")");
}

enum ox_status js_regex(struct jsc *c, const char *pat, size_t len, struct jbuf *out) {
    uint32_t *cps = malloc((len + 1) * sizeof *cps);
    if (!cps)
        return ox_fail(OX_ERR_OOM, "json schema: out of memory");
    struct gram_u8 d = {0};
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        int got = gram_u8_feed(&d, (uint8_t)pat[i], &cps[n]);
        if (got < 0) {
            free(cps);
            return js_fail("pattern: invalid UTF-8");
        }
        n += got == 1;
    }
    struct rx r = {c, cps, n, 0, 0};
    enum ox_status st = d.need ? js_fail("pattern: invalid UTF-8") : alternatives(&r, true, out);
    if (st == OX_OK && r.pos < r.n)
        st = js_fail("pattern: unmatched ')'");
    free(cps);
    return st;
}
