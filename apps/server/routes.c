/* routes.c: the endpoints of `oxidize serve`, OpenAI's (/v1/completions, /v1/chat/completions,
 * /v1/models) and llama.cpp's (/completion, /tokenize, /detokenize, /apply-template, /props,
 * /slots, /metrics, /health), and Ollama's (/api/..., in ollama.c). Requests are parsed with
 * jansson and checked field by field; generations are handed back to server.c to start. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embeddings.h"
#include "gen.h"
#include "generate.h"
#include "lora_adapters.h"
#include "ollama.h"
#include "slots_save.h"
#include "static_pages.h"
#include "rerank.h"
#include "routes.h"
#include "state.h"

/* POST /apply-template (llama.cpp's): the rendered conversation. */
static struct reply apply_template(struct state *s, json_t *req) {
    struct reply err;
    size_t len = 0;
    char *text = generate_render_chat(s, req, &len, &err);
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
        {"oxidize:draft_tokens_total", "counter", "Speculative draft tokens checked.",
         (double)st.n_drafted},
        {"oxidize:draft_tokens_accepted_total", "counter", "Draft tokens the model agreed with.",
         (double)st.n_draft_accepted},
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
    R_METRICS,
    R_PAGE,
    R_OPENAPI, /* GET */
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
    {"/", ANY_GET, R_PAGE},
    {"/index.html", ANY_GET, R_PAGE},
    {"/openapi.json", ANY_GET, R_OPENAPI},
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

/* The body as JSON (an object, or with array an array), or NULL with *err set. */
static json_t *parse_json(const char *body, size_t len, bool array, struct reply *err) {
    enum { MAX_DEPTH = 64 };
    if (nesting(body, len, MAX_DEPTH) > MAX_DEPTH) {
        *err = reply_error(400, "invalid_request_error", NULL,
                           "the body nests arrays and objects more than 64 deep");
        return NULL;
    }
    json_error_t jerr;
    json_t *req = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (array ? !json_is_array(req) : !json_is_object(req)) {
        char msg[256];
        snprintf(msg, sizeof msg, "the body is not a JSON %s: %s", array ? "array" : "object",
                 req ? "" : jerr.text);
        json_decref(req);
        *err = reply_error(400, "invalid_request_error", NULL, msg);
        return NULL;
    }
    return req;
}

static json_t *parse_body(const char *body, size_t len, struct reply *err) {
    return parse_json(body, len, false, err);
}

/* GET and POST /lora-adapters (POST's body an array). */
static struct reply lora_request(struct state *s, const char *method, const char *body,
                                 size_t len) {
    if (!strcmp(method, "GET"))
        return lora_adapters_list(s);
    if (strcmp(method, "POST"))
        return reply_error(405, "invalid_request_error", NULL, "use GET or POST");
    struct reply out;
    json_t *req = parse_json(body, len, true, &out);
    if (!req)
        return out;
    out = lora_adapters_set(s, req);
    json_decref(req);
    return out;
}

/* Ollama's routes (ollama.c), their errors in Ollama's shape. */
static struct reply ollama_request(struct state *s, const char *method, const char *path,
                                   const char *body, size_t len) {
    bool post = false;
    int route = ollama_find(path, &post);
    if (route < 0)
        return reply_error_plain(404, "no such endpoint");
    if (strcmp(method, post ? "POST" : "GET") && (post || strcmp(method, "HEAD")))
        return reply_error_plain(405, post ? "use POST" : "use GET");
    if (!post)
        return ollama_route(s, route, NULL);
    struct reply err;
    json_t *req = parse_body(body, len, &err);
    if (!req)
        return ollama_error_shape(err);
    struct reply out = ollama_route(s, route, req);
    json_decref(req);
    return out;
}

struct reply route_request(struct state *s, const char *method, const char *path,
                           const char *action, const char *body, size_t len) {
    if (ollama_path(path))
        return ollama_request(s, method, path, body, len);
    if (!strncmp(path, "/slots/", 7)) { /* POST /slots/{id}?action=...: a body, or none */
        if (strcmp(method, "POST"))
            return reply_error(405, "invalid_request_error", NULL, "use POST");
        struct reply err;
        json_t *req = len ? parse_body(body, len, &err) : json_object();
        if (!req)
            return err;
        struct reply out = slots_action(s, path, action, req);
        json_decref(req);
        return out;
    }
    if (!strcmp(path, "/lora-adapters"))
        return lora_request(s, method, body, len);
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
    case R_PAGE: return static_chat_page();
    case R_OPENAPI: return static_openapi();
    default: break;
    }
    bool generates = r->id == R_COMPLETIONS || r->id == R_NATIVE || r->id == R_CHAT;
    if (generates && !ox_model_has_logits(state_model(s)))
        return reply_error(501, "not_supported_error", NULL,
                           "this model makes embeddings only: use /v1/embeddings or /v1/rerank");
    struct reply out;
    json_t *req = parse_body(body, len, &out);
    if (!req)
        return out;
    switch (r->id) {
    case R_COMPLETIONS: out = generate_completion(s, req, API_COMPLETION); break;
    case R_NATIVE: out = generate_completion(s, req, API_NATIVE); break;
    case R_CHAT: out = generate_chat(s, req, API_CHAT); break;
    case R_TOKENIZE: out = tokenize_route(s, req); break;
    case R_DETOKENIZE: out = detokenize_route(s, req); break;
    case R_EMBED: out = embeddings_route(s, req); break;
    case R_RERANK: out = rerank_route(s, req); break;
    default: out = apply_template(s, req); break;
    }
    json_decref(req);
    return out;
}
