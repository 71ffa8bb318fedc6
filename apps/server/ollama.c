/* ollama.c: Ollama's API, so Ollama's clients and the apps built on them talk to `oxidize serve`
 * unchanged: /api/generate and /api/chat become the server's own completions (generate.c; their
 * answers in Ollama's shapes, answer_ollama.c), /api/embed its embeddings, and the served model
 * is described as Ollama describes its models (/api/tags, /api/ps, /api/show). Any "model" name
 * is taken to mean the one model served. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "embeddings.h"
#include "gen.h"
#include "generate.h"
#include "common/sha256.h"
#include "ollama.h"
#include "state.h"

/* The Ollama API level answered (its routes and fields as of Ollama 0.12); oxidize's own
 * version is in /props. */
#define OLLAMA_API_VERSION "0.12.0"

bool ollama_path(const char *path) {
    return !strncmp(path, "/api/", 5);
}

struct reply ollama_error_shape(struct reply r) {
    if (r.status < 400 || !r.body)
        return r;
    json_t *j = json_loads(r.body, 0, NULL);
    const char *msg = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
    if (msg) {
        struct reply plain = reply_error_plain(r.status, msg);
        plain.retry_after = r.retry_after;
        free(r.body);
        r = plain;
    }
    json_decref(j);
    return r;
}

/* ---- the model, as Ollama describes models ---- */

/* "llama 15.2M Q4_K_M" (ox_model_desc) into its family, size and quantization. */
static void desc_parts(struct state *s, char *family, char *size, char *quant, size_t cap) {
    char desc[256];
    ox_model_desc(state_model(s), desc, sizeof desc);
    char *a = strtok(desc, " "), *b = a ? strtok(NULL, " ") : NULL,
         *c = b ? strtok(NULL, "") : NULL;
    snprintf(family, cap, "%s", a ? a : "");
    snprintf(size, cap, "%s", b ? b : "");
    snprintf(quant, cap, "%s", c ? c : "");
}

static json_t *details(struct state *s) {
    char family[64], size[64], quant[64];
    desc_parts(s, family, size, quant, sizeof family);
    return json_pack("{s:s, s:s, s:s, s:[s], s:s, s:s}", "parent_model", "", "format", "gguf",
                     "family", family, "families", family, "parameter_size", size,
                     "quantization_level", quant);
}

/* One model entry of /api/tags (and /api/ps): its file's size and time; the digest identifies
 * the file (sha256 of its path, size and time: hashing gigabytes per request would not do). */
static json_t *model_entry(struct state *s) {
    const char *path = state_options(s)->model_path;
    struct stat st;
    memset(&st, 0, sizeof st);
    stat(path, &st);
    char at[48], id[1200], digest[65];
    reply_time(&st.st_mtim, at, sizeof at);
    snprintf(id, sizeof id, "%s:%lld:%lld", path, (long long)st.st_size, (long long)st.st_mtime);
    struct sha256 h;
    sha256_init(&h);
    sha256_update(&h, id, strlen(id));
    sha256_hex(&h, digest);
    const char *name = state_model_id(s);
    return json_pack("{s:s, s:s, s:s, s:I, s:s, s:o}", "name", name, "model", name, "modified_at",
                     at, "size", (json_int_t)st.st_size, "digest", digest, "details", details(s));
}

static struct reply tags(struct state *s, bool running) {
    json_t *m = model_entry(s);
    if (m && running) { /* loaded for as long as the server runs */
        json_object_set_new(m, "expires_at", json_string("2318-11-25T00:00:00Z"));
        json_object_set_new(m, "size_vram",
                            json_integer((json_int_t)ox_model_gpu_bytes(state_model(s))));
    }
    return reply_json(m ? json_pack("{s:[o]}", "models", m) : NULL);
}

/* POST /api/show: the template, details, model_info as GGUF keys, capabilities. */
static struct reply show(struct state *s) {
    const struct ox_model *m = state_model(s);
    const char *tmpl = state_chat_template(s);
    char family[64], size[64], quant[64], key[128];
    desc_parts(s, family, size, quant, sizeof family);
    json_t *info = json_pack("{s:s, s:I}", "general.architecture", family,
                             "general.parameter_count", (json_int_t)ox_model_n_params(m));
    snprintf(key, sizeof key, "%s.context_length", family);
    json_object_set_new(info, key, json_integer(ox_model_n_ctx_train(m)));
    snprintf(key, sizeof key, "%s.embedding_length", family);
    json_object_set_new(info, key, json_integer(ox_model_n_embd(m)));
    snprintf(key, sizeof key, "%s.block_count", family);
    json_object_set_new(info, key, json_integer(ox_model_n_layer(m)));
    json_t *caps = json_array();
    if (ox_model_has_logits(m))
        json_array_append_new(caps, json_string("completion"));
    else
        json_array_append_new(caps, json_string("embedding"));
    if (tmpl && strstr(tmpl, "tools"))
        json_array_append_new(caps, json_string("tools"));
    char modelfile[1200];
    snprintf(modelfile, sizeof modelfile, "# served by oxidize\nFROM %s\n",
             state_options(s)->model_path);
    json_t *j = json_pack("{s:s, s:s, s:s, s:o, s:o, s:o}", "modelfile", modelfile, "parameters",
                          "", "template", tmpl ? tmpl : "", "details", details(s), "model_info",
                          info, "capabilities", caps);
    json_t *entry = model_entry(s);
    json_object_set(j, "modified_at", json_object_get(entry, "modified_at"));
    json_decref(entry);
    return reply_json(j);
}

/* ---- generation ---- */

/* The server's own request for an Ollama one: its options (llama.cpp's names, num_predict as
 * n_predict), stream (Ollama's default: true), format as a JSON schema or any JSON object. NULL
 * with *err set when a field is wrong. */
static json_t *inner_request(json_t *req, struct reply *err) {
    json_t *opts = json_object_get(req, "options"), *format = json_object_get(req, "format");
    json_t *stream = json_object_get(req, "stream"), *images = json_object_get(req, "images");
    if (opts && !json_is_null(opts) && !json_is_object(opts)) {
        *err = reply_error_plain(400, "'options' must be an object");
        return NULL;
    }
    if (stream && !json_is_null(stream) && !json_is_boolean(stream)) {
        *err = reply_error_plain(400, "'stream' must be a boolean");
        return NULL;
    }
    if (json_array_size(images) > 0) {
        *err = reply_error_plain(400, "images are not supported: the server runs text models");
        return NULL;
    }
    json_t *in = json_is_object(opts) ? json_deep_copy(opts) : json_object();
    json_t *np = json_object_get(in, "num_predict");
    if (np)
        json_object_set(in, "n_predict", np), json_object_del(in, "num_predict");
    json_object_set_new(in, "stream", json_boolean(!json_is_false(stream)));
    if (json_is_string(format) && !strcmp(json_string_value(format), "json")) {
        json_object_set_new(in, "response_format", json_pack("{s:s}", "type", "json_object"));
    } else if (json_is_object(format)) {
        json_object_set(in, "json_schema", format);
    } else if (format && !json_is_null(format) &&
               !(json_is_string(format) && !json_string_length(format))) {
        json_decref(in);
        *err = reply_error_plain(400, "'format' must be \"json\" or a JSON schema");
        return NULL;
    }
    return in;
}

/* POST /api/generate: a prompt in the chat template (after the system prompt; raw: as it is),
 * continuing from a context (the tokens an earlier answer gave); no prompt: the model is
 * "loaded". */
static struct reply generate(struct state *s, json_t *req) {
    json_t *prompt = json_object_get(req, "prompt"), *system = json_object_get(req, "system");
    json_t *ctx = json_object_get(req, "context"), *raw = json_object_get(req, "raw");
    json_t *suffix = json_object_get(req, "suffix");
    if ((prompt && !json_is_null(prompt) && !json_is_string(prompt)) ||
        (system && !json_is_null(system) && !json_is_string(system)) ||
        (raw && !json_is_null(raw) && !json_is_boolean(raw)) ||
        (ctx && !json_is_null(ctx) && !json_is_array(ctx)))
        return reply_error_plain(400, "'prompt' and 'system' must be strings, 'raw' a boolean, "
                                      "'context' an array of token ids");
    if (json_string_length(suffix) > 0)
        return reply_error_plain(400, "'suffix' (fill in the middle) is not supported");
    if (!json_string_length(prompt) && !json_array_size(ctx)) {
        char at[48];
        reply_time(NULL, at, sizeof at);
        return reply_json(json_pack("{s:s, s:s, s:s, s:b, s:s}", "model", state_model_id(s),
                                    "created_at", at, "response", "", "done", true, "done_reason",
                                    "load"));
    }
    struct reply err;
    json_t *in = inner_request(req, &err);
    if (!in)
        return err;
    const char *text = json_string_value(prompt) ? json_string_value(prompt) : "";
    bool templated = !json_is_true(raw) && state_chat_template(s);
    struct reply r;
    char *rendered = NULL;
    if (templated) {
        json_t *msgs = json_array();
        if (json_string_length(system))
            json_array_append_new(msgs,
                                  json_pack("{s:s, s:O}", "role", "system", "content", system));
        json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content", text));
        json_object_set_new(in, "messages", msgs);
        if (!json_array_size(ctx)) {
            r = generate_chat(s, in, API_OLLAMA_GENERATE);
            json_decref(in);
            return r;
        }
        size_t len;
        rendered = generate_render_chat(s, in, &len, &r);
        if (!rendered) {
            json_decref(in);
            return r;
        }
        text = rendered;
    }
    /* the context's tokens, then the text (mixed prompts: generate_completion) */
    json_t *p = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(ctx, i, t) json_array_append(p, t);
    if (*text)
        json_array_append_new(p, json_string(text));
    json_object_set_new(in, "prompt", p);
    r = generate_completion(s, in, API_OLLAMA_GENERATE);
    free(rendered);
    json_decref(in);
    return r;
}

/* POST /api/chat: the conversation (and tools) in the chat template. */
static struct reply chat(struct state *s, json_t *req) {
    json_t *msgs = json_object_get(req, "messages");
    size_t i;
    json_t *m;
    json_array_foreach(
        msgs, i,
        m) if (json_array_size(json_object_get(m, "images")) >
               0) return reply_error_plain(400,
                                           "images are not supported: the server runs text models");
    struct reply err;
    json_t *in = inner_request(req, &err);
    if (!in)
        return err;
    json_object_set(in, "messages", msgs ? msgs : json_null());
    /* tools, and OpenAI's tool_choice (not Ollama's: an extension, "required" forces a call) */
    if (json_object_get(req, "tools"))
        json_object_set(in, "tools", json_object_get(req, "tools"));
    if (json_object_get(req, "tool_choice"))
        json_object_set(in, "tool_choice", json_object_get(req, "tool_choice"));
    struct reply r = generate_chat(s, in, API_OLLAMA_CHAT);
    json_decref(in);
    return r;
}

/* POST /api/embed ({"input": text or texts} -> "embeddings") and the older /api/embeddings
 * ({"prompt": text} -> "embedding"), through the server's own embeddings. */
static struct reply embed(struct state *s, json_t *req, bool legacy) {
    json_t *input = json_object_get(req, legacy ? "prompt" : "input");
    if (!json_is_string(input) && !json_is_array(input))
        return reply_error_plain(400, legacy ? "'prompt' must be a string"
                                             : "'input' must be a string or an array of strings");
    json_t *in = json_pack("{s:O, s:s}", "input", input, "encoding_format", "float");
    double t0 = state_clock();
    struct reply r = embeddings_route(s, in);
    json_decref(in);
    if (r.status != 200)
        return ollama_error_shape(r);
    json_t *j = json_loads(r.body, 0, NULL), *vecs = json_array();
    free(r.body);
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(j, "data"), i, e)
        json_array_append(vecs, json_object_get(e, "embedding"));
    json_int_t tokens =
        json_integer_value(json_object_get(json_object_get(j, "usage"), "prompt_tokens"));
    json_decref(j);
    if (legacy) {
        json_t *one = json_incref(json_array_get(vecs, 0));
        json_decref(vecs);
        return reply_json(json_pack("{s:o}", "embedding", one ? one : json_array()));
    }
    return reply_json(json_pack("{s:s, s:o, s:I, s:i, s:I}", "model", state_model_id(s),
                                "embeddings", vecs, "total_duration",
                                (json_int_t)((state_clock() - t0) * 1e9), "load_duration", 0,
                                "prompt_eval_count", tokens));
}

/* Ollama's routes: GET for the listings, POST with a JSON body for the rest. */
enum { O_VERSION, O_TAGS, O_PS, O_SHOW, O_GENERATE, O_CHAT, O_EMBED, O_EMBEDDINGS };
static const struct {
    const char *path;
    bool post;
} ollama_routes[] = {
    [O_VERSION] = {"/api/version", false},
    [O_TAGS] = {"/api/tags", false},
    [O_PS] = {"/api/ps", false},
    [O_SHOW] = {"/api/show", true},
    [O_GENERATE] = {"/api/generate", true},
    [O_CHAT] = {"/api/chat", true},
    [O_EMBED] = {"/api/embed", true},
    [O_EMBEDDINGS] = {"/api/embeddings", true},
};

int ollama_find(const char *path, bool *post) {
    for (int r = 0; r < (int)(sizeof ollama_routes / sizeof ollama_routes[0]); r++)
        if (!strcmp(path, ollama_routes[r].path)) {
            *post = ollama_routes[r].post;
            return r;
        }
    return -1;
}

struct reply ollama_route(struct state *s, int route, json_t *req) {
    bool generates = route == O_GENERATE || route == O_CHAT;
    if (generates && !ox_model_has_logits(state_model(s)))
        return reply_error_plain(501, "this model makes embeddings only: use /api/embed");
    struct reply r;
    switch (route) {
    case O_VERSION: r = reply_json(json_pack("{s:s}", "version", OLLAMA_API_VERSION)); break;
    case O_TAGS: r = tags(s, false); break;
    case O_PS: r = tags(s, true); break;
    case O_SHOW: r = show(s); break;
    case O_GENERATE: r = generate(s, req); break;
    case O_CHAT: r = chat(s, req); break;
    case O_EMBED: r = embed(s, req, false); break;
    case O_EMBEDDINGS: r = embed(s, req, true); break;
    default: r = reply_error_plain(404, "no such endpoint"); break;
    }
    return ollama_error_shape(r);
}
