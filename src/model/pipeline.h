/* pipeline.h: a model split over ranks by layers (--split-mode layer, pipeline.c): each rank's
 * model runs its consecutive layers, and the hidden state goes from rank to rank. */
#ifndef OX_MODEL_PIPELINE_H
#define OX_MODEL_PIPELINE_H

#include "model/context.h"

/* Rank's model of m (loaded for the CPU) split over world ranks by layers: layers [begin,
 * end), rank 0 also the embeddings and the output (views of m's bytes; m must outlive it;
 * ox_model_free frees it alone); with gpu, its weights from layer gpu_begin on copied to the
 * calling thread's current GPU, those before it (rank 0's first layers, where n_gpu_layers
 * leaves them to the CPU) in the CPU's layouts. OX_ERR_UNSUPPORTED naming why for a model that
 * does not split so. */
enum ox_status model_layer_shard(const struct ox_model *m, int rank, int world, int32_t begin,
                                 int32_t gpu_begin, int32_t end, bool gpu, struct ox_model **out);

/* The forward pass of a pipeline rank's context (ctx->pipe): whether it takes its hidden state
 * from the rank before rather than embedding the tokens; that hand-over, of n rows into the
 * stage's act.x; and after its layers, its n rows passed on (to the next rank, or from the last
 * back to rank 0), returning the rows rank 0 goes on with to the output (the batch's output
 * rows) and 0 on the other ranks. A failed hand-over is the batch's status (ctx->batch_err). */
bool pipeline_takes(const struct ox_context *ctx);
void pipeline_take(struct ox_context *ctx, struct stage *s, int n);
int pipeline_pass(struct ox_context *ctx, struct stage *s, const struct batch_view *batch, int n);

#endif
