/* tool_calls.c: tool calls in generated text, found through a table of each family's markers. */
#include "tool_calls.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Longest function or argument name looked for: OpenAI allows 64 characters; the bound keeps a
 * marker that never closes from sending every search to the end of a long text. */
#define MAX_NAME 256

/* How the calls inside a section are spelled. */
enum shape {
    NONE,
    JSON_CALLS, /* JSON objects {"name", "arguments"} or arrays of them, split by space or ';' */
    NAME_ARGS,  /* call NAME name_end {arguments} val_end call_end */
    XML_ARGS,   /* call NAME name_end, then key K key_end .. val V val_end per argument, call_end */
};

/* One syntax: calls sit in sections from `open` to `close` (close "": the section ends where its
 * last call does; open "": only at the very start of the text). Inside, each call begins with
 * `call` ("": the section is one call). name_mark: the name follows it (Solar puts an id first).
 * XML_ARGS's `val` is searched for, skipping attributes. NULL reads as "". */
struct syntax {
    enum shape shape;
    const char *open, *close, *call, *call_end, *name_end, *name_mark, *key, *key_end, *val,
        *val_end;
};

#define SECTION(sh, o, c) .shape = sh, .open = o, .close = c
#define FUNCTION_EQ                                                                                \
    .call = "<function=", .name_end = ">", .key = "<parameter=", .key_end = ">",                   \
    .val_end = "</parameter>", .call_end = "</function>"

/* Per family, the syntaxes it writes, tried in this order where their markers meet. */
static const struct syntax syntaxes[TOOLS_COUNT][2] = {
    [TOOLS_GENERIC] = {{SECTION(JSON_CALLS, "", "")}},
    [TOOLS_HERMES] = {{SECTION(JSON_CALLS, "<tool_call>", "</tool_call>")}},
    [TOOLS_QWEN3_CODER] = {{SECTION(XML_ARGS, "<tool_call>", "</tool_call>"), FUNCTION_EQ},
                           {SECTION(XML_ARGS, "<seed:tool_call>", "</seed:tool_call>"),
                            FUNCTION_EQ}},
    [TOOLS_GLM] = {{SECTION(XML_ARGS, "<tool_call>", "</tool_call>"), .key = "<arg_key>",
                    .key_end = "</arg_key>", .val = "<arg_value>", .val_end = "</arg_value>"}},
    [TOOLS_HUNYUAN] = {{SECTION(XML_ARGS, "<tool_calls:opensource>", "</tool_calls:opensource>"),
                        .call = "<tool_call:opensource>", .name_end = "<tool_sep:opensource>",
                        .key = "<arg_key:opensource>", .key_end = "</arg_key:opensource>",
                        .val = "<arg_value:opensource>", .val_end = "</arg_value:opensource>",
                        .call_end = "</tool_call:opensource>"}},
    [TOOLS_MINIMAX] = {{SECTION(XML_ARGS, "<minimax:tool_call>", "</minimax:tool_call>"),
                        .call = "<invoke name=\"", .name_end = "\">", .key = "<parameter name=\"",
                        .key_end = "\">", .val_end = "</parameter>", .call_end = "</invoke>"}},
    [TOOLS_MINICPM] = {{SECTION(XML_ARGS, "<function name=\"", "</function>"), .name_end = "\">",
                        .key = "<param name=\"", .key_end = "\">", .val_end = "</param>"}},
    [TOOLS_LLAMA3] = {{SECTION(JSON_CALLS, "", "")}, {SECTION(JSON_CALLS, "<|python_tag|>", "")}},
    [TOOLS_MISTRAL] = {{SECTION(JSON_CALLS, "[TOOL_CALLS]", "")},
                       {SECTION(NAME_ARGS, "[TOOL_CALLS]", ""), .name_end = "[ARGS]"}},
    [TOOLS_COMMAND_R7B] = {{SECTION(JSON_CALLS, "<|START_ACTION|>", "<|END_ACTION|>")}},
    [TOOLS_DEEPSEEK_R1] = {{SECTION(NAME_ARGS, "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"),
                            .call = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>",
                            .name_end = "```json", .val_end = "```",
                            .call_end = "<｜tool▁call▁end｜>"}},
    [TOOLS_DEEPSEEK_V3] = {{SECTION(NAME_ARGS, "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"),
                            .call = "<｜tool▁call▁begin｜>", .name_end = "<｜tool▁sep｜>",
                            .call_end = "<｜tool▁call▁end｜>"}},
    [TOOLS_DEEPSEEK_V4] = {{SECTION(XML_ARGS, "<｜DSML｜tool_calls>", "</｜DSML｜tool_calls>"),
                            .call = "<｜DSML｜invoke name=\"", .name_end = "\">",
                            .key = "<｜DSML｜parameter name=\"", .key_end = "\"", .val = ">",
                            .val_end = "</｜DSML｜parameter>", .call_end = "</｜DSML｜invoke>"}},
    [TOOLS_KIMI_K2] = {{SECTION(NAME_ARGS, "<|tool_calls_section_begin|>",
                                "<|tool_calls_section_end|>"),
                        .call = "<|tool_call_begin|>", .name_end = "<|tool_call_argument_begin|>",
                        .call_end = "<|tool_call_end|>"}},
    [TOOLS_NEMOTRON] = {{SECTION(JSON_CALLS, "<TOOLCALL>", "</TOOLCALL>")}},
    [TOOLS_APRIEL] = {{SECTION(JSON_CALLS, "<tool_calls>", "</tool_calls>")}},
    [TOOLS_GRANITE] = {{SECTION(JSON_CALLS, "<|tool_call|>", "")}},
    [TOOLS_GIGACHAT] = {{SECTION(JSON_CALLS, "<|function_call|>", "")},
                        {SECTION(JSON_CALLS, "<|message_sep|>\n\nfunction call<|role_sep|>", "")}},
    [TOOLS_SOLAR] = {{SECTION(NAME_ARGS, "<|tool_calls|>", "<|calls|>"),
                      .call = "<|tool_call:begin|>", .name_mark = "<|tool_call:name|>",
                      .name_end = "<|tool_call:args|>", .call_end = "<|tool_call:end|>"}},
    [TOOLS_APERTUS] = {{SECTION(JSON_CALLS, "<|tools_prefix|>", "<|tools_suffix|>")}},
};

/* Template text -> family, first match wins: the more specific markers come first (Qwen3-Coder's
 * and GLM's templates also mention <tool_call>, DeepSeek R1's differs from V3.1 by ```json). */
static const struct {
    const char *needle, *also;
    enum tool_family family;
} detect[] = {
    {"]<]minimax[>[", NULL, TOOLS_GENERIC}, /* MiniMax M3's namespaced XML: not parsed here */
    {"<minimax:tool_call>", NULL, TOOLS_MINIMAX},
    {"DSML", NULL, TOOLS_DEEPSEEK_V4},
    {"<function=", NULL, TOOLS_QWEN3_CODER},
    {"<tool_call{}>", NULL, TOOLS_HUNYUAN}, /* '<tool_call{}>'.format(':opensource') */
    {"<arg_key>", NULL, TOOLS_GLM},
    {"<tool_call>", NULL, TOOLS_HERMES},
    {"[TOOL_CALLS]", NULL, TOOLS_MISTRAL},
    {"<|python_tag|>", NULL, TOOLS_LLAMA3},
    {"<|START_ACTION|>", NULL, TOOLS_COMMAND_R7B},
    {"tool▁calls▁begin", "```json", TOOLS_DEEPSEEK_R1},
    {"tool▁calls▁begin", NULL, TOOLS_DEEPSEEK_V3},
    {"<|tool_calls_section_begin|>", NULL, TOOLS_KIMI_K2},
    {"<TOOLCALL>", NULL, TOOLS_NEMOTRON},
    {"<tool_calls>", NULL, TOOLS_APRIEL},
    {"<|tool_call|>", NULL, TOOLS_GRANITE},
    {"<|function_call|>", NULL, TOOLS_GIGACHAT},
    {"'function call'", NULL, TOOLS_GIGACHAT},
    {"<|tool_call:begin|>", NULL, TOOLS_SOLAR},
    {"<|tools_prefix|>", NULL, TOOLS_APERTUS},
    {"<function name=", NULL, TOOLS_MINICPM},
};

static const char *const family_names[] = {
#define X(e, name) name,
    TOOL_FAMILY_LIST(X)
#undef X
};
_Static_assert(sizeof family_names / sizeof *family_names == TOOLS_COUNT, "one name per family");

const char *tool_family_name(enum tool_family f) {
    return (unsigned)f < TOOLS_COUNT ? family_names[f] : "?";
}

enum tool_family tool_family_of(const char *t) {
    for (size_t i = 0; t && i < sizeof detect / sizeof *detect; i++)
        if (strstr(t, detect[i].needle) && (!detect[i].also || strstr(t, detect[i].also)))
            return detect[i].family;
    return TOOLS_GENERIC;
}

/* The parse in progress: the calls so far, and where each syntax's markers were last found. */
struct parse {
    struct tool_calls *out;
    size_t cap;
    bool oom;
    const char *memo[2][2]; /* [syntax][open, close]: the next one at or after the last search */
};

static size_t slen(const char *s) {
    return s ? strlen(s) : 0;
}

static bool is_ws(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static const char *skip_ws(const char *p, const char *e) {
    while (p < e && is_ws(*p))
        p++;
    return p;
}

/* The first s in [p, e), NULL when absent; an empty s is found at p. */
static const char *find(const char *p, const char *e, const char *s) {
    size_t n = slen(s);
    if (!n)
        return p;
    for (; (size_t)(e - p) >= n; p++) {
        if (!(p = memchr(p, s[0], (size_t)(e - p) - n + 1)))
            return NULL;
        if (!memcmp(p, s, n))
            return p;
    }
    return NULL;
}

/* find() over at most MAX_NAME bytes. */
static const char *find_name(const char *p, const char *e, const char *s) {
    return find(p, e - p > MAX_NAME ? p + MAX_NAME : e, s);
}

/* find() remembering its answer in *memo (e: none), so that looking for the same marker after
 * every failed section stays linear in the text. */
static const char *find_memo(const char *p, const char *e, const char *s, const char **memo) {
    if (!*memo || *memo < p) {
        const char *f = find(p, e, s);
        *memo = f ? f : e;
    }
    return *memo == e ? NULL : *memo;
}

/* Step *p over whitespace, then over s if the text there starts with it (always for ""). */
static bool eat(const char **p, const char *e, const char *s) {
    size_t n = slen(s);
    *p = skip_ws(*p, e);
    if (n && ((size_t)(e - *p) < n || memcmp(*p, s, n)))
        return false;
    *p += n;
    return true;
}

static char *dup(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

/* "call_" + 24 alphanumerics: the clock and an atomic counter, mixed, so threads need no lock. */
static void make_id(char id[30]) {
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    static atomic_uint_fast64_t counter;
    struct timespec ts = {0};
    timespec_get(&ts, TIME_UTC);
    uint64_t x = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec, r = 0;
    x ^= (uint64_t)atomic_fetch_add(&counter, 1) * 0xD1B54A32D192ED03u;
    memcpy(id, "call_", 5);
    for (int i = 0; i < 24; i++, r /= 62) {
        if (i % 8 == 0) /* 62^8 < 2^64: eight letters from each draw */
            r = splitmix64(&x);
        id[5 + i] = abc[r % 62];
    }
    id[29] = 0;
}

static void drop_calls(struct tool_calls *tc, size_t n) {
    for (; tc->n > n; tc->n--) {
        struct tool_call *c = &tc->calls[tc->n - 1];
        free(c->id);
        free(c->name);
        free(c->arguments);
    }
}

/* Append a call; false when it is none (a name with spaces or tags, arguments neither an object
 * nor JSON text) or memory ran out (then st->oom). */
static bool add_call(struct parse *st, const char *name, size_t n, const json_t *args) {
    while (n && is_ws(*name))
        name++, n--;
    while (n && is_ws(name[n - 1]))
        n--;
    if (n > 10 && !memcmp(name, "functions.", 10)) { /* Kimi K2 names calls functions.NAME:IDX */
        const char *colon = memchr(name + 10, ':', n - 10);
        name += 10;
        n = colon ? (size_t)(colon - name) : n - 10;
    }
    if (!n || n > MAX_NAME)
        return false;
    for (size_t i = 0; i < n; i++)
        if (strchr(" \t\r\n<>{}[]\"'", name[i])) /* also a NUL: strchr finds the terminator */
            return false;
    char *a;
    if (!args || json_is_null(args)) {
        a = dup("{}", 2);
    } else if (json_is_string(args)) { /* already JSON text: kept as written if it parses */
        json_t *j = json_loadb(json_string_value(args), json_string_length(args), 0, NULL);
        if (!j)
            return false;
        json_decref(j);
        a = dup(json_string_value(args), json_string_length(args));
    } else if (json_is_object(args)) {
        a = json_dumps(args, JSON_COMPACT);
    } else {
        return false;
    }
    struct tool_calls *tc = st->out;
    if (a && tc->n == st->cap) {
        size_t cap = st->cap ? 2 * st->cap : 4;
        struct tool_call *calls = realloc(tc->calls, cap * sizeof *calls);
        if (calls)
            tc->calls = calls, st->cap = cap;
    }
    struct tool_call c = {malloc(30), dup(name, n), a};
    if (!c.id || !c.name || !a || tc->n == st->cap) {
        free(c.id), free(c.name), free(a);
        st->oom = true;
        return false;
    }
    make_id(c.id);
    tc->calls[tc->n++] = c;
    return true;
}

/* A call as JSON: {"name", "arguments"|"parameters"}, Command R's {"tool_name", "parameters"},
 * OpenAI's {"function": {...}}, the wrappers {"tool_calls": [...]} and {"tool_call": {...}}, an
 * array of these, or (loose: inside a family's own markers, Apertus) {"NAME": {arguments}}. */
static bool json_call(struct parse *st, json_t *v, bool loose) {
    static const char *const wrappers[] = {"tool_calls", "tool_call", "function"};
    if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) {
            if (!json_call(st, x, loose))
                return false;
        }
        return json_array_size(v) > 0;
    }
    if (!json_is_object(v))
        return false;
    json_t *name = json_object_get(v, "name"), *args = json_object_get(v, "arguments");
    if (!name)
        name = json_object_get(v, "tool_name");
    if (!args)
        args = json_object_get(v, "parameters");
    if (json_is_string(name))
        return add_call(st, json_string_value(name), json_string_length(name), args);
    for (int i = 0; i < 3; i++) {
        json_t *w = json_object_get(v, wrappers[i]);
        if (json_is_array(w) || json_is_object(w))
            return json_call(st, w, false);
    }
    void *it = json_object_iter(v);
    if (!loose || json_object_size(v) != 1 || !json_is_object(json_object_iter_value(it)))
        return false;
    const char *k = json_object_iter_key(it);
    return add_call(st, k, strlen(k), json_object_iter_value(it));
}

/* The JSON value at p (any kind), *next set past it; NULL when none parses there. */
static json_t *load_json(const char *p, const char *e, const char **next) {
    json_error_t err;
    json_t *v = json_loadb(p, (size_t)(e - p), JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK, &err);
    if (v)
        *next = p + err.position;
    return v;
}

/* JSON_CALLS from p: the end of the last call, NULL when the first is none. */
static const char *json_calls(struct parse *st, const char *p, const char *e, bool loose) {
    for (const char *last = NULL;;) {
        const char *q = skip_ws(p, e);
        if (last && q < e && *q == ';')
            q = skip_ws(q + 1, e);
        size_t n0 = st->out->n;
        json_t *v = load_json(q, e, &q);
        bool ok = v && json_call(st, v, loose);
        json_decref(v);
        if (!ok) {
            drop_calls(st->out, n0);
            return last;
        }
        last = p = q;
    }
}

/* NAME_ARGS calls from p: the end of the last call, NULL when the first is none. */
static const char *named_calls(struct parse *st, const struct syntax *s, const char *p,
                               const char *e) {
    for (const char *last = NULL;;) {
        const char *q = p, *name = p, *ne, *m;
        if (!eat(&name, e, s->call) || !(ne = find_name(name, e, s->name_end)))
            return last;
        if (slen(s->name_mark) && (m = find(name, ne, s->name_mark)))
            name = m + slen(s->name_mark);
        json_t *args = load_json(skip_ws(ne + slen(s->name_end), e), e, &q);
        bool ok = json_is_object(args) && eat(&q, e, s->val_end) && eat(&q, e, s->call_end) &&
                  add_call(st, name, (size_t)(ne - name), args);
        json_decref(args);
        if (!ok)
            return last;
        last = p = q;
        if (!slen(s->call)) /* one call to a section */
            return last;
    }
}

/* An argument written as text. One newline on each side is layout (Qwen3-Coder puts values on
 * their own line); the value is JSON where it parses as JSON (42, true, [..]), else a string:
 * the templates write strings raw and everything else as JSON, except booleans and None, which
 * several print the Python way. */
static json_t *xml_value(const char *v, const char *e, bool raw) {
    if (v < e && *v == '\n')
        v++;
    if (e > v && e[-1] == '\n')
        e--;
    static const char *const py[] = {"True", "true", "False", "false", "None", "null"};
    for (int i = 0; i < 6 && !raw; i += 2)
        if ((size_t)(e - v) == strlen(py[i]) && !memcmp(v, py[i], (size_t)(e - v)))
            v = py[i + 1], e = v + strlen(v);
    json_t *j = raw ? NULL : json_loadb(v, (size_t)(e - v), JSON_DECODE_ANY, NULL);
    return j ? j : json_stringn(v, (size_t)(e - v));
}

/* XML_ARGS arguments from *pp, *pp moved past the last; NULL when one is malformed. */
static json_t *xml_args(const struct syntax *s, const char **pp, const char *e) {
    json_t *args = json_object();
    const char *k, *ke, *v, *ve;
    while (args && (k = *pp, eat(&k, e, s->key))) {
        if (!(ke = find_name(k, e, s->key_end)) ||
            !(ve = find(ke + slen(s->key_end), e, s->val_end)) ||
            !(v = find(ke + slen(s->key_end), ve, s->val)))
            goto bad;
        bool raw = find(ke, v, "string=\"true\"") != NULL; /* DeepSeek V4 marks strings */
        json_t *val = xml_value(v + slen(s->val), ve, raw);
        if (!val || json_object_setn_new(args, k, (size_t)(ke - k), val))
            goto bad;
        *pp = ve + slen(s->val_end);
    }
    return args;
bad:
    json_decref(args);
    return NULL;
}

/* XML_ARGS calls from p: the end of the last call, NULL when the first is none. */
static const char *xml_calls(struct parse *st, const struct syntax *s, const char *p,
                             const char *e) {
    for (const char *last = NULL;;) {
        const char *q = p, *name, *ne;
        if (!eat(&q, e, s->call))
            return last;
        name = q;
        ne = find_name(q, e, slen(s->name_end) ? s->name_end : s->key);
        if (!ne && slen(s->name_end))
            return last;
        q = ne ? ne + slen(s->name_end) : e; /* GLM without arguments: the name runs to the end */
        ne = ne ? ne : e;
        json_t *args = xml_args(s, &q, e);
        bool ok = args && eat(&q, e, s->call_end) && add_call(st, name, (size_t)(ne - name), args);
        json_decref(args);
        if (!ok)
            return last;
        last = p = q;
        if (!slen(s->call))
            return last;
    }
}

/* The section of syntax i whose open marker ends at p: its end, or NULL when it holds no call
 * or, closed, anything besides calls (its calls are then taken back). */
static const char *section(struct parse *st, int i, const struct syntax *s, const char *p,
                           const char *e) {
    const char *ce = slen(s->close) ? find_memo(p, e, s->close, &st->memo[i][1]) : NULL;
    const char *re = ce ? ce : e; /* unclosed: a call the end of the text cut short still counts */
    size_t n0 = st->out->n;
    if (slen(s->close) && !ce && find_memo(p, e, s->open, &st->memo[i][0]))
        return NULL; /* unclosed but not the last: no call, and no scan to the end for each */
    const char *q = s->shape == JSON_CALLS  ? json_calls(st, p, re, slen(s->open) > 0)
                    : s->shape == NAME_ARGS ? named_calls(st, s, p, re)
                                            : xml_calls(st, s, p, re);
    if (q && slen(s->close) && skip_ws(q, re) != re)
        q = NULL;
    if (!q)
        drop_calls(st->out, n0);
    return q && ce ? ce + slen(s->close) : q;
}

bool tool_calls_parse(enum tool_family f, const char *text, size_t len, struct tool_calls *out) {
    const struct syntax *sx = syntaxes[(unsigned)f < TOOLS_COUNT ? f : TOOLS_GENERIC];
    const char *p = text ? text : "", *e = p + (text ? len : 0);
    struct parse st = {.out = out};
    char *c = malloc((size_t)(e - p) + 1); /* the content: parts of the text, so never longer */
    size_t n = 0;
    *out = (struct tool_calls){.content = c};
    for (int i = 0; i < 2 && c; i++) /* bare JSON (open ""): only where the text starts */
        if (sx[i].shape && !*sx[i].open) {
            const char *q = json_calls(&st, p, e, false);
            p = q ? q : p;
        }
    while (c && !st.oom) {
        const char *hit = NULL, *q = NULL;
        int k = 0;
        for (int i = 0; i < 2; i++) {
            const char *h =
                sx[i].shape && *sx[i].open ? find_memo(p, e, sx[i].open, &st.memo[i][0]) : NULL;
            if (h && (!hit || h < hit))
                hit = h, k = i;
        }
        if (!hit)
            break;
        for (int i = k; i < 2 && !q; i++) /* Mistral: two shapes after one marker */
            if (sx[i].shape && !strcmp(sx[i].open, sx[k].open))
                q = section(&st, i, &sx[i], hit + strlen(sx[i].open), e);
        const char *keep = q ? hit : hit + strlen(sx[k].open); /* no call: the marker is text */
        memcpy(c + n, p, (size_t)(keep - p));
        n += (size_t)(keep - p);
        p = q ? q : keep;
    }
    if (!c || st.oom) {
        tool_calls_free(out);
        return false;
    }
    memcpy(c + n, p, (size_t)(e - p));
    n += (size_t)(e - p);
    const char *a = c, *z = c + n;
    while (out->n && z > a && is_ws(z[-1])) /* around calls, the layout is the template's */
        z--;
    while (out->n && a < z && is_ws(*a))
        a++;
    memmove(c, a, (size_t)(z - a));
    c[z - a] = 0;
    return true;
}

void tool_calls_free(struct tool_calls *tc) {
    if (!tc)
        return;
    drop_calls(tc, 0);
    free(tc->calls);
    free(tc->content);
    *tc = (struct tool_calls){0};
}
