/* transformer.c: THE forward pass, written once against the backend op table. An architecture
 * changes it only through its descriptor (struct arch_desc, arch.c) and the tensors it has. */
#include <math.h>
#include <string.h>

#include "model/context.h"
#include "model/delta_net.h"
#include "model/dense_moe.h"
#include "model/encoder.h"
#include "model/layer_ops.h"
#include "model/mamba2.h"
#include "model/mla.h"
#include "model/moe.h"
#include "model/per_layer_embd.h"
#include "model/shared_expert.h"
#include "quant/dtype.h"

/* Layer il's head sizes, kv heads and cache (model.h). */
static const struct layer_shape *shape(const struct ox_context *ctx, int il) {
    return &ctx->model->cfg.layer[il];
}

/* The cached keys and values layer il attends over (its own, or those of the layer it shares),
 * rows in the memory of the stage that runs it, and their row sizes. */
static uint8_t *layer_k(const struct ox_context *ctx, int il) {
    return ctx->st->k[shape(ctx, il)->kv_layer];
}

static uint8_t *layer_v(const struct ox_context *ctx, int il) {
    return ctx->st->v[shape(ctx, il)->kv_layer];
}

static size_t k_row(const struct ox_context *ctx, int il) {
    return ctx->kv.k_row[shape(ctx, il)->kv_layer];
}

static size_t v_row(const struct ox_context *ctx, int il) {
    size_t row = ctx->kv.v_row[shape(ctx, il)->kv_layer];
    return row ? row : k_row(ctx, il); /* values read from the keys' rows (mla.c) */
}

/* Layer il's rotation, with the frequency factors in the stage's memory. */
static const struct rope_params *layer_rope(const struct ox_context *ctx, int il) {
    return ctx->model->cfg.is_swa[il] ? &ctx->st->rope_swa : &ctx->st->rope;
}

/* The architecture's norm of n rows of n_embd values (the weight and bias optional). */
static void norm(struct ox_context *ctx, const float *x, const struct weight *w,
                 const struct weight *bias, float *y, int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct backend *b = &ctx->st->be;
    if (c->arch->norm == NORM_LAYER) {
        b->ops->layer_norm(b, x, vec(b, w), vec(b, bias), y, n, c->n_embd, c->norm_eps);
    } else {
        b->ops->rms_norm(b, x, vec(b, w), y, n, c->n_embd, c->norm_eps);
        if (bias)
            b->ops->add_row(b, y, vec(b, bias), n, c->n_embd);
    }
}

/* Store this batch's keys and values into their cells (unless rope_store did, or the layer
 * reads another's cache), then, unless the backend's attention reads the cache itself, read
 * the layer's whole cache back as floats for attention. */
static void kv_store_and_load(struct ox_context *ctx, int il, int n, bool stored) {
    struct kv_cache *kv = &ctx->kv;
    struct activations *a = &ctx->st->act;
    struct backend *b = &ctx->st->be;
    const struct layer_shape *s = shape(ctx, il);
    int dk = s->n_head_kv * s->head_dim_k, dv = s->n_head_kv * s->head_dim_v;
    uint8_t *k_base = layer_k(ctx, il), *v_base = layer_v(ctx, il);
    if (!stored && s->kv_layer == il) {
        b->ops->cache_store(b, kv->type, a->k, n, dk, k_base, k_row(ctx, il), a->b_cell);
        if (kv->v_row[il]) /* else the values are in the keys' rows */
            b->ops->cache_store(b, kv->type, a->v, n, dv, v_base, v_row(ctx, il), a->b_cell);
    }
    if (b->ops->attention_reads_cache)
        return;
    b->ops->cache_load(b, kv->type, k_base, k_row(ctx, il), a->kf, kv->used_end, dk,
                       ctx->st->kv_pos);
    b->ops->cache_load(b, kv->type, v_base, v_row(ctx, il), a->vf, kv->used_end, dv,
                       ctx->st->kv_pos);
}

/* Whether a norm (its bias absent) may go into the matmuls that read its output: RMSNorm, and
 * nothing else reads the normed rows (a parallel block's FFN does). */
static bool norm_fusable(const struct ox_context *ctx, const struct weight *w,
                         const struct weight *bias) {
    const struct arch_desc *d = ctx->model->cfg.arch;
    return w && !bias && d->norm == NORM_RMS && !d->parallel && !d->no_pre_norm;
}

/* The weight a layer's norm applies: none on the GPU where the copies of the matrices after it
 * carry it (weights_gpu.c folds it in). */
static const struct weight *norm_weight(const struct ox_context *ctx, const struct weight *w,
                                        bool folded) {
    return folded && ctx->st->be.ops->device ? NULL : w;
}

/* Where q's projection goes: with an output gate (arch attn_gate) its rows hold each head's
 * query and gate, split by split_query_gate; else q itself. */
static float *q_projection(const struct ox_context *ctx) {
    return ctx->model->cfg.arch->attn_gate ? ctx->st->act.qg : ctx->st->act.q;
}

/* q, k and v (then any biases) by one backend op taking the input through the norm first
 * unless that is NULL; false when the backend does not fuse these. */
static bool project_qkv_fused(struct ox_context *ctx, const struct layer_weights *l, int il,
                              const float *in, const struct norm_in *norm, int n) {
    struct activations *a = &ctx->st->act;
    struct backend *b = &ctx->st->be;
    struct mat w[3];
    float *y[3] = {q_projection(ctx), a->k, a->v};
    if (l->wqkv || !l->wk || !l->wv || shape(ctx, il)->kv_layer != il || !b->ops->matmul_multi)
        return false; /* (a layer reading another's cache projects q alone) */
    w[0] = as_mat(b, l->wq), w[1] = as_mat(b, l->wk), w[2] = as_mat(b, l->wv);
    if (!b->ops->matmul_multi(b, 3, w, in, norm, y, n))
        return false;
    const struct weight *bias[3] = {l->bq, l->bk, l->bv};
    for (int i = 0; i < 3; i++)
        if (bias[i])
            b->ops->add_row(b, y[i], vec(b, bias[i]), n, (int)w[i].n_rows);
    return true;
}

/* q, k and v for n tokens from the layer input of layer il: one fused matmul split three
 * ways, or three; only q where the layer reads another's cache, and k twice over where it has
 * no values of their own (arch v_may_be_k). */
static void project_qkv(struct ox_context *ctx, const struct layer_weights *l, int il,
                        const float *in, int n) {
    const struct model_config *c = &ctx->model->cfg;
    const struct layer_shape *s = shape(ctx, il);
    struct activations *a = &ctx->st->act;
    struct backend *b = &ctx->st->be;
    size_t q = (size_t)c->n_head * s->head_dim_k, k = (size_t)s->n_head_kv * s->head_dim_k;
    size_t v = (size_t)s->n_head_kv * s->head_dim_v, all = q + k + v;
    if (project_qkv_fused(ctx, l, il, in, NULL, n))
        return;
    if (!l->wqkv) {
        linear(b, l->wq, l->bq, in, q_projection(ctx), n);
        if (s->kv_layer != il)
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
static void split_query_gate(struct ox_context *ctx, int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct activations *a = &ctx->st->act;
    struct backend *b = &ctx->st->be;
    size_t hd = (size_t)c->head_dim_k, rows = (size_t)n * (size_t)c->n_head;
    b->ops->copy_rows(b, a->q, hd, a->qg, 2 * hd, (int)rows, (int)hd);
    b->ops->copy_rows(b, a->qg + 2 * rows * hd, hd, a->qg + hd, 2 * hd, (int)rows, (int)hd);
}

/* The attention's output times sigmoid(gate), per value (Qwen 3.5's gated attention). */
static void gate_attention(struct ox_context *ctx, int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct activations *a = &ctx->st->act;
    size_t rows = (size_t)n * (size_t)c->n_head, hd = (size_t)c->head_dim_k;
    ctx->st->be.ops->glu(&ctx->st->be, GLU_SIGMOID, a->qg + 2 * rows * hd, a->attn, a->attn,
                         rows * hd);
}

/* The layer's input normed (into act.xn, unless the backend takes the norm into the
 * projection), then q, k and v. */
static void norm_and_project_qkv(struct ox_context *ctx, const struct layer_weights *l, int il,
                                 int n) {
    struct activations *a = &ctx->st->act;
    const struct weight *g = norm_weight(ctx, l->attn_norm, l->attn_norm_folded);
    struct norm_in fused = {vec(&ctx->st->be, g), ctx->model->cfg.norm_eps};
    if (norm_fusable(ctx, l->attn_norm, l->attn_norm_b) &&
        project_qkv_fused(ctx, l, il, a->x, &fused, n))
        return;
    const float *in = a->x;
    if (!ctx->model->cfg.arch->no_pre_norm && l->attn_norm) { /* ModernBERT's first has none */
        norm(ctx, a->x, g, l->attn_norm_b, a->xn, n);
        in = a->xn;
    }
    project_qkv(ctx, l, il, in, n);
}

/* q and k rotated and k, v stored into the cache by one backend op, where it has one and
 * nothing else comes between (attention temperature, q prescaling). */
static bool rope_and_store(struct ox_context *ctx, int il, int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct activations *a = &ctx->st->act;
    const struct layer_shape *s = shape(ctx, il);
    struct kv_cache *kv = &ctx->kv;
    struct backend *b = &ctx->st->be;
    if (!b->ops->rope_store || c->arch->position == POS_LEARNED || c->attn_temp_scale != 0.0f ||
        c->arch->q_prescale || c->no_rope[il] || s->kv_layer != il)
        return false;
    struct rope_store_args r = {
        .q = a->q,
        .k = a->k,
        .v = a->v,
        .pos = a->b_pos,
        .n = n,
        .n_head = c->n_head,
        .n_head_kv = s->n_head_kv,
        .hd_k = s->head_dim_k,
        .hd_v = s->head_dim_v,
        .rope = layer_rope(ctx, il),
        .cache_type = kv->type,
        .k_cache = layer_k(ctx, il),
        .v_cache = layer_v(ctx, il),
        .k_row = k_row(ctx, il),
        .v_row = v_row(ctx, il),
        .cells = a->b_cell,
    };
    return b->ops->rope_store(b, &r);
}

/* Per-token q scaling for long contexts (mistral3): 1 + scale * log(floor(pos / floor) + 1). */
static void temperature_scale_q(struct ox_context *ctx, int n) {
    const struct model_config *c = &ctx->model->cfg;
    size_t q = (size_t)c->n_head * c->head_dim_k;
    for (int t = 0; t < n; t++) {
        double s =
            log(floor((double)ctx->pos[t] / c->attn_temp_floor) + 1.0) * c->attn_temp_scale + 1.0;
        ctx->st->be.ops->scale(&ctx->st->be, ctx->st->act.q + t * q, (float)s, q);
    }
}

/* Whether a branch's last projection may add itself to the residual (x += W h) in one op: the
 * backend fuses that, and no bias, norm or scale comes between, nor a parallel block's sum. */
static bool adds_to_residual(const struct ox_context *ctx, const struct weight *bias,
                             const struct weight *post_norm) {
    const struct model_config *c = &ctx->model->cfg;
    return ctx->st->be.ops->matmul_add && !bias && !post_norm && c->residual_scale == 0.0f &&
           !c->arch->parallel;
}

/* x += W h when adds_to_residual allows it and the backend takes these shapes. */
static bool add_projection(struct ox_context *ctx, const struct weight *w,
                           const struct weight *bias, const struct weight *post_norm,
                           const float *h, int n) {
    struct backend *b = &ctx->st->be;
    struct mat m = as_mat(b, w);
    return adds_to_residual(ctx, bias, post_norm) &&
           b->ops->matmul_add(b, &m, h, ctx->st->act.x, n);
}

/* q, k and v of n tokens normed and rotated as the architecture has them; true when the keys
 * and values went into the cache on the way (rope_and_store). */
static bool project_and_rotate(struct ox_context *ctx, const struct layer_weights *l, int il,
                               int n) {
    const struct model_config *c = &ctx->model->cfg;
    const struct arch_desc *d = c->arch;
    const struct layer_shape *s = shape(ctx, il);
    struct activations *a = &ctx->st->act;
    struct backend *b = &ctx->st->be;
    const struct backend_ops *op = b->ops;
    norm_and_project_qkv(ctx, l, il, n);
    if (d->attn_gate)
        split_query_gate(ctx, n);
    int hd = s->head_dim_k, n_kv = s->n_head_kv;
    bool own_kv = s->kv_layer == il; /* else there are no new keys and values to make */
    if (d->qk_norm != QK_NORM_NONE && l->q_norm) { /* per head, or across all heads at once */
        bool head = d->qk_norm == QK_NORM_HEAD;
        op->rms_norm(b, a->q, vec(b, l->q_norm), a->q, head ? n * c->n_head : n,
                     head ? hd : c->n_head * hd, c->norm_eps);
        if (own_kv)
            op->rms_norm(b, a->k, vec(b, l->k_norm), a->k, head ? n * n_kv : n,
                         head ? hd : n_kv * hd, c->norm_eps);
    }
    if (d->v_norm && own_kv)
        op->rms_norm(b, a->v, NULL, a->v, n * n_kv, s->head_dim_v, c->norm_eps);
    bool stored = rope_and_store(ctx, il, n);
    if (!stored && d->position != POS_LEARNED && !c->no_rope[il]) {
        const struct rope_params *rp = layer_rope(ctx, il);
        op->rope(b, a->q, a->b_pos, n, c->n_head, hd, rp);
        if (own_kv)
            op->rope(b, a->k, a->b_pos, n, n_kv, hd, rp);
    }
    return stored;
}

/* Layer il's attention of n tokens over its cache (as floats, or the cache's rows where the
 * backend reads them), into act.attn. */
static void attend(struct ox_context *ctx, const struct layer_weights *l, int il, int n,
                   float scale) {
    const struct model_config *c = &ctx->model->cfg;
    const struct layer_shape *s = shape(ctx, il);
    struct activations *a = &ctx->st->act;
    struct backend *b = &ctx->st->be;
    struct attn_args args = {
        .q = a->q,
        .k = a->kf,
        .v = a->vf,
        .k_t = a->k_t,
        .y = a->attn,
        .n = n,
        .n_cells = ctx->kv.used_end,
        .n_cells_now = ctx->st->kv_used,
        .n_head = c->n_head,
        .n_head_kv = s->n_head_kv,
        .hd_k = s->head_dim_k,
        .hd_v = s->head_dim_v,
        .q_pos = a->b_pos,
        .q_seq = a->b_seq,
        .cell_pos = ctx->st->kv_pos,
        .cell_seq = ctx->st->kv_seq,
        .scale = scale,
        .softcap = c->attn_softcap,
        .sinks = vec(b, l->attn_sinks),
        .window = c->is_swa[il] ? c->swa_window : 0,
        .ahead = c->causal ? 0 : INT32_MAX,
        .f16_cache = ctx->kv.type == OX_DTYPE_F16,
        .one_per_seq = ctx->one_per_seq,
    };
    if (!c->causal && args.window > 0) /* a symmetric window: as far back as ahead */
        args.ahead = args.window / 2, args.window = args.window / 2 + 1;
    if (b->ops->attention_reads_cache) {
        args.k = args.v = NULL;
        args.k_cache = layer_k(ctx, il), args.v_cache = layer_v(ctx, il);
        args.cache_type = ctx->kv.type, args.k_row = k_row(ctx, il), args.v_row = v_row(ctx, il);
    }
    b->ops->attention(b, &args);
}

/* Attention of n tokens; leaves the normed input in act.xn (unless the norm went into the q, k,
 * v matmul: norm_fusable says nothing reads it then) and either adds the branch output to act.x
 * (returns true) or leaves it (after wo, its bias and any post-norm) in act.proj. */
static bool attention_block(struct ox_context *ctx, const struct layer_weights *l, int il, int n) {
    const struct model_config *c = &ctx->model->cfg;
    const struct arch_desc *d = c->arch;
    struct activations *a = &ctx->st->act;
    struct backend *b = &ctx->st->be;
    const struct backend_ops *op = b->ops;
    bool stored = false;
    if (d->mla) /* latent attention: q, k and v rotated in their own layout */
        mla_project_qkv(ctx, l, n);
    else
        stored = project_and_rotate(ctx, l, il, n);
    if (c->attn_temp_scale != 0.0f)
        temperature_scale_q(ctx, n);
    float scale = c->attn_scale;
    if (d->q_prescale) { /* ggml scales q itself here, so q rounds to f16 after scaling */
        op->scale(b, a->q, scale, (size_t)n * c->n_head * shape(ctx, il)->head_dim_k);
        scale = 1.0f;
    }
    kv_store_and_load(ctx, il, n, stored);
    attend(ctx, l, il, n, scale);
    if (d->attn_gate)
        gate_attention(ctx, n);
    const float *heads = d->mla ? mla_heads_out(ctx, l, n) : a->attn;
    if (add_projection(ctx, l->wo, l->bo, l->attn_post_norm, heads, n))
        return true;
    linear(b, l->wo, l->bo, heads, a->proj, n);
    if (l->attn_post_norm)
        op->rms_norm(b, a->proj, vec(b, l->attn_post_norm), a->proj, n, c->n_embd, c->norm_eps);
    if (c->residual_scale != 0.0f)
        op->scale(b, a->proj, c->residual_scale, (size_t)n * c->n_embd);
    return false;
}

/* Keep only the rows whose logits were asked for (out_row >= 0), in order, as llama.cpp does
 * before the last layer's FFN: nothing after that mixes tokens. Returns how many remain. */
static int keep_output_rows(struct ox_context *ctx, int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct activations *a = &ctx->st->act;
    struct backend *b = &ctx->st->be;
    size_t d = (size_t)c->n_embd, p = (size_t)c->n_embd_per_layer;
    float *rows[] = {a->x, a->xn, a->proj}, *ple = per_layer_input(ctx, ctx->st, c->n_layer - 1);
    int kept = 0;
    for (int t = 0; t < n; t++) {
        if (ctx->out_row[t] < 0)
            continue;
        for (size_t i = 0; kept != t && i < sizeof rows / sizeof rows[0]; i++)
            b->ops->copy_rows(b, rows[i] + kept * d, d, rows[i] + t * d, d, 1, (int)d);
        if (kept != t && ple) /* and the last layer's per-layer inputs */
            b->ops->copy_rows(b, ple + kept * p, p, ple + t * p, p, 1, (int)p);
        kept++;
    }
    return kept;
}

/* act.hidden = act(gate in) * (up in) by one backend op, which takes in through the norm first
 * unless that is NULL; false when the backend does not fuse these. */
static bool glu_fused(struct ox_context *ctx, const struct layer_weights *l, const float *in,
                      const struct norm_in *norm, int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct backend *b = &ctx->st->be;
    if ((c->arch->ffn != FFN_SWIGLU && c->arch->ffn != FFN_GEGLU) || !b->ops->matmul_glu ||
        l->ffn_gate_b || l->ffn_up_b || l->ffn_gate_inp)
        return false;
    struct mat gate = as_mat(b, l->ffn_gate), up = as_mat(b, l->ffn_up);
    return b->ops->matmul_glu(b, c->arch->ffn == FFN_SWIGLU ? GLU_SILU : GLU_GELU, &gate, &up, in,
                              norm, ctx->st->act.hidden, n);
}

/* The dense FFN of a batch wider than act.gate holds (its width over n_embd-sized slices:
 * context.c's ffn_slice), from in straight into the residual: per slice, gate and up of its
 * rows, the GLU, and x += the down projection's matching columns times that. The sums over
 * the width then add up slice by slice, in float, as a GEMM's would by chunks of k. False when
 * the batch fits whole. */
static bool ffn_sliced(struct ox_context *ctx, const struct layer_weights *l, const float *in,
                       int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct activations *a = &ctx->st->act;
    struct backend *b = &ctx->st->be;
    int64_t ff = l->ffn_down->ne[0], w = a->ffn_slice;
    if (!w || (size_t)n * (size_t)ff <= (size_t)ctx->params.n_batch * (size_t)w)
        return false;
    enum glu_kind kind = c->arch->ffn == FFN_SWIGLU ? GLU_SILU : GLU_GELU;
    struct mat gate = as_mat(b, l->ffn_gate), up = as_mat(b, l->ffn_up);
    struct mat down = as_mat(b, l->ffn_down);
    size_t col_bytes = (size_t)(w / ox_dtype_block_size(down.type)) * ox_dtype_type_size(down.type);
    gate.n_rows = up.n_rows = w, down.n_cols = w;
    for (int64_t c0 = 0; c0 < ff; c0 += w) {
        b->ops->matmul(b, &gate, in, a->gate, n);
        b->ops->matmul(b, &up, in, a->up, n);
        b->ops->glu(b, kind, a->gate, a->up, a->hidden, (size_t)n * (size_t)w);
        if (!b->ops->matmul_add || !b->ops->matmul_add(b, &down, a->hidden, a->x, n)) {
            b->ops->matmul(b, &down, a->hidden, a->branch, n);
            b->ops->add(b, a->x, a->branch, (size_t)n * (size_t)c->n_embd);
        }
        gate.data = (const uint8_t *)gate.data + (size_t)w * gate.row_bytes;
        up.data = (const uint8_t *)up.data + (size_t)w * up.row_bytes;
        down.data = (const uint8_t *)down.data + col_bytes;
    }
    return true;
}

/* The first half of the dense FFN of the architecture's kind, from in to act.hidden. */
static void dense_ffn_hidden(struct ox_context *ctx, const struct layer_weights *l, const float *in,
                             int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct activations *a = &ctx->st->act;
    struct backend *b = &ctx->st->be;
    size_t ff = (size_t)l->ffn_down->ne[0], all = (size_t)n * ff; /* the layer's width */
    enum glu_kind kind = c->arch->ffn == FFN_SWIGLU       ? GLU_SILU
                         : c->arch->ffn == FFN_SWIGLU_OAI ? GLU_SWIGLU_OAI
                                                          : GLU_GELU;
    switch (c->arch->ffn) {
    case FFN_SWIGLU:
    case FFN_GEGLU:
    case FFN_SWIGLU_OAI:
        if (glu_fused(ctx, l, in, NULL, n))
            break;
        linear(b, l->ffn_gate, l->ffn_gate_b, in, a->gate, n);
        linear(b, l->ffn_up, l->ffn_up_b, in, a->up, n);
        b->ops->glu(b, kind, a->gate, a->up, a->hidden, all);
        break;
    case FFN_SWIGLU_FUSED: /* each row of up holds [gate | up] */
    case FFN_GEGLU_FUSED:
        linear(b, l->ffn_up, l->ffn_up_b, in, a->up, n);
        for (int t = 0; t < n; t++)
            b->ops->glu(b, c->arch->ffn == FFN_GEGLU_FUSED ? GLU_GELU : GLU_SILU,
                        a->up + 2 * ff * t, a->up + 2 * ff * t + ff, a->hidden + ff * t, ff);
        break;
    case FFN_GELU:
        linear(b, l->ffn_up, l->ffn_up_b, in, a->up, n);
        b->ops->gelu(b, a->up, a->hidden, all);
        break;
    }
}

/* The FFN branch and the residual adds left: x + attn (unless attn_added) + ffn. */
static void ffn_block(struct ox_context *ctx, const struct layer_weights *l, int n,
                      bool attn_added) {
    const struct model_config *c = &ctx->model->cfg;
    const struct arch_desc *d = c->arch;
    struct activations *a = &ctx->st->act;
    struct backend *b = &ctx->st->be;
    size_t all = (size_t)n * c->n_embd;
    const float *in = a->xn; /* parallel blocks reuse the attention norm */
    bool hidden = false;     /* act.hidden made with the norm inside */
    if (!d->parallel) {
        if (!attn_added)
            b->ops->add(b, a->x, a->proj, all);
        if (l->attn_out_norm) /* an encoder's x = norm(x + attn) */
            encoder_norm_residual(ctx, l->attn_out_norm, l->attn_out_norm_b, n);
        in = a->x;
        const struct weight *g = norm_weight(ctx, l->ffn_norm, l->ffn_norm_folded);
        struct norm_in fused = {vec(b, g), c->norm_eps};
        hidden =
            norm_fusable(ctx, l->ffn_norm, l->ffn_norm_b) && glu_fused(ctx, l, a->x, &fused, n);
        if (!hidden && !d->no_pre_norm) {
            norm(ctx, a->x, g, l->ffn_norm_b, a->xn, n);
            in = a->xn;
        }
    }
    if (l->ffn_pre_norm_2) { /* a dense FFN beside the experts */
        dense_moe_ffn(ctx, l, in, n);
    } else if (l->ffn_gate_inp) {
        moe_block(ctx, l, in, NULL, a->branch, n);
        if (l->ffn_up_shexp)
            shared_expert_add(ctx, l, in, a->branch, n);
    } else {
        if (!hidden && ffn_sliced(ctx, l, in, n))
            return;
        if (!hidden)
            dense_ffn_hidden(ctx, l, in, n);
        if (add_projection(ctx, l->ffn_down, l->ffn_down_b, l->ffn_post_norm, a->hidden, n))
            return;
        linear(b, l->ffn_down, l->ffn_down_b, a->hidden, a->branch, n);
    }
    if (l->ffn_post_norm)
        b->ops->rms_norm(b, a->branch, vec(b, l->ffn_post_norm), a->branch, n, c->n_embd,
                         c->norm_eps);
    if (c->residual_scale != 0.0f)
        b->ops->scale(b, a->branch, c->residual_scale, all);
    if (d->parallel) /* (attn + ffn) + x, in llama.cpp's order */
        b->ops->add(b, a->proj, a->branch, all), b->ops->add(b, a->x, a->proj, all);
    else
        b->ops->add(b, a->x, a->branch, all);
}

/* Token (and learned position) embeddings of n tokens into act.x, with the architecture's
 * scaling. */
static void embed(struct ox_context *ctx, int n) {
    const struct ox_model *m = ctx->model;
    const struct model_config *c = &m->cfg;
    struct backend *b = &ctx->st->be;
    struct activations *a = &ctx->st->act;
    size_t all = (size_t)n * c->n_embd;
    struct mat emb = as_mat(b, m->tok_embd);
    b->ops->get_rows(b, &emb, a->b_tok, a->x, n);
    if (c->arch->embd_scale_sqrt)
        b->ops->scale(b, a->x, sqrtf((float)c->n_embd), all);
    if (c->embd_scale != 0.0f)
        b->ops->scale(b, a->x, c->embd_scale, all);
    if (m->pos_embd) {
        struct mat pe = as_mat(b, m->pos_embd);
        b->ops->get_rows(b, &pe, a->b_pos, a->proj, n);
        b->ops->add(b, a->x, a->proj, all);
    }
    if (c->arch->embd_norm)
        encoder_input(ctx, n);
    per_layer_inputs(ctx, n);
}

/* Final norm (into the same rows of act.xn, where the embeddings are read) for rows
 * [r0, r0 + rows) of act.x, then, unless only the embeddings are wanted, the output projection
 * and logit shaping into the first rows of b_logits. */
static void output_block(struct ox_context *ctx, int r0, int rows) {
    const struct ox_model *m = ctx->model;
    const struct model_config *c = &m->cfg;
    struct backend *b = &ctx->st->be;
    size_t all = (size_t)rows * c->n_vocab, at = (size_t)r0 * (size_t)c->n_embd;
    if (m->output_norm)
        norm(ctx, ctx->st->act.x + at, m->output_norm, m->output_norm_b, ctx->st->act.xn + at,
             rows);
    else /* an encoder's last layer normed its output already */
        b->ops->copy_rows(b, ctx->st->act.xn + at, (size_t)c->n_embd, ctx->st->act.x + at,
                          (size_t)c->n_embd, rows, c->n_embd);
    if (ctx->embd_only || !m->output)
        return;
    linear(b, m->output, m->output_b, ctx->st->act.xn + at, ctx->b_logits, rows);
    if (c->final_softcap != 0.0f)
        b->ops->softcap(b, ctx->b_logits, c->final_softcap, all);
    if (c->logit_scale != 0.0f)
        b->ops->scale(
            b, ctx->b_logits,
            c->arch->logit_scale == LOGIT_SCALE_DIV ? 1.0f / c->logit_scale : c->logit_scale, all);
}

/* Output rows [r0, r0 + rows) to the host: with params.embeddings their normed hidden states
 * from act.xn, and (unless embd_only) their logits from b_logits. The status of every op so
 * far. */
static enum ox_status output_rows(struct ox_context *ctx, int r0, int rows) {
    struct backend *b = &ctx->st->be;
    size_t v = (size_t)ctx->model->cfg.n_vocab, e = (size_t)ctx->model->cfg.n_embd;
    if (ctx->embd) {
        enum ox_status st =
            b->ops->download(b, ctx->embd + (size_t)r0 * e, ctx->st->act.xn + (size_t)r0 * e,
                             (size_t)rows * e * sizeof(float));
        if (st != OX_OK || ctx->embd_only || !ctx->logits)
            return st;
    }
    return b->ops->download(b, ctx->logits + (size_t)r0 * v, ctx->b_logits,
                            (size_t)rows * v * sizeof(float));
}

/* The batch's tokens, positions, sequences and cells, and the cache's cell positions and
 * sequence masks, into the stage's copies (the same arrays on the CPU: nothing moves). */
static void upload_batch(struct ox_context *ctx, const ox_token *tokens, int n) {
    struct stage *s = ctx->st;
    struct backend *b = &s->be;
    struct activations *a = &s->act;
    struct kv_cache *kv = &ctx->kv;
    size_t ints = (size_t)n * sizeof(int32_t), cells = (size_t)kv->used_end;
    b->ops->upload(b, a->b_tok, tokens, ints);
    b->ops->upload(b, a->b_pos, ctx->pos, ints);
    b->ops->upload(b, a->b_seq, ctx->seq, ints);
    b->ops->upload(b, a->b_cell, ctx->cell, ints);
    b->ops->upload(b, s->kv_pos, kv->pos, cells * sizeof *kv->pos);
    b->ops->upload(b, s->kv_seq, kv->seq, cells * SEQ_WORDS * sizeof *kv->seq);
    b->ops->upload(b, s->kv_used, &kv->used_end, sizeof kv->used_end);
}

/* Whether a decode step of n tokens may be recorded as a graph by the last stage's backend:
 * up to its graph_max_tokens tokens, each with logits (a step of several sequences' next
 * tokens; prompts are few launches per token anyway, and ox_embed's steps skip the output
 * matrix a recording holds), and no op that reads the host mid-way (MoE routing there: single
 * tokens, unless the last one went without) or depends on the position on the host (attention
 * temperature). */
static bool graphable(const struct ox_context *ctx, const struct backend *b, int n) {
    const struct model_config *c = &ctx->model->cfg;
    bool moe = false; /* DeepSeek's first layers are dense */
    for (int32_t il = 0; il < c->n_layer; il++)
        moe |= ctx->model->layers[il].ffn_gate_inp != NULL;
    if (n < 1 || n > b->ops->graph_max_tokens || !b->ops->graph_begin || ctx->embd_only ||
        !ctx->logits || (moe && (n > 1 || !ctx->moe_graphable)) || c->attn_temp_scale != 0.0f)
        return false;
    for (int t = 0; t < n; t++)
        if (ctx->out_row[t] < 0)
            return false;
    return true;
}

/* A recurrent layer's branch (Mamba-2 or gated delta-net) into act.proj, with the residual
 * scale the attention's branch takes too. */
static void recurrent_block(struct ox_context *ctx, const struct layer_weights *l, int il, int n) {
    const struct model_config *c = &ctx->model->cfg;
    if (c->arch->mamba2)
        mamba2_layer(ctx, l, il, n);
    else
        delta_net_layer(ctx, l, il, n);
    if (c->residual_scale != 0.0f)
        ctx->st->be.ops->scale(&ctx->st->be, ctx->st->act.proj, c->residual_scale,
                               (size_t)n * (size_t)c->n_embd);
}

/* The stage's layers over n tokens; returns the rows left (keep_output_rows drops those whose
 * logits nobody asked for before the model's last FFN). */
static int run_layers(struct ox_context *ctx, int n) {
    const struct ox_model *m = ctx->model;
    for (int il = ctx->st->layer_begin; il < ctx->st->layer_end; il++) {
        bool attn_added = false; /* a recurrent layer leaves its branch in act.proj */
        if (m->cfg.is_recurrent[il])
            recurrent_block(ctx, &m->layers[il], il, n);
        else
            attn_added = attention_block(ctx, &m->layers[il], il, n);
        if (il == m->cfg.n_layer - 1 && (n = keep_output_rows(ctx, n)) == 0)
            return 0;
        ffn_block(ctx, &m->layers[il], n, attn_added);
        if (m->layers[il].layer_out_norm) /* an encoder's x = norm(x + ffn) */
            encoder_norm_residual(ctx, m->layers[il].layer_out_norm, m->layers[il].layer_out_norm_b,
                                  n);
        per_layer_embd_add(ctx, &m->layers[il], il, n);
    }
    return n;
}

/* The stages before the last run on the host: the embeddings and the first layers, whose
 * hidden state the last stage then takes. */
static void run_host_stages(struct ox_context *ctx, const ox_token *tokens, int n) {
    struct stage *last = &ctx->stages[ctx->n_stages - 1];
    for (int32_t i = 0; i < ctx->n_stages - 1; i++) {
        ctx->st = &ctx->stages[i];
        upload_batch(ctx, tokens, n);
        if (i == 0)
            embed(ctx, n);
        run_layers(ctx, n);
    }
    const struct model_config *c = &ctx->model->cfg;
    size_t bytes = (size_t)n * (size_t)c->n_embd * sizeof(float);
    last->be.ops->upload(&last->be, last->act.x, ctx->st->act.x, bytes);
    size_t ple_bytes = (size_t)n * (size_t)c->n_embd_per_layer * sizeof(float);
    for (int il = last->layer_begin; last->act.ple && il < last->layer_end; il++)
        last->be.ops->upload(&last->be, per_layer_input(ctx, last, il),
                             per_layer_input(ctx, ctx->st, il), ple_bytes); /* made here */
}

static enum ox_status forward(struct ox_context *ctx, const ox_token *tokens, int n) {
    struct stage *last = &ctx->stages[ctx->n_stages - 1];
    struct backend *b = &last->be;
    bool graph = graphable(ctx, b, n);
    int n_in = n;
    ctx->moe_on_host = false;
    if (ctx->n_stages > 1)
        run_host_stages(ctx, tokens, n);
    ctx->st = last;
    upload_batch(ctx, tokens, n);
    /* a recording is exact for one batch size; the cells in use it reads from kv_used */
    if (graph && b->ops->graph_begin(b, (uint64_t)n))
        return output_rows(ctx, 0, n);
    if (ctx->n_stages == 1)
        embed(ctx, n);
    if ((n = run_layers(ctx, n)) == 0)
        return b->ops->download(b, NULL, NULL, 0); /* the batch's status */
    if (n_in == 1 && ctx->out_row[0] >= 0)         /* a step graphable() would take, but for MoE */
        ctx->moe_graphable = !ctx->moe_on_host;
    if (n <= ctx->logit_rows) {
        output_block(ctx, 0, n);
        if (graph)
            b->ops->graph_end(b);
        return output_rows(ctx, 0, n);
    }
    for (int r0 = 0; r0 < n; r0 += ctx->logit_rows) { /* b_logits holds logit_rows at a time */
        int rows = n - r0 < ctx->logit_rows ? n - r0 : ctx->logit_rows;
        output_block(ctx, r0, rows);
        OX_TRY(output_rows(ctx, r0, rows));
    }
    return OX_OK;
}

/* Whether no two tokens of the batch share a sequence (a decode step of several sequences):
 * their attentions then have no cells in common, which the backend's kernel choice uses. */
static bool one_token_per_seq(const struct ox_context *ctx, int n) {
    uint64_t seen[SEQ_WORDS] = {0};
    for (int t = 0; t < n; t++) {
        uint64_t bit = 1ull << (ctx->seq[t] % 64);
        if (seen[ctx->seq[t] / 64] & bit)
            return false;
        seen[ctx->seq[t] / 64] |= bit;
    }
    return true;
}

enum ox_status transformer_forward(struct ox_context *ctx, const ox_token *tokens, int n) {
    ctx->one_per_seq = one_token_per_seq(ctx, n);
    ctx->batch_err = OX_OK;
    enum ox_status st = forward(ctx, tokens, n);
    return st != OX_OK ? st : ctx->batch_err; /* a download midway failed, which it cleared */
}
