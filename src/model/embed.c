/* embed.c: embeddings as llama.cpp's --embeddings gives them: each output row's final hidden
 * state (ox_get_embeddings) and one pooled vector per sequence (ox_embed), or a reranker's
 * scores from its classifier head. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/ggml_numerics.h"
#include "model/context.h"
#include "model/split.h"
#include "quant/dtype.h"

const float *ox_get_embeddings(const struct ox_context *ctx, int32_t i) {
    if (!ctx || !ctx->embd || i < 0 || i >= ctx->n_batch_last || ctx->out_row[i] < 0)
        return NULL;
    return ctx->embd + (size_t)ctx->out_row[i] * (size_t)ctx->model->cfg.n_embd;
}

/* Everything ox_embed can refuse, checked before the cache is touched. */
static enum ox_status check_embed(const struct ox_context *ctx, const ox_token *tokens, int32_t n,
                                  enum ox_pooling pooling, const float *out) {
    if (!ctx || !tokens || !out)
        return ox_fail(OX_ERR_INVALID_ARG, "ox_embed: NULL argument");
    if (!ctx->embd)
        return ox_fail(OX_ERR_INVALID_ARG, "ox_embed: the context was made without embeddings "
                                           "(ox_context_params.embeddings)");
    if (pooling != OX_POOLING_MEAN && pooling != OX_POOLING_CLS && pooling != OX_POOLING_LAST &&
        pooling != OX_POOLING_RANK)
        return ox_fail(OX_ERR_INVALID_ARG, "ox_embed: pooling %d is not mean, cls, last or rank",
                       (int)pooling);
    if (pooling == OX_POOLING_RANK && ox_model_n_cls_out(ctx->model) == 0)
        return ox_fail(OX_ERR_INVALID_ARG,
                       "ox_embed: rank pooling needs a classifier head (cls, cls.output), which "
                       "this model has not");
    if (n < 1)
        return ox_fail(OX_ERR_INVALID_ARG, "ox_embed: %d tokens", n);
    const struct model_config *c = &ctx->model->cfg;
    /* learned positions end at the table's size, whatever the cache holds */
    int64_t room = ctx->model->pos_embd && c->n_ctx_train < (int64_t)ctx->params.n_ctx
                       ? c->n_ctx_train
                       : (int64_t)ctx->params.n_ctx;
    if (!c->causal && (int64_t)ctx->params.n_batch < room) /* its pieces would not see each other */
        room = ctx->params.n_batch;
    if (n > room)
        return ox_fail(OX_ERR_CONTEXT_FULL, "ox_embed: %d tokens do not fit in a context of %lld",
                       n, (long long)room);
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->n_vocab)
            return ox_fail(OX_ERR_INVALID_ARG,
                           "ox_embed: token %d at %d is not in the vocabulary of %d", tokens[i], i,
                           c->n_vocab);
    return OX_OK;
}

/* One piece [i0, i0 + m) of the sequence through the model, its wanted rows added to embd_sum:
 * every row for the mean, else only the first or the last token of the whole sequence. */
static enum ox_status embed_piece(struct ox_context *ctx, const ox_token *tokens, int32_t i0,
                                  int32_t m, int32_t n, enum ox_pooling pooling) {
    size_t e = (size_t)ctx->model->cfg.n_embd;
    bool rank_mean = pooling == OX_POOLING_RANK && ctx->model->cfg.arch->rank_from_mean;
    for (int32_t t = 0; t < m; t++)
        ctx->embd_want[t] =
            pooling == OX_POOLING_MEAN || rank_mean ||
            ((pooling == OX_POOLING_CLS || pooling == OX_POOLING_RANK) && i0 + t == 0) ||
            (pooling == OX_POOLING_LAST && i0 + t == n - 1);
    struct ox_batch b = {.n_tokens = m, .token = tokens + i0, .logits = ctx->embd_want};
    OX_TRY(ox_decode(ctx, &b));
    for (int32_t t = 0; t < m; t++) {
        const float *h = ox_get_embeddings(ctx, t);
        for (size_t j = 0; h && j < e; j++)
            ctx->embd_sum[j] += h[j];
    }
    return OX_OK;
}

/* y = W x + b for one row, W's rows dequantized one at a time (the head is small: it runs on the
 * host, wherever the layers ran), x first rounded as llama.cpp's CPU matmul rounds it: to the
 * weights' vec_dot_type (f16 for f16 weights, 8-bit blocks for quantized ones). */
static enum ox_status head_linear(const struct weight *w, const struct weight *b, const float *x,
                                  float *row, float *y) {
    const struct dtype_traits *wt = dtype_get((int)w->type), *vt = dtype_get((int)wt->vec_dot_type);
    int64_t n = w->ne[0];
    float *xr = malloc((size_t)n * sizeof *xr);
    void *blocks = malloc((size_t)n * sizeof(float) + 512);
    if (!xr || !blocks) {
        free(xr), free(blocks);
        return ox_fail(OX_ERR_OOM, "ox_embed: out of memory");
    }
    memcpy(xr, x, (size_t)n * sizeof *xr);
    if (vt != dtype_get(OX_DTYPE_F32) && vt->from_float) {
        vt->from_float(x, blocks, 1, n, NULL);
        vt->to_float(blocks, xr, n);
    }
    for (int64_t r = 0; r < w->ne[1]; r++) {
        wt->to_float(w->data + (size_t)r * w->row_bytes, row, n);
        double sum = 0.0;
        for (int64_t i = 0; i < n; i++)
            sum += (double)row[i] * xr[i];
        y[r] = (float)sum + (b ? ((const float *)b->data)[r] : 0.0f);
    }
    free(xr), free(blocks);
    return OX_OK;
}

/* ModernBERT's head between cls and cls.output: x = LayerNorm(gelu(mid)) * cls.norm, GELU and
 * the norm as ggml's CPU computes them. */
static void gelu_norm(const struct ox_model *m, const float *mid, float *x) {
    size_t e = (size_t)m->cfg.n_embd;
    float mean, var;
    for (size_t i = 0; i < e; i++)
        x[i] = ggml_gelu(mid[i]);
    ggml_mean_var(x, (int64_t)e, &mean, &var);
    float scale = 1.0f / sqrtf(var + m->cfg.norm_eps);
    const float *g = m->cls_norm ? (const float *)m->cls_norm->data : NULL;
    for (size_t i = 0; i < e; i++)
        x[i] = (x[i] - mean) * scale * (g ? g[i] : 1.0f);
}

/* A reranker's scores from the pooled state h (the first token's, or ModernBERT's mean over n
 * tokens), as llama.cpp's rank pooling: tanh(cls h + b) (ModernBERT: gelu_norm) when there is
 * cls, then cls.output's rows (out: ox_model_n_cls_out floats). */
static enum ox_status classify(const struct ox_model *m, const double *h, int32_t n, float *out) {
    size_t e = (size_t)m->cfg.n_embd;
    bool modern = m->cfg.arch->rank_from_mean;
    float *buf = malloc(3 * e * sizeof *buf), *x = buf, *row = buf + e, *mid = buf + 2 * e;
    if (!buf)
        return ox_fail(OX_ERR_OOM, "ox_embed: out of memory");
    for (size_t i = 0; i < e; i++)
        x[i] = (float)(modern ? h[i] / n : h[i]);
    enum ox_status st = OX_OK;
    if (m->cls && (st = head_linear(m->cls, m->cls_b, x, row, mid)) == OX_OK && modern)
        gelu_norm(m, mid, x);
    else if (m->cls && st == OX_OK)
        for (size_t i = 0; i < e; i++)
            x[i] = tanhf(mid[i]);
    if (st == OX_OK && m->cls_out)
        st = head_linear(m->cls_out, m->cls_out_b, x, row, out);
    else if (st == OX_OK)
        memcpy(out, x, e * sizeof *out);
    free(buf);
    return st;
}

/* x = dense_3 (dense_2 x + b) in place: sentence-transformers' dense modules, as llama.cpp
 * applies them after pooling. */
static enum ox_status dense_out(const struct ox_model *m, float *x) {
    size_t e = (size_t)m->cfg.n_embd, f = (size_t)m->dense_2->ne[1], w = e > f ? e : f;
    float *buf = malloc((w + f) * sizeof *buf), *row = buf, *mid = buf + w;
    if (!buf)
        return ox_fail(OX_ERR_OOM, "ox_embed: out of memory");
    enum ox_status st = head_linear(m->dense_2, m->dense_2_b, x, row, mid);
    if (st == OX_OK)
        st = head_linear(m->dense_3, NULL, mid, row, x);
    free(buf);
    return st;
}

enum ox_status ox_embed(struct ox_context *ctx, const ox_token *tokens, int32_t n,
                        enum ox_pooling pooling, bool normalize, float *out) {
    OX_TRY(check_embed(ctx, tokens, n, pooling, out));
    if (ctx->split)
        return split_embed(ctx, tokens, n, pooling, normalize, out);
    size_t e = (size_t)ctx->model->cfg.n_embd;
    int32_t nb = (int32_t)ctx->params.n_batch;
    ox_kv_clear(ctx);
    memset(ctx->embd_sum, 0, e * sizeof *ctx->embd_sum);
    ctx->embd_only = true; /* no logits: the output matrix is most of a small model's work */
    enum ox_status st = OX_OK;
    for (int32_t i0 = 0; i0 < n && st == OX_OK; i0 += nb)
        st = embed_piece(ctx, tokens, i0, n - i0 < nb ? n - i0 : nb, n, pooling);
    ctx->embd_only = false;
    ctx->n_batch_last = 0; /* the rows hold no logits, and only the last piece's states */
    if (st != OX_OK)
        return st;
    if (pooling == OX_POOLING_RANK)
        return classify(ctx->model, ctx->embd_sum, n, out);
    double scale = pooling == OX_POOLING_MEAN ? 1.0 / n : 1.0, sq = 0.0;
    for (size_t j = 0; j < e; j++)
        out[j] = (float)(ctx->embd_sum[j] * scale);
    if (ctx->model->dense_2)
        OX_TRY(dense_out(ctx->model, out));
    for (size_t j = 0; j < e; j++)
        sq += (double)out[j] * out[j];
    /* llama.cpp's euclidean normalization (embd_normalize 2): a zero vector stays zero */
    float inv = normalize && sq > 0.0 ? (float)(1.0 / sqrt(sq)) : 1.0f;
    for (size_t j = 0; normalize && j < e; j++)
        out[j] *= inv;
    return OX_OK;
}
