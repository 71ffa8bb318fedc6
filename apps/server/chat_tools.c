/* chat_tools.c: a chat request's tools and tool_choice: the syntax its calls are parsed in
 * (the chat template's family), and for tool_choice "required" or a named function a grammar
 * that makes the model write one call in that syntax, its arguments following the tool's JSON
 * schema (as llama.cpp constrains tool calls). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_tools.h"
#include "common/tool_calls.h"
#include "state.h"

/* How a forced call is written in a family's syntax: around the JSON object, and the key of
 * its arguments. Families without a JSON form are forced to write the generic one. */
struct call_form {
    enum tool_family family;
    const char *before, *after, *args_key;
};
static const struct call_form forms[] = {
    {TOOLS_HERMES, "<tool_call>\\n", "\\n</tool_call>", "arguments"},
    {TOOLS_LLAMA3, "", "", "parameters"},
    {TOOLS_MISTRAL, "[TOOL_CALLS][", "]", "arguments"},
    {TOOLS_GENERIC, "", "", "arguments"},
};

static const struct call_form *form_of(enum tool_family f) {
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++)
        if (forms[i].family == f)
            return &forms[i];
    return &forms[sizeof forms / sizeof forms[0] - 1];
}

static bool bad(struct reply *err, const char *param, const char *msg) {
    *err = reply_error(400, "invalid_request_error", param, msg);
    return false;
}

/* The schema of one call of the function fn: {"name": its name, args_key: its parameters}. */
static json_t *call_schema(json_t *fn, const char *args_key) {
    json_t *params = json_object_get(fn, "parameters");
    json_t *args =
        json_is_object(params) ? json_incref(params) : json_pack("{s:s}", "type", "object");
    json_t *props = json_pack("{s:{s:s}, s:o}", "name", "const",
                              json_string_value(json_object_get(fn, "name")), args_key, args);
    return json_pack("{s:s, s:o, s:[s, s], s:b}", "type", "object", "properties", props, "required",
                     "name", args_key, "additionalProperties", 0);
}

/* GBNF for one call of the chosen tools (name NULL: any) in family f's form. */
static char *call_grammar(json_t *tools, const char *name, enum tool_family f, struct reply *err) {
    const struct call_form *form = form_of(f);
    json_t *any = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *fn = json_object_get(t, "function");
        if (!name || !strcmp(name, json_string_value(json_object_get(fn, "name"))))
            json_array_append_new(any, call_schema(fn, form->args_key));
    }
    json_t *schema = json_pack("{s:o}", "anyOf", any);
    char *text = schema ? json_dumps(schema, JSON_COMPACT) : NULL;
    json_decref(schema);
    char *gbnf = NULL;
    size_t len = 0;
    if (!text || ox_json_schema_to_grammar(text, strlen(text), &gbnf, &len) != OX_OK) {
        char msg[300];
        snprintf(msg, sizeof msg, "a tool's parameters cannot be used: %s", ox_last_error());
        free(text);
        bad(err, "tools", msg);
        return NULL;
    }
    free(text);
    /* the schema's root becomes the call, inside the family's markers */
    char *root = strstr(gbnf, "root ::=");
    size_t cap = len + strlen(form->before) + strlen(form->after) + 64;
    char *out = root ? malloc(cap) : NULL;
    if (out) {
        memcpy(root, "call", 4);
        snprintf(out, cap, "root ::= \"%s\" call \"%s\"\n%s", form->before, form->after, gbnf);
    }
    free(gbnf);
    if (!out)
        *err = reply_error(500, "server_error", NULL, "the tools' grammar cannot be made");
    return out;
}

static bool valid_tools(json_t *tools, struct reply *err) {
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *fn = json_object_get(t, "function"), *params = json_object_get(fn, "parameters");
        const char *type = json_string_value(json_object_get(t, "type"));
        if (!type || strcmp(type, "function") || !json_is_string(json_object_get(fn, "name")) ||
            (params && !json_is_object(params)))
            return bad(err, "tools",
                       "each tool must be {\"type\": \"function\", \"function\": {\"name\": ..., "
                       "\"parameters\": {...}}}");
    }
    return true;
}

bool chat_tools(struct state *s, json_t *req, int *family, char **grammar, struct reply *err) {
    json_t *tools = json_object_get(req, "tools"), *choice = json_object_get(req, "tool_choice");
    *family = -1, *grammar = NULL;
    if (!tools || json_is_null(tools) || json_array_size(tools) == 0) {
        if (choice && !json_is_null(choice) && !json_is_string(choice))
            return bad(err, "tool_choice", "'tool_choice' names a function but there are no tools");
        return true; /* render_chat checks that tools is an array */
    }
    if (!json_is_array(tools) || !valid_tools(tools, err))
        return json_is_array(tools) ? false : bad(err, "tools", "'tools' must be an array");
    const char *mode = json_is_string(choice) ? json_string_value(choice) : NULL;
    const char *name =
        json_string_value(json_object_get(json_object_get(choice, "function"), "name"));
    if (choice && !json_is_null(choice) &&
        (mode ? strcmp(mode, "none") && strcmp(mode, "auto") && strcmp(mode, "required") : !name))
        return bad(err, "tool_choice",
                   "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": "
                   "\"function\", \"function\": {\"name\": ...}}");
    if (mode && !strcmp(mode, "none"))
        return true;
    enum tool_family f = tool_family_of(state_chat_template(s));
    bool forced = (mode && !strcmp(mode, "required")) || name;
    if (forced && form_of(f)->family != f)
        f = TOOLS_GENERIC; /* forced to write the generic form: parse that */
    *family = (int)f;
    if (!forced)
        return true;
    bool known = !name;
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        const char *n = json_string_value(json_object_get(json_object_get(t, "function"), "name"));
        known |= name && !strcmp(n, name);
    }
    if (!known)
        return bad(err, "tool_choice", "'tool_choice' names a function that is not in 'tools'");
    *grammar = call_grammar(tools, name, f, err);
    return *grammar != NULL;
}
