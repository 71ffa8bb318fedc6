/* chat_api.c: the public chat-template calls: a conversation (structs or JSON) and the special
 * tokens become the Jinja context Hugging Face transformers builds, then the template renders. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"
#include "core/status.h"
#include "oxidize.h"

/* A growable string for building the context JSON. */
struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
};

static void put(struct sbuf *b, const char *s, size_t n) {
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->cap ? b->cap * 2 : 256) + n;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void put_str(struct sbuf *b, const char *s) {
    put(b, s, strlen(s));
}

/* s as a JSON string literal (UTF-8 kept as is; controls escaped). */
static void put_json_string(struct sbuf *b, const char *s) {
    put(b, "\"", 1);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\')
            esc[0] = '\\', esc[1] = (char)c, put(b, esc, 2);
        else if (c < 0x20)
            snprintf(esc, sizeof esc, "\\u%04x", c), put(b, esc, 6);
        else
            put(b, (const char *)&c, 1);
    }
    put(b, "\"", 1);
}

enum ox_status ox_chat_render_json(const char *tmpl, const char *messages_json,
                                   const char *tools_json, bool add_generation_prompt,
                                   const char *bos_token, const char *eos_token, int64_t now,
                                   char **out, size_t *len) {
    if (!tmpl || !messages_json || !out || !len)
        return ox_fail(OX_ERR_INVALID_ARG, "chat template: NULL argument");
    *out = NULL, *len = 0;
    struct sbuf ctx = {0};
    put_str(&ctx, "{\"messages\": ");
    put_str(&ctx, messages_json);
    if (tools_json)
        put_str(&ctx, ", \"tools\": "), put_str(&ctx, tools_json);
    put_str(&ctx, add_generation_prompt ? ", \"add_generation_prompt\": true"
                                        : ", \"add_generation_prompt\": false");
    put_str(&ctx, ", \"bos_token\": "), put_json_string(&ctx, bos_token ? bos_token : "");
    put_str(&ctx, ", \"eos_token\": "), put_json_string(&ctx, eos_token ? eos_token : "");
    put_str(&ctx, "}");
    if (ctx.oom) {
        free(ctx.p);
        return ox_fail(OX_ERR_OOM, "chat template: out of memory");
    }
    struct jtemplate *t = NULL;
    enum ox_status st = jinja_parse(tmpl, strlen(tmpl), &t);
    if (st == OX_OK) {
        struct jinja_opts opts = jinja_opts_default();
        opts.now = now;
        st = jinja_render_json(t, ctx.p, ctx.n, &opts, out, len);
    }
    jinja_free(t);
    free(ctx.p);
    return st;
}

/* A token's text with control tokens rendered (malloc'd; "" for none). */
static char *special_text(const struct ox_vocab *v, ox_token t) {
    int32_t n = t >= 0 ? ox_token_to_piece(v, t, NULL, 0, 0, true) : 0;
    char *s = malloc(n > 0 ? (size_t)n + 1 : 1);
    if (s)
        s[n > 0 ? ox_token_to_piece(v, t, s, (size_t)n, 0, true) : 0] = '\0';
    return s;
}

enum ox_status ox_chat_apply_template(const struct ox_model *model, const char *tmpl,
                                      const struct ox_chat_message *msgs, size_t n_msgs,
                                      bool add_generation_prompt, const char *tools_json, char *buf,
                                      size_t cap, size_t *len) {
    if ((!model && !tmpl) || (!msgs && n_msgs) || !len || (!buf && cap))
        return ox_fail(OX_ERR_INVALID_ARG, "ox_chat_apply_template: bad arguments");
    if (!tmpl && !(tmpl = ox_model_chat_template(model, NULL)))
        return ox_fail(OX_ERR_UNSUPPORTED, "chat template: the model has none");
    struct sbuf m = {0};
    put_str(&m, "[");
    for (size_t i = 0; i < n_msgs; i++) {
        put_str(&m, i ? ", {\"role\": " : "{\"role\": ");
        put_json_string(&m, msgs[i].role);
        put_str(&m, ", \"content\": ");
        put_json_string(&m, msgs[i].content);
        put_str(&m, "}");
    }
    put_str(&m, "]");
    const struct ox_vocab *v = model ? ox_model_vocab(model) : NULL;
    char *bos = v ? special_text(v, ox_vocab_bos(v)) : NULL;
    char *eos = v ? special_text(v, ox_vocab_eos(v)) : NULL;
    char *out = NULL;
    size_t n = 0;
    enum ox_status st = m.oom ? ox_fail(OX_ERR_OOM, "chat template: out of memory")
                              : ox_chat_render_json(tmpl, m.p, tools_json, add_generation_prompt,
                                                    bos, eos, 0, &out, &n);
    if (st == OX_OK) {
        if (cap) /* buf may be NULL when only the length is asked for */
            memcpy(buf, out, n < cap ? n : cap);
        *len = n;
    }
    free(out), free(bos), free(eos), free(m.p);
    return st;
}
