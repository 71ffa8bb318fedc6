/* tool_calls.h: tool calls found in a model's generated text, in the syntax its chat template
 * teaches, turned into OpenAI's tool_calls (name + arguments as JSON text). */
#ifndef OX_APPS_COMMON_TOOL_CALLS_H
#define OX_APPS_COMMON_TOOL_CALLS_H

#include <stdbool.h>
#include <stddef.h>

/* The call syntaxes, one per model family, named after the models that write them:
 *   generic      whole text {"tool_calls":[{"name","arguments"}]} or {"name","arguments"}
 *   hermes       <tool_call>{"name","arguments"}</tool_call>  (Hermes, Qwen 2.5/3, Granite 4)
 *   qwen3-coder  <tool_call><function=f><parameter=k>v</parameter></function></tool_call>
 *                (Qwen3-Coder, Nemotron 3, Step 3.5; Seed-OSS in <seed:tool_call>)
 *   glm          <tool_call>f<arg_key>k</arg_key><arg_value>v</arg_value></tool_call> (+ Laguna)
 *   hunyuan      the same in :opensource tags inside <tool_calls:opensource>
 *   minimax      <minimax:tool_call><invoke name="f"><parameter name="k">v</parameter>...
 *   minicpm      <function name="f"><param name="k">v</param></function>
 *   llama3       [<|python_tag|>]{"name","parameters"}, several split by ';' or newlines
 *   mistral      [TOOL_CALLS][{"name","arguments"}, ...] or [TOOL_CALLS]f[ARGS]{...}
 *   command-r7b  <|START_ACTION|>[{"tool_name","parameters"}]<|END_ACTION|>
 *   deepseek-r1  <｜tool▁call▁begin｜>function<｜tool▁sep｜>f ```json {...} ```<｜tool▁call▁end｜>
 *   deepseek-v3  <｜tool▁call▁begin｜>f<｜tool▁sep｜>{...}<｜tool▁call▁end｜> (V3.1)
 *   deepseek-v4  <｜DSML｜invoke name="f"><｜DSML｜parameter name="k" string="true">v...
 *   kimi-k2      <|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{...}
 *   nemotron     <TOOLCALL>[{"name","arguments"}]</TOOLCALL> (Nemotron Nano v2)
 *   apriel       <tool_calls>[{"name","arguments"}]</tool_calls>
 *   granite      <|tool_call|>[{"name","arguments"}] (Granite 3.x)
 *   gigachat     <|function_call|>{...}, or a "function call" turn (GigaChat 3)
 *   solar        <|tool_call:begin|>id<|tool_call:name|>f<|tool_call:args|>{...}
 *   apertus      <|tools_prefix|>[{"f": {...}}]<|tools_suffix|> */
#define TOOL_FAMILY_LIST(X)                                                                        \
    X(TOOLS_GENERIC, "generic")                                                                    \
    X(TOOLS_HERMES, "hermes")                                                                      \
    X(TOOLS_QWEN3_CODER, "qwen3-coder")                                                            \
    X(TOOLS_GLM, "glm")                                                                            \
    X(TOOLS_HUNYUAN, "hunyuan")                                                                    \
    X(TOOLS_MINIMAX, "minimax")                                                                    \
    X(TOOLS_MINICPM, "minicpm")                                                                    \
    X(TOOLS_LLAMA3, "llama3")                                                                      \
    X(TOOLS_MISTRAL, "mistral")                                                                    \
    X(TOOLS_COMMAND_R7B, "command-r7b")                                                            \
    X(TOOLS_DEEPSEEK_R1, "deepseek-r1")                                                            \
    X(TOOLS_DEEPSEEK_V3, "deepseek-v3")                                                            \
    X(TOOLS_DEEPSEEK_V4, "deepseek-v4")                                                            \
    X(TOOLS_KIMI_K2, "kimi-k2")                                                                    \
    X(TOOLS_NEMOTRON, "nemotron")                                                                  \
    X(TOOLS_APRIEL, "apriel")                                                                      \
    X(TOOLS_GRANITE, "granite")                                                                    \
    X(TOOLS_GIGACHAT, "gigachat")                                                                  \
    X(TOOLS_SOLAR, "solar")                                                                        \
    X(TOOLS_APERTUS, "apertus")

enum tool_family {
#define X(e, name) e,
    TOOL_FAMILY_LIST(X)
#undef X
        TOOLS_COUNT
};

/* The family's short name ("hermes"); "?" out of range. */
const char *tool_family_name(enum tool_family f);

/* Which syntax a chat template's model writes, read from the template text (the markers its
 * rendering of an assistant's tool_calls uses); TOOLS_GENERIC when none is recognized or the
 * template is NULL. */
enum tool_family tool_family_of(const char *template_text);

/* One call, every string malloc'd and NUL-terminated. */
struct tool_call {
    char *id;        /* "call_" + 24 alphanumerics, fresh for every call */
    char *name;      /* function name */
    char *arguments; /* a JSON text (normally an object), as OpenAI's function.arguments */
};

struct tool_calls {
    struct tool_call *calls;
    size_t n;
    char *content; /* the text outside the calls ("" when none; trimmed when n > 0) */
};

/* Parse generated assistant text: the calls written in family f's syntax, and the remaining
 * content. Returns false only when out of memory (*out is then empty). Text without calls gives
 * n = 0 and content = the text; a marker whose call does not parse (invalid JSON, cut short) is
 * left in the content, while a complete last call the end of the text cut before its closing
 * tag still counts. The text must show special tokens (<|python_tag|>, [TOOL_CALLS], ...) as
 * text. Call it only for requests that offered tools: in the generic and Llama 3 syntaxes a
 * plain JSON answer shaped like {"name":..,"arguments":..} reads as a call. Argument values
 * written as XML text (qwen3-coder, glm, hunyuan, minimax, minicpm, deepseek-v4 unless
 * string="true") become JSON where they parse as JSON (42, [..]) or are True/False/None, and
 * strings otherwise: without the tool's schema, a string "42" comes back as a number. */
bool tool_calls_parse(enum tool_family f, const char *text, size_t len, struct tool_calls *out);

/* Free what tool_calls_parse filled in; leaves *tc empty. NULL is a no-op. */
void tool_calls_free(struct tool_calls *tc);

#endif
