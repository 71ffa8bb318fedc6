/* params.c: a generation request's fields, by OpenAI's names and llama.cpp's, as a gen's
 * options and its sampler chain. Every number is range-checked; a bad field is a 400 that
 * names it. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/sampling.h"
#include "gen.h"
#include "params.h"
#include "state.h"

static bool bad(struct reply *err, const char *param, const char *fmt, const char *a) {
    char msg[256];
    snprintf(msg, sizeof msg, fmt, a);
    *err = reply_error(400, "invalid_request_error", param, msg);
    return false;
}

/* A number field in [lo, hi] (absent or null: *out stays); false with *err naming it. */
bool param_number(json_t *req, const char *key, double lo, double hi, double *out,
                  struct reply *err) {
    json_t *v = json_object_get(req, key);
    if (!v || json_is_null(v))
        return true;
    if (!json_is_number(v) || !(json_number_value(v) >= lo && json_number_value(v) <= hi)) {
        char msg[160];
        snprintf(msg, sizeof msg, "'%s' must be a number from %g to %g", key, lo, hi);
        *err = reply_error(400, "invalid_request_error", key, msg);
        return false;
    }
    *out = json_number_value(v);
    return true;
}

static bool param_bool(json_t *req, const char *key, bool *out, struct reply *err) {
    json_t *v = json_object_get(req, key);
    if (!v || json_is_null(v))
        return true;
    if (!json_is_boolean(v))
        return bad(err, key, "'%s' must be a boolean", key);
    *out = json_is_true(v);
    return true;
}

/* The sampler's numbers by their JSON names (sampling.c's table); OpenAI's routes take its
 * narrower ranges for temperature and the penalties. */
static bool sampling_numbers(json_t *req, enum gen_api api, struct sampling_opts *so,
                             struct reply *err) {
    for (size_t i = 0; i < n_sampling_fields; i++) {
        const struct sampling_field *f = &sampling_fields[i];
        double v = sampling_field_get(so, f), lo = f->lo, hi = f->hi;
        if (api != API_NATIVE && !strcmp(f->json, "temperature"))
            lo = 0, hi = 2;
        else if (api != API_NATIVE && strstr(f->json, "_penalty") && lo < 0)
            lo = -2, hi = 2;
        if (!param_number(req, f->json, lo, hi, &v, err))
            return false;
        sampling_field_set(so, f, v);
    }
    if (api != API_NATIVE && so->top_p <= 0)
        return bad(err, "top_p", "'%s' must be above 0", "top_p");
    static unsigned counter; /* no seed: a new one each request */
    double seed = -1;
    if (!param_number(req, "seed", -1, 4294967295.0, &seed, err))
        return false;
    so->seed = seed >= 0 ? (uint32_t)seed
                         : (uint32_t)time(NULL) ^
                               (0x9e3779b9u * __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
    return true;
}

/* logit_bias: OpenAI's {"id": bias}, or llama.cpp's [[id, bias or false], ...]. */
static bool logit_bias(json_t *req, int32_t n_vocab, struct ox_logit_bias **out, size_t *n,
                       struct reply *err) {
    json_t *lb = json_object_get(req, "logit_bias");
    *out = NULL, *n = 0;
    if (!lb || json_is_null(lb))
        return true;
    size_t cap = json_is_object(lb) ? json_object_size(lb) : json_array_size(lb);
    if ((!json_is_object(lb) && !json_is_array(lb)) || cap > (size_t)n_vocab)
        return bad(err, "logit_bias", "'%s' must map token ids to biases", "logit_bias");
    *out = calloc(cap ? cap : 1, sizeof **out);
    if (!*out) {
        *err = reply_error(500, "server_error", NULL, "out of memory");
        return false;
    }
    const char *key;
    json_t *v;
    size_t i = 0;
    json_object_foreach(json_is_object(lb) ? lb : NULL, key, v) {
        char *end;
        long id = strtol(key, &end, 10);
        (*out)[i].token = *key && !*end ? (ox_token)id : -1;
        (*out)[i++].bias = json_is_number(v) ? (float)json_number_value(v) : 1e9f;
    }
    json_array_foreach(json_is_array(lb) ? lb : NULL, i, v) {
        json_t *id = json_array_get(v, 0), *b = json_array_get(v, 1);
        (*out)[i].token = json_is_integer(id) ? (ox_token)json_integer_value(id) : -1;
        (*out)[i].bias = json_is_false(b)    ? -INFINITY
                         : json_is_number(b) ? (float)json_number_value(b)
                                             : 1e9f;
        if (json_array_size(v) != 2)
            (*out)[i].token = -1;
    }
    *n = cap;
    for (size_t k = 0; k < cap; k++)
        if ((*out)[k].token < 0 || (*out)[k].token >= n_vocab ||
            ((*out)[k].bias != -INFINITY && !((*out)[k].bias >= -100 && (*out)[k].bias <= 100))) {
            free(*out), *out = NULL;
            return bad(err, "logit_bias",
                       "'%s' must map token ids of the vocabulary to biases from -100 to 100",
                       "logit_bias");
        }
    return true;
}

/* The output constraint: grammar (GBNF), json_schema, or response_format; *gbnf is malloc'd. */
static bool constraint(json_t *req, const char *tool_grammar, char **gbnf, size_t *len,
                       struct reply *err) {
    json_t *grammar = json_object_get(req, "grammar"),
           *schema = json_object_get(req, "json_schema");
    json_t *rf = json_object_get(req, "response_format");
    json_t *type = json_object_get(rf, "type");
    *gbnf = NULL, *len = 0;
    if (rf && !json_is_null(rf)) {
        const char *t = json_string_value(type);
        if (!json_is_object(rf) || !t ||
            (strcmp(t, "text") && strcmp(t, "json_object") && strcmp(t, "json_schema")))
            return bad(err, "response_format",
                       "'%s' must be {\"type\": \"text\", \"json_object\" or \"json_schema\"}",
                       "response_format");
        json_t *inner = json_object_get(rf, "json_schema");
        if (!strcmp(t, "json_schema") && !json_is_object(schema = json_object_get(inner, "schema")))
            return bad(err, "response_format",
                       "'%s' of type json_schema needs json_schema.schema, an object",
                       "response_format");
        if (!strcmp(t, "json_object"))
            schema = json_object_get(rf, "schema") ? json_object_get(rf, "schema") : NULL;
        if (!strcmp(t, "json_object") && !schema) {
            const char any_object[] = "{\"type\": \"object\"}";
            return ox_json_schema_to_grammar(any_object, sizeof any_object - 1, gbnf, len) ==
                       OX_OK ||
                   bad(err, NULL, "%s", ox_last_error());
        }
    }
    int given = (grammar && !json_is_null(grammar)) + (schema && !json_is_null(schema)) +
                (tool_grammar != NULL);
    if (given > 1)
        return bad(err, "grammar", "only one of %s may be given",
                   "grammar, json_schema, response_format and tool_choice \"required\"");
    if (tool_grammar) {
        *len = strlen(tool_grammar);
        *gbnf = strdup(tool_grammar);
        return *gbnf != NULL;
    }
    if (grammar && !json_is_null(grammar)) {
        if (!json_is_string(grammar))
            return bad(err, "grammar", "'%s' must be a string (GBNF)", "grammar");
        *len = json_string_length(grammar);
        *gbnf = strdup(json_string_value(grammar));
        return *gbnf != NULL;
    }
    if (!schema || json_is_null(schema))
        return true;
    char *text = json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY);
    enum ox_status st =
        text ? ox_json_schema_to_grammar(text, strlen(text), gbnf, len) : OX_ERR_OOM;
    free(text);
    if (st != OX_OK) {
        char msg[300];
        snprintf(msg, sizeof msg, "the JSON schema cannot be used: %s", ox_last_error());
        *err = reply_error(400, "invalid_request_error", "json_schema", msg);
        return false;
    }
    return true;
}

/* stop: a string or an array of them. */
static bool stops(json_t *req, struct gen_opts *o, struct reply *err) {
    json_t *stop = json_object_get(req, "stop");
    if (!stop || json_is_null(stop))
        return true;
    size_t n = json_is_string(stop) ? 1 : json_array_size(stop);
    if ((!json_is_string(stop) && !json_is_array(stop)) || n > STOP_MAX)
        return bad(err, "stop", "'%s' must be a string or an array of at most 16 strings", "stop");
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_is_string(stop) ? stop : json_array_get(stop, i);
        if (!json_is_string(s) || json_string_length(s) == 0 || json_string_length(s) > 256 ||
            strlen(json_string_value(s)) != json_string_length(s))
            return bad(err, "stop", "'%s' strings must be 1 to 256 bytes", "stop");
        if (!(o->stop[o->n_stop] = strdup(json_string_value(s))))
            return bad(err, NULL, "%s", "out of memory");
        o->n_stop++;
    }
    return true;
}

/* logprobs in each API's form: chat logprobs + top_logprobs, completions logprobs: N, native
 * n_probs: N. */
static bool logprobs(json_t *req, struct gen_opts *o, struct reply *err) {
    double top = 0;
    if (o->api == API_CHAT) {
        if (!param_bool(req, "logprobs", &o->logprobs, err) ||
            !param_number(req, "top_logprobs", 0, GEN_TOP_MAX, &top, err))
            return false;
        if (top > 0 && !o->logprobs)
            return bad(err, "top_logprobs", "'%s' needs logprobs: true", "top_logprobs");
    } else {
        const char *key = o->api == API_NATIVE ? "n_probs" : "logprobs";
        top = -1;
        if (!param_number(req, key, 0, o->api == API_NATIVE ? GEN_TOP_MAX : 5, &top, err))
            return false;
        o->logprobs = o->api == API_NATIVE ? top > 0 : top >= 0;
    }
    o->top_logprobs = top > 0 ? (int32_t)top : 0;
    return true;
}

/* llama-server's "lora": [{"id", "scale"}, ...], the request's own adapters (those of the
 * server's --lora list left out: scale 0); absent: the server's scales. */
static bool lora_field(struct state *s, json_t *lora, struct gen_opts *o, struct reply *err) {
    if (!lora || json_is_null(lora))
        return true;
    if (!json_is_array(lora))
        return bad(err, "lora", "%s", "'lora' must be an array of {\"id\", \"scale\"}");
    size_t i;
    json_t *item;
    o->has_lora = true;
    json_array_foreach(lora, i, item) {
        json_t *id = json_object_get(item, "id"), *scale = json_object_get(item, "scale");
        double v = json_number_value(scale);
        if (!json_is_integer(id) || json_integer_value(id) < 0 ||
            json_integer_value(id) >= state_lora_count(s))
            return bad(err, "lora", "%s",
                       "each 'lora' item's 'id' must be an adapter's (GET /lora-adapters)");
        if (!json_is_number(scale) || !isfinite(v) || fabs(v) > 100)
            return bad(err, "lora", "%s",
                       "each 'lora' item's 'scale' must be a number from -100 to 100");
        int32_t k = 0; /* an id given twice: the last scale */
        struct ox_lora *l = state_lora(s, (int)json_integer_value(id));
        while (k < o->n_lora && o->lora[k].lora != l)
            k++;
        o->lora[k] = (struct ox_lora_use){l, (float)v};
        o->n_lora += k == o->n_lora;
    }
    return true;
}

bool params_parse(struct state *s, json_t *req, enum gen_api api, const char *tool_grammar,
                  struct gen_opts *o, struct ox_sampler **smp, struct reply *err) {
    int32_t slot = state_slot_ctx(s);
    memset(o, 0, sizeof *o);
    o->api = api, o->tool_family = -1, o->timeout = state_timeout(s);
    /* Ollama's options are llama.cpp's names and ranges (ollama.c renames num_predict) */
    const bool native = api == API_NATIVE || GEN_OLLAMA(api);
    double max = native ? -1 : api == API_CHAT ? -1 : 16, n = 1;
    const char *max_key = native                                          ? "n_predict"
                          : json_object_get(req, "max_completion_tokens") ? "max_completion_tokens"
                                                                          : "max_tokens";
    bool cache_prompt = true;
    json_t *so_opts = json_object_get(req, "stream_options");
    if (!lora_field(s, json_object_get(req, "lora"), o, err))
        return false;
    if (!param_number(req, max_key,
                      GEN_OLLAMA(api) ? -2
                      : native        ? -1
                                      : 0,
                      1 << 30, &max, err) ||
        !param_number(req, "n", 1, 1, &n, err) || !param_bool(req, "stream", &o->stream, err) ||
        !param_bool(req, "cache_prompt", &cache_prompt, err) ||
        !param_bool(so_opts, "include_usage", &o->include_usage, err) || !stops(req, o, err) ||
        !logprobs(req, o, err))
        return false;
    /* the slot's context caps it (Ollama's -2, fill the context, is that too), unless the
     * server shifts contexts; then a request without a budget still ends there, rather than
     * never */
    double keep = 0, n_draft = -1;
    if (!param_number(req, "n_keep", -1, 1 << 30, &keep, err) ||
        !param_number(req, "speculative.n_max", 0, 256, &n_draft, err))
        return false;
    o->n_keep = (int32_t)keep;
    /* llama-server's per-request draft length: 0 drafts nothing for this request */
    o->draft_max = n_draft < 0 ? 0 : n_draft == 0 ? -1 : (int32_t)n_draft;
    const bool shift = state_options(s)->context_shift;
    bool to_slot = max == -2 || (max == -1 && shift) || (max > slot && !shift);
    o->max_tokens = to_slot ? slot : (int32_t)max;
    o->fresh = !cache_prompt;
    struct sampling_opts so;
    sampling_opts_default(&so);
    struct ox_logit_bias *bias = NULL;
    bool ok = sampling_numbers(req, native ? API_NATIVE : api, &so, err) &&
              logit_bias(req, ox_model_n_vocab(state_model(s)), &bias, &so.n_bias, err) &&
              constraint(req, tool_grammar, &so.grammar, &so.grammar_len, err);
    so.bias = bias;
    enum ox_status st = ok ? sampling_opts_chain(&so, state_model(s), slot, smp) : OX_OK;
    if (ok && st != OX_OK) {
        char msg[300];
        snprintf(msg, sizeof msg, "the sampler cannot be made: %s", ox_last_error());
        *err = reply_error(400, "invalid_request_error", "grammar", msg);
        ok = false;
    }
    free(bias), free(so.grammar);
    return ok;
}

void params_free(struct gen_opts *o) {
    for (int i = 0; i < o->n_stop; i++)
        free(o->stop[i]);
    free(o->echo);
    memset(o, 0, sizeof *o);
}
