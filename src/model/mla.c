/* mla.c: multi-head latent attention as llama.cpp runs it for DeepSeek's files: the keys and
 * values of every head come from one normed latent of kv_rank per token, beside n_rot rotary
 * dims shared by the heads, and the cache keeps just those (one "head" of kv_rank + n_rot
 * keys, the latent as values). Each head's no-rope query is taken into latent space by its
 * k_b (absorbed: q k_b . latent = q . k_b latent), and its attention output, a latent, out of
 * it by its v_b, before the output projection. */
#include "model/mla.h"

#include "model/context.h"
#include "model/layer_ops.h"

/* dst rows [n][dst_stride] at column dst_col = src rows [n][src_stride] from column src_col,
 * cols wide. */
static void copy_cols(struct backend *b, float *dst, size_t dst_stride, size_t dst_col,
                      const float *src, size_t src_stride, size_t src_col, int n, int cols) {
    b->ops->copy_rows(b, dst + dst_col, dst_stride, src + src_col, src_stride, n, cols);
}

/* The query of each head as projected (act.mla: no-rope then rope part, mla_head_k), through
 * q's bottleneck and its norm where the layer has one. */
static void project_q(struct ox_context *ctx, struct stage *s, const struct layer_weights *l,
                      int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct activations *a = &s->act;
    struct backend *b = &s->be;
    if (!l->wq_a) {
        linear(b, l->wq, NULL, a->xn, a->mla, n);
        return;
    }
    linear(b, l->wq_a, NULL, a->xn, a->mla_in, n);
    b->ops->rms_norm(b, a->mla_in, vec(b, l->q_a_norm), a->mla_in, n, c->mla_q_rank, c->norm_eps);
    linear(b, l->wq_b, NULL, a->mla_in, a->mla, n);
}

/* The shared key and the value: the latent normed (act.v, and the front of act.k), the rotary
 * part rotated (the back of act.k). */
static void project_kv(struct ox_context *ctx, struct stage *s, const struct layer_weights *l,
                       int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct activations *a = &s->act;
    struct backend *b = &s->be;
    size_t kr = (size_t)c->mla_kv_rank, rot = (size_t)c->n_rot, row = kr + rot;
    linear(b, l->wkv_a, NULL, a->xn, a->k, n);
    copy_cols(b, a->v, kr, 0, a->k, row, 0, n, (int)kr);
    b->ops->rms_norm(b, a->v, vec(b, l->kv_a_norm), a->v, n, (int)kr, c->norm_eps);
    copy_cols(b, a->k, row, 0, a->v, kr, 0, n, (int)kr);
    copy_cols(b, a->mla_in, rot, 0, a->k, row, kr, n, (int)rot);
    b->ops->rope(b, a->mla_in, a->b_pos, n, 1, (int)rot, &s->rope);
    copy_cols(b, a->k, row, kr, a->mla_in, rot, 0, n, (int)rot);
}

void mla_project_qkv(struct ox_context *ctx, struct stage *s, const struct layer_weights *l,
                     int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct activations *a = &s->act;
    struct backend *b = &s->be;
    size_t kr = (size_t)c->mla_kv_rank, rot = (size_t)c->n_rot, row = kr + rot;
    size_t hk = (size_t)c->mla_head_k, nope = hk - rot, h = (size_t)c->n_head;
    b->ops->rms_norm(b, a->x, vec(b, l->attn_norm), a->xn, n, c->n_embd, c->norm_eps);
    project_q(ctx, s, l, n);
    project_kv(ctx, s, l, n);
    /* the rotary parts of every head at once: [n][head][rot] */
    int rows = n * c->n_head;
    copy_cols(b, a->mla_in, rot, 0, a->mla, hk, nope, rows, (int)rot);
    b->ops->rope(b, a->mla_in, a->b_pos, n, c->n_head, (int)rot, &s->rope);
    copy_cols(b, a->q, row, kr, a->mla_in, rot, 0, rows, (int)rot);
    for (size_t i = 0; i < h; i++) { /* each head's no-rope part into latent space */
        struct mat k_b = slice_mat(b, l->wk_b, (int)i);
        copy_cols(b, a->mla_in, nope, 0, a->mla, h * hk, i * hk, n, (int)nope);
        b->ops->matmul(b, &k_b, a->mla_in, a->mla_out, n);
        copy_cols(b, a->q, h * row, i * row, a->mla_out, kr, 0, n, (int)kr);
    }
}

const float *mla_heads_out(struct ox_context *ctx, struct stage *s, const struct layer_weights *l,
                           int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct activations *a = &s->act;
    struct backend *b = &s->be;
    size_t kr = (size_t)c->mla_kv_rank, hv = (size_t)c->mla_head_v, h = (size_t)c->n_head;
    for (size_t i = 0; i < h; i++) {
        struct mat v_b = slice_mat(b, l->wv_b, (int)i);
        copy_cols(b, a->mla_in, kr, 0, a->attn, h * kr, i * kr, n, (int)kr);
        b->ops->matmul(b, &v_b, a->mla_in, a->mla_out, n);
        copy_cols(b, a->mla, h * hv, i * hv, a->mla_out, hv, 0, n, (int)hv);
    }
    return a->mla;
}
