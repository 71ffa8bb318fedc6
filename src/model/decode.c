/* decode.c: ox_decode (batch checks, KV cell placement, the forward pass) and the KV cache
 * operations of the public API. */
#include <string.h>

#include "model/context.h"
#include "quant/dtype.h"

/* Cell c's sequence set (SEQ_WORDS words). */
static uint64_t *cell_seqs(const struct kv_cache *kv, int32_t c) {
    return kv->seq + (size_t)c * SEQ_WORDS;
}

static bool cell_in(const struct kv_cache *kv, int32_t c, int32_t seq) {
    return seq_set_has(cell_seqs(kv, c), seq);
}

/* Cell c freed: no position, no sequence. */
static void cell_free(struct kv_cache *kv, int32_t c) {
    kv->pos[c] = -1;
    memset(cell_seqs(kv, c), 0, SEQ_WORDS * sizeof *kv->seq);
}

int32_t ox_kv_seq_pos_max(const struct ox_context *ctx, int32_t seq) {
    int32_t max = -1;
    if (seq < 0 || seq >= (int32_t)ctx->params.n_seq_max)
        return -1;
    for (int32_t c = 0; c < ctx->kv.used_end; c++)
        if (cell_in(&ctx->kv, c, seq) && ctx->kv.pos[c] > max)
            max = ctx->kv.pos[c];
    return max;
}

/* next[s] = 1 + the last position of sequence s in the cache (0 when it has none), for every
 * sequence, in one pass over the cells. */
static void next_positions(const struct kv_cache *kv, int32_t *next) {
    memset(next, 0, OX_SEQ_MAX * sizeof *next);
    for (int32_t c = 0; c < kv->used_end; c++) {
        if (kv->pos[c] < 0)
            continue;
        for (int w = 0; w < SEQ_WORDS; w++)
            for (uint64_t bits = cell_seqs(kv, c)[w]; bits; bits &= bits - 1) {
                int s = w * 64 + __builtin_ctzll(bits);
                next[s] = kv->pos[c] + 1 > next[s] ? kv->pos[c] + 1 : next[s];
            }
    }
}

/* Positions, sequences and output rows of the batch into the context; nothing else changes. */
static enum ox_status read_batch(struct ox_context *ctx, const struct ox_batch *b) {
    int32_t n_vocab = ctx->model->cfg.n_vocab;
    int32_t next[OX_SEQ_MAX];
    if (!b->pos) /* positions follow each sequence's last one */
        next_positions(&ctx->kv, next);
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

/* Free cells for the whole batch, or OX_ERR_CONTEXT_FULL with the cache untouched. */
static enum ox_status place_batch(struct ox_context *ctx, int n) {
    struct kv_cache *kv = &ctx->kv;
    int found = 0;
    for (int32_t c = 0; c < kv->n_cells && found < n; c++)
        if (kv->pos[c] < 0)
            ctx->cell[found++] = c;
    if (found < n)
        return ox_fail(OX_ERR_CONTEXT_FULL,
                       "decode: %d tokens do not fit in the context of %d "
                       "(%d cells free)",
                       n, kv->n_cells, found);
    for (int t = 0; t < n; t++) {
        int32_t c = ctx->cell[t];
        cell_free(kv, c);
        kv->pos[c] = ctx->pos[t];
        cell_seqs(kv, c)[ctx->seq[t] / 64] = 1ull << (ctx->seq[t] % 64);
        kv->used_end = c + 1 > kv->used_end ? c + 1 : kv->used_end;
    }
    return OX_OK;
}

enum ox_status ox_decode(struct ox_context *ctx, const struct ox_batch *b) {
    if (!ctx || !b || !b->token || b->n_tokens < 1)
        return ox_fail(OX_ERR_INVALID_ARG, "decode: empty or NULL batch");
    if (b->n_tokens > (int32_t)ctx->params.n_batch)
        return ox_fail(OX_ERR_INVALID_ARG, "decode: %d tokens exceed n_batch %u", b->n_tokens,
                       ctx->params.n_batch);
    ctx->n_batch_last = 0;
    if (!ctx->model->cfg.causal) /* an encoder keeps nothing: the batch is the whole sequence */
        ox_kv_clear(ctx);
    OX_TRY(read_batch(ctx, b));
    OX_TRY(place_batch(ctx, b->n_tokens));
    ctx->n_batch_last = b->n_tokens;
    return transformer_forward(ctx, b->token, b->n_tokens);
}

const float *ox_get_logits(const struct ox_context *ctx, int32_t i) {
    if (!ctx || !ctx->logits || i < 0 || i >= ctx->n_batch_last || ctx->out_row[i] < 0)
        return NULL;
    return ctx->logits + (size_t)ctx->out_row[i] * (size_t)ctx->model->cfg.n_vocab;
}

/* ---- KV cache operations -------------------------------------------------------------- */

static bool in_range(int32_t pos, int32_t p0, int32_t p1) {
    return pos >= (p0 < 0 ? 0 : p0) && (p1 < 0 || pos < p1);
}

void ox_kv_clear(struct ox_context *ctx) {
    for (int32_t c = 0; c < ctx->kv.n_cells; c++)
        cell_free(&ctx->kv, c);
    ctx->kv.used_end = 0;
    delta_net_reset(ctx->dn, -1);
}

/* A recurrent state cannot give back the tokens it has taken in: removing any of a sequence's
 * positions from a model with recurrent layers removes all of them, and the state, so the
 * sequence starts over (ox_kv_seq_pos_max then says -1), as llama.cpp's recurrent memory
 * refuses such a removal. */
static void seq_rm_recurrent(struct ox_context *ctx, int32_t seq, int32_t *p0, int32_t *p1) {
    const struct kv_cache *kv = &ctx->kv;
    if (!ctx->dn || seq >= OX_SEQ_MAX)
        return;
    for (int32_t c = 0; c < kv->used_end; c++)
        if (kv->pos[c] >= 0 && (seq < 0 || cell_in(kv, c, seq)) && in_range(kv->pos[c], *p0, *p1)) {
            *p0 = 0, *p1 = -1; /* something goes: all of it goes */
            delta_net_reset(ctx->dn, seq);
            return;
        }
}

void ox_kv_seq_rm(struct ox_context *ctx, int32_t seq, int32_t p0, int32_t p1) {
    struct kv_cache *kv = &ctx->kv;
    seq_rm_recurrent(ctx, seq, &p0, &p1);
    for (int32_t c = 0; c < kv->used_end; c++) {
        if (kv->pos[c] < 0 || !in_range(kv->pos[c], p0, p1))
            continue;
        uint64_t *set = cell_seqs(kv, c), left = 0;
        if (seq < 0) /* every sequence */
            memset(set, 0, SEQ_WORDS * sizeof *set);
        else if (seq < OX_SEQ_MAX)
            set[seq / 64] &= ~(1ull << (seq % 64));
        for (int w = 0; w < SEQ_WORDS; w++)
            left |= set[w];
        if (!left)
            kv->pos[c] = -1;
    }
}

void ox_kv_seq_cp(struct ox_context *ctx, int32_t src, int32_t dst, int32_t p0, int32_t p1) {
    struct kv_cache *kv = &ctx->kv;
    int32_t n_seq = (int32_t)ctx->params.n_seq_max;
    if (src < 0 || dst < 0 || src >= n_seq || dst >= n_seq)
        return;
    for (int32_t c = 0; c < kv->used_end; c++)
        if (kv->pos[c] >= 0 && cell_in(kv, c, src) && in_range(kv->pos[c], p0, p1))
            cell_seqs(kv, c)[dst / 64] |= 1ull << (dst % 64); /* cells are shared, not copied */
    delta_net_copy(ctx->dn, src, dst); /* a state is the whole sequence's, whatever the range */
}

/* Moving a cell by delta positions rotates its cached keys by delta more (rotations add).
 * Keys of learned-position models carry no rotation; their cells just take the new positions.
 * The row goes through each stage's act.kf and batch arrays, which are free between decodes. */
static void rerope_cell(struct ox_context *ctx, int32_t c, int32_t delta) {
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
    struct kv_cache *kv = &ctx->kv;
    if (delta == 0 || seq < 0 || seq >= (int32_t)ctx->params.n_seq_max)
        return;
    for (int32_t c = 0; c < kv->used_end; c++) {
        if (kv->pos[c] < 0 || !cell_in(kv, c, seq) || !in_range(kv->pos[c], p0, p1))
            continue;
        kv->pos[c] += delta;
        if (kv->pos[c] < 0) { /* shifted out of the window: dropped, as llama.cpp does */
            cell_free(kv, c);
            continue;
        }
        rerope_cell(ctx, c, delta);
    }
}
