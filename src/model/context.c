/* context.c: ox_context_create / ox_context_free: the KV cache, the stages and their buffers. */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/cpu_features.h"
#include "model/context.h"
#include "model/encoder.h"
#include "model/lora.h"
#include "model/split.h"
#include "quant/dtype.h"

struct ox_context_params ox_context_params_default(void) {
    return (struct ox_context_params){
        .n_ctx = 4096, .n_batch = 512, .n_threads = 0, .n_seq_max = 1, .kv_type = OX_DTYPE_F16};
}

static float *falloc(size_t n) {
    return ox_aligned_alloc(OX_ALIGN, (n ? n : 1) * sizeof(float));
}

static enum ox_status check_params(const struct ox_model *m, struct ox_context_params *p) {
    if (p->n_ctx == 0)
        p->n_ctx = (uint32_t)m->cfg.n_ctx_train;
    if (!m->output && !p->embeddings)
        return ox_fail(OX_ERR_INVALID_ARG,
                       "context: a %s model has no LM head and makes embeddings only: create "
                       "the context with embeddings (oxidize embed, serve --embeddings)",
                       m->cfg.arch->name);
    if (!m->cfg.causal) /* a sequence's tokens all see each other: it goes in one batch */
        p->n_batch = p->n_ctx;
    const struct dtype_traits *kt = dtype_get((int)p->kv_type);
    if (p->kv_type != OX_DTYPE_F16 && p->kv_type != OX_DTYPE_F32 && p->kv_type != OX_DTYPE_Q8_0)
        return ox_fail(OX_ERR_INVALID_ARG, "context: KV cache type must be f16, f32 or q8_0");
    for (int32_t il = 0; il < m->cfg.n_layer; il++) {
        const struct layer_shape *l = &m->cfg.layer[il];
        if (((int64_t)l->n_head_kv * l->head_dim_k) % kt->block_size ||
            ((int64_t)l->n_head_kv * l->head_dim_v) % kt->block_size)
            return ox_fail(OX_ERR_INVALID_ARG, "context: KV rows do not fit %s blocks", kt->name);
    }
    if (p->n_ctx > (1u << 24) || p->n_batch < 1 || p->n_batch > (1u << 16) || p->n_seq_max < 1 ||
        p->n_seq_max > OX_SEQ_MAX)
        return ox_fail(OX_ERR_INVALID_ARG,
                       "context: n_ctx %u, n_batch %u or n_seq_max %u out "
                       "of range",
                       p->n_ctx, p->n_batch, p->n_seq_max);
    return OX_OK;
}

/* Whether a stage's memory is what ox_context_memory reports, that of where the model runs:
 * a split model's GPU stage, not the host's buffers for its first layers. */
static bool counted(const struct ox_context *ctx, const struct stage *s) {
    return s->be.ops->device || !ctx->model->on_gpu;
}

/* Backend memory of the stage for n bytes (or floats, with bfalloc), counted in buffer_bytes
 * (when counted); NULL is caught by the callers' checks. */
static void *balloc(struct ox_context *ctx, struct stage *s, size_t bytes) {
    ctx->buffer_bytes += counted(ctx, s) ? bytes : 0;
    return s->be.ops->alloc(&s->be, bytes ? bytes : 1);
}

static float *bfalloc(struct ox_context *ctx, struct stage *s, size_t n) {
    return balloc(ctx, s, n * sizeof(float));
}

/* The cells' bookkeeping, on the host, and the row sizes of the layers that keep their own (of
 * those the context runs). */
static enum ox_status alloc_kv(struct ox_context *ctx) {
    const struct model_config *c = &ctx->model->cfg;
    OX_TRY(kv_init(&ctx->kv, ctx->params.kv_type, (int32_t)ctx->params.n_ctx));
    /* each sequence's cells together (while it fits its share), so that a step of many
     * sequences' next tokens reads little beyond each one's own cells */
    kv_set_regions(&ctx->kv, (int32_t)ctx->params.n_seq_max);
    const struct ox_model *m = ctx->model; /* a pipeline rank keeps its layers' rows alone */
    for (int32_t il = m->pipe_world ? m->layer_begin : 0;
         il < (m->pipe_world ? m->layer_end : c->n_layer); il++) {
        const struct layer_shape *l = &c->layer[il];
        if (l->kv_layer == il) /* latent attention's values are the front of its keys (mla.c) */
            kv_set_layer(&ctx->kv, il, (int64_t)l->n_head_kv * l->head_dim_k,
                         c->arch->mla ? 0 : (int64_t)l->n_head_kv * l->head_dim_v);
    }
    return OX_OK;
}

/* The rows of the stage's layers, and its copies of the cells' positions and sequences. A
 * layer reading another's cache finds it in the same stage. */
static enum ox_status alloc_kv_rows(struct ox_context *ctx, struct stage *s) {
    struct kv_cache *kv = &ctx->kv;
    const struct model_config *c = &ctx->model->cfg;
    size_t k_bytes = 0, v_bytes = 0, cells = (size_t)kv->n_cells;
    for (int32_t il = s->layer_begin; il < s->layer_end; il++) {
        int32_t src = c->layer[il].kv_layer;
        if (src >= 0 && src < s->layer_begin)
            return ox_fail(OX_ERR_UNSUPPORTED,
                           "context: layer %d reads the cache of layer %d, which runs on "
                           "another device: offload all layers or none",
                           il, src);
        k_bytes += cells * kv->k_row[il], v_bytes += cells * kv->v_row[il];
    }
    if (counted(ctx, s)) /* apart from buffer_bytes */
        ctx->kv_bytes += k_bytes + v_bytes;
    s->k_rows = s->be.ops->alloc(&s->be, k_bytes ? k_bytes : 1);
    s->v_rows = s->be.ops->alloc(&s->be, v_bytes ? v_bytes : 1);
    if (!s->k_rows || !s->v_rows)
        return ox_fail(OX_ERR_OOM, "context: cannot allocate a KV cache of %d cells on the %s",
                       kv->n_cells, s->be.ops->name);
    k_bytes = v_bytes = 0;
    for (int32_t il = s->layer_begin; il < s->layer_end; il++) {
        if (kv->k_row[il] == 0)
            continue;
        s->k[il] = s->k_rows + k_bytes;
        s->v[il] = kv->v_row[il] ? s->v_rows + v_bytes : s->k[il];
        k_bytes += cells * kv->k_row[il], v_bytes += cells * kv->v_row[il];
    }
    bool device = s->be.ops->device;
    s->kv_pos = device ? balloc(ctx, s, (size_t)kv->n_cells * sizeof *kv->pos) : kv->pos;
    s->kv_seq =
        device ? balloc(ctx, s, (size_t)kv->n_cells * SEQ_WORDS * sizeof *kv->seq) : kv->seq;
    s->kv_used = device ? balloc(ctx, s, sizeof kv->used_end) : &kv->used_end;
    s->kv_span = device ? balloc(ctx, s, sizeof kv->span) : NULL; /* the CPU reads every cell */
    if (!s->kv_pos || !s->kv_seq || !s->kv_used || (device && !s->kv_span))
        return ox_fail(OX_ERR_OOM, "context: cannot allocate a KV cache of %d cells on the %s",
                       kv->n_cells, s->be.ops->name);
    return OX_OK;
}

/* Whether some layer has a fused q, k, v weight (its product goes through act.qkv). */
static bool has_wqkv(const struct ox_model *m) {
    for (int32_t i = 0; i < m->cfg.n_layer; i++)
        if (m->layers[i].wqkv)
            return true;
    return false;
}

/* The columns of a type whose bytes come in whole 16-byte pieces: where a slice of a row may
 * start and keep the GPU's aligned loads. */
static int64_t aligned_cols(enum ox_dtype t) {
    int64_t ts = (int64_t)ox_dtype_type_size(t), g = 16;
    while (ts % 2 == 0 && g > 1)
        ts /= 2, g /= 2;
    return (int64_t)ox_dtype_block_size(t) * g;
}

/* The width a GPU stage's FFN goes by for wide batches (transformer.c's ffn_sliced), or 0 for
 * whole. Sliced: a dense gated FFN after its own norm whose result goes straight into the
 * residual, and whose whole-width batch buffers (gate and up, n_batch rows of n_ff) would pass
 * 2% of the weights, as a small model's do (the 1B: 32 MiB at 512 tokens against 728 MiB of
 * Q4_0 weights; the 8B stays whole). The slice: n_ff in the fewest parts no wider than n_embd
 * whose down projection columns start on 16-byte boundaries (the 1B: 4 of 2048). */
static int64_t ffn_slice(const struct ox_context *ctx, bool gpu) {
    const struct model_config *c = &ctx->model->cfg;
    const struct arch_desc *d = c->arch;
    uint64_t whole = 2 * (uint64_t)ctx->params.n_batch * (uint64_t)c->n_ff * sizeof(float);
    if (!gpu || (d->ffn != FFN_SWIGLU && d->ffn != FFN_GEGLU) || d->parallel || d->no_pre_norm ||
        c->n_expert > 0 || c->residual_scale != 0.0f || c->n_ff <= c->n_embd ||
        whole <= ctx->model->gpu_weights.bytes / 50)
        return 0;
    int64_t step = 1;
    for (int32_t i = 0; i < c->n_layer; i++) {
        const struct layer_weights *l = &ctx->model->layers[i];
        if (!l->ffn_gate || !l->ffn_up || !l->ffn_down || l->ffn_gate_b || l->ffn_up_b ||
            l->ffn_down_b || l->ffn_post_norm || c->layer[i].n_ff != c->n_ff)
            return 0;
        int64_t a = aligned_cols(l->ffn_down->type); /* powers of two times a block: the larger
                                                        is a multiple of the smaller */
        step = a > step ? a : step;
    }
    for (int64_t parts = (c->n_ff + c->n_embd - 1) / c->n_embd; parts <= 16; parts++)
        if (c->n_ff % parts == 0 && (c->n_ff / parts) % step == 0)
            return c->n_ff / parts;
    return 0;
}

/* The widest per-token row latent attention's scratch takes (mla.c): q's bottleneck, every
 * head's rotary part, a head's no-rope query, latent or output. */
static size_t mla_scratch_cols(const struct model_config *c) {
    int64_t w = c->mla_q_rank, rot = (int64_t)c->n_head * c->n_rot;
    w = w > rot ? w : rot;
    w = w > c->mla_head_k ? w : c->mla_head_k;
    w = w > c->mla_kv_rank ? w : c->mla_kv_rank;
    return (size_t)(w > c->mla_head_v ? w : c->mla_head_v);
}

/* The buffers of latent attention (mla.c) and per-layer embeddings (per_layer_embd.c), where
 * the model has them; false when one cannot be had. */
static bool alloc_arch_buffers(struct ox_context *ctx, struct stage *s) {
    const struct model_config *c = &ctx->model->cfg;
    struct activations *a = &s->act;
    size_t nb = ctx->params.n_batch;
    size_t mla_head = (size_t)(c->mla_head_k > c->mla_head_v ? c->mla_head_k : c->mla_head_v);
    size_t mla_tmp = mla_scratch_cols(c);
    a->mla = mla_head ? bfalloc(ctx, s, nb * (size_t)c->n_head * mla_head) : NULL;
    a->mla_in = mla_head ? bfalloc(ctx, s, nb * mla_tmp) : NULL;
    a->mla_out = mla_head ? bfalloc(ctx, s, nb * mla_tmp) : NULL;
    /* a rank's rows of norms over all heads (block_norm_ranks): q's (no fewer query heads than
     * kv heads), a Mamba-2 layer's one group's */
    const struct ox_model *whole = ctx->model->whole;
    const bool shard = whole && !ctx->model->pipe_world;
    size_t q_all = shard && c->arch->qk_norm == QK_NORM_WHOLE
                       ? (size_t)whole->cfg.n_head * (size_t)whole->cfg.head_dim_k
                       : 0,
           ssm_all = shard && c->arch->mamba2 && whole->cfg.ssm_groups == 1
                         ? (size_t)whole->cfg.ssm_inner
                         : 0,
           ranks = q_all > ssm_all ? q_all : ssm_all;
    a->ranks_rows = ranks ? bfalloc(ctx, s, nb * ranks) : NULL;
    size_t ple = (size_t)c->n_layer * (size_t)c->n_embd_per_layer * nb;
    a->ple = ple ? bfalloc(ctx, s, ple) : NULL, a->ple_tmp = ple ? bfalloc(ctx, s, ple) : NULL;
    return (!ple || (a->ple && a->ple_tmp)) && (!mla_head || (a->mla && a->mla_in && a->mla_out)) &&
           (!ranks || a->ranks_rows) && encoder_alloc(ctx, s);
}

static enum ox_status alloc_activations(struct ox_context *ctx, struct stage *s) {
    const struct model_config *c = &ctx->model->cfg;
    struct activations *a = &s->act;
    size_t nb = ctx->params.n_batch, e = (size_t)c->n_embd;
    size_t q = (size_t)c->n_head * (size_t)c->head_dim_k, o = (size_t)c->n_head * c->head_dim_v;
    size_t dk = (size_t)c->n_head_kv * c->head_dim_k, dv = (size_t)c->n_head_kv * c->head_dim_v;
    size_t ff = a->ffn_slice ? (size_t)a->ffn_slice : (size_t)c->n_ff; /* gate's width */
    size_t fe = c->n_expert > 0 ? (size_t)c->n_ff_exp : 0;             /* it defaults to n_ff */
    fe = c->n_expert > 0 && (size_t)c->n_ff_shexp > fe ? (size_t)c->n_ff_shexp : fe;
    ff = ff > e ? ff : e;
    ff = ff > fe ? ff : fe;
    bool fused = c->arch->ffn == FFN_SWIGLU_FUSED || c->arch->ffn == FFN_GEGLU_FUSED;
    size_t ff_up = fused ? 2 * ff : ff; /* a row of [gate | up] */
    size_t ints = nb * sizeof(int32_t);
    bool device = s->be.ops->device, dense = c->n_expert == 0;
    /* Buffers share memory where their contents never live at once (decided here alone:
     * free_stage frees what is distinct): proj (wo's product) takes q's, which the attention
     * has read by then; the attention's output takes gate's, which the FFN fills only after wo
     * has read it; in a dense model the FFN's output (branch) takes up's, which the GLU has
     * read by then (a MoE FFN reads up while it writes branch), and the GLU's output (hidden)
     * is gate's, which it runs over in place. */
    a->x = bfalloc(ctx, s, nb * e), a->xn = bfalloc(ctx, s, nb * e);
    a->q = bfalloc(ctx, s, nb * (q > e ? q : e));
    a->qkv = bfalloc(ctx, s, has_wqkv(ctx->model) ? nb * (q + dk + dv) : 0);
    a->k = bfalloc(ctx, s, nb * dk), a->v = bfalloc(ctx, s, nb * dv);
    a->qg = c->arch->attn_gate ? bfalloc(ctx, s, nb * 3 * q) : NULL;
    a->gate = bfalloc(ctx, s, nb * (ff > o ? ff : o));
    a->up = bfalloc(ctx, s, nb * (dense && e > ff_up ? e : ff_up));
    a->proj = a->q, a->attn = a->gate;
    a->branch = dense ? a->up : bfalloc(ctx, s, nb * e);
    /* an attention that reads the cache needs no float copy of it: kf stays one row, which the
     * context shift re-ropes */
    bool in_place = s->be.ops->attention_reads_cache;
    size_t cache_rows = in_place ? 1 : (size_t)ctx->kv.n_cells;
    /* MoE FFNs keep both (an expert's down projection goes to gate) */
    a->hidden = c->n_expert > 0 ? bfalloc(ctx, s, nb * ff) : a->gate;
    a->kf = bfalloc(ctx, s, cache_rows * dk);
    a->k_t = device ? NULL : bfalloc(ctx, s, ctx->kv.n_cells * dk);
    a->vf = bfalloc(ctx, s, cache_rows * dv);
    a->router = bfalloc(ctx, s, nb * (size_t)c->n_expert);
    a->router_host = device ? falloc(nb * (size_t)c->n_expert) : a->router;
    size_t chosen = nb * (size_t)c->n_expert_used;
    a->expert_ids = balloc(ctx, s, chosen * sizeof(int32_t)), a->expert_w = bfalloc(ctx, s, chosen);
    a->moe_out = bfalloc(ctx, s, c->n_expert > 0 ? nb * e : 0);
    a->b_tok = balloc(ctx, s, ints);
    a->b_pos = device ? balloc(ctx, s, ints) : ctx->pos;
    a->b_seq = device ? balloc(ctx, s, ints) : ctx->seq;
    a->b_cell = device ? balloc(ctx, s, ints) : ctx->cell;
    bool arch_buffers = alloc_arch_buffers(ctx, s);
    if (!a->x || !a->xn || !a->qkv || !a->branch || !a->q || !a->k || !a->v || !a->attn ||
        !a->proj || !a->gate || !a->up || !a->hidden || !a->kf || (!device && !a->k_t) || !a->vf ||
        (c->arch->attn_gate && !a->qg) || !a->router || !a->router_host || !a->expert_ids ||
        !a->expert_w || !a->moe_out || !a->b_tok || !a->b_pos || !a->b_seq || !a->b_cell ||
        !arch_buffers)
        return ox_fail(OX_ERR_OOM, "context: cannot allocate activations for %zu tokens on the %s",
                       nb, s->be.ops->name);
    return OX_OK;
}

/* Logits in the last stage's memory, and their host copy. A GPU computes them up to 32 rows at
 * a time (downloaded after each): a batch's worth would take more device memory than the rest
 * of the activations together (32 rows of a 128k vocabulary: 16 MB). Small models take fewer,
 * down to 8, so the rows stay within 1% of the weights (the 1B Q4_0: 14, the 8B: 9). But a
 * context for n_seq_max sequences has room for that many rows, as llama.cpp's output buffer
 * does: a decode step of all of them then reads the output matrix once, not once per chunk
 * (128 sequences of the 8B: 15 passes over its 430 MB output matrix before). */
static enum ox_status alloc_logits(struct ox_context *ctx, struct stage *s) {
    size_t nb = ctx->params.n_batch, nv = (size_t)ctx->model->cfg.n_vocab;
    bool device = s->be.ops->device;
    ctx->logit_rows = (int32_t)nb;
    if (!ctx->model->output) /* an encoder: no logits */
        return OX_OK;
    uint64_t fit = ctx->model->gpu_weights.bytes / 100 / (nv * sizeof(float));
    size_t rows = fit > 32 ? 32 : fit < 8 ? 8 : (size_t)fit;
    rows = ctx->params.n_seq_max > rows ? ctx->params.n_seq_max : rows;
    ctx->logit_rows = (int32_t)(device && nb > rows ? rows : nb);
    ctx->b_logits = bfalloc(ctx, s, (size_t)ctx->logit_rows * nv);
    ctx->logits = device ? falloc(nb * nv) : ctx->b_logits;
    if (!ctx->b_logits || !ctx->logits)
        return ox_fail(OX_ERR_OOM, "context: cannot allocate logits for %zu tokens on the %s", nb,
                       s->be.ops->name);
    /* page-locked, every row (as llama.cpp's output buffer): each chunk's copy lands in place
     * at the link's speed. With only the first chunk's rows pinned, the others of a step of many
     * sequences took the driver's pageable path (the 1B Q4_0: 14 rows, 7 MB, a chunk) */
    if (device)
        s->be.ops->pin(&s->be, ctx->logits, nb * nv * sizeof(float));
    return OX_OK;
}

/* With params.embeddings, the host's copy of the output rows' hidden states (counted as the
 * context's memory when the host runs the model) and ox_embed's pooling room. */
static enum ox_status alloc_embeddings(struct ox_context *ctx, const struct stage *s) {
    size_t nb = ctx->params.n_batch, e = (size_t)ctx->model->cfg.n_embd;
    if (!ctx->params.embeddings)
        return OX_OK;
    ctx->embd = falloc(nb * e);
    ctx->embd_sum = malloc(e * sizeof *ctx->embd_sum);
    ctx->embd_want = malloc(nb * sizeof *ctx->embd_want);
    if (!ctx->embd || !ctx->embd_sum || !ctx->embd_want)
        return ox_fail(OX_ERR_OOM, "context: cannot allocate embeddings for %zu tokens", nb);
    if (!s->be.ops->device)
        ctx->buffer_bytes += nb * e * sizeof(float);
    return OX_OK;
}

/* The columns of the widest activation row a matmul may see (with the FFN's width ff), and with
 * scores (the CPU's attention rows over the whole context) the widest scratch row. */
static int64_t max_cols(const struct ox_context *ctx, int64_t ff, bool scores) {
    const struct model_config *c = &ctx->model->cfg;
    int64_t cols = ff > c->n_embd ? ff : c->n_embd;
    int64_t fe = c->n_expert > 0 ? c->n_ff_exp : 0; /* it defaults to n_ff */
    fe = c->n_expert > 0 && c->n_ff_shexp > fe ? c->n_ff_shexp : fe;
    cols = cols > fe ? cols : fe;
    int64_t dn = (int64_t)c->dn_v_heads * c->dn_state; /* a delta-net layer's output width */
    cols = cols > dn ? cols : dn;
    cols = cols > c->n_head * c->head_dim_k ? cols : c->n_head * c->head_dim_k;
    cols = cols > c->n_head * c->head_dim_v ? cols : c->n_head * c->head_dim_v;
    cols = cols > c->n_head * c->mla_head_v ? cols : c->n_head * c->mla_head_v; /* mla's wo */
    cols = cols > c->mla_q_rank ? cols : c->mla_q_rank;
    if (!scores)
        return cols;
    cols = cols > ctx->params.n_ctx ? cols : ctx->params.n_ctx; /* attention scores */
    int64_t qv = (int64_t)c->head_dim_k + c->head_dim_v;        /* f16 attention: q + values */
    return cols > qv ? cols : qv;
}

/* The stage's backend: the GPU when its layers' weights are there, sized for this context
 * (its own policy decides the rest: backend.h's backend_sizes). */
static enum ox_status alloc_backend(struct ox_context *ctx, struct stage *s, bool gpu) {
    const struct ox_model *m = ctx->model;
    const struct model_config *c = &m->cfg;
    s->rope = c->rope, s->rope_swa = c->rope_swa;
    if (gpu) {
        s->rope.freq_factors = model_gpu_freq_factors(m);
        s->rope_swa.freq_factors = c->rope_swa.freq_factors ? s->rope.freq_factors : NULL;
    }
    struct backend_sizes z = {.n_batch = ctx->params.n_batch,
                              .n_threads = ctx->params.n_threads,
                              .max_cols = max_cols(ctx, c->n_ff, false),
                              .scratch_cols = max_cols(ctx, c->n_ff, true),
                              .weights = gpu ? &m->gpu_weights : NULL};
    /* a batch's widest is narrower when its FFN goes by slices */
    z.batch_cols = s->act.ffn_slice ? max_cols(ctx, s->act.ffn_slice, false) : z.max_cols;
    s->be.ops = gpu ? m->gpu : backend_host();
    return s->be.ops->init(&s->be, &z);
}

/* One stage per backend the model's layers are on: the CPU's first when there are two. */
static enum ox_status alloc_stages(struct ox_context *ctx) {
    const struct ox_model *m = ctx->model;
    /* a pipeline rank's model runs only its layers */
    int32_t begin = m->pipe_world ? m->layer_begin : 0;
    int32_t end = m->pipe_world ? m->layer_end : m->cfg.n_layer;
    int32_t split = m->on_gpu ? m->gpu_layer_begin : end;
    ctx->n_stages = split > begin && split < end ? 2 : 1;
    for (int32_t i = 0; i < ctx->n_stages; i++) {
        struct stage *s = &ctx->stages[i];
        bool gpu = m->on_gpu && i == ctx->n_stages - 1;
        s->layer_begin = gpu ? split : begin;
        s->layer_end = gpu ? end : split;
        s->act.ffn_slice = ffn_slice(ctx, gpu);
        OX_TRY(alloc_backend(ctx, s, gpu));
        OX_TRY(alloc_kv_rows(ctx, s));
        OX_TRY(alloc_activations(ctx, s));
    }
    OX_TRY(alloc_logits(ctx, &ctx->stages[ctx->n_stages - 1]));
    return alloc_embeddings(ctx, &ctx->stages[ctx->n_stages - 1]);
}

enum ox_status ox_context_create(const struct ox_model *m, const struct ox_context_params *p,
                                 struct ox_context **out) {
    if (!m || !out)
        return ox_fail(OX_ERR_INVALID_ARG, "ox_context_create: NULL argument");
    *out = NULL;
    OX_TRY(cpu_isa_check());
    if (m->split)
        return split_context_create(m, p, out);
    struct ox_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return ox_fail(OX_ERR_OOM, "context: out of memory");
    ctx->model = m;
    ctx->params = p ? *p : ox_context_params_default();
    size_t ints = (size_t)ctx->params.n_batch * sizeof(int32_t);
    enum ox_status s = check_params(m, &ctx->params);
    if (s == OX_OK && (!(ctx->pos = malloc(ints)) || !(ctx->seq = malloc(ints)) ||
                       !(ctx->cell = malloc(ints)) || !(ctx->out_row = malloc(ints))))
        s = ox_fail(OX_ERR_OOM, "context: out of memory");
    if (s == OX_OK)
        s = alloc_kv(ctx);
    if (s == OX_OK)
        s = alloc_stages(ctx);
    if (s == OX_OK)
        s = delta_net_create(ctx);
    if (s != OX_OK) {
        ox_context_free(ctx);
        return s;
    }
    *out = ctx;
    return OX_OK;
}

/* Frees each distinct buffer of the list once: which buffers share memory is decided in
 * alloc_activations alone. */
static void free_distinct(struct backend *b, void *const *bufs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        bool seen = !bufs[i];
        for (size_t j = 0; j < i && !seen; j++)
            seen = bufs[j] == bufs[i];
        if (!seen)
            b->ops->free(b, bufs[i]);
    }
}

/* The stage's buffers and backend. On the host, the batch and cell arrays are the context's
 * own (not the stage's to free). */
static void free_stage(struct stage *s) {
    struct backend *b = &s->be;
    struct activations *a = &s->act;
    if (!b->ops)
        return;
    void *bs[] = {a->x,       a->xn,         a->qkv,      a->branch,  a->q,        a->k,
                  a->v,       a->attn,       a->proj,     a->gate,    a->up,       a->hidden,
                  a->kf,      a->k_t,        a->vf,       a->router,  a->b_tok,    s->k_rows,
                  s->v_rows,  a->expert_ids, a->expert_w, a->moe_out, a->qg,       a->ple,
                  a->ple_tmp, a->mla,        a->mla_in,   a->mla_out, a->type_row, a->ranks_rows};
    free_distinct(b, bs, sizeof bs / sizeof bs[0]);
    if (b->ops->device) {
        void *mirrors[] = {a->b_pos,  a->b_seq,   a->b_cell, s->kv_pos,
                           s->kv_seq, s->kv_used, s->kv_span};
        free_distinct(b, mirrors, sizeof mirrors / sizeof mirrors[0]);
        ox_aligned_free(a->router_host);
    }
    b->ops->release(b);
}

void ox_context_free(struct ox_context *ctx) {
    if (!ctx)
        return;
    if (ctx->split) {
        split_context_free(ctx);
        return;
    }
    struct stage *last = &ctx->stages[ctx->n_stages > 0 ? ctx->n_stages - 1 : 0];
    bool host_copy = ctx->logits && ctx->logits != ctx->b_logits; /* a device's logits */
    if (host_copy && last->be.impl)
        last->be.ops->unpin(&last->be);
    if (ctx->b_logits && last->be.ops)
        last->be.ops->free(&last->be, ctx->b_logits);
    if (host_copy)
        ox_aligned_free(ctx->logits);
    delta_net_free(ctx->dn); /* in the stages' memory */
    if (ctx->n_stages > 0)
        context_lora_release(ctx);
    for (int i = 0; i < 2; i++)
        free_stage(&ctx->stages[i]);
    free(ctx->pos), free(ctx->seq), free(ctx->cell), free(ctx->out_row);
    ox_aligned_free(ctx->embd), free(ctx->embd_sum), free(ctx->embd_want);
    kv_free(&ctx->kv);
    free(ctx);
}

/* A split model's context: what all its ranks of this process take. */
void ox_context_memory(const struct ox_context *ctx, uint64_t *kv_bytes, uint64_t *buffer_bytes) {
    *kv_bytes = *buffer_bytes = 0;
    for (int r = 0; r < (ctx->split ? ctx->split->sp->n_local : 1); r++) {
        const struct ox_context *c = ctx->split ? ctx->split->rank[r] : ctx;
        *kv_bytes += c->kv_bytes;
        *buffer_bytes += c->buffer_bytes;
        for (int32_t i = 0; i < c->n_stages; i++)
            *buffer_bytes += counted(c, &c->stages[i]) ? c->stages[i].be.own_bytes : 0;
    }
}

void ox_context_set_one_token_order(struct ox_context *ctx, bool on) {
    if (ctx->split) {
        split_kv(ctx, SPLIT_ONE_TOKEN, on, 0, 0, 0);
        return;
    }
    for (int i = 0; i < ctx->n_stages; i++)
        ctx->stages[i].be.one_token_order = on;
}

uint32_t ox_context_n_batch(const struct ox_context *ctx) {
    return ctx->params.n_batch;
}

uint32_t ox_context_recorded_tokens(const struct ox_context *ctx) {
    const struct backend *b = &ctx->stages[ctx->n_stages - 1].be;
    return b->ops->graph_begin && b->ops->graph_max_tokens > 0 ? (uint32_t)b->ops->graph_max_tokens
                                                               : 0;
}

const struct ox_model *ox_context_model(const struct ox_context *ctx) {
    return ctx->split ? ctx->split->model : ctx->model;
}

uint32_t ox_context_n_ctx(const struct ox_context *ctx) {
    return ctx->params.n_ctx;
}

enum ox_status context_join_group(struct ox_context *ctx, struct backend_group *g, int rank) {
    for (int32_t i = 0; i < ctx->n_stages; i++)
        if (!ctx->stages[i].be.ops->all_reduce || !ctx->stages[i].be.ops->send)
            return ox_fail(OX_ERR_UNSUPPORTED,
                           "context: the %s backend cannot run a rank of a split model (no "
                           "sums or hand-overs across ranks)",
                           ctx->stages[i].be.ops->name);
    if (!ctx->model->whole)
        return ox_fail(OX_ERR_INVALID_ARG, "context: only a shard's context joins a group");
    *(ctx->model->pipe_world ? &ctx->pipe : &ctx->group) = g;
    ctx->rank = rank;
    return OX_OK;
}
