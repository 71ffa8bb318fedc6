/* builtins_int.h: the call frame shared by global functions, methods, filters and tests. */
#ifndef OX_CHAT_BUILTINS_INT_H
#define OX_CHAT_BUILTINS_INT_H

#include "chat/jinja_int.h"

struct jcall {
    const char *name;
    struct jv *args;
    int nargs;
    const char **kwn;
    struct jv *kwv;
    int nkw;
};

struct jv jarg(struct jcall *a, int i, const char *kw);
const char *jarg_str(struct jctx *c, struct jcall *a, int i, const char *kw, const char *dflt);
struct jv jstr_method(struct jctx *c, struct jv s, struct jcall *a);
struct jv jdict_method(struct jctx *c, struct jv d, struct jcall *a);
struct jv jlist_method(struct jctx *c, struct jv l, struct jcall *a);
struct jv jdict_items(struct jctx *c, struct jv d);
/* Python's str.strip family: which = 1 left, 2 right, 3 both; chars NULL = whitespace. */
struct jv jstrip(struct jctx *c, struct jv s, const char *chars, int which);
struct jv jreplace(struct jctx *c, struct jv s, const char *old, const char *rep, int64_t count);
struct jv jsplit(struct jctx *c, struct jv s, const char *sep, int64_t maxsplit);
struct jv jcase(struct jctx *c, struct jv s, int mode); /* 0 lower, 1 upper, 2 capitalize, 3 Jinja's
                                                           title, 4 Python's title, 5 swapcase */
/* str.center(width, fill) (filters_shape.c) */
struct jv jcenter(struct jctx *c, struct jv s, int64_t width, const char *fill);
/* filters_shape.c: center, truncate, batch, slice, format, pprint, attr; *found false (and
 * nothing done) for any other name. */
struct jv jfilter_shape(struct jctx *c, const char *n, struct jv v, struct jcall *a, bool *found);

#endif
