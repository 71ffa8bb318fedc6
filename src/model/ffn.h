/* ffn.h: a layer's FFN block (ffn.c): its norm, the dense FFN or the MoE, and the residual. */
#ifndef OX_MODEL_FFN_H
#define OX_MODEL_FFN_H

#include "model/context.h"

/* The FFN branch of n tokens and the residual adds left: x + attn (unless attn_added: the
 * attention or recurrent block added its own) + ffn. */
void ffn_block(struct ox_context *ctx, struct stage *s, const struct layer_weights *l, int n,
               bool attn_added);

#endif
