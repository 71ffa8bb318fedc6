/* context.c: ox_context_create / ox_decode / KV cache operations. */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#ifdef OX_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#include "model/context.h"
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
    const struct dtype_traits *kt = dtype_get((int)p->kv_type);
    int64_t dk = (int64_t)m->cfg.n_head_kv * m->cfg.head_dim_k;
    if (p->kv_type != OX_DTYPE_F16 && p->kv_type != OX_DTYPE_F32 && p->kv_type != OX_DTYPE_Q8_0)
        return ox_fail(OX_ERR_INVALID_ARG, "context: KV cache type must be f16, f32 or q8_0");
    if (dk % kt->block_size != 0 ||
        ((int64_t)m->cfg.n_head_kv * m->cfg.head_dim_v) % kt->block_size)
        return ox_fail(OX_ERR_INVALID_ARG, "context: KV rows do not fit %s blocks", kt->name);
    if (p->n_ctx > (1u << 24) || p->n_batch < 1 || p->n_batch > (1u << 16) || p->n_seq_max < 1 ||
        p->n_seq_max > OX_SEQ_MAX)
        return ox_fail(OX_ERR_INVALID_ARG,
                       "context: n_ctx %u, n_batch %u or n_seq_max %u out "
                       "of range",
                       p->n_ctx, p->n_batch, p->n_seq_max);
    return OX_OK;
}

/* Backend memory for n floats (or bytes, with balloc), counted in buffer_bytes; NULL is caught
 * by the callers' checks. */
static void *balloc(struct ox_context *ctx, size_t bytes) {
    ctx->buffer_bytes += bytes;
    return ctx->be.ops->alloc(&ctx->be, bytes ? bytes : 1);
}

static float *bfalloc(struct ox_context *ctx, size_t n) {
    return balloc(ctx, n * sizeof(float));
}

static enum ox_status alloc_kv(struct ox_context *ctx) {
    const struct model_config *c = &ctx->model->cfg;
    struct kv_cache *kv = &ctx->kv;
    const struct dtype_traits *tr = dtype_get((int)ctx->params.kv_type);
    kv->type = ctx->params.kv_type;
    kv->n_cells = (int32_t)ctx->params.n_ctx;
    kv->k_row = (size_t)((int64_t)c->n_head_kv * c->head_dim_k / tr->block_size) * tr->type_size;
    kv->v_row = (size_t)((int64_t)c->n_head_kv * c->head_dim_v / tr->block_size) * tr->type_size;
    size_t cells = (size_t)kv->n_cells * (size_t)c->n_layer;
    kv->pos = malloc((size_t)kv->n_cells * sizeof *kv->pos);
    kv->seq = calloc((size_t)kv->n_cells * SEQ_WORDS, sizeof *kv->seq);
    ctx->kv_bytes = cells * (kv->k_row + kv->v_row); /* counted apart from buffer_bytes */
    kv->k = ctx->be.ops->alloc(&ctx->be, cells * kv->k_row);
    kv->v = ctx->be.ops->alloc(&ctx->be, cells * kv->v_row);
    bool device = ctx->be.ops->device;
    kv->b_pos = device ? balloc(ctx, (size_t)kv->n_cells * sizeof *kv->pos) : kv->pos;
    kv->b_seq = device ? balloc(ctx, (size_t)kv->n_cells * SEQ_WORDS * sizeof *kv->seq) : kv->seq;
    if (!kv->pos || !kv->seq || !kv->k || !kv->v || !kv->b_pos || !kv->b_seq)
        return ox_fail(OX_ERR_OOM, "context: cannot allocate a KV cache of %d cells on the %s",
                       kv->n_cells, ctx->be.ops->name);
    for (int32_t i = 0; i < kv->n_cells; i++)
        kv->pos[i] = -1;
    return OX_OK;
}

static enum ox_status alloc_activations(struct ox_context *ctx) {
    const struct model_config *c = &ctx->model->cfg;
    struct activations *a = &ctx->act;
    size_t nb = ctx->params.n_batch, e = (size_t)c->n_embd;
    size_t q = (size_t)c->n_head * (size_t)c->head_dim_k, o = (size_t)c->n_head * c->head_dim_v;
    size_t dk = (size_t)c->n_head_kv * c->head_dim_k, dv = (size_t)c->n_head_kv * c->head_dim_v;
    size_t ff = (size_t)c->n_ff > e ? (size_t)c->n_ff : e;
    ff = ff > (size_t)c->n_ff_exp ? ff : (size_t)c->n_ff_exp;
    size_t ff_up = c->arch->ffn == FFN_SWIGLU_FUSED ? 2 * ff : ff; /* a row of [gate | up] */
    size_t ints = nb * sizeof(int32_t);
    bool device = ctx->be.ops->device;
    a->x = bfalloc(ctx, nb * e), a->xn = bfalloc(ctx, nb * e), a->q = bfalloc(ctx, nb * q);
    a->qkv = bfalloc(ctx, nb * (q + dk + dv)), a->branch = bfalloc(ctx, nb * e);
    a->k = bfalloc(ctx, nb * dk), a->v = bfalloc(ctx, nb * dv), a->attn = bfalloc(ctx, nb * o);
    a->proj = bfalloc(ctx, nb * e), a->gate = bfalloc(ctx, nb * ff),
    a->up = bfalloc(ctx, nb * ff_up);
    /* an attention that reads the cache needs no float copy of it: kf stays one row, which the
     * context shift re-ropes */
    bool in_place = ctx->be.ops->attention_reads_cache;
    size_t cache_rows = in_place ? 1 : (size_t)ctx->kv.n_cells;
    a->hidden = bfalloc(ctx, nb * ff), a->kf = bfalloc(ctx, cache_rows * dk);
    a->k_t = device ? NULL : bfalloc(ctx, ctx->kv.n_cells * dk);
    a->vf = bfalloc(ctx, cache_rows * dv), a->router = bfalloc(ctx, nb * (size_t)c->n_expert);
    a->router_host = device ? falloc(nb * (size_t)c->n_expert) : a->router;
    a->pos = malloc(ints), a->seq = malloc(ints), a->cell = malloc(ints);
    a->b_tok = balloc(ctx, ints);
    a->b_pos = device ? balloc(ctx, ints) : a->pos;
    a->b_seq = device ? balloc(ctx, ints) : a->seq;
    a->b_cell = device ? balloc(ctx, ints) : a->cell;
    /* A GPU computes logits 64 rows at a time (downloaded after each): a batch's worth would
     * take more device memory than the rest of the activations together. */
    ctx->logit_rows = device && nb > 64 ? 64 : (int32_t)nb;
    ctx->b_logits = bfalloc(ctx, (size_t)ctx->logit_rows * (size_t)c->n_vocab);
    ctx->logits = device ? falloc(nb * (size_t)c->n_vocab) : ctx->b_logits;
    ctx->out_row = malloc(ints);
    if (!a->x || !a->xn || !a->qkv || !a->branch || !a->q || !a->k || !a->v || !a->attn ||
        !a->proj || !a->gate || !a->up || !a->hidden || !a->kf || (!device && !a->k_t) || !a->vf ||
        !a->router || !a->router_host || !a->pos || !a->seq || !a->cell || !a->b_tok || !a->b_pos ||
        !a->b_seq || !a->b_cell || !ctx->b_logits || !ctx->logits || !ctx->out_row)
        return ox_fail(OX_ERR_OOM, "context: cannot allocate activations for %zu tokens on the %s",
                       nb, ctx->be.ops->name);
#ifdef OX_HAVE_CUDA
    if (device) /* one chunk of logit rows, page-locked: the copy lands there directly */
        backend_cuda_pin(&ctx->be, ctx->logits,
                         (size_t)ctx->logit_rows * (size_t)c->n_vocab * sizeof(float));
#endif
    return OX_OK;
}

/* The columns of the widest activation row a matmul may see, and with scores (the CPU's
 * attention rows over the whole context) the widest scratch row. */
static int64_t max_cols(const struct ox_context *ctx, bool scores) {
    const struct model_config *c = &ctx->model->cfg;
    int64_t cols = c->n_ff > c->n_embd ? c->n_ff : c->n_embd;
    cols = cols > c->n_ff_exp ? cols : c->n_ff_exp;
    cols = cols > c->n_head * c->head_dim_k ? cols : c->n_head * c->head_dim_k;
    cols = cols > c->n_head * c->head_dim_v ? cols : c->n_head * c->head_dim_v;
    if (!scores)
        return cols;
    cols = cols > ctx->params.n_ctx ? cols : ctx->params.n_ctx; /* attention scores */
    int64_t qv = (int64_t)c->head_dim_k + c->head_dim_v;        /* f16 attention: q + values */
    return cols > qv ? cols : qv;
}

static enum ox_status alloc_backend(struct ox_context *ctx) {
    int64_t cols = max_cols(ctx, true);
#ifdef OX_HAVE_CUDA
    /* Early kernel launch measured on an H200: 8B Q4_K_M decode 258 -> 271 t/s, 1B Q4_0
     * 932 -> 880; so from 4 GiB of weights on (OX_CUDA_EARLY=0 or 1 overrides). */
    const char *early = getenv("OX_CUDA_EARLY");
    bool big = ctx->model->gpu_bytes >= ((size_t)4 << 30);
    if (ctx->model->on_gpu) /* its attention needs no scratch: only the matmuls' widths */
        return backend_cuda_init(&ctx->be, ctx->params.n_batch, max_cols(ctx, false),
                                 early ? atoi(early) != 0 : big);
#endif
    int n = ctx->params.n_threads > 0 ? ctx->params.n_threads : threadpool_default_threads();
    ctx->be.ops = &backend_cpu_ops;
    ctx->be.scratch_per_thread = backend_cpu_scratch(cols);
    ctx->be.scratch = falloc((size_t)n * ctx->be.scratch_per_thread);
    ctx->be.x_rounded = falloc((size_t)ctx->params.n_batch * (size_t)cols);
    ctx->be.x_packed = ox_aligned_alloc(OX_ALIGN, (size_t)cols * sizeof(float));
    if (!ctx->be.scratch || !ctx->be.x_rounded || !ctx->be.x_packed)
        return ox_fail(OX_ERR_OOM, "context: out of memory");
    return threadpool_create(n, &ctx->be.pool);
}

enum ox_status ox_context_create(const struct ox_model *m, const struct ox_context_params *p,
                                 struct ox_context **out) {
    if (!m || !out)
        return ox_fail(OX_ERR_INVALID_ARG, "ox_context_create: NULL argument");
    *out = NULL;
    struct ox_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return ox_fail(OX_ERR_OOM, "context: out of memory");
    ctx->model = m;
    ctx->params = p ? *p : ox_context_params_default();
    enum ox_status s = check_params(m, &ctx->params);
    if (s == OX_OK)
        s = alloc_backend(ctx);
    if (s == OX_OK)
        s = alloc_kv(ctx);
    if (s == OX_OK)
        s = alloc_activations(ctx);
    if (s != OX_OK) {
        ox_context_free(ctx);
        return s;
    }
    *out = ctx;
    return OX_OK;
}

void ox_context_free(struct ox_context *ctx) {
    if (!ctx)
        return;
    struct backend *b = &ctx->be;
    struct activations *a = &ctx->act;
    if (b->ops) { /* the backend's buffers; the host's aliases of them are not freed twice */
        bool device = b->ops->device;
        void *bs[] = {a->x,    a->xn,     a->qkv,   a->branch,     a->q,      a->k,     a->v,
                      a->attn, a->proj,   a->gate,  a->up,         a->hidden, a->kf,    a->k_t,
                      a->vf,   a->router, a->b_tok, ctx->b_logits, ctx->kv.k, ctx->kv.v};
        for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++)
            if (bs[i])
                b->ops->free(b, bs[i]);
        void *mirrors[] = {a->b_pos, a->b_seq, a->b_cell, ctx->kv.b_pos, ctx->kv.b_seq};
        for (size_t i = 0; device && i < sizeof mirrors / sizeof mirrors[0]; i++)
            if (mirrors[i])
                b->ops->free(b, mirrors[i]);
#ifdef OX_HAVE_CUDA
        if (b->impl)
            backend_cuda_unpin(b);
#endif
        if (device)
            ox_aligned_free(a->router_host), ox_aligned_free(ctx->logits);
    }
#ifdef OX_HAVE_CUDA
    if (b->impl)
        backend_cuda_release(b);
#endif
    free(a->pos), free(a->seq), free(a->cell), free(ctx->out_row);
    free(ctx->kv.pos), free(ctx->kv.seq);
    ox_aligned_free(b->scratch), ox_aligned_free(b->x_rounded), ox_aligned_free(b->x_packed);
    threadpool_free(b->pool);
    free(ctx);
}

void ox_context_memory(const struct ox_context *ctx, uint64_t *kv_bytes, uint64_t *buffer_bytes) {
    *kv_bytes = ctx->kv_bytes;
    *buffer_bytes = ctx->buffer_bytes + ctx->be.own_bytes;
}

uint32_t ox_context_n_ctx(const struct ox_context *ctx) {
    return ctx->params.n_ctx;
}
