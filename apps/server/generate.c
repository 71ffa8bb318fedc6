/* generate.c: the requests that generate: a prompt's completion (a string, or token ids and
 * strings mixed) and a conversation's, rendered in the chat template (OpenAI's messages, their
 * text parts and tool calls), for whichever API's answer shape; the routes of every API that
 * generates come here (routes.c, ollama.c). */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_tools.h"
#include "gen.h"
#include "generate.h"
#include "params.h"
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

/* POST /v1/completions (OpenAI), /completion (llama.cpp), Ollama's raw /api/generate. */
struct reply generate_completion(struct state *s, json_t *req, enum gen_api api) {
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
    ox_token *tokens = prompt_tokens(s, json_object_get(req, "prompt"), api != API_COMPLETION, &n,
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
char *generate_render_chat(struct state *s, json_t *req, size_t *len, struct reply *err) {
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

/* POST /v1/chat/completions (and Ollama's /api/chat): the reply ends at the end of the turn;
 * with tools, calls in the template family's syntax become tool_calls. */
struct reply generate_chat(struct state *s, json_t *req, enum gen_api api) {
    struct reply err;
    struct gen_opts o;
    struct ox_sampler *smp = NULL;
    size_t len = 0, n = 0;
    char *tool_grammar = NULL;
    int family = -1;
    if (!chat_tools(s, req, &family, &tool_grammar, &err))
        return err;
    if (!params_parse(s, req, api, tool_grammar, &o, &smp, &err)) {
        params_free(&o), free(tool_grammar);
        return err;
    }
    free(tool_grammar);
    o.tool_family = family;
    char *text = generate_render_chat(s, req, &len, &err);
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
