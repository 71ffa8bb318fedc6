/* js_emit.c: the converter's GBNF text: bounded appends, escaped code points and literals,
 * named rules and the built-in rules (llama.cpp's, so grammars read the same). */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "grammar/json_schema.h"

enum ox_status js_fail(const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ox_fail(OX_ERR_FORMAT, "json schema: %s", msg);
}

enum ox_status js_putn(struct jbuf *b, const char *s, size_t n) {
    b->limit = JS_MAX_OUTPUT;
    if (jbuf_put(b, s, n))
        return js_fail("the grammar would exceed %u bytes", JS_MAX_OUTPUT);
    return OX_OK;
}

enum ox_status js_put(struct jbuf *b, const char *s) {
    return js_putn(b, s, strlen(s));
}

enum ox_status js_cat(struct jbuf *b, ...) {
    va_list ap;
    va_start(ap, b);
    enum ox_status st = OX_OK;
    for (const char *s; st == OX_OK && (s = va_arg(ap, const char *));)
        st = js_put(b, s);
    va_end(ap);
    return st;
}

enum ox_status js_put_cp(struct jbuf *b, uint32_t cp) {
    char tmp[16];
    bool alnum = (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
    if (alnum)
        snprintf(tmp, sizeof tmp, "%c", (char)cp);
    else if (cp < 0x100)
        snprintf(tmp, sizeof tmp, "\\x%02X", (unsigned)cp);
    else if (cp < 0x10000)
        snprintf(tmp, sizeof tmp, "\\u%04X", (unsigned)cp);
    else
        snprintf(tmp, sizeof tmp, "\\U%08X", (unsigned)cp);
    return js_put(b, tmp);
}

/* How a byte of a string value is written in JSON, as GBNF literal text; bytes >= 0x80 (UTF-8)
 * go as they are. */
static enum ox_status put_json_byte(struct jbuf *b, unsigned char ch) {
    static const char names[] = "\bb\ff\nn\rr\tt";
    if (ch == '"')
        return js_put(b, "\\\\\\\"");
    if (ch == '\\')
        return js_put(b, "\\\\\\\\");
    if (ch < 0x20) {
        const char *e = memchr(names, ch, sizeof names - 1);
        char tmp[16];
        if (e)
            snprintf(tmp, sizeof tmp, "\\\\%c", e[1]);
        else
            snprintf(tmp, sizeof tmp, "\\\\u00%02x", ch);
        return js_put(b, tmp);
    }
    if (ch >= 0x80)
        return js_putn(b, (const char *)&ch, 1);
    return js_put_cp(b, ch);
}

enum ox_status js_put_json_str(struct jbuf *b, const char *s, size_t n, bool quoted) {
    OX_TRY(js_put(b, quoted ? "\"\\\"" : "\""));
    for (size_t i = 0; i < n; i++)
        OX_TRY(put_json_byte(b, (unsigned char)s[i]));
    return js_put(b, quoted ? "\\\"\"" : "\"");
}

/* Built-in rules: name, body, and the rules the body uses. */
static const struct {
    const char *name, *body;
    uint32_t deps;
} prims[JS_PRIM_COUNT] = {
    [JS_SPACE] = {"space", "| \" \" | \"\\n\" [ \\t]{0,20}", 0},
    [JS_CHAR] = {"char", "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})",
                 0},
    [JS_STRING] = {"string", "\"\\\"\" char* \"\\\"\" space", 1u << JS_CHAR | 1u << JS_SPACE},
    [JS_INTEGRAL] = {"integral-part", "[0] | [1-9] [0-9]{0,15}", 0},
    [JS_DECIMAL] = {"decimal-part", "[0-9]{1,16}", 0},
    [JS_NUMBER] = {"number",
                   "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? decimal-part)? space",
                   1u << JS_INTEGRAL | 1u << JS_DECIMAL | 1u << JS_SPACE},
    [JS_INTEGER] = {"integer", "(\"-\"? integral-part) space", 1u << JS_INTEGRAL | 1u << JS_SPACE},
    [JS_BOOLEAN] = {"boolean", "(\"true\" | \"false\") space", 1u << JS_SPACE},
    [JS_NULL] = {"null", "\"null\" space", 1u << JS_SPACE},
    [JS_VALUE] = {"value", "object | array | string | number | boolean | null",
                  1u << JS_OBJECT | 1u << JS_ARRAY | 1u << JS_STRING | 1u << JS_NUMBER |
                      1u << JS_BOOLEAN | 1u << JS_NULL},
    [JS_OBJECT] = {"object",
                   "\"{\" space ( string \":\" space value (\",\" space string \":\" space value)* "
                   ")? \"}\" space",
                   1u << JS_STRING | 1u << JS_VALUE | 1u << JS_SPACE},
    [JS_ARRAY] = {"array", "\"[\" space ( value (\",\" space value)* )? \"]\" space",
                  1u << JS_VALUE | 1u << JS_SPACE},
    [JS_UUID] = {"uuid",
                 "\"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
                 "[0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12} \"\\\"\" space",
                 1u << JS_SPACE},
    [JS_DATE] = {"date",
                 "[0-9]{4} \"-\" (\"0\" [1-9] | \"1\" [0-2]) \"-\" (\"0\" [1-9] | [1-2] [0-9] | "
                 "\"3\" [0-1])",
                 0},
    [JS_TIME] = {"time",
                 "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{3})? "
                 "(\"Z\" | (\"+\" | \"-\") ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])",
                 0},
    [JS_DATETIME] = {"date-time", "date \"T\" time", 1u << JS_DATE | 1u << JS_TIME},
};

void js_use_prim(struct jsc *c, enum js_prim p) {
    if (c->prims & (1u << p))
        return;
    c->prims |= 1u << p;
    for (int d = 0; d < JS_PRIM_COUNT; d++)
        if (prims[p].deps & (1u << d))
            js_use_prim(c, (enum js_prim)d);
}

enum ox_status js_put_prim(struct jsc *c, struct jbuf *b, enum js_prim p) {
    js_use_prim(c, p);
    return js_put(b, prims[p].name);
}

/* A rule name from a hint: [a-zA-Z0-9-], at most 48 characters, unique, never a built-in's. */
static enum ox_status unique_name(struct jsc *c, const char *hint, char **out) {
    char base[64];
    size_t n = 0;
    for (const char *p = hint; *p && n < 48; p++) {
        char ch = *p;
        bool ok = (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
        base[n++] = ok ? ch : '-';
    }
    if (!n)
        base[n++] = 'r';
    base[n] = 0;
    char name[80];
    snprintf(name, sizeof name, "%s", base);
    for (unsigned i = 1;; i++) {
        bool taken = strmap_find(&c->names, name, strlen(name)) >= 0 || !strcmp(name, "root");
        for (int p = 0; p < JS_PRIM_COUNT && !taken; p++)
            taken = !strcmp(name, prims[p].name);
        if (!taken)
            break;
        snprintf(name, sizeof name, "%s-%u", base, i);
    }
    if (!(*out = strdup(name)))
        return ox_fail(OX_ERR_OOM, "json schema: out of memory");
    return OX_OK;
}

enum ox_status js_add_rule(struct jsc *c, const char *hint, struct jbuf *body, struct jbuf *out,
                           uint32_t *id) {
    if (c->n_rules >= JS_MAX_RULES)
        return js_fail("more than %d rules", JS_MAX_RULES);
    if (c->n_rules == c->cap_rules) {
        size_t cap = c->cap_rules ? 2 * c->cap_rules : 64;
        struct js_rule *r = realloc(c->rules, cap * sizeof *r);
        if (!r)
            return ox_fail(OX_ERR_OOM, "json schema: out of memory");
        c->rules = r, c->cap_rules = cap;
    }
    struct js_rule *r = &c->rules[c->n_rules];
    *r = (struct js_rule){0};
    OX_TRY(unique_name(c, hint, &r->name));
    enum ox_status st = strmap_put(&c->names, r->name, strlen(r->name), (int64_t)c->n_rules);
    if (st != OX_OK) {
        free(r->name);
        return st;
    }
    if (id)
        *id = (uint32_t)c->n_rules;
    c->n_rules++;
    if (body)
        js_set_rule(c, (uint32_t)(c->n_rules - 1), body);
    return out ? js_put(out, r->name) : OX_OK;
}

void js_set_rule(struct jsc *c, uint32_t id, struct jbuf *body) {
    c->rules[id].body = body->p ? body->p : strdup("");
    c->total += body->len;
    *body = (struct jbuf){0};
}

enum ox_status js_end_rule(struct jsc *c, enum ox_status st, struct jbuf *body, const char *close,
                           const char *hint, struct jbuf *out) {
    if (st == OX_OK)
        st = js_put(body, close);
    if (st == OX_OK)
        st = js_add_rule(c, hint, body, out, NULL);
    free(body->p);
    *body = (struct jbuf){0};
    return st;
}

enum ox_status js_write(struct jsc *c, const struct jbuf *root, struct jbuf *out) {
    OX_TRY(js_put(out, "root ::= "));
    OX_TRY(js_putn(out, root->p ? root->p : "", root->len));
    for (size_t i = 0; i < c->n_rules; i++) {
        OX_TRY(js_put(out, "\n"));
        OX_TRY(js_put(out, c->rules[i].name));
        OX_TRY(js_put(out, " ::= "));
        OX_TRY(js_put(out, c->rules[i].body ? c->rules[i].body : ""));
    }
    for (int p = 0; p < JS_PRIM_COUNT; p++) {
        if (!(c->prims & (1u << p)))
            continue;
        OX_TRY(js_put(out, "\n"));
        OX_TRY(js_put(out, prims[p].name));
        OX_TRY(js_put(out, " ::= "));
        OX_TRY(js_put(out, prims[p].body));
    }
    return js_put(out, "\n");
}
