/* encoder.c: BERT-style encoders (bert, nomic-bert), as llama.cpp's bert graph: the token
 * embeddings (plus learned positions) plus type 0's row, LayerNormed (ModernBERT's input norm
 * too); each layer normalizes its residual sums, x = norm(x + attn(x)) and x = norm(x + ffn(x)).
 * (Their attention sees the whole sequence, attend's `ahead`; nothing is kept between batches,
 * decode.c clears the cache: the batch is the sequence.) */
#include "model/encoder.h"

#include "model/context.h"
#include "model/layer_ops.h"

bool encoder_alloc(struct ox_context *ctx, struct stage *s) {
    const struct ox_model *m = ctx->model;
    struct backend *b = &s->be;
    size_t bytes = (size_t)m->cfg.n_embd * sizeof(float);
    if (!m->type_row0)
        return true;
    if (!(s->act.type_row = b->ops->alloc(b, bytes)))
        return false;
    b->ops->upload(b, s->act.type_row, m->type_row0, bytes);
    return true;
}

void encoder_input(struct ox_context *ctx, struct stage *s, int n) {
    const struct ox_model *m = ctx->model;
    struct backend *b = &s->be;
    float *x = s->act.x;
    int e = m->cfg.n_embd;
    if (s->act.type_row)
        b->ops->add_row(b, x, s->act.type_row, n, e);
    b->ops->layer_norm(b, x, vec(b, m->embd_norm), vec(b, m->embd_norm_b), x, n, e,
                       m->cfg.norm_eps);
}

void encoder_norm_residual(struct ox_context *ctx, struct stage *s, const struct weight *w,
                           const struct weight *bias, int n) {
    struct backend *b = &s->be;
    float *x = s->act.x;
    b->ops->layer_norm(b, x, vec(b, w), vec(b, bias), x, n, ctx->model->cfg.n_embd,
                       ctx->model->cfg.norm_eps);
}
