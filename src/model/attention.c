/* attention.c: a layer's attention block: the input normed, q, k and v projected (fused or
 * separate), normed and rotated as the architecture has them, the keys and values stored in
 * the cache, the attention over it, any output gate, and wo back into the residual. */
#include "model/attention.h"

#include <math.h>

#include "backend/compose.h"
#include "model/block.h"
#include "model/layer_ops.h"
#include "model/mla.h"
#include "quant/dtype.h"

/* Layer il's head sizes, kv heads and cache (model.h). */
static const struct layer_shape *shape(const struct ox_context *ctx, int il) {
    return &ctx->model->cfg.layer[il];
}

/* The cached keys and values layer il attends over (its own, or those of the layer it shares),
 * rows in the memory of the stage that runs it, and their row sizes. */
static uint8_t *layer_k(const struct ox_context *ctx, const struct stage *s, int il) {
    return s->k[shape(ctx, il)->kv_layer];
}

static uint8_t *layer_v(const struct ox_context *ctx, const struct stage *s, int il) {
    return s->v[shape(ctx, il)->kv_layer];
}

static size_t k_row(const struct ox_context *ctx, int il) {
    return ctx->kv.k_row[shape(ctx, il)->kv_layer];
}

static size_t v_row(const struct ox_context *ctx, int il) {
    return kv_v_row(&ctx->kv, shape(ctx, il)->kv_layer); /* maybe the keys' rows (mla.c) */
}

/* Layer il's rotation, with the frequency factors in the stage's memory. */
static const struct rope_params *layer_rope(const struct ox_context *ctx, const struct stage *s,
                                            int il) {
    return ctx->model->cfg.is_swa[il] ? &s->rope_swa : &s->rope;
}

/* Store this batch's keys and values into their cells (unless the layer reads another's
 * cache, or rope_and_store did). */
static void kv_store(struct ox_context *ctx, struct stage *s, int il, int n) {
    struct kv_cache *kv = &ctx->kv;
    struct activations *a = &s->act;
    struct backend *b = &s->be;
    const struct layer_shape *sh = shape(ctx, il);
    int dk = sh->n_head_kv * sh->head_dim_k, dv = sh->n_head_kv * sh->head_dim_v;
    if (sh->kv_layer != il)
        return;
    b->ops->cache_store(b, kv->type, a->k, n, dk, layer_k(ctx, s, il), k_row(ctx, il), a->b_cell);
    if (kv->v_row[il]) /* else the values are in the keys' rows */
        b->ops->cache_store(b, kv->type, a->v, n, dv, layer_v(ctx, s, il), v_row(ctx, il),
                            a->b_cell);
}

/* Where q's projection goes: with an output gate (arch attn_gate) its rows hold each head's
 * query and gate, split by split_query_gate; else q itself. */
static float *q_projection(const struct ox_context *ctx, const struct stage *s) {
    return ctx->model->cfg.arch->attn_gate ? s->act.qg : s->act.q;
}

/* Whether q, k and v come from three matrices of one width into the cache of the layer's own
 * (a layer reading another's cache projects q alone): one op then (compose_matmul_multi). */
static bool separate_qkv(const struct ox_context *ctx, const struct layer_weights *l, int il) {
    return !l->wqkv && l->wk && l->wv && shape(ctx, il)->kv_layer == il;
}

/* q, k and v (then any biases) by compose_matmul_multi, the input taken through the norm
 * first unless that is NULL. */
static void project_qkv_multi(struct ox_context *ctx, struct stage *s,
                              const struct layer_weights *l, const float *in,
                              const struct norm_in *norm, int n) {
    struct activations *a = &s->act;
    struct backend *b = &s->be;
    struct mat w[3] = {as_mat(b, l->wq), as_mat(b, l->wk), as_mat(b, l->wv)};
    float *y[3] = {q_projection(ctx, s), a->k, a->v};
    compose_matmul_multi(b, 3, w, in, norm, y, n, a->xn);
    const struct weight *bias[3] = {l->bq, l->bk, l->bv};
    for (int i = 0; i < 3; i++)
        if (bias[i])
            b->ops->add_row(b, y[i], vec(b, bias[i]), n, (int)w[i].n_rows);
}

/* q, k and v for n tokens from the layer input of layer il, where separate_qkv does not take
 * them: one fused matrix split three ways, or q alone where the layer reads another's cache,
 * and k twice over where it has no values of their own (arch v_may_be_k). */
static void project_qkv(struct ox_context *ctx, struct stage *s, const struct layer_weights *l,
                        int il, const float *in, int n) {
    const struct model_config *c = &ctx->model->cfg;
    const struct layer_shape *sh = shape(ctx, il);
    struct activations *a = &s->act;
    struct backend *b = &s->be;
    size_t q = (size_t)c->n_head * sh->head_dim_k, k = (size_t)sh->n_head_kv * sh->head_dim_k;
    size_t v = (size_t)sh->n_head_kv * sh->head_dim_v, all = q + k + v;
    if (!l->wqkv) {
        linear(b, l->wq, l->bq, in, q_projection(ctx, s), n);
        if (sh->kv_layer != il)
            return;
        linear(b, l->wk, l->bk, in, a->k, n);
        if (l->wv)
            linear(b, l->wv, l->bv, in, a->v, n);
        else
            b->ops->copy_rows(b, a->v, v, a->k, k, n, (int)k);
        return;
    }
    linear(b, l->wqkv, l->bqkv, in, a->qkv, n);
    b->ops->copy_rows(b, a->q, q, a->qkv, all, n, (int)q);
    b->ops->copy_rows(b, a->k, k, a->qkv + q, all, n, (int)k);
    b->ops->copy_rows(b, a->v, v, a->qkv + q + k, all, n, (int)v);
}

/* [query | gate] per head, as the projection leaves them in act.qg: the queries into act.q, the
 * gates packed after the projection's rows (act.qg + n * 2 * q), for gate_attention. */
static void split_query_gate(struct ox_context *ctx, struct stage *s, int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct activations *a = &s->act;
    struct backend *b = &s->be;
    size_t hd = (size_t)c->head_dim_k, rows = (size_t)n * (size_t)c->n_head;
    b->ops->copy_rows(b, a->q, hd, a->qg, 2 * hd, (int)rows, (int)hd);
    b->ops->copy_rows(b, a->qg + 2 * rows * hd, hd, a->qg + hd, 2 * hd, (int)rows, (int)hd);
}

/* The attention's output times sigmoid(gate), per value (Qwen 3.5's gated attention). */
static void gate_attention(struct ox_context *ctx, struct stage *s, int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct activations *a = &s->act;
    size_t rows = (size_t)n * (size_t)c->n_head, hd = (size_t)c->head_dim_k;
    s->be.ops->glu(&s->be, GLU_SIGMOID, a->qg + 2 * rows * hd, a->attn, a->attn, rows * hd);
}

/* The layer's input normed (into act.xn, unless the projection takes the norm in), then q, k
 * and v. */
static void norm_and_project_qkv(struct ox_context *ctx, struct stage *s,
                                 const struct layer_weights *l, int il, int n) {
    struct activations *a = &s->act;
    const struct weight *g = block_norm_weight(l->attn_norm, l->attn_norm_folded);
    struct norm_in fused = {vec(&s->be, g), ctx->model->cfg.norm_eps};
    bool multi = separate_qkv(ctx, l, il);
    if (multi && block_norm_fusable(ctx, l->attn_norm, l->attn_norm_b)) {
        project_qkv_multi(ctx, s, l, a->x, &fused, n);
        return;
    }
    const float *in = a->x;
    if (!ctx->model->cfg.arch->no_pre_norm && l->attn_norm) { /* ModernBERT's first has none */
        block_norm(ctx, s, a->x, g, l->attn_norm_b, a->xn, n);
        in = a->xn;
    }
    if (multi)
        project_qkv_multi(ctx, s, l, in, NULL, n);
    else
        project_qkv(ctx, s, l, il, in, n);
}

/* q and k rotated and k, v stored into the cache in one call (compose_rope_store), where
 * nothing comes between (attention temperature, q prescaling) and the layer has rotary keys of
 * its own; false, with nothing done, otherwise. */
static bool rope_and_store(struct ox_context *ctx, struct stage *s, int il, int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct activations *a = &s->act;
    const struct layer_shape *sh = shape(ctx, il);
    struct kv_cache *kv = &ctx->kv;
    if (c->arch->position == POS_LEARNED || c->attn_temp_scale != 0.0f || c->arch->q_prescale ||
        c->no_rope[il] || sh->kv_layer != il)
        return false;
    struct rope_store_args r = {
        .q = a->q,
        .k = a->k,
        .v = a->v,
        .pos = a->b_pos,
        .n = n,
        .n_head = c->n_head,
        .n_head_kv = sh->n_head_kv,
        .hd_k = sh->head_dim_k,
        .hd_v = sh->head_dim_v,
        .rope = layer_rope(ctx, s, il),
        .cache_type = kv->type,
        .k_cache = layer_k(ctx, s, il),
        .v_cache = layer_v(ctx, s, il),
        .k_row = k_row(ctx, il),
        .v_row = v_row(ctx, il),
        .cells = a->b_cell,
    };
    compose_rope_store(&s->be, &r);
    return true;
}

/* Per-token q scaling for long contexts (mistral3): 1 + scale * log(floor(pos / floor) + 1). */
static void temperature_scale_q(struct ox_context *ctx, struct stage *s, const int32_t *pos,
                                int n) {
    const struct model_config *c = &ctx->model->cfg;
    size_t q = (size_t)c->n_head * c->head_dim_k;
    for (int t = 0; t < n; t++) {
        double temp =
            log(floor((double)pos[t] / c->attn_temp_floor) + 1.0) * c->attn_temp_scale + 1.0;
        s->be.ops->scale(&s->be, s->act.q + t * q, (float)temp, q);
    }
}

/* q, k and v of n tokens normed and rotated as the architecture has them; true when the keys
 * and values went into the cache on the way (rope_and_store). */
static bool project_and_rotate(struct ox_context *ctx, struct stage *s,
                               const struct layer_weights *l, int il, int n) {
    const struct model_config *c = &ctx->model->cfg;
    const struct arch_desc *d = c->arch;
    const struct layer_shape *sh = shape(ctx, il);
    struct activations *a = &s->act;
    struct backend *b = &s->be;
    const struct backend_ops *op = b->ops;
    norm_and_project_qkv(ctx, s, l, il, n);
    if (d->attn_gate)
        split_query_gate(ctx, s, n);
    int hd = sh->head_dim_k, n_kv = sh->n_head_kv;
    bool own_kv = sh->kv_layer == il; /* else there are no new keys and values to make */
    if (d->qk_norm == QK_NORM_WHOLE && l->q_norm && ctx->group) { /* all ranks' heads */
        const struct model_config *w = &ctx->model->whole->cfg;
        block_norm_ranks(ctx, s, a->q, l->q_norm, n, c->n_head * hd, c->shard_head0 * hd,
                         w->n_head * hd);
        if (own_kv)
            block_norm_ranks(ctx, s, a->k, l->k_norm, n, n_kv * hd, sh->shard_kv0 * hd,
                             w->layer[il].n_head_kv * hd);
    } else if (d->qk_norm != QK_NORM_NONE && l->q_norm) { /* per head, or all heads at once */
        bool head = d->qk_norm == QK_NORM_HEAD;
        op->rms_norm(b, a->q, vec(b, l->q_norm), a->q, head ? n * c->n_head : n,
                     head ? hd : c->n_head * hd, c->norm_eps);
        if (own_kv)
            op->rms_norm(b, a->k, vec(b, l->k_norm), a->k, head ? n * n_kv : n,
                         head ? hd : n_kv * hd, c->norm_eps);
    }
    if (d->v_norm && own_kv)
        op->rms_norm(b, a->v, NULL, a->v, n * n_kv, sh->head_dim_v, c->norm_eps);
    bool stored = rope_and_store(ctx, s, il, n);
    if (!stored && d->position != POS_LEARNED && !c->no_rope[il]) {
        const struct rope_params *rp = layer_rope(ctx, s, il);
        op->rope(b, a->q, a->b_pos, n, c->n_head, hd, rp);
        if (own_kv)
            op->rope(b, a->k, a->b_pos, n, n_kv, hd, rp);
    }
    return stored;
}

/* Layer il's attention of n tokens over its cache, into act.attn. */
static void attend(struct ox_context *ctx, struct stage *s, const struct layer_weights *l, int il,
                   int n, bool one_per_seq, float scale) {
    const struct model_config *c = &ctx->model->cfg;
    const struct layer_shape *sh = shape(ctx, il);
    struct activations *a = &s->act;
    struct backend *b = &s->be;
    struct attn_args args = {
        .q = a->q,
        .k_t = a->k_t,
        .y = a->attn,
        .n = n,
        .n_cells = ctx->kv.used_end,
        .n_cells_now = s->kv_used,
        .seq_span = s->kv_span,
        .n_head = c->n_head,
        .n_head_kv = sh->n_head_kv,
        .hd_k = sh->head_dim_k,
        .hd_v = sh->head_dim_v,
        .q_pos = a->b_pos,
        .q_seq = a->b_seq,
        .cell_pos = s->kv_pos,
        .cell_seq = s->kv_seq,
        .scale = scale,
        .softcap = c->attn_softcap,
        .sinks = vec(b, l->attn_sinks),
        .window = c->is_swa[il] ? c->swa_window : 0,
        .ahead = c->causal ? 0 : INT32_MAX,
        .f16_cache = ctx->kv.type == OX_DTYPE_F16,
        .one_per_seq = one_per_seq,
    };
    if (!c->causal && args.window > 0) /* a symmetric window: as far back as ahead */
        args.ahead = args.window / 2, args.window = args.window / 2 + 1;
    struct cache_layer cache = {.type = ctx->kv.type,
                                .k = layer_k(ctx, s, il),
                                .v = layer_v(ctx, s, il),
                                .k_row = k_row(ctx, il),
                                .v_row = v_row(ctx, il),
                                .dk = sh->n_head_kv * sh->head_dim_k,
                                .dv = sh->n_head_kv * sh->head_dim_v,
                                .kf = a->kf,
                                .vf = a->vf,
                                .cell_pos = s->kv_pos};
    compose_attention(b, &args, &cache);
}

bool attention_block(struct ox_context *ctx, struct stage *s, const struct batch_view *batch,
                     const struct layer_weights *l, int il) {
    int n = batch->n;
    const struct model_config *c = &ctx->model->cfg;
    const struct arch_desc *d = c->arch;
    struct activations *a = &s->act;
    struct backend *b = &s->be;
    const struct backend_ops *op = b->ops;
    bool stored = false;
    if (d->mla) /* latent attention: q, k and v rotated in their own layout */
        mla_project_qkv(ctx, s, l, n);
    else
        stored = project_and_rotate(ctx, s, l, il, n);
    if (c->attn_temp_scale != 0.0f)
        temperature_scale_q(ctx, s, batch->pos, n);
    float scale = c->attn_scale;
    if (d->q_prescale) { /* ggml scales q itself here, so q rounds to f16 after scaling */
        op->scale(b, a->q, scale, (size_t)n * c->n_head * shape(ctx, il)->head_dim_k);
        scale = 1.0f;
    }
    if (!stored)
        kv_store(ctx, s, il, n);
    attend(ctx, s, l, il, n, batch->one_per_seq, scale);
    if (d->attn_gate)
        gate_attention(ctx, s, n);
    const float *heads = d->mla ? mla_heads_out(ctx, s, l, n) : a->attn;
    if (block_add_projection(ctx, s, l->wo, l->bo, l->attn_post_norm, heads, n, a->proj))
        return true;
    linear(b, l->wo, l->bo, heads, a->proj, n);
    if (block_reduce_onto(ctx, s, l->attn_post_norm, a->proj, n))
        return true; /* a split model's heads' shares, added to x as they are summed */
    block_reduce(ctx, s, a->proj, n); /* a split model's heads' shares */
    if (l->attn_post_norm)
        op->rms_norm(b, a->proj, vec(b, l->attn_post_norm), a->proj, n, c->n_embd, c->norm_eps);
    if (c->residual_scale != 0.0f)
        op->scale(b, a->proj, c->residual_scale, (size_t)n * c->n_embd);
    return false;
}
