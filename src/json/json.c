/* json.c: JSON text to values (render contexts, schemas) and values to JSON (the tojson filter). */
#include <stdio.h>
#include <stdlib.h>

#include <utf8proc.h>

#include "core/utf8.h"
#include "json/json.h"

struct jp {
    struct jarena *a;
    const char *s, *end;
    const char *err;
    int depth;
};

static void ws(struct jp *p) {
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r'))
        p->s++;
}

static int hex4(const char *s, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

static int parse_string(struct jp *p, struct jv *out) {
    const char *s = ++p->s, *q = s;
    /* Decoded text is never longer than the escaped text, which ends at the first unescaped
     * quote (sizing by that, not by the rest of the input, keeps many strings linear). */
    while (q < p->end && *q != '"')
        q += *q == '\\' ? 2 : 1;
    char *buf = jarena_alloc(p->a, (size_t)((q < p->end ? q : p->end) - s) + 1);
    size_t n = 0;
    if (!buf)
        return p->err = "out of memory", -1;
    while (s < p->end && *s != '"') {
        if ((unsigned char)*s < 0x20)
            return p->err = "control character in string", -1;
        if (*s != '\\') {
            buf[n++] = *s++;
            continue;
        }
        if (++s >= p->end)
            break;
        char e = *s++;
        unsigned cp;
        switch (e) {
        case 'n': buf[n++] = '\n'; break;
        case 't': buf[n++] = '\t'; break;
        case 'r': buf[n++] = '\r'; break;
        case 'b': buf[n++] = '\b'; break;
        case 'f': buf[n++] = '\f'; break;
        case '/': buf[n++] = '/'; break;
        case '\\': buf[n++] = '\\'; break;
        case '"': buf[n++] = '"'; break;
        case 'u':
            if (p->end - s < 4 || hex4(s, &cp))
                return p->err = "bad \\u escape", -1;
            s += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && p->end - s >= 6 && s[0] == '\\' && s[1] == 'u') {
                unsigned lo;
                if (!hex4(s + 2, &lo) && lo >= 0xDC00 && lo < 0xE000) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    s += 6;
                }
            }
            n += utf8_encode(cp, buf + n);
            break;
        default: return p->err = "bad escape", -1;
        }
    }
    if (s >= p->end)
        return p->err = "unterminated string", -1;
    p->s = s + 1;
    struct jstr *js = jarena_alloc(p->a, sizeof *js);
    if (!js)
        return p->err = "out of memory", -1;
    js->p = buf;
    buf[n] = 0;
    js->len = n;
    *out = (struct jv){.kind = JV_STR, .u.s = js};
    return 0;
}

static int parse_value(struct jp *p, struct jv *out);

static int parse_container(struct jp *p, struct jv *out, int is_dict) {
    char close = is_dict ? '}' : ']';
    *out = is_dict ? jv_dict(p->a) : jv_list(p->a);
    if (out->kind == JV_UNDEF)
        return p->err = "out of memory", -1;
    p->s++;
    ws(p);
    if (p->s < p->end && *p->s == close) {
        p->s++;
        return 0;
    }
    for (;;) {
        struct jv k, v;
        ws(p);
        if (is_dict) {
            if (p->s >= p->end || *p->s != '"')
                return p->err = "expected a string key", -1;
            if (parse_string(p, &k))
                return -1;
            ws(p);
            if (p->s >= p->end || *p->s != ':')
                return p->err = "expected ':'", -1;
            p->s++;
        }
        if (parse_value(p, &v))
            return -1;
        int r = is_dict ? jv_dict_set(p->a, out->u.d, k, v) : jv_list_push(p->a, out->u.l, v);
        if (r)
            return p->err = "out of memory", -1;
        ws(p);
        if (p->s < p->end && *p->s == ',') {
            p->s++;
            continue;
        }
        if (p->s < p->end && *p->s == close) {
            p->s++;
            return 0;
        }
        return p->err = is_dict ? "expected ',' or '}'" : "expected ',' or ']'", -1;
    }
}

static int parse_value(struct jp *p, struct jv *out) {
    ws(p);
    if (p->s >= p->end)
        return p->err = "unexpected end", -1;
    if (++p->depth > 512)
        return p->err = "nesting too deep", -1;
    int r = 0;
    char c = *p->s;
    size_t left = (size_t)(p->end - p->s);
    if (c == '{' || c == '[')
        r = parse_container(p, out, c == '{');
    else if (c == '"')
        r = parse_string(p, out);
    else if (left >= 4 && !memcmp(p->s, "true", 4))
        *out = jv_bool(1), p->s += 4;
    else if (left >= 5 && !memcmp(p->s, "false", 5))
        *out = jv_bool(0), p->s += 5;
    else if (left >= 4 && !memcmp(p->s, "null", 4))
        *out = jv_none(), p->s += 4;
    else if (c == '-' || (c >= '0' && c <= '9')) {
        char tmp[64];
        size_t n = 0;
        int is_float = 0;
        while (p->s + n < p->end && n < sizeof tmp - 1 && strchr("+-0123456789.eE", p->s[n])) {
            is_float |= strchr(".eE", p->s[n]) != NULL;
            n++;
        }
        memcpy(tmp, p->s, n);
        tmp[n] = 0;
        char *e;
        if (is_float)
            *out = jv_float(strtod(tmp, &e));
        else
            *out = jv_int(strtoll(tmp, &e, 10));
        if (e != tmp + n)
            return p->err = "bad number", -1;
        p->s += n;
    } else
        r = (p->err = "unexpected character", -1);
    p->depth--;
    return r;
}

enum ox_status jjson_parse(struct jarena *a, const char *text, size_t len, struct jv *out) {
    struct jp p = {a, text, text + len, NULL, 0};
    *out = jv_undef();
    if (parse_value(&p, out) == 0) {
        ws(&p);
        if (p.s == p.end)
            return OX_OK;
        p.err = "trailing characters";
    }
    return ox_fail(OX_ERR_FORMAT, "json: %s at byte %zu", p.err, (size_t)(p.s - text));
}

/* Python's \uXXXX escape of one UTF-8 sequence at s (surrogate pairs above U+FFFF). */
static size_t ascii_escape(struct jbuf *b, const char *s, size_t n) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t len = utf8proc_iterate((const uint8_t *)s, (utf8proc_ssize_t)n, &cp);
    char tmp[16];
    if (len <= 0) { /* invalid byte: Python would not get here; write U+FFFD */
        jbuf_puts(b, "\\ufffd");
        return 1;
    }
    if (cp >= 0x10000) {
        cp -= 0x10000;
        snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
    } else
        snprintf(tmp, sizeof tmp, "\\u%04x", (unsigned)cp);
    jbuf_puts(b, tmp);
    return (size_t)len;
}

/* Escapes as Python's json.dumps: quotes, backslash and controls; non-ASCII only with ascii
 * (ensure_ascii=True; Hugging Face's tojson defaults it off). */
static int json_str(struct jbuf *b, const char *s, size_t n, int ascii) {
    int r = jbuf_puts(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char tmp[8];
        const char *e = NULL;
        if (ascii && ch >= 0x80) {
            i += ascii_escape(b, s + i, n - i) - 1;
            continue;
        }
        switch (ch) {
        case '"': e = "\\\""; break;
        case '\\': e = "\\\\"; break;
        case '\n': e = "\\n"; break;
        case '\r': e = "\\r"; break;
        case '\t': e = "\\t"; break;
        case '\b': e = "\\b"; break;
        case '\f': e = "\\f"; break;
        default:
            if (ch < 0x20) {
                snprintf(tmp, sizeof tmp, "\\u%04x", ch);
                e = tmp;
            }
        }
        r |= e ? jbuf_puts(b, e) : jbuf_put(b, (const char *)&ch, 1);
    }
    return r | jbuf_puts(b, "\"");
}

static int newline(struct jbuf *b, int indent, int level) {
    int r = jbuf_puts(b, "\n");
    for (int i = 0; i < indent * level; i++)
        r |= jbuf_puts(b, " ");
    return r;
}

static int cmp_keys(const void *x, const void *y) {
    const struct jv *a = *(const struct jv *const *)x, *b = *(const struct jv *const *)y;
    int ok;
    return jv_compare(a[0], b[0], &ok);
}

int jv_to_json(struct jbuf *b, struct jv v, int indent, int level, int flags) {
    int r = 0;
    if (level > 256)
        return -1;
    switch (v.kind) {
    case JV_UNDEF: return -1; /* json.dumps refuses Jinja's Undefined */
    case JV_NONE: return jbuf_puts(b, "null");
    case JV_BOOL: return jbuf_puts(b, v.u.b ? "true" : "false");
    case JV_INT: { /* numbers as Python's str() writes them, as json.dumps does */
        char tmp[32];
        snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i);
        return jbuf_puts(b, tmp);
    }
    case JV_FLOAT: return jv_fmt_float(b, v.u.f);
    case JV_STR: return json_str(b, v.u.s->p, v.u.s->len, flags & JSON_ASCII);
    case JV_FUNC: return jbuf_puts(b, "null");
    case JV_LIST:
        if (v.u.l->is_gen) /* a map/select result: a generator to json.dumps */
            return -1;
        if (!v.u.l->n)
            return jbuf_puts(b, "[]");
        r |= jbuf_puts(b, "[");
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i)
                r |= jbuf_puts(b, indent >= 0 || (flags & JSON_COMPACT) ? "," : ", ");
            if (indent >= 0)
                r |= newline(b, indent, level + 1);
            r |= jv_to_json(b, v.u.l->items[i], indent, level + 1, flags);
            if (r)
                return r;
        }
        if (indent >= 0)
            r |= newline(b, indent, level);
        return r | jbuf_puts(b, "]");
    case JV_DICT: {
        size_t n = v.u.d->n;
        if (!n)
            return jbuf_puts(b, "{}");
        /* Order of keys: insertion, or sorted when asked (pointers to key slots). */
        struct jv **order = malloc(n * sizeof *order);
        if (!order)
            return -1;
        for (size_t i = 0; i < n; i++)
            order[i] = &v.u.d->keys[i];
        if (flags & JSON_SORT_KEYS)
            qsort(order, n, sizeof *order, cmp_keys);
        r |= jbuf_puts(b, "{");
        for (size_t j = 0; j < n; j++) {
            size_t i = (size_t)(order[j] - v.u.d->keys);
            if (j)
                r |= jbuf_puts(b, indent >= 0 || (flags & JSON_COMPACT) ? "," : ", ");
            if (indent >= 0)
                r |= newline(b, indent, level + 1);
            struct jv k = v.u.d->keys[i];
            if (k.kind == JV_STR)
                r |= json_str(b, k.u.s->p, k.u.s->len, flags & JSON_ASCII);
            else {
                r |= jbuf_puts(b, "\"");
                r |= jv_to_json(b, k, -1, level + 1, 0);
                r |= jbuf_puts(b, "\"");
            }
            r |= jbuf_puts(b, flags & JSON_COMPACT ? ":" : ": ");
            r |= jv_to_json(b, v.u.d->vals[i], indent, level + 1, flags);
            if (r)
                break;
        }
        free(order);
        if (indent >= 0)
            r |= newline(b, indent, level);
        return r | jbuf_puts(b, "}");
    }
    }
    return r;
}
