/* per_layer_embd.c: gemma4's per-layer embeddings, as llama.cpp's graph makes them: a token's
 * row of per_layer_token_embd (every layer's vector, times sqrt of their width) plus a
 * projection of its embedding (normed per layer), over sqrt 2; after each layer, its vector
 * gates a small GELU projection of the hidden state that is normed and added back. */
#include "model/per_layer_embd.h"

#include <math.h>

#include "model/context.h"
#include "model/layer_ops.h"

float *per_layer_input(const struct ox_context *ctx, const struct stage *s, int il) {
    const struct model_config *c = &ctx->model->cfg;
    float *ple = s->act.ple;
    return ple ? ple + (size_t)il * ctx->params.n_batch * (size_t)c->n_embd_per_layer : NULL;
}

void per_layer_inputs(struct ox_context *ctx, struct stage *s, int n) {
    const struct ox_model *m = ctx->model;
    const struct model_config *c = &m->cfg;
    struct activations *a = &s->act;
    struct backend *b = &s->be;
    if (!m->ple_tok_embd)
        return;
    size_t p = (size_t)c->n_embd_per_layer, row = p * (size_t)c->n_layer, all = (size_t)n * row;
    struct mat rows = as_mat(b, m->ple_tok_embd);
    b->ops->get_rows(b, &rows, a->b_tok, a->ple, n); /* [n][n_layer][p], ple as scratch */
    b->ops->scale(b, a->ple, sqrtf((float)p), all);
    linear(b, m->ple_model_proj, NULL, a->x, a->ple_tmp, n);
    b->ops->scale(b, a->ple_tmp, 1.0f / sqrtf((float)c->n_embd), all);
    b->ops->rms_norm(b, a->ple_tmp, vec(b, m->ple_proj_norm), a->ple_tmp, n * c->n_layer, (int)p,
                     c->norm_eps);
    b->ops->add(b, a->ple_tmp, a->ple, all);
    b->ops->scale(b, a->ple_tmp, 1.0f / sqrtf(2.0f), all);
    for (int il = 0; il < c->n_layer; il++) /* layer-major: a layer's rows side by side */
        b->ops->copy_rows(b, per_layer_input(ctx, s, il), p, a->ple_tmp + (size_t)il * p, row, n,
                          (int)p);
}

void per_layer_embd_add(struct ox_context *ctx, struct stage *s, const struct layer_weights *l,
                        int il, int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct activations *a = &s->act;
    struct backend *b = &s->be;
    size_t all = (size_t)n * (size_t)c->n_embd;
    if (l->ple_gate) { /* the FFN is done with gate and branch */
        linear(b, l->ple_gate, NULL, a->x, a->gate, n);
        b->ops->glu(b, GLU_GELU, a->gate, per_layer_input(ctx, s, il), a->gate,
                    (size_t)n * (size_t)c->n_embd_per_layer);
        linear(b, l->ple_proj, NULL, a->gate, a->branch, n);
        b->ops->rms_norm(b, a->branch, vec(b, l->ple_post_norm), a->branch, n, c->n_embd,
                         c->norm_eps);
        b->ops->add(b, a->x, a->branch, all);
    }
    if (l->out_scale != 0.0f)
        b->ops->scale(b, a->x, l->out_scale, all);
}
