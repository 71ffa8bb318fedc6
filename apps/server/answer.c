/* answer.c: the JSON a generation is answered with: OpenAI's text_completion and
 * chat.completion (whole, or as chunks of a stream, each a Server-Sent Event), and llama.cpp's
 * /completion, each with its own form of logprobs, usage and finish reason. */
#include <stdlib.h>
#include <string.h>

#include "common/tool_calls.h"
#include "gen_int.h"
#include "state.h"

static const char *finish_reason(const struct gen *g) {
    return g->end == END_LENGTH ? "length" : "stop";
}

/* A token's text (invalid UTF-8 replaced) and, when bytes, its raw bytes. */
static json_t *token_text(const struct gen *g, ox_token t, json_t **bytes) {
    char piece[256];
    int32_t n = ox_token_to_piece(g->vocab, t, piece, sizeof piece, 0, true);
    n = n < 0 ? 0 : n > (int32_t)sizeof piece ? (int32_t)sizeof piece : n;
    char *valid = reply_valid_utf8(piece, (size_t)n);
    json_t *text = json_string(valid ? valid : "");
    free(valid);
    if (bytes) {
        *bytes = json_array();
        for (int32_t i = 0; *bytes && i < n; i++)
            json_array_append_new(*bytes, json_integer((unsigned char)piece[i]));
    }
    return text;
}

/* One entry in OpenAI's chat form {token, logprob, bytes} (native: with its id). */
static json_t *token_entry(const struct gen *g, ox_token t, float lp, bool native) {
    json_t *bytes = NULL, *text = token_text(g, t, &bytes);
    json_t *e = json_pack("{s:o, s:f, s:o}", "token", text, "logprob", (double)lp, "bytes",
                          bytes ? bytes : json_null());
    if (e && native)
        json_object_set_new(e, "id", json_integer(t));
    return e;
}

/* lp[from, to) as chat logprobs ({"content": [...]}) or llama.cpp's completion_probabilities. */
static json_t *logprobs_list(const struct gen *g, size_t from, size_t to, bool native) {
    json_t *list = json_array();
    for (size_t i = from; list && i < to; i++) {
        const struct logprob *p = &g->lp[i];
        json_t *e = token_entry(g, p->token, p->logprob, native), *top = json_array();
        for (int k = 0; top && k < p->n_top; k++)
            json_array_append_new(top, token_entry(g, p->top[k], p->top_logprob[k], native));
        json_object_set_new(e, "top_logprobs", top);
        json_array_append_new(list, e);
    }
    return native ? list : json_pack("{s:o}", "content", list);
}

/* lp[from, to) in the completions API's legacy form; offsets count from base. */
static json_t *logprobs_legacy(const struct gen *g, size_t from, size_t to, size_t base) {
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(),
           *offsets = json_array();
    for (size_t i = from; i < to; i++) {
        const struct logprob *p = &g->lp[i];
        json_t *text = token_text(g, p->token, NULL), *top = json_object();
        json_array_append_new(offsets, json_integer((json_int_t)base));
        base += strlen(json_string_value(text) ? json_string_value(text) : "");
        json_array_append_new(tokens, text);
        json_array_append_new(lps, json_real(p->logprob));
        for (int k = 0; top && k < p->n_top; k++) {
            json_t *alt = token_text(g, p->top[k], NULL);
            json_object_set_new(top, json_string_value(alt), json_real(p->top_logprob[k]));
            json_decref(alt);
        }
        json_array_append_new(tops, top);
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", tokens, "token_logprobs", lps,
                     "top_logprobs", tops, "text_offset", offsets);
}

static json_t *usage(const struct gen *g) {
    return json_pack("{s:i, s:i, s:i}", "prompt_tokens", g->n_prompt, "completion_tokens", g->n_out,
                     "total_tokens", g->n_prompt + g->n_out);
}

/* OpenAI's envelope around one choice. */
static json_t *envelope(const struct gen *g, const char *object, json_t *choice) {
    return json_pack("{s:s, s:s, s:I, s:s, s:[o]}", "id", g->id, "object", object, "created",
                     (json_int_t)g->created, "model", state_model_id(g->s), "choices", choice);
}

void answer_append(struct gen *g, const char *bytes, size_t n) {
    if (g->ev_len + n > g->ev_cap) {
        size_t cap = 2 * (g->ev_len + n);
        char *grown = realloc(g->ev, cap);
        if (!grown)
            return; /* the event is lost; the stream still ends */
        g->ev = grown, g->ev_cap = cap;
    }
    memcpy(g->ev + g->ev_len, bytes, n);
    g->ev_len += n;
}

/* Append one Server-Sent Event carrying json (under the lock). */
static void push_event(struct gen *g, const char *json) {
    answer_append(g, "data: ", 6);
    answer_append(g, json, strlen(json));
    answer_append(g, "\n\n", 2);
}

static void push(struct gen *g, json_t *j) {
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (text)
        push_event(g, text);
    free(text);
}

/* llama.cpp's timings of a finished generation. */
static json_t *timings(const struct gen *g) {
    double prompt_ms = 1e3 * (g->t_first - g->t_start), gen_ms = 1e3 * (g->t_end - g->t_first);
    return json_pack("{s:i, s:f, s:f, s:i, s:f, s:f}", "prompt_n", g->n_prompt, "prompt_ms",
                     prompt_ms, "prompt_per_second",
                     prompt_ms > 0 ? 1e3 * g->n_prompt / prompt_ms : 0.0, "predicted_n", g->n_out,
                     "predicted_ms", gen_ms, "predicted_per_second",
                     gen_ms > 0 ? 1e3 * g->n_out / gen_ms : 0.0);
}

/* llama.cpp's /completion answer: a piece of a stream (stop false), or the last one. */
static json_t *native(const struct gen *g, const char *text, size_t from, size_t to, bool last) {
    json_t *j = json_pack("{s:s, s:b, s:i, s:i, s:i, s:s}", "content", text, "stop", last, "index",
                          0, "tokens_predicted", g->n_out, "tokens_evaluated", g->n_prompt, "model",
                          state_model_id(g->s));
    if (j && g->o.logprobs)
        json_object_set_new(j, "completion_probabilities", logprobs_list(g, from, to, true));
    if (j && last) {
        const char *type = g->end == END_EOS      ? "eos"
                           : g->end == END_WORD   ? "word"
                           : g->end == END_LENGTH ? "limit"
                                                  : "none";
        json_object_set_new(j, "stop_type", json_string(type));
        json_object_set_new(j, "stopping_word", json_string(g->stop_word ? g->stop_word : ""));
        json_object_set_new(j, "truncated", json_false());
        json_object_set_new(j, "timings", timings(g));
    }
    return j;
}

void answer_chunk(struct gen *g, const char *text, size_t from, size_t to) {
    json_t *lp = g->o.logprobs && from < to
                     ? (g->o.api == API_COMPLETION ? logprobs_legacy(g, from, to, 0)
                                                   : logprobs_list(g, from, to, false))
                     : json_null();
    if (g->o.api == API_NATIVE) {
        json_decref(lp);
        push(g, native(g, text, from, to, false));
    } else if (g->o.api == API_CHAT) {
        push(g, envelope(g, "chat.completion.chunk",
                         json_pack("{s:i, s:{s:s}, s:o, s:n}", "index", 0, "delta", "content", text,
                                   "logprobs", lp, "finish_reason")));
    } else {
        push(g, envelope(g, "text_completion",
                         json_pack("{s:s, s:i, s:o, s:n}", "text", text, "index", 0, "logprobs", lp,
                                   "finish_reason")));
    }
}

/* The calls a chat's text makes, as OpenAI's tool_calls (indexed for a stream's delta), or
 * NULL when it makes none; *content gets the rest of the text. */
bool answer_tool_calls(const struct gen *g, struct tool_calls *tc) {
    *tc = (struct tool_calls){0};
    if (g->o.tool_family >= 0 &&
        tool_calls_parse((enum tool_family)g->o.tool_family, g->text, g->text_len, tc) && tc->n)
        return true;
    tool_calls_free(tc);
    return false;
}

static json_t *tool_calls_json(const struct gen *g, bool indexed, char **content) {
    struct tool_calls tc;
    *content = NULL;
    if (!answer_tool_calls(g, &tc))
        return NULL;
    json_t *calls = json_array();
    for (size_t i = 0; calls && i < tc.n; i++) {
        json_t *c =
            json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", tc.calls[i].id, "type", "function",
                      "function", "name", tc.calls[i].name, "arguments", tc.calls[i].arguments);
        if (c && indexed)
            json_object_set_new(c, "index", json_integer((json_int_t)i));
        json_array_append_new(calls, c);
    }
    *content = tc.content, tc.content = NULL;
    tool_calls_free(&tc);
    return calls;
}

static void push_error(struct gen *g, const char *type, const char *msg) {
    push(g, json_pack("{s:{s:s, s:s, s:n, s:n}}", "error", "message", msg, "type", type, "param",
                      "code"));
}

void answer_stream_end(struct gen *g) {
    if (g->end == END_TIMEOUT || g->end == END_ERROR || g->end == END_CANCELLED) {
        push_error(g, "server_error",
                   g->end == END_TIMEOUT ? "the request took longer than the server's --timeout"
                   : g->end == END_ERROR ? "the generation failed"
                                         : "the generation was cancelled");
        return;
    }
    if (g->o.api == API_NATIVE) {
        push(g, native(g, "", g->n_lp, g->n_lp, true));
        return;
    }
    const char *finish = finish_reason(g);
    if (g->o.api == API_CHAT && g->o.tool_family >= 0) { /* held back until parsed */
        char *content = NULL;
        json_t *calls = tool_calls_json(g, true, &content);
        char *text =
            reply_valid_utf8(calls ? content : g->text, calls ? strlen(content) : g->text_len);
        if (text && *text)
            answer_chunk(g, text, 0, g->n_lp);
        free(text), free(content);
        if (calls) {
            push(g, envelope(g, "chat.completion.chunk",
                             json_pack("{s:i, s:{s:o}, s:n, s:n}", "index", 0, "delta",
                                       "tool_calls", calls, "logprobs", "finish_reason")));
            finish = "tool_calls";
        }
    }
    json_t *last = g->o.api == API_CHAT
                       ? envelope(g, "chat.completion.chunk",
                                  json_pack("{s:i, s:{}, s:n, s:s}", "index", 0, "delta",
                                            "logprobs", "finish_reason", finish))
                       : envelope(g, "text_completion",
                                  json_pack("{s:s, s:i, s:n, s:s}", "text", "", "index", 0,
                                            "logprobs", "finish_reason", finish));
    push(g, last);
    if (g->o.include_usage) { /* OpenAI's last chunk: no choices, the usage */
        json_t *u = json_pack("{s:s, s:s, s:I, s:s, s:[], s:o}", "id", g->id, "object",
                              g->o.api == API_CHAT ? "chat.completion.chunk" : "text_completion",
                              "created", (json_int_t)g->created, "model", state_model_id(g->s),
                              "choices", "usage", usage(g));
        push(g, u);
    }
    push_event(g, "[DONE]");
}

/* The first events of a stream: a chat's role, a completion's echoed prompt. */
void answer_stream_begin(struct gen *g) {
    if (g->o.api == API_CHAT)
        push(g, envelope(g, "chat.completion.chunk",
                         json_pack("{s:i, s:{s:s, s:s}, s:n, s:n}", "index", 0, "delta", "role",
                                   "assistant", "content", "", "logprobs", "finish_reason")));
    else if (g->o.api == API_COMPLETION && g->o.echo)
        answer_chunk(g, g->o.echo, 0, 0);
}

struct reply answer_whole(struct gen *g) {
    if (g->end == END_TIMEOUT)
        return reply_error(408, "timeout_error", NULL,
                           "the request took longer than the server's --timeout");
    if (g->end == END_ERROR)
        return reply_error(500, "server_error", NULL, "the generation failed");
    if (g->end == END_CANCELLED)
        return reply_error(503, "server_error", NULL, "the generation was cancelled");
    char *text = reply_valid_utf8(g->text ? g->text : "", g->text_len);
    json_t *j = NULL;
    if (g->o.api == API_NATIVE) {
        j = native(g, text ? text : "", 0, g->n_lp, true);
    } else if (g->o.api == API_CHAT) {
        char *content = NULL;
        json_t *calls = tool_calls_json(g, false, &content);
        json_t *msg = json_pack("{s:s, s:s?}", "role", "assistant", "content",
                                calls ? (content && *content ? content : NULL) : text);
        if (calls)
            json_object_set_new(msg, "tool_calls", calls);
        free(content);
        json_t *lp = g->o.logprobs ? logprobs_list(g, 0, g->n_lp, false) : json_null();
        j = envelope(g, "chat.completion",
                     json_pack("{s:i, s:o, s:o, s:s}", "index", 0, "message", msg, "logprobs", lp,
                               "finish_reason", calls ? "tool_calls" : finish_reason(g)));
    } else {
        size_t echo = g->o.echo ? strlen(g->o.echo) : 0;
        char *all = malloc(echo + strlen(text ? text : "") + 1);
        if (all)
            strcpy(all, g->o.echo ? g->o.echo : ""), strcat(all, text ? text : "");
        json_t *lp = g->o.logprobs ? logprobs_legacy(g, 0, g->n_lp, echo) : json_null();
        j = envelope(g, "text_completion",
                     json_pack("{s:s?, s:i, s:o, s:s}", "text", all, "index", 0, "logprobs", lp,
                               "finish_reason", finish_reason(g)));
        free(all);
    }
    free(text);
    if (j && g->o.api != API_NATIVE)
        json_object_set_new(j, "usage", usage(g));
    return reply_json(j);
}
