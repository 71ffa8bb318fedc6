/* value.c: Python's view of template values: truthiness, str(), repr() and type names.
 * Also strings indexed by code point, as Python indexes them. */
#include <stdio.h>

#include "chat/jinja_int.h"

int jv_truthy(struct jv v) {
    switch (v.kind) {
    case JV_UNDEF:
    case JV_NONE: return 0;
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0.0;
    case JV_STR: return v.u.s->len != 0;
    case JV_LIST: return v.u.l->n != 0;
    case JV_DICT: return v.u.d->n != 0;
    case JV_FUNC: return 1;
    }
    return 0;
}

static int put_pystr(struct jbuf *b, const struct jstr *s) {
    /* Python picks single quotes unless the string has ' and no ". */
    int has_sq = memchr(s->p, '\'', s->len) != NULL, has_dq = memchr(s->p, '"', s->len) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    if (jbuf_put(b, &q, 1))
        return -1;
    for (size_t i = 0; i < s->len; i++) {
        unsigned char ch = (unsigned char)s->p[i];
        char tmp[8];
        const char *r = NULL;
        if (ch == '\\')
            r = "\\\\";
        else if (ch == '\n')
            r = "\\n";
        else if (ch == '\r')
            r = "\\r";
        else if (ch == '\t')
            r = "\\t";
        else if (ch == (unsigned char)q)
            r = q == '\'' ? "\\'" : "\\\"";
        else if (ch < 0x20 || ch == 0x7f) {
            snprintf(tmp, sizeof tmp, "\\x%02x", ch);
            r = tmp;
        }
        if (r ? jbuf_puts(b, r) : jbuf_put(b, (const char *)&ch, 1))
            return -1;
    }
    return jbuf_put(b, &q, 1);
}

static int repr_d(struct jbuf *b, struct jv v, int depth);

int jv_repr(struct jbuf *b, struct jv v) {
    return repr_d(b, v, 0);
}

static int repr_d(struct jbuf *b, struct jv v, int depth) {
    int r = 0;
    if (depth > JV_MAX_NEST)
        return -1;
    switch (v.kind) {
    case JV_STR: return put_pystr(b, v.u.s);
    case JV_UNDEF: return jbuf_puts(b, "Undefined"); /* prints as "" alone, not in a list */
    case JV_LIST:
        r |= jbuf_puts(b, v.u.l->is_tuple ? "(" : "[");
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i)
                r |= jbuf_puts(b, ", ");
            r |= repr_d(b, v.u.l->items[i], depth + 1);
            if (r)
                return r;
        }
        if (v.u.l->is_tuple && v.u.l->n == 1)
            r |= jbuf_puts(b, ",");
        return r | jbuf_puts(b, v.u.l->is_tuple ? ")" : "]");
    case JV_DICT:
        r |= jbuf_puts(b, "{");
        for (size_t i = 0; i < v.u.d->n; i++) {
            if (i)
                r |= jbuf_puts(b, ", ");
            r |= repr_d(b, v.u.d->keys[i], depth + 1);
            r |= jbuf_puts(b, ": ");
            r |= repr_d(b, v.u.d->vals[i], depth + 1);
            if (r)
                return r;
        }
        return r | jbuf_puts(b, "}");
    default: return jv_to_str(b, v);
    }
}

int jv_to_str(struct jbuf *b, struct jv v) {
    char tmp[32];
    switch (v.kind) {
    case JV_UNDEF: return 0;
    case JV_NONE: return jbuf_puts(b, "None");
    case JV_BOOL: return jbuf_puts(b, v.u.b ? "True" : "False");
    case JV_INT: snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i); return jbuf_puts(b, tmp);
    case JV_FLOAT: return jv_fmt_float(b, v.u.f);
    case JV_STR: return jbuf_put(b, v.u.s->p, v.u.s->len);
    case JV_LIST:
    case JV_DICT: return jv_repr(b, v);
    case JV_FUNC: return jbuf_puts(b, "<function>");
    }
    return 0;
}

const char *jv_kind_name(enum jv_kind k) {
    static const char *names[] = {"undefined", "none", "bool", "int",     "float",
                                  "string",    "list", "dict", "function"};
    return (unsigned)k < sizeof names / sizeof *names ? names[k] : "?";
}

size_t jv_char_offsets(struct jarena *a, const struct jstr *s, size_t **offs) {
    size_t n = 0;
    for (size_t i = 0; i < s->len; i++)
        n += ((unsigned char)s->p[i] & 0xC0) != 0x80 || i == 0;
    size_t *o = jarena_alloc(a, (n + 1) * sizeof *o), k = 0;
    for (size_t i = 0; i < s->len; i++)
        if (((unsigned char)s->p[i] & 0xC0) != 0x80 || i == 0)
            o[k++] = i;
    o[n] = s->len;
    *offs = o;
    return n;
}
