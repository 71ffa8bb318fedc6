/* json_schema.h: internals of the JSON Schema -> GBNF converter (js_*.c); the entry point is
 * ox_json_schema_to_grammar in oxidize.h. Schemas are read with json/'s parser into its values. */
#ifndef OX_GRAMMAR_JSON_SCHEMA_H
#define OX_GRAMMAR_JSON_SCHEMA_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "core/strmap.h"
#include "json/json.h"

/* Bounds that keep any schema, however hostile, to a small grammar built in little time. */
#define JS_MAX_DEPTH  64         /* nested schemas, counting chains of distinct $refs */
#define JS_MAX_RULES  20000      /* generated rules */
#define JS_MAX_OUTPUT (8u << 20) /* bytes of GBNF text */
#define JS_MAX_BOUND  1e18       /* largest |minimum| / |maximum| of an integer */
#define JS_INT_DIGITS 16         /* digits of an integer with no upper bound, as llama.cpp */

/* The built-in rules, emitted only when used (with what they use). */
enum js_prim {
    JS_SPACE,
    JS_CHAR,
    JS_STRING,
    JS_INTEGRAL,
    JS_DECIMAL,
    JS_NUMBER,
    JS_INTEGER,
    JS_BOOLEAN,
    JS_NULL,
    JS_VALUE,
    JS_OBJECT,
    JS_ARRAY,
    JS_UUID,
    JS_DATE,
    JS_TIME,
    JS_DATETIME,
    JS_PRIM_COUNT
};

struct js_rule {
    char *name, *body; /* malloc'd; body NULL while a $ref's rule is being built */
};

struct jsc {
    struct jarena *a;
    struct jv root;
    struct js_rule *rules;
    size_t n_rules, cap_rules, total; /* total: bytes of rule text so far */
    struct strmap names;              /* rule name -> rule id */
    struct strmap refs;               /* $ref string (in the arena) -> rule id */
    uint32_t prims;                   /* bit per enum js_prim */
};

/* Fail with "json schema: ..." (OX_ERR_FORMAT). */
enum ox_status js_fail(const char *fmt, ...) OX_PRINTF(1, 2);
/* Append text; fails past JS_MAX_OUTPUT or out of memory. */
enum ox_status js_put(struct jbuf *b, const char *s);
enum ox_status js_putn(struct jbuf *b, const char *s, size_t n);
/* Append each string, up to a NULL. */
enum ox_status js_cat(struct jbuf *b, ...) __attribute__((sentinel));
/* One code point as it is written inside a GBNF literal or class (escaped unless alphanumeric). */
enum ox_status js_put_cp(struct jbuf *b, uint32_t cp);
/* A GBNF literal matching the JSON encoding of the string s (with its quotes when quoted). */
enum ox_status js_put_json_str(struct jbuf *b, const char *s, size_t n, bool quoted);
/* Mark a built-in rule used (with those it uses); js_put_prim also appends its name. */
void js_use_prim(struct jsc *c, enum js_prim p);
enum ox_status js_put_prim(struct jsc *c, struct jbuf *b, enum js_prim p);
/* Make a rule named after hint (made unique) with the body (taken over; NULL = fill in later
 * with js_set_rule) and append its name to out, if out is not NULL. */
enum ox_status js_add_rule(struct jsc *c, const char *hint, struct jbuf *body, struct jbuf *out,
                           uint32_t *id);
void js_set_rule(struct jsc *c, uint32_t id, struct jbuf *body);
/* Finish a rule begun in body (st: how the building went): append close, add the rule named
 * after hint with its name appended to out, and free what is left of body. */
enum ox_status js_end_rule(struct jsc *c, enum ox_status st, struct jbuf *body, const char *close,
                           const char *hint, struct jbuf *out);
/* The whole grammar: "root ::= " root, then the generated rules, then the built-ins used. */
enum ox_status js_write(struct jsc *c, const struct jbuf *root, struct jbuf *out);

/* Append a GBNF expression (one symbol: a name, a literal or a parenthesized group) matching
 * the instances of schema s; hint names the rules made for it. */
enum ox_status js_visit(struct jsc *c, const struct jv *s, const char *hint, int depth,
                        struct jbuf *out);
/* The parts by type (js_types.c, js_object.c): s is a dict, the rest as for js_visit. */
typedef enum ox_status js_visit_fn(struct jsc *c, const struct jdict *s, const char *hint,
                                   int depth, struct jbuf *out);
js_visit_fn js_visit_string, js_visit_integer, js_visit_array, js_visit_object, js_visit_all_of;
/* The key of an additional property: a JSON string (and space) that is none of the n keys. */
enum ox_status js_other_key(struct jsc *c, const struct jstr *const *keys, size_t n,
                            const char *hint, struct jbuf *out);
/* A literal grammar for a JSON value (enum / const), with optional space between tokens. */
enum ox_status js_put_const(struct jsc *c, struct jbuf *b, const struct jv *v, int depth);
/* Resolve a local $ref ("#", "#/$defs/X", any JSON pointer into the root). */
enum ox_status js_resolve(struct jsc *c, const char *ref, const struct jv **out);

/* Canonical decimal integers in [lo, hi] (either side open when has_ is false), as one group. */
enum ox_status js_int_range(struct jbuf *b, bool has_lo, int64_t lo, bool has_hi, int64_t hi);
/* The body of a string matching an ECMA-262 regex (JSON-escaped as needed), as one group. */
enum ox_status js_regex(struct jsc *c, const char *pat, size_t len, struct jbuf *out);

/* Schema lookups: a key's value in a dict, or NULL. */
static inline const struct jv *js_get(const struct jdict *d, const char *key) {
    return jv_dict_gets(d, key);
}

#endif
