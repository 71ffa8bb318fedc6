/* lora_bind.c: a context's LoRA adapters bound to its stages: for each stage, a delta per
 * adapter and targeted weight, chained per weight slot in the order they were set (the stage's
 * be.lora, which as_mat reads), scale = the context's times alpha / rank; a device stage gets
 * copies of A and B, A taking the RMSNorm weight its matrix has folded in there; and the room
 * the products compute in. */
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "model/context.h"
#include "model/lora.h"
#include "model/split.h"

/* The norm weight a device copy of w has taken in (weights_gpu.c's fold_norms), or NULL. */
static const float *folded_norm(const struct ox_model *m, const struct weight *w) {
    for (int32_t il = 0; il < m->cfg.n_layer; il++) {
        const struct layer_weights *l = &m->layers[il];
        if (l->attn_norm_folded && (w == l->wqkv || w == l->wq || w == l->wk || w == l->wv))
            return (const float *)l->attn_norm->data;
        if (l->ffn_norm_folded && (w == l->ffn_gate || w == l->ffn_up))
            return (const float *)l->ffn_norm->data;
    }
    return NULL;
}

static void release_stage(struct stage *st, struct context_lora_stage *ls) {
    struct backend *b = &st->be;
    b->lora = NULL;
    free(ls->deltas), free(ls->by_slot);
    if (ls->room)
        b->ops->free(b, ls->room);
    if (ls->copies)
        b->ops->free(b, ls->copies);
    *ls = (struct context_lora_stage){0};
}

void context_lora_release(struct ox_context *ctx) {
    for (int s = 0; s < ctx->n_stages; s++)
        release_stage(&ctx->stages[s], &ctx->lora_stage[s]);
    ctx->lora_gen++;
}

/* A device stage's copy of pair p's A (norm-scaled where its matrix is folded) and B at dst;
 * returns the floats after them. */
static float *upload_pair(struct backend *b, const struct ox_model *m, const struct lora_pair *p,
                          float *dst, float *tmp) {
    int64_t a_n = lora_a_rows(p) * (p->rows ? p->rank : p->target->ne[0]);
    int64_t b_n = lora_b_rows(p) * p->rank, n_in = p->target->ne[0];
    const float *g = folded_norm(m, p->target), *a = p->a;
    if (g) { /* A diag(g): the device's W diag(g) reads the norm's unweighted output */
        for (int64_t k = 0; k < p->rank; k++)
            for (int64_t i = 0; i < n_in; i++)
                tmp[k * n_in + i] = p->a[k * n_in + i] * g[i];
        a = tmp;
    }
    b->ops->upload(b, dst, a, (size_t)a_n * sizeof *a);
    b->ops->upload(b, dst + a_n, p->b, (size_t)b_n * sizeof *a);
    return dst + a_n + b_n;
}

static enum ox_status bind_stage(struct ox_context *ctx, struct stage *st,
                                 struct context_lora_stage *ls) {
    struct backend *b = &st->be;
    bool dev = b->ops->device;
    int n = 0;
    int64_t rank = 0, rows = 0, cols = 0;
    size_t copy_floats = 0;
    for (int i = 0; i < ctx->n_lora; i++)
        for (int j = 0; j < ctx->lora[i].lora->n_pairs; j++, n++) {
            const struct lora_pair *p = &ctx->lora[i].lora->pairs[j];
            rank = p->rank > rank ? p->rank : rank;
            rows = lora_b_rows(p) > rows ? lora_b_rows(p) : rows;
            cols = p->target->ne[0] > cols ? p->target->ne[0] : cols;
            copy_floats += (size_t)(p->rank * (p->target->ne[0] + p->target->ne[1]));
        }
    size_t nb = ctx->params.n_batch;
    ls->deltas = calloc((size_t)n, sizeof *ls->deltas);
    ls->by_slot = calloc(ctx->model->n_lora_slots, sizeof *ls->by_slot);
    ls->room = b->ops->alloc(b, nb * (size_t)(rank + rows) * sizeof(float));
    ls->copies = dev ? b->ops->alloc(b, copy_floats * sizeof(float)) : NULL;
    float *tmp = dev ? malloc((size_t)(rank * cols) * sizeof *tmp) : NULL;
    if (!ls->deltas || !ls->by_slot || !ls->room || (dev && (!ls->copies || !tmp))) {
        free(tmp);
        return ox_fail(OX_ERR_OOM, "lora: no memory for the context's adapters");
    }
    struct mat_lora *d = ls->deltas;
    float *at_copy = ls->copies;
    for (int i = 0; i < ctx->n_lora; i++)
        for (int j = 0; j < ctx->lora[i].lora->n_pairs; j++, d++) {
            const struct lora_pair *p = &ctx->lora[i].lora->pairs[j];
            int64_t a_cols = p->rows ? p->rank : p->target->ne[0];
            const float *a = p->a, *bm = p->b;
            if (dev) {
                a = at_copy, bm = at_copy + lora_a_rows(p) * a_cols;
                at_copy = upload_pair(b, ctx->model, p, at_copy, tmp);
            }
            d->a = (struct mat){OX_DTYPE_F32, a,   lora_a_rows(p), a_cols, (size_t)a_cols * 4,
                                NULL,         NULL};
            d->b = (struct mat){OX_DTYPE_F32, bm,  lora_b_rows(p), p->rank, (size_t)p->rank * 4,
                                NULL,         NULL};
            d->rows = p->rows;
            d->scale = lora_pair_scale(ctx->lora[i].lora, p, ctx->lora[i].scale);
            d->t = ls->room, d->d = ls->room + nb * (size_t)rank;
            const struct mat_lora **at = &ls->by_slot[p->target->lora_slot - 1];
            while (*at) /* adapters in the order they were set */
                at = (const struct mat_lora **)&(*at)->next;
            *at = d;
        }
    free(tmp);
    b->lora = ls->by_slot;
    return OX_OK;
}

static enum ox_status context_lora_bind(struct ox_context *ctx) {
    context_lora_release(ctx);
    enum ox_status st = OX_OK;
    for (int s = 0; s < ctx->n_stages && ctx->n_lora && st == OX_OK; s++)
        st = bind_stage(ctx, &ctx->stages[s], &ctx->lora_stage[s]);
    if (st != OX_OK)
        context_lora_release(ctx);
    return st;
}

enum ox_status ox_context_set_lora(struct ox_context *ctx, struct ox_lora *lora, float scale) {
    if (ctx && ctx->split) /* each rank its share (split_lora.c) */
        return lora ? split_set_lora(ctx, lora, scale)
                    : ox_fail(OX_ERR_INVALID_ARG, "lora: no adapter given");
    if (!ctx || !lora || lora->model != ctx->model)
        return ox_fail(OX_ERR_INVALID_ARG, "lora: the adapter was loaded for another model");
    int i = 0;
    while (i < ctx->n_lora && ctx->lora[i].lora != lora)
        i++;
    if (i == ctx->n_lora && scale != 0.0f) {
        if (ctx->n_lora == MAT_LORA_MAX)
            return ox_fail(OX_ERR_INVALID_ARG, "lora: at most %d adapters at once", MAT_LORA_MAX);
        ctx->n_lora++;
    }
    if (scale != 0.0f) {
        ctx->lora[i] = (struct context_lora){lora, scale};
    } else if (i < ctx->n_lora) { /* scale 0: removed */
        memmove(&ctx->lora[i], &ctx->lora[i + 1],
                (size_t)(ctx->n_lora - i - 1) * sizeof ctx->lora[0]);
        ctx->n_lora--;
    }
    enum ox_status st = context_lora_bind(ctx);
    if (st != OX_OK)
        ctx->n_lora = 0;
    return st;
}

void ox_context_clear_lora(struct ox_context *ctx) {
    if (!ctx)
        return;
    if (ctx->split) {
        split_set_lora(ctx, NULL, 0.0f);
        return;
    }
    ctx->n_lora = 0;
    context_lora_release(ctx);
}
