/* percent_format.c: Python's printf-style formatting, 'fmt' % args (the % operator and the
 * |format filter): flags (- + space 0 #), width and precision, and the conversions s r a d i
 * u f F e E g G x X o c. Numbers print as C's printf prints them, which Python's formatting
 * follows for these; strings pad and cut by characters, as Python counts them. */
#include <stdio.h>
#include <stdlib.h>

#include "chat/jinja_int.h"

struct spec {
    char flags[8];
    int width, prec; /* -1: not given */
    char conv;
};

/* n*10 + the digit d, held at 99999 once past it. */
static int saturating_digit(int n, char d) {
    return n >= 9999 ? 99999 : n * 10 + (d - '0');
}

/* The spec after a '%' at *p (moved past it); false for one this does not know. */
static bool parse_spec(const char **p, const char *e, struct spec *s) {
    size_t nf = 0;
    s->width = s->prec = -1;
    while (*p < e && strchr("-+ 0#", **p) && nf + 1 < sizeof s->flags)
        s->flags[nf++] = *(*p)++;
    s->flags[nf] = 0;
    /* Digits saturate at 99999: a longer width is refused below, never overflowed. */
    for (; *p < e && **p >= '0' && **p <= '9'; (*p)++)
        s->width = saturating_digit(s->width < 0 ? 0 : s->width, **p);
    if (*p < e && **p == '.') {
        s->prec = 0;
        for ((*p)++; *p < e && **p >= '0' && **p <= '9'; (*p)++)
            s->prec = saturating_digit(s->prec, **p);
    }
    s->conv = *p < e ? **p : 0;
    return s->conv && strchr("sradiufFeEgGxXoc", s->conv) && s->width < 10000 && s->prec < 10000;
}

/* text padded to the width by characters (left-aligned with '-'). */
static void put_padded(struct jbuf *b, const struct spec *s, const char *text, size_t len) {
    size_t chars = 0;
    for (size_t i = 0; i < len; i++)
        chars += ((unsigned char)text[i] & 0xC0) != 0x80;
    bool left = strchr(s->flags, '-') != NULL;
    if (!left)
        for (size_t i = chars; (int)i < s->width; i++)
            jbuf_put(b, " ", 1);
    jbuf_put(b, text, len);
    if (left)
        for (size_t i = chars; (int)i < s->width; i++)
            jbuf_put(b, " ", 1);
}

/* The first prec characters of a string conversion (all without a precision). */
static size_t cut_chars(const char *text, size_t len, int prec) {
    if (prec < 0)
        return len;
    size_t at = 0;
    for (int n = 0; at < len && n <= prec; at++)
        if (((unsigned char)text[at] & 0xC0) != 0x80 && n++ == prec)
            break;
    return at;
}

/* One conversion of v into b; false where v is of a type it does not take. */
static bool convert(struct jctx *c, struct jbuf *b, const struct spec *s, struct jv v) {
    char cfmt[48], tmp[10100];
    if (strchr("sra", s->conv)) {
        struct jbuf t = {.limit = c->opts->max_output};
        int bad = s->conv == 's' ? jv_to_str(&t, v) : jv_repr(&t, v);
        if (!bad)
            put_padded(b, s, t.p ? t.p : "", cut_chars(t.p ? t.p : "", t.len, s->prec));
        free(t.p);
        return !bad;
    }
    if (s->conv == 'c') { /* one character, or the code point of an integer */
        if (v.kind == JV_STR && v.u.s->len && cut_chars(v.u.s->p, v.u.s->len, 1) == v.u.s->len) {
            put_padded(b, s, v.u.s->p, v.u.s->len);
            return true;
        }
        if (v.kind != JV_INT || v.u.i < 0 || v.u.i > 0x10FFFF)
            return false;
        char u[4];
        int64_t cp = v.u.i;
        size_t n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
        static const unsigned char lead[] = {0, 0, 0xC0, 0xE0, 0xF0};
        for (size_t k = n; k-- > 1; cp >>= 6)
            u[k] = (char)(0x80 | (cp & 0x3F));
        u[0] = (char)(n == 1 ? cp : (lead[n] | cp));
        put_padded(b, s, u, n);
        return true;
    }
    bool whole = v.kind == JV_INT || v.kind == JV_BOOL, number = whole || v.kind == JV_FLOAT;
    if (!number)
        return false;
    double f = v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : v.u.b;
    long long i = v.kind == JV_INT ? (long long)v.u.i : v.kind == JV_BOOL ? v.u.b : (long long)f;
    if (strchr("xXo", s->conv) && !whole)
        return false; /* Python: %x format: an integer is required, not float */
    const char *mod = strchr("fFeEgG", s->conv) ? "" : "ll";
    char conv = s->conv == 'i' || s->conv == 'u' ? 'd' : s->conv;
    if (s->prec >= 0)
        snprintf(cfmt, sizeof cfmt, "%%%s%d.%d%s%c", s->flags, s->width < 0 ? 0 : s->width, s->prec,
                 mod, conv);
    else
        snprintf(cfmt, sizeof cfmt, "%%%s%d%s%c", s->flags, s->width < 0 ? 0 : s->width, mod, conv);
    int n = *mod ? snprintf(tmp, sizeof tmp, cfmt, i) : snprintf(tmp, sizeof tmp, cfmt, f);
    if (n < 0 || (size_t)n >= sizeof tmp)
        return false;
    char *zero_o = conv == 'o' && strchr(s->flags, '#') ? strchr(tmp, '0') : NULL;
    if (zero_o) { /* Python's alternate octal is 0o17, C's 017 */
        jbuf_put(b, tmp, (size_t)(zero_o - tmp) + 1);
        jbuf_put(b, "o", 1);
        jbuf_puts(b, zero_o + 1);
    } else {
        jbuf_puts(b, tmp);
    }
    return true;
}

struct jv jpercent_format(struct jctx *c, struct jv fmt, struct jv args) {
    struct jbuf b = {.limit = c->opts->max_output};
    bool tuple = args.kind == JV_LIST && args.u.l->is_tuple;
    size_t k = 0, nargs = tuple ? args.u.l->n : 1;
    const char *err = NULL;
    for (const char *p = fmt.u.s->p, *e = p + fmt.u.s->len; p < e && !err; p++) {
        if (*p != '%') {
            jbuf_put(&b, p, 1);
            continue;
        }
        if (++p < e && *p == '%') {
            jbuf_put(&b, "%", 1);
            continue;
        }
        struct spec s;
        if (!parse_spec(&p, e, &s))
            err = "unsupported format character";
        else if (k >= nargs)
            err = "not enough arguments for format string";
        else if (!convert(c, &b, &s, tuple ? args.u.l->items[k++] : (k++, args)))
            err = "a value of the wrong type for the format";
    }
    if (!err && k < nargs)
        err = "not all arguments converted during string formatting";
    if (err) {
        free(b.p);
        jfail(c, "%% format: %s", err);
    }
    struct jv r = jv_str(c->arena, b.p ? b.p : "", b.len);
    free(b.p);
    return r;
}
