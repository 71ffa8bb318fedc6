/* answer_ollama.c: the answers of Ollama's /api/generate and /api/chat: one JSON object, or when
 * streamed (Ollama's default) one object per line (NDJSON) as the text comes, the last with done
 * true, why it ended, the counts and durations (nanoseconds), and /api/generate's context (the
 * prompt's tokens and the generated ones, which a next request may continue from). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/tool_calls.h"
#include "gen_int.h"
#include "state.h"

static json_t *line_base(const struct gen *g, bool done) {
    char at[48];
    reply_time(NULL, at, sizeof at);
    return json_pack("{s:s, s:s, s:b}", "model", state_model_id(g->s), "created_at", at, "done",
                     done);
}

static void push_line(struct gen *g, json_t *j) {
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (text) {
        answer_append(g, text, strlen(text));
        answer_append(g, "\n", 1);
    }
    free(text);
}

/* The text as /api/generate's response or /api/chat's assistant message. */
static void set_text(const struct gen *g, json_t *j, const char *text, json_t *tool_calls) {
    if (g->o.api == API_OLLAMA_GENERATE) {
        json_object_set_new(j, "response", json_string(text));
        json_decref(tool_calls);
        return;
    }
    json_t *msg = json_pack("{s:s, s:s}", "role", "assistant", "content", text);
    if (msg && tool_calls)
        json_object_set_new(msg, "tool_calls", tool_calls);
    json_object_set_new(j, "message", msg);
}

void answer_ollama_chunk(struct gen *g, const char *text) {
    json_t *j = line_base(g, false);
    if (j)
        set_text(g, j, text, NULL);
    push_line(g, j);
}

/* The calls the text makes, in Ollama's shape ({"function": {"name", "arguments": {...}}}), or
 * NULL; *content gets the rest of the text. */
static json_t *tool_calls(const struct gen *g, char **content) {
    struct tool_calls tc;
    *content = NULL;
    if (!answer_tool_calls(g, &tc))
        return NULL;
    json_t *calls = json_array();
    for (size_t i = 0; calls && i < tc.n; i++) {
        json_t *args = json_loads(tc.calls[i].arguments, JSON_DECODE_ANY, NULL);
        json_array_append_new(calls,
                              json_pack("{s:{s:s, s:o}}", "function", "name", tc.calls[i].name,
                                        "arguments", args ? args : json_object()));
    }
    *content = tc.content, tc.content = NULL;
    tool_calls_free(&tc);
    return calls;
}

/* The last object's counts, durations and reason (and /api/generate's context). */
static void finish(const struct gen *g, json_t *j) {
    const double ns = 1e9;
    json_object_set_new(j, "done_reason", json_string(g->end == END_LENGTH ? "length" : "stop"));
    json_object_set_new(j, "total_duration",
                        json_integer((json_int_t)((g->t_end - g->t_start) * ns)));
    json_object_set_new(j, "load_duration", json_integer(0));
    json_object_set_new(j, "prompt_eval_count", json_integer(g->n_prompt));
    json_object_set_new(j, "prompt_eval_duration",
                        json_integer((json_int_t)((g->t_first - g->t_start) * ns)));
    json_object_set_new(j, "eval_count", json_integer(g->n_out));
    json_object_set_new(j, "eval_duration",
                        json_integer((json_int_t)((g->t_end - g->t_first) * ns)));
    if (g->o.api == API_OLLAMA_GENERATE) {
        json_t *ctx = json_array();
        for (size_t i = 0; ctx && i < g->n_toks; i++)
            json_array_append_new(ctx, json_integer(g->toks[i]));
        json_object_set_new(j, "context", ctx);
    }
}

static const char *failure(const struct gen *g) {
    return g->end == END_TIMEOUT     ? "the request took longer than the server's --timeout"
           : g->end == END_ERROR     ? "the generation failed"
           : g->end == END_CANCELLED ? "the generation was cancelled"
                                     : NULL;
}

void answer_ollama_stream_end(struct gen *g) {
    if (failure(g)) {
        push_line(g, json_pack("{s:s}", "error", failure(g)));
        return;
    }
    json_t *calls = NULL;
    if (g->o.tool_family >= 0) { /* the text was held back until its calls were parsed */
        char *content = NULL;
        calls = tool_calls(g, &content);
        char *text =
            reply_valid_utf8(calls ? content : g->text, calls ? strlen(content) : g->text_len);
        if (text && *text)
            answer_ollama_chunk(g, text);
        free(text), free(content);
    }
    json_t *j = line_base(g, true);
    if (j) {
        set_text(g, j, "", calls);
        finish(g, j);
    }
    push_line(g, j);
}

struct reply answer_ollama_whole(struct gen *g) {
    if (failure(g))
        return reply_error_plain(g->end == END_TIMEOUT ? 408
                                 : g->end == END_ERROR ? 500
                                                       : 503,
                                 failure(g));
    char *content = NULL;
    json_t *calls = tool_calls(g, &content);
    char *text = reply_valid_utf8(calls     ? content
                                  : g->text ? g->text
                                            : "",
                                  calls ? strlen(content) : g->text_len);
    json_t *j = line_base(g, true);
    if (j) {
        set_text(g, j, text ? text : "", calls);
        finish(g, j);
    }
    free(text), free(content);
    return reply_json(j);
}
