/* mamba2.c: a Mamba-2 layer, as llama.cpp's graph builds it: one projection of the normed input
 * into z, x, B, C and dt; the backend's mamba2 op (causal convolution of x, B and C, then the
 * selective scan on each sequence's state, plus D x); y times silu(z), RMS-normed per group of
 * channels with the group's own weights; the output projection. The per-sequence state and the
 * batch buffers are the recurrent layers' (delta_net.c). */
#include "model/mamba2.h"

#include "model/block.h"
#include "model/context.h"
#include "model/delta_net.h"
#include "model/layer_ops.h"

/* Each group of the n rows of y normed with its own slice of the weight (one RMSNorm over the
 * whole row when there is one group; over every rank's heads when a split model's ranks share
 * it: shard.c). */
static void group_norm(struct ox_context *ctx, struct stage *s, const struct layer_weights *l,
                       float *y, float *tmp, int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct backend *b = &s->be;
    size_t inner = (size_t)c->ssm_inner, gs = inner / (size_t)c->ssm_groups;
    const float *w = vec(b, l->ssm_norm);
    if (ctx->group && ctx->model->whole->cfg.ssm_groups == 1) { /* the ranks share the group */
        const int hd = c->ssm_inner / c->ssm_heads;
        block_norm_ranks(ctx, s, y, l->ssm_norm, n, (int)inner, c->shard_ssm_head0 * hd,
                         ctx->model->whole->cfg.ssm_inner);
        return;
    }
    if (c->ssm_groups == 1) {
        b->ops->rms_norm(b, y, w, y, n, (int)inner, c->norm_eps);
        return;
    }
    for (size_t g = 0; g < (size_t)c->ssm_groups; g++) {
        b->ops->copy_rows(b, tmp, gs, y + g * gs, inner, n, (int)gs);
        b->ops->rms_norm(b, tmp, w + g * gs, tmp, n, (int)gs, c->norm_eps);
        b->ops->copy_rows(b, y + g * gs, inner, tmp, gs, n, (int)gs);
    }
}

void mamba2_layer(struct ox_context *ctx, struct stage *s, const struct layer_weights *l, int il,
                  int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct delta_net_state *dn = ctx->dn;
    struct delta_net_bufs *u = &dn->bufs[s - ctx->stages];
    struct activations *a = &s->act;
    struct backend *b = &s->be;
    int32_t r = dn->index[il];
    size_t inner = (size_t)c->ssm_inner, conv = inner + 2 * (size_t)c->ssm_groups * c->dn_state;
    size_t row = inner + conv + (size_t)c->ssm_heads; /* z, then x B C, then dt */
    b->ops->rms_norm(b, a->x, vec(b, l->attn_norm), a->xn, n, c->n_embd, c->norm_eps);
    linear(b, l->ssm_in, NULL, a->xn, u->qkv, n);
    struct mamba2_args args = {
        .xbc = u->qkv + inner,
        .dt = u->qkv + inner + conv,
        .xbc_stride = row,
        .dt_stride = row,
        .conv_w = vec(b, l->dn_conv),
        .conv_b = vec(b, l->ssm_conv_b),
        .dt_bias = vec(b, l->ssm_dt_b),
        .a = vec(b, l->ssm_a),
        .d = vec(b, l->ssm_d),
        .conv_state = dn->conv[r],
        .ssm_state = dn->ssm[r],
        .conv_stride = dn->conv_floats,
        .ssm_stride = dn->ssm_floats,
        .slot = a->b_seq,
        .conv_out = u->conv_out,
        .y = u->y,
        .n = n,
        .n_head = c->ssm_heads,
        .head_dim = c->ssm_inner / c->ssm_heads,
        .n_group = c->ssm_groups,
        .d_state = c->dn_state,
        .d_conv = c->dn_conv,
    };
    b->ops->mamba2(b, &args);
    b->ops->copy_rows(b, u->z, inner, u->qkv, row, n, (int)inner);
    b->ops->glu(b, GLU_SILU, u->z, u->y, u->y, (size_t)n * inner); /* silu(z) * y */
    group_norm(ctx, s, l, u->y, u->z, n);
    linear(b, l->ssm_out, NULL, u->y, a->proj, n);
    block_reduce(ctx, s, a->proj, n); /* a split model's heads' shares */
}
