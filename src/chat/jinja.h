/* jinja.h: a sandboxed Jinja template engine for the subset Hugging Face chat templates use. */
#ifndef OX_CHAT_JINJA_H
#define OX_CHAT_JINJA_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* Values live in an arena owned by whoever made them (a render, a JSON parse); they are never
 * freed one by one, which keeps the evaluator free of reference counting. */
struct jarena;

enum jv_kind { JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT, JV_FUNC };

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
    char *p; /* NUL-terminated for convenience */
};
/* is_tuple only changes how it prints: (a, b). is_gen marks the results of map/select/unique:
 * Python generators, which tojson, length and indexing refuse (templates must apply |list first, as
 * with Jinja). */
struct jlist {
    size_t n, cap;
    struct jv *items;
    int is_gen, is_tuple;
};
/* Insertion-ordered; linear lookup is fine for chat-sized dicts. */
struct jdict {
    size_t n, cap;
    struct jv *keys, *vals;
    int is_namespace;
};

struct jarena *jarena_new(size_t cap_bytes);
void jarena_free(struct jarena *a);
/* Returns NULL past the arena's cap (the caller turns that into an error). */
void *jarena_alloc(struct jarena *a, size_t n);
/* Where to longjmp (with value 2) when the cap is hit; NULL makes jarena_alloc return NULL. */
void jarena_on_oom(struct jarena *a, jmp_buf *jb);

/* Parse JSON text into a value allocated in a; errors name the byte offset. */
enum ox_status jjson_parse(struct jarena *a, const char *text, size_t len, struct jv *out);

/* A compiled template; independent of any render. */
struct jtemplate;

enum ox_status jinja_parse(const char *src, size_t len, struct jtemplate **out);
void jinja_free(struct jtemplate *t);

struct jinja_opts {
    size_t max_output;      /* bytes of rendered text */
    size_t max_memory;      /* arena bytes during one render */
    int max_depth;          /* nested macro calls / expression recursion */
    int64_t max_iterations; /* loop iterations over the whole render */
    int64_t now;            /* unix seconds for strftime_now(); 0 = the real clock */
};
struct jinja_opts jinja_opts_default(void);

/* Render with ctx (a JSON object as text; its keys become globals). *out is malloc'd and
 * NUL-terminated; on failure it is NULL and ox_last_error() says why (with the line). */
enum ox_status jinja_render_json(const struct jtemplate *t, const char *ctx_json, size_t ctx_len,
                                 const struct jinja_opts *opts, char **out, size_t *out_len);

#endif
