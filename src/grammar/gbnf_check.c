/* gbnf_check.c: whole-grammar checks after parsing: the root rule, which rules are nullable,
 * and left recursion (which would make the stack expansion grow without end). */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"

static bool is_alt_end(uint32_t type) {
    return type == GRAM_END || type == GRAM_ALT;
}

/* Fixed point: a rule is nullable when one alternative is all nullable references. */
static void compute_nullable(struct gram *g) {
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t r = 0; r < g->n_rules; r++) {
            if (g->nullable[r])
                continue;
            const struct gram_elem *e = g->elems + g->rule_start[r];
            bool all = true;
            for (;; e++) {
                if (is_alt_end(e->type)) {
                    if (all) {
                        g->nullable[r] = changed = true;
                        break;
                    }
                    if (e->type == GRAM_END)
                        break;
                    all = true;
                } else if (e->type != GRAM_REF || !g->nullable[e->value]) {
                    all = false;
                }
            }
        }
    }
}

/* A "left edge" A -> B: B is referenced where everything before it in the alternative is
 * nullable, so expanding A can expand B without consuming input. */
struct edge {
    uint32_t from, to;
    bool tail; /* B ends the alternative: expanding it replaces, not grows, the stack */
};

struct edges {
    struct edge *v;
    size_t n, cap;
};

static enum ox_status collect_edges(const struct gram *g, struct edges *es) {
    for (uint32_t r = 0; r < g->n_rules; r++) {
        const struct gram_elem *e = g->elems + g->rule_start[r];
        bool open = true; /* still in the nullable prefix of this alternative */
        for (;; e++) {
            if (is_alt_end(e->type)) {
                if (e->type == GRAM_END)
                    break;
                open = true;
                continue;
            }
            if (!open)
                continue;
            if (e->type != GRAM_REF) {
                open = false;
                continue;
            }
            if (es->n == es->cap) {
                size_t cap = es->cap ? es->cap * 2 : 64;
                struct edge *v = realloc(es->v, cap * sizeof(*v));
                if (!v)
                    return ox_fail(OX_ERR_OOM, "grammar: out of memory");
                es->v = v;
                es->cap = cap;
            }
            es->v[es->n++] = (struct edge){r, e->value, is_alt_end(e[1].type)};
            open = g->nullable[e->value];
        }
    }
    return OX_OK;
}

/* Depth-first search over left edges (CSR: adj[first[r] .. first[r + 1])): can `from` reach
 * `target`? mark[] holds the stamp of the last search that visited a rule. */
static bool reaches(const uint32_t *first, const uint32_t *adj, uint32_t *mark, uint32_t stamp,
                    uint32_t *todo, uint32_t from, uint32_t target) {
    size_t n = 0;
    todo[n++] = from;
    mark[from] = stamp;
    while (n) {
        uint32_t r = todo[--n];
        if (r == target)
            return true;
        for (uint32_t i = first[r]; i < first[r + 1]; i++) {
            if (mark[adj[i]] != stamp) {
                mark[adj[i]] = stamp;
                todo[n++] = adj[i];
            }
        }
    }
    return false;
}

/* Only growing cycles are errors: a cycle made of tail edges alone (x ::= y x | "" with y
 * nullable, from `(y)*`) revisits an identical stack, which the matcher deduplicates. */
static enum ox_status check_left_recursion(const struct gram *g, const struct edges *es) {
    uint32_t n = g->n_rules;
    uint32_t *first = calloc(n + 1, sizeof(*first));
    uint32_t *adj = malloc((es->n + 1) * sizeof(*adj));
    uint32_t *mark = calloc(n, sizeof(*mark));
    uint32_t *todo = malloc((n + 1) * sizeof(*todo));
    enum ox_status st = OX_OK;
    if (!first || !adj || !mark || !todo)
        st = ox_fail(OX_ERR_OOM, "grammar: out of memory");
    if (st == OX_OK) {
        for (size_t i = 0; i < es->n; i++)
            first[es->v[i].from + 1]++;
        for (uint32_t r = 0; r < n; r++)
            first[r + 1] += first[r];
        for (size_t i = 0; i < es->n; i++) /* edges come grouped by `from`, in order */
            adj[i] = es->v[i].to;
    }
    for (size_t i = 0; st == OX_OK && i < es->n; i++) {
        const struct edge *e = &es->v[i];
        if (e->tail || !reaches(first, adj, mark, (uint32_t)i + 1, todo, e->to, e->from))
            continue;
        const char *name = g->rule_names[e->from];
        int len = (int)strcspn(name, "~");
        st = ox_fail(OX_ERR_FORMAT,
                     "grammar: left recursion in rule '%.*s': it can reach itself without "
                     "consuming input",
                     len, name);
    }
    free(first);
    free(adj);
    free(mark);
    free(todo);
    return st;
}

enum ox_status gram_check(struct gram *g) {
    g->root = UINT32_MAX;
    for (uint32_t r = 0; r < g->n_rules; r++)
        if (strcmp(g->rule_names[r], "root") == 0)
            g->root = r;
    if (g->root == UINT32_MAX)
        return ox_fail(OX_ERR_FORMAT, "grammar: no 'root' rule");
    g->nullable = calloc(g->n_rules + 1, sizeof(*g->nullable));
    if (!g->nullable)
        return ox_fail(OX_ERR_OOM, "grammar: out of memory");
    compute_nullable(g);
    struct edges es = {0};
    enum ox_status st = collect_edges(g, &es);
    if (st == OX_OK)
        st = check_left_recursion(g, &es);
    free(es.v);
    return st;
}
