/* routes.c: the endpoints of `oxidize serve`, OpenAI's (/v1/completions, /v1/chat/completions,
 * /v1/models) and llama.cpp's (/completion, /tokenize, /detokenize, /apply-template, /props,
 * /slots, /metrics, /health). Requests are parsed with jansson and checked field by field;
 * generations are handed back to server.c to start. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_tools.h"
#include "embeddings.h"
#include "gen.h"
#include "params.h"
#include "rerank.h"
#include "routes.h"
#include "state.h"

/* ---- prompts ---- */

/* Append text's tokens (with the vocabulary's BOS when bos) to *t. */
static bool add_text(struct state *s, const char *text, size_t len, bool bos, bool special,
                     ox_token **t, size_t *n, size_t *cap) {
    if (*n + len + 8 > *cap) {
        size_t grown_cap = 2 * (*n + len + 8);
        ox_token *grown = realloc(*t, grown_cap * sizeof *grown);
        if (!grown)
            return false;
        *t = grown, *cap = grown_cap;
    }
    size_t got = 0;
    if (ox_tokenize(ox_model_vocab(state_model(s)), text, len, *t + *n, *cap - *n, &got, bos,
                    special) != OX_OK ||
        got > *cap - *n)
        return false;
    *n += got;
    return true;
}

/* A prompt: a string, or an array of token ids and strings (llama.cpp's mixed form; OpenAI's
 * one prompt in an array too). Tokens malloc'd, or NULL with *err set (400 for what does not
 * fit a slot). *echo gets the prompt's text when asked. */
static ox_token *prompt_tokens(struct state *s, json_t *p, bool special, size_t *n, char **echo,
                               struct reply *err) {
    size_t cap = 0, count = json_is_array(p) ? json_array_size(p) : 1;
    ox_token *t = NULL;
    *n = 0;
    if (json_is_array(p) && count == 1 && json_is_array(json_array_get(p, 0)))
        p = json_array_get(p, 0), count = json_array_size(p); /* [[tokens]] */
    bool ok = json_is_string(p) || (json_is_array(p) && count > 0);
    for (size_t i = 0; ok && i < count; i++) {
        json_t *x = json_is_string(p) ? p : json_array_get(p, i);
        if (json_is_string(x)) {
            ok = add_text(s, json_string_value(x), json_string_length(x), i == 0, special, &t, n,
                          &cap);
        } else if (json_is_integer(x) && json_integer_value(x) >= 0 &&
                   json_integer_value(x) < ox_model_n_vocab(state_model(s))) {
            ok = add_text(s, "", 0, false, false, &t, n, &cap); /* room for one more */
            if (ok)
                t[(*n)++] = (ox_token)json_integer_value(x);
        } else {
            ok = false;
        }
    }
    if (!ok) {
        free(t);
        *err = reply_error(400, "invalid_request_error", "prompt",
                           "'prompt' must be a string, or one array of token ids and strings");
        return NULL;
    }
    if (*n == 0 || (int32_t)*n > state_slot_ctx(s)) {
        free(t);
        char msg[160];
        snprintf(msg, sizeof msg, "the prompt has %zu tokens; a request holds 1 to %d", *n,
                 state_slot_ctx(s));
        *err = reply_error(400, "invalid_request_error", "prompt", msg);
        return NULL;
    }
    if (echo && json_is_string(p)) {
        *echo = strdup(json_string_value(p));
    } else if (echo) { /* the text of the tokens, without the BOS the vocabulary adds */
        const struct ox_vocab *v = ox_model_vocab(state_model(s));
        int64_t len = ox_detokenize(v, t, *n, NULL, 0, true, false);
        char *raw = len >= 0 ? malloc((size_t)len + 1) : NULL;
        if (raw)
            ox_detokenize(v, t, *n, raw, (size_t)len, true, false);
        *echo = raw ? reply_valid_utf8(raw, (size_t)len) : NULL;
        free(raw);
    }
    return t;
}

/* A generation for server.c to start: takes the tokens. */
static struct reply start(struct state *s, struct gen_opts *o, struct ox_sampler *smp,
                          ox_token *tokens, size_t n) {
    struct gen *g = gen_create(s, o, smp, (int32_t)n);
    if (!g) {
        free(tokens);
        return reply_error(500, "server_error", NULL, "out of memory");
    }
    return (struct reply){.status = 200, .gen = g, .prompt = tokens};
}

/* POST /v1/completions (OpenAI) and /completion (llama.cpp). */
static struct reply completions(struct state *s, json_t *req, enum gen_api api) {
    struct reply err;
    struct gen_opts o;
    struct ox_sampler *smp = NULL;
    bool echo = false;
    if (!params_parse(s, req, api, NULL, &o, &smp, &err) ||
        (json_object_get(req, "echo") && !json_is_boolean(json_object_get(req, "echo")))) {
        if (smp)
            err = reply_error(400, "invalid_request_error", "echo", "'echo' must be a boolean");
        params_free(&o), ox_sampler_free(smp);
        return err;
    }
    echo = api == API_COMPLETION && json_is_true(json_object_get(req, "echo"));
    size_t n = 0;
    ox_token *tokens = prompt_tokens(s, json_object_get(req, "prompt"), api == API_NATIVE, &n,
                                     echo ? &o.echo : NULL, &err);
    if (!tokens) {
        params_free(&o), ox_sampler_free(smp);
        return err;
    }
    return start(s, &o, smp, tokens, n);
}

/* ---- chat ---- */

/* A message's content as a template wants it: a string (OpenAI's text parts joined; beside
 * tool calls, none is "" as llama.cpp gives it). False when it is neither. */
static bool normalize_content(json_t *m) {
    json_t *c = json_object_get(m, "content");
    if (json_is_string(c))
        return true;
    if (!c || json_is_null(c))
        return json_object_get(m, "tool_calls") != NULL &&
               json_object_set_new(m, "content", json_string("")) == 0;
    if (!json_is_array(c))
        return false;
    size_t len = 0, i;
    json_t *part;
    json_array_foreach(c, i, part) {
        json_t *text = json_object_get(part, "text"), *type = json_object_get(part, "type");
        if (!json_is_string(text) || !json_is_string(type) ||
            strcmp(json_string_value(type), "text"))
            return false;
        len += json_string_length(text);
    }
    char *joined = malloc(len + 1), *at = joined;
    json_array_foreach(c, i, part) {
        json_t *text = json_object_get(part, "text");
        if (joined)
            memcpy(at, json_string_value(text), json_string_length(text)),
                at += json_string_length(text);
    }
    if (joined)
        *at = '\0';
    bool ok = joined && json_object_set_new(m, "content", json_stringn(joined, len)) == 0;
    free(joined);
    return ok;
}

/* Tool calls' arguments arrive as JSON text; templates read them as objects (as llama.cpp
 * gives them). */
static void parse_arguments(json_t *m) {
    size_t i;
    json_t *call;
    json_array_foreach(json_object_get(m, "tool_calls"), i, call) {
        json_t *fn = json_object_get(call, "function");
        json_t *args = json_object_get(fn, "arguments");
        json_t *parsed = json_is_string(args) ? json_loads(json_string_value(args), 0, NULL) : NULL;
        if (json_is_object(parsed))
            json_object_set(fn, "arguments", parsed);
        json_decref(parsed);
    }
}

static char *special_piece(const struct ox_vocab *v, ox_token t) {
    char buf[128];
    int32_t n = t >= 0 ? ox_token_to_piece(v, t, buf, sizeof buf, 0, true) : 0;
    return strndup(buf, n > 0 && n < (int32_t)sizeof buf ? (size_t)n : 0);
}

/* The conversation (and tools) rendered with the chat template (malloc'd), or NULL with *err
 * set. */
static char *render_chat(struct state *s, json_t *req, size_t *len, struct reply *err) {
    json_t *messages = json_object_get(req, "messages"), *tools = json_object_get(req, "tools");
    size_t n = json_array_size(messages);
    const char *tmpl = state_chat_template(s);
    if (!tmpl) {
        *err = reply_error(400, "invalid_request_error", NULL,
                           "the model has no chat template (serve with --chat-template FILE)");
        return NULL;
    }
    if (!json_is_array(messages) || n == 0 || n > 4096) {
        *err = reply_error(400, "invalid_request_error", "messages",
                           "'messages' must be an array of 1 to 4096 messages");
        return NULL;
    }
    if (tools && !json_is_null(tools) && (!json_is_array(tools) || json_array_size(tools) > 128)) {
        *err = reply_error(400, "invalid_request_error", "tools",
                           "'tools' must be an array of at most 128 tools");
        return NULL;
    }
    json_t *msgs = json_deep_copy(messages);
    for (size_t i = 0; msgs && i < n; i++) {
        json_t *m = json_array_get(msgs, i);
        if (!json_is_string(json_object_get(m, "role")) || !normalize_content(m)) {
            json_decref(msgs);
            *err = reply_error(400, "invalid_request_error", "messages",
                               "each message needs a string 'role' and a string 'content' (or "
                               "text parts, or tool_calls)");
            return NULL;
        }
        parse_arguments(m);
    }
    char *mj = msgs ? json_dumps(msgs, JSON_COMPACT) : NULL;
    char *tj =
        json_is_array(tools) && json_array_size(tools) ? json_dumps(tools, JSON_COMPACT) : NULL;
    const struct ox_vocab *v = ox_model_vocab(state_model(s));
    char *bos = special_piece(v, ox_vocab_bos(v)), *eos = special_piece(v, ox_vocab_eos(v));
    char *text = NULL;
    enum ox_status st = mj && bos && eos
                            ? ox_chat_render_json(tmpl, mj, tj, true, bos, eos, 0, &text, len)
                            : OX_ERR_OOM;
    json_decref(msgs), free(mj), free(tj), free(bos), free(eos);
    if (st != OX_OK) {
        char msg[300];
        snprintf(msg, sizeof msg, "the chat template failed: %s", ox_last_error());
        *err = reply_error(400, "invalid_request_error", "messages", msg);
        return NULL;
    }
    return text;
}

/* POST /v1/chat/completions. The reply ends at the end of the turn; with tools, calls in the
 * template family's syntax become tool_calls. */
static struct reply chat_completions(struct state *s, json_t *req) {
    struct reply err;
    struct gen_opts o;
    struct ox_sampler *smp = NULL;
    size_t len = 0, n = 0;
    char *tool_grammar = NULL;
    int family = -1;
    if (!chat_tools(s, req, &family, &tool_grammar, &err))
        return err;
    if (!params_parse(s, req, API_CHAT, tool_grammar, &o, &smp, &err)) {
        params_free(&o), free(tool_grammar);
        return err;
    }
    free(tool_grammar);
    o.tool_family = family;
    char *text = render_chat(s, req, &len, &err);
    /* the BOS the template wrote counts; control tokens in it are themselves (as `chat`) */
    const struct ox_vocab *v = ox_model_vocab(state_model(s));
    char *bos = special_piece(v, ox_vocab_bos(v));
    bool has_bos = text && bos && *bos && !strncmp(text, bos, strlen(bos));
    free(bos);
    ox_token *tokens = NULL;
    if (text) {
        json_t *p = json_stringn(text, len);
        if (!p)
            err = reply_error(500, "server_error", NULL, "out of memory");
        tokens = p ? prompt_tokens(s, p, true, &n, NULL, &err) : NULL;
        json_decref(p);
        if (tokens && has_bos && n > 1 && tokens[0] == ox_vocab_bos(v) &&
            tokens[1] == ox_vocab_bos(v))
            memmove(tokens, tokens + 1, --n * sizeof *tokens); /* one BOS, the template's */
    }
    free(text);
    if (!tokens) {
        params_free(&o), ox_sampler_free(smp);
        return err;
    }
    return start(s, &o, smp, tokens, n);
}

/* POST /apply-template (llama.cpp's): the rendered conversation. */
static struct reply apply_template(struct state *s, json_t *req) {
    struct reply err;
    size_t len = 0;
    char *text = render_chat(s, req, &len, &err);
    if (!text)
        return err;
    json_t *j = json_pack("{s:s%}", "prompt", text, len);
    free(text);
    return reply_json(j);
}

/* ---- tokens ---- */

/* POST /tokenize (llama.cpp's): content, add_special (default false) -> tokens. */
static struct reply tokenize_route(struct state *s, json_t *req) {
    json_t *content = json_object_get(req, "content");
    if (!json_is_string(content))
        return reply_error(400, "invalid_request_error", "content", "'content' must be a string");
    size_t len = json_string_length(content), n = 0, cap = len + 8;
    ox_token *t = malloc(cap * sizeof *t);
    if (!t ||
        ox_tokenize(ox_model_vocab(state_model(s)), json_string_value(content), len, t, cap, &n,
                    json_is_true(json_object_get(req, "add_special")), true) != OX_OK ||
        n > cap) {
        free(t);
        return reply_error(400, "invalid_request_error", "content", "cannot tokenize");
    }
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++)
        json_array_append_new(arr, json_integer(t[i]));
    free(t);
    return reply_json(arr ? json_pack("{s:o}", "tokens", arr) : NULL);
}

/* POST /detokenize (llama.cpp's): tokens -> content. */
static struct reply detokenize_route(struct state *s, json_t *req) {
    json_t *arr = json_object_get(req, "tokens");
    const struct ox_vocab *v = ox_model_vocab(state_model(s));
    size_t n = json_array_size(arr);
    if (!json_is_array(arr) || n > (1u << 20))
        return reply_error(400, "invalid_request_error", "tokens", "'tokens' must be an array");
    ox_token *t = malloc((n ? n : 1) * sizeof *t);
    for (size_t i = 0; t && i < n; i++) {
        json_t *x = json_array_get(arr, i);
        json_int_t id = json_is_integer(x) ? json_integer_value(x) : -1;
        if (id < 0 || id >= ox_model_n_vocab(state_model(s))) {
            free(t);
            return reply_error(400, "invalid_request_error", "tokens",
                               "every token must be an id of the vocabulary");
        }
        t[i] = (ox_token)id;
    }
    /* as llama_detokenize: an SPM vocabulary's leading space goes */
    int64_t len = t ? ox_detokenize(v, t, n, NULL, 0, false, false) : -1;
    char *raw = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (raw)
        ox_detokenize(v, t, n, raw, (size_t)len, false, false);
    char *text = raw ? reply_valid_utf8(raw, (size_t)len) : NULL;
    free(raw), free(t);
    struct reply r = text ? reply_json(json_pack("{s:s}", "content", text))
                          : reply_error(500, "server_error", NULL, "out of memory");
    free(text);
    return r;
}

/* ---- the server's state ---- */

static struct reply models(struct state *s) {
    return reply_json(json_pack("{s:s, s:[{s:s, s:s, s:i, s:s}]}", "object", "list", "data", "id",
                                state_model_id(s), "object", "model", "created", 0, "owned_by",
                                "oxidize"));
}

/* GET /props (llama.cpp's): the slots' settings and the model. */
static struct reply props(struct state *s) {
    const struct server_opts *o = state_options(s);
    const char *tmpl = state_chat_template(s);
    return reply_json(json_pack("{s:{s:i, s:{s:f, s:i, s:f, s:f, s:i}}, s:i, s:s, s:s, s:s, s:s}",
                                "default_generation_settings", "n_ctx", state_slot_ctx(s), "params",
                                "temperature", 0.8, "top_k", 40, "top_p", 0.95, "min_p", 0.05,
                                "n_predict", -1, "total_slots", o->n_parallel, "model_path",
                                o->model_path, "model_alias", state_model_id(s), "chat_template",
                                tmpl ? tmpl : "", "build_info", "oxidize " OX_VERSION_STRING));
}

/* GET /slots (llama.cpp's): what each slot holds and runs. */
static struct reply slots(struct state *s) {
    int n = state_options(s)->n_parallel;
    struct ox_engine_slot *v = calloc((size_t)n, sizeof *v);
    json_t *arr = v ? json_array() : NULL;
    if (v)
        state_stats(s, NULL, v, NULL);
    for (int i = 0; arr && i < n; i++)
        json_array_append_new(
            arr, json_pack("{s:i, s:i, s:b, s:I, s:i, s:i, s:i}", "id", i, "n_ctx", v[i].n_ctx,
                           "is_processing", v[i].request_id != 0, "id_task",
                           (json_int_t)v[i].request_id, "n_past", v[i].n_past, "n_prompt_tokens",
                           v[i].n_prompt, "n_decoded", v[i].n_generated));
    free(v);
    return reply_json(arr);
}

/* GET /metrics: Prometheus' text format, with llama.cpp's names. */
static struct reply metrics(struct state *s) {
    struct ox_engine_stats st;
    struct state_counters c;
    state_stats(s, &st, NULL, &c);
    char *body = malloc(4096);
    if (!body)
        return reply_error(500, "server_error", NULL, "out of memory");
    struct {
        const char *name, *type, *help;
        double value;
    } rows[] = {
        {"llamacpp:prompt_tokens_total", "counter", "Prompt tokens decoded.",
         (double)st.n_prompt_tokens},
        {"llamacpp:tokens_predicted_total", "counter", "Tokens generated.",
         (double)st.n_generated_tokens},
        {"llamacpp:prompt_seconds_total", "counter", "Seconds of steps that decoded prompts.",
         st.prompt_seconds},
        {"llamacpp:tokens_predicted_seconds_total", "counter",
         "Seconds of steps that generated tokens.", st.gen_seconds},
        {"llamacpp:prompt_tokens_seconds", "gauge", "Prompt tokens per second.",
         st.prompt_seconds > 0 ? (double)st.n_prompt_tokens / st.prompt_seconds : 0},
        {"llamacpp:predicted_tokens_seconds", "gauge", "Generated tokens per second.",
         st.gen_seconds > 0 ? (double)st.n_generated_tokens / st.gen_seconds : 0},
        {"llamacpp:requests_processing", "gauge", "Requests in a slot.", st.n_running},
        {"llamacpp:requests_deferred", "gauge", "Requests waiting for a slot.", st.n_queued},
        {"llamacpp:kv_cache_usage_ratio", "gauge", "Share of the KV cells holding a token.",
         st.kv_cells ? (double)st.kv_used / st.kv_cells : 0},
        {"llamacpp:kv_cache_tokens", "gauge", "KV cells holding a token.", st.kv_used},
        {"oxidize:http_requests_total", "counter", "HTTP requests answered.", (double)c.requests},
        {"oxidize:http_errors_total", "counter", "Requests answered with a 4xx or 5xx.",
         (double)c.errors},
        {"oxidize:http_rejected_total", "counter", "Requests refused with 429 or 503.",
         (double)c.rejected},
    };
    size_t len = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        len += (size_t)snprintf(body + len, 4096 - len, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n",
                                rows[i].name, rows[i].help, rows[i].name, rows[i].type,
                                rows[i].name, rows[i].value);
    return (struct reply){.status = 200, .body = body, .content_type = "text/plain; version=0.0.4"};
}

/* ---- dispatch ---- */

enum method { ANY_GET, ANY_POST };
struct route {
    const char *path;
    enum method method;
    int id;
};
enum {
    R_HEALTH,
    R_MODELS,
    R_PROPS,
    R_SLOTS,
    R_METRICS, /* GET */
    R_COMPLETIONS,
    R_CHAT,
    R_NATIVE,
    R_TOKENIZE,
    R_DETOKENIZE,
    R_APPLY,
    R_EMBED,
    R_RERANK /* POST */
};
static const struct route routes[] = {
    {"/health", ANY_GET, R_HEALTH},
    {"/v1/health", ANY_GET, R_HEALTH},
    {"/v1/models", ANY_GET, R_MODELS},
    {"/models", ANY_GET, R_MODELS},
    {"/props", ANY_GET, R_PROPS},
    {"/slots", ANY_GET, R_SLOTS},
    {"/metrics", ANY_GET, R_METRICS},
    {"/v1/completions", ANY_POST, R_COMPLETIONS},
    {"/completions", ANY_POST, R_COMPLETIONS},
    {"/v1/chat/completions", ANY_POST, R_CHAT},
    {"/chat/completions", ANY_POST, R_CHAT},
    {"/completion", ANY_POST, R_NATIVE},
    {"/tokenize", ANY_POST, R_TOKENIZE},
    {"/detokenize", ANY_POST, R_DETOKENIZE},
    {"/apply-template", ANY_POST, R_APPLY},
    {"/v1/embeddings", ANY_POST, R_EMBED},
    {"/embeddings", ANY_POST, R_EMBED},
    {"/v1/rerank", ANY_POST, R_RERANK},
    {"/rerank", ANY_POST, R_RERANK},
    {"/v1/reranking", ANY_POST, R_RERANK},
    {"/reranking", ANY_POST, R_RERANK},
};

/* How deep a body's arrays and objects nest (strings skipped), counting up to limit + 1. */
static int nesting(const char *body, size_t len, int limit) {
    int depth = 0, max = 0;
    bool in_string = false;
    for (size_t i = 0; i < len && max <= limit; i++) {
        char c = body[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            max = ++depth > max ? depth : max;
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return max;
}

struct reply route_request(struct state *s, const char *method, const char *path, const char *body,
                           size_t len) {
    const struct route *r = NULL;
    for (size_t i = 0; !r && i < sizeof routes / sizeof routes[0]; i++)
        if (!strcmp(path, routes[i].path))
            r = &routes[i];
    if (!r)
        return reply_error(404, "invalid_request_error", NULL, "no such endpoint");
    if (strcmp(method, r->method == ANY_GET ? "GET" : "POST"))
        return reply_error(405, "invalid_request_error", NULL,
                           r->method == ANY_GET ? "use GET" : "use POST");
    switch (r->id) {
    case R_HEALTH: return reply_json(json_pack("{s:s}", "status", "ok"));
    case R_MODELS: return models(s);
    case R_PROPS: return props(s);
    case R_SLOTS: return slots(s);
    case R_METRICS: return metrics(s);
    default: break;
    }
    bool generates = r->id == R_COMPLETIONS || r->id == R_NATIVE || r->id == R_CHAT;
    if (generates && !ox_model_has_logits(state_model(s)))
        return reply_error(501, "not_supported_error", NULL,
                           "this model makes embeddings only: use /v1/embeddings or /v1/rerank");
    enum { MAX_DEPTH = 64 };
    if (nesting(body, len, MAX_DEPTH) > MAX_DEPTH)
        return reply_error(400, "invalid_request_error", NULL,
                           "the body nests arrays and objects more than 64 deep");
    json_error_t jerr;
    json_t *req = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(req)) {
        char msg[256];
        snprintf(msg, sizeof msg, "the body is not a JSON object: %s", req ? "" : jerr.text);
        json_decref(req);
        return reply_error(400, "invalid_request_error", NULL, msg);
    }
    struct reply out;
    switch (r->id) {
    case R_COMPLETIONS: out = completions(s, req, API_COMPLETION); break;
    case R_NATIVE: out = completions(s, req, API_NATIVE); break;
    case R_CHAT: out = chat_completions(s, req); break;
    case R_TOKENIZE: out = tokenize_route(s, req); break;
    case R_DETOKENIZE: out = detokenize_route(s, req); break;
    case R_EMBED: out = embeddings_route(s, req); break;
    case R_RERANK: out = rerank_route(s, req); break;
    default: out = apply_template(s, req); break;
    }
    json_decref(req);
    return out;
}
