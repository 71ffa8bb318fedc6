/* shard.c: one rank's share of a model split over ranks by attention heads and FFN rows (tensor
 * parallelism, llama.cpp's --split-mode row), in proportion to the ranks' shares: q, k, v and
 * gate, up (and every expert's) keep their rows of the rank's heads and FFN rows, wo and down
 * the matching columns, so each rank's attention output and FFN output are partial sums that
 * the ranks add (block_reduce) before the residual. The shard views the whole model's bytes,
 * but for fused matrices and experts, whose share is no single span of rows (copied); the rest
 * is replicated (latent attention's cached latent too: a rank takes its heads' queries). */
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

/* Bytes of memory the shard owns (freed with it: ox_model_free), or NULL. */
static uint8_t *shard_buffer(struct ox_model *sh, size_t bytes) {
    uint8_t **list = realloc(sh->shard_rows, (size_t)(sh->n_shard_rows + 1) * sizeof *list);
    uint8_t *buf = malloc(bytes ? bytes : 1);
    if (list)
        sh->shard_rows = list;
    if (!list || !buf) {
        free(buf);
        return NULL;
    }
    return sh->shard_rows[sh->n_shard_rows++] = buf;
}

/* Spans of the whole's rows or columns that the shard's matrix w is copied from, noted for
 * LoRA's shares. False: out of memory. */
static bool note_gather(struct ox_model *sh, const struct weight *w, bool cols,
                        const int64_t (*span)[2], int n) {
    struct shard_gather *list =
        realloc(sh->gathers, (size_t)(sh->n_gathers + 1) * sizeof *sh->gathers);
    int64_t(*copy)[2] = malloc((size_t)n * sizeof *copy);
    if (list)
        sh->gathers = list;
    if (!list || !copy) {
        free(copy);
        return false;
    }
    memcpy(copy, span, (size_t)n * sizeof *copy);
    sh->gathers[sh->n_gathers++] = (struct shard_gather){w, cols, n, copy};
    return true;
}

const struct shard_gather *shard_gather_of(const struct ox_model *sh, const struct weight *w) {
    for (int i = 0; i < sh->n_gathers; i++)
        if (sh->gathers[i].w == w)
            return &sh->gathers[i];
    return NULL;
}

/* Spans of rows {first, count} of a matrix (or elements of a vector; of the experts' matrices
 * as one, the same rows of each), one after another in a copy the shard owns: a fused matrix's
 * share (q, k and v; gate and up; every expert's rows) is not one span of the whole's rows.
 * False: out of memory. */
static bool gather_rows(struct ox_model *sh, struct weight *w, const int64_t (*span)[2], int n) {
    const bool vec = w->ne[1] <= 1;
    const size_t unit = vec ? sizeof(float) : w->row_bytes;
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        total += span[i][1];
    uint8_t *buf = shard_buffer(sh, (size_t)total * unit);
    if (!buf || (!vec && w->ne[2] * w->ne[3] == 1 && !note_gather(sh, w, false, span, n)))
        return false;
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        memcpy(buf + at, w->data + (size_t)span[i][0] * unit, (size_t)span[i][1] * unit);
        at += (size_t)span[i][1] * unit;
    }
    w->data = buf;
    if (vec)
        w->ne[0] = total, w->row_bytes = (size_t)total * sizeof(float);
    else /* experts' matrices: the spans are the same rows of each */
        w->ne[1] = total / (w->ne[2] * w->ne[3]);
    return true;
}

/* Columns [c0, c0 + n) of each row of a float table (an expert's bias a row), packed into a
 * copy the shard owns. False: out of memory. */
static bool gather_cols(struct ox_model *sh, struct weight *w, int64_t c0, int64_t n) {
    const int64_t rows = w->ne[1] * w->ne[2] * w->ne[3],
                  ne[4] = {w->ne[0], w->ne[1], w->ne[2], w->ne[3]};
    int64_t(*spans)[2] = rows <= INT32_MAX ? malloc((size_t)rows * sizeof *spans) : NULL;
    for (int64_t r = 0; spans && r < rows; r++)
        spans[r][0] = r * w->ne[0] + c0, spans[r][1] = n;
    w->ne[1] = w->ne[2] = w->ne[3] = 1; /* as a vector of its elements */
    const bool ok = spans && gather_rows(sh, w, spans, (int)rows);
    free(spans);
    w->ne[0] = ok ? n : ne[0], w->ne[1] = ne[1], w->ne[2] = ne[2], w->ne[3] = ne[3];
    w->row_bytes = (size_t)w->ne[0] * sizeof(float);
    return ok;
}

/* Spans of columns {first, count} of each row of a matrix, one after another in a copy the
 * shard owns (a delta-net layer's output columns of its value heads); whole blocks of the type
 * (recurrent_refusal checked). False: out of memory. */
static bool gather_col_spans(struct ox_model *sh, struct weight *w, const int64_t (*span)[2],
                             int n) {
    const int64_t bs = ox_dtype_block_size(w->type);
    const size_t ts = ox_dtype_type_size(w->type);
    int64_t cols = 0;
    for (int i = 0; i < n; i++)
        cols += span[i][1];
    const size_t row_bytes = (size_t)(cols / bs) * ts;
    uint8_t *buf = shard_buffer(sh, row_bytes * (size_t)w->ne[1]);
    if (!buf || !note_gather(sh, w, true, span, n))
        return false;
    for (int64_t r = 0; r < w->ne[1]; r++)
        for (int i = 0, at = 0; i < n; at += (int)(span[i][1] / bs * (int64_t)ts), i++)
            memcpy(buf + (size_t)r * row_bytes + at,
                   w->data + (size_t)r * w->row_bytes + (size_t)(span[i][0] / bs) * ts,
                   (size_t)(span[i][1] / bs) * ts);
    w->data = buf, w->ne[0] = cols, w->row_bytes = row_bytes;
    return true;
}

/* Matrices [m0, m0 + n) of a 3-D weight (latent attention's per-head k_b and v_b). */
static void keep_mats(struct weight *w, int64_t m0, int64_t n) {
    w->data += (size_t)m0 * (size_t)w->ne[1] * w->row_bytes;
    w->ne[2] = n;
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

/* Where world ranks' parts of `units` whole units end, in proportion to the shares (NULL or
 * none above 0: equal), each part at least one unit: b[0] = 0 .. b[world] = units. Equal shares
 * of units that divide give every rank units / world. */
static void share_bounds(const float *share, int world, int64_t units, int64_t *b) {
    double total = 0, before = 0;
    bool any = false;
    for (int r = 0; share && r < world; r++)
        any |= share[r] > 0.0f;
    for (int r = 0; r < world; r++)
        total += any ? (share[r] > 0.0f ? share[r] : 0.0) : 1.0;
    b[0] = 0;
    for (int r = 1; r <= world; r++) {
        before += any ? (share[r - 1] > 0.0f ? share[r - 1] : 0.0) : 1.0;
        int64_t e = r == world ? units : (int64_t)((double)units * before / total + 0.5);
        int64_t lo = b[r - 1] + 1, hi = units - (world - r); /* room for the parts after */
        b[r] = r == world ? units : e < lo ? lo : e > hi ? hi : e;
    }
}

/* Rank's part of layer il: its kv heads (and so its query heads, whole groups of them), its
 * FFN rows, its rows of every expert and of the shared expert (whole blocks of their down
 * matrices' types, as those matrices' columns are cut). */
struct shard_cut {
    int64_t kv0, kv, head0, heads, ff0, ff, exp0, exp, sh0, sh;
    int64_t dk0, dk; /* a delta-net layer's key heads */
    /* a Mamba-2 layer's heads and groups of B and C (the one group, where there is one) */
    int64_t mh0, mh, mg0, mg;
};

/* The most value heads per key head a delta-net layer splits with (Qwen 3.5: 2). */
#define DN_RATIO_MAX 8

/* The first layer with attention (its cut gives every layer's query heads), or -1. */
static int32_t first_attention(const struct ox_model *m) {
    for (int32_t il = 0; il < m->cfg.n_layer; il++)
        if (!m->cfg.is_recurrent[il])
            return il;
    return -1;
}

/* Rank's span of `rows` rows cut in whole blocks of down's type (a layer without down: all). */
static void cut_rows(const struct weight *down, int64_t rows, const float *share, int world,
                     int rank, int64_t *first, int64_t *count) {
    int64_t b[SHARD_MAX + 1], unit = down ? ox_dtype_block_size(down->type) : 0;
    if (!unit) {
        *first = 0, *count = rows;
        return;
    }
    share_bounds(share, world, rows / unit, b);
    *first = b[rank] * unit, *count = (b[rank + 1] - b[rank]) * unit;
}

static struct shard_cut layer_cut(const struct ox_model *m, const float *share, int world, int rank,
                                  int32_t il) {
    const struct layer_shape *sh = &m->cfg.layer[il];
    const struct layer_weights *l = &m->layers[il];
    int64_t b[SHARD_MAX + 1];
    struct shard_cut c = {0};
    const int32_t attn = first_attention(m);
    if (m->cfg.is_recurrent[il]) { /* its heads; the query heads of the attention layers */
        if (attn >= 0)
            c = layer_cut(m, share, world, rank, attn);
        const int64_t groups = m->cfg.ssm_groups,
                      per_group = groups ? m->cfg.ssm_heads / groups : 0;
        if (!m->cfg.arch->mamba2) {
            share_bounds(share, world, m->cfg.dn_k_heads, b);
            c.dk0 = b[rank], c.dk = b[rank + 1] - b[rank];
        } else if (groups == 1) { /* heads, B and C for all */
            share_bounds(share, world, m->cfg.ssm_heads, b);
            c.mh0 = b[rank], c.mh = b[rank + 1] - b[rank], c.mg0 = 0, c.mg = 1;
        } else { /* whole groups and their heads */
            share_bounds(share, world, groups, b);
            c.mg0 = b[rank], c.mg = b[rank + 1] - b[rank];
            c.mh0 = c.mg0 * per_group, c.mh = c.mg * per_group;
        }
    } else if (m->cfg.arch->mla) { /* one latent "head" cached for all: each rank keeps all of it */
        share_bounds(share, world, m->cfg.n_head, b);
        c.kv0 = 0, c.kv = sh->n_head_kv;
        c.head0 = b[rank], c.heads = b[rank + 1] - b[rank];
    } else {
        const int64_t group = m->cfg.n_head / sh->n_head_kv;
        share_bounds(share, world, sh->n_head_kv, b);
        c.kv0 = b[rank], c.kv = b[rank + 1] - b[rank];
        c.head0 = c.kv0 * group, c.heads = c.kv * group;
    }
    cut_rows(l->ffn_down, sh->n_ff, share, world, rank, &c.ff0, &c.ff);
    cut_rows(l->ffn_down_exps, m->cfg.n_ff_exp, share, world, rank, &c.exp0, &c.exp);
    cut_rows(l->ffn_down_shexp, m->cfg.n_ff_shexp, share, world, rank, &c.sh0, &c.sh);
    return c;
}

/* Why a MoE layer cannot be cut so, or NULL: its experts' gate, up and down apart (a shared
 * expert's too), no dense FFN beside them; a block of each expert's rows (and of the shared
 * expert's) for every rank, cut alike in every layer (the shard's n_ff_exp, n_ff_shexp). */
static const char *moe_refusal(const struct ox_model *m, const float *share, int world,
                               int32_t il) {
    const struct layer_weights *l = &m->layers[il];
    if (!l->ffn_gate_exps || !l->ffn_up_exps || !l->ffn_down_exps ||
        (l->ffn_up_shexp && (!l->ffn_gate_shexp || !l->ffn_down_shexp)))
        return "its experts have fused or missing matrices";
    if (m->cfg.n_ff_exp / ox_dtype_block_size(l->ffn_down_exps->type) < world ||
        (l->ffn_down_shexp &&
         m->cfg.n_ff_shexp / ox_dtype_block_size(l->ffn_down_shexp->type) < world))
        return "its experts' FFN rows do not divide among the ranks";
    int32_t first = 0; /* the first MoE layer, which every other must be cut as */
    while (!m->layers[first].ffn_down_exps)
        first++;
    for (int r = 0; r < world; r++) {
        struct shard_cut c = layer_cut(m, share, world, r, il),
                         f = layer_cut(m, share, world, r, first);
        if (f.exp0 != c.exp0 || f.exp != c.exp || f.sh0 != c.sh0 || f.sh != c.sh)
            return "its layers' experts would be cut otherwise (their types differ)";
    }
    return NULL;
}

/* Why Mamba-2 layer il cannot be cut so, or NULL: a group of B and C for every rank, or one for
 * all (whose norm then spans every rank's heads: block_norm_ranks), and the output matrix's
 * columns of a rank's heads in whole blocks of its type. */
static const char *mamba2_refusal(const struct ox_model *m, const float *share, int world,
                                  int32_t il) {
    const struct layer_weights *l = &m->layers[il];
    const struct model_config *c = &m->cfg;
    if (!l->ssm_in || !l->dn_conv || !l->ssm_dt_b || !l->ssm_a || !l->ssm_d || !l->ssm_norm ||
        !l->ssm_out)
        return "a recurrent layer lacks a matrix the split needs";
    if (c->ssm_groups == 1 ? c->ssm_heads < world : c->ssm_groups < world)
        return "its Mamba-2 groups (or heads) do not divide among the ranks (fewer than the "
               "ranks)";
    const int64_t bs = ox_dtype_block_size(l->ssm_out->type), hd = c->ssm_inner / c->ssm_heads;
    for (int r = 0; r < world; r++) {
        struct shard_cut cut = layer_cut(m, share, world, r, il);
        if (cut.mh0 * hd % bs || cut.mh * hd % bs)
            return "a rank's columns of ssm_out would cut a block of its quantization type";
    }
    return NULL;
}

/* Why recurrent layer il cannot be cut so, or NULL: a Mamba-2 layer as mamba2_refusal says, a
 * delta-net layer with a key head for every rank, value heads a small multiple of them, and its
 * output matrix's columns of a rank's value heads in whole blocks of their type. */
static const char *recurrent_refusal(const struct ox_model *m, const float *share, int world,
                                     int32_t il) {
    const struct layer_weights *l = &m->layers[il];
    const struct model_config *c = &m->cfg;
    if (c->arch->mamba2)
        return mamba2_refusal(m, share, world, il);
    if (!l->dn_qkv || !l->dn_z || !l->dn_out || !l->dn_beta || !l->dn_alpha || !l->dn_conv ||
        !l->dn_dt_bias || !l->dn_a)
        return "a recurrent layer lacks a matrix the split needs";
    if (c->dn_k_heads < world)
        return "its recurrent layers' key heads do not divide among the ranks (fewer than the "
               "ranks)";
    if (c->dn_v_heads % c->dn_k_heads || c->dn_v_heads / c->dn_k_heads > DN_RATIO_MAX)
        return "its recurrent layers' value heads are not a small multiple of their key heads";
    const int64_t bs = ox_dtype_block_size(l->dn_out->type), d = c->dn_state;
    for (int r = 0; r < world; r++) {
        struct shard_cut cut = layer_cut(m, share, world, r, il);
        for (int64_t j = 0; j < c->dn_v_heads / c->dn_k_heads; j++) /* split_delta_net's spans */
            if ((j * c->dn_k_heads + cut.dk0) * d % bs || cut.dk * d % bs)
                return "a rank's columns of ssm_out would cut a block of its quantization type";
    }
    return NULL;
}

/* Why layer il cannot be cut so, or NULL: every rank needs a kv head and a block of FFN rows,
 * the same query heads in every layer (the shard's n_head), and wo's columns of its heads in
 * whole blocks of wo's type. */
static const char *layer_refusal(const struct ox_model *m, const float *share, int world,
                                 int32_t il) {
    const struct layer_weights *l = &m->layers[il];
    const struct layer_shape *sh = &m->cfg.layer[il];
    const bool mla = m->cfg.arch->mla, recurrent = m->cfg.is_recurrent[il];
    /* a layer on another's cache has no k or v of its own; v may be k's copy (Gemma 4) */
    const bool kv_own = sh->kv_layer == il, v_from_k = m->cfg.arch->v_may_be_k;
    if ((!recurrent &&
         ((mla ? (!l->wq && !l->wq_b) || !l->wkv_a || !l->wk_b || !l->wv_b
               : !l->wqkv && (!l->wq || (kv_own && (!l->wk || (!l->wv && !v_from_k))))) ||
          !l->wo)) ||
        (!l->ffn_gate_inp && (!l->ffn_down || !l->ffn_up)))
        return "a layer lacks a matrix the split needs";
    const char *why = recurrent ? recurrent_refusal(m, share, world, il) : NULL;
    if (why)
        return why;
    if (!recurrent && (mla ? m->cfg.n_head < world : sh->n_head_kv < world))
        return "its kv heads do not divide among the ranks (fewer than the ranks)";
    const char *moe = l->ffn_gate_inp ? moe_refusal(m, share, world, il) : NULL;
    if (moe)
        return moe;
    if (l->ffn_down && sh->n_ff / ox_dtype_block_size(l->ffn_down->type) < world)
        return "its FFN rows do not divide among the ranks";
    if (recurrent)
        return NULL;
    /* a norm over all heads gathers the ranks' heads first (block_norm_ranks) */
    const int64_t q_all = (int64_t)m->cfg.n_head * sh->head_dim_k,
                  k_all = (int64_t)sh->n_head_kv * sh->head_dim_k;
    if ((l->q_norm && l->q_norm->ne[0] != sh->head_dim_k && l->q_norm->ne[0] != q_all) ||
        (l->k_norm && l->k_norm->ne[0] != sh->head_dim_k && l->k_norm->ne[0] != k_all))
        return "its q or k norm is neither a head's nor all heads' wide";
    int64_t bs_o = ox_dtype_block_size(l->wo->type), dv = mla ? m->cfg.mla_head_v : sh->head_dim_v;
    for (int r = 0; r < world; r++) {
        struct shard_cut c = layer_cut(m, share, world, r, il),
                         c0 = layer_cut(m, share, world, r, 0);
        if (c.head0 != c0.head0 || c.heads != c0.heads)
            return "its layers' kv heads differ, so a rank's query heads would too";
        if (c.head0 * dv % bs_o || c.heads * dv % bs_o)
            return "a rank's columns of wo would cut a block of its quantization type";
    }
    return NULL;
}

const char *model_shard_refusal(const struct ox_model *m, int world, const float *share) {
    const struct model_config *c = &m->cfg;
    if (m->on_gpu)
        return "the model to split must be loaded for the CPU (n_gpu_layers = 0); its shards "
               "go to the GPUs";
    if (c->n_embd_per_layer || m->n_lora_slots || (c->n_recurrent && first_attention(m) < 0))
        return "its architecture has layers that do not split by heads yet (per-layer "
               "embeddings, LoRA targets, or recurrent layers alone)";
    if (world > SHARD_MAX)
        return "more ranks than a split takes";
    for (int32_t il = 0; il < c->n_layer; il++) {
        const char *why = layer_refusal(m, share, world, il);
        if (why)
            return why;
    }
    return NULL;
}

/* The shard's own (mutable) entry for one of its weights. */
static struct weight *own(struct ox_model *sh, const struct weight *w) {
    return &sh->weights[w - sh->weights];
}

/* The shard's fused matrices of layer il: q, k and v's rows of the rank's heads from wqkv (and
 * its bias), gate's and up's of its FFN rows from an up matrix holding both ([gate | up]). */
static bool split_fused(struct ox_model *sh, const struct ox_model *m, const struct shard_cut *c,
                        int il) {
    const struct layer_shape *s = &m->cfg.layer[il];
    struct layer_weights *l = &sh->layers[il];
    const int64_t dk = s->head_dim_k, dv = s->head_dim_v, q_all = m->cfg.n_head * dk,
                  k_all = s->n_head_kv * dk;
    const int64_t qkv[3][2] = {{c->head0 * dk, c->heads * dk},
                               {q_all + c->kv0 * dk, c->kv * dk},
                               {q_all + k_all + c->kv0 * dv, c->kv * dv}};
    const int64_t gate_up[2][2] = {{c->ff0, c->ff}, {s->n_ff + c->ff0, c->ff}};
    const bool fused_ffn =
        m->cfg.arch->ffn == FFN_SWIGLU_FUSED || m->cfg.arch->ffn == FFN_GEGLU_FUSED;
    const int ne = l->ffn_gate_exps ? (int)l->ffn_gate_exps->ne[2] : 0;
    int64_t(*exps)[2] = ne ? malloc((size_t)ne * sizeof *exps) : NULL;
    for (int e = 0; exps && e < ne; e++) /* the rank's rows of each expert, one after another */
        exps[e][0] = e * m->cfg.n_ff_exp + c->exp0, exps[e][1] = c->exp;
    const bool experts = !ne || (exps && gather_rows(sh, own(sh, l->ffn_gate_exps), exps, ne) &&
                                 gather_rows(sh, own(sh, l->ffn_up_exps), exps, ne));
    free(exps);
    return experts &&
           (!l->ffn_gate_exps_b || gather_cols(sh, own(sh, l->ffn_gate_exps_b), c->exp0, c->exp)) &&
           (!l->ffn_up_exps_b || gather_cols(sh, own(sh, l->ffn_up_exps_b), c->exp0, c->exp)) &&
           (!l->wqkv || gather_rows(sh, own(sh, l->wqkv), qkv, 3)) &&
           (!l->bqkv || gather_rows(sh, own(sh, l->bqkv), qkv, 3)) &&
           (!fused_ffn || gather_rows(sh, own(sh, l->ffn_up), gate_up, 2)) &&
           (!fused_ffn || !l->ffn_up_b || gather_rows(sh, own(sh, l->ffn_up_b), gate_up, 2));
}

/* A delta-net layer's share (Qwen 3.5): value head h reads key head h % dn_k_heads, so the
 * rank's key heads [dk0, dk0 + dk) are read by ratio spans of value heads [j dn_k_heads + dk0,
 * + dk), which its own heads number as the whole's do (its value head h reads its key head
 * h % dk). q, k and v's rows of the projection and the convolution, z's, beta's and alpha's
 * rows, dt's and a's elements, and the output's columns of those heads. False: out of memory. */
static bool split_delta_net(struct ox_model *sh, const struct ox_model *m,
                            const struct shard_cut *c, int il) {
    struct layer_weights *l = &sh->layers[il];
    const int64_t d = m->cfg.dn_state, hk = m->cfg.dn_k_heads, key = hk * d;
    const int ratio = (int)(m->cfg.dn_v_heads / hk);
    int64_t heads[DN_RATIO_MAX][2], values[DN_RATIO_MAX][2], qkv[2 + DN_RATIO_MAX][2];
    qkv[0][0] = c->dk0 * d, qkv[0][1] = c->dk * d;
    qkv[1][0] = key + c->dk0 * d, qkv[1][1] = c->dk * d;
    for (int j = 0; j < ratio; j++) {
        heads[j][0] = j * hk + c->dk0, heads[j][1] = c->dk;
        values[j][0] = heads[j][0] * d, values[j][1] = c->dk * d;
        qkv[2 + j][0] = 2 * key + values[j][0], qkv[2 + j][1] = values[j][1];
    }
    return gather_rows(sh, own(sh, l->dn_qkv), qkv, 2 + ratio) &&
           gather_rows(sh, own(sh, l->dn_conv), qkv, 2 + ratio) &&
           gather_rows(sh, own(sh, l->dn_z), values, ratio) &&
           gather_rows(sh, own(sh, l->dn_beta), heads, ratio) &&
           gather_rows(sh, own(sh, l->dn_alpha), heads, ratio) &&
           gather_rows(sh, own(sh, l->dn_dt_bias), heads, ratio) &&
           gather_rows(sh, own(sh, l->dn_a), heads, ratio) &&
           gather_col_spans(sh, own(sh, l->dn_out), values, ratio);
}

/* A Mamba-2 layer's share (Granite 4's hybrids): z's, x's and dt's rows of the rank's heads, B's
 * and C's of its groups (group g holding heads [g per_group, + per_group)), the same channels of
 * the convolution, its heads' dt bias, A and D, its groups' rows of the norm (all of it for one
 * group: the norm is gathered), and the output's columns of its heads. False: out of memory. */
static bool split_mamba2(struct ox_model *sh, const struct ox_model *m, const struct shard_cut *c,
                         int il) {
    struct layer_weights *l = &sh->layers[il];
    const int64_t inner = m->cfg.ssm_inner, hd = inner / m->cfg.ssm_heads, ds = m->cfg.dn_state,
                  bc = m->cfg.ssm_groups * ds, conv = inner + 2 * bc;
    const int64_t x[2] = {c->mh0 * hd, c->mh * hd}, b[2] = {inner + c->mg0 * ds, c->mg * ds},
                  cc[2] = {inner + bc + c->mg0 * ds, c->mg * ds};
    const int64_t in[5][2] = {{x[0], x[1]},
                              {inner + x[0], x[1]},
                              {inner + b[0], b[1]},
                              {inner + cc[0], cc[1]},
                              {inner + conv + c->mh0, c->mh}};
    const int64_t channels[3][2] = {{x[0], x[1]}, {b[0], b[1]}, {cc[0], cc[1]}};
    const int64_t heads[1][2] = {{c->mh0, c->mh}}, groups[1][2] = {{c->mg0, c->mg}};
    const bool gathered = m->cfg.ssm_groups == 1; /* the norm spans all heads */
    return gather_rows(sh, own(sh, l->ssm_in), in, 5) &&
           gather_rows(sh, own(sh, l->dn_conv), channels, 3) &&
           (!l->ssm_conv_b || gather_rows(sh, own(sh, l->ssm_conv_b), channels, 3)) &&
           gather_rows(sh, own(sh, l->ssm_dt_b), heads, 1) &&
           gather_rows(sh, own(sh, l->ssm_a), heads, 1) &&
           gather_rows(sh, own(sh, l->ssm_d), heads, 1) &&
           (gathered || gather_rows(sh, own(sh, l->ssm_norm), groups, 1)) &&
           keep_cols(own(sh, l->ssm_out), x[0], x[1]);
}

/* Layer il of the shard: its weights' rows and columns for the rank's heads and FFN rows (cut
 * as the whole's layer is); the biases after wo and down added by rank 0 alone (the others'
 * sums would add them again). False: out of memory. */
static bool split_layer(struct ox_model *sh, const struct ox_model *m, const float *share, int il,
                        int rank, int world) {
    const struct layer_shape *s = &m->cfg.layer[il];
    struct layer_weights *l = &sh->layers[il];
    const struct shard_cut c = layer_cut(m, share, world, rank, il);
    const bool mla = m->cfg.arch->mla; /* its queries mla_head_k a head, outputs mla_head_v */
    const int64_t dk = mla ? m->cfg.mla_head_k : s->head_dim_k, dv = s->head_dim_v,
                  dvo = mla ? m->cfg.mla_head_v : dv;
    const bool fused_ffn =
        m->cfg.arch->ffn == FFN_SWIGLU_FUSED || m->cfg.arch->ffn == FFN_GEGLU_FUSED;
    /* with an output gate, each head's query rows are followed by as many gate rows */
    const int64_t dq = m->cfg.arch->attn_gate ? 2 * dk : dk;
    const struct {
        const struct weight *w;
        int64_t first, count; /* rows */
    } rows[] = {{l->wq, c.head0 * dq, c.heads * dq},
                {l->wq_b, c.head0 * dk, c.heads * dk},
                {l->bq, c.head0 * dq, c.heads * dq},
                {l->wk, c.kv0 * dk, c.kv * dk},
                {l->bk, c.kv0 * dk, c.kv * dk},
                {l->wv, c.kv0 * dv, c.kv * dv},
                {l->bv, c.kv0 * dv, c.kv * dv},
                {l->attn_sinks, c.head0, c.heads},
                {l->ffn_gate, c.ff0, c.ff},
                {l->ffn_gate_b, c.ff0, c.ff},
                {fused_ffn ? NULL : l->ffn_up, c.ff0, c.ff},
                {fused_ffn ? NULL : l->ffn_up_b, c.ff0, c.ff}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (rows[i].w)
            keep_rows(own(sh, rows[i].w), rows[i].first, rows[i].count);
    /* whole blocks (layer_refusal checked) */
    if (l->wo)
        keep_cols(own(sh, l->wo), c.head0 * dvo, c.heads * dvo);
    if (mla) /* each head's absorbed key and value matrices */
        keep_mats(own(sh, l->wk_b), c.head0, c.heads),
            keep_mats(own(sh, l->wv_b), c.head0, c.heads);
    if (l->ffn_down)
        keep_cols(own(sh, l->ffn_down), c.ff0, c.ff);
    if (l->ffn_down_exps) /* each expert's columns: the experts stay row_bytes * n_embd apart */
        keep_cols(own(sh, l->ffn_down_exps), c.exp0, c.exp);
    if (l->ffn_up_shexp) {
        keep_rows(own(sh, l->ffn_gate_shexp), c.sh0, c.sh);
        keep_rows(own(sh, l->ffn_up_shexp), c.sh0, c.sh);
        keep_cols(own(sh, l->ffn_down_shexp), c.sh0, c.sh);
    }
    if (rank != 0)
        l->bo = l->ffn_down_b = l->ffn_down_exps_b = NULL;
    return split_fused(sh, m, &c, il) &&
           (!m->cfg.is_recurrent[il] ||
            (m->cfg.arch->mamba2 ? split_mamba2 : split_delta_net)(sh, m, &c, il));
}

/* The shard's configuration: the rank's heads and rows of each layer, the largest of them as
 * the whole's are. */
static void shard_config(struct ox_model *sh, const struct ox_model *m, const float *share,
                         int world, int rank) {
    struct model_config *c = &sh->cfg;
    const struct shard_cut first = layer_cut(m, share, world, rank, first_attention(m));
    c->n_head = (int32_t)first.heads, c->shard_head0 = (int32_t)first.head0;
    c->n_head_kv = c->n_ff = 0;
    for (int32_t il = 0; il < c->n_layer; il++) {
        struct shard_cut cut = layer_cut(m, share, world, rank, il);
        if (m->layers[il].ffn_down_exps) /* alike in every layer (moe_refusal) */
            c->n_ff_exp = (int32_t)cut.exp;
        if (m->layers[il].ffn_down_shexp)
            c->n_ff_shexp = (int32_t)cut.sh;
        if (c->is_recurrent[il] && c->arch->mamba2) { /* no kv heads: its heads, groups */
            c->ssm_heads = (int32_t)cut.mh, c->ssm_groups = (int32_t)cut.mg;
            c->ssm_inner = (int32_t)(cut.mh * (m->cfg.ssm_inner / m->cfg.ssm_heads));
            c->shard_ssm_head0 = (int32_t)cut.mh0;
            cut.kv = cut.kv0 = 0;
        } else if (c->is_recurrent[il]) { /* its key and value heads */
            c->dn_k_heads = (int32_t)cut.dk;
            c->dn_v_heads = (int32_t)(cut.dk * (m->cfg.dn_v_heads / m->cfg.dn_k_heads));
            cut.kv = cut.kv0 = 0;
        }
        c->layer[il].n_head_kv = (int32_t)cut.kv, c->layer[il].n_ff = (int32_t)cut.ff;
        c->layer[il].shard_kv0 = (int32_t)cut.kv0;
        c->n_head_kv = c->n_head_kv > cut.kv ? c->n_head_kv : (int32_t)cut.kv;
        c->n_ff = c->n_ff > cut.ff ? c->n_ff : (int32_t)cut.ff;
    }
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

enum ox_status model_shard(const struct ox_model *m, int rank, int world, const float *share,
                           bool gpu, struct ox_model **out) {
    *out = NULL;
    if (world < 1 || rank < 0 || rank >= world)
        return ox_fail(OX_ERR_INVALID_ARG, "model: rank %d of %d ranks", rank, world);
    const char *why = model_shard_refusal(m, world, share);
    if (why)
        return ox_fail(OX_ERR_UNSUPPORTED, "model: cannot split over %d ranks: %s", world, why);
    struct ox_model *sh = malloc(sizeof *sh);
    if (!sh)
        return ox_fail(OX_ERR_OOM, "model: out of memory for a shard");
    *sh = *m; /* the file, vocabulary, configuration and template, borrowed */
    sh->whole = m, sh->split = NULL, sh->shard_rows = NULL, sh->n_shard_rows = 0;
    sh->gathers = NULL, sh->n_gathers = 0;
    sh->loras = NULL; /* its adapters' shares: split_lora.c */
    sh->weights = NULL, sh->layers = NULL, sh->type_row0 = NULL, sh->n_params = 0;
    enum ox_status st = model_bind_weights(sh); /* its own table, bound as the whole's was */
    if (st != OX_OK) {
        ox_model_free(sh);
        return st;
    }
    for (int64_t i = 0; i < m->gguf->n_tensors; i++) /* the CPU's layouts of the rows, shared */
        sh->weights[i].copy = m->weights[i].copy, sh->weights[i].copy_of = m->weights[i].copy_of;
    for (int32_t il = 0; il < m->cfg.n_layer && st == OX_OK; il++)
        if (!split_layer(sh, m, share, il, rank, world))
            st = ox_fail(OX_ERR_OOM, "model: out of memory for a shard's fused matrices");
    if (st != OX_OK) {
        ox_model_free(sh);
        return st;
    }
    shard_config(sh, m, share, world, rank);
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
