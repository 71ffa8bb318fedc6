/* encoder.h: what a BERT-style encoder (arch encoder) adds to the forward pass: its input's
 * token-type row and norm, and the norm of each residual sum. */
#ifndef OX_MODEL_ENCODER_H
#define OX_MODEL_ENCODER_H

#include "model/model.h"

struct ox_context;
struct stage;

/* The stage's copy of token-type row 0, which the encoder adds on every batch; false when out
 * of memory. */
bool encoder_alloc(struct ox_context *ctx, struct stage *s);

/* act.x (n tokens' embeddings) plus token-type row 0 (if the model has it), then the
 * embeddings' norm (arch embd_norm). */
void encoder_input(struct ox_context *ctx, struct stage *s, int n);

/* act.x = norm(act.x) with the weight and bias given: BERT's post-norm of a residual sum. */
void encoder_norm_residual(struct ox_context *ctx, struct stage *s, const struct weight *w,
                           const struct weight *bias, int n);

#endif
