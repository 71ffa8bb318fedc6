/* filters.c: Jinja's filters (|trim, |tojson, |selectattr, ...) and tests (is defined, ...). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "chat/builtins_int.h"

static struct jv need_str(struct jctx *c, struct jv v) {
    return v.kind == JV_STR ? v : jstr_of(c, v);
}

/* The iterable a filter walks: lists as-is, dict keys, string characters. */
static struct jv as_list(struct jctx *c, struct jv v, const char *who) {
    if (v.kind == JV_LIST)
        return v;
    struct jv l = jv_list(c->arena);
    if (v.kind == JV_DICT)
        for (size_t i = 0; i < v.u.d->n; i++)
            jv_list_push(c->arena, l.u.l, v.u.d->keys[i]);
    else if (v.kind == JV_STR) {
        size_t *o, n = jv_char_offsets(c->arena, v.u.s, &o);
        for (size_t i = 0; i < n; i++)
            jv_list_push(c->arena, l.u.l, jv_str(c->arena, v.u.s->p + o[i], o[i + 1] - o[i]));
    } else if (v.kind != JV_UNDEF)
        jfail(c, "%s: '%s' object is not iterable", who, jv_kind_name(v.kind));
    return l;
}

/* Attribute path "a.b" or item index as used by selectattr/map/sort/join. */
static struct jv get_path(struct jctx *c, struct jv v, const char *path) {
    char part[128];
    while (*path) {
        size_t n = strcspn(path, ".");
        if (n >= sizeof part)
            n = sizeof part - 1;
        memcpy(part, path, n);
        part[n] = 0;
        if (v.kind == JV_LIST && part[0] >= '0' && part[0] <= '9') {
            size_t i = (size_t)atoll(part);
            v = i < v.u.l->n ? v.u.l->items[i] : jv_undef();
        } else if (v.kind == JV_DICT) {
            struct jv *x = jv_dict_gets(v.u.d, part);
            v = x ? *x : jv_undef();
        } else
            v = jattr(c, v, part);
        path += n + (path[n] == '.');
    }
    return v;
}

static struct jv gen(struct jv l) {
    l.u.l->is_gen = 1;
    return l;
}

/* Whether tojson's separators argument is the pair (item, key). */
static bool separators_are(struct jv sep, const char *item, const char *key) {
    return sep.kind == JV_LIST && sep.u.l->n == 2 && sep.u.l->items[0].kind == JV_STR &&
           sep.u.l->items[1].kind == JV_STR && !strcmp(sep.u.l->items[0].u.s->p, item) &&
           !strcmp(sep.u.l->items[1].u.s->p, key);
}

static struct jv tojson(struct jctx *c, struct jv v, struct jcall *a) {
    struct jv ind = jarg(a, 0, "indent");
    struct jbuf b = {.limit = c->opts->max_output};
    if (ind.kind != JV_UNDEF && ind.kind != JV_NONE && ind.kind != JV_INT)
        jfail(c, "tojson: indent must be an integer");
    int indent = ind.kind == JV_INT ? (int)(ind.u.i < 0 ? 0 : ind.u.i > 64 ? 64 : ind.u.i) : -1;
    int flags = (jv_truthy(jarg(a, -1, "sort_keys")) ? JSON_SORT_KEYS : 0) |
                (jv_truthy(jarg(a, -1, "ensure_ascii")) ? JSON_ASCII : 0);
    /* separators: Python's default (', ', ': '; ',' after items with an indent) or compact */
    struct jv sep = jarg(a, -1, "separators");
    if (separators_are(sep, ",", ":"))
        flags |= JSON_COMPACT;
    else if (sep.kind != JV_UNDEF && sep.kind != JV_NONE &&
             !separators_are(sep, indent >= 0 ? "," : ", ", ": "))
        jfail(c, "tojson: separators other than (', ', ': ') and (',', ':') are not supported");
    if (jv_to_json(&b, v, indent, 0, flags)) {
        free(b.p);
        jfail(c, "tojson: cannot serialize (an undefined value, a generator, or too deep or "
                 "long)");
    }
    struct jv r = jv_str(c->arena, b.p ? b.p : "", b.len);
    free(b.p);
    return r;
}

static struct jv do_join(struct jctx *c, struct jv v, struct jcall *a) {
    struct jv l = as_list(c, v, "join");
    struct jv sep = jarg(a, 0, "d");
    const char *attr = jarg_str(c, a, 1, "attribute", NULL);
    struct jbuf b = {.limit = c->opts->max_output};
    for (size_t i = 0; i < l.u.l->n; i++) {
        if (i && sep.kind == JV_STR)
            jbuf_put(&b, sep.u.s->p, sep.u.s->len);
        jv_to_str(&b, attr ? get_path(c, l.u.l->items[i], attr) : l.u.l->items[i]);
    }
    struct jv r = jv_str(c->arena, b.p ? b.p : "", b.len);
    free(b.p);
    return r;
}

/* The sequence select, reject, selectattr, rejectattr and map walk: as Jinja2's, a falsy value
 * (none, undefined, 0, '') is an empty one, where iterating it would fail. */
static struct jv seq_of(struct jctx *c, struct jv v, const char *who) {
    return jv_truthy(v) ? as_list(c, v, who) : jv_list(c->arena);
}

/* selectattr / rejectattr / select / reject. */
static struct jv do_select(struct jctx *c, struct jv v, struct jcall *a, int by_attr, int keep) {
    struct jv l = seq_of(c, v, a->name), out = jv_list(c->arena);
    int first_test_arg = by_attr ? 1 : 0;
    const char *attr = by_attr ? jarg_str(c, a, 0, NULL, "") : NULL;
    const char *test = jarg_str(c, a, first_test_arg, NULL, NULL);
    int targs = a->nargs - first_test_arg - 1;
    for (size_t i = 0; i < l.u.l->n; i++) {
        struct jv x = attr ? get_path(c, l.u.l->items[i], attr) : l.u.l->items[i];
        int ok = test ? jtest(c, test, x, a->args + first_test_arg + 1, targs > 0 ? targs : 0)
                      : jv_truthy(x);
        if (ok == keep)
            jv_list_push(c->arena, out.u.l, l.u.l->items[i]);
    }
    return out;
}

static struct jv do_map(struct jctx *c, struct jv v, struct jcall *a) {
    struct jv l = seq_of(c, v, "map"), out = jv_list(c->arena);
    const char *attr = jarg_str(c, a, -1, "attribute", NULL);
    struct jv dflt = jarg(a, -1, "default");
    const char *filter = attr ? NULL : jarg_str(c, a, 0, NULL, NULL);
    if (!attr && !filter)
        jfail(c, "map: needs a filter name or attribute=");
    for (size_t i = 0; i < l.u.l->n; i++) {
        struct jv x;
        if (attr) {
            x = get_path(c, l.u.l->items[i], attr);
            if (x.kind == JV_UNDEF && dflt.kind != JV_UNDEF)
                x = dflt;
        } else
            x = jfilter(c, filter, l.u.l->items[i], a->args + 1, a->nargs - 1, NULL, NULL, 0);
        jv_list_push(c->arena, out.u.l, x);
    }
    return out;
}

struct sort_ctx {
    struct jctx *c;
    const char *attr;
    int ci, reverse;
};

static int sort_cmp(const struct sort_ctx *s, struct jv a, struct jv b) {
    if (s->attr) {
        a = get_path(s->c, a, s->attr);
        b = get_path(s->c, b, s->attr);
    }
    if (s->ci && a.kind == JV_STR && b.kind == JV_STR) {
        a = jcase(s->c, a, 0);
        b = jcase(s->c, b, 0);
    }
    int ok, r = jv_compare(a, b, &ok);
    if (!ok)
        jfail(s->c, "sort: cannot compare %s with %s", jv_kind_name(a.kind), jv_kind_name(b.kind));
    return s->reverse ? -r : r;
}

/* Stable merge sort (Python's sort is stable; qsort is not, and has no context pointer). */
static void merge_sort(const struct sort_ctx *s, struct jv *v, struct jv *tmp, size_t n) {
    if (n < 2)
        return;
    size_t h = n / 2, i = 0, j = h, k = 0;
    merge_sort(s, v, tmp, h);
    merge_sort(s, v + h, tmp, n - h);
    while (i < h && j < n)
        tmp[k++] = sort_cmp(s, v[j], v[i]) < 0 ? v[j++] : v[i++];
    while (i < h)
        tmp[k++] = v[i++];
    while (j < n)
        tmp[k++] = v[j++];
    memcpy(v, tmp, n * sizeof *v);
}

static struct jv do_sort(struct jctx *c, struct jv v, struct jcall *a, int dictsort) {
    struct jv l = dictsort ? jdict_items(c, v) : as_list(c, v, "sort");
    struct jv out = jv_list(c->arena);
    for (size_t i = 0; i < l.u.l->n; i++)
        jv_list_push(c->arena, out.u.l, l.u.l->items[i]);
    struct sort_ctx s = {c, dictsort ? "0" : jarg_str(c, a, 2, "attribute", NULL),
                         !jv_truthy(jarg(a, dictsort ? 0 : 1, "case_sensitive")),
                         jv_truthy(jarg(a, dictsort ? 2 : 0, "reverse"))};
    struct jv *tmp = jarena_alloc(c->arena, (out.u.l->n + 1) * sizeof *tmp);
    merge_sort(&s, out.u.l->items, tmp, out.u.l->n);
    return out;
}

/* Jinja compares strings case-insensitively unless case_sensitive=true. */
/* Jinja2's groupby: sorted by the attribute (default where missing; strings compared without
 * case unless case_sensitive), runs of equal keys as (grouper, list) pairs, the grouper the
 * run's first item's own value. */
static struct jv do_groupby(struct jctx *c, struct jv v, struct jcall *a) {
    const char *attr = jarg_str(c, a, 0, "attribute", NULL);
    struct jv dflt = jarg(a, 1, "default"), out = jv_list(c->arena);
    int ci = !jv_truthy(jarg(a, 2, "case_sensitive"));
    if (!attr)
        jfail(c, "groupby: needs an attribute");
    struct jv l = as_list(c, v, "groupby"), keyed = jv_list(c->arena);
    for (size_t i = 0; i < l.u.l->n; i++) { /* [key, item] pairs, sorted by key */
        struct jv k = get_path(c, l.u.l->items[i], attr), pair = jv_list(c->arena);
        jv_list_push(c->arena, pair.u.l, k.kind == JV_UNDEF ? dflt : k);
        jv_list_push(c->arena, pair.u.l, l.u.l->items[i]);
        jv_list_push(c->arena, keyed.u.l, pair);
    }
    struct sort_ctx s = {c, "0", ci, 0};
    struct jv *tmp = jarena_alloc(c->arena, (keyed.u.l->n + 1) * sizeof *tmp);
    merge_sort(&s, keyed.u.l->items, tmp, keyed.u.l->n);
    struct jv group = jv_undef();
    for (size_t i = 0; i < keyed.u.l->n; i++) {
        struct jv *pair = keyed.u.l->items[i].u.l->items;
        if (group.kind == JV_UNDEF || sort_cmp(&s, keyed.u.l->items[i - 1], keyed.u.l->items[i])) {
            group = jv_list(c->arena);
            group.u.l->is_tuple = group.u.l->is_group = 1;
            jv_list_push(c->arena, group.u.l, pair[0]);
            jv_list_push(c->arena, group.u.l, jv_list(c->arena));
            jv_list_push(c->arena, out.u.l, group);
        }
        jv_list_push(c->arena, group.u.l->items[1].u.l, pair[1]);
    }
    return out;
}

static struct jv do_unique(struct jctx *c, struct jv v, struct jcall *a) {
    struct jv l = as_list(c, v, "unique"), out = jv_list(c->arena), keys = jv_list(c->arena);
    int cs = jv_truthy(jarg(a, 0, "case_sensitive"));
    const char *attr = jarg_str(c, a, 1, "attribute", NULL);
    for (size_t i = 0; i < l.u.l->n; i++) {
        int seen = 0;
        struct jv k = attr ? get_path(c, l.u.l->items[i], attr) : l.u.l->items[i];
        if (k.kind == JV_LIST || k.kind == JV_DICT) /* Python hashes them: a set refuses */
            jfail(c, "unique: unhashable type: '%s'", jv_kind_name(k.kind));
        if (!cs && k.kind == JV_STR)
            k = jcase(c, k, 0);
        for (size_t j = 0; j < keys.u.l->n && !seen; j++)
            seen = jv_equal(keys.u.l->items[j], k);
        if (!seen)
            jv_list_push(c->arena, keys.u.l, k);
        if (!seen)
            jv_list_push(c->arena, out.u.l, l.u.l->items[i]);
    }
    return out;
}

static struct jv to_number(struct jctx *c, struct jv v, struct jcall *a, int want_float) {
    struct jv dflt = jarg(a, 0, "default");
    if (dflt.kind == JV_UNDEF)
        dflt = want_float ? jv_float(0) : jv_int(0);
    switch (v.kind) {
    case JV_UNDEF: jfail(c, "%s: the value is undefined", want_float ? "float" : "int");
    case JV_INT: return want_float ? jv_float((double)v.u.i) : v;
    case JV_BOOL: return want_float ? jv_float(v.u.b) : jv_int(v.u.b);
    case JV_FLOAT: return want_float ? v : jv_int((int64_t)v.u.f);
    case JV_STR: {
        char *e;
        struct jv t = jstrip(c, v, NULL, 3);
        if (!want_float) {
            long long i = strtoll(t.u.s->p, &e, 10);
            if (t.u.s->len && !*e)
                return jv_int(i);
        }
        double f = strtod(t.u.s->p, &e);
        if (!t.u.s->len || *e)
            return dflt;
        return want_float ? jv_float(f) : jv_int((int64_t)f);
    }
    default: return dflt;
    }
}

static struct jv minmax(struct jctx *c, struct jv v, int want_max) {
    struct jv l = as_list(c, v, want_max ? "max" : "min");
    if (!l.u.l->n)
        return jv_undef();
    struct jv best = l.u.l->items[0];
    for (size_t i = 1; i < l.u.l->n; i++) {
        int ok, r = jv_compare(l.u.l->items[i], best, &ok);
        if (!ok)
            jfail(c, "min/max: values are not comparable");
        if (want_max ? r > 0 : r < 0)
            best = l.u.l->items[i];
    }
    return best;
}

static struct jv length_of(struct jctx *c, struct jv v) {
    switch (v.kind) {
    case JV_STR: {
        int64_t n = 0; /* characters, not bytes */
        for (size_t i = 0; i < v.u.s->len; i++)
            n += ((unsigned char)v.u.s->p[i] & 0xC0) != 0x80;
        return jv_int(n);
    }
    case JV_LIST:
        if (v.u.l->is_gen)
            jfail(c, "object of type 'generator' has no len()");
        return jv_int((int64_t)v.u.l->n);
    case JV_DICT: return jv_int((int64_t)v.u.d->n);
    case JV_UNDEF: return jv_int(0);
    default: jfail(c, "object of type '%s' has no len()", jv_kind_name(v.kind));
    }
}

/* Jinja2's round: Python's round(v, precision) ("common": an int stays an int, halves of the
 * exact binary value go to even, as printf rounds), else floor / ceil of v * 10^p over 10^p. */
static struct jv do_round(struct jctx *c, struct jv v, struct jcall *a) {
    struct jv p = jarg(a, 0, "precision");
    const char *method = jarg_str(c, a, 1, "method", "common");
    int64_t digits = p.kind == JV_INT ? p.u.i : 0;
    if (v.kind != JV_INT && v.kind != JV_FLOAT && v.kind != JV_BOOL)
        jfail(c, "round: type %s doesn't define __round__ method", jv_kind_name(v.kind));
    double x = v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : v.u.b;
    if (strcmp(method, "common")) {
        double m = pow(10, (double)digits);
        return jv_float((method[0] == 'f' ? floor(x * m) : ceil(x * m)) / m);
    }
    if (v.kind != JV_FLOAT)
        return v.kind == JV_INT ? v : jv_int(v.u.b);
    if (digits <= 0 || digits > 300 || !isfinite(x)) {
        double m = pow(10, (double)(digits < -300 ? -300 : digits));
        return jv_float(nearbyint(x * m) / m);
    }
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%.*f", (int)digits, x);
    return jv_float(strtod(tmp, NULL));
}

#define NOT_FOUND ((struct jv){.kind = JV_FUNC, .u.fn = NULL})
static int is_not_found(struct jv v) {
    return v.kind == JV_FUNC && !v.u.fn;
}

/* The collection and number filters; NOT_FOUND if name is none of them. */
static struct jv filter_seq(struct jctx *c, const char *n, struct jv v, struct jcall *a) {
    if (!strcmp(n, "int") || !strcmp(n, "float"))
        return to_number(c, v, a, n[0] == 'f');
    if (!strcmp(n, "selectattr") || !strcmp(n, "rejectattr"))
        return gen(do_select(c, v, a, 1, n[0] == 's'));
    if (!strcmp(n, "select") || !strcmp(n, "reject"))
        return gen(do_select(c, v, a, 0, n[0] == 's'));
    if (!strcmp(n, "map"))
        return gen(do_map(c, v, a));
    if (!strcmp(n, "unique"))
        return gen(do_unique(c, v, a));
    if (!strcmp(n, "groupby"))
        return do_groupby(c, v, a);
    if (!strcmp(n, "abs")) {
        if (v.kind == JV_BOOL)
            return jv_int(v.u.b);
        if (v.kind == JV_INT)
            return jv_int(v.u.i < 0 && v.u.i != INT64_MIN ? -v.u.i : v.u.i);
        if (v.kind == JV_FLOAT)
            return jv_float(fabs(v.u.f));
        jfail(c, "abs: expected a number");
    }
    if (!strcmp(n, "round"))
        return do_round(c, v, a);
    if (!strcmp(n, "reverse")) {
        if (v.kind == JV_STR) {
            size_t *o, k = jv_char_offsets(c->arena, v.u.s, &o), at = 0;
            struct jv r = jv_str(c->arena, v.u.s->p, v.u.s->len);
            for (size_t i = k; i-- > 0; at += o[i + 1] - o[i])
                memcpy(r.u.s->p + at, v.u.s->p + o[i], o[i + 1] - o[i]);
            return r;
        }
        struct jv l = as_list(c, v, "reverse"), out = jv_list(c->arena);
        for (size_t i = l.u.l->n; i-- > 0;)
            jv_list_push(c->arena, out.u.l, l.u.l->items[i]);
        return out;
    }
    if (!strcmp(n, "sort"))
        return do_sort(c, v, a, 0);
    if (!strcmp(n, "dictsort")) {
        if (v.kind != JV_DICT)
            jfail(c, "dictsort: expected a mapping");
        return do_sort(c, v, a, 1);
    }
    if (!strcmp(n, "min") || !strcmp(n, "max"))
        return minmax(c, v, n[1] == 'a');
    if (!strcmp(n, "sum")) {
        const char *attr = jarg_str(c, a, 0, "attribute", NULL);
        struct jv l = as_list(c, v, "sum"), start = jarg(a, 1, "start");
        struct jv acc = start.kind == JV_UNDEF ? jv_int(0) : start;
        for (size_t i = 0; i < l.u.l->n; i++)
            acc = jarith(c, "+", acc, attr ? get_path(c, l.u.l->items[i], attr) : l.u.l->items[i]);
        return acc;
    }
    if (!strcmp(n, "wordcount")) { /* Python's \w+ runs of str(v) */
        struct jv s = need_str(c, v);
        int64_t words = 0;
        for (size_t i = 0, in = 0; i < s.u.s->len; i++) {
            unsigned char ch = (unsigned char)s.u.s->p[i];
            size_t word = ch >= 0x80 || ch == '_' || (ch < 0x80 && isalnum(ch));
            words += word && !in;
            in = word;
        }
        return jv_int(words);
    }
    return NOT_FOUND;
}

struct jv jfilter(struct jctx *c, const char *name, struct jv v, struct jv *args, int nargs,
                  const char **kwnames, struct jv *kwvals, int nkw) {
    struct jcall a = {name, args, nargs, kwnames, kwvals, nkw};
    const char *n = name;
    if (!strcmp(n, "tojson"))
        return tojson(c, v, &a);
    if (!strcmp(n, "trim"))
        return jmarkup_keep(v, jstrip(c, need_str(c, v), jarg_str(c, &a, 0, "chars", NULL), 3));
    if (!strcmp(n, "length") || !strcmp(n, "count"))
        return length_of(c, v);
    if (!strcmp(n, "string"))
        return need_str(c, v);
    if (!strcmp(n, "e") || !strcmp(n, "escape") || !strcmp(n, "forceescape"))
        return jmarkup_escape(c, v, n[0] == 'f');
    if (!strcmp(n, "safe"))
        return jmarkup_safe(c, v);
    if (!strcmp(n, "upper") || !strcmp(n, "lower"))
        return jmarkup_keep(v, jcase(c, need_str(c, v), n[0] == 'u'));
    if (!strcmp(n, "capitalize"))
        return jmarkup_keep(v, jcase(c, need_str(c, v), 2));
    if (!strcmp(n, "title"))
        return jmarkup_keep(v, jcase(c, need_str(c, v), 3));
    if (!strcmp(n, "replace"))
        return jmarkup_keep(
            v, jreplace(c, need_str(c, v), need_str(c, jarg(&a, 0, "old")).u.s->p,
                        need_str(c, jarg(&a, 1, "new")).u.s->p,
                        jarg(&a, 2, "count").kind == JV_INT ? jarg(&a, 2, "count").u.i : -1));
    if (!strcmp(n, "join"))
        return do_join(c, v, &a);
    if (!strcmp(n, "first") || !strcmp(n, "last")) {
        struct jv l = as_list(c, v, n);
        if (!l.u.l->n)
            return jv_undef();
        return l.u.l->items[n[0] == 'f' ? 0 : l.u.l->n - 1];
    }
    if (!strcmp(n, "default") || !strcmp(n, "d")) {
        struct jv dflt = jarg(&a, 0, "default_value");
        int boolean = jv_truthy(jarg(&a, 1, "boolean"));
        if (v.kind == JV_UNDEF || (boolean && !jv_truthy(v)))
            return dflt.kind == JV_UNDEF ? jv_str(c->arena, "", 0) : dflt;
        return v;
    }
    if (!strcmp(n, "items")) {
        if (v.kind == JV_UNDEF)
            return jv_list(c->arena);
        if (v.kind != JV_DICT)
            jfail(c, "items: expected a mapping, got %s", jv_kind_name(v.kind));
        return jdict_items(c, v);
    }
    if (!strcmp(n, "list")) {
        struct jv l = as_list(c, v, "list"), out = jv_list(c->arena);
        for (size_t i = 0; i < l.u.l->n; i++)
            jv_list_push(c->arena, out.u.l, l.u.l->items[i]);
        return out;
    }
    struct jv r = filter_seq(c, n, v, &a);
    if (!is_not_found(r))
        return r;
    bool found;
    r = jfilter_shape(c, n, v, &a, &found);
    if (found)
        return r;
    jfail(c, "no filter named '%s'", n);
}

/* The tests that compare with an argument x; -1 if name is none of them. */
static int test_compare(struct jctx *c, const char *n, struct jv v, struct jv x) {
    if (!strcmp(n, "eq") || !strcmp(n, "equalto") || !strcmp(n, "==") || !strcmp(n, "sameas"))
        return jv_equal(v, x) && (n[0] != 's' || v.kind == x.kind);
    if (!strcmp(n, "ne") || !strcmp(n, "!="))
        return !jv_equal(v, x);
    if (!strcmp(n, "in")) {
        if (x.kind == JV_LIST) {
            for (size_t i = 0; i < x.u.l->n; i++)
                if (jv_equal(x.u.l->items[i], v))
                    return 1;
            return 0;
        }
        if (x.kind == JV_DICT)
            return jv_dict_get(x.u.d, v) != NULL;
        if (x.kind == JV_STR && v.kind == JV_STR)
            return strstr(x.u.s->p, v.u.s->p) != NULL;
        jfail(c, "test 'in': bad container");
    }
    if (!strcmp(n, "lt") || !strcmp(n, "gt") || !strcmp(n, "le") || !strcmp(n, "ge")) {
        int ok, r = jv_compare(v, x, &ok);
        if (!ok)
            jfail(c, "test '%s': values are not comparable", n);
        return n[0] == 'l' ? (n[1] == 't' ? r < 0 : r <= 0) : (n[1] == 't' ? r > 0 : r >= 0);
    }
    if (!strcmp(n, "divisibleby") || !strcmp(n, "even") || !strcmp(n, "odd")) {
        /* Python's value % k (floats and booleans too): odd is % 2 == 1 */
        if (v.kind == JV_FLOAT || (v.kind == JV_BOOL && n[0] != 'd')) {
            double f = v.kind == JV_FLOAT ? v.u.f : (double)v.u.b;
            double k = n[0] != 'd' ? 2.0 : x.kind == JV_INT ? (double)x.u.i : 0.0;
            if (k == 0.0)
                jfail(c, "divisibleby needs a non-zero integer");
            double m = f - k * floor(f / k);
            return n[0] == 'o' ? m == 1.0 : m == 0.0;
        }
        if (v.kind != JV_INT && v.kind != JV_BOOL)
            jfail(c, "test '%s' needs a number", n);
        int64_t i = v.kind == JV_INT ? v.u.i : v.u.b;
        if (n[0] == 'e')
            return i % 2 == 0;
        if (n[0] == 'o')
            return i % 2 != 0;
        if (x.kind != JV_INT || x.u.i == 0)
            jfail(c, "divisibleby needs a non-zero integer");
        return x.u.i == -1 || i % x.u.i == 0;
    }
    if (!strcmp(n, "lower") || !strcmp(n, "upper")) { /* of str(v), as Jinja2's tests */
        v = v.kind == JV_STR ? v : jstr_of(c, v);
        /* Python's islower / isupper: no character of the other case, and one cased at all */
        struct jv t = jcase(c, v, n[0] == 'u'), other = jcase(c, v, n[0] != 'u');
        return !strcmp(t.u.s->p, v.u.s->p) && strcmp(other.u.s->p, v.u.s->p) != 0;
    }
    return -1;
}

int jtest(struct jctx *c, const char *name, struct jv v, struct jv *args, int nargs) {
    const char *n = name;
    struct jv x = nargs > 0 ? args[0] : jv_undef();
    static const char *const unary[] = {"defined",  "undefined", "none",   "string",   "mapping",
                                        "iterable", "sequence",  "number", "integer",  "float",
                                        "boolean",  "true",      "false",  "callable", "even",
                                        "odd",      "lower",     "upper",  "escaped",  NULL};
    for (int i = 0; unary[i]; i++)
        if (!strcmp(n, unary[i]) && nargs > 0)
            jfail(c, "test '%s' takes no arguments", n);
    if (!strcmp(n, "defined"))
        return v.kind != JV_UNDEF;
    if (!strcmp(n, "undefined"))
        return v.kind == JV_UNDEF;
    if (!strcmp(n, "none"))
        return v.kind == JV_NONE;
    if (!strcmp(n, "string"))
        return v.kind == JV_STR;
    if (!strcmp(n, "mapping"))
        return v.kind == JV_DICT;
    if (!strcmp(n, "iterable"))
        return v.kind == JV_STR || v.kind == JV_LIST || v.kind == JV_DICT || v.kind == JV_UNDEF;
    /* Jinja2's Undefined has a length and items, and a call (each raising): a sequence and
     * callable, as its tests say */
    if (!strcmp(n, "sequence"))
        return v.kind == JV_STR || v.kind == JV_LIST || v.kind == JV_DICT || v.kind == JV_UNDEF;
    if (!strcmp(n, "number"))
        return v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL;
    if (!strcmp(n, "integer"))
        return v.kind == JV_INT;
    if (!strcmp(n, "float"))
        return v.kind == JV_FLOAT;
    if (!strcmp(n, "boolean"))
        return v.kind == JV_BOOL;
    if (!strcmp(n, "true") || !strcmp(n, "false"))
        return v.kind == JV_BOOL && v.u.b == (n[0] == 't');
    if (!strcmp(n, "callable"))
        return v.kind == JV_FUNC || v.kind == JV_UNDEF;
    if (!strcmp(n, "escaped"))
        return jv_is_markup(v);
    int r = test_compare(c, n, v, x);
    if (r >= 0)
        return r;
    jfail(c, "no test named '%s'", n);
}
