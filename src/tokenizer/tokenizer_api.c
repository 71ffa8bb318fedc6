/* tokenizer_api.c: the public tokenizer API (ox_vocab_*, ox_tokenize, ox_detokenize). */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenize.h"

/* Encoders may keep pointers into the GGUF's metadata (merges, scores), so it outlives the
 * vocab: owned here when ox_vocab_load opened it, borrowed (gguf NULL) when the vocab was built
 * from a model's own GGUF, which the model frees after the vocab. */
struct ox_vocab {
    struct ox_gguf *gguf;
    struct vocab *v;
};

enum ox_status vocab_from_gguf(const struct ox_gguf *g, struct ox_vocab **out) {
    *out = NULL;
    struct ox_vocab *ov = calloc(1, sizeof *ov);
    if (!ov)
        return ox_fail(OX_ERR_OOM, "tokenizer: out of memory");
    enum ox_status s = vocab_load(g, &ov->v);
    if (s != OX_OK) {
        free(ov);
        return s;
    }
    *out = ov;
    return OX_OK;
}

enum ox_status ox_vocab_load(const char *path, struct ox_vocab **out) {
    if (!out || !path)
        return ox_fail(OX_ERR_INVALID_ARG, "ox_vocab_load: NULL argument");
    *out = NULL;
    struct ox_gguf *g = NULL;
    enum ox_status s = gguf_open(path, true, &g);
    if (s == OX_OK)
        s = vocab_from_gguf(g, out);
    if (s != OX_OK) {
        gguf_free(g);
        return s;
    }
    (*out)->gguf = g;
    return OX_OK;
}

void ox_vocab_free(struct ox_vocab *ov) {
    if (!ov)
        return;
    vocab_free(ov->v);
    gguf_free(ov->gguf);
    free(ov);
}

const char *ox_vocab_kind(const struct ox_vocab *ov) {
    static const char *const kinds[] = {"none", "spm", "bpe", "wpm"};
    return kinds[ov->v->type];
}

const char *ox_vocab_pre(const struct ox_vocab *ov) {
    return ov->v->pre;
}

int32_t ox_vocab_n_tokens(const struct ox_vocab *ov) {
    return ov->v->n_tokens;
}

ox_token ox_vocab_bos(const struct ox_vocab *ov) {
    return ov->v->bos;
}
ox_token ox_vocab_eos(const struct ox_vocab *ov) {
    return ov->v->eos;
}
ox_token ox_vocab_eot(const struct ox_vocab *ov) {
    return ov->v->eot;
}
ox_token ox_vocab_pad(const struct ox_vocab *ov) {
    return ov->v->pad;
}
ox_token ox_vocab_sep(const struct ox_vocab *ov) {
    return ov->v->sep;
}
ox_token ox_vocab_unk(const struct ox_vocab *ov) {
    return ov->v->unk;
}
ox_token ox_vocab_nl(const struct ox_vocab *ov) {
    return ov->v->nl;
}
bool ox_vocab_add_bos(const struct ox_vocab *ov) {
    return ov->v->add_bos;
}
bool ox_vocab_add_eos(const struct ox_vocab *ov) {
    return ov->v->add_eos;
}

bool ox_vocab_add_sep(const struct ox_vocab *ov) {
    return ov->v->add_sep;
}

bool ox_vocab_is_eog(const struct ox_vocab *ov, ox_token t) {
    for (size_t i = 0; i < ov->v->n_eog; i++)
        if (ov->v->eog[i] == t)
            return true;
    return false;
}

static bool valid(const struct ox_vocab *ov, ox_token t) {
    return t >= 0 && t < ov->v->n_tokens;
}

const char *ox_vocab_token_text(const struct ox_vocab *ov, ox_token t) {
    return valid(ov, t) ? ov->v->tokens[t].text : NULL;
}

float ox_vocab_token_score(const struct ox_vocab *ov, ox_token t) {
    return valid(ov, t) ? ov->v->tokens[t].score : 0.0f;
}

uint32_t ox_vocab_token_attr(const struct ox_vocab *ov, ox_token t) {
    return valid(ov, t) ? ov->v->tokens[t].attr : 0;
}

enum ox_status ox_tokenize(const struct ox_vocab *ov, const char *text, size_t len,
                           ox_token *tokens, size_t cap, size_t *n_tokens, bool add_special,
                           bool parse_special) {
    if (!ov || !n_tokens || (!tokens && cap))
        return ox_fail(OX_ERR_INVALID_ARG, "ox_tokenize: NULL argument");
    *n_tokens = 0;
    struct tok_list list = {0};
    enum ox_status s = vocab_tokenize(ov->v, text, len, add_special, parse_special, &list);
    if (s == OX_OK) {
        if (cap && list.n)
            memcpy(tokens, list.ids, (list.n < cap ? list.n : cap) * sizeof *tokens);
        *n_tokens = list.n;
    }
    tok_list_free(&list);
    return s;
}

int32_t ox_token_to_piece(const struct ox_vocab *ov, ox_token t, char *buf, size_t cap,
                          int32_t lstrip, bool special) {
    if (!ov || (!buf && cap))
        return -1;
    return vocab_token_to_piece(ov->v, t, buf, cap, lstrip, special);
}

int64_t ox_detokenize(const struct ox_vocab *ov, const ox_token *tokens, size_t n, char *buf,
                      size_t cap, bool remove_special, bool unparse_special) {
    if (!ov || (!tokens && n) || (!buf && cap))
        return -1;
    return vocab_detokenize(ov->v, tokens, n, buf, cap, remove_special, unparse_special);
}

/* ---- streaming ------------------------------------------------------------------------------ */

struct ox_detok_stream {
    const struct ox_vocab *vocab;
    bool special;
    char *buf; /* held-back bytes, then the new piece */
    size_t len, cap;
    size_t ready; /* bytes handed out by the last call, dropped at the next */
};

enum ox_status ox_detok_stream_create(const struct ox_vocab *ov, bool special,
                                      struct ox_detok_stream **out) {
    if (!ov || !out)
        return ox_fail(OX_ERR_INVALID_ARG, "ox_detok_stream_create: NULL argument");
    *out = calloc(1, sizeof **out);
    if (!*out)
        return ox_fail(OX_ERR_OOM, "tokenizer: out of memory");
    (*out)->vocab = ov;
    (*out)->special = special;
    return OX_OK;
}

void ox_detok_stream_free(struct ox_detok_stream *s) {
    if (s)
        free(s->buf);
    free(s);
}

/* Length of the prefix of p[0..n) that ends on a UTF-8 character boundary: an incomplete
 * multi-byte sequence at the very end is held back (at most 3 bytes); invalid bytes pass. */
static size_t complete_prefix(const unsigned char *p, size_t n) {
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        unsigned char c = p[n - back];
        if ((c & 0xc0) == 0x80)
            continue; /* a continuation byte: look further back for its lead */
        size_t need = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
        return need > back ? n - back : n;
    }
    return n;
}

static enum ox_status stream_append(struct ox_detok_stream *s, size_t extra) {
    if (s->len + extra <= s->cap)
        return OX_OK;
    size_t cap = (s->len + extra) * 2;
    char *buf = realloc(s->buf, cap);
    if (!buf)
        return ox_fail(OX_ERR_OOM, "tokenizer: out of memory");
    s->buf = buf;
    s->cap = cap;
    return OX_OK;
}

/* Drop what the previous call handed out. */
static void stream_consume(struct ox_detok_stream *s) {
    if (s->ready)
        memmove(s->buf, s->buf + s->ready, s->len - s->ready);
    s->len -= s->ready;
    s->ready = 0;
}

enum ox_status ox_detok_stream_push(struct ox_detok_stream *s, ox_token t, const char **text,
                                    size_t *len) {
    if (!s || !text || !len)
        return ox_fail(OX_ERR_INVALID_ARG, "ox_detok_stream_push: NULL argument");
    stream_consume(s);
    int32_t n = vocab_token_to_piece(s->vocab->v, t, NULL, 0, 0, s->special);
    if (n < 0)
        return ox_fail(OX_ERR_INVALID_ARG, "detokenize: token %d is not in the vocabulary", (int)t);
    if (n > 0) {
        OX_TRY(stream_append(s, (size_t)n));
        vocab_token_to_piece(s->vocab->v, t, s->buf + s->len, (size_t)n, 0, s->special);
        s->len += (size_t)n;
    }
    s->ready = s->len ? complete_prefix((const unsigned char *)s->buf, s->len) : 0;
    *text = s->buf ? s->buf : "";
    *len = s->ready;
    return OX_OK;
}

enum ox_status ox_detok_stream_flush(struct ox_detok_stream *s, const char **text, size_t *len) {
    if (!s || !text || !len)
        return ox_fail(OX_ERR_INVALID_ARG, "ox_detok_stream_flush: NULL argument");
    stream_consume(s);
    s->ready = s->len;
    *text = s->buf ? s->buf : "";
    *len = s->ready;
    return OX_OK;
}
