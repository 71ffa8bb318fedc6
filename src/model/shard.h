/* shard.h: a rank's share of a model split over ranks by heads and FFN rows (shard.c), and the
 * group whose sums join the ranks' partial outputs. */
#ifndef OX_MODEL_SHARD_H
#define OX_MODEL_SHARD_H

#include "model/model.h"

/* Why m (loaded for the CPU) cannot be split over world ranks by heads and FFN rows (a static
 * string), or NULL. */
const char *model_shard_refusal(const struct ox_model *m, int world);

/* Rank's shard of m (loaded for the CPU) over world ranks: a model whose layers hold the
 * rank's heads and FFN rows (views of m's bytes; m must outlive it; ox_model_free frees it
 * alone); with gpu, its weights copied to the calling thread's current GPU. OX_ERR_UNSUPPORTED
 * naming why for a model that does not split so (m on a GPU, heads or FFN rows that do not
 * divide, columns that would cut a quantization block, layers of other kinds). */
enum ox_status model_shard(const struct ox_model *m, int rank, int world, bool gpu,
                           struct ox_model **out);

#endif
