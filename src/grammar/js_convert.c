/* js_convert.c: JSON Schema -> GBNF (ox_json_schema_to_grammar): the walk over a schema by
 * keyword, local $refs (one rule per target, so recursive schemas work), enum and const.
 * Lives in src/grammar and reads schemas with src/json's parser. Semantics follow
 * llama.cpp's json-schema-to-grammar; the generated grammar is checked with gram_parse. */
#include <stdio.h>
#include <stdlib.h>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"

enum ox_status js_resolve(struct jsc *c, const char *ref, const struct jv **out) {
    if (ref[0] != '#')
        return js_fail("remote $ref '%.200s' is not supported (only \"#...\" in the schema)", ref);
    const struct jv *v = &c->root;
    const char *p = ref + 1;
    while (*p == '/') {
        const char *seg = ++p;
        while (*p && *p != '/')
            p++;
        char key[256];
        size_t n = 0;
        for (const char *q = seg; q < p && n < sizeof key - 1; q++) { /* ~0 = ~, ~1 = / */
            if (*q == '~' && q + 1 < p && (q[1] == '0' || q[1] == '1'))
                key[n++] = *++q == '0' ? '~' : '/';
            else
                key[n++] = *q;
        }
        key[n] = 0;
        const struct jv *next = NULL;
        if (v->kind == JV_DICT)
            next = js_get(v->u.d, key);
        else if (v->kind == JV_LIST && n && strspn(key, "0123456789") == n &&
                 strtoull(key, NULL, 10) < v->u.l->n)
            next = &v->u.l->items[strtoull(key, NULL, 10)];
        if (!next)
            return js_fail("unknown $ref '%.200s'", ref);
        v = next;
    }
    if (*p)
        return js_fail("unsupported $ref '%.200s' (expected \"#/path/to/schema\")", ref);
    *out = v;
    return OX_OK;
}

/* A $ref: the first use makes the target's rule (named after the last path segment). */
static enum ox_status visit_ref(struct jsc *c, const struct jv *ref, int depth, struct jbuf *out) {
    if (ref->kind != JV_STR)
        return js_fail("$ref must be a string");
    const char *r = ref->u.s->p;
    int64_t id = strmap_find(&c->refs, r, ref->u.s->len);
    if (id >= 0)
        return js_put(out, c->rules[id].name);
    const struct jv *target;
    OX_TRY(js_resolve(c, r, &target));
    const char *slash = strrchr(r, '/');
    uint32_t rid;
    OX_TRY(js_add_rule(c, slash && slash[1] ? slash + 1 : "ref", NULL, out, &rid));
    OX_TRY(strmap_put(&c->refs, r, ref->u.s->len, rid));
    struct jbuf body = {0};
    /* Each ref is visited once (later uses name its rule), so only a chain of distinct refs
     * nests here, and the depth bound keeps that chain (and the C stack) short. */
    enum ox_status st = js_visit(c, target, c->rules[rid].name, depth + 1, &body);
    if (st == OX_OK)
        js_set_rule(c, rid, &body);
    free(body.p);
    return st;
}

static enum ox_status put_number(struct jbuf *b, const struct jv *v) {
    char tmp[64];
    if (v->kind == JV_INT) {
        snprintf(tmp, sizeof tmp, "%lld", (long long)v->u.i);
        return js_put_json_str(b, tmp, strlen(tmp), false);
    }
    struct jbuf t = {0};
    if (jv_fmt_float(&t, v->u.f)) {
        free(t.p);
        return ox_fail(OX_ERR_OOM, "json schema: out of memory");
    }
    enum ox_status st = js_put_json_str(b, t.p, t.len, false);
    free(t.p);
    return st;
}

/* Containers: "[" space v space ("," space v space)* "]", likewise objects. */
static enum ox_status put_const_container(struct jsc *c, struct jbuf *b, const struct jv *v,
                                          int depth) {
    bool dict = v->kind == JV_DICT;
    size_t n = dict ? v->u.d->n : v->u.l->n;
    OX_TRY(js_put(b, dict ? "(\"{\" " : "(\"[\" "));
    OX_TRY(js_put_prim(c, b, JS_SPACE));
    for (size_t i = 0; i < n; i++) {
        OX_TRY(js_put(b, i ? " \",\" space " : " "));
        if (dict) {
            const struct jv *k = &v->u.d->keys[i];
            if (k->kind != JV_STR)
                return js_fail("object key is not a string");
            OX_TRY(js_put_json_str(b, k->u.s->p, k->u.s->len, true));
            OX_TRY(js_put(b, " space \":\" space "));
        }
        OX_TRY(js_put_const(c, b, dict ? &v->u.d->vals[i] : &v->u.l->items[i], depth + 1));
        OX_TRY(js_put(b, " space"));
    }
    return js_put(b, dict ? " \"}\")" : " \"]\")");
}

enum ox_status js_put_const(struct jsc *c, struct jbuf *b, const struct jv *v, int depth) {
    if (depth > JS_MAX_DEPTH)
        return js_fail("enum/const value nested deeper than %d levels", JS_MAX_DEPTH);
    switch (v->kind) {
    case JV_NONE: return js_put(b, "\"null\"");
    case JV_BOOL: return js_put(b, v->u.b ? "\"true\"" : "\"false\"");
    case JV_INT:
    case JV_FLOAT: return put_number(b, v);
    case JV_STR: return js_put_json_str(b, v->u.s->p, v->u.s->len, true);
    case JV_LIST:
    case JV_DICT: return put_const_container(c, b, v, depth);
    default: return js_fail("unexpected value in enum/const");
    }
}

static enum ox_status visit_enum(struct jsc *c, const struct jv *e, struct jbuf *out) {
    if (e->kind != JV_LIST || e->u.l->n == 0)
        return js_fail("enum must be a non-empty array");
    OX_TRY(js_put(out, "(("));
    for (size_t i = 0; i < e->u.l->n; i++) {
        OX_TRY(js_put(out, i ? " | " : ""));
        OX_TRY(js_put_const(c, out, &e->u.l->items[i], 0));
    }
    OX_TRY(js_put(out, ") "));
    OX_TRY(js_put_prim(c, out, JS_SPACE));
    return js_put(out, ")");
}

/* anyOf / oneOf: the alternatives (oneOf's exclusivity is not enforced, as in llama.cpp). */
static enum ox_status visit_union(struct jsc *c, const struct jv *alts, const char *hint, int depth,
                                  struct jbuf *out) {
    if (alts->kind != JV_LIST || alts->u.l->n == 0)
        return js_fail("anyOf/oneOf must be a non-empty array");
    OX_TRY(js_put(out, "("));
    for (size_t i = 0; i < alts->u.l->n; i++) {
        char sub[96];
        snprintf(sub, sizeof sub, "%.60s-%zu", hint, i);
        OX_TRY(js_put(out, i ? " | " : ""));
        OX_TRY(js_visit(c, &alts->u.l->items[i], sub, depth + 1, out));
    }
    return js_put(out, ")");
}

/* Each type: a built-in rule, or a visit that reads the type's keywords. */
static const struct {
    const char *name;
    js_visit_fn *visit;
    enum js_prim prim;
} types[] = {
    {"string", js_visit_string, 0}, {"integer", js_visit_integer, 0}, {"number", NULL, JS_NUMBER},
    {"boolean", NULL, JS_BOOLEAN},  {"null", NULL, JS_NULL},          {"array", js_visit_array, 0},
    {"object", js_visit_object, 0},
};

/* The schema with its type fixed to t; t NULL: guessed from the keywords, else any value. */
static enum ox_status visit_typed(struct jsc *c, const struct jdict *s, const char *t,
                                  const char *hint, int depth, struct jbuf *out) {
    if (!t) {
        if (js_get(s, "properties") || js_get(s, "additionalProperties") || js_get(s, "required"))
            t = "object";
        else if (js_get(s, "items") || js_get(s, "prefixItems") || js_get(s, "minItems") ||
                 js_get(s, "maxItems"))
            t = "array";
        else if (js_get(s, "minLength") || js_get(s, "maxLength") || js_get(s, "pattern") ||
                 js_get(s, "format"))
            t = "string";
        else
            return js_put_prim(c, out, JS_VALUE);
    }
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        if (strcmp(t, types[i].name))
            continue;
        return types[i].visit ? types[i].visit(c, s, hint, depth, out)
                              : js_put_prim(c, out, types[i].prim);
    }
    return js_fail("unknown type '%.100s'", t);
}

static enum ox_status visit_type_list(struct jsc *c, const struct jdict *s, const struct jv *type,
                                      const char *hint, int depth, struct jbuf *out) {
    if (type->kind == JV_STR)
        return visit_typed(c, s, type->u.s->p, hint, depth, out);
    if (type->kind != JV_LIST || type->u.l->n == 0)
        return js_fail("type must be a string or a non-empty array of strings");
    OX_TRY(js_put(out, "("));
    for (size_t i = 0; i < type->u.l->n; i++) {
        const struct jv *t = &type->u.l->items[i];
        if (t->kind != JV_STR)
            return js_fail("type must be a string or a non-empty array of strings");
        char sub[96];
        snprintf(sub, sizeof sub, "%.60s-%.20s", hint, t->u.s->p);
        OX_TRY(js_put(out, i ? " | " : ""));
        OX_TRY(visit_typed(c, s, t->u.s->p, sub, depth, out));
    }
    return js_put(out, ")");
}

enum ox_status js_visit(struct jsc *c, const struct jv *schema, const char *hint, int depth,
                        struct jbuf *out) {
    if (depth > JS_MAX_DEPTH)
        return js_fail("schema nested deeper than %d levels", JS_MAX_DEPTH);
    if (schema->kind == JV_BOOL) {
        if (!schema->u.b)
            return js_fail("schema 'false' matches nothing");
        return js_put_prim(c, out, JS_VALUE);
    }
    if (schema->kind != JV_DICT)
        return js_fail("a schema must be an object or a boolean");
    const struct jdict *s = schema->u.d;
    const struct jv *v;
    if ((v = js_get(s, "$ref")))
        return visit_ref(c, v, depth, out);
    if ((v = js_get(s, "anyOf")) || (v = js_get(s, "oneOf")))
        return visit_union(c, v, hint, depth, out);
    if (js_get(s, "allOf"))
        return js_visit_all_of(c, s, hint, depth, out);
    if ((v = js_get(s, "const"))) {
        OX_TRY(js_put(out, "("));
        OX_TRY(js_put_const(c, out, v, 0));
        OX_TRY(js_put(out, " "));
        OX_TRY(js_put_prim(c, out, JS_SPACE));
        return js_put(out, ")");
    }
    if ((v = js_get(s, "enum")))
        return visit_enum(c, v, out);
    if ((v = js_get(s, "type")))
        return visit_type_list(c, s, v, hint, depth, out);
    return visit_typed(c, s, NULL, hint, depth, out);
}

static void jsc_free(struct jsc *c) {
    for (size_t i = 0; i < c->n_rules; i++)
        free(c->rules[i].name), free(c->rules[i].body);
    free(c->rules);
    strmap_free(&c->names);
    strmap_free(&c->refs);
    jarena_free(c->a);
}

/* The generated grammar must parse; a refusal (left recursion through $refs, too many
 * elements after expanding repetitions) becomes a schema error. */
static enum ox_status check_grammar(const struct jbuf *g) {
    struct gram *parsed = NULL;
    struct gram_state *s = NULL;
    enum ox_status st = gram_parse(g->p, g->len, &parsed);
    if (st == OX_OK)
        st = gram_state_create(parsed, &s);
    bool empty = st == OX_OK && gram_state_is_dead(s) && !gram_state_can_end(s);
    gram_state_free(s);
    gram_free(parsed);
    if (empty)
        return js_fail("the schema matches no value (a $ref that only refers to itself?)");
    if (st == OX_OK)
        return OX_OK;
    char why[400];
    snprintf(why, sizeof why, "%s", ox_last_error());
    return js_fail("the schema gives a grammar that cannot be used: %s", why);
}

enum ox_status ox_json_schema_to_grammar(const char *schema_json, size_t len, char **out,
                                         size_t *out_len) {
    if (out)
        *out = NULL;
    if (out_len)
        *out_len = 0;
    if (!schema_json || !out)
        return ox_fail(OX_ERR_INVALID_ARG, "ox_json_schema_to_grammar: NULL argument");
    struct jsc c = {.a = jarena_new(64 * len + (1u << 20))}; /* a parsed value is ~20x its text */
    if (!c.a)
        return ox_fail(OX_ERR_OOM, "json schema: out of memory");
    struct jbuf root = {0}, text = {0};
    enum ox_status st = jjson_parse(c.a, schema_json, len, &c.root);
    if (st != OX_OK) {
        char why[400];
        snprintf(why, sizeof why, "%s", ox_last_error());
        st = js_fail("not valid JSON: %s", why);
    }
    if (st == OX_OK)
        st = js_visit(&c, &c.root, "root", 0, &root);
    if (st == OX_OK)
        st = js_write(&c, &root, &text);
    if (st == OX_OK)
        st = check_grammar(&text);
    free(root.p);
    jsc_free(&c);
    if (st != OX_OK) {
        free(text.p);
        return st;
    }
    *out = text.p;
    if (out_len)
        *out_len = text.len;
    return OX_OK;
}
