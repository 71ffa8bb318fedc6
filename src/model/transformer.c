/* transformer.c: THE forward pass, written once against the backend op table. An architecture
 * changes it only through its descriptor (struct arch_desc). */
#include <math.h>
#include <string.h>

#include "model/context.h"
#include "quant/dtype.h"

static struct mat as_mat(const struct weight *w) {
    return (struct mat){w->type, w->data, w->ne[1], w->ne[0], w->row_bytes};
}

/* Matrix e of a 3-D expert tensor. */
static struct mat expert_mat(const struct weight *w, int e) {
    struct mat m = as_mat(w);
    m.data = (const uint8_t *)w->data + (size_t)e * (size_t)w->ne[1] * w->row_bytes;
    return m;
}

static const float *vec_f32(const struct weight *w) {
    return (const float *)w->data; /* norms are F32 in every file (checked at load) */
}

/* Store this batch's keys and values into their cells, then read the layer's whole cache back
 * as floats for attention. */
static void kv_store_and_load(struct ox_context *ctx, int il, int n) {
    struct kv_cache *kv = &ctx->kv;
    struct activations *a = &ctx->act;
    const struct model_config *c = &ctx->model->cfg;
    const struct dtype_traits *tr = dtype_get((int)kv->type);
    int64_t dk = (int64_t)c->n_head_kv * c->head_dim_k, dv = (int64_t)c->n_head_kv * c->head_dim_v;
    uint8_t *k_base = kv->k + (size_t)il * kv->n_cells * kv->k_row;
    uint8_t *v_base = kv->v + (size_t)il * kv->n_cells * kv->v_row;
    for (int t = 0; t < n; t++) {
        tr->from_float(a->k + t * dk, k_base + (size_t)a->cell[t] * kv->k_row, 1, dk, NULL);
        tr->from_float(a->v + t * dv, v_base + (size_t)a->cell[t] * kv->v_row, 1, dv, NULL);
    }
    for (int32_t cell = 0; cell < kv->used_end; cell++) {
        if (kv->pos[cell] < 0)
            continue;
        tr->to_float(k_base + (size_t)cell * kv->k_row, a->kf + (size_t)cell * dk, dk);
        tr->to_float(v_base + (size_t)cell * kv->v_row, a->vf + (size_t)cell * dv, dv);
    }
}

static void attention_block(struct ox_context *ctx, const struct layer_weights *l, int il, int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct activations *a = &ctx->act;
    struct backend *b = &ctx->be;
    const struct backend_ops *op = b->ops;
    struct mat wq = as_mat(l->wq), wk = as_mat(l->wk), wv = as_mat(l->wv), wo = as_mat(l->wo);
    op->rms_norm(b, a->x, vec_f32(l->attn_norm), a->xn, n, c->n_embd, c->norm_eps);
    op->matmul(b, &wq, a->xn, a->q, n);
    op->matmul(b, &wk, a->xn, a->k, n);
    op->matmul(b, &wv, a->xn, a->v, n);
    op->rope(b, a->q, a->pos, n, c->n_head, c->head_dim_k, &c->rope);
    op->rope(b, a->k, a->pos, n, c->n_head_kv, c->head_dim_k, &c->rope);
    kv_store_and_load(ctx, il, n);
    struct attn_args args = {
        .q = a->q,
        .k = a->kf,
        .v = a->vf,
        .y = a->attn,
        .n = n,
        .n_cells = ctx->kv.used_end,
        .n_head = c->n_head,
        .n_head_kv = c->n_head_kv,
        .hd_k = c->head_dim_k,
        .hd_v = c->head_dim_v,
        .q_pos = a->pos,
        .q_seq = a->seq,
        .cell_pos = ctx->kv.pos,
        .cell_seq = ctx->kv.seq,
        .scale = 1.0f / sqrtf((float)c->head_dim_k),
        .f16_cache = ctx->kv.type == OX_DTYPE_F16,
    };
    op->attention(b, &args);
    op->matmul(b, &wo, a->attn, a->proj, n);
    op->add(b, a->x, a->proj, (size_t)n * (size_t)c->n_embd);
}

/* The k largest of p[0..n) (ties: lower index first), as indices. */
static void top_k(const float *p, int n, int k, int *idx) {
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < n; e++) {
            bool taken = false;
            for (int q = 0; q < j; q++)
                taken |= idx[q] == e;
            if (!taken && (best < 0 || p[e] > p[best]))
                best = e;
        }
        idx[j] = best;
    }
}

/* Mixtral-style MoE: softmax over the router, the top experts' SwiGLU FFNs weighted by their
 * renormalised probabilities. */
static void moe_block(struct ox_context *ctx, const struct layer_weights *l, int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct activations *a = &ctx->act;
    struct backend *b = &ctx->be;
    struct mat router = as_mat(l->ffn_gate_inp);
    b->ops->matmul(b, &router, a->xn, a->router, n);
    int ne = c->n_expert, k = c->n_expert_used, ff = c->n_ff, d = c->n_embd;
    memset(a->proj, 0, (size_t)n * (size_t)d * sizeof *a->proj);
    for (int t = 0; t < n; t++) {
        float *p = a->router + (size_t)t * ne, max = p[0], sum = 0.0f;
        for (int e = 1; e < ne; e++)
            max = p[e] > max ? p[e] : max;
        for (int e = 0; e < ne; e++)
            sum += p[e] = expf(p[e] - max);
        for (int e = 0; e < ne; e++)
            p[e] /= sum;
        int idx[MODEL_MAX_EXPERTS_USED];
        top_k(p, ne, k, idx);
        float wsum = 0.0f;
        for (int j = 0; j < k; j++)
            wsum += p[idx[j]];
        const float *x = a->xn + (size_t)t * d;
        for (int j = 0; j < k; j++) {
            struct mat g = expert_mat(l->ffn_gate_exps, idx[j]),
                       u = expert_mat(l->ffn_up_exps, idx[j]);
            struct mat dn = expert_mat(l->ffn_down_exps, idx[j]);
            b->ops->matmul(b, &g, x, a->gate, 1);
            b->ops->matmul(b, &u, x, a->up, 1);
            b->ops->swiglu(b, a->gate, a->up, a->hidden, (size_t)ff);
            b->ops->matmul(b, &dn, a->hidden, a->gate, 1);
            float w = p[idx[j]] / wsum;
            for (int i = 0; i < d; i++)
                a->proj[(size_t)t * d + i] += w * a->gate[i];
        }
    }
}

static void ffn_block(struct ox_context *ctx, const struct layer_weights *l, int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct activations *a = &ctx->act;
    struct backend *b = &ctx->be;
    b->ops->rms_norm(b, a->x, vec_f32(l->ffn_norm), a->xn, n, c->n_embd, c->norm_eps);
    if (l->ffn_gate_inp) {
        moe_block(ctx, l, n);
    } else {
        struct mat g = as_mat(l->ffn_gate), u = as_mat(l->ffn_up), d = as_mat(l->ffn_down);
        b->ops->matmul(b, &g, a->xn, a->gate, n);
        b->ops->matmul(b, &u, a->xn, a->up, n);
        b->ops->swiglu(b, a->gate, a->up, a->hidden, (size_t)n * (size_t)c->n_ff);
        b->ops->matmul(b, &d, a->hidden, a->proj, n);
    }
    b->ops->add(b, a->x, a->proj, (size_t)n * (size_t)c->n_embd);
}

/* Final norm and output projection for the tokens that asked for logits. */
static void output_block(struct ox_context *ctx, int n) {
    const struct ox_model *m = ctx->model;
    struct activations *a = &ctx->act;
    struct backend *b = &ctx->be;
    int d = m->cfg.n_embd, rows = 0;
    for (int t = 0; t < n; t++) /* gather the wanted rows to the front */
        if (ctx->out_row[t] >= 0)
            memmove(a->xn + (size_t)rows++ * d, a->x + (size_t)t * d, (size_t)d * sizeof(float));
    if (rows == 0)
        return;
    b->ops->rms_norm(b, a->xn, vec_f32(m->output_norm), a->xn, rows, d, m->cfg.norm_eps);
    struct mat out = as_mat(m->output);
    b->ops->matmul(b, &out, a->xn, ctx->logits, rows);
}

enum ox_status transformer_forward(struct ox_context *ctx, const ox_token *tokens, int n) {
    const struct ox_model *m = ctx->model;
    struct backend *b = &ctx->be;
    struct mat emb = as_mat(m->tok_embd);
    b->ops->get_rows(b, &emb, tokens, ctx->act.x, n);
    for (int il = 0; il < m->cfg.n_layer; il++) {
        attention_block(ctx, &m->layers[il], il, n);
        ffn_block(ctx, &m->layers[il], n);
    }
    output_block(ctx, n);
    return OX_OK;
}
