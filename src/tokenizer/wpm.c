/* wpm.c: the WordPiece ("bert") encoder: BERT normalization and splitting, then greedy pieces. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "core/utf8.h"
#include "tokenizer/vocab.h"

/* The GGUF converter rewrites Hugging Face's WordPiece vocabulary so that word-start pieces
 * carry a leading U+2581 and continuation pieces lose their "##". A word is therefore matched
 * as "\u2581word": the first piece must include the marker, the rest cannot. */
#define WPM_MARK_CP  0x2581u
#define WPM_MARK_LEN 3 /* its UTF-8 bytes */

#define WPM_REPLACEMENT 0xFFFDu
#define WPM_MAX_DECOMP  16 /* canonical decompositions are at most 4 code points long */
/* A longer word is the unknown token whole: WordPiece's max_input_chars_per_word, 100 in
 * BERT's tokenizer.json (llama.cpp has no such limit) */
#define WPM_MAX_WORD_CHARS 100

/* What the splitter does with one (normalized) code point. */
enum wpm_class {
    WPM_DROP,  /* removed: NUL, U+FFFD, controls/format/private/surrogates, stripped accents */
    WPM_SPACE, /* ends the current word */
    WPM_ALONE, /* a word of its own: punctuation, ASCII symbols, CJK ideographs */
    WPM_PART,  /* appended to the current word */
};

/* The word being built: bytes of "\u2581" + normalized text. Reused across words so a
 * fragment costs one allocation that grows to its longest word. */
struct wpm_word {
    char *buf;
    size_t len, cap;
};

/* Decode one code point the way llama.cpp's unicode_cpts_from_utf8 does, so that ids agree
 * even on bad input: the lead byte alone decides the length, continuation bytes must be
 * 10xxxxxx and present, overlong forms and surrogates pass through, and anything else
 * becomes U+FFFD consuming exactly one byte (so the following bytes are decoded afresh).
 * Values past U+10FFFF (F4 90.. to F7) would make llama.cpp throw when re-encoding; they
 * become U+FFFD here, which the splitter drops. Never reads past len. */
static uint32_t wpm_decode(const unsigned char *s, size_t len, size_t *adv) {
    uint32_t cp;
    size_t n = utf8_decode_lax(s, len, &cp);
    *adv = n ? n : 1;
    return n && cp <= 0x10FFFF ? cp : WPM_REPLACEMENT;
}

/* The Unicode White_Space property (PropList.txt), which is what BERT splits on; U+0085 and
 * the ASCII controls 9..13 are in it although their category is Cc. */
static bool wpm_is_space(uint32_t cp) {
    switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000: return true;
    default: return cp >= 0x2000 && cp <= 0x200A;
    }
}

/* The "Chinese character" blocks of BERT's BasicTokenizer, which isolates each of them.
 * The fifth range starts at U+2B920 rather than U+2B820 because Hugging Face's Rust
 * tokenizer (which produced the expected ids) and llama.cpp both use that value. */
static bool wpm_is_cjk(uint32_t cp) {
    static const uint32_t ranges[][2] = {
        {0x4E00, 0x9FFF},   {0x3400, 0x4DBF},   {0x20000, 0x2A6DF}, {0x2A700, 0x2B73F},
        {0x2B740, 0x2B81F}, {0x2B920, 0x2CEAF}, {0xF900, 0xFAFF},   {0x2F800, 0x2FA1F},
    };
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++)
        if (cp >= ranges[i][0] && cp <= ranges[i][1])
            return true;
    return false;
}

/* Code points below 0x80, without a table lookup: letters and digits build words, every
 * other printable character is punctuation or a symbol and stands alone. */
static enum wpm_class wpm_classify_ascii(uint32_t cp) {
    if (wpm_is_space(cp))
        return WPM_SPACE;
    if (cp < 0x20 || cp == 0x7F)
        return WPM_DROP;
    if ((cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z'))
        return WPM_PART;
    return WPM_ALONE;
}

/* Classify by general category. Unassigned code points (Cn) are kept inside words, as
 * llama.cpp does; only symbols below 0x7F are split off, matching BERT's _is_punctuation. */
static enum wpm_class wpm_classify(uint32_t cp, bool strip_accents) {
    if (cp < 0x80)
        return wpm_classify_ascii(cp);
    if (wpm_is_space(cp))
        return WPM_SPACE;
    if (cp == WPM_REPLACEMENT)
        return WPM_DROP;
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CS: return WPM_DROP;
    case UTF8PROC_CATEGORY_MN: return strip_accents ? WPM_DROP : WPM_PART;
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO: return WPM_ALONE;
    default: return wpm_is_cjk(cp) ? WPM_ALONE : WPM_PART;
    }
}

/* Accent stripping as BertNormalizer's: the canonical decomposition (NFD), whose nonspacing
 * marks (Mn) wpm_classify then drops; spacing marks stay (Devanagari's vowel signs). Hangul
 * syllables decompose into their jamo. llama.cpp keeps only the first code point of each
 * decomposition, and drops every mark: a syllable became its leading consonant alone. The
 * decomposition goes to dec (n code points); reordering marks by combining class is left out,
 * since the nonspacing ones go and the others keep their order. */
static int wpm_nfd(uint32_t cp, uint32_t dec[WPM_MAX_DECOMP]) {
    utf8proc_int32_t d[WPM_MAX_DECOMP];
    int boundclass = 0;
    utf8proc_ssize_t n = 0;
    if (cp >= 0xC0) /* nothing below U+00C0 decomposes canonically */
        n = utf8proc_decompose_char((utf8proc_int32_t)cp, d, WPM_MAX_DECOMP, UTF8PROC_DECOMPOSE,
                                    &boundclass);
    if (n < 1 || n > WPM_MAX_DECOMP) {
        dec[0] = cp;
        return 1;
    }
    for (utf8proc_ssize_t i = 0; i < n; i++)
        dec[i] = (uint32_t)d[i];
    return (int)n;
}

static uint32_t wpm_lower(uint32_t cp) {
    if (cp < 0x80)
        return cp >= 'A' && cp <= 'Z' ? cp + ('a' - 'A') : cp;
    return (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp);
}

/* Append one code point, growing the buffer geometrically (amortized O(1)). */
static enum ox_status wpm_word_add(struct wpm_word *w, uint32_t cp) {
    if (w->cap - w->len < 4) {
        size_t cap = w->cap ? w->cap * 2 : 256;
        char *buf = realloc(w->buf, cap);
        if (!buf)
            return ox_fail(OX_ERR_OOM, "wpm: out of memory for a %zu-byte word", w->len);
        w->buf = buf;
        w->cap = cap;
    }
    w->len += utf8_encode(cp, w->buf + w->len);
    return OX_OK;
}

/* Greedy longest match over "\u2581word" (n bytes), trying every byte length from the
 * longest token down, as llama.cpp does. If some position matches nothing, the pieces
 * already found for this word are taken back and the whole word becomes the unknown token, as
 * does a word of more than WPM_MAX_WORD_CHARS characters.
 * Cost: O(n * max_token_len) lookups, so linear in the word. */
static enum ox_status wpm_match_word(const struct vocab *v, const char *w, size_t n,
                                     struct tok_list *out) {
    const size_t start = out->n;
    const size_t max_len = v->max_token_len;
    size_t chars = 0; /* the word's, after the marker */
    for (size_t i = WPM_MARK_LEN; i < n; i++)
        chars += ((uint8_t)w[i] & 0xC0) != 0x80;
    for (size_t i = 0; i < n && chars <= WPM_MAX_WORD_CHARS;) {
        size_t j = n - i > max_len ? i + max_len : n;
        int32_t id = -1;
        for (; j > i; j--) {
            id = vocab_find(v, w + i, j - i);
            if (id >= 0)
                break;
        }
        if (id < 0) {
            out->n = start;
            break;
        }
        OX_TRY(tok_list_push(out, id));
        i = j;
    }
    if (out->n > start)
        return OX_OK;
    if (v->unk < 0)
        return ox_fail(OX_ERR_UNSUPPORTED, "wpm: a word has no pieces in the vocabulary and "
                                           "the vocabulary has no unknown token");
    return tok_list_push(out, v->unk);
}

/* Tokenize the pending word (if it has any text after the marker) and start a new one. */
static enum ox_status wpm_word_flush(const struct vocab *v, struct wpm_word *w,
                                     struct tok_list *out) {
    if (w->len <= WPM_MARK_LEN)
        return OX_OK;
    enum ox_status st = wpm_match_word(v, w->buf, w->len, out);
    w->len = WPM_MARK_LEN;
    return st;
}

/* Route one normalized code point: end, extend or isolate a word. */
static enum ox_status wpm_route(const struct vocab *v, struct wpm_word *w, uint32_t cp,
                                struct tok_list *out) {
    enum wpm_class cls = wpm_classify(cp, v->normalizer_strip_accents);
    if (cls == WPM_DROP)
        return OX_OK;
    if (cls == WPM_SPACE)
        return wpm_word_flush(v, w, out);
    /* classes come from the unlowered code point; only the word text is lowercased */
    uint32_t text_cp = v->normalizer_lowercase ? wpm_lower(cp) : cp;
    if (cls == WPM_PART)
        return wpm_word_add(w, text_cp);
    OX_TRY(wpm_word_flush(v, w, out));
    OX_TRY(wpm_word_add(w, text_cp));
    return wpm_word_flush(v, w, out);
}

/* One decoded code point: decomposed first where accents are stripped. */
static enum ox_status wpm_feed(const struct vocab *v, struct wpm_word *w, uint32_t cp,
                               struct tok_list *out) {
    if (!v->normalizer_strip_accents)
        return wpm_route(v, w, cp, out);
    uint32_t dec[WPM_MAX_DECOMP];
    const int n = wpm_nfd(cp, dec);
    for (int i = 0; i < n; i++)
        OX_TRY(wpm_route(v, w, dec[i], out));
    return OX_OK;
}

/* Encode one fragment of plain text. Streams word by word: memory is one word buffer, and
 * nothing is shared between calls, so concurrent calls on one vocab are safe. */
static enum ox_status wpm_encode(const struct vocab *v, const char *text, size_t len,
                                 struct tok_list *out) {
    struct wpm_word w = {0};
    enum ox_status st = wpm_word_add(&w, WPM_MARK_CP);
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < len && st == OX_OK;) {
        size_t adv;
        uint32_t cp = wpm_decode(s + i, len - i, &adv);
        i += adv;
        st = wpm_feed(v, &w, cp, out);
    }
    if (st == OX_OK)
        st = wpm_word_flush(v, &w, out);
    free(w.buf);
    return st;
}

const struct vocab_model_ops vocab_wpm_ops = {
    .init = NULL,
    .free = NULL,
    .encode = wpm_encode,
};
