/* tokenize.c: splits text around special tokens, then runs the model's encoder on the plain
 * fragments, adding BOS/EOS/SEP (llama.cpp's llama_vocab::impl::tokenize). */
#define _GNU_SOURCE /* memmem */
#include "tokenizer/tokenize.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* A piece of the input: plain text (token < 0) or one special token. */
struct fragment {
    int32_t token;
    size_t off, len;
};

struct fragments {
    struct fragment *items;
    size_t n, cap;
};

static enum ox_status frag_push(struct fragments *f, int32_t token, size_t off, size_t len) {
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 16;
        struct fragment *items = realloc(f->items, cap * sizeof *items);
        if (!items)
            return ox_fail(OX_ERR_OOM, "tokenizer: out of memory");
        f->items = items;
        f->cap = cap;
    }
    f->items[f->n++] = (struct fragment){token, off, len};
    return OX_OK;
}

/* Split one plain fragment at every occurrence of special token id, into out. */
static enum ox_status split_fragment(const struct vocab *v, int32_t id, const char *text,
                                     struct fragment frag, struct fragments *out) {
    const struct vocab_token *t = &v->tokens[id];
    size_t pos = frag.off, end = frag.off + frag.len;
    for (;;) {
        const char *hit = memmem(text + pos, end - pos, t->text, t->len);
        if (!hit)
            return pos < end ? frag_push(out, -1, pos, end - pos) : OX_OK;
        size_t at = (size_t)(hit - text), left = at - pos;
        if (t->attr & OX_TOKEN_ATTR_LSTRIP) /* the token swallows the spaces before it */
            while (left > 0 && isspace((unsigned char)text[pos + left - 1]))
                left--;
        if (left > 0)
            OX_TRY(frag_push(out, -1, pos, left));
        OX_TRY(frag_push(out, id, 0, 0));
        pos = at + t->len;
        if (t->attr & OX_TOKEN_ATTR_RSTRIP) /* ... or after it */
            while (pos < end && isspace((unsigned char)text[pos]))
                pos++;
    }
}

/* Which adjacent byte pairs (and single bytes) occur in the text: a special token whose first
 * two bytes never occur cannot match, so its pass over the text is skipped. Vocabularies with
 * thousands of user-defined tokens (deepseek) would otherwise scan the text thousands of times. */
struct text_pairs {
    uint8_t pair[65536 / 8];
    uint8_t byte[256 / 8];
};

static void find_pairs(const char *text, size_t len, struct text_pairs *tp) {
    memset(tp, 0, sizeof *tp);
    const unsigned char *t = (const unsigned char *)text;
    for (size_t i = 0; i < len; i++) {
        tp->byte[t[i] >> 3] |= (uint8_t)(1u << (t[i] & 7));
        if (i + 1 < len) {
            unsigned p = (unsigned)t[i] << 8 | t[i + 1];
            tp->pair[p >> 3] |= (uint8_t)(1u << (p & 7));
        }
    }
}

static bool may_occur(const struct text_pairs *tp, const struct vocab_token *t) {
    const unsigned char *s = (const unsigned char *)t->text;
    if (t->len == 1)
        return tp->byte[s[0] >> 3] & (1u << (s[0] & 7));
    unsigned p = (unsigned)s[0] << 8 | s[1];
    return tp->pair[p >> 3] & (1u << (p & 7));
}

/* llama.cpp's tokenizer_st_partition: longest special tokens first, each splitting the text
 * left by the previous ones. Without parse_special only user-defined tokens are split out. */
static enum ox_status partition(const struct vocab *v, const char *text, size_t len,
                                bool parse_special, struct fragments *frags) {
    OX_TRY(frag_push(frags, -1, 0, len));
    struct text_pairs *tp = malloc(sizeof *tp);
    if (!tp)
        return ox_fail(OX_ERR_OOM, "tokenizer: out of memory");
    find_pairs(text, len, tp);
    struct fragments next = {0};
    enum ox_status s = OX_OK;
    for (size_t k = 0; s == OX_OK && k < v->n_special; k++) {
        int32_t id = v->special_ids[k];
        if (!parse_special &&
            (v->tokens[id].attr & (OX_TOKEN_ATTR_CONTROL | OX_TOKEN_ATTR_UNKNOWN)))
            continue;
        if (!may_occur(tp, &v->tokens[id]))
            continue;
        next.n = 0;
        for (size_t i = 0; s == OX_OK && i < frags->n; i++) {
            struct fragment f = frags->items[i];
            s = f.token >= 0 ? frag_push(&next, f.token, 0, 0)
                             : split_fragment(v, id, text, f, &next);
        }
        struct fragments tmp = *frags; /* swap: next becomes the current list */
        *frags = next;
        next = tmp;
    }
    free(next.items);
    free(tp);
    return s;
}

/* SPM: a space before text that starts the input or follows a special token, and spaces
 * written as U+2581, as SentencePiece expects. */
static enum ox_status encode_spm_fragment(const struct vocab *v, const char *text, size_t len,
                                          bool prefix, struct tok_list *out) {
    size_t n_spaces = prefix;
    for (size_t i = 0; i < len; i++)
        n_spaces += text[i] == ' ';
    char *buf = malloc(len + prefix + 2 * n_spaces + 1); /* a space grows to 3 bytes */
    if (!buf)
        return ox_fail(OX_ERR_OOM, "tokenizer: out of memory");
    size_t m = 0;
    for (size_t i = 0; i < len + prefix; i++) {
        char c = prefix ? (i == 0 ? ' ' : text[i - 1]) : text[i];
        if (c == ' ' && v->escape_whitespaces) {
            memcpy(buf + m, "\xe2\x96\x81", 3);
            m += 3;
        } else {
            buf[m++] = c;
        }
    }
    enum ox_status s = v->ops->encode(v, buf, m, out);
    free(buf);
    return s;
}

static enum ox_status encode_fragments(const struct vocab *v, const char *text,
                                       const struct fragments *frags, struct tok_list *out) {
    bool prev_special = true; /* SPM: the first fragment gets the space prefix */
    for (size_t i = 0; i < frags->n; i++) {
        const struct fragment *f = &frags->items[i];
        if (f->token >= 0) {
            OX_TRY(tok_list_push(out, f->token));
            prev_special = true;
        } else if (v->type == VOCAB_SPM) {
            OX_TRY(encode_spm_fragment(v, text + f->off, f->len,
                                       v->add_space_prefix && prev_special, out));
            prev_special = false;
        } else {
            OX_TRY(v->ops->encode(v, text + f->off, f->len, out));
            prev_special = false;
        }
    }
    return OX_OK;
}

enum ox_status vocab_tokenize(const struct vocab *v, const char *text, size_t len, bool add_special,
                              bool parse_special, struct tok_list *out) {
    if (v->type == VOCAB_NONE || !v->ops->encode)
        return ox_fail(OX_ERR_UNSUPPORTED, "tokenizer: the model has no usable vocabulary");
    if (!text && len)
        return ox_fail(OX_ERR_INVALID_ARG, "tokenizer: NULL text");
    /* WPM always frames with CLS ... SEP; the others follow the vocab's add_bos/add_eos */
    bool bos = add_special && (v->type == VOCAB_WPM || v->add_bos) && v->bos >= 0;
    bool eos = add_special && v->type != VOCAB_WPM && v->add_eos && v->eos >= 0;
    bool sep = add_special && v->type == VOCAB_WPM && v->sep >= 0;
    if (bos)
        OX_TRY(tok_list_push(out, v->bos));
    struct fragments frags = {0};
    enum ox_status s = len ? partition(v, text, len, parse_special, &frags) : OX_OK;
    if (s == OX_OK)
        s = encode_fragments(v, text, &frags, out);
    free(frags.items);
    if (s == OX_OK && eos)
        s = tok_list_push(out, v->eos);
    if (s == OX_OK && sep)
        s = tok_list_push(out, v->sep);
    return s;
}
