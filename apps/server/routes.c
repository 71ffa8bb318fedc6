/* routes.c: the endpoints of `oxidize serve`: GET /health, GET /v1/models, POST /v1/completions
 * and /v1/chat/completions in OpenAI's shapes, POST /tokenize and /detokenize in llama.cpp's.
 * Requests are parsed with jansson and checked field by field. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server.h"

/* An error in OpenAI's shape. */
static struct reply error_reply(unsigned status, const char *type, const char *param,
                                const char *msg) {
    json_t *e = json_pack("{s:{s:s, s:s, s:s?, s:n}}", "error", "message", msg, "type", type,
                          "param", param, "code");
    char *body = e ? json_dumps(e, JSON_COMPACT) : NULL;
    json_decref(e);
    return (struct reply){status, body, NULL};
}

static struct reply json_reply(json_t *j) {
    char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return body ? (struct reply){200, body, NULL}
                : error_reply(500, "server_error", NULL, "out of memory");
}

/* JSON strings are UTF-8: generated text may not be. */
char *server_valid_utf8(const char *text, size_t len) {
    char *out = malloc(3 * len + 1), *o = out;
    for (size_t i = 0; out && i < len;) {
        const unsigned char *p = (const unsigned char *)text + i;
        size_t n = p[0] < 0x80             ? 1
                   : (p[0] & 0xe0) == 0xc0 ? 2
                   : (p[0] & 0xf0) == 0xe0 ? 3
                   : (p[0] & 0xf8) == 0xf0 ? 4
                                           : 0;
        bool ok = n > 0 && i + n <= len && (n != 2 || p[0] >= 0xc2);
        for (size_t k = 1; ok && k < n; k++)
            ok = (p[k] & 0xc0) == 0x80;
        if (ok && n == 3) /* no overlong forms or surrogates */
            ok = !(p[0] == 0xe0 && p[1] < 0xa0) && !(p[0] == 0xed && p[1] >= 0xa0);
        if (ok && n == 4)
            ok = !(p[0] == 0xf0 && p[1] < 0x90) && !(p[0] == 0xf4 && p[1] >= 0x90) && p[0] <= 0xf4;
        if (!ok) {
            memcpy(o, "\xef\xbf\xbd", 3), o += 3, i++;
            continue;
        }
        memcpy(o, p, n), o += n, i += n;
    }
    if (out)
        *o = '\0';
    return out;
}

/* The generated tokens as text, as `oxidize run` prints them. */
static char *detokenize(const struct ox_vocab *v, const ox_token *t, int32_t n) {
    struct ox_detok_stream *ds = NULL;
    size_t cap = 256, len = 0;
    char *text = malloc(cap);
    if (!text || ox_detok_stream_create(v, false, &ds) != OX_OK) {
        free(text);
        return NULL;
    }
    for (int32_t i = 0; i <= n && text; i++) {
        const char *piece;
        size_t plen = 0;
        if (i < n ? ox_detok_stream_push(ds, t[i], &piece, &plen) != OX_OK
                  : ox_detok_stream_flush(ds, &piece, &plen) != OX_OK)
            plen = 0;
        if (len + plen > cap) {
            char *grown = realloc(text, cap = 2 * (len + plen));
            if (!grown)
                free(text);
            text = grown;
        }
        if (text && plen)
            memcpy(text + len, piece, plen), len += plen;
    }
    ox_detok_stream_free(ds);
    char *out = text ? server_valid_utf8(text, len) : NULL;
    free(text);
    return out;
}

/* A number field in [lo, hi] (absent: def); false with *err naming it otherwise. */
static bool number_field(json_t *req, const char *key, double lo, double hi, double def,
                         double *out, struct reply *err) {
    json_t *v = json_object_get(req, key);
    *out = def;
    if (!v || json_is_null(v))
        return true;
    if (!json_is_number(v) || json_number_value(v) < lo || json_number_value(v) > hi) {
        char msg[160];
        snprintf(msg, sizeof msg, "'%s' must be a number from %g to %g", key, lo, hi);
        *err = error_reply(400, "invalid_request_error", key, msg);
        return false;
    }
    *out = json_number_value(v);
    return true;
}

/* The sampler OpenAI's parameters describe: greedy at temperature 0, else top-p, temperature
 * and a draw seeded by seed (or the clock). */
static struct ox_sampler *make_sampler(double temp, double top_p, json_t *seed) {
    static unsigned counter;
    struct ox_sampler *smp = NULL;
    if (ox_sampler_create(&smp) != OX_OK)
        return NULL;
    enum ox_status st;
    if (temp <= 0.0) {
        st = ox_sampler_add_greedy(smp);
    } else {
        uint32_t s = json_is_integer(seed) ? (uint32_t)json_integer_value(seed)
                                           : (uint32_t)time(NULL) ^ (0x9e3779b9u * ++counter);
        st = top_p < 1.0 ? ox_sampler_add_top_p(smp, (float)top_p, 1) : OX_OK;
        if (st == OX_OK)
            st = ox_sampler_add_temp(smp, (float)temp);
        if (st == OX_OK)
            st = ox_sampler_add_dist(smp, s);
    }
    if (st != OX_OK) {
        ox_sampler_free(smp);
        return NULL;
    }
    return smp;
}

/* The reply of a finished generation: a text_completion, or a chat.completion. */
static struct reply result_json(struct server *s, bool chat, const char *text, int32_t n_prompt,
                                int32_t n_out, enum ox_finish reason) {
    char id[64];
    static unsigned long counter;
    snprintf(id, sizeof id, "%s-%lx%lx", chat ? "chatcmpl" : "cmpl", (unsigned long)time(NULL),
             ++counter);
    const char *finish = reason == OX_FINISH_STOP ? "stop" : "length";
    json_t *choice =
        chat ? json_pack("{s:i, s:{s:s, s:s}, s:n, s:s}", "index", 0, "message", "role",
                         "assistant", "content", text, "logprobs", "finish_reason", finish)
             : json_pack("{s:s, s:i, s:n, s:s}", "text", text, "index", 0, "logprobs",
                         "finish_reason", finish);
    return json_reply(json_pack("{s:s, s:s, s:I, s:s, s:[o], s:{s:i, s:i, s:i}}", "id", id,
                                "object", chat ? "chat.completion" : "text_completion", "created",
                                (json_int_t)time(NULL), "model", server_model_id(s), "choices",
                                choice, "usage", "prompt_tokens", n_prompt, "completion_tokens",
                                n_out, "total_tokens", n_prompt + n_out));
}

/* The sampling fields both endpoints take: max (its key and default), temperature, top_p,
 * seed; a sampler for them, or NULL with *err set. */
static struct ox_sampler *request_sampler(struct server *s, json_t *req, const char *max_key,
                                          double max_def, double *max, struct reply *err) {
    double temp, top_p;
    if (!number_field(req, max_key, 0, server_slot_ctx(s), max_def, max, err) ||
        !number_field(req, "temperature", 0, 2, 1, &temp, err) ||
        !number_field(req, "top_p", 0, 1, 1, &top_p, err))
        return NULL;
    json_t *stream = json_object_get(req, "stream");
    if (stream && !json_is_boolean(stream) && !json_is_null(stream)) {
        *err = error_reply(400, "invalid_request_error", "stream", "'stream' must be a boolean");
        return NULL;
    }
    if (top_p <= 0.0) {
        *err = error_reply(400, "invalid_request_error", "top_p", "'top_p' must be above 0");
        return NULL;
    }
    struct ox_sampler *smp = make_sampler(temp, top_p, json_object_get(req, "seed"));
    if (!smp)
        *err = error_reply(500, "server_error", NULL, "out of memory");
    return smp;
}

/* text as tokens for a slot, or NULL with *err set (400 for what does not fit). */
static ox_token *prompt_tokens(struct server *s, const char *text, size_t len, bool add_bos,
                               bool special, size_t *n, struct reply *err) {
    const struct ox_vocab *v = ox_model_vocab(server_model(s));
    size_t cap = len + 8;
    ox_token *tokens = malloc(cap * sizeof *tokens);
    if (!tokens || ox_tokenize(v, text, len, tokens, cap, n, add_bos, special) != OX_OK ||
        *n > cap) {
        free(tokens);
        *err =
            error_reply(400, "invalid_request_error", "prompt", "the prompt cannot be tokenized");
        return NULL;
    }
    if (*n == 0 || (int32_t)*n > server_slot_ctx(s)) {
        free(tokens);
        char msg[160];
        snprintf(msg, sizeof msg, "the prompt has %zu tokens; a request holds 1 to %d", *n,
                 server_slot_ctx(s));
        *err = error_reply(400, "invalid_request_error", "prompt", msg);
        return NULL;
    }
    return tokens;
}

/* Generate and answer, whole or streamed; takes the tokens and the sampler. */
static struct reply generate(struct server *s, json_t *req, bool chat, ox_token *tokens, size_t n,
                             double max, struct ox_sampler *smp) {
    if (json_is_true(json_object_get(req, "stream"))) {
        enum ox_status st;
        struct MHD_Response *r = stream_start(s, tokens, (int32_t)n, (int32_t)max, smp, chat, &st);
        free(tokens);
        if (r)
            return (struct reply){200, NULL, r};
        return st == OX_ERR_ABORTED ? error_reply(503, "server_error", NULL, "shutting down")
                                    : error_reply(500, "server_error", NULL, "cannot start");
    }
    ox_token *out = NULL;
    int32_t n_out = 0;
    enum ox_finish reason = OX_FINISH_ERROR;
    enum ox_status st =
        server_generate(s, tokens, (int32_t)n, (int32_t)max, smp, &out, &n_out, &reason);
    ox_sampler_free(smp);
    free(tokens);
    struct reply r;
    if (st == OX_ERR_ABORTED)
        r = error_reply(503, "server_error", NULL, "the server is shutting down");
    else if (st != OX_OK || reason == OX_FINISH_ERROR || reason == OX_FINISH_CANCELLED)
        r = error_reply(500, "server_error", NULL, "the generation failed");
    else {
        char *text = detokenize(ox_model_vocab(server_model(s)), out, n_out);
        r = text ? result_json(s, chat, text, (int32_t)n, n_out, reason)
                 : error_reply(500, "server_error", NULL, "out of memory");
        free(text);
    }
    free(out);
    return r;
}

/* POST /v1/completions: prompt (a string), max_tokens, temperature, top_p, seed, stream. */
static struct reply completions(struct server *s, json_t *req) {
    struct reply err;
    json_t *prompt = json_object_get(req, "prompt");
    if (!json_is_string(prompt))
        return error_reply(400, "invalid_request_error", "prompt", "'prompt' must be a string");
    double max;
    struct ox_sampler *smp = request_sampler(s, req, "max_tokens", 16, &max, &err);
    if (!smp)
        return err;
    size_t n = 0;
    ox_token *tokens = prompt_tokens(s, json_string_value(prompt), json_string_length(prompt), true,
                                     false, &n, &err);
    if (!tokens) {
        ox_sampler_free(smp);
        return err;
    }
    return generate(s, req, false, tokens, n, max, smp);
}

/* The conversation rendered with the chat template (malloc'd), or NULL with *err set. */
static char *render_chat(struct server *s, json_t *messages, size_t *len, struct reply *err) {
    size_t n = json_array_size(messages);
    const char *tmpl = server_chat_template(s);
    if (!tmpl) {
        *err = error_reply(400, "invalid_request_error", NULL,
                           "the model has no chat template (serve with --chat-template FILE)");
        return NULL;
    }
    if (!json_is_array(messages) || n == 0 || n > 4096) {
        *err = error_reply(400, "invalid_request_error", "messages",
                           "'messages' must be an array of 1 to 4096 messages");
        return NULL;
    }
    struct ox_chat_message *msgs = calloc(n, sizeof *msgs);
    for (size_t i = 0; msgs && i < n; i++) {
        json_t *m = json_array_get(messages, i);
        msgs[i].role = json_string_value(json_object_get(m, "role"));
        msgs[i].content = json_string_value(json_object_get(m, "content"));
        if (!msgs[i].role || !msgs[i].content) {
            free(msgs);
            *err = error_reply(400, "invalid_request_error", "messages",
                               "each message needs a string 'role' and a string 'content'");
            return NULL;
        }
    }
    char *text = NULL;
    enum ox_status st =
        msgs ? ox_chat_apply_template(server_model(s), tmpl, msgs, n, true, NULL, NULL, 0, len)
             : OX_ERR_OOM;
    if (st == OX_OK && (text = malloc(*len + 1)) != NULL)
        st =
            ox_chat_apply_template(server_model(s), tmpl, msgs, n, true, NULL, text, *len + 1, len);
    free(msgs);
    if (st != OX_OK || !text) {
        free(text);
        char msg[300];
        snprintf(msg, sizeof msg, "the chat template failed: %s", ox_last_error());
        *err = error_reply(400, "invalid_request_error", "messages", msg);
        return NULL;
    }
    return text;
}

/* POST /v1/chat/completions: messages (role and content strings), max_completion_tokens (or
 * max_tokens), temperature, top_p, seed, stream. The reply ends at the end of the turn. */
static struct reply chat_completions(struct server *s, json_t *req) {
    struct reply err;
    double max;
    const char *key =
        json_object_get(req, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    struct ox_sampler *smp = request_sampler(s, req, key, -1, &max, &err);
    if (!smp)
        return err;
    size_t len = 0, n = 0;
    char *text = render_chat(s, json_object_get(req, "messages"), &len, &err);
    /* the BOS the template wrote counts; control tokens in it are themselves (as `chat`) */
    const struct ox_vocab *v = ox_model_vocab(server_model(s));
    char bos[64];
    int32_t bl = ox_token_to_piece(v, ox_vocab_bos(v), bos, sizeof bos, 0, true);
    bool has_bos = text && bl > 0 && bl < (int32_t)sizeof bos && len >= (size_t)bl &&
                   !memcmp(text, bos, (size_t)bl);
    ox_token *tokens = text ? prompt_tokens(s, text, len, !has_bos, true, &n, &err) : NULL;
    free(text);
    if (!tokens) {
        ox_sampler_free(smp);
        return err;
    }
    return generate(s, req, true, tokens, n, max, smp);
}

/* POST /tokenize (llama.cpp's): content, add_special (default false) -> tokens. */
static struct reply tokenize_route(struct server *s, json_t *req) {
    json_t *content = json_object_get(req, "content");
    if (!json_is_string(content))
        return error_reply(400, "invalid_request_error", "content", "'content' must be a string");
    size_t len = json_string_length(content), n = 0, cap = len + 8;
    ox_token *t = malloc(cap * sizeof *t);
    if (!t ||
        ox_tokenize(ox_model_vocab(server_model(s)), json_string_value(content), len, t, cap, &n,
                    json_is_true(json_object_get(req, "add_special")), true) != OX_OK ||
        n > cap) {
        free(t);
        return error_reply(400, "invalid_request_error", "content", "cannot tokenize");
    }
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++)
        json_array_append_new(arr, json_integer(t[i]));
    free(t);
    return json_reply(arr ? json_pack("{s:o}", "tokens", arr) : NULL);
}

/* POST /detokenize (llama.cpp's): tokens -> content. */
static struct reply detokenize_route(struct server *s, json_t *req) {
    json_t *arr = json_object_get(req, "tokens");
    const struct ox_vocab *v = ox_model_vocab(server_model(s));
    size_t n = json_array_size(arr);
    if (!json_is_array(arr) || n > (1u << 20))
        return error_reply(400, "invalid_request_error", "tokens", "'tokens' must be an array");
    ox_token *t = malloc((n ? n : 1) * sizeof *t);
    for (size_t i = 0; t && i < n; i++) {
        json_t *x = json_array_get(arr, i);
        json_int_t id = json_is_integer(x) ? json_integer_value(x) : -1;
        if (id < 0 || id >= ox_model_n_vocab(server_model(s))) {
            free(t);
            return error_reply(400, "invalid_request_error", "tokens",
                               "every token must be an id of the vocabulary");
        }
        t[i] = (ox_token)id;
    }
    /* as llama_detokenize: an SPM vocabulary's leading space goes */
    int64_t len = t ? ox_detokenize(v, t, n, NULL, 0, false, false) : -1;
    char *raw = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (raw)
        ox_detokenize(v, t, n, raw, (size_t)len, false, false);
    char *text = raw ? server_valid_utf8(raw, (size_t)len) : NULL;
    free(raw), free(t);
    struct reply r = text ? json_reply(json_pack("{s:s}", "content", text))
                          : error_reply(500, "server_error", NULL, "out of memory");
    free(text);
    return r;
}

static struct reply models(struct server *s) {
    return json_reply(json_pack("{s:s, s:[{s:s, s:s, s:i, s:s}]}", "object", "list", "data", "id",
                                server_model_id(s), "object", "model", "created", 0, "owned_by",
                                "oxidize"));
}

struct reply route_request(struct server *s, const char *method, const char *path, const char *body,
                           size_t len) {
    bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    if (!strcmp(path, "/health"))
        return get ? json_reply(json_pack("{s:s}", "status", "ok"))
                   : error_reply(405, "invalid_request_error", NULL, "use GET");
    if (!strcmp(path, "/v1/models"))
        return get ? models(s) : error_reply(405, "invalid_request_error", NULL, "use GET");
    bool chat = !strcmp(path, "/v1/chat/completions"), tok = !strcmp(path, "/tokenize");
    bool detok = !strcmp(path, "/detokenize");
    if (!chat && !tok && !detok && strcmp(path, "/v1/completions"))
        return error_reply(404, "invalid_request_error", NULL, "no such endpoint");
    if (!post)
        return error_reply(405, "invalid_request_error", NULL, "use POST");
    json_error_t jerr;
    json_t *req = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(req)) {
        char msg[256];
        snprintf(msg, sizeof msg, "the body is not a JSON object: %s", req ? "" : jerr.text);
        json_decref(req);
        return error_reply(400, "invalid_request_error", NULL, msg);
    }
    struct reply r = tok     ? tokenize_route(s, req)
                     : detok ? detokenize_route(s, req)
                     : chat  ? chat_completions(s, req)
                             : completions(s, req);
    json_decref(req);
    return r;
}
