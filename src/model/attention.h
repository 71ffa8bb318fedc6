/* attention.h: a layer's attention block (attention.c): q, k and v, their rotation and the KV
 * cache, the attention itself and the output projection. */
#ifndef OX_MODEL_ATTENTION_H
#define OX_MODEL_ATTENTION_H

#include "model/context.h"

/* Attention of the batch's tokens at layer il; leaves the normed input in act.xn (unless the norm
 * went into the q, k, v matmuls: block_norm_fusable says nothing reads it then) and either adds the
 * branch output to act.x (returns true) or leaves it (after wo, its bias and any post-norm) in
 * act.proj. */
bool attention_block(struct ox_context *ctx, struct stage *s, const struct batch_view *batch,
                     const struct layer_weights *l, int il);

#endif
