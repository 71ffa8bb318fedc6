/* eval.c: walks the AST: statements write to the output buffer, expressions yield values. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "chat/jinja_int.h"

_Noreturn void jfail(struct jctx *c, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!c->err[0])
        snprintf(c->err, sizeof c->err, "line %d: %s", c->line, msg);
    if (c->status == OX_OK)
        c->status = OX_ERR_INVALID_ARG;
    longjmp(c->fail, 1);
}

static void emit(struct jctx *c, const char *s, size_t n) {
    if (c->out->len + n > c->opts->max_output)
        jfail(c, "output exceeds %zu bytes", c->opts->max_output);
    if (jbuf_put(c->out, s, n)) {
        c->status = OX_ERR_OOM;
        jfail(c, "out of memory");
    }
}

struct jv jstr_of(struct jctx *c, struct jv v) {
    if (v.kind == JV_STR)
        return v;
    struct jbuf b = {.limit = c->opts->max_output};
    if (jv_to_str(&b, v) || b.len > c->opts->max_output) {
        free(b.p);
        jfail(c, "cannot convert to a string (nested too deeply, or too long)");
    }
    struct jv r = jv_str(c->arena, b.p ? b.p : "", b.len);
    free(b.p);
    return r;
}

static struct jv *lookup(struct jctx *c, struct jscope *s, const char *name) {
    for (; s; s = s->parent) {
        struct jv *v = jv_dict_gets(s->vars, name);
        if (v)
            return v;
    }
    (void)c;
    return NULL;
}

static struct jscope *scope_push(struct jctx *c, struct jscope *parent) {
    struct jscope *s = jarena_alloc(c->arena, sizeof *s);
    s->vars = jv_dict(c->arena).u.d;
    s->parent = parent;
    return s;
}

static void set_var(struct jctx *c, const char *name, struct jv v) {
    jv_dict_set(c->arena, c->scope->vars, jv_cstr(c->arena, name), v);
}

static struct jv eval_args(struct jctx *c, struct jnode *n, int first, struct jv **args, int *nargs,
                           const char ***kwn, struct jv **kwv, int *nkw) {
    int cnt = n->nkids - first;
    *args = jarena_alloc(c->arena, (size_t)(cnt + 1) * sizeof **args);
    *kwv = jarena_alloc(c->arena, (size_t)(cnt + 1) * sizeof **kwv);
    *kwn = jarena_alloc(c->arena, (size_t)(cnt + 1) * sizeof **kwn);
    *nargs = *nkw = 0;
    for (int i = first; i < n->nkids; i++) {
        struct jnode *k = n->kids[i];
        if (k->type == N_KWARG && k->name[0] == '*') {
            struct jv v = jeval(c, k->a);
            int dict = k->name[1] == '*';
            if (v.kind != (dict ? JV_DICT : JV_LIST))
                jfail(c, "argument after %s must be a %s", k->name, dict ? "mapping" : "list");
            size_t more = dict ? v.u.d->n : v.u.l->n;
            if (more > 1024)
                jfail(c, "too many unpacked arguments");
            /* Grow the arrays for the unpacked items (arena copies; old ones are dropped). */
            cnt += (int)more;
            struct jv *na = jarena_alloc(c->arena, (size_t)(cnt + 1) * sizeof *na);
            struct jv *nv = jarena_alloc(c->arena, (size_t)(cnt + 1) * sizeof *nv);
            const char **nn = jarena_alloc(c->arena, (size_t)(cnt + 1) * sizeof *nn);
            memcpy(na, *args, (size_t)*nargs * sizeof *na);
            memcpy(nv, *kwv, (size_t)*nkw * sizeof *nv);
            memcpy(nn, *kwn, (size_t)*nkw * sizeof *nn);
            *args = na, *kwv = nv, *kwn = nn;
            for (size_t j = 0; j < more; j++) {
                if (!dict) {
                    (*args)[(*nargs)++] = v.u.l->items[j];
                } else if (v.u.d->keys[j].kind == JV_STR) {
                    (*kwn)[*nkw] = v.u.d->keys[j].u.s->p;
                    (*kwv)[(*nkw)++] = v.u.d->vals[j];
                }
            }
        } else if (k->type == N_KWARG) {
            (*kwn)[*nkw] = k->name;
            (*kwv)[(*nkw)++] = jeval(c, k->a);
        } else
            (*args)[(*nargs)++] = jeval(c, k);
    }
    return jv_undef();
}

/* Python ints do not overflow; ours fail the render instead of wrapping. */
static int64_t int_op(struct jctx *c, char op, int64_t a, int64_t b) {
    int64_t r = 0;
    int ovf = op == '+'   ? __builtin_add_overflow(a, b, &r)
              : op == '-' ? __builtin_sub_overflow(a, b, &r)
                          : __builtin_mul_overflow(a, b, &r);
    if (ovf)
        jfail(c, "integer overflow");
    return r;
}

static int is_number(struct jv v) {
    return v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL;
}
static double as_double(struct jv v) {
    return v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : v.u.b;
}
static int64_t as_int(struct jv v) {
    return v.kind == JV_INT ? v.u.i : v.u.b;
}

static struct jv concat_seq(struct jctx *c, struct jv a, struct jv b) {
    if (a.kind == JV_STR) {
        size_t n = a.u.s->len + b.u.s->len;
        if (n > c->opts->max_output)
            jfail(c, "string too long");
        char *p = jarena_alloc(c->arena, n + 1);
        memcpy(p, a.u.s->p, a.u.s->len);
        memcpy(p + a.u.s->len, b.u.s->p, b.u.s->len);
        return jv_str(c->arena, p, n);
    }
    struct jv l = jv_list(c->arena);
    for (size_t i = 0; i < a.u.l->n; i++)
        jv_list_push(c->arena, l.u.l, a.u.l->items[i]);
    for (size_t i = 0; i < b.u.l->n; i++)
        jv_list_push(c->arena, l.u.l, b.u.l->items[i]);
    return l;
}

static int contains(struct jctx *c, struct jv hay, struct jv needle) {
    if (hay.kind == JV_STR) {
        if (needle.kind != JV_STR)
            jfail(c, "'in <string>' requires a string, not %s", jv_kind_name(needle.kind));
        if (!needle.u.s->len)
            return 1;
        for (size_t i = 0; i + needle.u.s->len <= hay.u.s->len; i++)
            if (!memcmp(hay.u.s->p + i, needle.u.s->p, needle.u.s->len))
                return 1;
        return 0;
    }
    if (hay.kind == JV_LIST) {
        for (size_t i = 0; i < hay.u.l->n; i++)
            if (jv_equal(hay.u.l->items[i], needle))
                return 1;
        return 0;
    }
    if (hay.kind == JV_DICT)
        return jv_dict_get(hay.u.d, needle) != NULL;
    if (hay.kind == JV_UNDEF) /* Jinja's Undefined iterates as empty */
        return 0;
    jfail(c, "argument of type %s is not iterable", jv_kind_name(hay.kind));
}

/* seq * k or k * seq: the string or list k times over, in one pass (within the output cap for
 * strings, the iteration cap for lists). */
static struct jv repeat_seq(struct jctx *c, struct jv a, struct jv b) {
    struct jv s = a.kind == JV_INT ? b : a;
    int64_t k = a.kind == JV_INT ? a.u.i : b.u.i;
    bool str = s.kind == JV_STR;
    uint64_t n = str ? s.u.s->len : s.u.l->n;
    if (k > 0 && (uint64_t)k * n > (str ? c->opts->max_output : (uint64_t)c->opts->max_iterations))
        jfail(c, str ? "string too long" : "list too long");
    if (!str) {
        struct jv out = jv_list(c->arena);
        for (int64_t r = 0; r < k; r++)
            for (size_t i = 0; i < s.u.l->n; i++)
                jv_list_push(c->arena, out.u.l, s.u.l->items[i]);
        return out;
    }
    struct jbuf buf = {.limit = c->opts->max_output};
    for (int64_t r = 0; r < k; r++)
        jbuf_put(&buf, s.u.s->p, s.u.s->len);
    struct jv out = jv_str(c->arena, buf.p ? buf.p : "", buf.len);
    free(buf.p);
    return out;
}

struct jv jarith(struct jctx *c, const char *op, struct jv a, struct jv b) {
    if (op[0] == '+' && a.kind == JV_STR && b.kind == JV_STR &&
        (jv_is_markup(a) || jv_is_markup(b)))
        return jmarkup_add(c, a, b);
    if (op[0] == '+' && a.kind == b.kind && (a.kind == JV_STR || a.kind == JV_LIST))
        return concat_seq(c, a, b);
    if (op[0] == '*' && !op[1] && ((a.kind == JV_INT) != (b.kind == JV_INT)) &&
        (a.kind == JV_STR || a.kind == JV_LIST || b.kind == JV_STR || b.kind == JV_LIST))
        return repeat_seq(c, a, b);
    if (op[0] == '%' && a.kind == JV_STR)
        return jpercent_format(c, a, b);
    if (!is_number(a) || !is_number(b))
        jfail(c, "unsupported operand types for %s: %s and %s", op, jv_kind_name(a.kind),
              jv_kind_name(b.kind));
    int ints = a.kind != JV_FLOAT && b.kind != JV_FLOAT;
    double x = as_double(a), y = as_double(b);
    switch (op[0]) {
    case '+':
        if (ints)
            return jv_int(int_op(c, '+', as_int(a), as_int(b)));
        return jv_float(x + y);
    case '-':
        if (ints)
            return jv_int(int_op(c, '-', as_int(a), as_int(b)));
        return jv_float(x - y);
    case '*':
        if (op[1] == '*') {
            if (ints && as_int(b) >= 0) {
                int64_t acc = 1, base = as_int(a), e = as_int(b);
                if (base == -1)
                    return jv_int(e % 2 ? -1 : 1);
                for (int64_t i = 0; i < e && i < 64 && acc != 0; i++)
                    acc = int_op(c, '*', acc, base);
                if (as_int(b) >= 64 && (base > 1 || base < -1))
                    jfail(c, "integer overflow");
                return jv_int(acc);
            }
            return jv_float(pow(x, y));
        }
        if (ints)
            return jv_int(int_op(c, '*', as_int(a), as_int(b)));
        return jv_float(x * y);
    case '/':
        if (y == 0)
            jfail(c, "division by zero");
        if (op[1] == '/') {
            if (ints) {
                int64_t p = as_int(a), q = as_int(b);
                if (p == INT64_MIN && q == -1)
                    jfail(c, "integer overflow");
                int64_t d = p / q;
                return jv_int(d - ((p % q != 0) && ((p < 0) != (q < 0))));
            }
            return jv_float(floor(x / y));
        }
        return jv_float(x / y);
    case '%':
        if (y == 0)
            jfail(c, "modulo by zero");
        if (ints) {
            int64_t p = as_int(a), q = as_int(b);
            if (q == -1)
                return jv_int(0);
            int64_t m = p % q;
            return jv_int(m && ((m < 0) != (q < 0)) ? m + q : m);
        }
        return jv_float(x - y * floor(x / y));
    }
    jfail(c, "unknown operator %s", op);
}

static struct jv binop(struct jctx *c, struct jnode *n) {
    const char *op = n->name;
    struct jv a = jeval(c, n->a), b = jeval(c, n->b);
    c->line = n->line;
    if (!strcmp(op, "~")) {
        a = jstr_of(c, a);
        b = jstr_of(c, b);
        return concat_seq(c, a, b);
    }
    if (!strcmp(op, "=="))
        return jv_bool(jv_equal(a, b));
    if (!strcmp(op, "!="))
        return jv_bool(!jv_equal(a, b));
    if (!strcmp(op, "in"))
        return jv_bool(contains(c, b, a));
    if (!strcmp(op, "notin"))
        return jv_bool(!contains(c, b, a));
    if (op[0] == '<' || op[0] == '>') {
        int ok, r = jv_compare(a, b, &ok);
        if (!ok)
            jfail(c, "'%s' not supported between %s and %s", op, jv_kind_name(a.kind),
                  jv_kind_name(b.kind));
        if (!strcmp(op, "<"))
            return jv_bool(r < 0);
        if (!strcmp(op, ">"))
            return jv_bool(r > 0);
        if (!strcmp(op, "<="))
            return jv_bool(r <= 0);
        return jv_bool(r >= 0);
    }
    return jarith(c, op, a, b);
}

static int64_t norm_index(int64_t i, int64_t n) {
    return i < 0 ? i + n : i;
}

static struct jv item(struct jctx *c, struct jv obj, struct jv key) {
    if (obj.kind == JV_DICT) {
        struct jv *v = jv_dict_get(obj.u.d, key);
        if (v)
            return *v;
        if (key.kind == JV_STR)
            return jattr(c, obj, key.u.s->p);
        return jv_undef();
    }
    if (obj.kind == JV_LIST && obj.u.l->is_gen)
        jfail(c, "'generator' object is not subscriptable");
    if ((obj.kind == JV_LIST || obj.kind == JV_STR) &&
        (key.kind == JV_INT || key.kind == JV_BOOL)) {
        size_t *offs = NULL;
        int64_t n = obj.kind == JV_LIST ? (int64_t)obj.u.l->n
                                        : (int64_t)jv_char_offsets(c->arena, obj.u.s, &offs);
        int64_t i = norm_index(as_int(key), n);
        if (i < 0 || i >= n)
            return jv_undef();
        if (obj.kind == JV_LIST)
            return obj.u.l->items[i];
        return jv_str(c->arena, obj.u.s->p + offs[i], offs[i + 1] - offs[i]);
    }
    if (obj.kind == JV_UNDEF)
        jfail(c, "cannot index an undefined value");
    if (key.kind == JV_STR)
        return jattr(c, obj, key.u.s->p);
    return jv_undef();
}

static int64_t slice_bound(struct jctx *c, struct jnode *e, int64_t dflt, int64_t n, int64_t step) {
    if (!e)
        return dflt;
    struct jv v = jeval(c, e);
    if (v.kind == JV_NONE)
        return dflt;
    if (v.kind != JV_INT)
        jfail(c, "slice indices must be integers");
    int64_t i = v.u.i < 0 ? v.u.i + n : v.u.i;
    if (i < 0)
        i = step < 0 ? -1 : 0;
    if (i > n)
        i = step < 0 ? n - 1 : n;
    return i;
}

static struct jv slice(struct jctx *c, struct jnode *nd) {
    struct jv obj = jeval(c, nd->a);
    if (obj.kind != JV_LIST && obj.kind != JV_STR)
        jfail(c, "cannot slice a %s", jv_kind_name(obj.kind));
    size_t *offs = NULL;
    int64_t n = obj.kind == JV_LIST ? (int64_t)obj.u.l->n
                                    : (int64_t)jv_char_offsets(c->arena, obj.u.s, &offs);
    int64_t step = 1;
    if (nd->d) {
        struct jv s = jeval(c, nd->d);
        if (s.kind == JV_INT)
            step = s.u.i;
        else if (s.kind != JV_NONE)
            jfail(c, "slice step must be an integer");
        if (step == 0)
            jfail(c, "slice step cannot be zero");
    }
    int64_t lo = slice_bound(c, nd->b, step < 0 ? n - 1 : 0, n, step);
    int64_t hi = slice_bound(c, nd->c, step < 0 ? -1 : n, n, step);
    if (obj.kind == JV_LIST) {
        struct jv out = jv_list(c->arena);
        for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step)
            jv_list_push(c->arena, out.u.l, obj.u.l->items[i]);
        return out;
    }
    struct jbuf b = {.limit = c->opts->max_output};
    for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step)
        jbuf_put(&b, obj.u.s->p + offs[i], offs[i + 1] - offs[i]);
    struct jv out = jv_str(c->arena, b.p ? b.p : "", b.len);
    free(b.p);
    return out;
}

static struct jv call(struct jctx *c, struct jnode *n) {
    struct jv fn;
    struct jv *args, *kwv;
    const char **kwn;
    int nargs, nkw;
    fn = jeval(c, n->a);
    eval_args(c, n, 0, &args, &nargs, &kwn, &kwv, &nkw);
    c->line = n->line;
    if (fn.kind == JV_DICT && fn.u.d->is_call) /* a recursive loop's loop(items) */
        fn = (struct jv){.kind = JV_FUNC, .u.fn = fn.u.d->is_call};
    if (fn.kind != JV_FUNC)
        jfail(c, "'%s' is not callable",
              n->a->type == N_NAME || n->a->type == N_ATTR ? n->a->name : jv_kind_name(fn.kind));
    return jcall_value(c, fn, args, nargs, kwn, kwv, nkw);
}

static struct jv eval_inner(struct jctx *c, struct jnode *n) {
    c->line = n->line;
    switch (n->type) {
    case N_LIT: return n->lit;
    case N_NAME: {
        struct jv *v = lookup(c, c->scope, n->name);
        return v ? *v : jglobal_builtin(c, n->name);
    }
    case N_ATTR: {
        struct jv o = jeval(c, n->a);
        c->line = n->line;
        if (o.kind == JV_UNDEF)
            jfail(c, "'%s' is undefined (reading .%s)", n->a->type == N_NAME ? n->a->name : "value",
                  n->name);
        return jattr(c, o, n->name);
    }
    case N_ITEM: {
        struct jv o = jeval(c, n->a), k = jeval(c, n->b);
        c->line = n->line;
        return item(c, o, k);
    }
    case N_SLICE: return slice(c, n);
    case N_CALL: return call(c, n);
    case N_FILTER: {
        struct jv v = jeval(c, n->a), *args, *kwv;
        const char **kwn;
        int nargs, nkw;
        eval_args(c, n, 0, &args, &nargs, &kwn, &kwv, &nkw);
        c->line = n->line;
        return jfilter(c, n->name, v, args, nargs, kwn, kwv, nkw);
    }
    case N_TEST: {
        struct jv v = jeval(c, n->a), *args, *kwv;
        const char **kwn;
        int nargs, nkw;
        eval_args(c, n, 0, &args, &nargs, &kwn, &kwv, &nkw);
        c->line = n->line;
        return jv_bool(jtest(c, n->name, v, args, nargs) != n->lit.u.b);
    }
    case N_BINOP: return binop(c, n);
    case N_UNOP: {
        struct jv v = jeval(c, n->a);
        if (!is_number(v))
            jfail(c, "bad operand type for unary %s: %s", n->name, jv_kind_name(v.kind));
        if (n->name[0] == '+')
            return v;
        if (v.kind == JV_FLOAT)
            return jv_float(-v.u.f);
        if (as_int(v) == INT64_MIN)
            jfail(c, "integer overflow");
        return jv_int(-as_int(v));
    }
    case N_AND: {
        struct jv a = jeval(c, n->a);
        return jv_truthy(a) ? jeval(c, n->b) : a;
    }
    case N_OR: {
        struct jv a = jeval(c, n->a);
        return jv_truthy(a) ? a : jeval(c, n->b);
    }
    case N_NOT: return jv_bool(!jv_truthy(jeval(c, n->a)));
    case N_COND:
        if (jv_truthy(jeval(c, n->a)))
            return jeval(c, n->b);
        return n->c ? jeval(c, n->c) : jv_undef();
    case N_LISTLIT: {
        struct jv l = jv_list(c->arena);
        l.u.l->is_tuple = n->lit.kind == JV_BOOL;
        for (int i = 0; i < n->nkids; i++)
            jv_list_push(c->arena, l.u.l, jeval(c, n->kids[i]));
        return l;
    }
    case N_DICTLIT: {
        struct jv d = jv_dict(c->arena);
        for (int i = 0; i + 1 < n->nkids; i += 2) {
            struct jv k = jeval(c, n->kids[i]);
            jv_dict_set(c->arena, d.u.d, k, jeval(c, n->kids[i + 1]));
        }
        return d;
    }
    default: jfail(c, "internal: node %d is not an expression", (int)n->type);
    }
}

struct jv jeval(struct jctx *c, struct jnode *n) {
    if (++c->depth > c->opts->max_depth)
        jfail(c, "recursion too deep");
    struct jv v = eval_inner(c, n);
    c->depth--;
    return v;
}

/* ---- statements ---- */

static void exec_list(struct jctx *c, struct jnode *n) {
    for (int i = 0; i < n->nkids && !c->loop_ctl; i++)
        jexec(c, n->kids[i]);
}

static struct jv loop_items(struct jctx *c, struct jv it) {
    switch (it.kind) {
    case JV_LIST: return it;
    case JV_UNDEF:
    case JV_NONE:
        if (it.kind == JV_NONE)
            jfail(c, "'NoneType' object is not iterable");
        return jv_list(c->arena);
    case JV_DICT: {
        struct jv l = jv_list(c->arena);
        for (size_t i = 0; i < it.u.d->n; i++)
            jv_list_push(c->arena, l.u.l, it.u.d->keys[i]);
        return l;
    }
    case JV_STR: {
        /* Iterate by UTF-8 character. */
        struct jv l = jv_list(c->arena);
        const char *p = it.u.s->p, *e = p + it.u.s->len;
        while (p < e) {
            const char *q = p + 1;
            while (q < e && ((unsigned char)*q & 0xC0) == 0x80)
                q++;
            jv_list_push(c->arena, l.u.l, jv_str(c->arena, p, (size_t)(q - p)));
            p = q;
        }
        return l;
    }
    default: jfail(c, "'%s' object is not iterable", jv_kind_name(it.kind));
    }
}

static void bind_targets(struct jctx *c, struct jnode *n, struct jv v) {
    if (n->nnames == 1) {
        set_var(c, n->names[0], v);
        return;
    }
    if (v.kind != JV_LIST || (int)v.u.l->n != n->nnames)
        jfail(c, "cannot unpack %s into %d names", jv_kind_name(v.kind), n->nnames);
    for (int i = 0; i < n->nnames; i++)
        set_var(c, n->names[i], v.u.l->items[i]);
}

static void set_loop_var(struct jctx *c, struct jdict *loop, const char *k, struct jv v) {
    jv_dict_set(c->arena, loop, jv_cstr(c->arena, k), v);
}

/* The loop over items at depth (1 but in a recursive loop's loop() calls). */
static void run_for(struct jctx *c, struct jnode *n, struct jv items, int64_t depth) {
    struct jscope *saved = c->scope;
    c->scope = scope_push(c, saved);
    if (n->d) { /* for x in y if cond: filter first so loop.length is right */
        struct jv kept = jv_list(c->arena);
        for (size_t i = 0; i < items.u.l->n; i++) {
            bind_targets(c, n, items.u.l->items[i]);
            if (jv_truthy(jeval(c, n->d)))
                jv_list_push(c->arena, kept.u.l, items.u.l->items[i]);
        }
        items = kept;
    }
    size_t len = items.u.l->n;
    struct jv changed = jv_list(c->arena); /* loop.changed's last values */
    for (size_t i = 0; i < len; i++) {
        if (++c->iterations > c->opts->max_iterations)
            jfail(c, "more than %lld loop iterations", (long long)c->opts->max_iterations);
        /* each iteration sees the enclosing scope afresh, as Jinja2's: what one sets is gone in
         * the next ({% set count = count + 1 %} gives 1 every time) */
        c->scope = scope_push(c, saved);
        struct jdict *loop = jv_dict(c->arena).u.d;
        set_loop_var(c, loop, "index", jv_int((int64_t)i + 1));
        set_loop_var(c, loop, "index0", jv_int((int64_t)i));
        set_loop_var(c, loop, "revindex", jv_int((int64_t)(len - i)));
        set_loop_var(c, loop, "revindex0", jv_int((int64_t)(len - i - 1)));
        set_loop_var(c, loop, "first", jv_bool(i == 0));
        set_loop_var(c, loop, "last", jv_bool(i + 1 == len));
        set_loop_var(c, loop, "length", jv_int((int64_t)len));
        set_loop_var(c, loop, "previtem", i ? items.u.l->items[i - 1] : jv_undef());
        set_loop_var(c, loop, "nextitem", i + 1 < len ? items.u.l->items[i + 1] : jv_undef());
        set_loop_var(c, loop, "cycle", jloop_cycle(c, (int64_t)i));
        set_loop_var(c, loop, "changed", jloop_changed(c, changed));
        set_loop_var(c, loop, "depth", jv_int(depth));
        set_loop_var(c, loop, "depth0", jv_int(depth - 1));
        struct jv lv = {.kind = JV_DICT, .u.d = loop};
        if (n->lit.u.b) { /* recursive: loop(items) is callable, a dict with a function */
            struct jfunc *f = jarena_alloc(c->arena, sizeof *f);
            f->name = "loop", f->builtin = 5, f->bound = jv_int(depth), f->loop = n;
            f->closure = saved;
            loop->is_call = f;
        }
        set_var(c, "loop", lv);
        bind_targets(c, n, items.u.l->items[i]);
        exec_list(c, n->b);
        if (c->loop_ctl == 1) {
            c->loop_ctl = 0;
            break;
        }
        c->loop_ctl = 0;
    }
    c->scope = saved;
    if (!len && n->c)
        exec_list(c, n->c);
}

static void exec_for(struct jctx *c, struct jnode *n) {
    run_for(c, n, loop_items(c, jeval(c, n->a)), 1);
}

struct jv jloop_again(struct jctx *c, struct jnode *loop, struct jscope *outer, struct jv items,
                      int64_t depth) {
    if (depth > c->opts->max_depth)
        jfail(c, "recursive loop too deep");
    struct jscope *saved = c->scope;
    size_t start = c->out->len;
    c->scope = outer;
    run_for(c, loop, loop_items(c, items), depth);
    c->scope = saved;
    struct jv s = jv_str(c->arena, c->out->p ? c->out->p + start : "", c->out->len - start);
    c->out->len = start;
    if (c->out->p)
        c->out->p[start] = 0;
    return s;
}

static void exec_set(struct jctx *c, struct jnode *n) {
    struct jv v = jeval(c, n->b);
    if (n->a) { /* ns.attr = v */
        struct jv ns = jeval(c, n->a->a);
        c->line = n->line;
        if (ns.kind != JV_DICT || !ns.u.d->is_namespace)
            jfail(c, "can only set attributes on a namespace");
        jv_dict_set(c->arena, ns.u.d, jv_cstr(c->arena, n->a->name), v);
        return;
    }
    bind_targets(c, n, v);
}

/* Render body to a string: write to the output as usual, then cut it back off. Captured text
 * thus counts toward the output cap, and a failure mid-way leaks nothing. */
static struct jv capture(struct jctx *c, struct jnode *body) {
    size_t start = c->out->len;
    exec_list(c, body);
    struct jv s = jv_str(c->arena, c->out->p ? c->out->p + start : "", c->out->len - start);
    c->out->len = start;
    if (c->out->p)
        c->out->p[start] = 0;
    return s;
}

/* A block's rendered body through its filters (chain reads it as BODY_VAR; NULL: as it is). */
static struct jv through_filters(struct jctx *c, struct jnode *chain, struct jv body) {
    if (!chain)
        return body;
    struct jscope *saved = c->scope;
    c->scope = scope_push(c, saved);
    set_var(c, BODY_VAR, body);
    struct jv v = jeval(c, chain);
    c->scope = saved;
    return v;
}

/* A macro call: fresh scope over the template's top level, parameters bound by position,
 * then by keyword, then defaults; extra positional arguments as the tuple varargs and extra
 * keywords as the dict kwargs where the body reads them. Returns the rendered body. */
struct jv jcall_macro(struct jctx *c, struct jnode *m, struct jscope *outer, struct jv caller,
                      struct jv *args, int nargs, const char **kwn, struct jv *kwv, int nkw) {
    if (++c->depth > c->opts->max_depth)
        jfail(c, "macro recursion too deep");
    int64_t takes = m->lit.u.i;
    if (nargs > m->nnames && !(takes & MACRO_VARARGS))
        jfail(c, "macro '%s' takes not more than %d argument(s)", m->name, m->nnames);
    struct jv varargs = jv_list(c->arena), kwargs = jv_dict(c->arena);
    varargs.u.l->is_tuple = 1;
    for (int i = m->nnames; i < nargs; i++)
        jv_list_push(c->arena, varargs.u.l, args[i]);
    for (int k = 0; k < nkw; k++) {
        int known = 0;
        for (int i = 0; i < m->nnames && !known; i++)
            known = !strcmp(kwn[k], m->names[i]);
        if (!known && !(takes & MACRO_KWARGS))
            jfail(c, "macro '%s' takes no keyword argument '%s'", m->name, kwn[k]);
        if (!known)
            jv_dict_set(c->arena, kwargs.u.d, jv_cstr(c->arena, kwn[k]), kwv[k]);
    }
    struct jscope *saved = c->scope;
    c->scope = scope_push(c, outer ? outer : c->globals);
    if (caller.kind != JV_UNDEF)
        set_var(c, "caller", caller);
    if (takes & MACRO_VARARGS)
        set_var(c, "varargs", varargs);
    if (takes & MACRO_KWARGS)
        set_var(c, "kwargs", kwargs);
    for (int i = 0; i < m->nnames; i++) {
        struct jv v = jv_undef();
        int have = 0;
        if (i < nargs)
            v = args[i], have = 1;
        for (int k = 0; k < nkw; k++)
            if (!strcmp(kwn[k], m->names[i]))
                v = kwv[k], have = 1;
        if (!have && m->kids[i])
            v = jeval(c, m->kids[i]);
        set_var(c, m->names[i], v);
    }
    struct jv out = capture(c, m->b);
    c->loop_ctl = 0;
    c->scope = saved;
    c->depth--;
    return out;
}

/* {% call(params) m(args) %}body{% endcall %}: m called with the body as its caller(), a
 * macro of the params that sees the scope of the block. */
static void exec_call_block(struct jctx *c, struct jnode *n) {
    struct jv fn = jeval(c, n->a->a), *args, *kwv;
    const char **kwn;
    int nargs, nkw;
    eval_args(c, n->a, 0, &args, &nargs, &kwn, &kwv, &nkw);
    c->line = n->line;
    if (fn.kind != JV_FUNC || !fn.u.fn || !fn.u.fn->macro)
        jfail(c, "call block: '%s' is not a macro", n->a->a->name ? n->a->a->name : "value");
    struct jfunc *f = jarena_alloc(c->arena, sizeof *f);
    f->name = "caller", f->macro = n->c, f->closure = c->scope;
    struct jv out =
        jcall_macro(c, fn.u.fn->macro, fn.u.fn->closure, (struct jv){.kind = JV_FUNC, .u.fn = f},
                    args, nargs, kwn, kwv, nkw);
    emit(c, out.u.s->p, out.u.s->len);
}

void jexec(struct jctx *c, struct jnode *n) {
    c->line = n->line;
    switch (n->type) {
    case N_TEXT: emit(c, n->lit.u.s->p, n->lit.u.s->len); break;
    case N_OUTPUT: {
        struct jv v = jeval(c, n->a);
        if (v.kind == JV_STR)
            emit(c, v.u.s->p, v.u.s->len);
        else {
            struct jbuf b = {.limit = c->opts->max_output};
            int bad = jv_to_str(&b, v);
            if (!bad && b.len && c->out->len + b.len <= c->opts->max_output)
                jbuf_put(c->out, b.p, b.len);
            else if (bad || b.len) /* too deep (a namespace holding itself) or too long */
                bad = 1;
            free(b.p);
            if (bad)
                jfail(c, "cannot print this value (nested too deeply, or too long)");
        }
        break;
    }
    case N_IF:
        if (jv_truthy(jeval(c, n->a)))
            exec_list(c, n->b);
        else if (n->c)
            jexec(c, n->c);
        break;
    case N_BLOCKLIST: exec_list(c, n); break;
    case N_FOR: exec_for(c, n); break;
    case N_SET: exec_set(c, n); break;
    case N_SETBLOCK: set_var(c, n->names[0], through_filters(c, n->c, capture(c, n->b))); break;
    case N_FILTERBLOCK: {
        struct jv v = jstr_of(c, through_filters(c, n->a, capture(c, n->b)));
        emit(c, v.u.s->p, v.u.s->len);
        break;
    }
    case N_CALLBLOCK: exec_call_block(c, n); break;
    case N_WITH: {
        struct jscope *saved = c->scope;
        struct jv *vals = jarena_alloc(c->arena, (size_t)(n->nnames + 1) * sizeof *vals);
        for (int i = 0; i < n->nnames; i++) /* evaluated outside, as Jinja2's */
            vals[i] = jeval(c, n->kids[i]);
        c->scope = scope_push(c, saved);
        for (int i = 0; i < n->nnames; i++)
            set_var(c, n->names[i], vals[i]);
        exec_list(c, n->b);
        c->scope = saved;
        break;
    }
    case N_MACRO: {
        struct jfunc *f = jarena_alloc(c->arena, sizeof *f);
        f->name = n->name;
        f->macro = n;
        set_var(c, n->name, (struct jv){.kind = JV_FUNC, .u.fn = f});
        break;
    }
    case N_BREAK: c->loop_ctl = 1; break;
    case N_CONTINUE: c->loop_ctl = 2; break;
    default: jfail(c, "internal: node %d is not a statement", (int)n->type);
    }
}

struct jinja_opts jinja_opts_default(void) {
    return (struct jinja_opts){.max_output = (size_t)16 << 20,
                               .max_memory = (size_t)256 << 20,
                               .max_depth = 400,
                               .max_iterations = 1000000,
                               .now = 0};
}

enum ox_status jinja_render_json(const struct jtemplate *t, const char *ctx_json, size_t ctx_len,
                                 const struct jinja_opts *opts, char **out, size_t *out_len) {
    struct jinja_opts dflt = jinja_opts_default();
    struct jbuf buf = {0};
    struct jctx *c = calloc(1, sizeof *c);
    *out = NULL;
    if (out_len)
        *out_len = 0;
    if (!c)
        return ox_fail(OX_ERR_OOM, "jinja: out of memory");
    c->opts = opts ? opts : &dflt;
    c->out = &buf;
    c->arena = jarena_new(c->opts->max_memory);
    if (!c->arena) {
        free(c);
        return ox_fail(OX_ERR_OOM, "jinja: out of memory");
    }
    struct jv ctx;
    enum ox_status st =
        jjson_parse(c->arena, ctx_json ? ctx_json : "{}", ctx_json ? ctx_len : 2, &ctx);
    if (st == OX_OK && ctx.kind != JV_DICT)
        st = ox_fail(OX_ERR_INVALID_ARG, "jinja: the render context must be a JSON object");
    if (st == OX_OK && c->opts->jinja2_only && t->generation_line) /* Jinja2 fails to parse it */
        st = ox_fail(OX_ERR_FORMAT, "jinja: line %d: unknown tag 'generation' (transformers' own)",
                     t->generation_line);
    if (st == OX_OK) {
        jarena_on_oom(c->arena, &c->fail);
        int r = setjmp(c->fail);
        if (r == 0) {
            c->globals = jarena_alloc(c->arena, sizeof *c->globals);
            c->globals->vars = ctx.u.d;
            c->scope = c->globals;
            jexec(c, t->root);
        } else if (r == 2) {
            st = ox_fail(OX_ERR_OOM, "jinja: render used more than %zu bytes of memory",
                         c->opts->max_memory);
        } else {
            st = ox_fail(c->status, "jinja: %s", c->err);
        }
    }
    jarena_free(c->arena);
    free(c);
    if (st != OX_OK) {
        free(buf.p);
        return st;
    }
    if (!buf.p && jbuf_put(&buf, "", 0))
        return ox_fail(OX_ERR_OOM, "jinja: out of memory");
    *out = buf.p;
    if (out_len)
        *out_len = buf.len;
    return OX_OK;
}
