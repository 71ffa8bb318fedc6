/* bpe.c: byte-level BPE ("gpt2" vocabularies): regex pre-tokenizer, GPT-2 byte map, merges by
 * rank; token for token what llama.cpp's llm_tokenizer_bpe_session produces. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokenizer/byte_unicode.h"
#include "tokenizer/pretok.h"
#include "tokenizer/vocab.h"

/* What init builds from the GGUF; read-only afterwards, so encode may run on many threads. */
struct bpe_state {
    struct pretok_config cfg;
    struct pretok *pretok;
    struct strmap ranks; /* merge text "left right" -> rank (its index in the merges array) */
    char *merge_text;    /* the merge strings, back to back: the keys of ranks */
    size_t max_merge_len;
};

/* ---- init ---------------------------------------------------------------------------------- */

/* llama.cpp splits each merge at the first space after position 0 and keys the pair; keying
 * the whole string is the same map as long as lookups refuse a left part with a space after
 * its first byte (see merge_rank). Strings without such a space give llama.cpp an empty pair
 * that no lookup can hit, so they are skipped. A repeated merge keeps its first rank. */
static enum ox_status load_merges(struct bpe_state *st, const struct ox_gguf *g) {
    const struct gguf_value *arr;
    OX_TRY(gguf_get_array(g, "tokenizer.ggml.merges", OX_GGUF_STRING, &arr));
    if (arr->n > INT32_MAX)
        return ox_fail(OX_ERR_FORMAT, "tokenizer: %llu merges (ranks must fit in int32)",
                       (unsigned long long)arr->n);
    size_t total = 0;
    for (uint64_t i = 0; i < arr->n; i++)
        total += (size_t)arr->elems[i].n;
    st->merge_text = malloc(total ? total : 1);
    if (!st->merge_text)
        return ox_fail(OX_ERR_OOM, "tokenizer: out of memory for %zu bytes of merges", total);
    OX_TRY(strmap_reserve(&st->ranks, (size_t)arr->n));
    char *dst = st->merge_text;
    for (uint64_t i = 0; i < arr->n; i++) {
        const struct gguf_value *m = &arr->elems[i];
        size_t n = (size_t)m->n;
        if (n < 2 || !memchr(m->data + 1, ' ', n - 1))
            continue;
        memcpy(dst, m->data, n);
        OX_TRY(strmap_insert(&st->ranks, dst, n, (int64_t)i, NULL));
        st->max_merge_len = n > st->max_merge_len ? n : st->max_merge_len;
        dst += n;
    }
    return OX_OK;
}

/* The flags llama.cpp sets beside the pre-tokenizer. vocab_load reads the GGUF's own
 * add_bos/add_sep/add_space_prefix keys and special ids after init, so those still win. */
static void apply_preset(struct vocab *v, const struct pretok_config *cfg) {
    v->clean_spaces = cfg->clean_spaces;
    v->escape_whitespaces = cfg->escape_whitespaces;
    v->normalizer_nfc = cfg->nfc;
    v->add_space_prefix = false;
    if (cfg->add_bos || cfg->force_add_bos)
        v->add_bos = true;
    if (cfg->add_sep)
        v->add_sep = true;
    if (cfg->no_default_bos)
        v->bos = -1;
}

static void bpe_free(struct vocab *v) {
    struct bpe_state *st = v->model_state;
    if (!st)
        return;
    pretok_free(st->pretok);
    strmap_free(&st->ranks);
    free(st->merge_text);
    free(st);
    v->model_state = NULL;
}

static enum ox_status bpe_init(struct vocab *v, const struct ox_gguf *g) {
    struct pretok_config cfg;
    OX_TRY(pretok_config_for(v->pre, &cfg));
    struct bpe_state *st = calloc(1, sizeof *st);
    if (!st)
        return ox_fail(OX_ERR_OOM, "tokenizer: out of memory");
    v->model_state = st;
    st->cfg = cfg;
    enum ox_status s = OX_OK;
    if (gguf_find(g, "tokenizer.ggml.merges"))
        s = load_merges(st, g);
    else if (strcmp(cfg.name, "kimi-k2") != 0) /* llama.cpp lets only Kimi-K2 go without */
        s = ox_fail(OX_ERR_FORMAT, "tokenizer: BPE vocabulary without tokenizer.ggml.merges");
    if (s == OX_OK)
        s = pretok_create(&cfg, &st->pretok);
    if (s != OX_OK) {
        bpe_free(v);
        return s;
    }
    apply_preset(v, &cfg);
    return OX_OK;
}

/* ---- merging one word ---------------------------------------------------------------------- */

/* A symbol is a slice of the word that grows as merges absorb its right neighbour; the live
 * ones form a linked list in word order. */
struct symbol {
    int32_t start, len; /* len 0: absorbed */
    int32_t prev, next; /* -1 at the ends */
};

/* A candidate merge of two adjacent symbols. Entries go stale when either side changes; a
 * popped entry is used only if both lengths are still those it was made with. */
struct bigram {
    int32_t rank, left, right, left_len, right_len;
};

/* Per-call scratch, so encode needs no locks. */
struct bpe_call {
    const struct vocab *v;
    const struct bpe_state *st;
    struct tok_list *out;
    struct pretok_split_result split;
    char *word;
    size_t word_cap;
    struct symbol *syms;
    size_t syms_cap;
    struct bigram *heap;
    size_t heap_n, heap_cap;
    char *key; /* "left right" lookup key, max_merge_len bytes */

    /* Word cache: prose repeats its words, so a large text looks each piece up here before
     * merging it. Keys point into split.text; values index cache_ids, which holds for each
     * word its token count followed by the tokens. */
    struct strmap cache;
    int32_t *cache_ids;
    size_t cache_n, cache_cap;
};

/* Pieces up to this long are cached, up to this many of them, in texts of this many pieces. */
#define CACHE_MAX_PIECE  64
#define CACHE_MAX_WORDS  (1u << 16)
#define CACHE_MIN_PIECES 256

static enum ox_status grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap)
        return OX_OK;
    size_t cap2 = *cap ? *cap : 64;
    while (cap2 < need)
        cap2 *= 2;
    void *q = realloc(*p, cap2 * elem);
    if (!q)
        return ox_fail(OX_ERR_OOM, "tokenizer: cannot allocate %zu bytes", cap2 * elem);
    *p = q;
    *cap = cap2;
    return OX_OK;
}

/* Order of the merge queue: lowest rank first, then leftmost (llama.cpp's comparator). */
static int bigram_before(const struct bigram *a, const struct bigram *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static enum ox_status heap_push(struct bpe_call *c, struct bigram b) {
    OX_TRY(grow((void **)&c->heap, &c->heap_cap, c->heap_n + 1, sizeof *c->heap));
    size_t i = c->heap_n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!bigram_before(&b, &c->heap[parent]))
            break;
        c->heap[i] = c->heap[parent];
        i = parent;
    }
    c->heap[i] = b;
    return OX_OK;
}

static struct bigram heap_pop(struct bpe_call *c) {
    struct bigram top = c->heap[0], last = c->heap[--c->heap_n];
    size_t i = 0, n = c->heap_n;
    for (;;) {
        size_t kid = 2 * i + 1;
        if (kid >= n)
            break;
        if (kid + 1 < n && bigram_before(&c->heap[kid + 1], &c->heap[kid]))
            kid++;
        if (!bigram_before(&c->heap[kid], &last))
            break;
        c->heap[i] = c->heap[kid];
        i = kid;
    }
    if (n > 0)
        c->heap[i] = last;
    return top;
}

/* Rank of merging left+right, or -1. */
static int32_t merge_rank(struct bpe_call *c, const char *l, size_t nl, const char *r, size_t nr) {
    const struct bpe_state *st = c->st;
    if (nl + 1 + nr > st->max_merge_len)
        return -1;
    if (nl > 1 && memchr(l + 1, ' ', nl - 1))
        return -1; /* llama.cpp's split would put this space between the parts */
    memcpy(c->key, l, nl);
    c->key[nl] = ' ';
    memcpy(c->key + nl + 1, r, nr);
    return (int32_t)strmap_find(&st->ranks, c->key, nl + 1 + nr);
}

/* Queue the merge of symbols a and b (a's right neighbour) if the merges list has it. */
static enum ox_status add_bigram(struct bpe_call *c, const char *word, int32_t a, int32_t b) {
    if (a < 0 || b < 0)
        return OX_OK;
    const struct symbol *sa = &c->syms[a], *sb = &c->syms[b];
    int32_t rank =
        merge_rank(c, word + sa->start, (size_t)sa->len, word + sb->start, (size_t)sb->len);
    return rank >= 0 ? heap_push(c, (struct bigram){rank, a, b, sa->len, sb->len}) : OX_OK;
}

/* Run the merges on one word's symbols, lowest rank first, until none applies. Each merge
 * queues at most two bigrams, so a word of n symbols queues fewer than 3n in all: with the
 * queue a binary heap this is O(n log n), where rescanning for the best pair would be
 * O(n^2) on a long word. */
static enum ox_status merge_word(struct bpe_call *c, const char *word) {
    while (c->heap_n > 0) {
        struct bigram bg = heap_pop(c);
        struct symbol *l = &c->syms[bg.left], *r = &c->syms[bg.right];
        if (l->len != bg.left_len || r->len != bg.right_len || l->len == 0 || r->len == 0)
            continue; /* stale: a side has merged since this entry was queued */
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0)
            c->syms[r->next].prev = bg.left;
        OX_TRY(add_bigram(c, word, l->prev, bg.left));
        OX_TRY(add_bigram(c, word, bg.left, l->next));
    }
    return OX_OK;
}

/* Emit one final symbol: its token, or else (llama.cpp's fallback) the tokens of its single
 * bytes, skipping bytes that have none. */
static enum ox_status emit_symbol(struct bpe_call *c, const char *s, size_t n) {
    int32_t id = vocab_find(c->v, s, n);
    if (id >= 0)
        return tok_list_push(c->out, id);
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t)s[i];
        char byte_tok[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
        id = c->st->cfg.byte_encode ? vocab_find(c->v, s + i, 1) : vocab_find(c->v, byte_tok, 6);
        if (id >= 0)
            OX_TRY(tok_list_push(c->out, id));
    }
    return OX_OK;
}

/* The bytes a UTF-8 lead byte announces, cut at the end of the word (unicode_len_utf8). */
static int32_t char_len(uint8_t b) {
    static const uint8_t len_by_high_nibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len_by_high_nibble[b >> 4];
}

/* Cut the word into characters, queue every adjacent pair's merge, merge, and emit. */
static enum ox_status encode_symbols(struct bpe_call *c, const char *word, int32_t n) {
    int32_t n_syms = 0;
    for (int32_t off = 0; off < n; n_syms++)
        off += char_len((uint8_t)word[off]);
    OX_TRY(grow((void **)&c->syms, &c->syms_cap, (size_t)n_syms, sizeof *c->syms));
    n_syms = 0;
    for (int32_t off = 0; off < n; n_syms++) {
        int32_t len = char_len((uint8_t)word[off]);
        len = len < n - off ? len : n - off;
        c->syms[n_syms] = (struct symbol){off, len, n_syms - 1, off + len < n ? n_syms + 1 : -1};
        off += len;
    }
    c->heap_n = 0;
    for (int32_t i = 1; i < n_syms; i++)
        OX_TRY(add_bigram(c, word, i - 1, i));
    OX_TRY(merge_word(c, word));
    for (int32_t i = 0; i >= 0 && n_syms > 0; i = c->syms[i].next)
        OX_TRY(emit_symbol(c, word + c->syms[i].start, (size_t)c->syms[i].len));
    return OX_OK;
}

static bool all_newlines(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != '\n')
            return false;
    return true;
}

/* One pre-tokenizer piece: map its bytes, then look it up whole or merge it. */
static enum ox_status encode_piece(struct bpe_call *c, const char *piece, size_t len) {
    const char *word = piece;
    size_t n = len;
    if (c->st->cfg.byte_encode) {
        OX_TRY(grow((void **)&c->word, &c->word_cap, 2 * len, 1));
        n = 0;
        for (size_t i = 0; i < len; i++)
            n += byte_unicode_encode((uint8_t)piece[i], c->word + n);
        word = c->word;
    }
    if (n > INT32_MAX / 3)
        return ox_fail(OX_ERR_INVALID_ARG,
                       "tokenizer: a pre-tokenizer piece of %zu bytes is "
                       "too long",
                       len);
    if (c->st->cfg.ignore_merges || (c->st->cfg.newline_runs_whole && all_newlines(word, n))) {
        int32_t id = vocab_find(c->v, word, n);
        if (id >= 0)
            return tok_list_push(c->out, id);
    }
    return encode_symbols(c, word, (int32_t)n);
}

/* Remember the tokens out->ids[first..] that piece produced. */
static enum ox_status cache_store(struct bpe_call *c, const char *piece, size_t len, size_t first) {
    size_t n = c->out->n - first;
    OX_TRY(grow((void **)&c->cache_ids, &c->cache_cap, c->cache_n + n + 1, sizeof(int32_t)));
    int64_t at = (int64_t)c->cache_n;
    c->cache_ids[c->cache_n++] = (int32_t)n;
    if (n > 0) /* a piece whose bytes have no tokens yields none */
        memcpy(c->cache_ids + c->cache_n, c->out->ids + first, n * sizeof(int32_t));
    c->cache_n += n;
    return strmap_insert(&c->cache, piece, len, at, NULL);
}

static enum ox_status encode_cached(struct bpe_call *c, const char *piece, size_t len) {
    if (len > CACHE_MAX_PIECE)
        return encode_piece(c, piece, len);
    int64_t at = strmap_find(&c->cache, piece, len);
    if (at >= 0) {
        for (int32_t k = 0; k < c->cache_ids[at]; k++)
            OX_TRY(tok_list_push(c->out, c->cache_ids[at + 1 + k]));
        return OX_OK;
    }
    size_t first = c->out->n;
    OX_TRY(encode_piece(c, piece, len));
    return c->cache.count < CACHE_MAX_WORDS ? cache_store(c, piece, len, first) : OX_OK;
}

static enum ox_status encode_all(struct bpe_call *c, const char *text, size_t len) {
    c->key = malloc(c->st->max_merge_len + 1);
    if (!c->key)
        return ox_fail(OX_ERR_OOM, "tokenizer: out of memory");
    OX_TRY(pretok_split(c->st->pretok, text, len, &c->split));
    bool use_cache = c->split.n_spans >= CACHE_MIN_PIECES;
    for (size_t i = 0; i < c->split.n_spans; i++) {
        const char *piece = c->split.text + c->split.spans[i].off;
        size_t n = c->split.spans[i].len;
        OX_TRY(use_cache ? encode_cached(c, piece, n) : encode_piece(c, piece, n));
    }
    return OX_OK;
}

/* NFC of text where the vocabulary asks for it and it can change anything (malloc'd, or NULL:
 * the text as it is: ASCII, or not UTF-8, which Hugging Face never sees). */
static char *nfc_copy(const struct vocab *v, const char *text, size_t len, size_t *out_len) {
    size_t i = 0;
    while (v->normalizer_nfc && i < len && (uint8_t)text[i] < 0x80)
        i++;
    if (!v->normalizer_nfc || i == len || len > (size_t)INT32_MAX)
        return NULL;
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)text, (utf8proc_ssize_t)len, &dst,
                                      UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (n < 0) {
        free(dst);
        return NULL;
    }
    *out_len = (size_t)n;
    return (char *)dst;
}

static enum ox_status bpe_encode(const struct vocab *v, const char *text, size_t len,
                                 struct tok_list *out) {
    struct bpe_call c = {.v = v, .st = v->model_state, .out = out};
    if (!c.st)
        return ox_fail(OX_ERR_INVALID_ARG, "tokenizer: BPE vocabulary not initialized");
    size_t nfc_len = 0;
    char *nfc = nfc_copy(v, text, len, &nfc_len);
    enum ox_status s = nfc ? encode_all(&c, nfc, nfc_len) : encode_all(&c, text, len);
    free(nfc);
    pretok_split_result_free(&c.split);
    free(c.word);
    free(c.syms);
    free(c.heap);
    free(c.key);
    strmap_free(&c.cache);
    free(c.cache_ids);
    return s;
}

/* Whether a merge makes the text: some split of it is a merge's pair. */
static bool bpe_makes(const struct vocab *v, const char *text, size_t len) {
    const struct bpe_state *st = v->model_state;
    if (!st || len < 2 || len + 1 > st->max_merge_len)
        return false;
    char key[512];
    if (len + 1 >= sizeof key)
        return false;
    for (size_t k = 1; k < len; k++) {
        memcpy(key, text, k);
        key[k] = ' ';
        memcpy(key + k + 1, text + k, len - k);
        if (strmap_find(&st->ranks, key, len + 1) >= 0)
            return true;
    }
    return false;
}

const struct vocab_model_ops vocab_bpe_ops = {
    .init = bpe_init,
    .free = bpe_free,
    .encode = bpe_encode,
    .makes = bpe_makes,
};
