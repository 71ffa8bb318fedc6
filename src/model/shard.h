/* shard.h: a rank's share of a model split over ranks by heads and FFN rows (shard.c), and the
 * group whose sums join the ranks' partial outputs. */
#ifndef OX_MODEL_SHARD_H
#define OX_MODEL_SHARD_H

#include "model/model.h"

enum { SHARD_MAX = OX_MAX_DEVICES };

/* A shard's matrix copied from spans of the whole's rows (or, cols, of each row's columns), one
 * after another: n spans {first, count}. */
struct shard_gather {
    const struct weight *w; /* the shard's */
    bool cols;
    int n;
    int64_t (*span)[2];
};

/* The gather that made the shard's matrix w, or NULL (w is one span of the whole's, or all). */
const struct shard_gather *shard_gather_of(const struct ox_model *sh, const struct weight *w);

/* Why m (loaded for the CPU) cannot be split over world ranks by heads and FFN rows in
 * proportion to share[0 .. world) (NULL or all 0: equal shares) (a static string), or NULL. */
const char *model_shard_refusal(const struct ox_model *m, int world, const float *share);

/* Rank's shard of m (loaded for the CPU) over world ranks: a model whose layers hold the
 * rank's heads and FFN rows (views of m's bytes; m must outlive it; ox_model_free frees it
 * alone), kv heads (with their query heads) and FFN rows in whole blocks of the down matrix's
 * type cut in proportion to share (NULL or all 0: equal; each rank at least one of each); with
 * gpu, its weights copied to the calling thread's current GPU. OX_ERR_UNSUPPORTED naming why
 * for a model that does not split so (m on a GPU, fewer kv heads or blocks of FFN rows than
 * ranks, columns that would cut a quantization block, layers of other kinds). */
enum ox_status model_shard(const struct ox_model *m, int rank, int world, const float *share,
                           bool gpu, struct ox_model **out);

#endif
