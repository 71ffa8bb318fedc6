/* block.h: what the attention and FFN blocks (attention.c, ffn.c) and the spine share: the
 * architecture's norm, whether a norm may go into the matmuls after it, and a branch's last
 * projection added to the residual. */
#ifndef OX_MODEL_BLOCK_H
#define OX_MODEL_BLOCK_H

#include "model/context.h"

/* The architecture's norm of n rows of n_embd values (the weight and bias optional). */
void block_norm(struct ox_context *ctx, struct stage *s, const float *x, const struct weight *w,
                const struct weight *bias, float *y, int n);

/* Whether a norm (its bias absent) may go into the matmuls that read its output: RMSNorm, and
 * nothing else reads the normed rows (a parallel block's FFN does). */
bool block_norm_fusable(const struct ox_context *ctx, const struct weight *w,
                        const struct weight *bias);

/* The weight a layer's norm applies: none where the device copies of the matrices after it
 * carry it (weights_gpu.c folds it in; only layers the device runs are folded). */
static inline const struct weight *block_norm_weight(const struct weight *w, bool folded) {
    return folded ? NULL : w;
}

/* A rank's partial output rows (n of n_embd) summed over the ranks of a split model (shard.c),
 * in place; nothing for a whole model. */
void block_reduce(struct ox_context *ctx, struct stage *s, float *x, int n);

/* A split model's partial output rows x summed over the ranks straight onto the residual (the
 * stage's x += the sum, one step on the GPUs) where nothing comes between the sum and that add
 * (no post-norm, residual scale or parallel blocks): true when done so; false for a whole model
 * or when the caller must sum (block_reduce) and add itself. */
bool block_reduce_onto(struct ox_context *ctx, struct stage *s, const struct weight *post_norm,
                       float *x, int n);

/* RMS norm of rows split over the ranks of a split model (shard.c) by columns: this rank holds
 * columns [col0, col0 + cols) of each of n rows of all_cols (a norm over all heads, the rank's
 * heads' share); the rows come out as the whole model norms them. */
void block_norm_ranks(struct ox_context *ctx, struct stage *s, float *x, const struct weight *w,
                      int n, int cols, int col0, int all_cols);

/* x += W h when nothing comes between the projection and the residual (no bias, post-norm or
 * scale, nor a parallel block's sum, nor the ranks' sum): true when it added (tmp [n][n_embd] is
 * the room a backend without the fused add needs); false, with nothing done, otherwise. */
bool block_add_projection(struct ox_context *ctx, struct stage *s, const struct weight *w,
                          const struct weight *bias, const struct weight *post_norm, const float *h,
                          int n, float *tmp);

#endif
