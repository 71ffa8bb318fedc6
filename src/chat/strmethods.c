/* strmethods.c: Python str methods (strip, split, replace, format, ...) on template strings. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

#include <utf8proc.h>

#include "chat/builtins_int.h"

static int is_pyspace(unsigned char ch) {
    return ch == ' ' || (ch >= '\t' && ch <= '\r') || ch == 0x1c || ch == 0x1d || ch == 0x1e ||
           ch == 0x1f;
}

static int in_chars(const char *chars, unsigned char ch) {
    return chars ? (ch && strchr(chars, ch) != NULL) : is_pyspace(ch);
}

struct jv jstrip(struct jctx *c, struct jv s, const char *chars, int which) {
    const char *p = s.u.s->p, *e = p + s.u.s->len;
    if (which & 1)
        while (p < e && in_chars(chars, (unsigned char)*p))
            p++;
    if (which & 2)
        while (e > p && in_chars(chars, (unsigned char)e[-1]))
            e--;
    return jv_str(c->arena, p, (size_t)(e - p));
}

static const char *find_sub(const char *p, const char *e, const char *sub, size_t n) {
    if (!n)
        return p;
    for (; p + n <= e; p++)
        if (!memcmp(p, sub, n))
            return p;
    return NULL;
}

struct jv jreplace(struct jctx *c, struct jv s, const char *old, const char *rep, int64_t count) {
    struct jbuf b = {.limit = c->opts->max_output};
    const char *p = s.u.s->p, *e = p + s.u.s->len;
    size_t on = strlen(old), rn = strlen(rep);
    int64_t done = 0;
    if (!on) { /* Python inserts rep between every character */
        while (count < 0 || done < count) {
            jbuf_put(&b, rep, rn);
            done++;
            if (p >= e)
                break;
            jbuf_put(&b, p++, 1);
        }
        jbuf_put(&b, p, (size_t)(e - p));
    } else {
        const char *q;
        while ((count < 0 || done < count) && (q = find_sub(p, e, old, on))) {
            jbuf_put(&b, p, (size_t)(q - p));
            jbuf_put(&b, rep, rn);
            p = q + on;
            done++;
            if (b.len > c->opts->max_output)
                break;
        }
        jbuf_put(&b, p, (size_t)(e - p));
    }
    if (b.len > c->opts->max_output) {
        free(b.p);
        jfail(c, "replace: result too long");
    }
    struct jv r = jv_str(c->arena, b.p ? b.p : "", b.len);
    free(b.p);
    return r;
}

struct jv jsplit(struct jctx *c, struct jv s, const char *sep, int64_t maxsplit) {
    struct jv l = jv_list(c->arena);
    const char *p = s.u.s->p, *e = p + s.u.s->len;
    if (!sep) { /* runs of whitespace, no empty strings */
        for (;;) {
            while (p < e && is_pyspace((unsigned char)*p))
                p++;
            if (p >= e)
                break;
            const char *q = p;
            if (maxsplit >= 0 && (int64_t)l.u.l->n >= maxsplit)
                q = e;
            else
                while (q < e && !is_pyspace((unsigned char)*q))
                    q++;
            if (q == e && maxsplit >= 0)
                while (q > p && is_pyspace((unsigned char)q[-1]))
                    q--;
            jv_list_push(c->arena, l.u.l, jv_str(c->arena, p, (size_t)(q - p)));
            p = q;
            if (p >= e)
                break;
        }
        return l;
    }
    size_t n = strlen(sep);
    if (!n)
        jfail(c, "split: empty separator");
    const char *q;
    while ((maxsplit < 0 || (int64_t)l.u.l->n < maxsplit) && (q = find_sub(p, e, sep, n))) {
        jv_list_push(c->arena, l.u.l, jv_str(c->arena, p, (size_t)(q - p)));
        p = q + n;
    }
    jv_list_push(c->arena, l.u.l, jv_str(c->arena, p, (size_t)(e - p)));
    return l;
}

/* Case mapping per code point (utf8proc's simple mappings, so "é" -> "É" like Python). */
struct jv jcase(struct jctx *c, struct jv s, int mode) {
    struct jbuf b = {.limit = c->opts->max_output};
    const uint8_t *p = (const uint8_t *)s.u.s->p;
    utf8proc_ssize_t left = (utf8proc_ssize_t)s.u.s->len;
    int start = 1, prev_cased = 0;
    for (size_t i = 0; left > 0; i++) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t n = utf8proc_iterate(p, left, &cp);
        if (n <= 0) { /* invalid UTF-8: copy the byte unchanged */
            cp = -1;
            n = 1;
        }
        int up;
        if (mode == 0 || mode == 1)
            up = mode;
        else if (mode == 2)
            up = i == 0;
        else if (mode == 3) /* Jinja's title: words start after whitespace, '-' or brackets */
            up = start;
        else if (mode == 4) /* Python's str.title: a letter after a non-letter starts a word */
            up = !prev_cased;
        else /* swapcase: a lowercase letter up, the rest down */
            up = cp >= 0 && utf8proc_toupper(cp) != cp;
        if (cp >= 0) {
            utf8proc_uint8_t enc[4];
            utf8proc_int32_t m = up ? utf8proc_toupper(cp) : utf8proc_tolower(cp);
            jbuf_put(&b, (const char *)enc, (size_t)utf8proc_encode_char(m, enc));
            start = is_pyspace((unsigned char)cp) || cp == '-' || cp == '(' || cp == '{' ||
                    cp == '[' || cp == '<';
            prev_cased = utf8proc_tolower(cp) != utf8proc_toupper(cp);
        } else
            jbuf_put(&b, (const char *)p, 1);
        p += n;
        left -= n;
    }
    struct jv r = jv_str(c->arena, b.p ? b.p : "", b.len);
    free(b.p);
    return r;
}

/* rsplit: only the separator form differs from split when maxsplit is given. */
static struct jv rsplit(struct jctx *c, struct jv s, const char *sep, int64_t maxsplit) {
    if (!sep || maxsplit < 0)
        return jsplit(c, s, sep, maxsplit);
    size_t n = strlen(sep);
    if (!n)
        jfail(c, "rsplit: empty separator");
    struct jv parts = jv_list(c->arena);
    const char *p = s.u.s->p, *e = p + s.u.s->len;
    while ((int64_t)parts.u.l->n < maxsplit) {
        const char *q = NULL;
        for (const char *t = e - n; t >= p && !q; t--)
            if (!memcmp(t, sep, n))
                q = t;
        if (!q)
            break;
        jv_list_push(c->arena, parts.u.l, jv_str(c->arena, q + n, (size_t)(e - q - n)));
        e = q;
    }
    jv_list_push(c->arena, parts.u.l, jv_str(c->arena, p, (size_t)(e - p)));
    struct jv out = jv_list(c->arena);
    for (size_t i = parts.u.l->n; i-- > 0;)
        jv_list_push(c->arena, out.u.l, parts.u.l->items[i]);
    return out;
}

static int prefix_match(struct jv s, struct jv pre, int end) {
    if (pre.kind != JV_STR)
        return 0;
    size_t n = pre.u.s->len;
    if (n > s.u.s->len)
        return 0;
    return !memcmp(s.u.s->p + (end ? s.u.s->len - n : 0), pre.u.s->p, n);
}

/* A format spec's common part: [[fill]align][sign][#][0][width][.precision][type]. */
struct fspec {
    char fill, align, sign, type;
    int alt, width, prec; /* prec -1: none */
};

static bool parse_fspec(const char *spec, struct fspec *f) {
    *f = (struct fspec){.fill = ' ', .prec = -1};
    if (spec[0] && spec[1] && strchr("<>=^", spec[1]))
        f->fill = spec[0], f->align = spec[1], spec += 2;
    else if (spec[0] && strchr("<>=^", spec[0]))
        f->align = *spec++;
    if (*spec && strchr("+- ", *spec))
        f->sign = *spec++;
    if (*spec == '#')
        f->alt = 1, spec++;
    if (*spec == '0' && !f->align)
        f->fill = '0', f->align = '=', spec++;
    for (; isdigit((unsigned char)*spec) && f->width < 10000; spec++)
        f->width = f->width * 10 + (*spec - '0');
    if (*spec == '.')
        for (f->prec = 0, spec++; isdigit((unsigned char)*spec) && f->prec < 10000; spec++)
            f->prec = f->prec * 10 + (*spec - '0');
    if (*spec)
        f->type = *spec++;
    return !*spec && (!f->type || strchr("sdxXoceEfFgG%", f->type));
}

/* v's text for the spec into out (no padding yet); its default alignment into f->align. */
static int field_text(struct jctx *c, struct jv v, struct fspec *f, char *out, size_t cap) {
    bool number = v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL;
    char cfmt[32], flags[4] = {0};
    size_t nf = 0;
    if (f->sign && f->sign != '-')
        flags[nf++] = f->sign;
    if (f->alt)
        flags[nf++] = '#';
    double x = v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : v.u.b;
    long long i = v.kind == JV_INT ? (long long)v.u.i : v.kind == JV_BOOL ? v.u.b : 0;
    f->align = f->align ? f->align : number ? '>' : '<';
    if (!f->type || f->type == 's') { /* str(v), a string cut to prec characters */
        struct jbuf t = {.limit = c->opts->max_output};
        jv_to_str(&t, v);
        size_t len = t.len;
        for (size_t at = 0, ch = 0; f->prec >= 0 && v.kind == JV_STR && at < t.len; at++)
            if (((unsigned char)t.p[at] & 0xC0) != 0x80 && ch++ == (size_t)f->prec) {
                len = at;
                break;
            }
        int n = snprintf(out, cap, "%.*s", (int)(len < cap ? len : cap - 1), t.p ? t.p : "");
        free(t.p);
        return n;
    }
    if (strchr("dxXoc", f->type)) {
        snprintf(cfmt, sizeof cfmt, "%%%sll%c", flags, f->type == 'c' ? 'd' : f->type);
        return f->type == 'c' ? snprintf(out, cap, "%c", (int)(i & 0x7f))
                              : snprintf(out, cap, cfmt, i);
    }
    snprintf(cfmt, sizeof cfmt, "%%%s.%d%c", flags, f->prec < 0 ? 6 : f->prec,
             f->type == '%' ? 'f' : f->type);
    int n = snprintf(out, cap, cfmt, f->type == '%' ? x * 100 : x);
    if (f->type == '%' && n > 0 && (size_t)n + 1 < cap)
        out[n++] = '%', out[n] = 0;
    return n;
}

/* Python's format(v, spec) for parse_fspec's part of the mini-language; false for a spec or
 * value it does not take (Python raises for those too, or the spec is beyond this part). */
static bool format_field(struct jctx *c, struct jbuf *b, struct jv v, const char *spec) {
    struct fspec f;
    bool number = v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL;
    if (!parse_fspec(spec, &f) || (f.type == 's' && v.kind != JV_STR) ||
        (f.type && f.type != 's' && !number) ||
        (f.type && strchr("dxXoc", f.type) && v.kind == JV_FLOAT))
        return false;
    char tmp[10100];
    int n = field_text(c, v, &f, tmp, sizeof tmp);
    if (n < 0 || (size_t)n >= sizeof tmp)
        return false;
    size_t chars = 0, signs = 0;
    for (int k = 0; k < n; k++)
        chars += ((unsigned char)tmp[k] & 0xC0) != 0x80;
    size_t pad = (size_t)f.width > chars ? (size_t)f.width - chars : 0;
    size_t left = f.align == '<' ? 0 : f.align == '^' ? pad / 2 : pad;
    if (f.align == '=') /* the padding goes between the sign and the digits */
        while ((int)signs < n && strchr("+- ", tmp[signs]))
            signs++;
    jbuf_put(b, tmp, signs);
    for (size_t k = 0; k < left; k++)
        jbuf_put(b, &f.fill, 1);
    jbuf_put(b, tmp + signs, (size_t)n - signs);
    for (size_t k = left; k < pad; k++)
        jbuf_put(b, &f.fill, 1);
    return true;
}

/* Where str.format's fields are: the next automatic index, and whether fields were numbered
 * automatically or by hand (Python refuses to mix the two). */
struct format_order {
    int next;
    bool automatic, manual;
};

/* The argument a str.format field names ("": the next in order, "0", "name"), or JV_UNDEF
 * (also for a field that mixes automatic and manual numbering). */
static struct jv format_arg(struct jcall *a, const char *key, struct format_order *o) {
    if (!*key) {
        o->automatic = true;
        return o->manual ? (struct jv){0} : jarg(a, o->next++, NULL);
    }
    if (isdigit((unsigned char)key[0])) {
        o->manual = true;
        return o->automatic ? (struct jv){0} : jarg(a, atoi(key), NULL);
    }
    return jarg(a, -1, key);
}

/* A field's format spec with its nested fields ("{:>{}}", "{:{w}.{p}f}") replaced by their
 * arguments' text, into out (n bytes at most); false if one has no argument. */
static bool format_spec(struct jcall *a, const char *spec, struct format_order *order, char *out,
                        size_t n) {
    size_t o = 0;
    for (const char *p = spec; *p; p++) {
        char piece[64] = "";
        const char *text = piece;
        if (*p == '{') {
            const char *q = strchr(p, '}');
            char key[64];
            size_t kn = q ? (size_t)(q - p - 1) : 0;
            if (!q || kn >= sizeof key)
                return false;
            memcpy(key, p + 1, kn);
            key[kn] = 0;
            struct jv v = format_arg(a, key, order);
            if (v.kind == JV_UNDEF)
                return false;
            struct jbuf b = {.limit = sizeof piece - 1};
            jv_to_str(&b, v);
            snprintf(piece, sizeof piece, "%.*s", (int)b.len, b.p ? b.p : "");
            free(b.p);
            p = q;
        } else {
            piece[0] = *p;
        }
        size_t tn = strlen(text);
        if (o + tn >= n)
            return false;
        memcpy(out + o, text, tn);
        o += tn;
    }
    out[o] = 0;
    return true;
}

/* str.format with {} / {0} / {name} fields, format specs after ':' (format_field) with fields
 * nested one deep in them, and {{ }} escapes. */
static struct jv str_format(struct jctx *c, struct jv s, struct jcall *a) {
    struct jbuf b = {.limit = c->opts->max_output};
    const char *p = s.u.s->p, *e = p + s.u.s->len;
    struct format_order order = {0};
    while (p < e) {
        if ((*p == '{' || *p == '}') && p + 1 < e && p[1] == *p) {
            jbuf_put(&b, p, 1);
            p += 2;
            continue;
        }
        if (*p == '}') {
            free(b.p);
            jfail(c, "format: single '}' in format string");
        }
        if (*p != '{') {
            jbuf_put(&b, p++, 1);
            continue;
        }
        const char *q = p + 1; /* the field's closing brace, past those of its nested fields */
        for (int depth = 1; q < e && (depth > 1 || *q != '}'); q++) {
            depth += *q == '{' ? 1 : *q == '}' ? -1 : 0;
            if (depth > 2) {
                free(b.p);
                jfail(c, "format: Max string recursion exceeded");
            }
        }
        if (q >= e) {
            free(b.p);
            jfail(c, "format: single '{' in format string");
        }
        char key[64];
        size_t kn = (size_t)(q - p - 1) < sizeof key - 1 ? (size_t)(q - p - 1) : sizeof key - 1;
        memcpy(key, p + 1, kn);
        key[kn] = 0;
        char *spec = strchr(key, ':');
        if (spec)
            *spec++ = 0, kn = strlen(key);
        struct jv v = memchr(key, '{', kn) ? (struct jv){0} : format_arg(a, key, &order);
        char full[128];
        if (v.kind == JV_UNDEF || (spec && !format_spec(a, spec, &order, full, sizeof full))) {
            free(b.p);
            jfail(c, "format: no argument for field '%s'", key);
        }
        if (!spec)
            jv_to_str(&b, v);
        else if (!format_field(c, &b, v, full)) {
            free(b.p);
            jfail(c, "format: cannot format a %s with '%s'", jv_kind_name(v.kind), full);
        }
        p = q + 1;
    }
    struct jv r = jv_str(c->arena, b.p ? b.p : "", b.len);
    free(b.p);
    return r;
}

static struct jv str_join(struct jctx *c, struct jv s, struct jv items) {
    if (items.kind != JV_LIST)
        jfail(c, "join: expected a list");
    struct jbuf b = {.limit = c->opts->max_output};
    for (size_t i = 0; i < items.u.l->n; i++) {
        if (i)
            jbuf_put(&b, s.u.s->p, s.u.s->len);
        jv_to_str(&b, items.u.l->items[i]);
    }
    struct jv r = jv_str(c->arena, b.p ? b.p : "", b.len);
    free(b.p);
    return r;
}

static struct jv str_pred(struct jv s, int (*pred)(int)) {
    if (!s.u.s->len)
        return jv_bool(0);
    for (size_t i = 0; i < s.u.s->len; i++)
        if (!pred((unsigned char)s.u.s->p[i]))
            return jv_bool(0);
    return jv_bool(1);
}

static int64_t int_arg(struct jcall *a, int i, const char *kw, int64_t dflt) {
    struct jv v = jarg(a, i, kw);
    return v.kind == JV_INT ? v.u.i : dflt;
}

/* The methods that make a new string from s (Markup's stays Markup: jstr_method); JV_UNDEF for
 * the others. */
static struct jv str_transform(struct jctx *c, struct jv s, struct jcall *a) {
    const char *n = a->name;
    if (!strcmp(n, "strip") || !strcmp(n, "lstrip") || !strcmp(n, "rstrip"))
        return jstrip(c, s, jarg_str(c, a, 0, "chars", NULL),
                      n[0] == 'l'   ? 1
                      : n[0] == 'r' ? 2
                                    : 3);
    if (!strcmp(n, "upper") || !strcmp(n, "lower"))
        return jcase(c, s, n[0] == 'u');
    if (!strcmp(n, "capitalize"))
        return jcase(c, s, 2);
    if (!strcmp(n, "title"))
        return jcase(c, s, 4);
    if (!strcmp(n, "swapcase"))
        return jcase(c, s, 5);
    if (!strcmp(n, "replace"))
        return jreplace(c, s, jarg_str(c, a, 0, "old", ""), jarg_str(c, a, 1, "new", ""),
                        int_arg(a, 2, "count", -1));
    if (!strcmp(n, "center")) {
        const char *fill = jarg_str(c, a, 1, "fillchar", " ");
        return jcenter(c, s, int_arg(a, 0, "width", 0), fill);
    }
    if (!strcmp(n, "zfill")) { /* zeros after any sign, up to width characters */
        int64_t width = int_arg(a, 0, "width", 0);
        size_t *o, k = jv_char_offsets(c->arena, s.u.s, &o);
        if (width <= (int64_t)k || width > 1 << 20)
            return s;
        struct jbuf b = {.limit = c->opts->max_output};
        size_t sign = s.u.s->len && (s.u.s->p[0] == '+' || s.u.s->p[0] == '-');
        jbuf_put(&b, s.u.s->p, sign);
        for (int64_t i = 0; i < width - (int64_t)k; i++)
            jbuf_put(&b, "0", 1);
        jbuf_put(&b, s.u.s->p + sign, s.u.s->len - sign);
        struct jv r = jv_str(c->arena, b.p ? b.p : "", b.len);
        free(b.p);
        return r;
    }
    return (struct jv){.kind = JV_UNDEF};
}

struct jv jstr_method(struct jctx *c, struct jv s, struct jcall *a) {
    const char *n = a->name;
    struct jv t = str_transform(c, s, a);
    if (t.kind != JV_UNDEF)
        return jmarkup_keep(s, t);
    if (!strcmp(n, "split"))
        return jsplit(c, s, jarg_str(c, a, 0, "sep", NULL), int_arg(a, 1, "maxsplit", -1));
    if (!strcmp(n, "rsplit"))
        return rsplit(c, s, jarg_str(c, a, 0, "sep", NULL), int_arg(a, 1, "maxsplit", -1));
    if (!strcmp(n, "startswith") || !strcmp(n, "endswith")) {
        struct jv pre = jarg(a, 0, NULL);
        int end = n[0] == 'e';
        if (pre.kind == JV_LIST) {
            for (size_t i = 0; i < pre.u.l->n; i++)
                if (prefix_match(s, pre.u.l->items[i], end))
                    return jv_bool(1);
            return jv_bool(0);
        }
        if (pre.kind != JV_STR)
            jfail(c, "%s: expected a string", n);
        return jv_bool(prefix_match(s, pre, end));
    }
    if (!strcmp(n, "find") || !strcmp(n, "rfind") || !strcmp(n, "index") || !strcmp(n, "count")) {
        const char *sub = jarg_str(c, a, 0, "sub", "");
        size_t sn = strlen(sub);
        int64_t found = -1, cnt = 0;
        for (size_t i = 0; i + sn <= s.u.s->len; i++)
            if (!memcmp(s.u.s->p + i, sub, sn)) {
                if (found < 0 || n[0] == 'r')
                    found = (int64_t)i;
                cnt++;
                if (n[0] == 'c' && sn)
                    i += sn - 1;
            }
        if (n[0] == 'c')
            return jv_int(cnt);
        if (n[0] == 'i' && found < 0)
            jfail(c, "substring not found");
        return jv_int(found);
    }
    if (!strcmp(n, "format"))
        return str_format(c, s, a);
    if (!strcmp(n, "join"))
        return str_join(c, s, jarg(a, 0, NULL));
    if (!strcmp(n, "splitlines")) {
        struct jv l = jsplit(c, s, "\n", -1);
        if (l.u.l->n && !l.u.l->items[l.u.l->n - 1].u.s->len)
            l.u.l->n--;
        return l;
    }
    if (!strcmp(n, "isdigit"))
        return str_pred(s, isdigit);
    if (!strcmp(n, "islower") || !strcmp(n, "isupper")) { /* cased, none of the other case */
        struct jv t = jcase(c, s, n[2] == 'u'), other = jcase(c, s, n[2] != 'u');
        return jv_bool(!strcmp(t.u.s->p, s.u.s->p) && strcmp(other.u.s->p, s.u.s->p) != 0);
    }
    if (!strcmp(n, "isalpha"))
        return str_pred(s, isalpha);
    if (!strcmp(n, "isalnum"))
        return str_pred(s, isalnum);
    if (!strcmp(n, "isspace"))
        return str_pred(s, isspace);
    jfail(c, "unknown string method %s", n);
}
