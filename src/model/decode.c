/* decode.c: ox_decode (batch checks, KV cell placement, the forward pass) and the KV cache
 * operations of the public API. */
#include <string.h>

#include "model/context.h"
#include "model/split.h"
#include "quant/dtype.h"

int32_t ox_kv_seq_pos_max(const struct ox_context *ctx, int32_t seq) {
    if (seq < 0 || seq >= (int32_t)ctx->params.n_seq_max)
        return -1;
    return kv_seq_pos_max(&ctx->kv, seq);
}

/* Positions, sequences and output rows of the batch into the context; nothing else changes. */
static enum ox_status read_batch(struct ox_context *ctx, const struct ox_batch *b) {
    int32_t n_vocab = ctx->model->cfg.n_vocab;
    int32_t next[OX_SEQ_MAX];
    if (!b->pos) /* positions follow each sequence's last one */
        kv_next_positions(&ctx->kv, next);
    int rows = 0;
    for (int t = 0; t < b->n_tokens; t++) {
        int32_t seq = b->seq_id ? b->seq_id[t] : 0;
        if (b->token[t] < 0 || b->token[t] >= n_vocab)
            return ox_fail(OX_ERR_INVALID_ARG,
                           "decode: token %d at %d is not in the "
                           "vocabulary of %d",
                           b->token[t], t, n_vocab);
        if (seq < 0 || seq >= (int32_t)ctx->params.n_seq_max)
            return ox_fail(OX_ERR_INVALID_ARG, "decode: sequence id %d at %d (n_seq_max %u)", seq,
                           t, ctx->params.n_seq_max);
        int32_t pos = b->pos ? b->pos[t] : next[seq]++;
        if (pos < 0)
            return ox_fail(OX_ERR_INVALID_ARG, "decode: negative position at %d", t);
        if (ctx->model->pos_embd && pos >= ctx->model->cfg.n_ctx_train) /* a table lookup */
            return ox_fail(OX_ERR_CONTEXT_FULL,
                           "decode: position %d is past the %d learned positions of the model", pos,
                           ctx->model->cfg.n_ctx_train);
        ctx->pos[t] = pos, ctx->seq[t] = seq;
        bool want = b->logits ? b->logits[t] : t == b->n_tokens - 1;
        ctx->out_row[t] = want ? rows++ : -1;
    }
    return OX_OK;
}

/* Whether no two of the n tokens share a sequence. */
static bool one_token_per_seq(const int32_t *seq, int n) {
    uint64_t seen[SEQ_WORDS] = {0};
    for (int t = 0; t < n; t++) {
        uint64_t bit = 1ull << (seq[t] % 64);
        if (seen[seq[t] / 64] & bit)
            return false;
        seen[seq[t] / 64] |= bit;
    }
    return true;
}

enum ox_status ox_decode(struct ox_context *ctx, const struct ox_batch *b) {
    if (!ctx || !b || !b->token || b->n_tokens < 1)
        return ox_fail(OX_ERR_INVALID_ARG, "decode: empty or NULL batch");
    if (ctx->split)
        return split_decode(ctx, b);
    if (b->n_tokens > (int32_t)ctx->params.n_batch)
        return ox_fail(OX_ERR_INVALID_ARG, "decode: %d tokens exceed n_batch %u", b->n_tokens,
                       ctx->params.n_batch);
    ctx->n_batch_last = 0;
    if (!ctx->model->cfg.causal) /* an encoder keeps nothing: the batch is the whole sequence */
        ox_kv_clear(ctx);
    OX_TRY(read_batch(ctx, b));
    OX_TRY(kv_place(&ctx->kv, b->n_tokens, ctx->pos, ctx->seq, ctx->cell));
    ctx->n_batch_last = b->n_tokens;
    struct batch_view view = {.n = b->n_tokens,
                              .tokens = b->token,
                              .pos = ctx->pos,
                              .seq = ctx->seq,
                              .cell = ctx->cell,
                              .out_row = ctx->out_row,
                              .one_per_seq = one_token_per_seq(ctx->seq, b->n_tokens)};
    return transformer_forward(ctx, &view);
}

const float *ox_get_logits(const struct ox_context *ctx, int32_t i) {
    if (!ctx || !ctx->logits || i < 0 || i >= ctx->n_batch_last || ctx->out_row[i] < 0)
        return NULL;
    return ctx->logits + (size_t)ctx->out_row[i] * (size_t)ctx->model->cfg.n_vocab;
}

/* ---- KV cache operations -------------------------------------------------------------- */

void ox_kv_clear(struct ox_context *ctx) {
    if (ctx->split) {
        split_kv(ctx, SPLIT_KV_CLEAR, 0, 0, 0, 0);
        return;
    }
    kv_clear(&ctx->kv);
    delta_net_reset(ctx->dn, -1);
}

/* A recurrent state cannot give back the tokens it has taken in: removing any of a sequence's
 * positions from a model with recurrent layers removes all of them, and the state, so the
 * sequence starts over (ox_kv_seq_pos_max then says -1), as llama.cpp's recurrent memory
 * refuses such a removal. */
static void seq_rm_recurrent(struct ox_context *ctx, int32_t seq, int32_t *p0, int32_t *p1) {
    if (!ctx->dn || seq >= OX_SEQ_MAX || !kv_seq_holds(&ctx->kv, seq, *p0, *p1))
        return;
    *p0 = 0, *p1 = -1; /* something goes: all of it goes */
    delta_net_reset(ctx->dn, seq);
}

void ox_kv_seq_rm(struct ox_context *ctx, int32_t seq, int32_t p0, int32_t p1) {
    if (ctx->split) {
        split_kv(ctx, SPLIT_SEQ_RM, seq, p0, p1, 0);
        return;
    }
    seq_rm_recurrent(ctx, seq, &p0, &p1);
    kv_seq_rm(&ctx->kv, seq, p0, p1);
}

int32_t ox_kv_seq_shift(struct ox_context *ctx, int32_t seq, int32_t n_keep) {
    int32_t n = ox_kv_seq_pos_max(ctx, seq) + 1;
    n_keep = n_keep < 0 ? 0 : n_keep;
    int32_t drop = (n - n_keep) / 2;
    if (drop <= 0)
        return 0;
    ox_kv_seq_rm(ctx, seq, n_keep, n_keep + drop);
    if (ox_kv_seq_pos_max(ctx, seq) < 0) /* a recurrent state went whole */
        return 0;
    ox_kv_seq_add(ctx, seq, n_keep + drop, n, -drop);
    return drop;
}

void ox_kv_seq_cp(struct ox_context *ctx, int32_t src, int32_t dst, int32_t p0, int32_t p1) {
    if (ctx->split) {
        split_kv(ctx, SPLIT_SEQ_CP, src, dst, p0, p1);
        return;
    }
    int32_t n_seq = (int32_t)ctx->params.n_seq_max;
    if (src < 0 || dst < 0 || src >= n_seq || dst >= n_seq)
        return;
    kv_seq_cp(&ctx->kv, src, dst, p0, p1);
    delta_net_copy(ctx->dn, src, dst); /* a state is the whole sequence's, whatever the range */
}

/* Moving a cell by delta positions rotates its cached keys by delta more (rotations add).
 * Keys of learned-position models carry no rotation; their cells just take the new positions.
 * The row goes through each stage's act.kf and batch arrays, which are free between decodes. */
struct shift {
    struct ox_context *ctx;
    int32_t delta;
};

static void rerope_cell(void *user, int32_t c) {
    struct ox_context *ctx = ((struct shift *)user)->ctx;
    int32_t delta = ((struct shift *)user)->delta;
    const struct model_config *cfg = &ctx->model->cfg;
    if (cfg->arch->position == POS_LEARNED)
        return;
    struct kv_cache *kv = &ctx->kv;
    for (int32_t i = 0; i < ctx->n_stages; i++) {
        struct stage *s = &ctx->stages[i];
        struct backend *b = &s->be;
        b->ops->upload(b, s->act.b_pos, &delta, sizeof delta);
        b->ops->upload(b, s->act.b_cell, &c, sizeof c);
        for (int il = s->layer_begin; il < s->layer_end; il++) {
            const struct layer_shape *l = &cfg->layer[il];
            if (cfg->no_rope[il] || !s->k[il]) /* keys without rotation, or no cache of its own */
                continue;
            int dk = l->n_head_kv * l->head_dim_k;
            size_t row = kv->k_row[il];
            b->ops->cache_load(b, kv->type, s->k[il] + (size_t)c * row, row, s->act.kf, 1, dk,
                               NULL);
            const struct rope_params *rp = cfg->is_swa[il] ? &s->rope_swa : &s->rope;
            if (cfg->arch->mla) /* the rotary part follows the latent (mla.c) */
                b->ops->rope(b, s->act.kf + cfg->mla_kv_rank, s->act.b_pos, 1, 1, cfg->n_rot, rp);
            else
                b->ops->rope(b, s->act.kf, s->act.b_pos, 1, l->n_head_kv, l->head_dim_k, rp);
            b->ops->cache_store(b, kv->type, s->act.kf, 1, dk, s->k[il], row, s->act.b_cell);
        }
    }
}

void ox_kv_seq_add(struct ox_context *ctx, int32_t seq, int32_t p0, int32_t p1, int32_t delta) {
    if (ctx->split) {
        split_kv(ctx, SPLIT_SEQ_ADD, seq, p0, p1, delta);
        return;
    }
    if (delta == 0 || seq < 0 || seq >= (int32_t)ctx->params.n_seq_max)
        return;
    struct shift sh = {ctx, delta};
    kv_seq_add(&ctx->kv, seq, p0, p1, delta, rerope_cell, &sh);
}
