/* spm.c: the SentencePiece-BPE ("llama") encoder: highest-score pair merging over UTF-8
 * characters with byte-token fallback, token for token what llama.cpp's SPM session emits. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/vocab.h"

/* Per-vocab state built once in init, then only read, so encode stays thread-safe. */
struct spm_state {
    int32_t byte_id[256];       /* token for a byte that no piece covers, -1 when there is none */
    uint32_t max_token_len;     /* longest token text in bytes: longer pairs cannot be tokens */
    uint8_t pair_seen[256][32]; /* bit [a][b]: some token text holds byte a followed by b */
};

/* One run of input bytes on the doubly linked list of live symbols. A symbol starts as one
 * UTF-8 character; merging appends the right neighbour's bytes and empties the neighbour
 * (n = 0), so live symbols always tile the input in order. */
struct spm_sym {
    uint32_t start, n;
    int32_t prev, next; /* -1 at the ends */
    int32_t id;         /* token of the merged text; -1 for a never-merged character */
};

/* A candidate merge of sym `left` with its right neighbour. Only left is stored: while
 * left.n is unchanged its `next` is unchanged too, so the neighbour can be re-derived. */
struct spm_pair {
    float score;   /* score of the merged token: the priority */
    int32_t left;  /* smaller left wins ties: equal scores merge leftmost first */
    int32_t id;    /* merged token */
    uint32_t size; /* left.n + right.n when queued; a mismatch later marks the entry stale */
};

/* Binary max-heap of candidate pairs; stale entries are left in and skipped when popped
 * (cheaper than removing them from the middle). */
struct spm_heap {
    struct spm_pair *a;
    size_t n, cap;
};

/* Encoder scratch for one call: nothing here outlives encode. */
struct spm_work {
    const struct vocab *v;
    const struct spm_state *st;
    const char *text;
    struct spm_sym *sym; /* the current segment's symbols */
    size_t sym_cap;
    int32_t n_sym;
    struct spm_heap heap;
};

/* The byte length llama.cpp gives a character from its first byte alone (unicode_len_utf8):
 * a stray continuation byte counts as 1, a lead byte claims its length whether or not the
 * following bytes are continuations; the caller clips at the end of input. */
static uint32_t utf8_lead_len(unsigned char c) {
    static const uint8_t by_high_nibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return by_high_nibble[c >> 4];
}

/* Does a come out of the heap before b? Higher score first, then the leftmost pair: the
 * order llama.cpp's priority_queue comparator gives. */
static bool pair_before(const struct spm_pair *a, const struct spm_pair *b) {
    if (a->score != b->score)
        return a->score > b->score;
    return a->left < b->left;
}

static void heap_sift_down(struct spm_heap *h, size_t i) {
    struct spm_pair item = h->a[i];
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= h->n)
            break;
        if (child + 1 < h->n && pair_before(&h->a[child + 1], &h->a[child]))
            child++;
        if (!pair_before(&h->a[child], &item))
            break;
        h->a[i] = h->a[child];
        i = child;
    }
    h->a[i] = item;
}

static enum ox_status heap_push(struct spm_heap *h, struct spm_pair p) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        struct spm_pair *a = realloc(h->a, cap * sizeof *a);
        if (!a)
            return ox_fail(OX_ERR_OOM, "spm: cannot grow the merge queue to %zu pairs", cap);
        h->a = a;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0 && pair_before(&p, &h->a[(i - 1) / 2])) {
        h->a[i] = h->a[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->a[i] = p;
    return OX_OK;
}

static struct spm_pair heap_pop(struct spm_heap *h) {
    struct spm_pair top = h->a[0];
    h->a[0] = h->a[--h->n];
    if (h->n)
        heap_sift_down(h, 0);
    return top;
}

/* Queue the merge of left with right if their joined text is a token. Symbols are adjacent
 * slices of the input, so the joined text is read in place without copying. The queue is
 * only appended to here; heapify or the caller's push order keeps the heap property. */
static enum ox_status try_pair(struct spm_work *w, int32_t left, int32_t right,
                               bool heapify_later) {
    if (left < 0 || right < 0)
        return OX_OK;
    const struct spm_sym *l = &w->sym[left];
    uint32_t size = l->n + w->sym[right].n;
    if (size > w->st->max_token_len)
        return OX_OK;
    int32_t id = vocab_find(w->v, w->text + l->start, size);
    if (id < 0)
        return OX_OK;
    struct spm_pair p = {w->v->tokens[id].score, left, id, size};
    if (!heapify_later)
        return heap_push(&w->heap, p);
    w->heap.a[w->heap.n++] = p; /* capacity reserved by the caller */
    return OX_OK;
}

/* Room for n symbols (n > cap); buffers are reused from segment to segment. */
static enum ox_status grow_syms(struct spm_work *w, size_t n) {
    size_t cap = w->sym_cap ? w->sym_cap : 256;
    while (cap < n)
        cap *= 2;
    struct spm_sym *sym = realloc(w->sym, cap * sizeof *sym);
    if (!sym)
        return ox_fail(OX_ERR_OOM, "spm: cannot allocate %zu symbols", cap);
    w->sym = sym;
    w->sym_cap = cap;
    return OX_OK;
}

/* Could a token straddle the boundary between bytes a and b? Only if some token text holds
 * the byte pair "ab"; otherwise no merge can ever cross it. */
static bool joinable(const struct spm_state *st, unsigned char a, unsigned char b) {
    return (st->pair_seen[a][b >> 3] >> (b & 7)) & 1;
}

/* Cut the next segment at `off` into one symbol per UTF-8 character, llama.cpp's way (see
 * utf8_lead_len), stopping at the first character boundary no token can straddle. Merges on
 * either side of such a wall never interact, and the best-first order restricted to one side
 * is the order that side would follow alone, so segments can be encoded one by one: same
 * tokens, but a small cache-resident queue per word instead of one for the whole text.
 * Returns the end of the segment in *end. */
static enum ox_status split_segment(struct spm_work *w, size_t off, size_t len, size_t *end) {
    int32_t n = 0;
    for (;;) {
        if ((size_t)n == w->sym_cap)
            OX_TRY(grow_syms(w, (size_t)n + 1));
        uint32_t clen = utf8_lead_len((unsigned char)w->text[off]);
        if (clen > len - off)
            clen = (uint32_t)(len - off);
        w->sym[n] = (struct spm_sym){(uint32_t)off, clen, n - 1, n + 1, -1};
        n++;
        off += clen;
        if (off == len ||
            !joinable(w->st, (unsigned char)w->text[off - 1], (unsigned char)w->text[off]))
            break;
    }
    w->sym[n - 1].next = -1;
    w->n_sym = n;
    *end = off;
    return OX_OK;
}

/* Seed the queue with every adjacent pair that forms a token, then heapify in O(n). */
static enum ox_status seed_pairs(struct spm_work *w) {
    size_t want = (size_t)w->n_sym;
    if (want > w->heap.cap) {
        struct spm_pair *a = realloc(w->heap.a, want * sizeof *a);
        if (!a)
            return ox_fail(OX_ERR_OOM, "spm: cannot allocate a merge queue of %zu pairs", want);
        w->heap.a = a;
        w->heap.cap = want;
    }
    w->heap.n = 0;
    for (int32_t i = 1; i < w->n_sym; i++)
        OX_TRY(try_pair(w, i - 1, i, true));
    for (size_t i = w->heap.n / 2; i-- > 0;)
        heap_sift_down(&w->heap, i);
    return OX_OK;
}

/* Apply the best merge until no adjacent pair forms a token. Every merge checks that the
 * popped pair still describes two live neighbours of the recorded total size; sizes only
 * grow and emptied symbols stay empty, so a stale entry can never look current again. */
static enum ox_status merge_all(struct spm_work *w) {
    while (w->heap.n) {
        struct spm_pair p = heap_pop(&w->heap);
        struct spm_sym *l = &w->sym[p.left];
        if (l->n == 0 || l->next < 0)
            continue;
        struct spm_sym *r = &w->sym[l->next];
        if (l->n + r->n != p.size)
            continue;
        l->n += r->n;
        l->id = p.id;
        r->n = 0;
        l->next = r->next;
        if (l->next >= 0)
            w->sym[l->next].prev = p.left;
        OX_TRY(try_pair(w, l->prev, p.left, false));
        OX_TRY(try_pair(w, p.left, l->next, false));
    }
    return OX_OK;
}

/* Emit the tokens of the surviving symbols. A merged symbol is its token. An unmerged
 * character is looked up whole, else spelled as byte tokens. llama.cpp would first try to
 * undo recorded merges of a non-token symbol, but merges are only recorded for texts that
 * are tokens, so that branch can never fire and there is no recursion to bound here. */
static enum ox_status emit_tokens(struct spm_work *w, struct tok_list *out) {
    for (int32_t i = 0; i >= 0; i = w->sym[i].next) {
        const struct spm_sym *s = &w->sym[i];
        int32_t id = s->id >= 0 ? s->id : vocab_find(w->v, w->text + s->start, s->n);
        if (id >= 0) {
            OX_TRY(tok_list_push(out, id));
            continue;
        }
        for (uint32_t j = 0; j < s->n; j++) {
            unsigned char b = (unsigned char)w->text[s->start + j];
            if (w->st->byte_id[b] < 0)
                return ox_fail(OX_ERR_UNSUPPORTED,
                               "spm: byte 0x%02X has no token (no <0x%02X>, no raw byte, no unk)",
                               b, b);
            OX_TRY(tok_list_push(out, w->st->byte_id[b]));
        }
    }
    return OX_OK;
}

static enum ox_status spm_encode(const struct vocab *v, const char *text, size_t len,
                                 struct tok_list *out) {
    if (!v->model_state)
        return ox_fail(OX_ERR_INVALID_ARG,
                       "spm: encode called on a vocab that was not initialized");
    if (len == 0)
        return OX_OK;
    /* symbol indices and byte offsets are 32-bit */
    if (len > (size_t)INT32_MAX)
        return ox_fail(OX_ERR_INVALID_ARG, "spm: text of %zu bytes is too long to tokenize", len);
    struct spm_work w = {.v = v, .st = v->model_state, .text = text};
    enum ox_status st = OX_OK;
    for (size_t off = 0; off < len && st == OX_OK;) {
        st = split_segment(&w, off, len, &off);
        if (st == OX_OK)
            st = seed_pairs(&w);
        if (st == OX_OK)
            st = merge_all(&w);
        if (st == OX_OK)
            st = emit_tokens(&w, out);
    }
    free(w.sym);
    free(w.heap.a);
    return st;
}

/* The fallback token of one byte, as llama.cpp's byte_to_token looks it up: the text
 * "<0xXX>" (upper-case hex), else a token that is the raw byte itself, else unk. */
static int32_t byte_token(const struct vocab *v, unsigned char b) {
    static const char hex[] = "0123456789ABCDEF";
    char name[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
    int32_t id = vocab_find(v, name, sizeof name);
    if (id < 0)
        id = vocab_find(v, (const char *)&b, 1);
    if (id < 0)
        id = v->unk;
    return id;
}

static enum ox_status spm_init(struct vocab *v, const struct ox_gguf *g) {
    (void)g;
    struct spm_state *st = calloc(1, sizeof *st);
    if (!st)
        return ox_fail(OX_ERR_OOM, "spm: cannot allocate the tokenizer state");
    for (int b = 0; b < 256; b++)
        st->byte_id[b] = byte_token(v, (unsigned char)b);
    for (int32_t i = 0; i < v->n_tokens; i++) {
        const unsigned char *t = (const unsigned char *)v->tokens[i].text;
        uint32_t n = v->tokens[i].len;
        if (n > st->max_token_len)
            st->max_token_len = n;
        for (uint32_t j = 1; j < n; j++)
            st->pair_seen[t[j - 1]][t[j] >> 3] |= (uint8_t)(1u << (t[j] & 7));
    }
    v->model_state = st;
    return OX_OK;
}

static void spm_free(struct vocab *v) {
    free(v->model_state);
    v->model_state = NULL;
}

const struct vocab_model_ops vocab_spm_ops = {
    .init = spm_init,
    .free = spm_free,
    .encode = spm_encode,
};
