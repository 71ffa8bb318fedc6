/* json.h: the value type chat templates and JSON schemas share, and JSON text to and from it.
 * The type is Python's (Jinja's values are), with its arena and text buffer; below chat/ and
 * grammar/, which both read JSON with it. */
#ifndef OX_JSON_JSON_H
#define OX_JSON_JSON_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/status.h"

/* Values live in an arena owned by whoever made them (a render, a JSON parse); they are never
 * freed one by one, which keeps the evaluator free of reference counting. */
struct jarena;

/* JV_UNDEF (an undefined name) and JV_FUNC (a macro or builtin) are Jinja's: JSON text never
 * makes them, but one value type lets templates and schemas share the parser and printer. */
enum jv_kind { JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT, JV_FUNC };

/* Defined by the template engine (chat/jinja_int.h); here only compared and printed. */
struct jfunc;

struct jv {
    enum jv_kind kind;
    union {
        int b;
        int64_t i;
        double f;
        struct jstr *s;
        struct jlist *l;
        struct jdict *d;
        struct jfunc *fn;
    } u;
};

struct jstr {
    size_t len;
    char *p;     /* NUL-terminated for convenience */
    bool markup; /* Jinja's Markup (|e, |safe): HTML-safe text, which escapes what + adds to it */
};
/* is_tuple only changes how it prints: (a, b). is_gen marks the results of map/select/unique:
 * Python generators, which tojson, length and indexing refuse (templates must apply |list first, as
 * with Jinja). */
struct jlist {
    size_t n, cap;
    struct jv *items;
    int is_gen, is_tuple;
    int is_group; /* a (grouper, list) pair of |groupby: those two names read its items */
};
/* Insertion-ordered; linear lookup is fine for chat-sized dicts. */
struct jdict {
    size_t n, cap;
    struct jv *keys, *vals;
    struct jfunc *is_call; /* Jinja's recursive loop object: loop(items) calls this */
    int is_namespace;
};

/* Containers can hold themselves (ns.a = ns), so the recursive walks stop at this depth. */
#define JV_MAX_NEST 256

struct jarena *jarena_new(size_t cap_bytes);
void jarena_free(struct jarena *a);
/* Returns NULL past the arena's cap (the caller turns that into an error). */
void *jarena_alloc(struct jarena *a, size_t n);
/* Where to longjmp (with value 2) when the cap is hit; NULL makes jarena_alloc return NULL. */
void jarena_on_oom(struct jarena *a, jmp_buf *jb);

/* Growable byte buffer (malloc'd), used for output and string building. A put past limit
 * (when non-zero) fails, so printing a huge shared structure cannot exhaust memory. */
struct jbuf {
    char *p;
    size_t len, cap, limit;
};

int jbuf_put(struct jbuf *b, const char *s, size_t n);
static inline int jbuf_puts(struct jbuf *b, const char *s) {
    return jbuf_put(b, s, strlen(s));
}

/* Values (value.c); the allocating ones return JV_UNDEF when the arena is full. */
struct jv jv_undef(void);
struct jv jv_none(void);
struct jv jv_bool(int b);
struct jv jv_int(int64_t i);
struct jv jv_float(double f);
struct jv jv_str(struct jarena *a, const char *s, size_t n);
struct jv jv_cstr(struct jarena *a, const char *s);
struct jv jv_list(struct jarena *a);
struct jv jv_dict(struct jarena *a);
int jv_list_push(struct jarena *a, struct jlist *l, struct jv v);
int jv_dict_set(struct jarena *a, struct jdict *d, struct jv k, struct jv v);
struct jv *jv_dict_get(const struct jdict *d, struct jv k);
struct jv *jv_dict_gets(const struct jdict *d, const char *k);
/* Python's ==, and its ordering where it has one (*ok = 0 where Python raises). */
int jv_equal(struct jv a, struct jv b);
int jv_compare(struct jv a, struct jv b, int *ok); /* <0, 0, >0 */
/* Python's repr of a float: the shortest digits that read back exactly. */
int jv_fmt_float(struct jbuf *b, double f);

/* Parse JSON text into a value allocated in a; errors name the byte offset. */
enum ox_status jjson_parse(struct jarena *a, const char *text, size_t len, struct jv *out);
/* JSON text as Python's json.dumps writes it; indent < 0 means compact-with-spaces (its default).
 * Fails (non-zero) on values json.dumps refuses (undefined, generators) or nested too deep. */
/* JSON_COMPACT: Python's separators (',', ':') (no spaces after either) */
enum { JSON_SORT_KEYS = 1, JSON_ASCII = 2, JSON_COMPACT = 4 };
int jv_to_json(struct jbuf *b, struct jv v, int indent, int level, int flags);

#endif
