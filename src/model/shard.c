/* shard.c: one rank's share of a model split over ranks by attention heads and FFN rows (tensor
 * parallelism, llama.cpp's --split-mode row): q, k, v and gate, up keep their rows of the
 * rank's heads and FFN rows, wo and down the matching columns, so each rank's attention output
 * and FFN output are partial sums that the ranks add (block_reduce) before the residual. The
 * shard reads the whole model's bytes (views, nothing copied); the rest is replicated. */
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/shard.h"

/* Rows [r0, r0 + n) of a matrix, or elements of a vector (a bias, the sinks). */
static void keep_rows(struct weight *w, int64_t r0, int64_t n) {
    if (w->ne[1] > 1) {
        w->data += (size_t)r0 * w->row_bytes;
        w->ne[1] = n;
    } else { /* f32, checked at load */
        w->data += (size_t)r0 * sizeof(float);
        w->ne[0] = n, w->row_bytes = (size_t)n * sizeof(float);
    }
}

/* Columns [c0, c0 + n) of each row, the rows' stride kept; whole blocks of the type only. */
static bool keep_cols(struct weight *w, int64_t c0, int64_t n) {
    int64_t bs = ox_dtype_block_size(w->type);
    if (c0 % bs || n % bs)
        return false;
    w->data += (size_t)(c0 / bs) * ox_dtype_type_size(w->type);
    w->ne[0] = n;
    return true;
}

const char *model_shard_refusal(const struct ox_model *m, int world) {
    const struct model_config *c = &m->cfg;
    const struct arch_desc *d = c->arch;
    if (m->on_gpu)
        return "the model to split must be loaded for the CPU (n_gpu_layers = 0); its shards "
               "go to the GPUs";
    if (d->mla || c->n_recurrent || c->n_expert || d->parallel || d->attn_gate ||
        c->n_embd_per_layer || m->n_lora_slots)
        return "its architecture has layers that do not split by heads yet (latent attention, "
               "recurrent layers, experts, parallel blocks, gated heads, per-layer embeddings or "
               "LoRA targets)";
    if (c->n_head % world)
        return "its attention heads do not divide among the ranks";
    for (int32_t il = 0; il < c->n_layer; il++) {
        const struct layer_weights *l = &m->layers[il];
        const struct layer_shape *sh = &c->layer[il];
        if (l->wqkv || !l->wq || !l->wk || !l->wv || !l->wo || !l->ffn_down || !l->ffn_up)
            return "a layer has fused q, k and v, or lacks a matrix the split needs";
        if (sh->n_head_kv % world || sh->n_ff % world)
            return "a layer's kv heads or FFN rows do not divide among the ranks";
        if ((l->q_norm && l->q_norm->ne[0] != sh->head_dim_k) ||
            (l->k_norm && l->k_norm->ne[0] != sh->head_dim_k))
            return "its q or k norm spans all heads, not one";
        int64_t bs_o = ox_dtype_block_size(l->wo->type),
                bs_d = ox_dtype_block_size(l->ffn_down->type);
        if ((int64_t)c->n_head / world * sh->head_dim_v % bs_o || sh->n_ff / world % bs_d)
            return "a rank's columns of wo or of the FFN's down matrix would cut a block of its "
                   "quantization type";
    }
    return NULL;
}

/* The shard's own (mutable) entry for one of its weights. */
static struct weight *own(struct ox_model *sh, const struct weight *w) {
    return &sh->weights[w - sh->weights];
}

/* Layer il of the shard: its weights' rows and columns for the rank's heads and FFN rows; the
 * biases after wo and down added by rank 0 alone (the others' sums would add them again). */
static void split_layer(struct ox_model *sh, int il, int rank, int world) {
    const struct layer_shape *s = &sh->cfg.layer[il];
    struct layer_weights *l = &sh->layers[il];
    const int64_t heads = sh->cfg.n_head / world, kv = s->n_head_kv / world, ff = s->n_ff / world;
    const struct {
        const struct weight *w;
        int64_t first, count; /* rows */
    } rows[] = {{l->wq, rank * heads * s->head_dim_k, heads * s->head_dim_k},
                {l->bq, rank * heads * s->head_dim_k, heads * s->head_dim_k},
                {l->wk, rank * kv * s->head_dim_k, kv * s->head_dim_k},
                {l->bk, rank * kv * s->head_dim_k, kv * s->head_dim_k},
                {l->wv, rank * kv * s->head_dim_v, kv * s->head_dim_v},
                {l->bv, rank * kv * s->head_dim_v, kv * s->head_dim_v},
                {l->attn_sinks, rank * heads, heads},
                {l->ffn_gate, rank * ff, ff},
                {l->ffn_gate_b, rank * ff, ff},
                {l->ffn_up, rank * ff, ff},
                {l->ffn_up_b, rank * ff, ff}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (rows[i].w)
            keep_rows(own(sh, rows[i].w), rows[i].first, rows[i].count);
    /* whole blocks (unsplittable checked) */
    keep_cols(own(sh, l->wo), rank * heads * s->head_dim_v, heads * s->head_dim_v);
    keep_cols(own(sh, l->ffn_down), rank * ff, ff);
    if (rank != 0)
        l->bo = l->ffn_down_b = NULL;
}

/* A sliced weight whose whole the CPU keeps in a layout of its own gets that layout of its
 * share: the layout's kernels round x otherwise than those of the file's rows (a q4_0 model's
 * logits moved by KL 5e-4 between the two), and the shares must run the whole's kernels. */
static enum ox_status own_layout(struct ox_model *sh, struct weight *w) {
    const struct backend_ops *ops = w->copy_of;
    w->copy = NULL, w->copy_of = NULL;
    if (!ops)
        return OX_OK;
    struct backend_tensor t = model_file_tensor(sh, w);
    struct backend_weights bw = {0};
    t.n_bytes = (size_t)t.n_rows * t.row_bytes;
    enum ox_status st = ops->prepare_weight(&bw, &t, &w->copy);
    w->copy_of = w->copy ? ops : NULL;
    return st;
}

enum ox_status model_shard(const struct ox_model *m, int rank, int world, bool gpu,
                           struct ox_model **out) {
    *out = NULL;
    if (world < 1 || rank < 0 || rank >= world)
        return ox_fail(OX_ERR_INVALID_ARG, "model: rank %d of %d ranks", rank, world);
    const char *why = model_shard_refusal(m, world);
    if (why)
        return ox_fail(OX_ERR_UNSUPPORTED, "model: cannot split over %d ranks: %s", world, why);
    struct ox_model *sh = malloc(sizeof *sh);
    if (!sh)
        return ox_fail(OX_ERR_OOM, "model: out of memory for a shard");
    *sh = *m; /* the file, vocabulary, configuration and template, borrowed */
    sh->whole = m, sh->split = NULL;
    sh->weights = NULL, sh->layers = NULL, sh->type_row0 = NULL, sh->n_params = 0;
    enum ox_status st = model_bind_weights(sh); /* its own table, bound as the whole's was */
    if (st != OX_OK) {
        ox_model_free(sh);
        return st;
    }
    for (int64_t i = 0; i < m->gguf->n_tensors; i++) /* the CPU's layouts of the rows, shared */
        sh->weights[i].copy = m->weights[i].copy, sh->weights[i].copy_of = m->weights[i].copy_of;
    for (int32_t il = 0; il < m->cfg.n_layer; il++)
        split_layer(sh, il, rank, world);
    struct model_config *c = &sh->cfg;
    c->n_head /= world, c->n_head_kv /= world, c->n_ff /= world;
    for (int32_t il = 0; il < c->n_layer; il++)
        c->layer[il].n_head_kv /= world, c->layer[il].n_ff /= world;
    if (gpu) { /* every weight to this thread's GPU; the host's layouts stay the whole's */
        for (int64_t i = 0; i < m->gguf->n_tensors; i++)
            sh->weights[i].copy = NULL, sh->weights[i].copy_of = NULL;
        st = model_upload_weights(sh, sh->cfg.n_layer);
    }
    for (int64_t i = 0; i < m->gguf->n_tensors && !gpu && st == OX_OK; i++)
        if (sh->weights[i].data != m->weights[i].data ||
            memcmp(sh->weights[i].ne, m->weights[i].ne, sizeof m->weights[i].ne))
            st = own_layout(sh, &sh->weights[i]);
    if (st != OX_OK) {
        ox_model_free(sh);
        return st;
    }
    *out = sh;
    return OX_OK;
}
