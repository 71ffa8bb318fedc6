/* rerank.c: POST /v1/rerank (with /rerank, /v1/reranking, /reranking), as llama.cpp's server
 * answers it: a reranker (serve --reranking) scores each document's relevance to the query, and
 * the documents come back best first. Jina's and Cohere's request ({"query", "documents",
 * "top_n", "return_documents"}: {"results": [{"index", "relevance_score"}]}) or, when the body
 * has "texts", Hugging Face TEI's ([{"index", "score"}], "return_text"). It runs on the
 * embeddings context, one request at a time, as embeddings.c does. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "embeddings.h"
#include "rerank.h"
#include "state.h"

enum { MAX_DOCUMENTS = 1024 };

/* A document's text: a string, or an object with a "text" string (Cohere's older form). */
static const char *document_text(json_t *d) {
    return json_is_string(d) ? json_string_value(d) : json_string_value(json_object_get(d, "text"));
}

/* Every document a text (at least one, at most MAX_DOCUMENTS), else NULL. */
static json_t *documents_of(json_t *req, bool tei) {
    json_t *docs = json_object_get(req, tei ? "texts" : "documents");
    size_t n = json_array_size(docs);
    if (n == 0 || n > MAX_DOCUMENTS)
        return NULL;
    for (size_t i = 0; i < n; i++)
        if (!document_text(json_array_get(docs, i)))
            return NULL;
    return docs;
}

struct scored {
    size_t index;
    float score;
};

static int best_first(const void *a, const void *b) {
    const struct scored *x = a, *y = b; /* ties: the earlier document first */
    if (x->score != y->score)
        return (x->score < y->score) - (x->score > y->score);
    return (x->index > y->index) - (x->index < y->index);
}

/* One pair's score: the first of the classifier's (scores has ox_model_n_cls_out room). */
static enum ox_status score_pair(struct ox_context *ctx, const struct ox_model *m,
                                 const char *query, const char *doc, float *scores, size_t *n) {
    ox_token *t = NULL;
    enum ox_status st = ox_tokenize_rerank(m, query, doc, NULL, 0, n);
    if (st == OX_OK && !(t = malloc((*n ? *n : 1) * sizeof *t)))
        st = OX_ERR_OOM;
    if (st == OX_OK)
        st = ox_tokenize_rerank(m, query, doc, t, *n, n);
    if (st == OX_OK)
        st = ox_embed(ctx, t, (int32_t)*n, OX_POOLING_RANK, false, scores);
    free(t);
    return st;
}

/* Each document's score against the query into out; the tokens used are added to *tokens. */
static struct reply score_all(struct ox_context *ctx, const struct ox_model *m, const char *query,
                              json_t *docs, struct scored *out, size_t *tokens) {
    float *scores = malloc((size_t)ox_model_n_cls_out(m) * sizeof *scores);
    if (!scores)
        return reply_error(500, "server_error", NULL, "out of memory");
    struct reply err = {0};
    for (size_t i = 0; !err.status && i < json_array_size(docs); i++) {
        size_t n = 0;
        enum ox_status st =
            score_pair(ctx, m, query, document_text(json_array_get(docs, i)), scores, &n);
        out[i] = (struct scored){i, st == OX_OK ? scores[0] : 0.0f};
        *tokens += n;
        if (st == OX_ERR_CONTEXT_FULL)
            err = reply_error(400, "invalid_request_error", "documents",
                              "the query and a document have more tokens than the context holds");
        else if (st != OX_OK)
            err = reply_error(500, "server_error", NULL, ox_last_error());
    }
    free(scores);
    return err;
}

/* The answer: the documents best first, top_n of them, in the request's dialect. */
static json_t *results(struct state *s, const struct scored *sc, size_t n, json_t *docs, bool tei,
                       bool with_text, size_t tokens) {
    json_t *list = json_array();
    for (size_t i = 0; list && i < n; i++) {
        json_t *r = json_pack("{s:I, s:f}", "index", (json_int_t)sc[i].index,
                              tei ? "score" : "relevance_score", (double)sc[i].score);
        const char *text = document_text(json_array_get(docs, sc[i].index));
        if (r && with_text)
            json_object_set_new(r, tei ? "text" : "document",
                                tei ? json_string(text) : json_pack("{s:s}", "text", text));
        json_array_append_new(list, r);
    }
    if (tei || !list)
        return list;
    return json_pack("{s:s, s:s, s:{s:I, s:I}, s:o}", "model", state_model_id(s), "object", "list",
                     "usage", "prompt_tokens", (json_int_t)tokens, "total_tokens",
                     (json_int_t)tokens, "results", list);
}

/* The request's fields, checked: query, documents, top_n and whether to echo the texts. */
static struct reply read_request(json_t *req, bool tei, const char **query, json_t **docs,
                                 size_t *top_n, bool *with_text) {
    json_t *q = json_object_get(req, "query"), *top = json_object_get(req, "top_n");
    *query = json_string_value(q);
    if (!*query)
        return reply_error(400, "invalid_request_error", "query", "\"query\" must be a string");
    if (!(*docs = documents_of(req, tei)))
        return reply_error(400, "invalid_request_error", tei ? "texts" : "documents",
                           "\"documents\" must be an array of 1 to 1024 strings");
    if (top && (!json_is_integer(top) || json_integer_value(top) < 1))
        return reply_error(400, "invalid_request_error", "top_n",
                           "\"top_n\" must be a positive integer");
    size_t n = json_array_size(*docs);
    *top_n = top && (size_t)json_integer_value(top) < n ? (size_t)json_integer_value(top) : n;
    *with_text = json_is_true(json_object_get(req, tei ? "return_text" : "return_documents"));
    return (struct reply){0};
}

struct reply rerank_route(struct state *s, json_t *req) {
    const struct ox_model *m = state_model(s);
    bool tei = json_object_get(req, "texts") != NULL, with_text = false;
    const char *query = NULL;
    json_t *docs = NULL;
    size_t top_n = 0, tokens = 0;
    struct reply r = read_request(req, tei, &query, &docs, &top_n, &with_text);
    if (r.status)
        return r;
    bool busy = false;
    struct ox_context *ctx =
        state_pooling(s) == OX_POOLING_RANK ? state_embed_begin(s, &busy) : NULL;
    if (!ctx)
        return embeddings_refusal(busy,
                                  "this server does not rerank: serve a reranker with --reranking");
    size_t n = json_array_size(docs);
    struct scored *sc = malloc(n * sizeof *sc);
    r = sc ? score_all(ctx, m, query, docs, sc, &tokens)
           : reply_error(500, "server_error", NULL, "out of memory");
    state_embed_end(s);
    json_t *j = NULL;
    if (!r.status) {
        qsort(sc, n, sizeof *sc, best_first);
        j = results(s, sc, top_n, docs, tei, with_text, tokens);
    }
    free(sc);
    return r.status ? r : reply_json(j); /* j is NULL when r is an error */
}
