/* test_tool_calls.c: the tool-call parser (apps/common, used by the server) on what each real
 * chat template renders for an assistant's tool_calls (what its model learned to write), plus
 * hand-made edge cases. */
#define _POSIX_C_SOURCE 200809L /* dirent */
#include <dirent.h>
#include <jansson.h>
#include <stdint.h>
#include <time.h>

#include "oxidize.h"
#include "test.h"
#include "common/tool_calls.h"

/* strftime_now() pinned as for the references (some templates print the date). */
#define FIXED_NOW 1768473000

/* Every template in testdata/chat: the family tool_family_of must read from it, and where the
 * assistant's generated text lies in its rendering of the tool_call case: after `begin`, up to
 * `end`, both searched after the user's question; content: what the parser must leave outside
 * the calls. begin NULL: the template renders no call (or failed for Hugging Face too). */
static const struct {
    const char *name;
    enum tool_family family;
    const char *begin, *end, *content;
} templates[] = {
    {"Apertus-8B-Instruct", TOOLS_APERTUS, "<|assistant_start|>", "[{\"temperature\"", ""},
    {"Apriel-1.6-15b-Thinker-fixed", TOOLS_APRIEL, "<|begin_assistant|>", "<|end|>", ""},
    {"ByteDance-Seed-OSS", TOOLS_QWEN3_CODER, "<seed:bos>assistant\n", "<seed:eos>", ""},
    {"Cohere2MoE", TOOLS_COMMAND_R7B, "<|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>", ""},
    {"CohereForAI-c4ai-command-r7b-12-2024-tool_use", TOOLS_COMMAND_R7B, "<|CHATBOT_TOKEN|>",
     "<|END_OF_TURN_TOKEN|>", "<|START_THINKING|><|END_THINKING|>"},
    {"GLM-4.6", TOOLS_GLM, "<|assistant|>", "<|observation|>", "<think></think>"},
    {"GigaChat3-10B-A1.8B", TOOLS_GIGACHAT, "assistant<|role_sep|>\n",
     "<|message_sep|>\n\nfunction result", ""},
    {"GigaChat3.1-10B-A1.8B", TOOLS_GIGACHAT, "assistant<|role_sep|>\n",
     "<|message_sep|>\n\nfunction result", ""},
    {"Kimi-K2-Instruct", TOOLS_KIMI_K2, NULL, NULL, NULL},
    {"Kimi-K2-Thinking", TOOLS_KIMI_K2, NULL, NULL, NULL},
    {"LFM2.5-8B-A1B", TOOLS_GENERIC, NULL, NULL, NULL},
    {"LFM2.5-Instruct", TOOLS_GENERIC, NULL, NULL, NULL},
    {"MiniMax-M2", TOOLS_MINIMAX, "]~b]ai\n", "[e~[", ""},
    {"MiniMax-M3", TOOLS_GENERIC, NULL, NULL, NULL},
    {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", TOOLS_QWEN3_CODER, "<|im_start|>assistant\n",
     "<|im_end|>", "<think></think>"},
    {"NVIDIA-Nemotron-Nano-v2", TOOLS_NEMOTRON, "<SPECIAL_11>Assistant\n", "<SPECIAL_12>", ""},
    {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", TOOLS_HERMES, "<|im_start|>assistant\n",
     "<|im_end|>", ""},
    {"Qwen-QwQ-32B", TOOLS_HERMES, "<|im_start|>assistant\n", "<|im_end|>", ""},
    {"Qwen-Qwen3-0.6B", TOOLS_HERMES, "<|im_start|>assistant\n", "<|im_end|>", ""},
    {"Qwen3-Coder", TOOLS_QWEN3_CODER, "<|im_start|>assistant\n", "<|im_end|>", ""},
    {"Reka-Edge", TOOLS_HERMES, "<sep>assistant: ", "<sep>human", ""},
    {"StepFun3.5-Flash", TOOLS_QWEN3_CODER, "<|im_start|>assistant\n", "<|im_end|>",
     "<think>\n\n</think>"},
    {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", TOOLS_DEEPSEEK_R1, "<｜Assistant｜>",
     "<｜end▁of▁sentence｜>", ""},
    {"deepseek-ai-DeepSeek-V3.1", TOOLS_DEEPSEEK_V3, "<｜Assistant｜>", "<｜end▁of▁sentence｜>",
     "<think></think>"},
    {"deepseek-ai-DeepSeek-V4-Flash-0731", TOOLS_DEEPSEEK_V4, "<｜Assistant｜>",
     "<｜end▁of▁sentence｜>", "</think>"},
    {"deepseek-ai-DeepSeek-V4", TOOLS_DEEPSEEK_V4, "<｜Assistant｜>", "<｜end▁of▁sentence｜>",
     "</think>"},
    {"google-gemma-2-2b-it", TOOLS_GENERIC, NULL, NULL, NULL},
    {"google-gemma-4-31B-it-interleaved", TOOLS_GENERIC, NULL, NULL, NULL},
    {"ibm-granite-granite-3.3-2B-Instruct", TOOLS_GRANITE, NULL, NULL, NULL},
    {"ibm-granite-granite-4.0", TOOLS_HERMES, "<|start_of_role|>assistant<|end_of_role|>",
     "<|end_of_text|>", ""},
    {"llama-cpp-deepseek-r1", TOOLS_DEEPSEEK_R1, NULL, NULL, NULL},
    {"llama-cpp-rwkv-world", TOOLS_GENERIC, NULL, NULL, NULL},
    {"meetkai-functionary-medium-v3.2", TOOLS_GENERIC, NULL, NULL, NULL},
    {"meta-llama-Llama-3.1-8B-Instruct", TOOLS_LLAMA3,
     "<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>", ""},
    {"meta-llama-Llama-3.3-70B-Instruct", TOOLS_LLAMA3,
     "<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>", ""},
    {"microsoft-Phi-3.5-mini-instruct", TOOLS_GENERIC, NULL, NULL, NULL},
    {"mistralai-Mistral-Nemo-Instruct-2407", TOOLS_MISTRAL, "[/INST]", "</s>", ""},
    {"moonshotai-Kimi-K2", TOOLS_KIMI_K2, "<|im_middle|>", "<|im_end|>", ""},
    {"openbmb-MiniCPM5-1B", TOOLS_MINICPM, "<|im_start|>assistant\n", "<|im_end|>", ""},
    {"poolside-Laguna-S-2.1", TOOLS_GLM, NULL, NULL, NULL},
    {"poolside-Laguna-XS.2", TOOLS_GLM, NULL, NULL, NULL},
    {"tencent-Hy3", TOOLS_HUNYUAN, "<｜hy_Assistant:opensource｜>", "<｜hy_eos:opensource｜>",
     "<think:opensource></think:opensource>"},
    {"unsloth-mistral-Devstral-Small-2507", TOOLS_MISTRAL, "[/INST]", "</s>", ""},
    {"upstage-Solar-Open-100B", TOOLS_SOLAR, "<|begin|>assistant", "<|begin|>tool", ""},
};
#define N_TEMPLATES (sizeof templates / sizeof *templates)

/* A second tool for the two-call conversation, with arguments of other kinds (no nesting: some
 * templates print nested values as Python reprs, which the edge cases below leave aside). */
static const char *second_tool =
    "{\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"description\": \"Time\", "
    "\"parameters\": {\"type\": \"object\", \"properties\": {\"tz\": {\"type\": \"string\"}}}}}";
static const char *second_call =
    "{\"id\": \"xyzUVW456\", \"type\": \"function\", \"function\": {\"name\": \"get_time\", "
    "\"arguments\": {\"tz\": \"Europe/Paris\", \"n\": 2, \"on\": true}}}";

/* Parse text and compare with OpenAI-style tool_calls (arguments compared as JSON). */
static void expect_calls(const char *what, enum tool_family f, const char *text, size_t len,
                         json_t *want, const char *content) {
    struct tool_calls tc;
    CHECK(tool_calls_parse(f, text, len, &tc));
    CHECK_MSG(tc.n == json_array_size(want), "%s: %zu calls, want %zu, in '%.*s'", what, tc.n,
              json_array_size(want), (int)len, text);
    for (size_t i = 0; i < tc.n && i < json_array_size(want); i++) {
        json_t *fn = json_object_get(json_array_get(want, i), "function");
        json_t *args = json_loads(tc.calls[i].arguments, 0, NULL);
        CHECK_MSG(!strcmp(tc.calls[i].name, json_string_value(json_object_get(fn, "name"))),
                  "%s: name '%s'", what, tc.calls[i].name);
        CHECK_MSG(json_equal(args, json_object_get(fn, "arguments")), "%s: arguments %s", what,
                  tc.calls[i].arguments);
        CHECK_MSG(strlen(tc.calls[i].id) == 29 && !strncmp(tc.calls[i].id, "call_", 5), "%s: id %s",
                  what, tc.calls[i].id);
        json_decref(args);
    }
    if (content)
        CHECK_MSG(!strcmp(tc.content, content), "%s: content '%s', want '%s'", what, tc.content,
                  content);
    tool_calls_free(&tc);
}

/* The assistant's text in a rendering (see templates[]); NULL when the markers are missing. */
static const char *cut(const char *out, const char *begin, const char *end, size_t *len) {
    const char *q = strstr(out, "What's the weather in Paris?");
    const char *b = q ? strstr(q, begin) : NULL;
    const char *e = b ? strstr(b + strlen(begin), end) : NULL;
    *len = e ? (size_t)(e - b - strlen(begin)) : 0;
    return e ? b + strlen(begin) : NULL;
}

/* Render the tool_call case with the template; two: with a second call added. Tool call ids are
 * nine characters (Mistral Nemo insists). NULL when the template refuses. */
static char *render(const char *tmpl, json_t *cs, json_t *ctx, bool two) {
    json_t *in = json_deep_copy(json_object_get(cs, "input"));
    json_t *msgs = json_object_get(in, "messages"), *tools = json_object_get(in, "tools");
    json_t *calls = json_object_get(json_array_get(msgs, 1), "tool_calls");
    json_object_set_new(json_array_get(calls, 0), "id", json_string("abcDEF123"));
    json_object_set_new(json_array_get(msgs, 2), "tool_call_id", json_string("abcDEF123"));
    if (two) {
        json_array_append_new(calls, json_loads(second_call, 0, NULL));
        json_array_append_new(tools, json_loads(second_tool, 0, NULL));
        json_t *reply = json_deep_copy(json_array_get(msgs, 2));
        json_object_set_new(reply, "tool_call_id", json_string("xyzUVW456"));
        json_object_set_new(reply, "name", json_string("get_time"));
        json_array_append_new(msgs, reply);
    }
    char *m = json_dumps(msgs, 0), *t = json_dumps(tools, 0), *out = NULL;
    size_t len;
    const char *bos = json_string_value(json_object_get(ctx, "bos_token"));
    const char *eos = json_string_value(json_object_get(ctx, "eos_token"));
    if (ox_chat_render_json(tmpl, m, t, true, bos, eos, FIXED_NOW, &out, &len) != OX_OK)
        out = NULL;
    free(m), free(t);
    json_decref(in);
    return out;
}

/* Each template: its family, then its own rendering of one call (Hugging Face's, or ours where
 * Hugging Face's failed on the case's ids) and of two calls (ours) parsed back. */
static void test_templates(void) {
    char path[1024];
    int one = 0, two = 0, rows = 0;
    for (size_t i = 0; i < N_TEMPLATES; i++) {
        snprintf(path, sizeof path, "%s/chat/templates/%s.jinja", test_data_dir(),
                 templates[i].name);
        char *tmpl = test_read_file(path, NULL);
        CHECK_MSG(tmpl, "cannot read %s", path);
        CHECK_MSG(tool_family_of(tmpl) == templates[i].family, "%s: family %s, want %s",
                  templates[i].name, tool_family_name(tool_family_of(tmpl)),
                  tool_family_name(templates[i].family));
        snprintf(path, sizeof path, "%s/chat/expected/%s.json", test_data_dir(), templates[i].name);
        json_t *ref = json_load_file(path, 0, NULL);
        json_t *cs = json_object_get(json_object_get(ref, "cases"), "tool_call");
        json_t *ctx = json_object_get(ref, "context");
        json_t *want = json_object_get(
            json_array_get(json_object_get(json_object_get(cs, "input"), "messages"), 1),
            "tool_calls");
        rows += templates[i].begin != NULL;
        if (tmpl && cs && templates[i].begin) {
            const char *hf = json_string_value(json_object_get(cs, "output"));
            char *ours = hf ? NULL : render(tmpl, cs, ctx, false);
            size_t len;
            const char *gen = cut(hf     ? hf
                                  : ours ? ours
                                         : "",
                                  templates[i].begin, templates[i].end, &len);
            CHECK_MSG(gen, "%s: no assistant text in the rendering", templates[i].name);
            if (gen)
                expect_calls(templates[i].name, templates[i].family, gen, len, want,
                             templates[i].content);
            one += gen != NULL;
            free(ours);
            /* Two calls, where the template renders them (Llama 3 allows one). */
            char *out2 = render(tmpl, cs, ctx, true);
            json_t *calls = json_deep_copy(want);
            json_array_append_new(calls, json_loads(second_call, 0, NULL));
            gen = out2 ? cut(out2, templates[i].begin, templates[i].end, &len) : NULL;
            char *second = gen ? strndup(gen, len) : NULL; /* GigaChat renders the first only */
            if (second && strstr(second, "get_time")) {
                char what[300];
                snprintf(what, sizeof what, "%s (two calls)", templates[i].name);
                expect_calls(what, templates[i].family, gen, len, calls, templates[i].content);
                two++;
            }
            json_decref(calls);
            free(second);
            free(out2);
        }
        json_decref(ref);
        free(tmpl);
    }
    printf("  %d templates' calls parsed back, %d with two calls\n", one, two);
    CHECK_EQ(one, rows);
    CHECK_EQ(two, rows - 4); /* Llama 3 (raises) and GigaChat (drops) render one call */
}

/* Every template in the folder is in templates[], so a new one gets a declared family. */
static void test_all_templates_listed(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/chat/templates", test_data_dir());
    DIR *d = opendir(path);
    CHECK_MSG(d, "cannot open %s", path);
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t n = strlen(e->d_name), found = 0;
        if (n < 7 || strcmp(e->d_name + n - 6, ".jinja"))
            continue;
        for (size_t i = 0; i < N_TEMPLATES; i++)
            found +=
                strlen(templates[i].name) == n - 6 && !strncmp(templates[i].name, e->d_name, n - 6);
        CHECK_MSG(found == 1, "%s is not in templates[]", e->d_name);
    }
    if (d)
        closedir(d);
}

/* expect_calls with calls given as [[name, arguments JSON], ...]. */
static void expect(enum tool_family f, const char *text, const char *calls_json,
                   const char *content) {
    json_t *pairs = json_loads(calls_json, 0, NULL), *want = json_array(), *p;
    size_t i;
    json_array_foreach(pairs, i, p) {
        json_array_append_new(want,
                              json_pack("{s:{s:O,s:O}}", "function", "name", json_array_get(p, 0),
                                        "arguments", json_array_get(p, 1)));
    }
    CHECK_MSG(pairs, "bad test JSON %s", calls_json);
    expect_calls(text, f, text, strlen(text), want, content);
    json_decref(pairs);
    json_decref(want);
}

static void test_edges(void) {
    const char *none = "[]";
    /* Text around the calls, several calls, several sections. */
    expect(TOOLS_HERMES,
           "Let me check.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>",
           "[[\"f\", {\"a\": 1}]]", "Let me check.");
    expect(
        TOOLS_HERMES,
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": "
        "\"g\", \"arguments\": {\"x\": [1, {\"y\": null}]}}\n</tool_call>\nDone.",
        "[[\"f\", {}], [\"g\", {\"x\": [1, {\"y\": null}]}]]", "Done.");
    /* No calls: the text comes back unchanged. */
    expect(TOOLS_HERMES, "  Just text, no calls.\n", none, "  Just text, no calls.\n");
    expect(TOOLS_HERMES, "", none, "");
    expect(TOOLS_GENERIC, "{\"answer\": 42}", none, "{\"answer\": 42}");
    expect(TOOLS_LLAMA3, "The JSON {\"name\": \"f\", \"parameters\": {}} is mid-text.", none,
           "The JSON {\"name\": \"f\", \"parameters\": {}} is mid-text.");
    /* Malformed inside the markers: left as content, and the next good call still found. */
    expect(TOOLS_HERMES, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }\n</tool_call>",
           none, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }\n</tool_call>");
    expect(
        TOOLS_HERMES,
        "<tool_call>{\"name\": \"f\"} trailing</tool_call><tool_call>{\"name\": \"g\"}</tool_call>",
        "[[\"g\", {}]]", "<tool_call>{\"name\": \"f\"} trailing</tool_call>");
    expect(TOOLS_HERMES, "<tool_call>{\"name\": \"bad name\", \"arguments\": {}}</tool_call>", none,
           "<tool_call>{\"name\": \"bad name\", \"arguments\": {}}</tool_call>");
    expect(TOOLS_MISTRAL, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}", none,
           "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}");
    /* Cut off before the closing tag: a complete call counts, a cut one does not. */
    expect(TOOLS_HERMES, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n",
           "[[\"f\", {\"a\": 1}]]", "");
    expect(TOOLS_HERMES, "<tool_call>\n{\"name\": \"f\", \"argu", none,
           "<tool_call>\n{\"name\": \"f\", \"argu");
    expect(TOOLS_QWEN3_CODER, "<tool_call>\n<function=f>\n<parameter=a>\n1", none,
           "<tool_call>\n<function=f>\n<parameter=a>\n1");
    /* Arguments as JSON text are kept as written; text that is not JSON is no call. */
    struct tool_calls tc;
    const char *s = "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>";
    CHECK(tool_calls_parse(TOOLS_HERMES, s, strlen(s), &tc) && tc.n == 1);
    CHECK(tc.n == 1 && !strcmp(tc.calls[0].arguments, "{\"a\": 1}"));
    tool_calls_free(&tc);
    expect(TOOLS_HERMES, "<tool_call>{\"name\": \"f\", \"arguments\": \"{oops\"}</tool_call>", none,
           NULL);
    /* Objects are dumped compact, UTF-8 unescaped, keys in order. */
    s = "<tool_call>{\"name\": \"f\", \"arguments\": {\"z\": \"Zürich ✓\", \"a\": "
        "1.5}}</tool_call>";
    CHECK(tool_calls_parse(TOOLS_HERMES, s, strlen(s), &tc) && tc.n == 1);
    CHECK_MSG(tc.n == 1 && !strcmp(tc.calls[0].arguments, "{\"z\":\"Zürich ✓\",\"a\":1.5}"), "%s",
              tc.n ? tc.calls[0].arguments : "");
    tool_calls_free(&tc);
    /* Llama 3: bare at the start, after <|python_tag|>, split by ';' or newlines. */
    expect(TOOLS_LLAMA3, "{\"name\": \"f\", \"parameters\": {\"q\": \"ü\"}}",
           "[[\"f\", {\"q\": \"ü\"}]]", "");
    expect(TOOLS_LLAMA3,
           "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}; {\"name\": \"g\", \"arguments\": "
           "{\"b\": false}}\n{\"type\": \"function\", \"name\": \"h\", \"parameters\": {}}",
           "[[\"f\", {}], [\"g\", {\"b\": false}], [\"h\", {}]]", "");
    /* Mistral: the array form, the [ARGS] form twice, text after. */
    expect(TOOLS_MISTRAL,
           "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": "
           "{\"x\": [1, 2]}, \"id\": \"abcDEF123\"}]",
           "[[\"a\", {}], [\"b\", {\"x\": [1, 2]}]]", "");
    expect(TOOLS_MISTRAL, "[TOOL_CALLS]a[ARGS]{\"x\": 1}[TOOL_CALLS]b[ARGS]{} ok",
           "[[\"a\", {\"x\": 1}], [\"b\", {}]]", "ok");
    /* Generic: the wrapper, a bare call, OpenAI's own shape. */
    expect(TOOLS_GENERIC, " {\"tool_calls\": [{\"name\": \"f\", \"arguments\": {\"q\": \"x\"}}]}",
           "[[\"f\", {\"q\": \"x\"}]]", "");
    expect(TOOLS_GENERIC, "{\"tool_call\": {\"name\": \"f\", \"arguments\": {}}}", "[[\"f\", {}]]",
           "");
    expect(TOOLS_GENERIC,
           "{\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": \"{}\"}}",
           "[[\"f\", {}]]", "");
    /* XML values: JSON where they parse, else strings; DeepSeek V4's string="true" keeps text. */
    expect(TOOLS_QWEN3_CODER,
           "<tool_call>\n<function=f>\n<parameter=n>\n42\n</parameter>\n<parameter=s>\nhello "
           "world\n</parameter>\n<parameter=o>\n{\"k\": [true]}\n</parameter>\n</function>\n"
           "</tool_call>",
           "[[\"f\", {\"n\": 42, \"s\": \"hello world\", \"o\": {\"k\": [true]}}]]", "");
    expect(TOOLS_DEEPSEEK_V4,
           "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" "
           "string=\"true\">42</｜DSML｜parameter>\n<｜DSML｜parameter name=\"b\" "
           "string=\"false\">42</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
           "[[\"f\", {\"a\": \"42\", \"b\": 42}]]", "");
    expect(TOOLS_GLM, "<tool_call>now\n</tool_call>", "[[\"now\", {}]]", "");
    expect(TOOLS_GRANITE, "<|tool_call|>[{\"name\": \"f\", \"arguments\": {\"a\": 1}}]",
           "[[\"f\", {\"a\": 1}]]", "");
    /* Kimi's functions.NAME:IDX, Solar's id before the name. */
    expect(TOOLS_KIMI_K2,
           "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_"
           "begin|>{}<|tool_call_end|><|tool_call_begin|>functions.g:1<|tool_call_argument_begin|>"
           "{\"a\": 1}<|tool_call_end|><|tool_calls_section_end|>",
           "[[\"f\", {}], [\"g\", {\"a\": 1}]]", "");
}

/* Large, deep and random inputs: no crash, no quadratic time, text without calls unchanged. */
static void test_hostile(void) {
    size_t big = (size_t)4 << 20;
    char *s = malloc(big + 1);
    struct tool_calls tc;
    clock_t t0 = clock();
    for (int f = 0; f < TOOLS_COUNT; f++) {
        /* Open markers that never close, over and over; then a deep nest after one. */
        const char *pieces[] = {"<tool_call>{", "[TOOL_CALLS]", "<tool_call><function=f>",
                                "<|python_tag|>[", "<tool_call>f<arg_key>k</arg_key>"};
        for (int k = 0; k < 5; k++) {
            size_t n = strlen(pieces[k]), len = 0;
            for (; len + n <= big; len += n)
                memcpy(s + len, pieces[k], n);
            s[len] = 0;
            CHECK(tool_calls_parse((enum tool_family)f, s, len, &tc) && tc.n == 0);
            CHECK_MSG(tc.content && strlen(tc.content) == len, "%s on %s",
                      tool_family_name((enum tool_family)f), pieces[k]);
            tool_calls_free(&tc);
        }
        memcpy(s, "[TOOL_CALLS]", 12);
        memset(s + 12, '[', big - 12);
        s[big] = 0;
        CHECK(tool_calls_parse((enum tool_family)f, s, big, &tc) && tc.n == 0);
        tool_calls_free(&tc);
    }
    printf("  hostile inputs: %.2f s\n", (double)(clock() - t0) / CLOCKS_PER_SEC);
    /* A call with a 1 MB argument, and 500 calls with distinct ids. */
    int n = snprintf(s, big, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"");
    memset(s + n, 'x', 1 << 20);
    strcpy(s + n + (1 << 20), "\"}}</tool_call>");
    CHECK(tool_calls_parse(TOOLS_HERMES, s, strlen(s), &tc) && tc.n == 1);
    CHECK(tc.n == 1 && strlen(tc.calls[0].arguments) == (1 << 20) + 8);
    tool_calls_free(&tc);
    size_t len = 0;
    for (int i = 0; i < 500; i++)
        len += (size_t)sprintf(s + len, "<tool_call>{\"name\": \"f%d\"}</tool_call>", i);
    CHECK(tool_calls_parse(TOOLS_HERMES, s, len, &tc) && tc.n == 500);
    int dups = 0;
    for (size_t i = 0; i < tc.n; i++)
        for (size_t j = i + 1; j < tc.n; j++)
            dups += !strcmp(tc.calls[i].id, tc.calls[j].id);
    CHECK_EQ(dups, 0);
    CHECK(tc.n == 500 && !strcmp(tc.calls[499].name, "f499"));
    tool_calls_free(&tc);
    /* Random mixes of every family's marker pieces and JSON fragments. */
    const char *bits[] = {"<tool_call>",
                          "</tool_call>",
                          "{\"name\": \"f\"",
                          ", \"arguments\": {",
                          "}",
                          "]",
                          "[",
                          "\"",
                          ";",
                          "\n",
                          "[TOOL_CALLS]",
                          "[ARGS]",
                          "<function=",
                          ">",
                          "<parameter=",
                          "</parameter>",
                          "</function>",
                          "<|python_tag|>",
                          "<arg_key>",
                          "</arg_key>",
                          "<arg_value>",
                          "x",
                          "<｜DSML｜invoke name=\"",
                          "\">",
                          "<|tool_call_begin|>",
                          "ü",
                          "\\"};
    uint64_t r = 42;
    for (int it = 0; it < 20000; it++) {
        size_t l = 0;
        for (int k = 0; k < 24; k++) {
            r = r * 6364136223846793005u + 1442695040888963407u;
            const char *b = bits[(r >> 33) % (sizeof bits / sizeof *bits)];
            memcpy(s + l, b, strlen(b));
            l += strlen(b);
        }
        enum tool_family f = (enum tool_family)((r >> 20) % TOOLS_COUNT);
        CHECK(tool_calls_parse(f, s, l, &tc));
        if (tc.n == 0)
            CHECK(strlen(tc.content) == l && !memcmp(tc.content, s, l));
        tool_calls_free(&tc);
    }
    free(s);
    tool_calls_free(NULL);
    CHECK(tool_calls_parse(TOOLS_HERMES, NULL, 0, &tc) && tc.n == 0 && !strcmp(tc.content, ""));
    tool_calls_free(&tc);
    CHECK_EQ(tool_family_of(NULL), TOOLS_GENERIC);
    CHECK_EQ(tool_family_of("{{ messages }}"), TOOLS_GENERIC);
    CHECK_STR(tool_family_name(TOOLS_HERMES), "hermes");
    CHECK_STR(tool_family_name(TOOLS_COUNT), "?");
}

int main(void) {
    test_templates();
    test_all_templates_listed();
    test_edges();
    test_hostile();
    return test_finish("test_tool_calls");
}
