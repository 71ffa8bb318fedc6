/* sample.h: internals of the sampler chain: candidates, llama.cpp-compatible sorting, MT19937. */
#ifndef OX_SAMPLE_SAMPLE_H
#define OX_SAMPLE_SAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oxidize.h"

/* One candidate token, as llama.cpp's llama_token_data: p is only meaningful after a stage
 * that computes probabilities (top-p, dist). */
struct smp_cand {
    int32_t id;
    float logit;
    float p;
};

/* The candidate array a stage works on, as llama_token_data_array. */
struct smp_array {
    struct smp_cand *data;
    size_t size;
    ptrdiff_t selected; /* index picked by greedy/dist/mirostat, -1 before */
    bool sorted;        /* data is in descending-logit order */
};

struct smp_scratch;
struct smp_mt19937;

/* A stage with its own state (penalties, DRY, XTC, mirostat, ...), each in its own file: the
 * chain calls apply on every sample, accept on every accepted token, reset on reset. The
 * struct is the first member of the stage's own, so free gets the whole allocation. */
/* A sampler's state as bytes (ox_sampler_state_*): smp_put appends (with buf NULL it only
 * counts), smp_get reads back and returns false once the bytes run short. */
struct smp_bytes {
    uint8_t *buf;
    size_t cap, n;     /* writing: room, and bytes put (or counted) */
    const uint8_t *in; /* reading: */
    size_t in_n, at;
};
void smp_put(struct smp_bytes *b, const void *p, size_t n);
bool smp_get(struct smp_bytes *b, void *p, size_t n);

struct smp_ext {
    void (*apply)(struct smp_ext *e, struct smp_array *c, struct smp_scratch *s);
    void (*accept)(struct smp_ext *e, int32_t token); /* may be NULL */
    void (*reset)(struct smp_ext *e);                 /* may be NULL */
    void (*free)(struct smp_ext *e);
    bool picks; /* sets c->selected, so it may end a chain (mirostat) */
    /* A constraint (grammar) may also answer for one token: the chain first samples without
     * its constraints and keeps the pick if they all allow it, re-running with them only when
     * one does not (llama.cpp's common sampler does the same). NULL: not a constraint. */
    bool (*allows)(struct smp_ext *e, int32_t token);
    /* what it remembers between calls (a history, a random stream), out and back in; NULL:
     * nothing. load returns false for bytes that are not such a state (e left as it was). */
    void (*save)(struct smp_ext *e, struct smp_bytes *b);
    bool (*load)(struct smp_ext *e, struct smp_bytes *b);
    const char *name; /* with save: names its state, so a load finds the same kind of stage */
    /* whether apply would leave the candidates as they are now (penalties with nothing to
     * penalize): a chain may then start from the logits (smp_top_k_direct). NULL: never. */
    bool (*inert)(const struct smp_ext *e);
};

/* Append e to the chain; takes ownership (freed on failure). */
enum ox_status smp_sampler_push_ext(struct ox_sampler *s, struct smp_ext *e);

/* llama_sampler_softmax_impl: p in float over the current order; do_sort sorts all first. */
void smp_softmax(struct smp_array *c, bool do_sort, struct smp_scratch *s);
/* llama_sampler_top_k_impl: k <= 0 keeps everything. */
void smp_top_k(struct smp_array *c, int32_t k, struct smp_scratch *s);

/* Last-n token history (llama.cpp's ring_buffer): rat(0) is the newest. */
struct smp_ring {
    int32_t *tok; /* [cap] */
    size_t cap, n, first;
};
bool smp_ring_init(struct smp_ring *r, size_t cap);
void smp_ring_push(struct smp_ring *r, int32_t t);
/* A ring's tokens, oldest first, out and back in (a ring of the same capacity). */
void smp_ring_save(const struct smp_ring *r, struct smp_bytes *b);
bool smp_ring_load(struct smp_ring *r, struct smp_bytes *b);
/* A random stream's state out and back in. */
void smp_mt_save(const struct smp_mt19937 *r, struct smp_bytes *b);
bool smp_mt_load(struct smp_mt19937 *r, struct smp_bytes *b);
static inline int32_t smp_ring_rat(const struct smp_ring *r, size_t i) {
    return r->tok[(r->first + r->n - i - 1) % r->cap];
}

/* DRY with breakers given as token sequences (head first), as llama.cpp's
 * llama_sampler_init_dry_testing: what the string form is built on, and what tests use. */
enum ox_status smp_sampler_add_dry_tokens(struct ox_sampler *s, float multiplier, float base,
                                          int32_t allowed_length, int32_t penalty_last_n,
                                          const int32_t *const *breakers, const size_t *lens,
                                          size_t n_breakers);

/* Run the whole chain on n_vocab logits and expose what survives: the candidates in their
 * final order (owned by the sampler, valid until its next call) and the picked index (-1 if
 * no stage picked). What ox_sampler_sample is built on; also lets tests see the kept sets. */
enum ox_status smp_sampler_apply(struct ox_sampler *s, const float *logits, int32_t n_vocab,
                                 const struct smp_cand **cands, size_t *n_cands,
                                 ptrdiff_t *selected);

/* Sorting, ordered by descending logit. Ties are ordered exactly as libstdc++'s
 * std::sort / std::partial_sort order them (both unstable), because the order of tied
 * candidates decides which of them a top-k cut keeps and which one a seeded draw lands on;
 * matching it makes our picks equal llama.cpp's (built with GCC/libstdc++). */

/* std::sort(a, a + n, by descending logit). */
void smp_sort(struct smp_cand *a, size_t n);
/* std::partial_sort(a, a + mid, a + n, by descending logit): the mid largest, in order, first. */
void smp_partial_sort(struct smp_cand *a, size_t mid, size_t n);
/* out[0..mid) as smp_partial_sort leaves a[0..mid) of the candidates (i, logits[i], 0) for
 * i < n, without writing those n candidates: the same heap takes the same values in the same
 * order, and what it pushes out into a's tail is never read again. */
void smp_top_k_direct(const float *logits, size_t n, size_t mid, struct smp_cand *out);

/* Scratch for the bucketed partial sort: capacity for n candidates. */
struct smp_scratch {
    struct smp_cand *tmp; /* [n] */
    int32_t *bucket;      /* [n] bucket index of each candidate */
    size_t cap;
};

/* llama.cpp's bucketed top-npartial sort: writes into s->tmp (a is not modified) at least
 * npartial candidates, the first npartial sorted; returns how many were written. */
size_t smp_bucket_partial_sort(const struct smp_cand *a, size_t n, size_t npartial,
                               struct smp_scratch *s);
/* Keep the npartial largest in a[0..npartial), sorted, as llama.cpp's in-place partial sort
 * (std::partial_sort up to 128, bucketed above). */
void smp_partial_sort_inplace(struct smp_cand *a, size_t n, size_t npartial, struct smp_scratch *s);

/* MT19937 (32-bit Mersenne Twister), as std::mt19937. */
struct smp_mt19937 {
    uint32_t mt[624];
    uint32_t idx;
};

void smp_mt_seed(struct smp_mt19937 *r, uint32_t seed);
uint32_t smp_mt_next(struct smp_mt19937 *r);
/* A double in [0, 1) exactly as libstdc++'s std::uniform_real_distribution<double>(0, 1)
 * draws it from a std::mt19937 (generate_canonical: two 32-bit outputs, low word first). */
double smp_mt_canonical_double(struct smp_mt19937 *r);
/* A float in [0, 1) as std::uniform_real_distribution<float>(0, 1) draws it (one output). */
float smp_mt_canonical_float(struct smp_mt19937 *r);
/* std::discrete_distribution<int> over a[0..n).p, drawn once (llama_sample_dist): no draw
 * and index 0 for n < 2. */
size_t smp_discrete(const struct smp_cand *a, size_t n, struct smp_mt19937 *r);

#endif
