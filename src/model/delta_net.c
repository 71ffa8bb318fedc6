/* delta_net.c: a gated delta-net layer (Qwen 3.5, as llama.cpp's qwen35 graph builds it):
 * projections of the normed input into q, k, v (one matrix), the output gate z, and the per-head
 * beta and alpha; the backend's delta_net op (causal convolution, then the delta rule on each
 * sequence's state); RMS norm per head times silu(z); the output projection. */
#include "model/delta_net.h"

#include <stdlib.h>

#include "model/block.h"
#include "model/context.h"
#include "model/layer_ops.h"

/* n floats of the backend's memory, zeroed, counted in the context's buffer bytes. */
static float *zalloc(struct ox_context *ctx, struct backend *b, size_t n) {
    n = n ? n : 1;
    float *p = b->ops->alloc(b, n * sizeof *p);
    if (p)
        b->ops->zero(b, p, n);
    ctx->buffer_bytes += p ? n * sizeof *p : 0;
    return p;
}

/* A recurrent layer's widths: its convolution's rows, its output (value) rows, its heads, and
 * what its input projection makes (a Mamba-2 layer's z, x, B, C and dt in one row; a delta-net
 * layer's q, k and v). */
struct widths {
    size_t conv, value, heads, in;
};

static struct widths recurrent_widths(const struct model_config *c) {
    size_t d = (size_t)c->dn_state;
    if (c->arch->mamba2) {
        size_t conv = (size_t)c->ssm_inner + 2 * (size_t)c->ssm_groups * d;
        return (struct widths){conv, (size_t)c->ssm_inner, (size_t)c->ssm_heads,
                               (size_t)c->ssm_inner + conv + (size_t)c->ssm_heads};
    }
    size_t value = (size_t)c->dn_v_heads * d, conv = 2 * (size_t)c->dn_k_heads * d + value;
    return (struct widths){conv, value, (size_t)c->dn_v_heads, conv};
}

/* The stage's buffers for n_batch tokens. */
static bool alloc_bufs(struct ox_context *ctx, struct stage *st, struct delta_net_bufs *u) {
    struct widths w = recurrent_widths(&ctx->model->cfg);
    struct backend *b = u->owner = &st->be;
    size_t nb = ctx->params.n_batch;
    u->qkv = zalloc(ctx, b, nb * w.in), u->conv_out = zalloc(ctx, b, nb * w.conv);
    u->z = zalloc(ctx, b, nb * w.value), u->y = zalloc(ctx, b, nb * w.value);
    u->beta = zalloc(ctx, b, nb * w.heads), u->alpha = zalloc(ctx, b, nb * w.heads);
    return u->qkv && u->conv_out && u->z && u->y && u->beta && u->alpha;
}

/* Whether the context runs layer il: a rank of a model split by layers (pipeline.c) runs its
 * own alone, and keeps no state for the others'. */
static bool runs_layer(const struct ox_model *m, int32_t il) {
    return !m->pipe_world || (il >= m->layer_begin && il < m->layer_end);
}

/* Each recurrent layer's state in the memory of the stage that runs it. */
static bool alloc_states(struct ox_context *ctx, struct delta_net_state *s) {
    const struct model_config *c = &ctx->model->cfg;
    for (int32_t il = 0, r = 0; il < c->n_layer; il++) {
        const bool own = c->is_recurrent[il] && runs_layer(ctx->model, il);
        s->index[il] = own ? r : -1;
        if (!own)
            continue;
        struct stage *st = &ctx->stages[ctx->n_stages > 1 && il >= ctx->stages[1].layer_begin];
        s->owner[r] = &st->be;
        s->conv[r] = zalloc(ctx, &st->be, (size_t)s->n_slots * s->conv_floats);
        s->ssm[r] = zalloc(ctx, &st->be, (size_t)s->n_slots * s->ssm_floats);
        if (!s->conv[r] || !s->ssm[r])
            return false;
        r++;
    }
    return true;
}

enum ox_status delta_net_create(struct ox_context *ctx) {
    const struct model_config *c = &ctx->model->cfg;
    if (c->n_recurrent == 0)
        return OX_OK;
    struct delta_net_state *s = calloc(1, sizeof *s);
    if (!s)
        return ox_fail(OX_ERR_OOM, "context: out of memory");
    ctx->dn = s;
    struct widths w = recurrent_widths(c);
    s->n_slots = (int32_t)ctx->params.n_seq_max, s->n_layers = 0;
    for (int32_t il = 0; il < c->n_layer; il++)
        s->n_layers += c->is_recurrent[il] && runs_layer(ctx->model, il);
    s->conv_floats = (size_t)(c->dn_conv - 1) * w.conv;
    /* a delta-net head's d x d matrix; a Mamba-2 head's head_dim x d_state */
    s->ssm_floats = w.value * (size_t)c->dn_state;
    s->index = malloc((size_t)c->n_layer * sizeof *s->index);
    s->conv = calloc((size_t)s->n_layers + 1, sizeof *s->conv); /* + 1: a rank may run none */
    s->ssm = calloc((size_t)s->n_layers + 1, sizeof *s->ssm);
    s->owner = calloc((size_t)s->n_layers + 1, sizeof *s->owner);
    bool ok = s->index && s->conv && s->ssm && s->owner && alloc_states(ctx, s);
    for (int32_t i = 0; ok && i < ctx->n_stages; i++)
        ok = alloc_bufs(ctx, &ctx->stages[i], &s->bufs[i]);
    if (!ok)
        return ox_fail(OX_ERR_OOM, "context: cannot allocate the recurrent state of %d sequences",
                       s->n_slots);
    return OX_OK;
}

void delta_net_free(struct delta_net_state *s) {
    if (!s)
        return;
    for (int32_t r = 0; s->owner && r < s->n_layers; r++) {
        struct backend *b = s->owner[r];
        if (b && s->conv[r])
            b->ops->free(b, s->conv[r]);
        if (b && s->ssm[r])
            b->ops->free(b, s->ssm[r]);
    }
    for (size_t i = 0; i < sizeof s->bufs / sizeof s->bufs[0]; i++) {
        struct delta_net_bufs *u = &s->bufs[i];
        float *p[] = {u->qkv, u->conv_out, u->z, u->y, u->beta, u->alpha};
        for (size_t j = 0; u->owner && j < sizeof p / sizeof p[0]; j++)
            if (p[j])
                u->owner->ops->free(u->owner, p[j]);
    }
    free(s->index), free(s->conv), free(s->ssm), free(s->owner);
    free(s);
}

void delta_net_reset(struct delta_net_state *s, int32_t seq) {
    if (!s || seq >= s->n_slots)
        return;
    size_t first = seq < 0 ? 0 : (size_t)seq, count = seq < 0 ? (size_t)s->n_slots : 1;
    for (int32_t r = 0; r < s->n_layers; r++) {
        struct backend *b = s->owner[r];
        b->ops->zero(b, s->conv[r] + first * s->conv_floats, count * s->conv_floats);
        b->ops->zero(b, s->ssm[r] + first * s->ssm_floats, count * s->ssm_floats);
    }
}

void delta_net_copy(struct delta_net_state *s, int32_t src, int32_t dst) {
    if (!s || src < 0 || dst < 0 || src >= s->n_slots || dst >= s->n_slots || src == dst)
        return;
    for (int32_t r = 0; r < s->n_layers; r++) { /* one row each, as long as a slot */
        struct backend *b = s->owner[r];
        size_t cf = s->conv_floats, sf = s->ssm_floats;
        b->ops->copy_rows(b, s->conv[r] + (size_t)dst * cf, cf, s->conv[r] + (size_t)src * cf, cf,
                          1, (int)cf);
        b->ops->copy_rows(b, s->ssm[r] + (size_t)dst * sf, sf, s->ssm[r] + (size_t)src * sf, sf, 1,
                          (int)sf);
    }
}

void delta_net_layer(struct ox_context *ctx, struct stage *s, const struct layer_weights *l, int il,
                     int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct delta_net_state *dn = ctx->dn;
    struct delta_net_bufs *u = &dn->bufs[s - ctx->stages];
    struct activations *a = &s->act;
    struct backend *b = &s->be;
    int32_t r = dn->index[il], d = c->dn_state, hv = c->dn_v_heads;
    b->ops->rms_norm(b, a->x, vec(b, l->attn_norm), a->xn, n, c->n_embd, c->norm_eps);
    linear(b, l->dn_qkv, NULL, a->xn, u->qkv, n);
    linear(b, l->dn_z, NULL, a->xn, u->z, n);
    linear(b, l->dn_beta, NULL, a->xn, u->beta, n);
    linear(b, l->dn_alpha, NULL, a->xn, u->alpha, n);
    struct delta_net_args args = {
        .qkv = u->qkv,
        .beta = u->beta,
        .alpha = u->alpha,
        .conv_w = vec(b, l->dn_conv),
        .dt_bias = vec(b, l->dn_dt_bias),
        .a = vec(b, l->dn_a),
        .conv_state = dn->conv[r],
        .ssm_state = dn->ssm[r],
        .conv_stride = dn->conv_floats,
        .ssm_stride = dn->ssm_floats,
        .slot = a->b_seq,
        .conv_out = u->conv_out,
        .y = u->y,
        .n = n,
        .n_k_heads = c->dn_k_heads,
        .n_v_heads = hv,
        .d_state = d,
        .d_conv = c->dn_conv,
        .eps = c->norm_eps,
    };
    b->ops->delta_net(b, &args);
    /* each head's output normed, times silu(z) (llama.cpp's build_norm_gated), projected */
    b->ops->rms_norm(b, u->y, vec(b, l->dn_norm), u->y, n * hv, d, c->norm_eps);
    b->ops->glu(b, GLU_SILU, u->z, u->y, u->y, (size_t)n * (size_t)hv * (size_t)d);
    linear(b, l->dn_out, NULL, u->y, a->proj, n);
    block_reduce(ctx, s, a->proj, n); /* a split model's value heads' shares */
}
