/* lex.c: splits a template into text and tags, applying Jinja's whitespace control rules. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <utf8proc.h>

#include "chat/lex.h"

struct lexer {
    struct jarena *a;
    const char *src, *end, *p;
    int line;
    struct jtok *toks;
    size_t n, cap;
    char *err;
    size_t errlen;
};

static int push(struct lexer *L, struct jtok t) {
    if (L->n == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        struct jtok *nt = jarena_alloc(L->a, cap * sizeof *nt);
        if (!nt)
            return -1;
        if (L->n)
            memcpy(nt, L->toks, L->n * sizeof *nt);
        L->toks = nt;
        L->cap = cap;
    }
    L->toks[L->n++] = t;
    return 0;
}

static int lex_fail(struct lexer *L, const char *msg) {
    snprintf(L->err, L->errlen, "line %d: %s", L->line, msg);
    return -1;
}

static void count_lines(struct lexer *L, const char *from, const char *to) {
    for (; from < to; from++)
        L->line += *from == '\n';
}

static int is_ws(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* A quoted string literal with Python escapes, decoded into the arena. */
static int lex_string(struct lexer *L) {
    char q = *L->p++;
    const char *s = L->p;
    char *buf = jarena_alloc(L->a, (size_t)(L->end - s) + 1);
    size_t n = 0;
    if (!buf)
        return lex_fail(L, "out of memory");
    while (s < L->end && *s != q) {
        if (*s == '\\' && s + 1 < L->end) {
            s++;
            char e = *s++;
            switch (e) {
            case 'n': buf[n++] = '\n'; break;
            case 't': buf[n++] = '\t'; break;
            case 'r': buf[n++] = '\r'; break;
            case '0': buf[n++] = '\0'; break;
            case '\\': buf[n++] = '\\'; break;
            case '\'': buf[n++] = '\''; break;
            case '"': buf[n++] = '"'; break;
            case 'a': buf[n++] = '\a'; break;
            case 'b': buf[n++] = '\b'; break;
            case 'f': buf[n++] = '\f'; break;
            case 'v': buf[n++] = '\v'; break;
            case 'x':
            case 'u':
            case 'U': {
                /* \xhh, \uhhhh, \Uhhhhhhhh: a code point, stored as UTF-8 (never longer than
                 * the escape itself, so buf cannot overflow). */
                int want = e == 'x' ? 2 : e == 'u' ? 4 : 8, got = 0;
                uint32_t cp = 0;
                while (got < want && s < L->end && isxdigit((unsigned char)*s)) {
                    cp = cp * 16 +
                         (uint32_t)(isdigit((unsigned char)*s) ? *s - '0' : (*s | 0x20) - 'a' + 10);
                    s++;
                    got++;
                }
                if (got != want || cp > 0x10FFFF)
                    return lex_fail(L, "bad escape in string literal");
                n += (size_t)utf8proc_encode_char((utf8proc_int32_t)cp, (uint8_t *)buf + n);
                break;
            }
            case '\n': break;
            default: buf[n++] = '\\'; buf[n++] = e;
            }
            continue;
        }
        if (*s == '\n')
            L->line++;
        buf[n++] = *s++;
    }
    if (s >= L->end)
        return lex_fail(L, "unterminated string literal");
    buf[n] = 0;
    L->p = s + 1;
    return push(L, (struct jtok){T_STRING, L->line, buf, n, 0, 0});
}

static int lex_number(struct lexer *L) {
    const char *s = L->p;
    int is_float = 0;
    while (s < L->end && (isdigit((unsigned char)*s) || *s == '_'))
        s++;
    if (s + 1 < L->end && *s == '.' && isdigit((unsigned char)s[1])) {
        is_float = 1;
        s++;
        while (s < L->end && isdigit((unsigned char)*s))
            s++;
    }
    if (s < L->end && (*s == 'e' || *s == 'E')) {
        const char *e = s + 1;
        if (e < L->end && (*e == '+' || *e == '-'))
            e++;
        if (e < L->end && isdigit((unsigned char)*e)) {
            is_float = 1;
            s = e;
            while (s < L->end && isdigit((unsigned char)*s))
                s++;
        }
    }
    char tmp[64];
    size_t n = 0;
    for (const char *c = L->p; c < s && n < sizeof tmp - 1; c++)
        if (*c != '_')
            tmp[n++] = *c;
    tmp[n] = 0;
    struct jtok t = {is_float ? T_FLOAT : T_INT, L->line, L->p, (size_t)(s - L->p), 0, 0};
    if (is_float)
        t.f = strtod(tmp, NULL);
    else {
        errno = 0;
        t.i = strtoll(tmp, NULL, 10);
        if (errno == ERANGE) /* Python ints are unbounded; ours are 64-bit */
            return lex_fail(L, "integer literal too large");
    }
    L->p = s;
    return push(L, t);
}

/* Length of the identifier character at p (0 if none): Python 3 identifiers, so letters and
 * '_' anywhere, digits, marks and connectors after the first. Non-ASCII via utf8proc. */
static size_t ident_char(const char *p, const char *end, int first) {
    unsigned char ch = (unsigned char)*p;
    if (p >= end)
        return 0;
    if (ch < 0x80)
        return isalpha(ch) || ch == '_' || (!first && isdigit(ch)) ? 1 : 0;
    utf8proc_int32_t cp;
    utf8proc_ssize_t n = utf8proc_iterate((const uint8_t *)p, end - p, &cp);
    if (n <= 0)
        return 0;
    switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_NL: return (size_t)n;
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_PC: return first ? 0 : (size_t)n;
    default: return 0;
    }
}

static const char *const ops2[] = {"**", "//", "==", "!=", "<=", ">=", NULL};

/* Expression tokens up to the tag's end; returns 1 if the end had a '-' (strip after), 2 if a
 * '+' (keep the newline trim_blocks would take). */
static int lex_tag(struct lexer *L, int is_var) {
    const char *close = is_var ? "}}" : "%}";
    for (;;) {
        while (L->p < L->end && is_ws(*L->p)) {
            L->line += *L->p == '\n';
            L->p++;
        }
        if (L->p >= L->end)
            return lex_fail(L, is_var ? "unclosed '{{'" : "unclosed '{%'");
        size_t left = (size_t)(L->end - L->p);
        int mark = (*L->p == '-' || *L->p == '+') && left >= 3 && !memcmp(L->p + 1, close, 2);
        if (mark || (left >= 2 && !memcmp(L->p, close, 2))) {
            int plus = mark && *L->p == '+';
            L->p += mark ? 3 : 2;
            if (push(L, (struct jtok){is_var ? T_VAR_END : T_BLOCK_END, L->line, 0, 0, 0, 0}))
                return -1;
            return plus ? 2 : mark;
        }
        char c = *L->p;
        if (c == '\'' || c == '"') {
            if (lex_string(L))
                return -1;
        } else if (isdigit((unsigned char)c)) {
            if (lex_number(L))
                return -1;
        } else if (ident_char(L->p, L->end, 1)) {
            const char *s = L->p;
            size_t k;
            while ((k = ident_char(L->p, L->end, L->p == s)) > 0)
                L->p += k;
            if (push(L, (struct jtok){T_NAME, L->line, s, (size_t)(L->p - s), 0, 0}))
                return -1;
        } else {
            size_t n = 0;
            for (int i = 0; ops2[i]; i++)
                if (left >= 2 && !memcmp(L->p, ops2[i], 2))
                    n = 2;
            if (!n && strchr("+-*/%~<>=()[]{},.:|!", c))
                n = 1;
            if (!n || (n == 1 && c == '!'))
                return lex_fail(L, "unexpected character in tag");
            if (push(L, (struct jtok){T_OP, L->line, L->p, n, 0, 0}))
                return -1;
            L->p += n;
        }
    }
}

/* Text before a tag, with '-' stripping or lstrip_blocks applied. */
static int emit_text(struct lexer *L, const char *s, const char *e, int rstrip, int lstrip_block,
                     int line_starting) {
    if (rstrip) {
        while (e > s && is_ws(e[-1]))
            e--;
    } else if (lstrip_block) {
        const char *l = e;
        while (l > s && l[-1] != '\n')
            l--;
        if (l > s || line_starting) {
            const char *w = l;
            while (w < e && is_ws(*w))
                w++;
            if (w == e)
                e = l;
        }
    }
    if (e == s)
        return 0;
    char *buf = jarena_alloc(L->a, (size_t)(e - s) + 1);
    if (!buf)
        return lex_fail(L, "out of memory");
    memcpy(buf, s, (size_t)(e - s));
    return push(L, (struct jtok){T_TEXT, L->line, buf, (size_t)(e - s), 0, 0});
}

/* Matches "ws name ws [-]%}" at p; returns the end (after "%}") or NULL, and the dash. */
static const char *match_tag_word(const char *p, const char *end, const char *word, int *dash) {
    size_t n = strlen(word);
    while (p < end && is_ws(*p))
        p++;
    if ((size_t)(end - p) < n || memcmp(p, word, n))
        return NULL;
    p += n;
    while (p < end && is_ws(*p))
        p++;
    *dash = p < end && *p == '-';
    p += *dash;
    return end - p >= 2 && p[0] == '%' && p[1] == '}' ? p + 2 : NULL;
}

/* At the inside of a "{%" tag: if it is {% raw %}, emit everything up to {% endraw %} as
 * text and return whether the endraw tag ends with '-'; -1 if it is another tag (nothing is
 * consumed), -2 on error. */
static int lex_raw(struct lexer *L) {
    int dash, end_dash;
    const char *body = match_tag_word(L->p, L->end, "raw", &dash);
    if (!body)
        return -1;
    if (dash)
        while (body < L->end && is_ws(*body))
            body++;
    for (const char *t = body; t + 1 < L->end; t++) {
        if (t[0] != '{' || t[1] != '%')
            continue;
        int lead = t + 2 < L->end && (t[2] == '-' || t[2] == '+');
        const char *after = match_tag_word(t + 2 + lead, L->end, "endraw", &end_dash);
        if (!after)
            continue;
        const char *e = t;
        if (lead && t[2] == '-')
            while (e > body && is_ws(e[-1]))
                e--;
        char *buf = jarena_alloc(L->a, (size_t)(e - body) + 1);
        if (!buf)
            return lex_fail(L, "out of memory"), -2;
        memcpy(buf, body, (size_t)(e - body));
        if (push(L, (struct jtok){T_TEXT, L->line, buf, (size_t)(e - body), 0, 0}))
            return lex_fail(L, "out of memory"), -2;
        count_lines(L, L->p, after);
        L->p = after;
        return end_dash;
    }
    lex_fail(L, "missing {% endraw %}");
    return -2;
}

int jlex(struct jarena *a, const char *src, size_t len, struct jtok **toks, size_t *ntoks,
         char *err, size_t errlen) {
    struct lexer L = {a, src, src + len, src, 1, NULL, 0, 0, err, errlen};
    int line_starting = 1;
    while (L.p < L.end) {
        const char *t = L.p;
        while (t + 1 < L.end && !(t[0] == '{' && (t[1] == '{' || t[1] == '%' || t[1] == '#')))
            t++;
        if (t + 1 >= L.end) {
            if (emit_text(&L, L.p, L.end, 0, 0, 0))
                return -1;
            break;
        }
        char kind = t[1];
        const char *after = t + 2;
        int dash = after < L.end && *after == '-', plus = after < L.end && *after == '+';
        if (emit_text(&L, L.p, t, dash, kind != '{' && !plus, line_starting))
            return -1;
        count_lines(&L, L.p, t);
        L.p = after + (dash || plus);
        int strip_after;
        if (kind == '#') {
            const char *c = L.p;
            while (c + 1 < L.end && !(c[0] == '#' && c[1] == '}'))
                c++;
            if (c + 1 >= L.end)
                return lex_fail(&L, "unclosed comment");
            strip_after = c > L.p && c[-1] == '-';
            count_lines(&L, L.p, c);
            L.p = c + 2;
        } else if (kind == '%' && (strip_after = lex_raw(&L)) != -1) {
            if (strip_after == -2)
                return -1;
        } else {
            if (push(&L,
                     (struct jtok){kind == '{' ? T_VAR_BEGIN : T_BLOCK_BEGIN, L.line, 0, 0, 0, 0}))
                return lex_fail(&L, "out of memory");
            strip_after = lex_tag(&L, kind == '{');
            if (strip_after < 0)
                return -1;
        }
        line_starting = 0;
        if (strip_after == 1) {
            while (L.p < L.end && is_ws(*L.p)) {
                line_starting = *L.p == '\n';
                L.line += *L.p == '\n';
                L.p++;
            }
        } else if (strip_after == 0 && kind != '{' && L.p < L.end && *L.p == '\n') {
            /* trim_blocks: the first newline after a block or comment tag goes ('+%}' keeps
             * it). */
            L.p++;
            L.line++;
            line_starting = 1;
        }
    }
    if (push(&L, (struct jtok){T_EOF, L.line, 0, 0, 0, 0}))
        return lex_fail(&L, "out of memory");
    *toks = L.toks;
    *ntoks = L.n;
    return 0;
}
