/* rerank.c: a reranker's input for one query and one document, the tokens llama.cpp's server
 * (format_prompt_rerank) gives it. */
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

/* A growing token list: the pieces are tokenized straight into the caller's buffer while they
 * fit, and only counted past cap. */
struct rerank_out {
    ox_token *ids;
    size_t cap, n;
};

static void push(struct rerank_out *o, ox_token t) {
    if (o->n < o->cap)
        o->ids[o->n] = t;
    o->n++;
}

static enum ox_status push_text(struct rerank_out *o, const struct ox_vocab *v, const char *text,
                                size_t len, bool parse_special) {
    size_t room = o->n < o->cap ? o->cap - o->n : 0, need;
    OX_TRY(
        ox_tokenize(v, text, len, room ? o->ids + o->n : NULL, room, &need, false, parse_special));
    o->n += need;
    return OX_OK;
}

/* The template with every {query} and {document} replaced, malloc'd (NULL: out of memory). */
static char *fill_template(const char *t, const char *query, const char *doc) {
    size_t nq = strlen(query), nd = strlen(doc), len = 0;
    for (const char *p = t; *p;) { /* the length first, then the copy */
        bool q = !strncmp(p, "{query}", 7), d = !strncmp(p, "{document}", 10);
        len += q ? nq : d ? nd : 1;
        p += q ? 7 : d ? 10 : 1;
    }
    char *out = malloc(len + 1), *w = out;
    for (const char *p = t; out && *p;) {
        bool q = !strncmp(p, "{query}", 7), d = !strncmp(p, "{document}", 10);
        const char *src = q ? query : d ? doc : p;
        size_t n = q ? nq : d ? nd : 1;
        memcpy(w, src, n), w += n;
        p += q ? 7 : d ? 10 : 1;
    }
    if (out)
        *w = '\0';
    return out;
}

enum ox_status ox_tokenize_rerank(const struct ox_model *m, const char *query, const char *document,
                                  ox_token *tokens, size_t cap, size_t *n_tokens) {
    if (!m || !query || !document || !n_tokens || (cap && !tokens))
        return ox_fail(OX_ERR_INVALID_ARG, "ox_tokenize_rerank: NULL argument");
    const struct ox_vocab *v = m->vocab;
    struct rerank_out o = {tokens, cap, 0};
    const char *tmpl = ox_model_chat_template(m, "rerank");
    enum ox_status st = OX_OK;
    if (tmpl) {
        char *text = fill_template(tmpl, query, document);
        st = text ? push_text(&o, v, text, strlen(text), true)
                  : ox_fail(OX_ERR_OOM, "ox_tokenize_rerank: out of memory");
        free(text);
    } else {
        ox_token eos = ox_vocab_eos(v) >= 0 ? ox_vocab_eos(v) : ox_vocab_sep(v);
        bool add_eos = ox_vocab_add_eos(v) && eos >= 0;
        bool add_sep = ox_vocab_add_sep(v) && ox_vocab_sep(v) >= 0;
        if (ox_vocab_add_bos(v) && ox_vocab_bos(v) >= 0)
            push(&o, ox_vocab_bos(v));
        st = push_text(&o, v, query, strlen(query), false);
        if (add_eos)
            push(&o, eos);
        if (add_sep)
            push(&o, ox_vocab_sep(v));
        if (st == OX_OK)
            st = push_text(&o, v, document, strlen(document), false);
        if (add_eos)
            push(&o, eos);
    }
    *n_tokens = o.n;
    return st;
}
