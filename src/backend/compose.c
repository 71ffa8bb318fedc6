/* compose.c: each optional op of the table, fused where the backend has it, composed of the
 * primitives otherwise (as SQLite's os.c wraps its VFS): the one place that asks. */
#include "backend/compose.h"

void compose_lora_add(struct backend *b, const struct mat *w, const float *x, float *y, int n) {
    for (const struct mat_lora *l = w->lora; l; l = l->next) {
        if (l->rows) /* an embedding's (a tied output matrix takes none) */
            continue;
        b->ops->matmul(b, &l->a, x, l->t, n);
        b->ops->matmul(b, &l->b, l->t, l->d, n);
        b->ops->axpy(b, y, l->d, l->scale, (size_t)n * (size_t)w->n_rows);
    }
}

const struct mat_lora *compose_lora_slice(const struct mat_lora *l, bool rows, int64_t off,
                                          int64_t len, struct mat_lora *out) {
    struct mat_lora *head = NULL, **at = &head;
    for (int i = 0; l && i < MAT_LORA_MAX; l = l->next, i++) {
        out[i] = *l;
        if (rows) { /* B's rows */
            out[i].b.data = (const uint8_t *)l->b.data + (size_t)off * l->b.row_bytes;
            out[i].b.n_rows = len;
        } else { /* A's columns (A is f32) */
            out[i].a.data = (const float *)l->a.data + off;
            out[i].a.n_cols = len;
        }
        out[i].next = NULL;
        *at = &out[i], at = (struct mat_lora **)&out[i].next;
    }
    return head;
}

void compose_get_rows(struct backend *b, const struct mat *w, const int32_t *ids, float *y, int n) {
    b->ops->get_rows(b, w, ids, y, n);
    for (const struct mat_lora *l = w->lora; l; l = l->next) {
        if (!l->rows)
            continue;
        b->ops->get_rows(b, &l->a, ids, l->t, n);
        b->ops->matmul(b, &l->b, l->t, l->d, n);
        b->ops->axpy(b, y, l->d, l->scale, (size_t)n * (size_t)w->n_cols);
    }
}

void compose_matmul(struct backend *b, const struct mat *w, const float *x, float *y, int n) {
    b->ops->matmul(b, w, x, y, n);
    compose_lora_add(b, w, x, y, n);
}

void compose_matmul_add(struct backend *b, const struct mat *w, const float *x, float *y, int n,
                        float *tmp) {
    if (b->ops->matmul_add && b->ops->matmul_add(b, w, x, y, n)) {
        compose_lora_add(b, w, x, y, n);
        return;
    }
    compose_matmul(b, w, x, tmp, n);
    b->ops->add(b, y, tmp, (size_t)n * (size_t)w->n_rows);
}

/* The RMSNorm of n rows of x into normed: the input the fusions would have taken it in for. */
static const float *normed_input(struct backend *b, const float *x, const struct norm_in *norm,
                                 int n, int64_t cols, float *normed) {
    b->ops->rms_norm(b, x, norm->w, normed, n, (int)cols, norm->eps);
    return normed;
}

void compose_matmul_multi(struct backend *b, int count, const struct mat *w, const float *x,
                          const struct norm_in *norm, float *const *y, int n, float *normed) {
    bool fuses = b->ops->matmul_multi != NULL;
    for (int m = 0; m < count; m++)
        fuses = fuses && !w[m].lora; /* a delta joins each product as it comes */
    if (fuses && b->ops->matmul_multi(b, count, w, x, norm, y, n))
        return;
    if (norm) { /* the norm first, then perhaps the fusion without it */
        x = normed_input(b, x, norm, n, w[0].n_cols, normed);
        if (fuses && b->ops->matmul_multi(b, count, w, x, NULL, y, n))
            return;
    }
    for (int m = 0; m < count; m++)
        compose_matmul(b, &w[m], x, y[m], n);
}

void compose_matmul_glu(struct backend *b, enum glu_kind kind, const struct mat *gate,
                        const struct mat *up, const float *x, const struct norm_in *norm, float *y,
                        int n, float *normed, float *gate_out, float *up_out) {
    bool fuses = b->ops->matmul_glu != NULL && !gate->lora && !up->lora;
    if (fuses && b->ops->matmul_glu(b, kind, gate, up, x, norm, y, n))
        return;
    if (norm) {
        x = normed_input(b, x, norm, n, gate->n_cols, normed);
        if (fuses && b->ops->matmul_glu(b, kind, gate, up, x, NULL, y, n))
            return;
    }
    /* gate and up as one multi-product where the backend takes them so (vk_matmul.c's cm2_pair) */
    struct mat both[2] = {*gate, *up};
    float *outs[2] = {gate_out, up_out};
    compose_matmul_multi(b, 2, both, x, NULL, outs, n, normed);
    b->ops->glu(b, kind, gate_out, up_out, y, (size_t)n * (size_t)gate->n_rows);
}

void compose_rope_store(struct backend *b, const struct rope_store_args *a) {
    if (b->ops->rope_store && b->ops->rope_store(b, a))
        return;
    b->ops->rope(b, a->q, a->pos, a->n, a->n_head, a->hd_k, a->rope);
    b->ops->rope(b, a->k, a->pos, a->n, a->n_head_kv, a->hd_k, a->rope);
    b->ops->cache_store(b, a->cache_type, a->k, a->n, a->n_head_kv * a->hd_k, a->k_cache, a->k_row,
                        a->cells);
    b->ops->cache_store(b, a->cache_type, a->v, a->n, a->n_head_kv * a->hd_v, a->v_cache, a->v_row,
                        a->cells);
}

void compose_attention(struct backend *b, struct attn_args *a, const struct cache_layer *c) {
    if (b->ops->attention_reads_cache) {
        a->k = a->v = NULL;
        a->k_cache = c->k, a->v_cache = c->v;
        a->cache_type = c->type, a->k_row = c->k_row, a->v_row = c->v_row;
    } else {
        b->ops->cache_load(b, c->type, c->k, c->k_row, c->kf, a->n_cells, c->dk, c->cell_pos);
        b->ops->cache_load(b, c->type, c->v, c->v_row, c->vf, a->n_cells, c->dv, c->cell_pos);
        a->k = c->kf, a->v = c->vf;
    }
    b->ops->attention(b, a);
}

bool compose_moe_ffn(struct backend *b, struct moe_args *a) {
    return b->ops->moe_ffn && b->ops->moe_ffn(b, a);
}

bool compose_graph_begin(struct backend *b, uint64_t key) {
    return b->ops->graph_begin && b->ops->graph_begin(b, key);
}

void compose_graph_end(struct backend *b) {
    if (b->ops->graph_end)
        b->ops->graph_end(b);
}
