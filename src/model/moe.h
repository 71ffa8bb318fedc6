/* moe.h: a layer's MoE FFN (moe.c). */
#ifndef OX_MODEL_MOE_H
#define OX_MODEL_MOE_H

#include "model/model.h"

struct ox_context;
struct stage;

/* out = the MoE FFN of layer l over in, n tokens, routed by router_in (NULL: in itself); the
 * shared expert is the caller's. */
void moe_block(struct ox_context *ctx, struct stage *s, const struct layer_weights *l,
               const float *in, const float *router_in, float *out, int n);

#endif
