/* weights.c: binds each tensor the forward pass needs to its bytes in the mapped file, checking
 * names, shapes and that the CPU can run its type. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file.h"
#include "core/threadpool.h"
#include "model/model.h"
#include "quant/dtype.h"

static const struct weight *find(const struct ox_model *m, const char *name) {
    const struct gguf_tensor *t = gguf_find_tensor(m->gguf, name);
    return t ? &m->weights[t - m->gguf->tensors] : NULL;
}

/* The tensor `name` with exactly the shape ne0 x ne1 x ne2 (unused dims 1); optional ones may
 * be absent (NULL). Weights must be a type the dequantizer knows. */
static enum ox_status bind(const struct ox_model *m, const char *name, int64_t ne0, int64_t ne1,
                           int64_t ne2, bool optional, const struct weight **out) {
    const struct weight *w = find(m, name);
    *out = w;
    if (!w)
        return optional ? OX_OK : ox_fail(OX_ERR_FORMAT, "model: tensor '%s' is missing", name);
    if (w->ne[0] != ne0 || w->ne[1] != ne1 || w->ne[2] != ne2 || w->ne[3] != 1)
        return ox_fail(OX_ERR_FORMAT,
                       "model: tensor '%s' has shape %lld x %lld x %lld, "
                       "expected %lld x %lld x %lld",
                       name, (long long)w->ne[0], (long long)w->ne[1], (long long)w->ne[2],
                       (long long)ne0, (long long)ne1, (long long)ne2);
    if (!dtype_get((int)w->type)->to_float)
        return ox_fail(OX_ERR_UNSUPPORTED,
                       "model: tensor '%s' has type %s, which the CPU "
                       "backend cannot run",
                       name, ox_dtype_name(w->type));
    return OX_OK;
}

/* An f32 table of ne1 rows of ne0 (a norm weight or bias: ne1 = 1; the experts' biases, a row
 * each): read directly as floats by the forward pass, so it must be f32. */
static enum ox_status bind_f32(const struct ox_model *m, const char *name, int64_t ne0, int64_t ne1,
                               bool optional, const struct weight **out) {
    OX_TRY(bind(m, name, ne0, ne1, 1, optional, out));
    if (*out && (*out)->type != OX_DTYPE_F32)
        return ox_fail(OX_ERR_UNSUPPORTED, "model: tensor '%s' must be f32, not %s", name,
                       ox_dtype_name((*out)->type));
    return OX_OK;
}

static enum ox_status bind_vec(const struct ox_model *m, const char *name, int64_t n, bool optional,
                               const struct weight **out) {
    return bind_f32(m, name, n, 1, optional, out);
}

static enum ox_status bind_attention(struct ox_model *m, int il, struct layer_weights *l) {
    const struct model_config *c = &m->cfg;
    const struct arch_desc *d = c->arch;
    const struct layer_shape *s = &c->layer[il];
    int64_t e = c->n_embd, hd = s->head_dim_k, q = (int64_t)c->n_head * hd;
    int64_t k = (int64_t)s->n_head_kv * hd, v = (int64_t)s->n_head_kv * s->head_dim_v;
    bool own_kv = s->kv_layer == il; /* else only q is projected: the cache is another's */
    char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%d." suffix, il), name)
    /* the first layer may lean on the embeddings' norm (ModernBERT) */
    OX_TRY(bind_vec(m, NAME("attn_norm.weight"), e, d->no_pre_norm || (il == 0 && d->embd_norm),
                    &l->attn_norm));
    OX_TRY(bind_vec(m, NAME("attn_norm.bias"), e, true, &l->attn_norm_b));
    OX_TRY(bind(m, NAME("attn_qkv.weight"), e, q + k + v, 1, true, &l->wqkv));
    OX_TRY(bind_vec(m, NAME("attn_qkv.bias"), q + k + v, true, &l->bqkv));
    /* with an output gate, each head's query rows are followed by as many gate rows */
    OX_TRY(bind(m, NAME("attn_q.weight"), e, d->attn_gate ? 2 * q : q, 1, l->wqkv != NULL, &l->wq));
    OX_TRY(bind(m, NAME("attn_k.weight"), e, k, 1, l->wqkv || !own_kv, &l->wk));
    bool v_optional = l->wqkv || !own_kv || (d->v_may_be_k && k == v);
    OX_TRY(bind(m, NAME("attn_v.weight"), e, v, 1, v_optional, &l->wv));
    OX_TRY(bind_vec(m, NAME("attn_q.bias"), q, true, &l->bq));
    OX_TRY(bind_vec(m, NAME("attn_k.bias"), k, true, &l->bk));
    OX_TRY(bind_vec(m, NAME("attn_v.bias"), v, true, &l->bv));
    if (d->qk_norm == QK_NORM_NONE && find(m, NAME("attn_q_norm.weight")))
        return ox_fail(OX_ERR_UNSUPPORTED, /* Command R+'s per-head LayerNorms, say */
                       "model: tensor '%s' (a q/k norm %s does not have) is not supported", name,
                       d->name);
    if (d->qk_norm != QK_NORM_NONE) {
        bool whole = d->qk_norm == QK_NORM_WHOLE;
        bool opt = d->qk_norm_optional;
        OX_TRY(bind_vec(m, NAME("attn_q_norm.weight"), whole ? q : hd, opt, &l->q_norm));
        OX_TRY(bind_vec(m, NAME("attn_k_norm.weight"), whole ? k : hd,
                        !own_kv || (opt && !l->q_norm), &l->k_norm));
    }
    OX_TRY(bind(m, NAME("attn_output.weight"), (int64_t)c->n_head * s->head_dim_v, e, 1, false,
                &l->wo));
    OX_TRY(bind_vec(m, NAME("attn_output.bias"), e, true, &l->bo));
    OX_TRY(bind_vec(m, NAME("attn_sinks.weight"), c->n_head, true, &l->attn_sinks));
    if (d->post_norms)
        OX_TRY(bind_vec(m, NAME("post_attention_norm.weight"), e, false, &l->attn_post_norm));
#undef NAME
    return OX_OK;
}

/* A latent-attention layer's tensors (deepseek2; shapes as llama.cpp's loader checks them). */
static enum ox_status bind_mla(struct ox_model *m, int il, struct layer_weights *l) {
    const struct model_config *c = &m->cfg;
    int64_t e = c->n_embd, h = c->n_head, qr = c->mla_q_rank, kr = c->mla_kv_rank;
    int64_t hk = c->mla_head_k, nope = hk - c->n_rot;
    char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%d." suffix, il), name)
    OX_TRY(bind_vec(m, NAME("attn_norm.weight"), e, false, &l->attn_norm));
    if (qr > 0) {
        OX_TRY(bind(m, NAME("attn_q_a.weight"), e, qr, 1, false, &l->wq_a));
        OX_TRY(bind_vec(m, NAME("attn_q_a_norm.weight"), qr, false, &l->q_a_norm));
        OX_TRY(bind(m, NAME("attn_q_b.weight"), qr, h * hk, 1, false, &l->wq_b));
    } else { /* the lite models' single q projection */
        OX_TRY(bind(m, NAME("attn_q.weight"), e, h * hk, 1, false, &l->wq));
    }
    OX_TRY(bind(m, NAME("attn_kv_a_mqa.weight"), e, kr + c->n_rot, 1, false, &l->wkv_a));
    OX_TRY(bind_vec(m, NAME("attn_kv_a_norm.weight"), kr, false, &l->kv_a_norm));
    OX_TRY(bind(m, NAME("attn_k_b.weight"), nope, kr, h, false, &l->wk_b));
    OX_TRY(bind(m, NAME("attn_v_b.weight"), kr, c->mla_head_v, h, false, &l->wv_b));
    OX_TRY(bind(m, NAME("attn_output.weight"), h * c->mla_head_v, e, 1, false, &l->wo));
#undef NAME
    return OX_OK;
}

/* A Mamba-2 layer's tensors (granitehybrid; shapes as llama.cpp's loader checks them). */
static enum ox_status bind_mamba2(struct ox_model *m, int il, struct layer_weights *l) {
    const struct model_config *c = &m->cfg;
    int64_t e = c->n_embd, inner = c->ssm_inner, h = c->ssm_heads;
    int64_t conv = inner + 2 * (int64_t)c->ssm_groups * c->dn_state, in = inner + conv + h;
    char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%d." suffix, il), name)
    OX_TRY(bind_vec(m, NAME("attn_norm.weight"), e, false, &l->attn_norm));
    OX_TRY(bind(m, NAME("ssm_in.weight"), e, in, 1, false, &l->ssm_in));
    OX_TRY(bind_f32(m, NAME("ssm_conv1d.weight"), c->dn_conv, conv, false, &l->dn_conv));
    OX_TRY(bind_vec(m, NAME("ssm_conv1d.bias"), conv, true, &l->ssm_conv_b));
    OX_TRY(bind_vec(m, NAME("ssm_dt.bias"), h, false, &l->ssm_dt_b));
    OX_TRY(bind_f32(m, NAME("ssm_a"), 1, h, false, &l->ssm_a));
    OX_TRY(bind_f32(m, NAME("ssm_d"), 1, h, false, &l->ssm_d));
    OX_TRY(bind_f32(m, NAME("ssm_norm.weight"), inner / c->ssm_groups, c->ssm_groups, false,
                    &l->ssm_norm));
    OX_TRY(bind(m, NAME("ssm_out.weight"), inner, e, 1, false, &l->ssm_out));
#undef NAME
    return OX_OK;
}

/* A gated delta-net layer's tensors (qwen35; shapes as llama.cpp's loader checks them). */
static enum ox_status bind_delta_net(struct ox_model *m, int il, struct layer_weights *l) {
    const struct model_config *c = &m->cfg;
    int64_t e = c->n_embd, key = (int64_t)c->dn_k_heads * c->dn_state;
    int64_t value = (int64_t)c->dn_v_heads * c->dn_state, conv = 2 * key + value;
    char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%d." suffix, il), name)
    OX_TRY(bind_vec(m, NAME("attn_norm.weight"), e, false, &l->attn_norm));
    OX_TRY(bind(m, NAME("attn_qkv.weight"), e, conv, 1, false, &l->dn_qkv));
    OX_TRY(bind(m, NAME("attn_gate.weight"), e, value, 1, false, &l->dn_z));
    OX_TRY(bind_f32(m, NAME("ssm_conv1d.weight"), c->dn_conv, conv, false, &l->dn_conv));
    OX_TRY(bind_vec(m, NAME("ssm_dt.bias"), c->dn_v_heads, false, &l->dn_dt_bias));
    OX_TRY(bind_vec(m, NAME("ssm_a"), c->dn_v_heads, false, &l->dn_a));
    OX_TRY(bind(m, NAME("ssm_beta.weight"), e, c->dn_v_heads, 1, false, &l->dn_beta));
    OX_TRY(bind(m, NAME("ssm_alpha.weight"), e, c->dn_v_heads, 1, false, &l->dn_alpha));
    OX_TRY(bind_vec(m, NAME("ssm_norm.weight"), c->dn_state, false, &l->dn_norm));
    OX_TRY(bind(m, NAME("ssm_out.weight"), value, e, 1, false, &l->dn_out));
#undef NAME
    return OX_OK;
}

/* A layer's per-layer-embedding tensors (gemma4), its output scale and an encoder's norms of
 * the residual. */
static enum ox_status bind_layer_extras(struct ox_model *m, int il, struct layer_weights *l) {
    int64_t e = m->cfg.n_embd, p = m->cfg.n_embd_per_layer;
    const struct weight *scale;
    char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%d." suffix, il), name)
    if (m->cfg.arch->encoder) { /* BERT's norms of the residual sums */
        OX_TRY(bind_vec(m, NAME("attn_output_norm.weight"), e, false, &l->attn_out_norm));
        OX_TRY(bind_vec(m, NAME("attn_output_norm.bias"), e, true, &l->attn_out_norm_b));
        OX_TRY(bind_vec(m, NAME("layer_output_norm.weight"), e, false, &l->layer_out_norm));
        OX_TRY(bind_vec(m, NAME("layer_output_norm.bias"), e, true, &l->layer_out_norm_b));
    }
    OX_TRY(bind_vec(m, NAME("layer_output_scale.weight"), 1, true, &scale));
    if (scale)
        memcpy(&l->out_scale, scale->data, sizeof l->out_scale);
    if (p > 0) {
        OX_TRY(bind(m, NAME("inp_gate.weight"), e, p, 1, false, &l->ple_gate));
        OX_TRY(bind(m, NAME("proj.weight"), p, e, 1, false, &l->ple_proj));
        OX_TRY(bind_vec(m, NAME("post_norm.weight"), e, false, &l->ple_post_norm));
    }
#undef NAME
    return OX_OK;
}

static enum ox_status bind_ffn(struct ox_model *m, int il, struct layer_weights *l) {
    const struct model_config *c = &m->cfg;
    const struct arch_desc *d = c->arch;
    int64_t e = c->n_embd, ff = c->layer[il].n_ff, ne = c->n_expert, fe = c->n_ff_exp;
    bool gated = d->ffn == FFN_SWIGLU || d->ffn == FFN_GEGLU || d->ffn == FFN_SWIGLU_OAI;
    int64_t up = d->ffn == FFN_SWIGLU_FUSED || d->ffn == FFN_GEGLU_FUSED ? 2 * ff : ff;
    char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%d." suffix, il), name)
    OX_TRY(bind_vec(m,
                    d->ffn_norm_named_post_attention ? NAME("post_attention_norm.weight")
                                                     : NAME("ffn_norm.weight"),
                    e, d->parallel || d->no_pre_norm, &l->ffn_norm));
    OX_TRY(bind_vec(m, NAME("ffn_norm.bias"), e, true, &l->ffn_norm_b));
    if (ne > 0 && il >= c->n_dense_lead) {
        OX_TRY(bind(m, NAME("ffn_gate_inp.weight"), e, ne, 1, false, &l->ffn_gate_inp));
        OX_TRY(bind_vec(m, NAME("exp_probs_b.bias"), ne, true, &l->ffn_exp_probs_b));
        OX_TRY(bind(m, NAME("ffn_gate_exps.weight"), e, fe, ne, false, &l->ffn_gate_exps));
        OX_TRY(bind(m, NAME("ffn_up_exps.weight"), e, fe, ne, false, &l->ffn_up_exps));
        OX_TRY(bind(m, NAME("ffn_down_exps.weight"), fe, e, ne, false, &l->ffn_down_exps));
        OX_TRY(bind_vec(m, NAME("ffn_gate_inp.bias"), ne, true, &l->ffn_gate_inp_b));
        OX_TRY(bind_f32(m, NAME("ffn_gate_exps.bias"), fe, ne, true, &l->ffn_gate_exps_b));
        OX_TRY(bind_f32(m, NAME("ffn_up_exps.bias"), fe, ne, true, &l->ffn_up_exps_b));
        OX_TRY(bind_f32(m, NAME("ffn_down_exps.bias"), e, ne, true, &l->ffn_down_exps_b));
        int64_t fs = c->n_ff_shexp;
        OX_TRY(bind(m, NAME("ffn_up_shexp.weight"), e, fs, 1, true, &l->ffn_up_shexp));
        bool shared = l->ffn_up_shexp != NULL; /* then all but its gate are needed */
        OX_TRY(bind(m, NAME("ffn_gate_shexp.weight"), e, fs, 1, !shared, &l->ffn_gate_shexp));
        OX_TRY(bind(m, NAME("ffn_down_shexp.weight"), fs, e, 1, !shared, &l->ffn_down_shexp));
        OX_TRY(bind(m, NAME("ffn_gate_inp_shexp.weight"), e, 1, 1, true, &l->ffn_gate_inp_shexp));
        OX_TRY(bind_vec(m, NAME("ffn_gate_inp.scale"), e, true, &l->ffn_gate_inp_s));
        OX_TRY(bind_vec(m, NAME("ffn_down_exps.scale"), ne, true, &l->ffn_down_exps_s));
        /* a dense FFN beside the experts, each branch with norms of its own (gemma4) */
        OX_TRY(bind_vec(m, NAME("pre_ffw_norm_2.weight"), e, true, &l->ffn_pre_norm_2));
        bool dense = l->ffn_pre_norm_2 != NULL;
        OX_TRY(bind_vec(m, NAME("post_ffw_norm_1.weight"), e, !dense, &l->ffn_post_norm_1));
        OX_TRY(bind_vec(m, NAME("post_ffw_norm_2.weight"), e, !dense, &l->ffn_post_norm_2));
        OX_TRY(bind(m, NAME("ffn_gate.weight"), e, ff, 1, !dense, &l->ffn_gate));
        OX_TRY(bind(m, NAME("ffn_up.weight"), e, ff, 1, !dense, &l->ffn_up));
        OX_TRY(bind(m, NAME("ffn_down.weight"), ff, e, 1, !dense, &l->ffn_down));
    } else {
        OX_TRY(bind(m, NAME("ffn_gate.weight"), e, ff, 1, !gated, &l->ffn_gate));
        OX_TRY(bind_vec(m, NAME("ffn_gate.bias"), ff, true, &l->ffn_gate_b));
        OX_TRY(bind(m, NAME("ffn_up.weight"), e, up, 1, false, &l->ffn_up));
        OX_TRY(bind_vec(m, NAME("ffn_up.bias"), up, true, &l->ffn_up_b));
        OX_TRY(bind(m, NAME("ffn_down.weight"), ff, e, 1, false, &l->ffn_down));
        OX_TRY(bind_vec(m, NAME("ffn_down.bias"), e, true, &l->ffn_down_b));
    }
    if (d->post_norms)
        OX_TRY(bind_vec(m, NAME("post_ffw_norm.weight"), e, false, &l->ffn_post_norm));
#undef NAME
    return OX_OK;
}

/* The output norm (none after BERT's block: its last layer normed it) and, unless the model makes
 * embeddings only, the output matrix (the token embeddings when tied). */
static enum ox_status bind_lm_head(struct ox_model *m) {
    int64_t e = m->cfg.n_embd, nv = m->cfg.n_vocab;
    OX_TRY(bind_vec(m, "output_norm.weight", e, m->cfg.arch->encoder, &m->output_norm));
    OX_TRY(bind_vec(m, "output_norm.bias", e, true, &m->output_norm_b));
    if (m->cfg.arch->embeddings_only)
        return OX_OK;
    OX_TRY(bind(m, "output.weight", e, nv, 1, true, &m->output));
    OX_TRY(bind_vec(m, "output.bias", nv, true, &m->output_b));
    if (!m->output)
        m->output = m->tok_embd; /* tied embeddings */
    return OX_OK;
}

/* An embedding model's input norm and token-type rows (row 0 as floats: every token is type 0,
 * as in llama.cpp), and its classifier head when it has one (cls.output's rows are the scores). */
static enum ox_status bind_embedding_extras(struct ox_model *m) {
    int64_t e = m->cfg.n_embd;
    if (m->cfg.arch->embd_norm) {
        OX_TRY(bind_vec(m, "token_embd_norm.weight", e, false, &m->embd_norm));
        OX_TRY(bind_vec(m, "token_embd_norm.bias", e, true, &m->embd_norm_b));
    }
    const struct weight *types = m->cfg.arch->encoder ? find(m, "token_types.weight") : NULL;
    if (types) {
        OX_TRY(bind(m, "token_types.weight", e, types->ne[1], 1, false, &m->type_embd));
        if (!(m->type_row0 = malloc((size_t)e * sizeof *m->type_row0)))
            return ox_fail(OX_ERR_OOM, "model: out of memory");
        dtype_get((int)types->type)->to_float(types->data, m->type_row0, e);
    }
    OX_TRY(bind(m, "cls.weight", e, e, 1, true, &m->cls));
    OX_TRY(bind_vec(m, "cls.bias", e, true, &m->cls_b));
    OX_TRY(bind_vec(m, "cls.norm.weight", e, true, &m->cls_norm));
    const struct weight *out = find(m, "cls.output.weight");
    int64_t n_out = out ? out->ne[1] : 1;
    OX_TRY(bind(m, "cls.output.weight", e, n_out, 1, true, &m->cls_out));
    return bind_vec(m, "cls.output.bias", n_out, true, &m->cls_out_b);
}

/* The dense modules an embedding model may apply after pooling: both or neither. */
static enum ox_status bind_dense_out(struct ox_model *m) {
    int64_t e = m->cfg.n_embd;
    const struct weight *d2 = find(m, "dense_2.weight");
    int64_t f = d2 ? d2->ne[1] : 0;
    OX_TRY(bind(m, "dense_2.weight", e, f, 1, true, &m->dense_2));
    OX_TRY(bind_vec(m, "dense_2.bias", f, true, &m->dense_2_b));
    return bind(m, "dense_3.weight", f, e, 1, !d2, &m->dense_3);
}

enum ox_status model_bind_weights(struct ox_model *m) {
    struct ox_gguf *g = m->gguf;
    m->weights = calloc((size_t)(g->n_tensors ? g->n_tensors : 1), sizeof *m->weights);
    m->layers = calloc((size_t)m->cfg.n_layer, sizeof *m->layers);
    if (!m->weights || !m->layers)
        return ox_fail(OX_ERR_OOM, "model: out of memory");
    for (int64_t i = 0; i < g->n_tensors; i++) {
        const struct gguf_tensor *t = &g->tensors[i];
        const struct dtype_traits *tr = dtype_get((int)t->type);
        m->weights[i] = (struct weight){
            .name = t->name,
            .type = t->type,
            .ne = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]},
            .data = t->data,
            .row_bytes = (size_t)(t->ne[0] / tr->block_size) * tr->type_size,
        };
        m->n_params += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
    }
    const struct weight *emb = find(m, "token_embd.weight");
    if (!emb)
        return ox_fail(OX_ERR_FORMAT, "model: tensor 'token_embd.weight' is missing");
    m->cfg.n_vocab = (int32_t)emb->ne[1];
    int64_t e = m->cfg.n_embd, nv = m->cfg.n_vocab;
    OX_TRY(bind(m, "token_embd.weight", e, nv, 1, false, &m->tok_embd));
    if (m->cfg.arch->position == POS_LEARNED)
        OX_TRY(bind(m, "position_embd.weight", e, m->cfg.n_ctx_train, 1, false, &m->pos_embd));
    OX_TRY(bind_lm_head(m));
    if (m->cfg.arch->embeddings_only)
        OX_TRY(bind_embedding_extras(m));
    OX_TRY(bind_dense_out(m));
    const struct weight *freqs;
    OX_TRY(bind_vec(m, "rope_freqs.weight", m->cfg.n_rot / 2, true, &freqs));
    m->cfg.rope.freq_factors = freqs ? (const float *)freqs->data : NULL; /* llama3 scaling */
    if (!m->cfg.arch->rope_freqs_full_only)
        m->cfg.rope_swa.freq_factors = m->cfg.rope.freq_factors;
    for (int il = 0; il < m->cfg.n_layer; il++) {
        if (m->cfg.is_recurrent[il] && m->cfg.arch->mamba2)
            OX_TRY(bind_mamba2(m, il, &m->layers[il]));
        else if (m->cfg.is_recurrent[il])
            OX_TRY(bind_delta_net(m, il, &m->layers[il]));
        else if (m->cfg.arch->mla)
            OX_TRY(bind_mla(m, il, &m->layers[il]));
        else
            OX_TRY(bind_attention(m, il, &m->layers[il]));
        OX_TRY(bind_ffn(m, il, &m->layers[il]));
        OX_TRY(bind_layer_extras(m, il, &m->layers[il]));
    }
    int64_t p = m->cfg.n_embd_per_layer * (int64_t)m->cfg.n_layer;
    if (p == 0)
        return OX_OK;
    OX_TRY(bind(m, "per_layer_token_embd.weight", p, nv, 1, false, &m->ple_tok_embd));
    OX_TRY(bind(m, "per_layer_model_proj.weight", e, p, 1, false, &m->ple_model_proj));
    return bind_vec(m, "per_layer_proj_norm.weight", m->cfg.n_embd_per_layer, false,
                    &m->ple_proj_norm);
}

/* A tensor as the file has it, for prepare_weight. */
struct backend_tensor model_file_tensor(const struct ox_model *m, const struct weight *w) {
    const struct gguf_tensor *t = &m->gguf->tensors[w - m->weights];
    return (struct backend_tensor){.type = w->type,
                                   .data = w->data,
                                   .n_rows = w->ne[1],
                                   .n_cols = w->ne[0],
                                   .n_mats = w->ne[2] * w->ne[3],
                                   .n_dims = (int)t->n_dims,
                                   .row_bytes = w->row_bytes,
                                   /* a shard's slice (shard.c): its rows' span, not the file's */
                                   .n_bytes = m->whole ? (size_t)(w->ne[1] * w->ne[2] * w->ne[3]) *
                                                             w->row_bytes
                                                       : (size_t)t->n_bytes};
}

/* Once copied, a matrix's file pages are released: matmul reads the copy, and an embedding
 * lookup on a tied token_embd gets its rows back from the copy too. */
static void pack_one(struct ox_model *m, const struct weight *cw) {
    struct weight *w = (struct weight *)cw; /* our own array; bound as const for the forward */
    const struct backend_ops *host = backend_host();
    if (!w || w->copy) /* the GPU runs those from its copy */
        return;
    struct backend_tensor t = model_file_tensor(m, w);
    struct backend_weights unused = {0};
    if (host->prepare_weight(&unused, &t, &w->copy) != OX_OK || !w->copy)
        return; /* (the CPU's copy is an optimization: without it matmul reads the file) */
    w->copy_of = host;
    file_map_release(&m->gguf->map, w->data, w->row_bytes * (size_t)w->ne[1]);
}

/* The matrices to pack, biggest first, taken one at a time by the threads of a pool made for
 * the load: copying them is a second or more of a big model's load on one thread. */
struct pack_job {
    struct ox_model *m;
    const struct weight **mats;
    int n;
    atomic_int next;
};

static void pack_some(void *arg, int ith, int nth) {
    (void)ith, (void)nth;
    struct pack_job *j = arg;
    for (int i; (i = atomic_fetch_add(&j->next, 1)) < j->n;)
        pack_one(j->m, j->mats[i]);
}

static int bigger_first(const void *a, const void *b) {
    const struct weight *x = *(const struct weight *const *)a,
                        *y = *(const struct weight *const *)b;
    size_t bx = x->row_bytes * (size_t)x->ne[1], by = y->row_bytes * (size_t)y->ne[1];
    return (by > bx) - (by < bx);
}

/* A matrix bound twice (a shared or tied tensor) must be packed by one thread only. */
static int add_once(const struct weight **mats, int n, const struct weight *w) {
    for (int i = 0; i < n && w; i++)
        if (mats[i] == w)
            return n;
    if (w)
        mats[n++] = w;
    return n;
}

void model_pack_weights(struct ox_model *m) {
    model_pack_layers(m, 0, m->cfg.n_layer);
}

void model_pack_layers(struct ox_model *m, int32_t begin, int32_t end) {
    enum { PER_LAYER = 19 };
    const struct weight **mats = calloc((size_t)m->cfg.n_layer * PER_LAYER + 2, sizeof *mats);
    if (!mats)
        return; /* matmul reads the file's layout */
    int n = 0;
    for (int il = begin; il < end; il++) {
        const struct layer_weights *l = &m->layers[il];
        const struct weight *layer[PER_LAYER] = {
            l->wqkv,     l->wq,           l->wk,     l->wv,     l->wo,     l->ffn_gate, l->ffn_up,
            l->ffn_down, l->ffn_gate_inp, l->dn_qkv, l->dn_z,   l->dn_out, l->ple_gate, l->ple_proj,
            l->wq_a,     l->wq_b,         l->wkv_a,  l->ssm_in, l->ssm_out};
        for (int i = 0; i < PER_LAYER; i++)
            n = add_once(mats, n, layer[i]);
    }
    n = add_once(mats, n, m->output);
    n = add_once(mats, n, m->ple_model_proj);
    qsort(mats, (size_t)n, sizeof *mats, bigger_first);
    struct pack_job j = {m, mats, n, 0};
    struct threadpool *pool = NULL;
    int threads = threadpool_cpu_count() < 8 ? threadpool_cpu_count() : 8;
    if (threadpool_create(threads, &pool) == OX_OK) {
        threadpool_run(pool, pack_some, &j);
        threadpool_free(pool);
    } else {
        pack_some(&j, 0, 1);
    }
    free(mats);
}
