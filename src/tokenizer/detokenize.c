/* detokenize.c: token ids back to text (llama.cpp's token_to_piece and detokenize). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/tokenize.h"

/* Growable output with the snprintf contract: bytes past cap are counted, not written. */
struct sink {
    char *buf;
    size_t cap, len;
};

static void put(struct sink *s, const char *p, size_t n) {
    if (s->len < s->cap)
        memcpy(s->buf + s->len, p, n < s->cap - s->len ? n : s->cap - s->len);
    s->len += n;
}

/* BPE text in the byte alphabet back to raw bytes (llama_decode_text). */
static void put_byte_level(struct sink *s, const char *text, size_t n) {
    const unsigned char *p = (const unsigned char *)text;
    for (size_t i = 0; i < n;) {
        size_t used;
        int b = byte_unicode_decode(text + i, n - i, &used);
        if (b >= 0) {
            char c = (char)b;
            put(s, &c, 1);
            i += used;
            continue;
        }
        /* not from the byte alphabet: llama.cpp marks it the same way */
        uint32_t cp;
        size_t k = utf8_decode_lax(p + i, n - i, &cp);
        k = k ? k : 1;
        char hex[8];
        put(s, "[UNK_BYTE_0x", 12);
        for (size_t j = 0; j < k; j++) {
            snprintf(hex, sizeof hex, "%02x", p[i + j]);
            put(s, hex, 2);
        }
        put(s, text, n);
        put(s, "]", 1);
        i += k;
    }
}

/* SentencePiece text: U+2581 back to a space. */
static void put_unescaped(struct sink *s, const char *text, size_t n) {
    for (size_t i = 0; i < n;) {
        if (n - i >= 3 && memcmp(text + i, "\xe2\x96\x81", 3) == 0) {
            put(s, " ", 1);
            i += 3;
        } else {
            put(s, text + i, 1);
            i++;
        }
    }
}

static int hex_digit(char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* "<0xAB>" -> 0xAB, or -1 when the text is not a byte token's. */
static int byte_token_value(const struct vocab_token *t) {
    if (t->len != 6 || memcmp(t->text, "<0x", 3) != 0 || t->text[5] != '>')
        return -1;
    int hi = hex_digit(t->text[3]), lo = hex_digit(t->text[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* The piece of one token into s, before any leading-space stripping. */
static void put_piece_raw(const struct vocab *v, int32_t id, bool special, struct sink *s) {
    const struct vocab_token *t = &v->tokens[id];
    const uint32_t special_attrs = OX_TOKEN_ATTR_UNKNOWN | OX_TOKEN_ATTR_CONTROL;
    if (!special && (t->attr & special_attrs))
        return;
    if (t->attr & (special_attrs | OX_TOKEN_ATTR_USER_DEFINED)) {
        put(s, t->text, t->len);
    } else if (t->attr & OX_TOKEN_ATTR_NORMAL) {
        if (v->type == VOCAB_BPE && !v->escape_whitespaces)
            put_byte_level(s, t->text, t->len);
        else
            put_unescaped(s, t->text, t->len);
    } else if ((t->attr & OX_TOKEN_ATTR_BYTE) && byte_token_value(t) >= 0) {
        char c = (char)byte_token_value(t);
        put(s, &c, 1);
    }
}

/* The piece with up to lstrip leading spaces removed (the SPM prefix space of a first token). */
static void put_piece(const struct vocab *v, int32_t id, int32_t lstrip, bool special,
                      struct sink *s) {
    if (lstrip <= 0) {
        put_piece_raw(v, id, special, s);
        return;
    }
    struct sink count = {NULL, 0, 0};
    put_piece_raw(v, id, special, &count);
    struct sink piece = {malloc(count.len ? count.len : 1), count.len, 0};
    if (!piece.buf) { /* cannot strip without memory: keep the piece whole */
        put_piece_raw(v, id, special, s);
        return;
    }
    put_piece_raw(v, id, special, &piece);
    size_t skip = 0;
    while (skip < piece.len && (int32_t)skip < lstrip && piece.buf[skip] == ' ')
        skip++;
    put(s, piece.buf + skip, piece.len - skip);
    free(piece.buf);
}

int32_t vocab_token_to_piece(const struct vocab *v, int32_t id, char *buf, size_t cap,
                             int32_t lstrip, bool special) {
    if (id < 0 || id >= v->n_tokens)
        return -1;
    struct sink s = {buf, cap, 0};
    put_piece(v, id, lstrip, special, &s);
    return (int32_t)s.len;
}

/* ---- whole sequences ---------------------------------------------------------------------- */

/* " ?" " !" " ." " ," lose their space. Returns the new length. */
static size_t clean_punctuation(char *t, size_t n) {
    size_t out = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = t[i];
        if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ','))
            out--;
        t[out++] = x;
    }
    return out;
}

/* " ' " becomes "'". */
static size_t clean_quote(char *t, size_t n) {
    size_t out = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = t[i];
        if (x == '\'' && i + 1 < n && t[i - 1] == ' ' && t[i + 1] == ' ') {
            out--; /* the space before */
            i++;   /* and the one after */
        }
        t[out++] = x;
    }
    return out;
}

/* " 's" " 'm" " 're" " 've" attach to the word before; " 't" " 'd" " 'll" do not (as the
 * Hugging Face decoders llama.cpp follows). */
static size_t clean_contractions(char *t, size_t n) {
    size_t out = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = t[i];
        if (t[i - 1] == ' ' && x == '\'' && i + 1 < n) {
            char x1 = t[i + 1], x2 = i + 2 < n ? t[i + 2] : 0;
            bool attach = x1 == 's' || x1 == 'm' ||
                          (x2 && ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')));
            if (attach)
                out--;
        }
        t[out++] = x;
    }
    return out;
}

static void render(const struct vocab *v, const int32_t *ids, size_t n, bool unparse_special,
                   bool remove_space, struct sink *s) {
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= 0 && ids[i] < v->n_tokens)
            put_piece(v, ids[i], remove_space, unparse_special, s);
        remove_space = false;
    }
}

int64_t vocab_detokenize(const struct vocab *v, const int32_t *ids, size_t n, char *buf, size_t cap,
                         bool remove_special, bool unparse_special) {
    if (v->type == VOCAB_NONE)
        return 0;
    bool remove_space = v->add_space_prefix;
    if (remove_special && v->add_bos && n > 0 && ids[0] == v->bos) {
        remove_space = false;
        ids++, n--;
    }
    if (remove_special && v->add_eos && n > 0 && ids[n - 1] == v->eos)
        n--;
    struct sink count = {NULL, 0, 0};
    render(v, ids, n, unparse_special, remove_space, &count);
    struct sink text = {malloc(count.len ? count.len : 1), count.len, 0};
    if (!text.buf)
        return -1;
    render(v, ids, n, unparse_special, remove_space, &text);
    size_t len = text.len;
    if (v->clean_spaces) {
        len = clean_punctuation(text.buf, len);
        len = clean_quote(text.buf, len);
        len = clean_contractions(text.buf, len);
    }
    if (cap)
        memcpy(buf, text.buf, len < cap ? len : cap);
    free(text.buf);
    return (int64_t)len;
}
