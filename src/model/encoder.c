/* encoder.c: BERT-style encoders (bert, nomic-bert), as llama.cpp's bert graph: the token
 * embeddings (plus learned positions) plus type 0's row, LayerNormed; each layer normalizes its
 * residual sums, x = norm(x + attn(x)) and x = norm(x + ffn(x)); and every token attends to its
 * whole sequence. Nothing is kept between batches (decode.c clears the cache): the batch is the
 * sequence. */
#include "model/encoder.h"

#include <stdint.h>
#include <stdlib.h>

#include "model/context.h"
#include "model/layer_ops.h"

bool encoder_alloc(struct ox_context *ctx, struct stage *s) {
    const struct ox_model *m = ctx->model;
    struct backend *b = &s->be;
    struct activations *a = &s->act;
    size_t e = (size_t)m->cfg.n_embd, nb = ctx->params.n_batch;
    if (m->type_row0) {
        if (!(a->type_row = b->ops->alloc(b, e * sizeof(float))))
            return false;
        b->ops->upload(b, a->type_row, m->type_row0, e * sizeof(float));
    }
    if (m->cfg.causal)
        return true;
    int32_t *all = malloc(nb * sizeof *all);
    if (!all || !(a->b_see_all = b->ops->alloc(b, nb * sizeof *all))) {
        free(all);
        return false;
    }
    for (size_t t = 0; t < nb; t++) /* past any position: the causal test passes for every cell */
        all[t] = INT32_MAX;
    b->ops->upload(b, a->b_see_all, all, nb * sizeof *all);
    free(all);
    return true;
}

void encoder_input(struct ox_context *ctx, int n) {
    const struct ox_model *m = ctx->model;
    struct backend *b = &ctx->st->be;
    float *x = ctx->st->act.x;
    int e = m->cfg.n_embd;
    if (ctx->st->act.type_row)
        b->ops->add_row(b, x, ctx->st->act.type_row, n, e);
    b->ops->layer_norm(b, x, vec(b, m->embd_norm), vec(b, m->embd_norm_b), x, n, e,
                       m->cfg.norm_eps);
}

void encoder_norm_residual(struct ox_context *ctx, const struct weight *w,
                           const struct weight *bias, int n) {
    struct backend *b = &ctx->st->be;
    float *x = ctx->st->act.x;
    b->ops->layer_norm(b, x, vec(b, w), vec(b, bias), x, n, ctx->model->cfg.n_embd,
                       ctx->model->cfg.norm_eps);
}

const int32_t *encoder_mask_positions(const struct ox_context *ctx) {
    return ctx->model->cfg.causal ? ctx->st->act.b_pos : ctx->st->act.b_see_all;
}
