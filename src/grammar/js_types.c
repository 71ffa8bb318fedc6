/* js_types.c: JSON Schema strings (lengths, formats, patterns), integers (ranges) and arrays
 * (items, prefixItems, minItems / maxItems) as GBNF. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"

/* A non-negative integer keyword (minLength, maxItems ...) at most GRAM_MAX_REPEAT; absent: def. */
static enum ox_status count_kw(const struct jdict *s, const char *key, long def, long *out) {
    const struct jv *v = js_get(s, key);
    *out = def;
    if (!v)
        return OX_OK;
    double x = v->kind == JV_INT ? (double)v->u.i : v->kind == JV_FLOAT ? v->u.f : -1;
    if (!(x >= 0) || x != floor(x))
        return js_fail("%s must be a non-negative integer", key);
    if (x > GRAM_MAX_REPEAT)
        return js_fail("%s %.0f is over the limit of %d", key, x, GRAM_MAX_REPEAT);
    *out = (long)x;
    return OX_OK;
}

/* min and max (max < 0: none) of a pair of count keywords, refusing min > max. */
static enum ox_status count_range(const struct jdict *s, const char *kmin, const char *kmax,
                                  long *min, long *max) {
    OX_TRY(count_kw(s, kmin, 0, min));
    OX_TRY(count_kw(s, kmax, -1, max));
    if (*max >= 0 && *min > *max)
        return js_fail("%s %ld is greater than %s %ld", kmin, *min, kmax, *max);
    return OX_OK;
}

/* item{min,max} (max < 0: unbounded), in the shortest GBNF spelling. */
static enum ox_status put_repeat(struct jbuf *b, long min, long max) {
    char tmp[64];
    if (min == 0 && max < 0)
        return js_put(b, "*");
    if (min == 1 && max < 0)
        return js_put(b, "+");
    if (min == 0 && max == 1)
        return js_put(b, "?");
    if (max < 0)
        snprintf(tmp, sizeof tmp, "{%ld,}", min);
    else if (min == max)
        snprintf(tmp, sizeof tmp, "{%ld}", min);
    else
        snprintf(tmp, sizeof tmp, "{%ld,%ld}", min, max);
    return js_put(b, tmp);
}

static enum ox_status visit_format(struct jsc *c, const char *f, struct jbuf *out) {
    static const struct {
        const char *name;
        enum js_prim prim;
    } formats[] = {{"date", JS_DATE}, {"time", JS_TIME}, {"date-time", JS_DATETIME}};
    if (!strcmp(f, "uuid"))
        return js_put_prim(c, out, JS_UUID);
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        if (strcmp(f, formats[i].name))
            continue;
        OX_TRY(js_put(out, "(\"\\\"\" "));
        OX_TRY(js_put_prim(c, out, formats[i].prim));
        OX_TRY(js_put(out, " \"\\\"\" "));
        OX_TRY(js_put_prim(c, out, JS_SPACE));
        return js_put(out, ")");
    }
    /* Other formats (email, uri ...) are annotations: any string, as in llama.cpp. */
    return js_put_prim(c, out, JS_STRING);
}

enum ox_status js_visit_string(struct jsc *c, const struct jdict *s, const char *hint, int depth,
                               struct jbuf *out) {
    (void)hint, (void)depth;
    const struct jv *pattern = js_get(s, "pattern"), *format = js_get(s, "format");
    long min, max;
    OX_TRY(count_range(s, "minLength", "maxLength", &min, &max));
    if (pattern) {
        if (pattern->kind != JV_STR)
            return js_fail("pattern must be a string");
        OX_TRY(js_put(out, "(\"\\\"\" "));
        OX_TRY(js_regex(c, pattern->u.s->p, pattern->u.s->len, out));
        OX_TRY(js_put(out, " \"\\\"\" "));
        OX_TRY(js_put_prim(c, out, JS_SPACE));
        return js_put(out, ")");
    }
    if (format && format->kind == JV_STR)
        return visit_format(c, format->u.s->p, out);
    if (min == 0 && max < 0)
        return js_put_prim(c, out, JS_STRING);
    OX_TRY(js_put(out, "(\"\\\"\" "));
    OX_TRY(js_put_prim(c, out, JS_CHAR));
    OX_TRY(put_repeat(out, min, max));
    OX_TRY(js_put(out, " \"\\\"\" "));
    OX_TRY(js_put_prim(c, out, JS_SPACE));
    return js_put(out, ")");
}

/* An integer bound: minimum (inclusive) or exclusiveMinimum (a number, or draft 4's boolean
 * beside minimum); likewise for the maximum. */
static enum ox_status int_bound(const struct jdict *s, bool upper, bool *has, int64_t *out) {
    const char *kin = upper ? "maximum" : "minimum";
    const char *kex = upper ? "exclusiveMaximum" : "exclusiveMinimum";
    const struct jv *in = js_get(s, kin), *ex = js_get(s, kex);
    double v = upper ? INFINITY : -INFINITY;
    for (int i = 0; i < 2; i++) {
        const struct jv *b = i ? ex : in;
        if (!b || b->kind == JV_BOOL)
            continue;
        if (b->kind != JV_INT && b->kind != JV_FLOAT)
            return js_fail("%s must be a number", i ? kex : kin);
        double x = b->kind == JV_INT ? (double)b->u.i : b->u.f;
        bool exclusive = i == 1 || (ex && ex->kind == JV_BOOL && ex->u.b);
        if (fabs(x) > JS_MAX_BOUND)
            return js_fail("%s %g is beyond the supported +-1e18", i ? kex : kin, x);
        /* the nearest integer inside the bound */
        double r =
            upper ? (exclusive ? ceil(x) - 1 : floor(x)) : (exclusive ? floor(x) + 1 : ceil(x));
        v = upper ? fmin(v, r) : fmax(v, r);
    }
    *has = isfinite(v);
    if (*has)
        *out = (int64_t)v;
    return OX_OK;
}

enum ox_status js_visit_integer(struct jsc *c, const struct jdict *s, const char *hint, int depth,
                                struct jbuf *out) {
    (void)hint, (void)depth;
    bool has_lo = false, has_hi = false;
    int64_t lo = 0, hi = 0;
    OX_TRY(int_bound(s, false, &has_lo, &lo));
    OX_TRY(int_bound(s, true, &has_hi, &hi));
    if (!has_lo && !has_hi)
        return js_put_prim(c, out, JS_INTEGER);
    if (has_lo && has_hi && lo > hi)
        return js_fail("no integer lies between the minimum and the maximum");
    OX_TRY(js_put(out, "("));
    OX_TRY(js_int_range(out, has_lo, lo, has_hi, hi));
    OX_TRY(js_put(out, " "));
    OX_TRY(js_put_prim(c, out, JS_SPACE));
    return js_put(out, ")");
}

/* A tuple: exactly the prefixItems (or draft 4's items array), as llama.cpp. */
static enum ox_status visit_tuple(struct jsc *c, const struct jlist *items, const char *hint,
                                  int depth, struct jbuf *body) {
    for (size_t i = 0; i < items->n; i++) {
        char sub[96];
        snprintf(sub, sizeof sub, "%.60s-%zu", hint, i);
        OX_TRY(js_put(body, i ? " \",\" space " : " "));
        OX_TRY(js_visit(c, &items->items[i], sub, depth + 1, body));
    }
    return OX_OK;
}

/* item ("," space item){min-1,max-1}, optional as a whole when min is 0. */
static enum ox_status visit_list(struct jsc *c, const struct jdict *s, const struct jv *items,
                                 const char *hint, int depth, struct jbuf *body) {
    long min, max;
    OX_TRY(count_range(s, "minItems", "maxItems", &min, &max));
    if (max == 0)
        return OX_OK;
    char sub[96];
    snprintf(sub, sizeof sub, "%.60s-item", hint);
    struct jbuf item = {0};
    enum ox_status st =
        items ? js_visit(c, items, sub, depth + 1, &item) : js_put_prim(c, &item, JS_VALUE);
    if (st == OX_OK)
        st = js_cat(body, min == 0 ? " (" : " ", item.p, NULL);
    if (st == OX_OK && max != 1)
        st = js_cat(body, " (\",\" space ", item.p, ")", NULL);
    if (st == OX_OK && max != 1)
        st = put_repeat(body, min > 0 ? min - 1 : 0, max < 0 ? -1 : max - 1);
    if (st == OX_OK && min == 0)
        st = js_put(body, ")?");
    free(item.p);
    return st;
}

enum ox_status js_visit_array(struct jsc *c, const struct jdict *s, const char *hint, int depth,
                              struct jbuf *out) {
    const struct jv *prefix = js_get(s, "prefixItems"), *items = js_get(s, "items");
    if (!prefix && items && items->kind == JV_LIST)
        prefix = items;
    if (prefix && prefix->kind != JV_LIST)
        return js_fail("prefixItems must be an array");
    struct jbuf body = {0};
    js_use_prim(c, JS_SPACE);
    enum ox_status st = js_put(&body, "\"[\" space");
    if (st == OX_OK)
        st = prefix ? visit_tuple(c, prefix->u.l, hint, depth, &body)
                    : visit_list(c, s, items, hint, depth, &body);
    return js_end_rule(c, st, &body, " \"]\" space", hint, out);
}
