/* per_layer_embd.h: per-layer embeddings (gemma4): beside its embedding, each token brings a
 * small vector for every layer, which gates a projection added to that layer's output. */
#ifndef OX_MODEL_PER_LAYER_EMBD_H
#define OX_MODEL_PER_LAYER_EMBD_H

#include "model/model.h"

struct ox_context;
struct stage;

/* From the batch's tokens and their scaled embeddings in act.x: every layer's input for each
 * of the n tokens, into act.ple. Nothing without per-layer embeddings. */
void per_layer_inputs(struct ox_context *ctx, struct stage *s, int n);

/* Layer il's inputs in stage s's act.ple: n_batch rows of n_embd_per_layer; NULL without. */
float *per_layer_input(const struct ox_context *ctx, const struct stage *s, int il);

/* x += norm(proj(gelu(gate x) * input)) for layer il's n tokens, then the layer's output
 * scale (layer_output_scale), which models without per-layer embeddings may have too. */
void per_layer_embd_add(struct ox_context *ctx, struct stage *s, const struct layer_weights *l,
                        int il, int n);

#endif
