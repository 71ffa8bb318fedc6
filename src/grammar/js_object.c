/* js_object.c: JSON Schema objects as GBNF: required properties in declared order, then the
 * optional ones (any subset, in declared order), then additional properties; allOf merges the
 * properties of object schemas, as llama.cpp does. */
#include <stdio.h>
#include <stdlib.h>

#include "grammar/json_schema.h"

struct js_prop {
    const struct jstr *key;
    const struct jv *schema; /* NULL: any value */
    bool required;
};

struct js_props {
    struct js_prop *v;
    size_t n, cap;
    bool extras;                    /* additional properties allowed */
    const struct jv *extras_schema; /* their schema; NULL: any value */
};

static struct js_prop *find_prop(struct js_props *p, const struct jstr *key) {
    for (size_t i = 0; i < p->n; i++)
        if (p->v[i].key->len == key->len && !memcmp(p->v[i].key->p, key->p, key->len))
            return &p->v[i];
    return NULL;
}

/* Add or (same key in a later allOf part) replace a property. */
static enum ox_status add_prop(struct jsc *c, struct js_props *p, const struct jstr *key,
                               const struct jv *schema, bool required) {
    struct js_prop *old = find_prop(p, key);
    if (old) {
        old->schema = schema ? schema : old->schema;
        old->required |= required;
        return OX_OK;
    }
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 16;
        struct js_prop *v = jarena_alloc(c->a, cap * sizeof *v);
        if (!v)
            return ox_fail(OX_ERR_OOM, "json schema: out of memory");
        if (p->n)
            memcpy(v, p->v, p->n * sizeof *v);
        p->v = v, p->cap = cap;
    }
    p->v[p->n++] = (struct js_prop){key, schema, required};
    return OX_OK;
}

static bool in_list(const struct jv *list, const struct jstr *key) {
    for (size_t i = 0; list && list->kind == JV_LIST && i < list->u.l->n; i++) {
        const struct jv *r = &list->u.l->items[i];
        if (r->kind == JV_STR && r->u.s->len == key->len && !memcmp(r->u.s->p, key->p, key->len))
            return true;
    }
    return false;
}

/* The properties and required keys of one object schema, added to p. */
static enum ox_status collect(struct jsc *c, const struct jdict *s, struct js_props *p) {
    const struct jv *props = js_get(s, "properties"), *req = js_get(s, "required");
    if (props && props->kind != JV_DICT)
        return js_fail("properties must be an object");
    if (req && req->kind != JV_LIST)
        return js_fail("required must be an array");
    for (size_t i = 0; props && i < props->u.d->n; i++) {
        const struct jv *k = &props->u.d->keys[i];
        OX_TRY(add_prop(c, p, k->u.s, &props->u.d->vals[i], in_list(req, k->u.s)));
    }
    for (size_t i = 0; req && i < req->u.l->n; i++) {
        const struct jv *r = &req->u.l->items[i];
        if (r->kind != JV_STR)
            return js_fail("required must be an array of strings");
        if (find_prop(p, r->u.s))
            find_prop(p, r->u.s)->required = true;
        else if (!p->extras)
            return js_fail("required property '%.100s' is not allowed by additionalProperties",
                           r->u.s->p);
        else
            OX_TRY(add_prop(c, p, r->u.s, p->extras_schema, true));
    }
    return OX_OK;
}

/* Pair i of p as a rule (`"\"key\"" space ":" space value`; i == p->n: an additional pair,
 * whose key is none of the declared ones); its name is appended to out. */
static enum ox_status kv_rule(struct jsc *c, const struct js_props *p, size_t i, const char *hint,
                              int depth, struct jbuf *out) {
    const struct js_prop *kv = i < p->n ? &p->v[i] : NULL;
    char sub[96];
    snprintf(sub, sizeof sub, "%.40s-%.40s", hint, kv ? kv->key->p : "additional");
    struct jbuf body = {0};
    enum ox_status st = OX_OK;
    if (kv) {
        st = js_put_json_str(&body, kv->key->p, kv->key->len, true);
        if (st == OX_OK)
            st = js_put(&body, " space");
    } else if (p->n == 0) {
        st = js_put_prim(c, &body, JS_STRING);
    } else {
        const struct jstr **keys = jarena_alloc(c->a, p->n * sizeof *keys);
        if (!keys)
            return ox_fail(OX_ERR_OOM, "json schema: out of memory");
        for (size_t k = 0; k < p->n; k++)
            keys[k] = p->v[k].key;
        st = js_other_key(c, keys, p->n, hint, &body);
    }
    if (st == OX_OK)
        st = js_put(&body, " \":\" space ");
    const struct jv *schema = kv ? kv->schema : p->extras_schema;
    if (st == OX_OK)
        st = schema ? js_visit(c, schema, sub, depth + 1, &body) : js_put_prim(c, &body, JS_VALUE);
    if (st == OX_OK) {
        snprintf(sub + strlen(sub), sizeof sub - strlen(sub), "-kv");
        st = js_add_rule(c, sub, &body, out, NULL);
    }
    free(body.p);
    return st;
}

/* Optional items i.. as rules rest_i ::= item_i ("," space rest_i+1)? | rest_i+1: any non-empty
 * subsequence, in order, in linear size. items[k] is GBNF text (one symbol or a repetition). */
static enum ox_status optional_chain(struct jsc *c, char **items, size_t n, const char *hint,
                                     struct jbuf *out) {
    uint32_t first = 0;
    char sub[96];
    snprintf(sub, sizeof sub, "%.60s-rest", hint);
    for (size_t i = 0; i < n; i++) {
        uint32_t id;
        OX_TRY(js_add_rule(c, sub, NULL, i == 0 ? out : NULL, &id));
        first = i == 0 ? id : first;
    }
    for (size_t i = 0; i < n; i++) {
        struct jbuf body = {0};
        const char *next = i + 1 < n ? c->rules[first + i + 1].name : NULL;
        enum ox_status st =
            next ? js_cat(&body, items[i], " (\",\" space ", next, ")? | ", next, NULL)
                 : js_put(&body, items[i]);
        if (st == OX_OK)
            js_set_rule(c, first + (uint32_t)i, &body);
        free(body.p);
        OX_TRY(st);
    }
    return OX_OK;
}

/* kv text of each optional property (and the extras), then the chain; frees what it made. */
static enum ox_status put_optional(struct jsc *c, const struct js_props *p, const char *hint,
                                   int depth, bool after_required, struct jbuf *body) {
    size_t n = 0;
    char **items = calloc(p->n + 1, sizeof *items);
    if (!items)
        return ox_fail(OX_ERR_OOM, "json schema: out of memory");
    enum ox_status st = OX_OK;
    for (size_t i = 0; i <= p->n && st == OX_OK; i++) {
        if (i < p->n ? p->v[i].required : !p->extras)
            continue;
        struct jbuf kv = {0};
        st = kv_rule(c, p, i, hint, depth, &kv);
        if (st == OX_OK && i == p->n) { /* any number of extra pairs */
            char *name = kv.p;
            kv = (struct jbuf){0};
            st = js_cat(&kv, name, " (\",\" space ", name, ")*", NULL);
            free(name);
        }
        items[n++] = kv.p;
    }
    if (st == OX_OK && n) {
        st = js_put(body, after_required ? " (\",\" space " : " (");
        if (st == OX_OK)
            st = optional_chain(c, items, n, hint, body);
        if (st == OX_OK)
            st = js_put(body, ")?");
    }
    for (size_t i = 0; i < n; i++)
        free(items[i]);
    free(items);
    return st;
}

static enum ox_status build_object(struct jsc *c, const struct js_props *p, const char *hint,
                                   int depth, struct jbuf *out) {
    struct jbuf body = {0};
    js_use_prim(c, JS_SPACE);
    enum ox_status st = js_put(&body, "\"{\" space");
    size_t n_req = 0;
    for (size_t i = 0; i < p->n && st == OX_OK; i++) {
        if (!p->v[i].required)
            continue;
        st = js_put(&body, n_req++ ? " \",\" space " : " ");
        if (st == OX_OK)
            st = kv_rule(c, p, i, hint, depth, &body);
    }
    if (st == OX_OK)
        st = put_optional(c, p, hint, depth, n_req > 0, &body);
    return js_end_rule(c, st, &body, " \"}\" space", hint, out);
}

enum ox_status js_visit_object(struct jsc *c, const struct jdict *s, const char *hint, int depth,
                               struct jbuf *out) {
    const struct jv *ap = js_get(s, "additionalProperties");
    bool has_props = js_get(s, "properties") != NULL;
    if (!has_props && !js_get(s, "required") && (!ap || (ap->kind == JV_BOOL && ap->u.b)))
        return js_put_prim(c, out, JS_OBJECT);
    /* Absent additionalProperties beside properties means none, as in llama.cpp: a model
     * should write the declared keys, not invent others. */
    struct js_props p = {.extras = ap ? !(ap->kind == JV_BOOL && !ap->u.b) : !has_props};
    if (ap && ap->kind == JV_DICT)
        p.extras_schema = ap;
    else if (ap && ap->kind != JV_BOOL)
        return js_fail("additionalProperties must be a boolean or a schema");
    OX_TRY(collect(c, s, &p));
    return build_object(c, &p, hint, depth, out);
}

/* allOf: every part (and the schema itself) must be an object schema; their properties are
 * merged and a key required anywhere is required. Additional properties are not allowed. */
enum ox_status js_visit_all_of(struct jsc *c, const struct jdict *s, const char *hint, int depth,
                               struct jbuf *out) {
    const struct jv *all = js_get(s, "allOf");
    if (all->kind != JV_LIST || all->u.l->n == 0)
        return js_fail("allOf must be a non-empty array");
    /* extras while collecting: a key required in one part may be declared in a later one */
    struct js_props p = {.extras = true};
    OX_TRY(collect(c, s, &p));
    for (size_t i = 0; i < all->u.l->n; i++) {
        const struct jv *part = &all->u.l->items[i], *ref, *type;
        for (int hops = 0; part->kind == JV_DICT && (ref = js_get(part->u.d, "$ref")); hops++) {
            if (ref->kind != JV_STR || hops > JS_MAX_DEPTH)
                return js_fail("allOf: bad or circular $ref");
            OX_TRY(js_resolve(c, ref->u.s->p, &part));
        }
        if (part->kind != JV_DICT)
            return js_fail("allOf is supported only for object schemas");
        type = js_get(part->u.d, "type");
        bool object = type ? type->kind == JV_STR && !strcmp(type->u.s->p, "object")
                           : js_get(part->u.d, "properties") || js_get(part->u.d, "required");
        if (!object || js_get(part->u.d, "allOf") || js_get(part->u.d, "anyOf") ||
            js_get(part->u.d, "oneOf"))
            return js_fail("allOf is supported only for object schemas with properties");
        OX_TRY(collect(c, part->u.d, &p));
    }
    p.extras = false;
    return build_object(c, &p, hint, depth, out);
}
