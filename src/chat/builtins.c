/* builtins.c: global functions, attribute lookup and Python-style methods on values. */
#define _POSIX_C_SOURCE 200809L /* gmtime_r */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "chat/builtins_int.h"

static const char *const globals[] = {"range",        "namespace", "raise_exception",
                                      "strftime_now", "dict",      NULL};
static const char *const str_methods[] = {
    "strip",   "lstrip",     "rstrip",     "split",   "rsplit",  "startswith", "endswith", "upper",
    "lower",   "title",      "capitalize", "replace", "find",    "rfind",      "count",    "format",
    "join",    "splitlines", "isdigit",    "isalpha", "isspace", "isalnum",    "index",    "center",
    "islower", "isupper",    "swapcase",   "zfill",   NULL};
static const char *const dict_methods[] = {"items",  "keys", "values",     "get", "pop",
                                           "update", "copy", "setdefault", NULL};
static const char *const list_methods[] = {"append", "pop",    "index", "count",
                                           "extend", "insert", "copy",  NULL};

static int in_set(const char *const *set, const char *name) {
    for (int i = 0; set[i]; i++)
        if (!strcmp(set[i], name))
            return 1;
    return 0;
}

static struct jv make_func(struct jctx *c, const char *name, int kind, struct jv bound) {
    struct jfunc *f = jarena_alloc(c->arena, sizeof *f);
    f->name = name;
    f->builtin = kind; /* 1 global function, 2 method of bound, 3 loop.cycle, 4 loop.changed,
                          5 a recursive loop's loop() */
    f->bound = bound;
    return (struct jv){.kind = JV_FUNC, .u.fn = f};
}

struct jv jglobal_builtin(struct jctx *c, const char *name) {
    for (int i = 0; globals[i]; i++)
        if (!strcmp(globals[i], name))
            return make_func(c, globals[i], 1, jv_undef());
    return jv_undef();
}

struct jv jloop_cycle(struct jctx *c, int64_t index0) {
    return make_func(c, "cycle", 3, jv_int(index0));
}

/* loop.changed(*values): true when the values differ from its last call's in this loop (state:
 * a list the loop keeps, holding that call's values). */
struct jv jloop_changed(struct jctx *c, struct jv state) {
    return make_func(c, "changed", 4, state);
}

struct jv jattr(struct jctx *c, struct jv obj, const char *name) {
    switch (obj.kind) {
    case JV_DICT:
        if (!obj.u.d->is_namespace && in_set(dict_methods, name))
            return make_func(c, name, 2, obj);
        {
            struct jv *v = jv_dict_gets(obj.u.d, name);
            return v ? *v : jv_undef();
        }
    case JV_STR: return in_set(str_methods, name) ? make_func(c, name, 2, obj) : jv_undef();
    case JV_LIST:
        if (obj.u.l->is_group && (!strcmp(name, "grouper") || !strcmp(name, "list")))
            return obj.u.l->items[name[0] == 'l'];
        return in_set(list_methods, name) ? make_func(c, name, 2, obj) : jv_undef();
    case JV_FUNC: /* a macro's name, as Jinja2's Macro.name */
        return obj.u.fn && obj.u.fn->macro && !strcmp(name, "name")
                   ? jv_cstr(c->arena, obj.u.fn->macro->name)
                   : jv_undef();
    default: return jv_undef();
    }
}

struct jv jcall_value(struct jctx *c, struct jv fn, struct jv *args, int nargs,
                      const char **kwnames, struct jv *kwvals, int nkw) {
    if (fn.u.fn->macro)
        return jcall_macro(c, fn.u.fn->macro, fn.u.fn->closure, jv_undef(), args, nargs, kwnames,
                           kwvals, nkw);
    return jcall_builtin(c, fn.u.fn, args, nargs, kwnames, kwvals, nkw);
}

/* Positional argument i, else keyword kw, else undefined. */
struct jv jarg(struct jcall *a, int i, const char *kw) {
    if (i >= 0 && i < a->nargs)
        return a->args[i];
    for (int k = 0; kw && k < a->nkw; k++)
        if (!strcmp(a->kwn[k], kw))
            return a->kwv[k];
    return jv_undef();
}

const char *jarg_str(struct jctx *c, struct jcall *a, int i, const char *kw, const char *dflt) {
    struct jv v = jarg(a, i, kw);
    if (v.kind == JV_UNDEF || v.kind == JV_NONE)
        return dflt;
    if (v.kind != JV_STR)
        jfail(c, "%s: expected a string argument, got %s", a->name, jv_kind_name(v.kind));
    return v.u.s->p;
}

static struct jv fn_range(struct jctx *c, struct jcall *a) {
    int64_t v[3] = {0, 0, 1};
    if (a->nargs < 1 || a->nargs > 3)
        jfail(c, "range expects 1 to 3 arguments");
    for (int i = 0; i < a->nargs; i++) {
        if (a->args[i].kind != JV_INT)
            jfail(c, "range: arguments must be integers");
    }
    if (a->nargs == 1)
        v[1] = a->args[0].u.i;
    else
        for (int i = 0; i < a->nargs; i++)
            v[i] = a->args[i].u.i;
    if (v[2] == 0)
        jfail(c, "range: step must not be zero");
    struct jv l = jv_list(c->arena);
    for (int64_t i = v[0]; v[2] > 0 ? i < v[1] : i > v[1]; i += v[2]) {
        if (++c->iterations > c->opts->max_iterations)
            jfail(c, "range too long");
        jv_list_push(c->arena, l.u.l, jv_int(i));
    }
    return l;
}

static struct jv fn_strftime(struct jctx *c, struct jcall *a) {
    const char *fmt = jarg_str(c, a, 0, "format", "");
    time_t t = c->opts->now ? (time_t)c->opts->now : time(NULL);
    struct tm tm;
    char out[256];
    gmtime_r(&t, &tm);
    size_t n = strftime(out, sizeof out, fmt, &tm);
    return jv_str(c->arena, out, n);
}

static struct jv call_global(struct jctx *c, struct jcall *a) {
    const char *n = a->name;
    if (!strcmp(n, "range"))
        return fn_range(c, a);
    if (!strcmp(n, "namespace") || !strcmp(n, "dict")) {
        struct jv d = jv_dict(c->arena);
        d.u.d->is_namespace = n[0] == 'n';
        for (int i = 0; i < a->nargs; i++) {
            if (a->args[i].kind != JV_DICT)
                jfail(c, "%s: positional argument must be a mapping, not %s", n,
                      jv_kind_name(a->args[i].kind));
            for (size_t k = 0; k < a->args[i].u.d->n; k++)
                jv_dict_set(c->arena, d.u.d, a->args[i].u.d->keys[k], a->args[i].u.d->vals[k]);
        }
        for (int k = 0; k < a->nkw; k++)
            jv_dict_set(c->arena, d.u.d, jv_cstr(c->arena, a->kwn[k]), a->kwv[k]);
        return d;
    }
    if (!strcmp(n, "raise_exception")) {
        struct jv m = jstr_of(c, jarg(a, 0, "message"));
        c->status = OX_ERR_INVALID_ARG;
        jfail(c, "raise_exception: %s", m.u.s->p);
    }
    if (!strcmp(n, "strftime_now"))
        return fn_strftime(c, a);
    jfail(c, "unknown function %s", n);
}

struct jv jcall_builtin(struct jctx *c, struct jfunc *f, struct jv *args, int nargs,
                        const char **kwnames, struct jv *kwvals, int nkw) {
    struct jcall a = {f->name, args, nargs, kwnames, kwvals, nkw};
    if (f->builtin == 1)
        return call_global(c, &a);
    if (f->builtin == 3) {
        if (nargs < 1)
            jfail(c, "loop.cycle needs at least one argument");
        return args[f->bound.u.i % nargs];
    }
    if (f->builtin == 5) {
        if (nargs != 1)
            jfail(c, "loop() takes one iterable");
        return jloop_again(c, f->loop, f->closure, args[0], f->bound.u.i + 1);
    }
    if (f->builtin == 4) {
        struct jv now = jv_list(c->arena);
        for (int i = 0; i < nargs; i++)
            jv_list_push(c->arena, now.u.l, args[i]);
        struct jlist *state = f->bound.u.l;
        if (state->n && jv_equal(state->items[0], now))
            return jv_bool(0);
        if (state->n)
            state->items[0] = now;
        else
            jv_list_push(c->arena, state, now);
        return jv_bool(1);
    }
    switch (f->bound.kind) {
    case JV_STR: return jstr_method(c, f->bound, &a);
    case JV_DICT: return jdict_method(c, f->bound, &a);
    case JV_LIST: return jlist_method(c, f->bound, &a);
    default: jfail(c, "cannot call %s", f->name);
    }
}

static struct jv dict_items(struct jctx *c, struct jdict *d) {
    struct jv l = jv_list(c->arena);
    for (size_t i = 0; i < d->n; i++) {
        struct jv pair = jv_list(c->arena);
        pair.u.l->is_tuple = 1;
        jv_list_push(c->arena, pair.u.l, d->keys[i]);
        jv_list_push(c->arena, pair.u.l, d->vals[i]);
        jv_list_push(c->arena, l.u.l, pair);
    }
    return l;
}

struct jv jdict_items(struct jctx *c, struct jv d) {
    return dict_items(c, d.u.d);
}

struct jv jdict_method(struct jctx *c, struct jv d, struct jcall *a) {
    const char *n = a->name;
    if (!strcmp(n, "items"))
        return dict_items(c, d.u.d);
    if (!strcmp(n, "keys") || !strcmp(n, "values")) {
        struct jv l = jv_list(c->arena);
        for (size_t i = 0; i < d.u.d->n; i++)
            jv_list_push(c->arena, l.u.l, n[0] == 'k' ? d.u.d->keys[i] : d.u.d->vals[i]);
        return l;
    }
    if (!strcmp(n, "get")) {
        struct jv *v = jv_dict_get(d.u.d, jarg(a, 0, "key"));
        if (v)
            return *v;
        struct jv dflt = jarg(a, 1, "default");
        return dflt.kind == JV_UNDEF ? jv_none() : dflt;
    }
    if (!strcmp(n, "copy")) {
        struct jv out = jv_dict(c->arena);
        for (size_t i = 0; i < d.u.d->n; i++)
            jv_dict_set(c->arena, out.u.d, d.u.d->keys[i], d.u.d->vals[i]);
        return out;
    }
    /* The sandbox Hugging Face uses refuses to mutate dicts. */
    jfail(c, "access to attribute '%s' of 'dict' object is unsafe", n);
}

struct jv jlist_method(struct jctx *c, struct jv l, struct jcall *a) {
    const char *n = a->name;
    if (!strcmp(n, "index") || !strcmp(n, "count")) {
        struct jv x = jarg(a, 0, NULL);
        int64_t cnt = 0;
        for (size_t i = 0; i < l.u.l->n; i++)
            if (jv_equal(l.u.l->items[i], x)) {
                if (n[0] == 'i')
                    return jv_int((int64_t)i);
                cnt++;
            }
        if (n[0] == 'i')
            jfail(c, "list.index(x): x not in list");
        return jv_int(cnt);
    }
    if (!strcmp(n, "copy")) {
        struct jv out = jv_list(c->arena);
        for (size_t i = 0; i < l.u.l->n; i++)
            jv_list_push(c->arena, out.u.l, l.u.l->items[i]);
        return out;
    }
    /* ImmutableSandboxedEnvironment: list mutation is a SecurityError in Hugging Face. */
    jfail(c, "access to attribute '%s' of 'list' object is unsafe", n);
}
