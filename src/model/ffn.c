/* ffn.c: a layer's FFN block: the residual taking the attention's branch, the FFN's norm, then a
 * dense FFN of the architecture's kind (whole, or by slices for batches wider than its
 * buffers), a MoE (with a shared expert, or a dense FFN beside it), and the residual add. */
#include "model/ffn.h"

#include "backend/compose.h"
#include "model/block.h"
#include "model/dense_moe.h"
#include "model/encoder.h"
#include "model/layer_ops.h"
#include "model/moe.h"
#include "model/shared_expert.h"
#include "quant/dtype.h"

/* A GLU FFN whose gate and up are plain matrices: one compose_matmul_glu. */
static bool plain_glu(const struct ox_context *ctx, const struct layer_weights *l) {
    enum arch_ffn k = ctx->model->cfg.arch->ffn;
    return (k == FFN_SWIGLU || k == FFN_GEGLU) && l->ffn_gate && !l->ffn_gate_b && !l->ffn_up_b &&
           !l->ffn_gate_inp;
}

/* Whether the batch is wider than act.gate holds at the FFN's full width (context.c's
 * ffn_slice): it then goes by slices (ffn_sliced). */
static bool too_wide(const struct ox_context *ctx, const struct stage *s,
                     const struct layer_weights *l, int n) {
    int64_t ff = l->ffn_down->ne[0], w = s->act.ffn_slice;
    return w && (size_t)n * (size_t)ff > (size_t)ctx->params.n_batch * (size_t)w;
}

/* The widest slice of the FFN that act.gate holds for n rows: act.ffn_slice times the largest
 * k that divides the FFN's slices with n * k <= n_batch (2 slices of the 1B for 256 tokens
 * rather than 4, each matmul then twice as wide and half as many launched). */
static int64_t slice_width(const struct ox_context *ctx, const struct stage *s, int64_t ff, int n) {
    int64_t w = s->act.ffn_slice, parts = ff / w, k = (int64_t)ctx->params.n_batch / n;
    while (k > 1 && parts % k != 0)
        k--;
    return w * (k > 1 ? k : 1);
}

/* The dense FFN of a batch too_wide for act.gate (its width over n_embd-sized slices), from in
 * straight into the residual: per slice, gate and up of its rows, the GLU, and x += the down
 * projection's matching columns times that. The sums over the width then add up slice by
 * slice, in float, as a GEMM's would by chunks of k. A rank of a split model adds its slices
 * into proj (free once the attention's output is in x) and x takes the ranks' sum of those. */
static void ffn_sliced(struct ox_context *ctx, struct stage *s, const struct layer_weights *l,
                       const float *in, int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct activations *a = &s->act;
    struct backend *b = &s->be;
    int64_t ff = l->ffn_down->ne[0], w = slice_width(ctx, s, ff, n);
    enum glu_kind kind = c->arch->ffn == FFN_SWIGLU ? GLU_SILU : GLU_GELU;
    struct mat gate = as_mat(b, l->ffn_gate), up = as_mat(b, l->ffn_up);
    struct mat down = as_mat(b, l->ffn_down);
    size_t col_bytes = (size_t)(w / ox_dtype_block_size(down.type)) * ox_dtype_type_size(down.type);
    gate.n_rows = up.n_rows = w, down.n_cols = w;
    const struct mat_lora *gate_lora = gate.lora, *up_lora = up.lora, *down_lora = down.lora;
    struct mat_lora gl[MAT_LORA_MAX], ul[MAT_LORA_MAX], dl[MAT_LORA_MAX];
    float *sum = ctx->group ? a->proj : a->x;
    if (ctx->group)
        b->ops->zero(b, sum, (size_t)n * c->n_embd);
    for (int64_t c0 = 0; c0 < ff; c0 += w) {
        gate.lora = compose_lora_slice(gate_lora, true, c0, w, gl);
        up.lora = compose_lora_slice(up_lora, true, c0, w, ul);
        down.lora = compose_lora_slice(down_lora, false, c0, w, dl);
        compose_matmul_glu(b, kind, &gate, &up, in, NULL, a->hidden, n, a->xn, a->gate, a->up);
        compose_matmul_add(b, &down, a->hidden, sum, n, a->branch);
        gate.data = (const uint8_t *)gate.data + (size_t)w * gate.row_bytes;
        up.data = (const uint8_t *)up.data + (size_t)w * up.row_bytes;
        down.data = (const uint8_t *)down.data + col_bytes;
    }
    if (ctx->group) {
        block_reduce(ctx, s, sum, n);
        b->ops->add(b, a->x, sum, (size_t)n * c->n_embd);
    }
}

/* The first half of the dense FFN of the architecture's kind, from in to act.hidden; a plain
 * GLU takes in through norm first unless that is NULL. */
static void dense_ffn_hidden(struct ox_context *ctx, struct stage *s, const struct layer_weights *l,
                             const float *in, const struct norm_in *norm, int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct activations *a = &s->act;
    struct backend *b = &s->be;
    size_t ff = (size_t)l->ffn_down->ne[0], all = (size_t)n * ff; /* the layer's width */
    enum glu_kind kind = c->arch->ffn == FFN_SWIGLU       ? GLU_SILU
                         : c->arch->ffn == FFN_SWIGLU_OAI ? GLU_SWIGLU_OAI
                                                          : GLU_GELU;
    if (plain_glu(ctx, l)) {
        struct mat gate = as_mat(b, l->ffn_gate), up = as_mat(b, l->ffn_up);
        compose_matmul_glu(b, kind, &gate, &up, in, norm, a->hidden, n, a->xn, a->gate, a->up);
        return;
    }
    switch (c->arch->ffn) {
    case FFN_SWIGLU:
    case FFN_GEGLU:
    case FFN_SWIGLU_OAI:
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

void ffn_block(struct ox_context *ctx, struct stage *s, const struct layer_weights *l, int n,
               bool attn_added) {
    const struct model_config *c = &ctx->model->cfg;
    const struct arch_desc *d = c->arch;
    struct activations *a = &s->act;
    struct backend *b = &s->be;
    size_t all = (size_t)n * c->n_embd;
    const float *in = a->xn; /* parallel blocks reuse the attention norm */
    const struct weight *g = block_norm_weight(l->ffn_norm, l->ffn_norm_folded);
    struct norm_in pre = {vec(b, g), c->norm_eps};
    bool glu_norm = false; /* the GLU's matmuls take the norm in */
    if (!d->parallel) {
        if (!attn_added)
            b->ops->add(b, a->x, a->proj, all);
        if (l->attn_out_norm) /* an encoder's x = norm(x + attn) */
            encoder_norm_residual(ctx, s, l->attn_out_norm, l->attn_out_norm_b, n);
        in = a->x;
        glu_norm = block_norm_fusable(ctx, l->ffn_norm, l->ffn_norm_b) && plain_glu(ctx, l) &&
                   !too_wide(ctx, s, l, n);
        if (!glu_norm && !d->no_pre_norm) {
            block_norm(ctx, s, a->x, g, l->ffn_norm_b, a->xn, n);
            in = a->xn;
        }
    }
    if (l->ffn_pre_norm_2) { /* a dense FFN beside the experts */
        dense_moe_ffn(ctx, s, l, in, n);
    } else if (l->ffn_gate_inp) {
        moe_block(ctx, s, l, in, NULL, a->branch, n);
        if (l->ffn_up_shexp)
            shared_expert_add(ctx, s, l, in, a->branch, n);
        if (block_reduce_onto(ctx, s, l->ffn_post_norm, a->branch, n))
            return; /* a split model's rows of every expert, added to x as they are summed */
        block_reduce(ctx, s, a->branch, n); /* a split model's rows of every expert */
    } else {
        if (too_wide(ctx, s, l, n)) {
            ffn_sliced(ctx, s, l, in, n);
            return;
        }
        dense_ffn_hidden(ctx, s, l, in, glu_norm ? &pre : NULL, n);
        if (block_add_projection(ctx, s, l->ffn_down, l->ffn_down_b, l->ffn_post_norm, a->hidden, n,
                                 a->branch))
            return;
        linear(b, l->ffn_down, l->ffn_down_b, a->hidden, a->branch, n);
        if (block_reduce_onto(ctx, s, l->ffn_post_norm, a->branch, n))
            return; /* a split model's rows' shares, added to x as they are summed */
        block_reduce(ctx, s, a->branch, n); /* a split model's rows' shares */
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
