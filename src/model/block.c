/* block.c: the steps the attention and FFN blocks share (block.h). */
#include "model/block.h"

#include "backend/compose.h"
#include "model/layer_ops.h"

void block_norm(struct ox_context *ctx, struct stage *s, const float *x, const struct weight *w,
                const struct weight *bias, float *y, int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct backend *b = &s->be;
    if (c->arch->norm == NORM_LAYER) {
        b->ops->layer_norm(b, x, vec(b, w), vec(b, bias), y, n, c->n_embd, c->norm_eps);
    } else {
        b->ops->rms_norm(b, x, vec(b, w), y, n, c->n_embd, c->norm_eps);
        if (bias)
            b->ops->add_row(b, y, vec(b, bias), n, c->n_embd);
    }
}

bool block_norm_fusable(const struct ox_context *ctx, const struct weight *w,
                        const struct weight *bias) {
    const struct arch_desc *d = ctx->model->cfg.arch;
    return w && !bias && d->norm == NORM_RMS && !d->parallel && !d->no_pre_norm;
}

bool block_add_projection(struct ox_context *ctx, struct stage *s, const struct weight *w,
                          const struct weight *bias, const struct weight *post_norm, const float *h,
                          int n, float *tmp) {
    const struct model_config *c = &ctx->model->cfg;
    struct backend *b = &s->be;
    if (bias || post_norm || c->residual_scale != 0.0f || c->arch->parallel || ctx->group)
        return false;
    struct mat m = as_mat(b, w);
    compose_matmul_add(b, &m, h, s->act.x, n, tmp);
    return true;
}

void block_reduce(struct ox_context *ctx, struct stage *s, float *x, int n) {
    if (!ctx->group)
        return;
    enum ox_status st = s->be.ops->all_reduce(&s->be, ctx->group, ctx->rank, x,
                                              (size_t)n * (size_t)ctx->model->cfg.n_embd);
    if (st != OX_OK && ctx->batch_err == OX_OK) /* the batch's status (transformer_forward) */
        ctx->batch_err = st;
}
