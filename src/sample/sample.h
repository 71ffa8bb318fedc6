/* sample.h: internals of the sampler chain: candidates, llama.cpp-compatible sorting, MT19937. */
#ifndef OX_SAMPLE_SAMPLE_H
#define OX_SAMPLE_SAMPLE_H

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

#endif
