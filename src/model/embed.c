/* embed.c: embeddings from a decoder model, as llama.cpp's --embeddings gives them: each output
 * row's final hidden state (ox_get_embeddings) and one pooled vector per sequence (ox_embed). */
#include <math.h>
#include <string.h>

#include "model/context.h"

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
    if (pooling != OX_POOLING_MEAN && pooling != OX_POOLING_CLS && pooling != OX_POOLING_LAST)
        return ox_fail(OX_ERR_INVALID_ARG, "ox_embed: pooling %d is not mean, cls or last",
                       (int)pooling);
    if (n < 1)
        return ox_fail(OX_ERR_INVALID_ARG, "ox_embed: %d tokens", n);
    const struct model_config *c = &ctx->model->cfg;
    /* learned positions end at the table's size, whatever the cache holds */
    int64_t room = ctx->model->pos_embd && c->n_ctx_train < (int64_t)ctx->params.n_ctx
                       ? c->n_ctx_train
                       : (int64_t)ctx->params.n_ctx;
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
    for (int32_t t = 0; t < m; t++)
        ctx->embd_want[t] = pooling == OX_POOLING_MEAN ||
                            (pooling == OX_POOLING_CLS && i0 + t == 0) ||
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

enum ox_status ox_embed(struct ox_context *ctx, const ox_token *tokens, int32_t n,
                        enum ox_pooling pooling, bool normalize, float *out) {
    OX_TRY(check_embed(ctx, tokens, n, pooling, out));
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
    double scale = pooling == OX_POOLING_MEAN ? 1.0 / n : 1.0, sq = 0.0;
    for (size_t j = 0; j < e; j++) {
        out[j] = (float)(ctx->embd_sum[j] * scale);
        sq += (double)out[j] * out[j];
    }
    /* llama.cpp's euclidean normalization (embd_normalize 2): a zero vector stays zero */
    float inv = normalize && sq > 0.0 ? (float)(1.0 / sqrt(sq)) : 1.0f;
    for (size_t j = 0; normalize && j < e; j++)
        out[j] *= inv;
    return OX_OK;
}
