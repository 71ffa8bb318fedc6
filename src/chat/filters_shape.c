/* filters_shape.c: Jinja2's filters that shape text and sequences: center, truncate, indent,
 * batch, slice, format, pprint, attr, striptags, urlencode, filesizeformat, random. Lengths count
 * characters, as Python's do. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

#include "chat/builtins_int.h"

static struct jv text_of(struct jctx *c, struct jv v) {
    return v.kind == JV_STR ? v : jstr_of(c, v);
}

static int64_t int_arg(struct jcall *a, int i, const char *kw, int64_t dflt) {
    struct jv v = jarg(a, i, kw);
    return v.kind == JV_INT ? v.u.i : v.kind == JV_BOOL ? v.u.b : dflt;
}

/* Characters [from, to) of s (offsets as jv_char_offsets gives them). */
static struct jv chars(struct jctx *c, struct jv s, const size_t *o, size_t from, size_t to) {
    return jv_str(c->arena, s.u.s->p + o[from], o[to] - o[from]);
}

/* str.center(width, fill): Python puts the odd pad on the right unless width is odd too. */
struct jv jcenter(struct jctx *c, struct jv s, int64_t width, const char *fill) {
    size_t *o, n = jv_char_offsets(c->arena, s.u.s, &o);
    if (width <= (int64_t)n || width > 1 << 20)
        return s;
    size_t pad = (size_t)width - n, left = pad / 2 + (pad & (size_t)width & 1);
    struct jbuf b = {.limit = c->opts->max_output};
    for (size_t i = 0; i < pad; i++) {
        if (i == left && jbuf_put(&b, s.u.s->p, s.u.s->len))
            break;
        jbuf_puts(&b, fill);
    }
    if (left == pad)
        jbuf_put(&b, s.u.s->p, s.u.s->len);
    struct jv r = jv_str(c->arena, b.p ? b.p : "", b.len);
    free(b.p);
    return r;
}

/* Jinja2's do_truncate: whole if within length + leeway, else cut to length - len(end) (at the
 * last space unless killwords) and end appended. */
static struct jv truncate(struct jctx *c, struct jv s, struct jcall *a) {
    int64_t length = int_arg(a, 0, "length", 255), leeway = int_arg(a, 3, "leeway", 5);
    int killwords = jv_truthy(jarg(a, 1, "killwords"));
    struct jv end = jarg(a, 2, "end");
    end = end.kind == JV_UNDEF ? jv_cstr(c->arena, "...") : text_of(c, end);
    size_t *o, *eo, n = jv_char_offsets(c->arena, s.u.s, &o);
    size_t end_n = jv_char_offsets(c->arena, end.u.s, &eo);
    if (length < (int64_t)end_n)
        jfail(c, "truncate: expected length >= %zu, got %lld", end_n, (long long)length);
    if ((int64_t)n <= length + leeway)
        return s;
    size_t keep = (size_t)length - end_n, cut = keep;
    if (!killwords) /* rsplit(" ", 1)[0]: up to the last space, if any */
        for (size_t i = keep; i-- > 0;)
            if (s.u.s->p[o[i]] == ' ') {
                cut = i;
                break;
            }
    struct jv head = chars(c, s, o, 0, cut);
    return jarith(c, "+", head, end);
}

/* batch(n, fill): lists of n items, the last filled up to n with fill when it is given. */
static struct jv batch(struct jctx *c, struct jv seq, struct jcall *a) {
    int64_t size = int_arg(a, 0, "linecount", 0);
    struct jv fill = jarg(a, 1, "fill_with"), out = jv_list(c->arena), cur = jv_undef();
    if (size <= 0)
        jfail(c, "batch: the size must be positive");
    for (size_t i = 0; i < seq.u.l->n; i++) {
        if (cur.kind == JV_UNDEF || (int64_t)cur.u.l->n == size) {
            cur = jv_list(c->arena);
            jv_list_push(c->arena, out.u.l, cur);
        }
        jv_list_push(c->arena, cur.u.l, seq.u.l->items[i]);
    }
    while (cur.kind == JV_LIST && fill.kind != JV_UNDEF && fill.kind != JV_NONE &&
           (int64_t)cur.u.l->n < size)
        jv_list_push(c->arena, cur.u.l, fill);
    return out;
}

/* Jinja2's do_indent: lines after the first get width spaces (or the string width), blank ones
 * only with blank, the first too with first. */
static struct jv indent(struct jctx *c, struct jv s, struct jcall *a) {
    struct jv w = jarg(a, 0, "width");
    int first = jv_truthy(jarg(a, 1, "first")), blank = jv_truthy(jarg(a, 2, "blank"));
    char spaces[257];
    const char *pad = spaces;
    if (w.kind == JV_STR) {
        pad = w.u.s->p;
    } else {
        int64_t k = w.kind == JV_INT ? w.u.i : 4;
        k = k < 0 ? 0 : k > 256 ? 256 : k;
        memset(spaces, ' ', (size_t)k);
        spaces[k] = 0;
    }
    struct jbuf b = {.limit = c->opts->max_output};
    const char *p = s.u.s->p, *end = p + s.u.s->len;
    for (int line = 0; p < end || line == 0; line++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (line)
            jbuf_put(&b, "\n", 1);
        if ((line || first) && (len || blank))
            jbuf_puts(&b, pad);
        jbuf_put(&b, p, len);
        p += len + (nl != NULL);
        if (!nl)
            break;
    }
    struct jv r = jv_str(c->arena, b.p ? b.p : "", b.len);
    free(b.p);
    return jmarkup_keep(s, r);
}

/* slice(n, fill): n columns, the first len % n one item longer (Jinja2's do_slice); with fill,
 * the shorter ones get it at their end. */
static struct jv slice(struct jctx *c, struct jv seq, struct jcall *a) {
    int64_t slices = int_arg(a, 0, "slices", 0);
    struct jv fill = jarg(a, 1, "fill_with"), out = jv_list(c->arena);
    if (slices <= 0 || slices > 1 << 20)
        jfail(c, "slice: the count must be positive");
    size_t n = seq.u.l->n, per = n / (size_t)slices, extra = n % (size_t)slices, offset = 0;
    for (size_t k = 0; k < (size_t)slices; k++) {
        size_t start = offset + k * per;
        if (k < extra)
            offset++;
        size_t end = offset + (k + 1) * per;
        struct jv col = jv_list(c->arena);
        for (size_t i = start; i < end; i++)
            jv_list_push(c->arena, col.u.l, seq.u.l->items[i]);
        if (fill.kind != JV_UNDEF && fill.kind != JV_NONE && k >= extra)
            jv_list_push(c->arena, col.u.l, fill);
        jv_list_push(c->arena, out.u.l, col);
    }
    return out;
}

/* pprint: repr, with a dict's keys sorted as Python's pprint prints them (short values). */
static struct jv pprint(struct jctx *c, struct jv v) {
    if (v.kind == JV_DICT) {
        struct jv items = jfilter(c, "dictsort", v, NULL, 0, NULL, NULL, 0);
        struct jv d = jv_dict(c->arena);
        for (size_t i = 0; i < items.u.l->n; i++)
            jv_dict_set(c->arena, d.u.d, items.u.l->items[i].u.l->items[0],
                        items.u.l->items[i].u.l->items[1]);
        v = d;
    }
    struct jbuf b = {.limit = c->opts->max_output};
    jv_repr(&b, v);
    struct jv r = jv_str(c->arena, b.p ? b.p : "", b.len);
    free(b.p);
    return r;
}

/* markupsafe's striptags: comments and tags out, the entities HTML knows best back to text
 * (&amp; &lt; &gt; &quot; &#39; and numeric ones below 128), whitespace runs as one space. */
static struct jv striptags(struct jctx *c, struct jv s) {
    static const struct {
        const char *name, *text;
    } entities[] = {{"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#39;", "'"}};
    struct jbuf b = {.limit = c->opts->max_output};
    const char *p = s.u.s->p, *end = p + s.u.s->len;
    int space = 0;
    while (p < end) {
        const char *close = NULL;
        if (!strncmp(p, "<!--", 4))
            close = strstr(p + 4, "-->"), close = close ? close + 3 : NULL;
        else if (*p == '<')
            close = memchr(p, '>', (size_t)(end - p)), close = close ? close + 1 : NULL;
        if (close) {
            p = close;
            continue;
        }
        char one[2] = {*p, 0};
        const char *text = one;
        size_t used = 1;
        for (size_t i = 0; *p == '&' && i < sizeof entities / sizeof *entities; i++)
            if (!strncmp(p, entities[i].name, strlen(entities[i].name)))
                text = entities[i].text, used = strlen(entities[i].name);
        if (*p == '&' && p[1] == '#' && used == 1) {
            char *stop;
            long code = strtol(p + 2, &stop, 10);
            if (stop > p + 2 && *stop == ';' && code > 0 && code < 128)
                one[0] = (char)code, used = (size_t)(stop + 1 - p);
        }
        p += used;
        if (strchr(" \t\n\r\f\v", text[0]) && text[1] == 0) {
            space = b.len > 0;
            continue;
        }
        if (space)
            jbuf_put(&b, " ", 1), space = 0;
        jbuf_puts(&b, text);
    }
    struct jv r = jv_str(c->arena, b.p ? b.p : "", b.len);
    free(b.p);
    return r;
}

/* Python's urllib quote of s's UTF-8: unreserved characters and safe kept, the rest %XX; for a
 * query (for_qs) nothing is safe and spaces are +. */
static void quote(struct jbuf *b, struct jv s, bool for_qs) {
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < s.u.s->len; i++) {
        unsigned char ch = (unsigned char)s.u.s->p[i];
        if (isalnum(ch) || strchr("_.-~", ch) || (ch == '/' && !for_qs)) {
            jbuf_put(b, (const char *)&ch, 1);
        } else if (ch == ' ' && for_qs) {
            jbuf_put(b, "+", 1);
        } else {
            char esc[3] = {'%', hex[ch >> 4], hex[ch & 15]};
            jbuf_put(b, esc, 3);
        }
    }
}

/* Jinja2's urlencode: a string (or any single value) quoted with / safe; a mapping, or a
 * sequence of pairs, as a query string k=v&k=v. */
static struct jv urlencode(struct jctx *c, struct jv v) {
    struct jbuf b = {.limit = c->opts->max_output};
    if (v.kind == JV_DICT || v.kind == JV_LIST) {
        struct jv items = v.kind == JV_DICT ? jdict_items(c, v) : v;
        for (size_t i = 0; i < items.u.l->n; i++) {
            struct jv kv = items.u.l->items[i];
            if (kv.kind != JV_LIST || kv.u.l->n != 2) {
                free(b.p);
                jfail(c, "urlencode: expected a mapping or a sequence of pairs");
            }
            if (i)
                jbuf_put(&b, "&", 1);
            quote(&b, text_of(c, kv.u.l->items[0]), true);
            jbuf_put(&b, "=", 1);
            quote(&b, text_of(c, kv.u.l->items[1]), true);
        }
    } else {
        quote(&b, text_of(c, v), false);
    }
    struct jv r = jv_str(c->arena, b.p ? b.p : "", b.len);
    free(b.p);
    return r;
}

/* Jinja2's filesizeformat: bytes in kB, MB, ... (KiB, MiB, ... with binary), one decimal. */
static struct jv filesize(struct jctx *c, struct jv v, bool binary) {
    static const char *const si[] = {"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
    static const char *const iec[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
    struct jv f = jfilter(c, "float", v, NULL, 0, NULL, NULL, 0);
    double bytes = f.u.f, base = binary ? 1024 : 1000, unit = base;
    char tmp[64];
    if (bytes == 1)
        return jv_cstr(c->arena, "1 Byte");
    if (bytes < base) {
        snprintf(tmp, sizeof tmp, "%lld Bytes", (long long)bytes);
        return jv_cstr(c->arena, tmp);
    }
    int i = 0;
    for (unit = base * base; i < 7 && bytes >= unit; i++)
        unit *= base;
    snprintf(tmp, sizeof tmp, "%.1f %s", base * bytes / unit, (binary ? iec : si)[i]);
    return jv_cstr(c->arena, tmp);
}

struct jv jfilter_shape(struct jctx *c, const char *n, struct jv v, struct jcall *a, bool *found) {
    *found = true;
    if (!strcmp(n, "center"))
        return jcenter(c, text_of(c, v), int_arg(a, 0, "width", 80), " ");
    if (!strcmp(n, "truncate")) { /* Python's len() first: sequences short enough come back */
        int64_t n = v.kind == JV_LIST   ? (int64_t)v.u.l->n
                    : v.kind == JV_DICT ? (int64_t)v.u.d->n
                                        : -1;
        if (v.kind == JV_UNDEF ||
            (n >= 0 && n <= int_arg(a, 0, "length", 255) + int_arg(a, 3, "leeway", 5)))
            return v;
        if (v.kind != JV_STR)
            jfail(c, "truncate: object of type '%s' has no len()", jv_kind_name(v.kind));
        return truncate(c, v, a);
    }
    if (!strcmp(n, "indent")) {
        if (v.kind != JV_STR)
            jfail(c, "indent: expected a string, got %s", jv_kind_name(v.kind));
        return indent(c, v, a);
    }
    if (!strcmp(n, "batch") || !strcmp(n, "slice")) {
        struct jv seq = jfilter(c, "list", v, NULL, 0, NULL, NULL, 0);
        return n[0] == 'b' ? batch(c, seq, a) : slice(c, seq, a);
    }
    if (!strcmp(n, "format")) { /* s % args, args a tuple of the arguments */
        struct jv args = jv_list(c->arena);
        for (int i = 0; i < a->nargs; i++) /* Markup's % escapes what it takes */
            jv_list_push(c->arena, args.u.l,
                         jv_is_markup(v) ? jmarkup_escape(c, a->args[i], false) : a->args[i]);
        args.u.l->is_tuple = 1;
        return jmarkup_keep(v, jpercent_format(c, text_of(c, v), args));
    }
    if (!strcmp(n, "striptags"))
        return striptags(c, text_of(c, v));
    if (!strcmp(n, "urlencode"))
        return urlencode(c, v);
    if (!strcmp(n, "filesizeformat"))
        return filesize(c, v, jv_truthy(jarg(a, 0, "binary")));
    if (!strcmp(n, "random")) { /* an item: the same for the same clock and place in the output */
        struct jv seq = jfilter(c, "list", v, NULL, 0, NULL, NULL, 0);
        if (!seq.u.l->n)
            jfail(c, "random: cannot choose from an empty sequence");
        uint64_t x = ((uint64_t)c->opts->now + c->out->len) * 0x9E3779B97F4A7C15ull;
        return seq.u.l->items[(x >> 33) % seq.u.l->n];
    }
    if (!strcmp(n, "pprint"))
        return pprint(c, v);
    if (!strcmp(n, "attr")) { /* an attribute, never an item: template values have none here */
        if (v.kind == JV_UNDEF)
            jfail(c, "attr: the value is undefined");
        return jv_undef();
    }
    *found = false;
    return jv_undef();
}
