/* delta_net.c: a gated delta-net layer (Qwen 3.5, as llama.cpp's qwen35 graph builds it):
 * projections of the normed input into q, k, v (one matrix), the output gate z, and the per-head
 * beta and alpha; the backend's delta_net op (causal convolution, then the delta rule on each
 * sequence's state); RMS norm per head times silu(z); the output projection. */
#include "model/delta_net.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "model/context.h"
#include "model/layer_ops.h"

static float *zalloc(size_t n) {
    float *p = ox_aligned_alloc(OX_ALIGN, (n ? n : 1) * sizeof *p);
    if (p)
        memset(p, 0, (n ? n : 1) * sizeof *p);
    return p;
}

enum ox_status delta_net_create(const struct ox_model *m, uint32_t n_seq_max, uint32_t n_batch,
                                struct delta_net_state **out) {
    const struct model_config *c = &m->cfg;
    *out = NULL;
    if (c->n_recurrent == 0)
        return OX_OK;
    struct delta_net_state *s = calloc(1, sizeof *s);
    if (!s)
        return ox_fail(OX_ERR_OOM, "context: out of memory");
    size_t d = (size_t)c->dn_state, value = (size_t)c->dn_v_heads * d;
    size_t conv_dim = 2 * (size_t)c->dn_k_heads * d + value, nb = n_batch;
    size_t layers = (size_t)c->n_recurrent * n_seq_max;
    s->n_slots = (int32_t)n_seq_max, s->n_layers = c->n_recurrent;
    s->conv_floats = (size_t)(c->dn_conv - 1) * conv_dim;
    s->ssm_floats = (size_t)c->dn_v_heads * d * d;
    s->conv = zalloc(layers * s->conv_floats), s->ssm = zalloc(layers * s->ssm_floats);
    s->qkv = zalloc(nb * conv_dim), s->conv_out = zalloc(nb * conv_dim);
    s->z = zalloc(nb * value), s->y = zalloc(nb * value);
    s->beta = zalloc(nb * (size_t)c->dn_v_heads), s->alpha = zalloc(nb * (size_t)c->dn_v_heads);
    if (!s->conv || !s->ssm || !s->qkv || !s->conv_out || !s->z || !s->y || !s->beta || !s->alpha) {
        delta_net_free(s);
        return ox_fail(OX_ERR_OOM, "context: cannot allocate the recurrent state of %u sequences",
                       n_seq_max);
    }
    *out = s;
    return OX_OK;
}

void delta_net_free(struct delta_net_state *s) {
    if (!s)
        return;
    float *bufs[] = {s->conv, s->ssm, s->qkv, s->conv_out, s->z, s->y, s->beta, s->alpha};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        ox_aligned_free(bufs[i]);
    free(s);
}

/* Slot seq's conv and ssm state of recurrent layer r (slots hold all their layers together,
 * so a sequence's whole state is one piece of each array). */
static float *conv_state(const struct delta_net_state *s, int32_t seq, int32_t r) {
    return s->conv + ((size_t)seq * (size_t)s->n_layers + (size_t)r) * s->conv_floats;
}
static float *ssm_state(const struct delta_net_state *s, int32_t seq, int32_t r) {
    return s->ssm + ((size_t)seq * (size_t)s->n_layers + (size_t)r) * s->ssm_floats;
}

void delta_net_reset(struct delta_net_state *s, int32_t seq) {
    if (!s || seq >= s->n_slots)
        return;
    int32_t first = seq < 0 ? 0 : seq, count = seq < 0 ? s->n_slots : 1;
    size_t layers = (size_t)count * (size_t)s->n_layers;
    memset(conv_state(s, first, 0), 0, layers * s->conv_floats * sizeof(float));
    memset(ssm_state(s, first, 0), 0, layers * s->ssm_floats * sizeof(float));
}

void delta_net_copy(struct delta_net_state *s, int32_t src, int32_t dst) {
    if (!s || src < 0 || dst < 0 || src >= s->n_slots || dst >= s->n_slots || src == dst)
        return;
    size_t layers = (size_t)s->n_layers;
    memcpy(conv_state(s, dst, 0), conv_state(s, src, 0), layers * s->conv_floats * sizeof(float));
    memcpy(ssm_state(s, dst, 0), ssm_state(s, src, 0), layers * s->ssm_floats * sizeof(float));
}

/* The index of recurrent layer il among the recurrent layers. */
static int32_t recurrent_index(const struct model_config *c, int il) {
    int32_t r = 0;
    for (int i = 0; i < il; i++)
        r += c->is_recurrent[i];
    return r;
}

void delta_net_layer(struct ox_context *ctx, const struct layer_weights *l, int il, int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct delta_net_state *s = ctx->dn;
    struct activations *a = &ctx->st->act;
    struct backend *b = &ctx->st->be;
    int32_t r = recurrent_index(c, il), d = c->dn_state, hv = c->dn_v_heads;
    b->ops->rms_norm(b, a->x, vec(b, l->attn_norm), a->xn, n, c->n_embd, c->norm_eps);
    linear(b, l->dn_qkv, NULL, a->xn, s->qkv, n);
    linear(b, l->dn_z, NULL, a->xn, s->z, n);
    linear(b, l->dn_beta, NULL, a->xn, s->beta, n);
    linear(b, l->dn_alpha, NULL, a->xn, s->alpha, n);
    /* a slot's layers lie together: the op steps from one slot to the next by the whole slot */
    struct delta_net_args args = {
        .qkv = s->qkv,
        .beta = s->beta,
        .alpha = s->alpha,
        .conv_w = vec(b, l->dn_conv),
        .dt_bias = vec(b, l->dn_dt_bias),
        .a = vec(b, l->dn_a),
        .conv_state = conv_state(s, 0, r),
        .ssm_state = ssm_state(s, 0, r),
        .conv_stride = (size_t)s->n_layers * s->conv_floats,
        .ssm_stride = (size_t)s->n_layers * s->ssm_floats,
        .slot = a->b_seq,
        .conv_out = s->conv_out,
        .y = s->y,
        .n = n,
        .n_k_heads = c->dn_k_heads,
        .n_v_heads = hv,
        .d_state = d,
        .d_conv = c->dn_conv,
        .eps = c->norm_eps,
    };
    b->ops->delta_net(b, &args);
    /* each head's output normed, times silu(z) (llama.cpp's build_norm_gated), projected */
    b->ops->rms_norm(b, s->y, vec(b, l->dn_norm), s->y, n * hv, d, c->norm_eps);
    b->ops->glu(b, GLU_SILU, s->z, s->y, s->y, (size_t)n * (size_t)hv * (size_t)d);
    linear(b, l->dn_out, NULL, s->y, a->proj, n);
}
