/* parse.c: tokens to an AST by recursive descent, following Jinja's grammar and precedence. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "chat/lex.h"

struct parser {
    struct jarena *a;
    struct jtok *t;
    size_t n, i;
    int depth;
    int generation_line; /* the first {% generation %}'s, or 0 */
    jmp_buf fail;
    char err[256];
};

_Noreturn static void perr(struct parser *P, const char *fmt, ...) OX_PRINTF(2, 3);
_Noreturn static void perr(struct parser *P, const char *fmt, ...) {
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(P->err, sizeof P->err, "line %d: %s", P->t[P->i].line, msg);
    longjmp(P->fail, 1);
}

static struct jtok *cur(struct parser *P) {
    return &P->t[P->i];
}

static struct jnode *node(struct parser *P, enum jnode_type type) {
    struct jnode *n = jarena_alloc(P->a, sizeof *n);
    n->type = type;
    n->line = cur(P)->line;
    return n;
}

static const char *tok_str(struct parser *P, struct jtok *t) {
    char *s = jarena_alloc(P->a, t->n + 1);
    memcpy(s, t->s, t->n);
    return s;
}

static int is_op(struct parser *P, const char *op) {
    struct jtok *t = cur(P);
    return t->type == T_OP && t->n == strlen(op) && !memcmp(t->s, op, t->n);
}

static int is_name(struct parser *P, const char *name) {
    struct jtok *t = cur(P);
    return t->type == T_NAME && t->n == strlen(name) && !memcmp(t->s, name, t->n);
}

static int accept_op(struct parser *P, const char *op) {
    if (!is_op(P, op))
        return 0;
    P->i++;
    return 1;
}

static int accept_name(struct parser *P, const char *name) {
    if (!is_name(P, name))
        return 0;
    P->i++;
    return 1;
}

static void expect_op(struct parser *P, const char *op) {
    if (!accept_op(P, op))
        perr(P, "expected '%s'", op);
}

static const char *expect_ident(struct parser *P) {
    if (cur(P)->type != T_NAME)
        perr(P, "expected a name");
    return tok_str(P, &P->t[P->i++]);
}

static void push_kid(struct parser *P, struct jnode *n, struct jnode *k) {
    if ((n->nkids & (n->nkids - 1)) == 0) { /* grow at powers of two */
        struct jnode **nk = jarena_alloc(P->a, (size_t)(n->nkids ? n->nkids * 2 : 1) * sizeof *nk);
        if (n->nkids)
            memcpy(nk, n->kids, (size_t)n->nkids * sizeof *nk);
        n->kids = nk;
    }
    n->kids[n->nkids++] = k;
}

static void push_name(struct parser *P, struct jnode *n, const char *s) {
    const char **nn = jarena_alloc(P->a, (size_t)(n->nnames + 1) * sizeof *nn);
    if (n->nnames)
        memcpy(nn, n->names, (size_t)n->nnames * sizeof *nn);
    nn[n->nnames++] = s;
    n->names = nn;
}

static struct jnode *expr(struct parser *P);
static struct jnode *or_expr(struct parser *P);
static struct jnode *unary(struct parser *P, int with_filter);
static struct jnode *tuple_expr(struct parser *P, int condexpr);

/* Call arguments after '(' : positional, then name=value as N_KWARG. */
static void call_args(struct parser *P, struct jnode *call) {
    while (!accept_op(P, ")")) {
        if (call->nkids && !accept_op(P, ","))
            perr(P, "expected ',' or ')' in call");
        if (accept_op(P, ")"))
            break;
        if (is_op(P, "*") || is_op(P, "**")) { /* *list / **dict unpacking */
            struct jnode *u = node(P, N_KWARG);
            u->name = is_op(P, "*") ? "*" : "**";
            P->i++;
            u->a = expr(P);
            push_kid(P, call, u);
        } else if (cur(P)->type == T_NAME && P->t[P->i + 1].type == T_OP && P->t[P->i + 1].n == 1 &&
                   P->t[P->i + 1].s[0] == '=') {
            struct jnode *kw = node(P, N_KWARG);
            kw->name = expect_ident(P);
            P->i++;
            kw->a = expr(P);
            push_kid(P, call, kw);
        } else {
            push_kid(P, call, expr(P));
        }
    }
}

static struct jnode *literal(struct parser *P, struct jv v) {
    struct jnode *n = node(P, N_LIT);
    n->lit = v;
    P->i++;
    return n;
}

static struct jnode *primary(struct parser *P) {
    struct jtok *t = cur(P);
    if (++P->depth > 200)
        perr(P, "expression nested too deeply");
    struct jnode *n;
    if (t->type == T_STRING) {
        /* Adjacent string literals concatenate, as in Python. */
        struct jbuf b = {0};
        while (cur(P)->type == T_STRING) {
            jbuf_put(&b, cur(P)->s, cur(P)->n);
            P->i++;
        }
        P->i--;
        n = literal(P, jv_str(P->a, b.p ? b.p : "", b.len));
        free(b.p);
    } else if (t->type == T_INT)
        n = literal(P, jv_int(t->i));
    else if (t->type == T_FLOAT)
        n = literal(P, jv_float(t->f));
    else if (t->type == T_NAME) {
        if (is_name(P, "true") || is_name(P, "True"))
            n = literal(P, jv_bool(1));
        else if (is_name(P, "false") || is_name(P, "False"))
            n = literal(P, jv_bool(0));
        else if (is_name(P, "none") || is_name(P, "None"))
            n = literal(P, jv_none());
        else {
            n = node(P, N_NAME);
            n->name = expect_ident(P);
        }
    } else if (accept_op(P, "(")) {
        if (is_op(P, ")")) {
            n = node(P, N_LISTLIT);
            n->lit = jv_bool(1); /* () is the empty tuple */
        } else
            n = expr(P);
        if (is_op(P, ",")) { /* a tuple: a list that prints as (a, b) */
            struct jnode *l = node(P, N_LISTLIT);
            l->lit = jv_bool(1);
            push_kid(P, l, n);
            while (accept_op(P, ",") && !is_op(P, ")"))
                push_kid(P, l, expr(P));
            n = l;
        }
        expect_op(P, ")");
    } else if (accept_op(P, "[")) {
        n = node(P, N_LISTLIT);
        while (!accept_op(P, "]")) {
            if (n->nkids && !accept_op(P, ","))
                perr(P, "expected ',' or ']'");
            if (accept_op(P, "]"))
                break;
            push_kid(P, n, expr(P));
        }
    } else if (accept_op(P, "{")) {
        n = node(P, N_DICTLIT);
        while (!accept_op(P, "}")) {
            if (n->nkids && !accept_op(P, ","))
                perr(P, "expected ',' or '}'");
            if (accept_op(P, "}"))
                break;
            push_kid(P, n, expr(P));
            expect_op(P, ":");
            push_kid(P, n, expr(P));
        }
    } else {
        perr(P, "unexpected %s", t->type == T_OP ? "operator" : "end of tag");
    }
    P->depth--;
    return n;
}

static struct jnode *subscript(struct parser *P, struct jnode *obj) {
    struct jnode *parts[3] = {NULL, NULL, NULL};
    int k = 0;
    for (;;) {
        if (!is_op(P, ":") && !is_op(P, "]"))
            parts[k] = k ? expr(P) : tuple_expr(P, 1);
        if (accept_op(P, "]"))
            break;
        expect_op(P, ":");
        if (++k > 2)
            perr(P, "too many ':' in slice");
    }
    if (!k && !parts[0])
        perr(P, "empty subscript");
    struct jnode *n = node(P, k ? N_SLICE : N_ITEM);
    n->a = obj;
    n->b = parts[0];
    n->c = parts[1];
    n->d = parts[2];
    return n;
}

static struct jnode *postfix(struct parser *P, struct jnode *n) {
    for (;;) {
        if (accept_op(P, ".")) {
            struct jnode *a = node(P, N_ATTR);
            a->a = n;
            if (cur(P)->type == T_INT) { /* x.0 means x[0] */
                a->type = N_ITEM;
                a->b = literal(P, jv_int(cur(P)->i));
            } else
                a->name = expect_ident(P);
            n = a;
        } else if (accept_op(P, "[")) {
            n = subscript(P, n);
        } else if (accept_op(P, "(")) {
            struct jnode *c = node(P, N_CALL);
            c->a = n;
            call_args(P, c);
            n = c;
        } else
            return n;
    }
}

static int can_start_test_arg(struct parser *P) {
    struct jtok *t = cur(P);
    if (t->type == T_STRING || t->type == T_INT || t->type == T_FLOAT || is_op(P, "[") ||
        is_op(P, "{"))
        return 1;
    if (t->type != T_NAME)
        return 0;
    static const char *const kw[] = {"and", "or", "else", "if", "in", "not", "is", NULL};
    for (int i = 0; kw[i]; i++)
        if (is_name(P, kw[i]))
            return 0;
    return 1;
}

/* Filter and test names may be dotted in Jinja's grammar ("a.b"); such names then fail as
 * unknown only when evaluated. */
static const char *dotted_name(struct parser *P) {
    const char *name = expect_ident(P);
    while (accept_op(P, ".")) {
        const char *more = expect_ident(P);
        char *joined = jarena_alloc(P->a, strlen(name) + strlen(more) + 2);
        sprintf(joined, "%s.%s", name, more);
        name = joined;
    }
    return name;
}

static struct jnode *filters_and_tests(struct parser *P, struct jnode *n) {
    for (;;) {
        if (accept_op(P, "|")) {
            struct jnode *f = node(P, N_FILTER);
            f->name = dotted_name(P);
            f->a = n;
            if (accept_op(P, "("))
                call_args(P, f);
            n = f;
        } else if (accept_name(P, "is")) {
            struct jnode *t = node(P, N_TEST);
            t->lit.u.b = accept_name(P, "not");
            t->name = dotted_name(P);
            t->a = n;
            if (accept_op(P, "("))
                call_args(P, t);
            else if (can_start_test_arg(P))
                push_kid(P, t, postfix(P, primary(P)));
            if (is_name(P, "is"))
                perr(P, "you cannot chain multiple tests with 'is'");
            n = t;
        } else
            return n;
    }
}

static struct jnode *unary(struct parser *P, int with_filter) {
    struct jnode *n;
    if (++P->depth > 200)
        perr(P, "expression nested too deeply");
    P->depth--;
    if (is_op(P, "-") || is_op(P, "+")) {
        n = node(P, N_UNOP);
        n->name = tok_str(P, cur(P));
        P->i++;
        P->depth++;
        n->a = unary(P, 0);
        P->depth--;
    } else
        n = postfix(P, primary(P));
    return with_filter ? filters_and_tests(P, n) : n;
}

static struct jnode *binop(struct parser *P, const char *op, struct jnode *a, struct jnode *b) {
    struct jnode *n = node(P, N_BINOP);
    n->name = op;
    n->a = a;
    n->b = b;
    return n;
}

static struct jnode *pow_expr(struct parser *P) {
    struct jnode *n = unary(P, 1);
    while (accept_op(P, "**"))
        n = binop(P, "**", n, unary(P, 1));
    return n;
}

static struct jnode *math2(struct parser *P) {
    struct jnode *n = pow_expr(P);
    static const char *const ops[] = {"*", "/", "//", "%", NULL};
    for (;;) {
        int k = 0;
        while (ops[k] && !is_op(P, ops[k]))
            k++;
        if (!ops[k])
            return n;
        P->i++;
        n = binop(P, ops[k], n, pow_expr(P));
    }
}

static struct jnode *concat(struct parser *P) {
    struct jnode *n = math2(P);
    while (accept_op(P, "~"))
        n = binop(P, "~", n, math2(P));
    return n;
}

static struct jnode *math1(struct parser *P) {
    struct jnode *n = concat(P);
    for (;;) {
        if (accept_op(P, "+"))
            n = binop(P, "+", n, concat(P));
        else if (accept_op(P, "-"))
            n = binop(P, "-", n, concat(P));
        else
            return n;
    }
}

static struct jnode *compare(struct parser *P) {
    struct jnode *n = math1(P);
    static const char *const ops[] = {"==", "!=", "<=", ">=", "<", ">", NULL};
    for (;;) {
        int k = 0;
        while (ops[k] && !is_op(P, ops[k]))
            k++;
        if (ops[k]) {
            P->i++;
            n = binop(P, ops[k], n, math1(P));
        } else if (accept_name(P, "in")) {
            n = binop(P, "in", n, math1(P));
        } else if (is_name(P, "not") && P->t[P->i + 1].type == T_NAME && P->t[P->i + 1].n == 2 &&
                   !memcmp(P->t[P->i + 1].s, "in", 2)) {
            P->i += 2;
            n = binop(P, "notin", n, math1(P));
        } else
            return n;
    }
}

static struct jnode *not_expr(struct parser *P) {
    if (accept_name(P, "not")) {
        struct jnode *n = node(P, N_NOT);
        if (++P->depth > 200)
            perr(P, "expression nested too deeply");
        n->a = not_expr(P);
        P->depth--;
        return n;
    }
    return compare(P);
}

static struct jnode *and_expr(struct parser *P) {
    struct jnode *n = not_expr(P);
    while (accept_name(P, "and")) {
        struct jnode *a = node(P, N_AND);
        a->a = n;
        a->b = not_expr(P);
        n = a;
    }
    return n;
}

static struct jnode *or_expr(struct parser *P) {
    struct jnode *n = and_expr(P);
    while (accept_name(P, "or")) {
        struct jnode *o = node(P, N_OR);
        o->a = n;
        o->b = and_expr(P);
        n = o;
    }
    return n;
}

static struct jnode *expr(struct parser *P) {
    if (++P->depth > 200)
        perr(P, "expression nested too deeply");
    struct jnode *n = or_expr(P);
    while (accept_name(P, "if")) {
        struct jnode *c = node(P, N_COND);
        c->b = n;
        c->a = or_expr(P);
        if (accept_name(P, "else"))
            c->c = expr(P);
        n = c;
    }
    P->depth--;
    return n;
}

/* Jinja's parse_tuple: "a, b" (trailing comma allowed) is a tuple where a whole tag body or
 * a for-loop iterable is expected. */
static struct jnode *tuple_expr(struct parser *P, int condexpr) {
    struct jnode *n = condexpr ? expr(P) : or_expr(P);
    if (!is_op(P, ","))
        return n;
    struct jnode *l = node(P, N_LISTLIT);
    l->lit = jv_bool(1);
    push_kid(P, l, n);
    while (accept_op(P, ",")) {
        struct jtok *t = cur(P);
        if (t->type == T_BLOCK_END || t->type == T_VAR_END || is_name(P, "if") ||
            is_name(P, "recursive"))
            break;
        push_kid(P, l, condexpr ? expr(P) : or_expr(P));
    }
    return l;
}

/* ---- statements ---- */

static struct jnode *body(struct parser *P, const char *const *ends, const char **found);

static void end_block(struct parser *P) {
    if (cur(P)->type != T_BLOCK_END)
        perr(P, "expected end of block tag");
    P->i++;
}

static struct jnode *stmt_if(struct parser *P) {
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    struct jnode *n = node(P, N_IF);
    const char *found;
    n->a = tuple_expr(P, 0);
    end_block(P);
    n->b = body(P, ends, &found);
    if (!strcmp(found, "elif")) {
        n->c = stmt_if(P);
        return n;
    }
    if (!strcmp(found, "else")) {
        static const char *const ends2[] = {"endif", NULL};
        end_block(P);
        n->c = body(P, ends2, &found);
    }
    end_block(P);
    return n;
}

static struct jnode *stmt_for(struct parser *P) {
    static const char *const ends[] = {"else", "endfor", NULL};
    struct jnode *n = node(P, N_FOR);
    const char *found;
    do {
        push_name(P, n, expect_ident(P));
    } while (accept_op(P, ","));
    if (!accept_name(P, "in"))
        perr(P, "expected 'in' in for");
    n->a = tuple_expr(P, 0);
    if (accept_name(P, "if"))
        n->d = expr(P);
    n->lit = jv_bool(accept_name(P, "recursive")); /* loop(items) renders the body again */
    end_block(P);
    n->b = body(P, ends, &found);
    if (!strcmp(found, "else")) {
        static const char *const ends2[] = {"endfor", NULL};
        end_block(P);
        n->c = body(P, ends2, &found);
    }
    end_block(P);
    return n;
}

static struct jnode *filter_chain(struct parser *P);

static struct jnode *stmt_set(struct parser *P) {
    struct jnode *n = node(P, N_SET);
    const char *name = expect_ident(P);
    if (accept_op(P, ".")) {
        n->a = node(P, N_ATTR);
        n->a->a = node(P, N_NAME);
        n->a->a->name = name;
        n->a->name = expect_ident(P);
    } else {
        push_name(P, n, name);
        while (accept_op(P, ","))
            push_name(P, n, expect_ident(P));
    }
    if ((cur(P)->type == T_BLOCK_END || is_op(P, "|")) && !n->a && n->nnames == 1) {
        static const char *const ends[] = {"endset", NULL};
        const char *found;
        if (accept_op(P, "|")) /* {% set x | filter %}: the body through the filters */
            n->c = filter_chain(P);
        end_block(P);
        n->type = N_SETBLOCK;
        n->b = body(P, ends, &found);
        end_block(P);
        return n;
    }
    expect_op(P, "=");
    n->b = tuple_expr(P, 1);
    end_block(P);
    return n;
}

/* A block's filters, as {% filter %} and {% set x | %} take them: the first one's name (its
 * '|' already read), more after '|', applied to the name BODY_VAR (the rendered body). */
static struct jnode *filter_chain(struct parser *P) {
    struct jnode *body_ref = node(P, N_NAME), *f = node(P, N_FILTER);
    body_ref->name = BODY_VAR;
    f->name = dotted_name(P);
    f->a = body_ref;
    if (accept_op(P, "("))
        call_args(P, f);
    return filters_and_tests(P, f);
}

static struct jnode *stmt_filter(struct parser *P) {
    static const char *const ends[] = {"endfilter", NULL};
    struct jnode *n = node(P, N_FILTERBLOCK);
    const char *found;
    n->a = filter_chain(P);
    end_block(P);
    n->b = body(P, ends, &found);
    end_block(P);
    return n;
}

/* {% generation %}body{% endgeneration %}: the tag transformers adds to Jinja2 (its assistant
 * mask marks what the body renders). The body renders as a call block's caller would, in a
 * scope of its own: a {% with %} that names nothing. */
static struct jnode *stmt_generation(struct parser *P) {
    static const char *const ends[] = {"endgeneration", NULL};
    struct jnode *n = node(P, N_WITH);
    const char *found;
    if (!P->generation_line)
        P->generation_line = n->line;
    end_block(P);
    n->b = body(P, ends, &found);
    end_block(P);
    return n;
}

/* {% with a = x, b = y %}: names, their values in kids, the body in b. */
static struct jnode *stmt_with(struct parser *P) {
    static const char *const ends[] = {"endwith", NULL};
    struct jnode *n = node(P, N_WITH);
    const char *found;
    while (cur(P)->type != T_BLOCK_END) {
        if (n->nnames && !accept_op(P, ","))
            perr(P, "expected ',' in with");
        push_name(P, n, expect_ident(P));
        expect_op(P, "=");
        push_kid(P, n, expr(P));
    }
    end_block(P);
    n->b = body(P, ends, &found);
    end_block(P);
    return n;
}

static bool reads_name(const struct jnode *n, const char *name);

/* A macro's parameters, "(a, b=1)" (the '(' read), into n's names and kids (defaults or NULL). */
static void macro_params(struct parser *P, struct jnode *n) {
    while (!accept_op(P, ")")) {
        if (n->nnames && !accept_op(P, ","))
            perr(P, "expected ',' or ')' in macro parameters");
        if (accept_op(P, ")"))
            break;
        push_name(P, n, expect_ident(P));
        push_kid(P, n, accept_op(P, "=") ? expr(P) : NULL);
    }
}

/* As Jinja2's: a macro takes extra positional and keyword arguments only where its body reads
 * varargs / kwargs. */
static struct jv macro_takes(const struct jnode *body) {
    return jv_int((reads_name(body, "varargs") ? MACRO_VARARGS : 0) |
                  (reads_name(body, "kwargs") ? MACRO_KWARGS : 0));
}

/* {% call(params) m(args) %}body{% endcall %}: a the call, c the caller (a macro of body). */
static struct jnode *stmt_call(struct parser *P) {
    static const char *const ends[] = {"endcall", NULL};
    struct jnode *n = node(P, N_CALLBLOCK), *caller = node(P, N_MACRO);
    const char *found;
    caller->name = "caller";
    if (accept_op(P, "("))
        macro_params(P, caller);
    n->a = expr(P);
    if (n->a->type != N_CALL)
        perr(P, "expected a macro call in call block");
    end_block(P);
    caller->b = body(P, ends, &found);
    caller->lit = macro_takes(caller->b);
    n->c = caller;
    end_block(P);
    return n;
}

/* Whether the subtree reads the name (a macro's varargs or kwargs). */
static bool reads_name(const struct jnode *n, const char *name) {
    if (!n)
        return false;
    if (n->type == N_NAME && !strcmp(n->name, name))
        return true;
    if (reads_name(n->a, name) || reads_name(n->b, name) || reads_name(n->c, name) ||
        reads_name(n->d, name))
        return true;
    for (int i = 0; i < n->nkids; i++)
        if (reads_name(n->kids[i], name))
            return true;
    return false;
}

static struct jnode *stmt_macro(struct parser *P) {
    static const char *const ends[] = {"endmacro", NULL};
    struct jnode *n = node(P, N_MACRO);
    const char *found;
    n->name = expect_ident(P);
    expect_op(P, "(");
    macro_params(P, n);
    end_block(P);
    n->b = body(P, ends, &found);
    if (cur(P)->type == T_NAME) /* {% endmacro name %} */
        P->i++;
    end_block(P);
    n->lit = macro_takes(n->b);
    return n;
}

static struct jnode *statement(struct parser *P) {
    const char *kw = expect_ident(P);
    struct jnode *n;
    static const struct {
        const char *kw;
        struct jnode *(*parse)(struct parser *P);
    } tags[] = {{"if", stmt_if},         {"for", stmt_for},
                {"set", stmt_set},       {"macro", stmt_macro},
                {"filter", stmt_filter}, {"with", stmt_with},
                {"call", stmt_call},     {"generation", stmt_generation}};
    for (size_t i = 0; i < sizeof tags / sizeof *tags; i++)
        if (!strcmp(kw, tags[i].kw))
            return tags[i].parse(P);
    if (!strcmp(kw, "break") || !strcmp(kw, "continue")) {
        n = node(P, kw[0] == 'b' ? N_BREAK : N_CONTINUE);
        end_block(P);
        return n;
    }
    P->i--;
    perr(P, "unknown tag '%s'", kw);
}

/* Statements until a block tag named in ends (left positioned after its name). */
static struct jnode *body(struct parser *P, const char *const *ends, const char **found) {
    struct jnode *list = node(P, N_BLOCKLIST);
    if (++P->depth > 200)
        perr(P, "blocks nested too deeply");
    for (;;) {
        struct jtok *t = cur(P);
        if (t->type == T_EOF) {
            if (ends)
                perr(P, "missing '%s'", ends[0][0] == 'e' ? ends[0] : ends[1]);
            break;
        }
        if (t->type == T_TEXT) {
            struct jnode *x = node(P, N_TEXT);
            x->lit = jv_str(P->a, t->s, t->n);
            P->i++;
            push_kid(P, list, x);
        } else if (t->type == T_VAR_BEGIN) {
            P->i++;
            struct jnode *o = node(P, N_OUTPUT);
            o->a = tuple_expr(P, 1);
            if (cur(P)->type != T_VAR_END)
                perr(P, "expected '}}'");
            P->i++;
            push_kid(P, list, o);
        } else if (t->type == T_BLOCK_BEGIN) {
            P->i++;
            for (int k = 0; ends && ends[k]; k++)
                if (is_name(P, ends[k])) {
                    *found = ends[k];
                    P->i++;
                    P->depth--;
                    return list;
                }
            push_kid(P, list, statement(P));
        } else
            perr(P, "unexpected token");
    }
    P->depth--;
    return list;
}

enum ox_status jinja_parse(const char *src, size_t len, struct jtemplate **out) {
    *out = NULL;
    struct jtemplate *t = calloc(1, sizeof *t);
    struct parser P = {0};
    if (!t || !(t->arena = jarena_new((size_t)1 << 30))) {
        free(t);
        return ox_fail(OX_ERR_OOM, "jinja: out of memory");
    }
    P.a = t->arena;
    jarena_on_oom(t->arena, &P.fail);
    int r = setjmp(P.fail);
    if (r) {
        jinja_free(t);
        return ox_fail(r == 2 ? OX_ERR_OOM : OX_ERR_FORMAT, "jinja: %s",
                       r == 2 ? "out of memory" : P.err);
    }
    /* As Jinja's lexer: \r\n and \r become \n, and one trailing newline is dropped. */
    char *norm = jarena_alloc(t->arena, len + 1);
    size_t nn = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r' && i + 1 < len && src[i + 1] == '\n')
            continue;
        norm[nn++] = src[i] == '\r' ? '\n' : src[i];
    }
    if (nn && norm[nn - 1] == '\n')
        nn--;
    if (jlex(t->arena, norm, nn, &P.t, &P.n, P.err, sizeof P.err))
        longjmp(P.fail, 1);
    t->root = body(&P, NULL, NULL);
    t->generation_line = P.generation_line;
    jarena_on_oom(t->arena, NULL);
    *out = t;
    return OX_OK;
}

void jinja_free(struct jtemplate *t) {
    if (!t)
        return;
    jarena_free(t->arena);
    free(t);
}
