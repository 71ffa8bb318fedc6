/* mamba2.h: Mamba-2 layers (Granite 4.0's hybrids), their state kept with the delta-net's. */
#ifndef OX_MODEL_MAMBA2_H
#define OX_MODEL_MAMBA2_H

#include "model/model.h"

struct ox_context;
struct stage;

/* Layer il (recurrent) over the batch's n tokens: reads act.x, leaves the branch's output (the
 * ssm_out projection) in act.proj. */
void mamba2_layer(struct ox_context *ctx, struct stage *s, const struct layer_weights *l, int il,
                  int n);

#endif
