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

/* The ranks' columns gathered by a sum (each rank's in place, zeros elsewhere: exact), the whole
 * rows normed as one model would, the rank's columns taken back: an all-reduce of the whole
 * rows per norm, which only architectures norming q or k over all heads pay (OLMo 2, OLMoE,
 * MiniMax-M2). */
void block_norm_ranks(struct ox_context *ctx, struct stage *s, float *x, const struct weight *w,
                      int n, int cols, int col0, int all_cols) {
    struct backend *b = &s->be;
    float *all = s->act.ranks_rows;
    b->ops->zero(b, all, (size_t)n * (size_t)all_cols);
    b->ops->copy_rows(b, all + col0, (size_t)all_cols, x, (size_t)cols, n, cols);
    enum ox_status st =
        b->ops->all_reduce(b, ctx->group, ctx->rank, all, (size_t)n * (size_t)all_cols, NULL);
    if (st != OX_OK && ctx->batch_err == OX_OK) /* the batch's status, as block_reduce's */
        ctx->batch_err = st;
    b->ops->rms_norm(b, all, vec(b, w), all, n, all_cols, ctx->model->cfg.norm_eps);
    b->ops->copy_rows(b, x, (size_t)cols, all + col0, (size_t)all_cols, n, cols);
}

static void reduce(struct ox_context *ctx, struct stage *s, float *x, float *to, int n) {
    enum ox_status st = s->be.ops->all_reduce(&s->be, ctx->group, ctx->rank, x,
                                              (size_t)n * (size_t)ctx->model->cfg.n_embd, to);
    if (st != OX_OK && ctx->batch_err == OX_OK) /* the batch's status (transformer_forward) */
        ctx->batch_err = st;
}

void block_reduce(struct ox_context *ctx, struct stage *s, float *x, int n) {
    if (ctx->group)
        reduce(ctx, s, x, NULL, n);
}

bool block_reduce_onto(struct ox_context *ctx, struct stage *s, const struct weight *post_norm,
                       float *x, int n) {
    const struct model_config *c = &ctx->model->cfg;
    if (!ctx->group || post_norm || c->residual_scale != 0.0f || c->arch->parallel)
        return false;
    reduce(ctx, s, x, s->act.x, n);
    return true;
}
