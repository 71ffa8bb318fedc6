/* moe.c: a MoE FFN: the router (with its bias), softmax, each token's top experts' GLU FFNs
 * (with their biases; SwiGLU, GeGLU or gpt-oss's clamped SwiGLU; each expert's output scale)
 * weighted by their probabilities, renormalised over the chosen or raw, summed in expert
 * order. The backend runs it where it has an op for it (moe_args), else the host chooses from
 * the probabilities copied back. */
#include "model/moe.h"

#include "model/context.h"
#include "model/layer_ops.h"

/* Matrix e of a 3-D expert tensor. */
static struct mat expert_mat(const struct backend *b, const struct weight *w, int e) {
    struct mat m = as_mat(b, w);
    m.data = (const uint8_t *)m.data + (size_t)e * (size_t)w->ne[1] * w->row_bytes;
    m.packed = NULL; /* experts stay in the file's layout */
    return m;
}

/* The experts' activation: the architecture's GLU. */
static enum glu_kind expert_glu(const struct model_config *c) {
    return c->arch->ffn == FFN_SWIGLU_OAI ? GLU_SWIGLU_OAI
           : c->arch->ffn == FFN_GEGLU    ? GLU_GELU
                                          : GLU_SILU;
}

/* The experts chosen and run by the backend where the router's probabilities are (moe_ffn),
 * when it does that for these shapes: no round trip to the host. */
static bool moe_on_backend(struct ox_context *ctx, const struct layer_weights *l, const float *in,
                           float *out, int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct activations *a = &ctx->st->act;
    struct backend *b = &ctx->st->be;
    /* a parallel block still needs proj, the op's scratch, and so does dense_moe.c's dense
     * branch; the op has no expert biases or output scales, nor the clamped SwiGLU */
    if (!b->ops->moe_ffn || c->arch->parallel || l->ffn_pre_norm_2 || l->ffn_gate_inp_b ||
        l->ffn_gate_exps_b || l->ffn_down_exps_s || c->arch->ffn == FFN_SWIGLU_OAI)
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
                         .raw_weights = c->arch->moe_raw_weights,
                         .n_batch = (int)ctx->params.n_batch,
                         .ids = a->expert_ids,
                         .weights = a->expert_w,
                         .gate_out = a->gate,
                         .up_out = a->up,
                         .glu = a->hidden,
                         .rows = a->proj,
                         .out = a->moe_out};
    if (!b->ops->moe_ffn(b, &m))
        return false;
    ctx->moe_on_host |= m.waited;
    return true;
}

/* y (one row of width) += expert e's row of a bias table, when the layer has one. */
static void expert_bias(struct backend *b, const struct weight *bias, int e, float *y, int width) {
    if (bias)
        b->ops->add_row(b, y, vec(b, bias) + (size_t)e * (size_t)width, 1, width);
}

void moe_block(struct ox_context *ctx, const struct layer_weights *l, const float *in,
               const float *router_in, float *out, int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct activations *a = &ctx->st->act;
    struct backend *b = &ctx->st->be;
    struct mat router = as_mat(b, l->ffn_gate_inp);
    b->ops->matmul(b, &router, router_in ? router_in : in, a->router, n);
    int ne = c->n_expert, k = c->n_expert_used, ff = c->n_ff_exp, d = c->n_embd;
    if (l->ffn_gate_inp_b)
        b->ops->add_row(b, a->router, vec(b, l->ffn_gate_inp_b), n, ne);
    b->ops->softmax(b, a->router, n, ne);
    if (moe_on_backend(ctx, l, in, out, n))
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
        const float *p = a->router_host + (size_t)t * ne;
        int idx[MODEL_MAX_EXPERTS_USED];
        for (int j = 0; j < k; j++) { /* the k largest, ties to the lower index */
            idx[j] = -1;
            for (int e = 0; e < ne; e++) {
                bool taken = false;
                for (int q = 0; q < j; q++)
                    taken |= idx[q] == e;
                if (!taken && (idx[j] < 0 || p[e] > p[idx[j]]))
                    idx[j] = e;
            }
        }
        double wsum = 0.0; /* ggml's row sum: double, then float; 1: the raw probabilities */
        for (int j = 0; j < k; j++)
            wsum += p[idx[j]];
        wsum = c->arch->moe_raw_weights ? 1.0 : wsum;
        const float *x = in + (size_t)t * d;
        for (int j = 0; j < k; j++) {
            struct mat g = expert_mat(b, l->ffn_gate_exps, idx[j]),
                       u = expert_mat(b, l->ffn_up_exps, idx[j]);
            struct mat dn = expert_mat(b, l->ffn_down_exps, idx[j]);
            b->ops->matmul(b, &g, x, a->gate, 1);
            b->ops->matmul(b, &u, x, a->up, 1);
            expert_bias(b, l->ffn_gate_exps_b, idx[j], a->gate, ff);
            expert_bias(b, l->ffn_up_exps_b, idx[j], a->up, ff);
            b->ops->glu(b, kind, a->gate, a->up, a->hidden, (size_t)ff);
            b->ops->matmul(b, &dn, a->hidden, a->gate, 1);
            expert_bias(b, l->ffn_down_exps_b, idx[j], a->gate, d);
            if (down_scale) /* before the weight, as ggml's two products */
                b->ops->scale(b, a->gate, down_scale[idx[j]], (size_t)d);
            b->ops->axpy(b, out + (size_t)t * d, a->gate, p[idx[j]] / (float)wsum, (size_t)d);
        }
    }
}
