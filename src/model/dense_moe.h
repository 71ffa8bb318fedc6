/* dense_moe.h: an FFN of a dense branch and routed experts side by side (gemma4's MoE layers). */
#ifndef OX_MODEL_DENSE_MOE_H
#define OX_MODEL_DENSE_MOE_H

#include "model/model.h"

struct ox_context;
struct stage;

/* act.branch = the layer's dense GeGLU FFN of in (the residual normed by ffn_norm), normed, plus
 * its experts over the residual act.x normed their own way, normed: n tokens. */
void dense_moe_ffn(struct ox_context *ctx, struct stage *s, const struct layer_weights *l,
                   const float *in, int n);

#endif
