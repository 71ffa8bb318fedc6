/* js_keys.c: the keys of additional properties: any JSON string but the declared property
 * names, from a trie of the names with one rule per node (as llama.cpp's _not_strings), so an
 * extra pair cannot repeat a declared key. Names are matched as written plainly; a name with a
 * quote, backslash or control character is not excluded, nor a name spelled with \u escapes. */
#include <stdio.h>
#include <stdlib.h>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"

struct tnode {
    uint32_t cp;
    int child, next; /* first child, next sibling; -1: none */
    bool end;        /* a name ends here */
};

struct trie {
    struct tnode *v;
    size_t n, cap;
};

static int trie_child(struct trie *t, int at, uint32_t cp) {
    for (int k = t->v[at].child; k >= 0; k = t->v[k].next)
        if (t->v[k].cp == cp)
            return k;
    if (t->n == t->cap) {
        size_t cap = t->cap * 2;
        struct tnode *v = realloc(t->v, cap * sizeof *v);
        if (!v)
            return -1;
        t->v = v, t->cap = cap;
    }
    t->v[t->n] = (struct tnode){cp, -1, t->v[at].child, false};
    t->v[at].child = (int)t->n;
    return (int)t->n++;
}

/* Add a name unless it has characters JSON escapes (or bad UTF-8); false: out of memory. */
static bool trie_add(struct trie *t, const struct jstr *key) {
    struct gram_u8 d = {0};
    uint32_t cp;
    for (size_t i = 0; i < key->len; i++) { /* check first: nothing is added for a skipped name */
        int got = gram_u8_feed(&d, (uint8_t)key->p[i], &cp);
        if (got < 0 || (got == 1 && (cp < 0x20 || cp == '"' || cp == '\\')))
            return true;
    }
    if (d.need)
        return true;
    int at = 0;
    for (size_t i = 0; i < key->len && at >= 0; i++)
        if (gram_u8_feed(&d, (uint8_t)key->p[i], &cp) == 1)
            at = trie_child(t, at, cp);
    if (at >= 0)
        t->v[at].end = true;
    return at >= 0;
}

/* Node rule: a character no name continues with, then anything; or a child's character and
 * the child's rule; or the closing quote where no name ends. */
static enum ox_status node_body(struct jsc *c, const struct trie *t, const uint32_t *ids, int i,
                                struct jbuf *b) {
    OX_TRY(js_put(b, "([^\"\\\\\\x00-\\x1F"));
    for (int k = t->v[i].child; k >= 0; k = t->v[k].next)
        OX_TRY(js_put_cp(b, t->v[k].cp));
    OX_TRY(js_put(b, "] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})) "));
    OX_TRY(js_put_prim(c, b, JS_CHAR));
    OX_TRY(js_put(b, "* \"\\\"\""));
    for (int k = t->v[i].child; k >= 0; k = t->v[k].next) {
        OX_TRY(js_put(b, " | \""));
        OX_TRY(js_put_cp(b, t->v[k].cp));
        OX_TRY(js_put(b, "\" "));
        OX_TRY(js_put(b, c->rules[ids[k]].name));
    }
    return t->v[i].end ? OX_OK : js_put(b, " | \"\\\"\"");
}

enum ox_status js_other_key(struct jsc *c, const struct jstr *const *keys, size_t n,
                            const char *hint, struct jbuf *out) {
    struct trie t = {malloc(64 * sizeof *t.v), 1, 64};
    uint32_t *ids = NULL;
    enum ox_status st = t.v ? OX_OK : ox_fail(OX_ERR_OOM, "json schema: out of memory");
    if (st == OX_OK)
        t.v[0] = (struct tnode){0, -1, -1, false};
    for (size_t i = 0; i < n && st == OX_OK; i++)
        if (!trie_add(&t, keys[i]))
            st = ox_fail(OX_ERR_OOM, "json schema: out of memory");
    if (st == OX_OK && !(ids = malloc(t.n * sizeof *ids)))
        st = ox_fail(OX_ERR_OOM, "json schema: out of memory");
    char name[96];
    snprintf(name, sizeof name, "%.60s-other-key", hint);
    for (size_t i = 0; i < t.n && st == OX_OK; i++)
        st = js_add_rule(c, name, NULL, NULL, &ids[i]);
    for (size_t i = 0; i < t.n && st == OX_OK; i++) {
        struct jbuf body = {0};
        st = node_body(c, &t, ids, (int)i, &body);
        if (st == OX_OK)
            js_set_rule(c, ids[i], &body);
        free(body.p);
    }
    if (st == OX_OK) {
        st = js_put(out, "\"\\\"\" ");
        if (st == OX_OK)
            st = js_put(out, c->rules[ids[0]].name);
        if (st == OX_OK)
            st = js_put(out, " space");
    }
    free(ids);
    free(t.v);
    return st;
}
