/* kv_cache.c: the KV cache's cells and sequences (kv_cache.h). */
#include "kv/kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "quant/dtype.h"

enum ox_status kv_init(struct kv_cache *kv, enum ox_dtype type, int32_t n_cells) {
    memset(kv, 0, sizeof *kv);
    kv->type = type;
    kv->n_cells = n_cells;
    kv->pos = malloc((size_t)(n_cells > 0 ? n_cells : 1) * sizeof *kv->pos);
    kv->seq = calloc((size_t)(n_cells > 0 ? n_cells : 1) * SEQ_WORDS, sizeof *kv->seq);
    if (!kv->pos || !kv->seq) {
        kv_free(kv);
        return ox_fail(OX_ERR_OOM, "kv: cannot allocate %d cells", n_cells);
    }
    for (int32_t c = 0; c < n_cells; c++)
        kv->pos[c] = -1;
    return OX_OK;
}

void kv_free(struct kv_cache *kv) {
    free(kv->pos), free(kv->seq);
    kv->pos = NULL, kv->seq = NULL;
}

static size_t row_bytes(enum ox_dtype type, int64_t floats) {
    const struct dtype_traits *tr = dtype_get((int)type);
    return (size_t)(floats / tr->block_size) * tr->type_size;
}

void kv_set_layer(struct kv_cache *kv, int il, int64_t k_floats, int64_t v_floats) {
    kv->k_row[il] = row_bytes(kv->type, k_floats);
    kv->v_row[il] = row_bytes(kv->type, v_floats);
}

/* Cell c freed: no position, no sequence. */
static void cell_free(struct kv_cache *kv, int32_t c) {
    kv->pos[c] = -1;
    memset(kv_cell_seqs(kv, c), 0, SEQ_WORDS * sizeof *kv->seq);
}

void kv_clear(struct kv_cache *kv) {
    for (int32_t c = 0; c < kv->n_cells; c++)
        cell_free(kv, c);
    kv->used_end = 0;
}

int32_t kv_seq_pos_max(const struct kv_cache *kv, int32_t seq) {
    int32_t max = -1;
    for (int32_t c = 0; c < kv->used_end; c++)
        if (kv_cell_in(kv, c, seq) && kv->pos[c] > max)
            max = kv->pos[c];
    return max;
}

void kv_next_positions(const struct kv_cache *kv, int32_t next[OX_SEQ_MAX]) {
    memset(next, 0, OX_SEQ_MAX * sizeof *next);
    for (int32_t c = 0; c < kv->used_end; c++) {
        if (kv->pos[c] < 0)
            continue;
        for (int w = 0; w < SEQ_WORDS; w++)
            for (uint64_t bits = kv_cell_seqs(kv, c)[w]; bits; bits &= bits - 1) {
                int s = w * 64 + __builtin_ctzll(bits);
                next[s] = kv->pos[c] + 1 > next[s] ? kv->pos[c] + 1 : next[s];
            }
    }
}

void kv_set_regions(struct kv_cache *kv, int32_t n) {
    kv->n_regions = n > 1 && n <= OX_SEQ_MAX && n <= kv->n_cells ? n : 0;
}

/* The first free cell in [from, to), or -1. */
static int32_t first_free(const struct kv_cache *kv, int32_t from, int32_t to) {
    for (int32_t c = from; c < to; c++)
        if (kv->pos[c] < 0)
            return c;
    return -1;
}

enum ox_status kv_place(struct kv_cache *kv, int n, const int32_t *pos, const int32_t *seq,
                        int32_t *cells) {
    int32_t free_cells = 0;
    for (int32_t c = 0; c < kv->n_cells && free_cells < n; c++)
        free_cells += kv->pos[c] < 0;
    if (free_cells < n)
        return ox_fail(OX_ERR_CONTEXT_FULL,
                       "decode: %d tokens do not fit in the context of %d (%d cells free)", n,
                       kv->n_cells, free_cells);
    /* enough: each token takes its cell now, so the next one sees it taken */
    int32_t region = kv->n_regions ? kv->n_cells / kv->n_regions : 0, any = 0;
    int32_t from[OX_SEQ_MAX]; /* where a region's next search starts (its cells before are
                                 taken), or -1: not searched in this batch yet */
    memset(from, 0xff, sizeof from);
    for (int t = 0; t < n; t++) {
        int32_t c = -1, r = seq[t];
        if (region && r < kv->n_regions) {
            c = first_free(kv, from[r] >= 0 ? from[r] : r * region, (r + 1) * region);
            from[r] = c >= 0 ? c + 1 : (r + 1) * region;
        }
        if (c < 0)
            c = any = first_free(kv, any, kv->n_cells);
        cells[t] = c;
        cell_free(kv, c);
        kv->pos[c] = pos[t];
        kv_cell_seqs(kv, c)[seq[t] / 64] = 1ull << (seq[t] % 64);
        kv->used_end = c + 1 > kv->used_end ? c + 1 : kv->used_end;
    }
    return OX_OK;
}

void kv_spans(struct kv_cache *kv) {
    memset(kv->span, 0, sizeof kv->span);
    for (int32_t c = 0; c < kv->used_end; c++) {
        if (kv->pos[c] < 0)
            continue;
        for (int w = 0; w < SEQ_WORDS; w++)
            for (uint64_t bits = kv_cell_seqs(kv, c)[w]; bits; bits &= bits - 1) {
                int32_t *sp = kv->span + 2 * (w * 64 + __builtin_ctzll(bits));
                if (sp[1] == 0)
                    sp[0] = c;
                sp[1] = c + 1;
            }
    }
}

static bool in_range(int32_t pos, int32_t p0, int32_t p1) {
    return pos >= (p0 < 0 ? 0 : p0) && (p1 < 0 || pos < p1);
}

bool kv_seq_holds(const struct kv_cache *kv, int32_t seq, int32_t p0, int32_t p1) {
    for (int32_t c = 0; c < kv->used_end; c++)
        if (kv->pos[c] >= 0 && (seq < 0 || kv_cell_in(kv, c, seq)) && in_range(kv->pos[c], p0, p1))
            return true;
    return false;
}

void kv_seq_rm(struct kv_cache *kv, int32_t seq, int32_t p0, int32_t p1) {
    for (int32_t c = 0; c < kv->used_end; c++) {
        if (kv->pos[c] < 0 || !in_range(kv->pos[c], p0, p1))
            continue;
        uint64_t *set = kv_cell_seqs(kv, c), left = 0;
        if (seq < 0) /* every sequence */
            memset(set, 0, SEQ_WORDS * sizeof *set);
        else if (seq < OX_SEQ_MAX)
            set[seq / 64] &= ~(1ull << (seq % 64));
        for (int w = 0; w < SEQ_WORDS; w++)
            left |= set[w];
        if (!left)
            kv->pos[c] = -1;
    }
}

void kv_seq_cp(struct kv_cache *kv, int32_t src, int32_t dst, int32_t p0, int32_t p1) {
    for (int32_t c = 0; c < kv->used_end; c++)
        if (kv->pos[c] >= 0 && kv_cell_in(kv, c, src) && in_range(kv->pos[c], p0, p1))
            kv_cell_seqs(kv, c)[dst / 64] |= 1ull << (dst % 64);
}

void kv_seq_add(struct kv_cache *kv, int32_t seq, int32_t p0, int32_t p1, int32_t delta,
                void (*moved)(void *user, int32_t cell), void *user) {
    for (int32_t c = 0; c < kv->used_end; c++) {
        if (kv->pos[c] < 0 || !kv_cell_in(kv, c, seq) || !in_range(kv->pos[c], p0, p1))
            continue;
        kv->pos[c] += delta;
        if (kv->pos[c] < 0) { /* shifted out of the window */
            cell_free(kv, c);
            continue;
        }
        if (moved)
            moved(user, c);
    }
}
