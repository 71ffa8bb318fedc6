/* jinja_int.h: the engine's internals shared by the lexer, parser, evaluator and builtins. */
#ifndef OX_CHAT_JINJA_INT_H
#define OX_CHAT_JINJA_INT_H

#include <setjmp.h>
#include <string.h>

#include "chat/jinja.h"
#include "json/json.h"

enum jnode_type {
    N_TEXT,
    N_OUTPUT,
    N_IF,
    N_FOR,
    N_SET,
    N_SETBLOCK,
    N_FILTERBLOCK,
    N_WITH,
    N_CALLBLOCK,
    N_MACRO,
    N_BREAK,
    N_CONTINUE,
    N_BLOCKLIST,
    N_LIT,
    N_NAME,
    N_ATTR,
    N_ITEM,
    N_SLICE,
    N_CALL,
    N_FILTER,
    N_TEST,
    N_BINOP,
    N_UNOP,
    N_AND,
    N_OR,
    N_NOT,
    N_COND,
    N_LISTLIT,
    N_DICTLIT,
    N_KWARG,
    N_NONE_NODE
};

/* The name a block's filters read its rendered body from ({% filter %}, {% set x | f %}): no
 * template can spell it (a space). */
#define BODY_VAR " body"
/* N_MACRO's lit.u.i: the body reads varargs / kwargs, so the macro takes extra arguments */
enum { MACRO_VARARGS = 1, MACRO_KWARGS = 2 };

/* One AST node; which fields mean what depends on type (see parse.c). */
struct jnode {
    enum jnode_type type;
    int line;
    const char *name;            /* identifier, operator, filter/test name */
    struct jv lit;               /* N_LIT */
    struct jnode *a, *b, *c, *d; /* operands / bodies */
    struct jnode **kids;         /* statement lists, call args, list items */
    int nkids;
    const char **names; /* for targets, macro params */
    int nnames;
};

struct jtemplate {
    struct jarena *arena; /* AST and literal storage */
    struct jnode *root;
    int generation_line; /* where it first uses transformers' {% generation %} (0: nowhere) */
};

struct jfunc {
    const char *name;
    struct jnode *macro;    /* a macro, or NULL for a builtin */
    struct jscope *closure; /* a call block's caller, a recursive loop's loop(): the scope it
                               sees (NULL: the globals) */
    struct jnode *loop;     /* a recursive loop's loop(): the for statement */
    struct jv bound;        /* builtin method: the receiver */
    int builtin;            /* index into the builtin table */
};

/* Scope: a chain of small dicts. */
struct jscope {
    struct jdict *vars;
    struct jscope *parent;
};

struct jctx {
    struct jarena *arena;
    struct jbuf *out;
    const struct jinja_opts *opts;
    struct jscope *globals;
    struct jscope *scope; /* innermost: for loops and macro calls push one */
    int depth;
    int64_t iterations;
    int loop_ctl; /* 1 = break, 2 = continue */
    int line;
    jmp_buf fail;
    char err[512];
    enum ox_status status;
};

/* Fail the render (longjmp to the top); the message gets the current line. */
_Noreturn void jfail(struct jctx *c, const char *fmt, ...) OX_PRINTF(2, 3);

/* Python's view of values (value.c; the type itself is json/json.h's). */
int jv_truthy(struct jv v);
/* str() in Python terms (strings as-is, containers as repr). */
int jv_to_str(struct jbuf *b, struct jv v);
int jv_repr(struct jbuf *b, struct jv v);
const char *jv_kind_name(enum jv_kind k);
/* Byte offsets of a string's characters (n + 1 entries, the last = len), so indexing, slicing
 * and iteration work per code point as in Python. Returns n. */
size_t jv_char_offsets(struct jarena *a, const struct jstr *s, size_t **offs);

/* Lexer/parser (lex.c, parse.c). */
struct jtok;

/* Evaluator (eval.c) and builtins (builtins.c). */
struct jv jeval(struct jctx *c, struct jnode *n);
void jexec(struct jctx *c, struct jnode *n);
struct jv jcall_value(struct jctx *c, struct jv fn, struct jv *args, int nargs,
                      const char **kwnames, struct jv *kwvals, int nkw);
struct jv jfilter(struct jctx *c, const char *name, struct jv v, struct jv *args, int nargs,
                  const char **kwnames, struct jv *kwvals, int nkw);
int jtest(struct jctx *c, const char *name, struct jv v, struct jv *args, int nargs);
struct jv jattr(struct jctx *c, struct jv obj, const char *name);
struct jv jglobal_builtin(struct jctx *c, const char *name);
/* loop.cycle(a, b, ...) for iteration index0. */
struct jv jloop_cycle(struct jctx *c, int64_t index0);
struct jv jloop_changed(struct jctx *c, struct jv state);
/* A recursive loop's body over items at depth (1 at the top), rendered to a string. */
struct jv jloop_again(struct jctx *c, struct jnode *loop, struct jscope *outer, struct jv items,
                      int64_t depth);
struct jv jcall_builtin(struct jctx *c, struct jfunc *f, struct jv *args, int nargs,
                        const char **kwnames, struct jv *kwvals, int nkw);
/* A macro's body with its arguments, over outer (NULL: the template's globals); caller, unless
 * undefined, is the call block's body as the macro's caller(). */
struct jv jcall_macro(struct jctx *c, struct jnode *m, struct jscope *outer, struct jv caller,
                      struct jv *args, int nargs, const char **kwn, struct jv *kwv, int nkw);
struct jv jstr_of(struct jctx *c, struct jv v);
/* a op b for the arithmetic operators (+ - * / // % **), as Python does them */
struct jv jarith(struct jctx *c, const char *op, struct jv a, struct jv b);
/* fmt % args, Python's printf-style formatting (args: one value or a tuple) */
struct jv jpercent_format(struct jctx *c, struct jv fmt, struct jv args);

/* markup.c: Jinja2's Markup. |e, |escape (force: |forceescape, which escapes Markup again):
 * str(v) HTML-escaped as Markup; |safe: str(v) as Markup; a + b where either is Markup: the
 * other escaped, the sum Markup; markup_keep: result as Markup where from was (the string
 * filters and methods that keep it: upper, replace, strip, ...). */
struct jv jmarkup_escape(struct jctx *c, struct jv v, bool force);
struct jv jmarkup_safe(struct jctx *c, struct jv v);
struct jv jmarkup_add(struct jctx *c, struct jv a, struct jv b);
struct jv jmarkup_keep(struct jv from, struct jv result);
static inline bool jv_is_markup(struct jv v) {
    return v.kind == JV_STR && v.u.s->markup;
}

#endif
