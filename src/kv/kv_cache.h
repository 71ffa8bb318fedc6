/* kv_cache.h: the KV cache's bookkeeping: which position and sequences each cell holds, cells
 * for a batch, the sequence operations the public API offers, and each layer's row sizes. The
 * rows themselves live in the memory of the backend that runs the layer (model/context.c). */
#ifndef OX_KV_KV_CACHE_H
#define OX_KV_KV_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h" /* SEQ_WORDS and seq_set_has: the attention kernels read the sets */
#include "core/status.h"
#include "oxidize.h"

#define KV_MAX_LAYERS 512

/* n_cells cells, each one token's keys and values for every layer that keeps them (not
 * recurrent layers, nor those reading another layer's). */
struct kv_cache {
    enum ox_dtype type; /* f32, f16 or q8_0 rows */
    int32_t n_cells;
    int32_t *pos;     /* position of the token in the cell, -1 when free */
    uint64_t *seq;    /* [n_cells][SEQ_WORDS]: the cell's sequences (seq_set_has) */
    int32_t used_end; /* cells at or past this index are all free: the ops look at the rest */
    int32_t n_regions; /* > 1: sequence s < n_regions places its tokens in region s, the s-th
                          of n_regions equal runs of cells, while it has room there (so a
                          sequence's cells stay together and attention reads few of the rest) */
    int32_t span[2 * OX_SEQ_MAX]; /* kv_spans: [2 s, 2 s + 1) the first and one past the last
                                     cell sequence s holds (0, 0 when none) */
    size_t k_row[KV_MAX_LAYERS], v_row[KV_MAX_LAYERS]; /* bytes of one cell's keys / values in a
                                                         layer; 0: it keeps none (for values:
                                                         they lead its key rows) */
};

/* The cells, all free, for rows of type; no layer keeps rows until kv_set_layer. */
enum ox_status kv_init(struct kv_cache *kv, enum ox_dtype type, int32_t n_cells);
void kv_free(struct kv_cache *kv);

/* Layer il keeps k_floats of keys and v_floats of values per cell (v_floats 0: its values are
 * the front of its keys' rows, as latent attention's are). */
void kv_set_layer(struct kv_cache *kv, int il, int64_t k_floats, int64_t v_floats);

/* The bytes apart of layer il's value rows: its own, or its keys' where they hold them. */
static inline size_t kv_v_row(const struct kv_cache *kv, int il) {
    return kv->v_row[il] ? kv->v_row[il] : kv->k_row[il];
}

/* Cell c's sequence set (SEQ_WORDS words); whether it holds sequence seq. */
static inline uint64_t *kv_cell_seqs(const struct kv_cache *kv, int32_t c) {
    return kv->seq + (size_t)c * SEQ_WORDS;
}

static inline bool kv_cell_in(const struct kv_cache *kv, int32_t c, int32_t seq) {
    return seq_set_has(kv_cell_seqs(kv, c), seq);
}

/* Every cell freed. */
void kv_clear(struct kv_cache *kv);

/* The last position sequence seq holds, or -1. */
int32_t kv_seq_pos_max(const struct kv_cache *kv, int32_t seq);

/* next[s] = 1 + the last position of sequence s (0 when it has none), for every sequence, in
 * one pass over the cells. */
void kv_next_positions(const struct kv_cache *kv, int32_t next[OX_SEQ_MAX]);

/* Regions for n sequences (kv_cache.n_regions): llama.cpp's split cache, as a placement
 * preference only, so a sequence that outgrows its region goes on in any free cell. */
void kv_set_regions(struct kv_cache *kv, int32_t n);
/* Free cells for n tokens (their positions and sequences) into cells[], taken at once, or
 * OX_ERR_CONTEXT_FULL with the cache untouched: each in its sequence's region while that has a
 * free cell, else the first free cell. */
enum ox_status kv_place(struct kv_cache *kv, int n, const int32_t *pos, const int32_t *seq,
                        int32_t *cells);

/* kv->span, for every sequence, in one pass over the cells. */
void kv_spans(struct kv_cache *kv);
/* Whether sequence seq (< 0: any) holds a position in [p0, p1) (p0 < 0: from 0; p1 < 0: on). */
bool kv_seq_holds(const struct kv_cache *kv, int32_t seq, int32_t p0, int32_t p1);

/* Sequence seq (< 0: every one) leaves the cells of positions [p0, p1); a cell with no
 * sequence left is free. */
void kv_seq_rm(struct kv_cache *kv, int32_t seq, int32_t p0, int32_t p1);

/* Sequence dst joins src's cells of positions [p0, p1): cells are shared, not copied. */
void kv_seq_cp(struct kv_cache *kv, int32_t src, int32_t dst, int32_t p0, int32_t p1);

/* Sequence seq's cells of positions [p0, p1) move by delta positions; those moved below 0 are
 * freed (as llama.cpp drops them), and moved(user, cell) is called for each one that stays
 * (its keys then need rotating by delta more). */
void kv_seq_add(struct kv_cache *kv, int32_t seq, int32_t p0, int32_t p1, int32_t delta,
                void (*moved)(void *user, int32_t cell), void *user);

#endif
