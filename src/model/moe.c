/* moe.c: a MoE FFN: the router (with its bias), softmax, each token's top experts' GLU FFNs
 * (with their biases; SwiGLU, GeGLU or gpt-oss's clamped SwiGLU; each expert's output scale)
 * weighted by their probabilities, renormalised over the chosen or raw, summed in expert
 * order. The backend runs it where it has an op for it (moe_args), else the host chooses from
 * the probabilities copied back. */
#include "model/moe.h"

#include <math.h>

#include "backend/compose.h"
#include "model/context.h"
#include "model/layer_ops.h"

/* The experts' activation: the architecture's GLU. */
static enum glu_kind expert_glu(const struct model_config *c) {
    return c->arch->ffn == FFN_SWIGLU_OAI ? GLU_SWIGLU_OAI
           : c->arch->ffn == FFN_GEGLU    ? GLU_GELU
                                          : GLU_SILU;
}

/* The experts chosen and run by the backend where the router's probabilities are (moe_ffn),
 * when it does that for these shapes: no round trip to the host. */
static bool moe_on_backend(struct ox_context *ctx, struct stage *s, const struct layer_weights *l,
                           const float *in, float *out, int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct activations *a = &s->act;
    struct backend *b = &s->be;
    /* a parallel block still needs proj, the op's scratch, and so does dense_moe.c's dense
     * branch; the op has no expert biases or output scales, nor the clamped SwiGLU */
    if (c->arch->parallel || l->ffn_pre_norm_2 || l->ffn_gate_inp_b || l->ffn_gate_exps_b ||
        l->ffn_down_exps_s || c->arch->ffn == FFN_SWIGLU_OAI || c->moe_sigmoid ||
        l->ffn_exp_probs_b || c->n_expert_groups > 1 ||
        c->moe_weights_scale != 1.0f) /* nor DeepSeek's routing */
        return false;
    struct mat g = as_mat(b, l->ffn_gate_exps), u = as_mat(b, l->ffn_up_exps),
               d = as_mat(b, l->ffn_down_exps);
    struct moe_args m = {.kind = expert_glu(c),
                         .gate = &g,
                         .up = &u,
                         .down = &d,
                         .probs = a->router,
                         .x = in,
                         .y = out,
                         .n = n,
                         .n_expert = c->n_expert,
                         .k = c->n_expert_used,
                         .raw_weights = !c->moe_norm_weights,
                         .n_batch = (int)ctx->params.n_batch,
                         .ids = a->expert_ids,
                         .weights = a->expert_w,
                         .gate_out = a->gate,
                         .up_out = a->up,
                         .glu = a->hidden,
                         .rows = a->proj,
                         .out = a->moe_out};
    if (!compose_moe_ffn(b, &m))
        return false;
    ctx->moe_on_host |= m.waited;
    return true;
}

/* y (one row of width) += expert e's row of a bias table, when the layer has one. */
static void expert_bias(struct backend *b, const struct weight *bias, int e, float *y, int width) {
    if (bias)
        b->ops->add_row(b, y, vec(b, bias) + (size_t)e * (size_t)width, 1, width);
}

/* The k best of n scores (plus bias where given) among those not masked (mask[e] false, or no
 * mask), ties to the lower index. */
static void top_k(const float *score, const float *bias, const bool *mask, int n, int k, int *idx) {
    for (int j = 0; j < k; j++) {
        idx[j] = -1;
        float best = 0.0f;
        for (int e = 0; e < n; e++) {
            bool taken = mask && mask[e];
            for (int q = 0; q < j; q++)
                taken |= idx[q] == e;
            float v = bias ? score[e] + bias[e] : score[e];
            if (!taken && (idx[j] < 0 || v > best))
                idx[j] = e, best = v;
        }
    }
}

/* Experts in groups (DeepSeek V3): a group scores the sum of its two best selection scores,
 * and only the n_group_used best groups' experts may be chosen: mask[e] says which may not. */
static void mask_groups(const struct model_config *c, const float *score, const float *bias,
                        bool *mask) {
    int per = c->n_expert / c->n_expert_groups, top[2], best[256];
    float group[256];
    for (int g = 0; g < c->n_expert_groups; g++) {
        top_k(score + g * per, bias ? bias + g * per : NULL, NULL, per, per > 1 ? 2 : 1, top);
        group[g] = 0.0f;
        for (int j = 0; j < (per > 1 ? 2 : 1); j++)
            group[g] +=
                bias ? score[g * per + top[j]] + bias[g * per + top[j]] : score[g * per + top[j]];
    }
    top_k(group, NULL, NULL, c->n_expert_groups, c->n_group_used, best);
    for (int e = 0; e < c->n_expert; e++) {
        mask[e] = true;
        for (int j = 0; j < c->n_group_used; j++)
            mask[e] &= e / per != best[j];
    }
}

/* A token's k experts and their weights from its router row p (logits, or probabilities
 * after a softmax): scores are p or its sigmoid; experts are chosen by score plus the
 * selection bias, within the best groups; weighted by their scores, renormalised (ggml's
 * row sum, at least f16's smallest normal, as llama.cpp clamps it) or not, times the scale. */
static void choose_experts(const struct model_config *c, const struct layer_weights *l, float *p,
                           int *idx, float *w) {
    int ne = c->n_expert, k = c->n_expert_used;
    const float *bias = l->ffn_exp_probs_b ? (const float *)l->ffn_exp_probs_b->data : NULL;
    bool mask[1 << 12];
    for (int e = 0; c->moe_sigmoid && e < ne; e++) /* ggml_sigmoid */
        p[e] = 1.0f / (1.0f + expf(-p[e]));
    if (c->n_expert_groups > 1)
        mask_groups(c, p, bias, mask);
    top_k(p, bias, c->n_expert_groups > 1 ? mask : NULL, ne, k, idx);
    double sum = 0.0;
    for (int j = 0; j < k; j++)
        sum += p[idx[j]];
    float wsum = c->moe_norm_weights ? fmaxf((float)sum, 6.103515625e-5f) : 1.0f;
    for (int j = 0; j < k; j++) {
        w[j] = c->moe_norm_weights ? p[idx[j]] / wsum : p[idx[j]];
        w[j] = c->moe_weights_scale != 1.0f ? w[j] * c->moe_weights_scale : w[j];
    }
}

void moe_block(struct ox_context *ctx, struct stage *s, const struct layer_weights *l,
               const float *in, const float *router_in, float *out, int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct activations *a = &s->act;
    struct backend *b = &s->be;
    struct mat router = as_mat(b, l->ffn_gate_inp);
    b->ops->matmul(b, &router, router_in ? router_in : in, a->router, n);
    int ne = c->n_expert, k = c->n_expert_used, ff = c->n_ff_exp, d = c->n_embd;
    if (l->ffn_gate_inp_b)
        b->ops->add_row(b, a->router, vec(b, l->ffn_gate_inp_b), n, ne);
    if (!c->moe_sigmoid) /* sigmoid scores are the host's */
        b->ops->softmax(b, a->router, n, ne);
    if (moe_on_backend(ctx, s, l, in, out, n))
        return;
    ctx->moe_on_host |= b->ops->device;
    /* a failed copy leaves indices in range, and the batch reports the failure */
    enum ox_status st =
        b->ops->download(b, a->router_host, a->router, (size_t)n * (size_t)ne * sizeof(float));
    ctx->batch_err = ctx->batch_err != OX_OK ? ctx->batch_err : st;
    b->ops->zero(b, out, (size_t)n * (size_t)d);
    enum glu_kind kind = expert_glu(c);
    const float *down_scale = l->ffn_down_exps_s ? (const float *)l->ffn_down_exps_s->data : NULL;
    for (int t = 0; t < n; t++) {
        int idx[MODEL_MAX_EXPERTS_USED];
        float w[MODEL_MAX_EXPERTS_USED];
        choose_experts(c, l, a->router_host + (size_t)t * ne, idx, w);
        const float *x = in + (size_t)t * d;
        for (int j = 0; j < k; j++) {
            struct mat g = slice_mat(b, l->ffn_gate_exps, idx[j]),
                       u = slice_mat(b, l->ffn_up_exps, idx[j]);
            struct mat dn = slice_mat(b, l->ffn_down_exps, idx[j]);
            b->ops->matmul(b, &g, x, a->gate, 1);
            b->ops->matmul(b, &u, x, a->up, 1);
            expert_bias(b, l->ffn_gate_exps_b, idx[j], a->gate, ff);
            expert_bias(b, l->ffn_up_exps_b, idx[j], a->up, ff);
            b->ops->glu(b, kind, a->gate, a->up, a->hidden, (size_t)ff);
            b->ops->matmul(b, &dn, a->hidden, a->gate, 1);
            expert_bias(b, l->ffn_down_exps_b, idx[j], a->gate, d);
            if (down_scale) /* before the weight, as ggml's two products */
                b->ops->scale(b, a->gate, down_scale[idx[j]], (size_t)d);
            b->ops->axpy(b, out + (size_t)t * d, a->gate, w[j], (size_t)d);
        }
    }
}
