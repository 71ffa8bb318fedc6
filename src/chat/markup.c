/* markup.c: Jinja2's Markup (markupsafe): HTML escaping for |e / |escape / |forceescape, |safe,
 * and the + that escapes what it adds to Markup. Rendering never escapes on its own (chat
 * templates render with autoescape off, as transformers sets Jinja2 up). */
#include <stdlib.h>

#include "chat/builtins_int.h"

/* markupsafe's replacements, in its order of characters. */
static const char *escape_of(char ch) {
    switch (ch) {
    case '&': return "&amp;";
    case '<': return "&lt;";
    case '>': return "&gt;";
    case '"': return "&#34;";
    case '\'': return "&#39;";
    default: return NULL;
    }
}

/* The buffer's text as Markup (the buffer freed); a buffer that ran out of room fails. */
static struct jv markup_from(struct jctx *c, struct jbuf *b, int overflow) {
    if (overflow) {
        free(b->p);
        jfail(c, "markup: text too long");
    }
    struct jv out = jv_str(c->arena, b->p ? b->p : "", b->len);
    free(b->p);
    out.u.s->markup = true;
    return out;
}

static struct jv escaped(struct jctx *c, struct jv s) {
    struct jbuf b = {.limit = c->opts->max_output};
    int overflow = 0;
    for (size_t i = 0; i < s.u.s->len && !overflow; i++) {
        const char *r = escape_of(s.u.s->p[i]);
        overflow = r ? jbuf_puts(&b, r) : jbuf_put(&b, s.u.s->p + i, 1);
    }
    return markup_from(c, &b, overflow);
}

struct jv jmarkup_escape(struct jctx *c, struct jv v, bool force) {
    if (jv_is_markup(v) && !force)
        return v;
    return escaped(c, v.kind == JV_STR ? v : jstr_of(c, v));
}

struct jv jmarkup_safe(struct jctx *c, struct jv v) {
    if (jv_is_markup(v))
        return v;
    struct jv s = v.kind == JV_STR ? v : jstr_of(c, v);
    struct jbuf b = {.limit = c->opts->max_output};
    return markup_from(c, &b, jbuf_put(&b, s.u.s->p, s.u.s->len));
}

struct jv jmarkup_add(struct jctx *c, struct jv a, struct jv b) {
    a = jmarkup_escape(c, a, false), b = jmarkup_escape(c, b, false);
    struct jbuf buf = {.limit = c->opts->max_output};
    int overflow = jbuf_put(&buf, a.u.s->p, a.u.s->len) || jbuf_put(&buf, b.u.s->p, b.u.s->len);
    return markup_from(c, &buf, overflow);
}

struct jv jmarkup_keep(struct jv from, struct jv result) {
    if (jv_is_markup(from) && result.kind == JV_STR)
        result.u.s->markup = true;
    return result;
}
