/* split_lora.c: LoRA adapters on a split model's contexts. An adapter is loaded for the whole
 * model; each rank applies its share, made on the rank's thread the first time one of its
 * contexts asks for it and kept with the rank's shard: for a matrix the rank holds some rows of
 * (q, k, v, gate, up), those rows of B; for one it holds some columns of (wo, down), those
 * columns of A, its B A x then joining the ranks' sum as the matrix's own product does; for a
 * matrix it holds a copy of spans of (fused q, k, v or gate | up), those rows of B one after
 * another; whole pairs for the rest (a rank's layers of a split by layers). Ranks in other
 * processes get the adapter itself (lora_gguf_bytes) with the first call that names it, keep a
 * copy with their whole model, and cut their shares from it the same way. */
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "gguf/gguf.h"
#include "model/lora.h"
#include "model/shard.h"
#include "model/split.h"
#include "quant/dtype.h"

/* A copy of n floats at src, or NULL. */
static float *copy_floats(const float *src, size_t n) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (p)
        memcpy(p, src, n * sizeof *p);
    return p;
}

/* A copy of the rows of B ([n_out][r]) in g's spans (g->cols: of A's ([r][n_in]) columns in
 * them, for each of its r rows), one after another as the shard's matrix holds them. */
static float *gather_pair(const struct lora_pair *p, const struct shard_gather *g) {
    const int64_t r = p->rank, n_in = p->target->ne[0];
    int64_t total = 0;
    for (int i = 0; i < g->n; i++)
        total += g->span[i][1];
    float *out = malloc((size_t)(total * r) * sizeof *out), *at = out;
    for (int64_t k = 0; out && k < (g->cols ? r : 1); k++)
        for (int i = 0; i < g->n; i++) {
            const int64_t first = g->span[i][0], count = g->span[i][1];
            if (g->cols)
                memcpy(at, p->a + k * n_in + first, (size_t)count * sizeof *at), at += count;
            else
                memcpy(at, p->b + first * r, (size_t)(count * r) * sizeof *at), at += count * r;
        }
    return out;
}

/* Pair p of the whole's adapter as the rank's shard sh holds its matrix t (the whole's w): its
 * rows, its columns, spans of either (a fused q, k, v or gate | up, a delta-net layer's
 * output), or all of it. */
static enum ox_status share_pair(const struct ox_model *sh, const struct lora_pair *p,
                                 struct weight *t, struct lora_pair *out) {
    const struct weight *w = p->target;
    const int64_t r = p->rank, n_in = w->ne[0];
    *out = (struct lora_pair){.target = t, .rank = r, .rows = p->rows};
    const bool same = t->data == w->data && t->ne[0] == w->ne[0] && t->ne[1] == w->ne[1];
    const size_t all = (size_t)w->ne[1] * w->row_bytes, at = (size_t)(t->data - w->data);
    const struct shard_gather *g = p->rows ? NULL : shard_gather_of(sh, t);
    if (g) {
        out->a = g->cols ? gather_pair(p, g) : copy_floats(p->a, (size_t)(r * n_in));
        out->b = g->cols ? copy_floats(p->b, (size_t)(lora_b_rows(p) * r)) : gather_pair(p, g);
    } else if (p->rows || same) {
        out->a = copy_floats(p->a, (size_t)(lora_a_rows(p) * (p->rows ? r : n_in)));
        out->b = copy_floats(p->b, (size_t)(lora_b_rows(p) * r));
    } else if (t->data >= w->data && at < all && t->ne[0] == w->ne[0] && at % w->row_bytes == 0) {
        const int64_t r0 = (int64_t)(at / w->row_bytes); /* its rows: B's */
        out->a = copy_floats(p->a, (size_t)(r * n_in));
        out->b = copy_floats(p->b + r0 * r, (size_t)(t->ne[1] * r));
    } else if (t->data >= w->data && at < w->row_bytes && t->ne[1] == w->ne[1]) {
        const int64_t c0 = (int64_t)(at / ox_dtype_type_size(w->type)) *
                           ox_dtype_block_size(w->type); /* its columns: A's */
        out->a = malloc((size_t)(r * t->ne[0]) * sizeof *out->a);
        for (int64_t k = 0; out->a && k < r; k++)
            memcpy(out->a + k * t->ne[0], p->a + k * n_in + c0, (size_t)t->ne[0] * sizeof(float));
        out->b = copy_floats(p->b, (size_t)(lora_b_rows(p) * r));
    } else {
        return ox_fail(OX_ERR_UNSUPPORTED,
                       "lora: the split model holds '%s' in a way its "
                       "adapter's share cannot follow",
                       w->name);
    }
    if (!out->a || !out->b) {
        free(out->a), free(out->b);
        out->a = out->b = NULL;
        return ox_fail(OX_ERR_OOM, "lora: no memory for a rank's share of an adapter");
    }
    return OX_OK;
}

/* The rank's share of the whole's adapter l, made (and kept in sh's adapters) if not yet. */
static enum ox_status rank_share(struct ox_model *sh, const struct ox_lora *l,
                                 struct ox_lora **out) {
    for (struct ox_lora *s = sh->loras; s; s = s->next)
        if (s->share_of == l->id) {
            *out = s;
            return OX_OK;
        }
    struct ox_lora *s = calloc(1, sizeof *s);
    struct lora_pair *pairs = calloc((size_t)l->n_pairs, sizeof *pairs);
    enum ox_status st = s && pairs ? OX_OK : ox_fail(OX_ERR_OOM, "lora: no memory");
    for (int i = 0; st == OX_OK && i < l->n_pairs; i++) {
        const struct lora_pair *p = &l->pairs[i];
        struct weight *t = &sh->weights[p->target - l->model->weights]; /* the same table */
        st = share_pair(sh, p, t, &pairs[i]);
        t->lora_slot = p->target->lora_slot; /* the whole's numbering */
    }
    if (st != OX_OK) {
        for (int i = 0; pairs && i < l->n_pairs; i++)
            free(pairs[i].a), free(pairs[i].b);
        free(pairs), free(s);
        return st;
    }
    *s = (struct ox_lora){.model = sh,
                          .alpha = l->alpha,
                          .n_pairs = l->n_pairs,
                          .pairs = pairs,
                          .next = sh->loras,
                          .id = lora_next_id(),
                          .share_of = l->id};
    sh->loras = s;
    if (sh->n_lora_slots < l->model->n_lora_slots)
        sh->n_lora_slots = l->model->n_lora_slots;
    *out = s;
    return OX_OK;
}

/* On a rank of another process than rank 0's: its copy of rank 0's adapter `id`, read from the
 * call's bytes (the GGUF file lora_gguf_bytes wrote) the first time, then kept with the whole
 * model as one ox_lora_load made. */
static enum ox_status copy_of_rank0s(struct ox_model *whole, uint64_t id, const uint8_t *bytes,
                                     size_t n, const struct ox_lora **out) {
    for (const struct ox_lora *l = whole->loras; l; l = l->next)
        if (l->origin == id) {
            *out = l;
            return OX_OK;
        }
    if (!bytes || n == 0)
        return ox_fail(OX_ERR_FORMAT, "lora: rank 0's adapter %llu never came here",
                       (unsigned long long)id);
    struct ox_gguf *g = NULL;
    struct ox_lora *l = NULL;
    enum ox_status st = gguf_parse(bytes, n, &g);
    if (st == OX_OK)
        st = lora_from_gguf(whole, g, &l);
    gguf_free(g);
    if (st == OX_OK)
        l->origin = id, *out = l;
    return st;
}

enum ox_status split_lora_call(struct ox_context *ctx, struct ox_model *sh,
                               const struct split_call *c, const uint8_t *bytes, size_t n) {
    const struct ox_lora *lora = c->lora;
    float scale = c->lora_scale;
    const uint64_t id = (uint64_t)(uint32_t)c->a[0] | (uint64_t)(uint32_t)c->a[1] << 32;
    if (!lora && id) { /* rank 0's adapter, named on the wire */
        memcpy(&scale, &c->a[2], sizeof scale);
        OX_TRY(copy_of_rank0s((struct ox_model *)sh->whole, id, bytes, n, &lora));
    }
    return split_lora_apply(ctx, sh, lora, scale);
}

enum ox_status split_lora_apply(struct ox_context *ctx, struct ox_model *sh,
                                const struct ox_lora *lora, float scale) {
    if (!lora) {
        ox_context_clear_lora(ctx);
        return OX_OK;
    }
    struct ox_lora *share = NULL;
    OX_TRY(rank_share(sh, lora, &share));
    return ox_context_set_lora(ctx, share, scale);
}

enum ox_status split_set_lora(struct ox_context *ctx, struct ox_lora *lora, float scale) {
    struct split_context *sc = ctx->split;
    if (lora && lora->model != sc->model)
        return ox_fail(OX_ERR_INVALID_ARG, "lora: the adapter was loaded for another model");
    struct split_call c = {.kind = SPLIT_LORA, .ctx = sc->id, .lora = lora, .lora_scale = scale};
    /* ranks of other processes: its id and scale, and the first time the adapter itself */
    const uint64_t id = lora ? lora->id : 0;
    c.a[0] = (int32_t)(uint32_t)id, c.a[1] = (int32_t)(uint32_t)(id >> 32);
    memcpy(&c.a[2], &scale, sizeof scale);
    uint8_t *bytes = NULL;
    size_t n = 0;
    /* (two threads setting it at once may both send it: the copies are kept by id) */
    if (sc->sp->dist && lora && !__atomic_load_n(&lora->wired, __ATOMIC_ACQUIRE))
        OX_TRY(lora_gguf_bytes(lora, &bytes, &n));
    c.buf = bytes;
    for (int r = 0; r < SPLIT_MAX; r++)
        c.size[r] = n, c.at[r] = 0;
    ctx->split = NULL; /* rank 0's context then applies its share as a whole model's would */
    enum ox_status st = split_call_run(sc->sp, sc->rank, &c);
    ctx->split = sc;
    if (st == OX_OK && bytes) /* every rank has its copy now */
        __atomic_store_n(&lora->wired, true, __ATOMIC_RELEASE);
    free(bytes);
    return st;
}
