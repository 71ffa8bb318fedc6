/* dense_moe.c: gemma4's MoE FFN, as llama.cpp's graph computes it: a dense GeGLU FFN and the
 * routed experts each read the residual through a norm of their own and end in one; their sum
 * is the branch (whose post-FFN norm and residual add are the caller's). The router reads the
 * residual RMS-normed without a weight, over sqrt(n_embd), times a scale of its own. */
#include "model/dense_moe.h"

#include <math.h>

#include "model/block.h"
#include "model/context.h"
#include "model/layer_ops.h"
#include "model/moe.h"

void dense_moe_ffn(struct ox_context *ctx, struct stage *s, const struct layer_weights *l,
                   const float *in, int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct activations *a = &s->act;
    struct backend *b = &s->be;
    size_t d = (size_t)c->n_embd, all = (size_t)n * d, ff = (size_t)l->ffn_down->ne[0];
    /* the dense branch into proj (the attention is done with it) */
    linear(b, l->ffn_gate, NULL, in, a->gate, n);
    linear(b, l->ffn_up, NULL, in, a->up, n);
    b->ops->glu(b, GLU_GELU, a->gate, a->up, a->hidden, (size_t)n * ff);
    linear(b, l->ffn_down, NULL, a->hidden, a->proj, n);
    block_reduce(ctx, s, a->proj, n); /* a split model's rows' shares, whole before the norm */
    b->ops->rms_norm(b, a->proj, vec(b, l->ffn_post_norm_1), a->proj, n, (int)d, c->norm_eps);
    /* the router's input in gate, which the router's product has read before the experts
     * write it (gate holds n_batch rows of n_embd or more); its scale goes in with the norm,
     * before 1/sqrt(n_embd) where ggml multiplies it after (a rounding apart) */
    b->ops->rms_norm(b, a->x, vec(b, l->ffn_gate_inp_s), a->gate, n, (int)d, c->norm_eps);
    b->ops->scale(b, a->gate, 1.0f / sqrtf((float)d), all);
    b->ops->rms_norm(b, a->x, vec(b, l->ffn_pre_norm_2), a->xn, n, (int)d, c->norm_eps);
    moe_block(ctx, s, l, a->xn, a->gate, a->branch, n);
    block_reduce(ctx, s, a->branch, n); /* and its rows of every expert */
    b->ops->rms_norm(b, a->branch, vec(b, l->ffn_post_norm_2), a->branch, n, (int)d, c->norm_eps);
    b->ops->add(b, a->branch, a->proj, all);
}
