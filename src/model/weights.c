/* weights.c: binds each tensor the forward pass needs to its bytes in the mapped file, checking
 * names, shapes and that the CPU can run its type. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static enum ox_status bind_layer(struct ox_model *m, int il) {
    const struct model_config *c = &m->cfg;
    struct layer_weights *l = &m->layers[il];
    int64_t e = c->n_embd, q = (int64_t)c->n_head * c->head_dim_k;
    int64_t k = (int64_t)c->n_head_kv * c->head_dim_k, v = (int64_t)c->n_head_kv * c->head_dim_v;
    int64_t o = (int64_t)c->n_head * c->head_dim_v, ff = c->n_ff, ne = c->n_expert;
    char name[96];
#define BIND(field, suffix, a, b, cc, opt)                                                         \
    snprintf(name, sizeof name, "blk.%d." suffix ".weight", il);                                   \
    OX_TRY(bind(m, name, a, b, cc, opt, &l->field))
    BIND(attn_norm, "attn_norm", e, 1, 1, false);
    BIND(wq, "attn_q", e, q, 1, false);
    BIND(wk, "attn_k", e, k, 1, false);
    BIND(wv, "attn_v", e, v, 1, false);
    BIND(wo, "attn_output", o, e, 1, false);
    BIND(ffn_norm, "ffn_norm", e, 1, 1, false);
    if (ne > 0) {
        BIND(ffn_gate_inp, "ffn_gate_inp", e, ne, 1, false);
        BIND(ffn_gate_exps, "ffn_gate_exps", e, ff, ne, false);
        BIND(ffn_up_exps, "ffn_up_exps", e, ff, ne, false);
        BIND(ffn_down_exps, "ffn_down_exps", ff, e, ne, false);
    } else {
        BIND(ffn_gate, "ffn_gate", e, ff, 1, false);
        BIND(ffn_up, "ffn_up", e, ff, 1, false);
        BIND(ffn_down, "ffn_down", ff, e, 1, false);
    }
#undef BIND
    return OX_OK;
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
        m->weights[i] = (struct weight){t->name,
                                        t->type,
                                        {t->ne[0], t->ne[1], t->ne[2], t->ne[3]},
                                        t->data,
                                        (size_t)(t->ne[0] / tr->block_size) * tr->type_size};
        m->n_params += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
    }
    const struct weight *emb = find(m, "token_embd.weight");
    if (!emb)
        return ox_fail(OX_ERR_FORMAT, "model: tensor 'token_embd.weight' is missing");
    m->cfg.n_vocab = (int32_t)emb->ne[1];
    int64_t e = m->cfg.n_embd, nv = m->cfg.n_vocab;
    OX_TRY(bind(m, "token_embd.weight", e, nv, 1, false, &m->tok_embd));
    OX_TRY(bind(m, "output_norm.weight", e, 1, 1, false, &m->output_norm));
    OX_TRY(bind(m, "output.weight", e, nv, 1, true, &m->output));
    if (!m->output)
        m->output = m->tok_embd; /* tied embeddings */
    const struct weight *freqs;
    OX_TRY(bind(m, "rope_freqs.weight", m->cfg.n_rot / 2, 1, 1, true, &freqs));
    if (freqs && freqs->type != OX_DTYPE_F32)
        return ox_fail(OX_ERR_UNSUPPORTED, "model: rope_freqs.weight must be f32");
    m->cfg.rope.freq_factors = freqs ? (const float *)freqs->data : NULL; /* llama3 scaling */
    for (int il = 0; il < m->cfg.n_layer; il++)
        OX_TRY(bind_layer(m, il));
    return OX_OK;
}
