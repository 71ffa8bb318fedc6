/* shared_expert.h: a MoE FFN's shared expert (qwen35moe, as Qwen 2 MoE and Qwen3-Next). */
#ifndef OX_MODEL_SHARED_EXPERT_H
#define OX_MODEL_SHARED_EXPERT_H

#include "model/model.h"

struct ox_context;
struct stage;

/* out += the shared expert's SwiGLU FFN of in (n tokens), times sigmoid(its gate . in) when the
 * layer has the gate. */
void shared_expert_add(struct ox_context *ctx, struct stage *s, const struct layer_weights *l,
                       const float *in, float *out, int n);

#endif
