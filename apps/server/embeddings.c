/* embeddings.c: POST /v1/embeddings (OpenAI's): each input's pooled, normalized final hidden
 * state, as floats or base64 (the openai client's default). It runs on a context of its own
 * (serve --embeddings) on the HTTP thread, one request at a time (others get 429 rather than
 * holding HTTP threads): embedding a prompt is forward passes, without the engine's slots. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "embeddings.h"
#include "state.h"

/* Standard base64 of n bytes (NUL-terminated, malloc'd). */
static char *base64(const unsigned char *p, size_t n) {
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc(4 * ((n + 2) / 3) + 1), *o = out;
    for (size_t i = 0; out && i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        *o++ = digits[v >> 18 & 63], *o++ = digits[v >> 12 & 63];
        *o++ = i + 1 < n ? digits[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? digits[v & 63] : '=';
    }
    if (out)
        *o = '\0';
    return out;
}

/* One input as tokens (a string, with the vocabulary's BOS; or token ids), malloc'd, or NULL. */
static ox_token *input_tokens(const struct ox_model *m, json_t *in, size_t *n) {
    const struct ox_vocab *v = ox_model_vocab(m);
    if (json_is_string(in)) {
        size_t len = json_string_length(in), cap = len + 8;
        ox_token *t = malloc(cap * sizeof *t);
        if (t && (ox_tokenize(v, json_string_value(in), len, t, cap, n, true, false) != OX_OK ||
                  *n > cap)) {
            free(t);
            return NULL;
        }
        return t;
    }
    *n = json_array_size(in);
    ox_token *t = json_is_array(in) && *n ? malloc(*n * sizeof *t) : NULL;
    for (size_t i = 0; t && i < *n; i++) {
        json_t *x = json_array_get(in, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 ||
            json_integer_value(x) >= ox_model_n_vocab(m)) {
            free(t);
            return NULL;
        }
        t[i] = (ox_token)json_integer_value(x);
    }
    return t;
}

/* The request's inputs as an array: input may be one string, one token array, or an array of
 * either. */
static json_t *inputs_of(json_t *input) {
    json_t *first = json_array_get(input, 0);
    if (json_is_string(input) || (json_is_array(input) && json_is_integer(first)))
        return json_pack("[O]", input);
    return json_is_array(input) && json_array_size(input) ? json_incref(input) : NULL;
}

/* One embedding entry; vec has n floats. */
static json_t *entry(size_t index, const float *vec, int32_t n, bool b64) {
    json_t *e;
    if (b64) {
        char *text = base64((const unsigned char *)vec, (size_t)n * sizeof *vec);
        e = text ? json_string(text) : NULL;
        free(text);
    } else {
        e = json_array();
        for (int32_t i = 0; e && i < n; i++)
            json_array_append_new(e, json_real(vec[i]));
    }
    return json_pack("{s:s, s:I, s:o}", "object", "embedding", "index", (json_int_t)index,
                     "embedding", e);
}

struct reply embeddings_refusal(bool busy, const char *none) {
    struct reply r = busy ? reply_error(429, "rate_limit_error", NULL,
                                        "another embedding request is being computed: retry "
                                        "shortly")
                          : reply_error(501, "not_supported_error", NULL, none);
    r.retry_after = busy ? 1 : 0;
    return r;
}

struct reply embeddings_route(struct state *s, json_t *req) {
    const struct ox_model *m = state_model(s);
    if (state_pooling(s) == OX_POOLING_RANK)
        return reply_error(400, "invalid_request_error", NULL,
                           "this server reranks (--reranking): use /v1/rerank");
    const char *fmt = json_string_value(json_object_get(req, "encoding_format"));
    if (json_object_get(req, "encoding_format") &&
        (!fmt || (strcmp(fmt, "float") && strcmp(fmt, "base64"))))
        return reply_error(400, "invalid_request_error", "encoding_format",
                           "'encoding_format' must be \"float\" or \"base64\"");
    json_t *inputs = inputs_of(json_object_get(req, "input"));
    size_t n_in = json_array_size(inputs);
    if (!inputs || n_in > 2048) {
        json_decref(inputs);
        return reply_error(400, "invalid_request_error", "input",
                           "'input' must be a string, an array of token ids, or an array of up "
                           "to 2048 of either");
    }
    bool busy = false;
    struct ox_context *ctx = state_embed_begin(s, &busy);
    if (!ctx) {
        json_decref(inputs);
        return embeddings_refusal(busy,
                                  "this server does not make embeddings: serve with --embeddings");
    }
    int32_t dim = ox_model_n_embd(m);
    float *vec = malloc((size_t)dim * sizeof *vec);
    json_t *data = json_array();
    struct reply err = {0};
    size_t total = 0;
    for (size_t i = 0; vec && data && !err.status && i < n_in; i++) {
        size_t n = 0;
        ox_token *t = input_tokens(m, json_array_get(inputs, i), &n);
        enum ox_status st = !t || n == 0
                                ? OX_ERR_INVALID_ARG
                                : ox_embed(ctx, t, (int32_t)n, state_pooling(s), true, vec);
        free(t);
        total += n;
        if (st == OX_OK)
            json_array_append_new(data, entry(i, vec, dim, fmt && !strcmp(fmt, "base64")));
        else
            err = reply_error(400, "invalid_request_error", "input",
                              st == OX_ERR_CONTEXT_FULL
                                  ? "an input has more tokens than the context holds"
                                  : "each input must be non-empty text or token ids of the "
                                    "vocabulary");
    }
    state_embed_end(s);
    free(vec), json_decref(inputs);
    if (err.status || !data) {
        json_decref(data);
        return err.status ? err : reply_error(500, "server_error", NULL, "out of memory");
    }
    json_t *j = json_pack("{s:s, s:o, s:s, s:{s:I, s:I}}", "object", "list", "data", data, "model",
                          state_model_id(s), "usage", "prompt_tokens", (json_int_t)total,
                          "total_tokens", (json_int_t)total);
    return reply_json(j);
}
