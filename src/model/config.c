/* config.c: model hyper-parameters from the "<arch>.*" GGUF keys, checked for sense. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/model.h"

/* "<arch>.<suffix>" as an integer in [lo, hi]; absent keys take fallback (< 0: required). */
static enum ox_status get_int(const struct ox_gguf *g, const char *arch, const char *suffix,
                              int64_t lo, int64_t hi, int64_t fallback, int32_t *out) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    const struct gguf_value *v = gguf_find(g, key);
    if (!v && fallback >= 0) {
        *out = (int32_t)fallback;
        return OX_OK;
    }
    uint64_t x;
    if (v && v->type == OX_GGUF_ARRAY) /* per-layer arrays: this engine needs them uniform */
        return ox_fail(OX_ERR_UNSUPPORTED, "model: per-layer values of '%s' are not supported",
                       key);
    OX_TRY(gguf_get_uint(g, key, (uint64_t)hi, &x));
    if ((int64_t)x < lo)
        return ox_fail(OX_ERR_FORMAT, "model: '%s' = %llu is below %lld", key,
                       (unsigned long long)x, (long long)lo);
    *out = (int32_t)x;
    return OX_OK;
}

/* An integer element of an array (signed, unsigned or bool), or -1 for another type. */
static int64_t array_int(const struct gguf_value *arr, uint64_t i) {
    struct gguf_value e;
    if (gguf_array_elem(arr, i, &e) != OX_OK)
        return -1;
    switch (e.type) {
    case OX_GGUF_INT8:
    case OX_GGUF_INT16:
    case OX_GGUF_INT32:
    case OX_GGUF_INT64: return gguf_value_i64(&e);
    case OX_GGUF_UINT8:
    case OX_GGUF_BOOL:
    case OX_GGUF_UINT16:
    case OX_GGUF_UINT32:
    case OX_GGUF_UINT64: return gguf_value_u64(&e) > INT64_MAX ? -1 : (int64_t)gguf_value_u64(&e);
    default: return -1;
    }
}

/* "<arch>.<suffix>" per layer, in [lo, hi]: one integer for every layer, or an array of one per
 * layer (gemma4's kv heads and FFN widths); absent keys take fallback (< 0: required). */
static enum ox_status get_layer_ints(const struct ox_gguf *g, const char *arch, const char *suffix,
                                     int64_t lo, int64_t hi, int64_t fallback, int32_t n_layer,
                                     int32_t *out) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    const struct gguf_value *v = gguf_find(g, key);
    if (!v || v->type != OX_GGUF_ARRAY) {
        OX_TRY(get_int(g, arch, suffix, lo, hi, fallback, &out[0]));
        for (int32_t il = 1; il < n_layer; il++)
            out[il] = out[0];
        return OX_OK;
    }
    if (v->n != (uint64_t)n_layer)
        return ox_fail(OX_ERR_FORMAT, "model: '%s' has %llu values for %d layers", key,
                       (unsigned long long)v->n, n_layer);
    for (int32_t il = 0; il < n_layer; il++) {
        int64_t x = array_int(v, (uint64_t)il);
        if (x < lo || x > hi)
            return ox_fail(OX_ERR_FORMAT, "model: '%s' of layer %d is %lld, not in [%lld, %lld]",
                           key, il, (long long)x, (long long)lo, (long long)hi);
        out[il] = (int32_t)x;
    }
    return OX_OK;
}

/* The largest of the layers' values. */
static int32_t max_of(const int32_t *v, int32_t n) {
    int32_t m = v[0];
    for (int32_t i = 1; i < n; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

static enum ox_status get_float(const struct ox_gguf *g, const char *arch, const char *suffix,
                                float fallback, float *out) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    *out = fallback;
    return gguf_find(g, key) ? gguf_get_f32(g, key, out) : OX_OK;
}

static enum ox_status read_shape(const struct ox_gguf *g, const char *a, struct model_config *c) {
    OX_TRY(get_int(g, a, "embedding_length", 1, 1 << 20, -1, &c->n_embd));
    OX_TRY(get_int(g, a, "block_count", 1, MODEL_MAX_LAYERS, -1, &c->n_layer));
    OX_TRY(get_int(g, a, "attention.head_count", 1, 1 << 14, -1, &c->n_head));
    int32_t ff[MODEL_MAX_LAYERS], kv[MODEL_MAX_LAYERS];
    OX_TRY(get_layer_ints(g, a, "feed_forward_length", 1, 1 << 22, -1, c->n_layer, ff));
    /* a Mamba-2 hybrid's recurrent layers have no kv heads */
    OX_TRY(get_layer_ints(g, a, "attention.head_count_kv", c->arch->mamba2 ? 0 : 1, c->n_head,
                          c->n_head, c->n_layer, kv));
    OX_TRY(get_int(g, a, "context_length", 1, 1 << 24, 4096, &c->n_ctx_train));
    for (int32_t il = 0; il < c->n_layer; il++) {
        c->is_recurrent[il] = kv[il] == 0;
        c->n_recurrent += kv[il] == 0;
        if (kv[il] > 0 && c->n_head % kv[il] != 0)
            return ox_fail(OX_ERR_FORMAT, "model: %d kv heads do not divide %d heads", kv[il],
                           c->n_head);
        c->layer[il].n_ff = ff[il], c->layer[il].n_head_kv = kv[il];
    }
    /* the last nextn_predict_layers blocks are multi-token-prediction heads (DeepSeek V3, GLM-4.5):
     * not part of the forward pass, as in llama.cpp, which leaves them out */
    int32_t nextn;
    OX_TRY(get_int(g, a, "nextn_predict_layers", 0, c->n_layer - 1, 0, &nextn));
    c->n_layer -= nextn;
    c->n_ff = max_of(ff, c->n_layer), c->n_head_kv = max_of(kv, c->n_layer);
    /* head size defaults to n_embd / n_head; files where that is not whole must give it */
    int32_t hd = c->n_embd % c->n_head == 0 ? c->n_embd / c->n_head : -1;
    OX_TRY(get_int(g, a, "attention.key_length", 1, 1 << 14, hd, &c->head_dim_k));
    OX_TRY(get_int(g, a, "attention.value_length", 1, 1 << 14, hd > 0 ? hd : c->head_dim_k,
                   &c->head_dim_v));
    OX_TRY(get_int(g, a, "rope.dimension_count", 0, c->head_dim_k, c->head_dim_k, &c->n_rot));
    if (c->n_rot % 2 != 0)
        return ox_fail(OX_ERR_FORMAT, "model: rope dimension count %d is odd", c->n_rot);
    OX_TRY(get_int(g, a, "expert_count", 0, 1 << 12, 0, &c->n_expert));
    int64_t max_used = c->n_expert < MODEL_MAX_EXPERTS_USED ? c->n_expert : MODEL_MAX_EXPERTS_USED;
    OX_TRY(get_int(g, a, "expert_used_count", 0, max_used, 0, &c->n_expert_used));
    OX_TRY(get_int(g, a, "expert_feed_forward_length", 1, 1 << 22, c->n_ff, &c->n_ff_exp));
    if (c->n_expert > 0 && c->n_expert_used < 1)
        return ox_fail(OX_ERR_FORMAT, "model: %d experts but expert_used_count is 0", c->n_expert);
    return OX_OK;
}

/* A bool "<arch>.<suffix>", fallback when absent. */
static enum ox_status get_bool(const struct ox_gguf *g, const char *arch, const char *suffix,
                               bool fallback, bool *out) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    const struct gguf_value *v = gguf_find(g, key);
    *out = fallback;
    if (!v)
        return OX_OK;
    if (v->type != OX_GGUF_BOOL)
        return ox_fail(OX_ERR_FORMAT, "model: '%s' is not a bool", key);
    *out = gguf_value_u64(v) != 0;
    return OX_OK;
}

/* How a MoE's router picks and weighs experts: shared experts' width, leading dense layers,
 * softmax or sigmoid scores (expert_gating_func 1 or 2), groups, renormalisation and scale.
 * DeepSeek's files (arch mla) say whether to renormalise; others renormalise unless their
 * descriptor says raw. */
static enum ox_status read_moe_routing(const struct ox_gguf *g, const char *a,
                                       struct model_config *c) {
    int32_t shared, gating;
    OX_TRY(get_int(g, a, "expert_shared_count", 0, 64, 0, &shared));
    /* n_ff when absent, as llama.cpp's qwen2moe loader; DeepSeek's: its shared experts' */
    OX_TRY(get_int(g, a, "expert_shared_feed_forward_length", 1, 1 << 22,
                   shared > 0 ? (int64_t)shared * c->n_ff_exp : c->n_ff, &c->n_ff_shexp));
    OX_TRY(get_int(g, a, "leading_dense_block_count", 0, c->n_layer, 0, &c->n_dense_lead));
    OX_TRY(
        get_int(g, a, "expert_gating_func", 0, 2, c->arch->moe_sigmoid_default ? 2 : 1, &gating));
    OX_TRY(get_int(g, a, "expert_group_count", 0, 256, 0, &c->n_expert_groups)); /* moe.c */
    OX_TRY(get_int(g, a, "expert_group_used_count", 0, 1 << 12, 0, &c->n_group_used));
    OX_TRY(get_bool(g, a, "expert_weights_norm", !c->arch->mla && !c->arch->moe_raw_weights,
                    &c->moe_norm_weights));
    OX_TRY(get_float(g, a, "expert_weights_scale", 0.0f, &c->moe_weights_scale));
    c->moe_sigmoid = gating == 2 || (gating == 0 && c->arch->moe_sigmoid_default); /* 0: unset */
    c->moe_weights_scale = c->moe_weights_scale == 0.0f ? 1.0f : c->moe_weights_scale;
    if (!isfinite(c->moe_weights_scale))
        return ox_fail(OX_ERR_FORMAT, "model: expert_weights_scale is not a finite number");
    if (c->n_expert_groups > 1 &&
        (c->n_expert % c->n_expert_groups != 0 || c->n_group_used < 1 ||
         c->n_group_used > c->n_expert_groups ||
         c->n_expert_used > c->n_group_used * (c->n_expert / c->n_expert_groups)))
        return ox_fail(OX_ERR_FORMAT,
                       "model: %d experts in %d groups, %d of them used, cannot give %d experts",
                       c->n_expert, c->n_expert_groups, c->n_group_used, c->n_expert_used);
    return OX_OK;
}

/* Multi-head latent attention's ranks and head sizes (arch mla). The cache holds one head of
 * kv_rank + n_rot keys (attention.key_length) and kv_rank values (value_length). */
static enum ox_status read_mla(const struct ox_gguf *g, const char *a, struct model_config *c) {
    if (!c->arch->mla)
        return OX_OK;
    char key[256];
    snprintf(key, sizeof key, "%s.attention.key_length_mla", a);
    if (!gguf_find(g, key))
        return ox_fail(OX_ERR_UNSUPPORTED,
                       "model: no '%s': a file from before llama.cpp split attn_kv_b into "
                       "attn_k_b and attn_v_b; convert the model again",
                       key);
    OX_TRY(get_int(g, a, "attention.q_lora_rank", 0, 1 << 16, 0, &c->mla_q_rank));
    OX_TRY(get_int(g, a, "attention.kv_lora_rank", 1, 1 << 16, -1, &c->mla_kv_rank));
    OX_TRY(get_int(g, a, "attention.key_length_mla", 1, 1 << 14, -1, &c->mla_head_k));
    OX_TRY(get_int(g, a, "attention.value_length_mla", 1, 1 << 14, -1, &c->mla_head_v));
    if (c->n_head_kv != 1 || c->head_dim_k != c->mla_kv_rank + c->n_rot ||
        c->head_dim_v != c->mla_kv_rank || c->mla_head_k <= c->n_rot)
        return ox_fail(OX_ERR_FORMAT,
                       "model: latent attention with %d kv heads, key length %d and value "
                       "length %d for rank %d, %d rotary dims and heads of %d",
                       c->n_head_kv, c->head_dim_k, c->head_dim_v, c->mla_kv_rank, c->n_rot,
                       c->mla_head_k);
    return OX_OK;
}

/* ggml's YaRN correction dims: where the ramp between interpolated and extrapolated
 * frequencies starts and ends. */
static float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return (float)n_dims * logf((float)n_ctx_orig / (n_rot * 2 * 3.14159265358979323846f)) /
           (2 * logf(base));
}

static enum ox_status read_yarn(const struct ox_gguf *g, const char *a, struct model_config *c,
                                float factor) {
    struct rope_params *r = &c->rope;
    float beta_fast, beta_slow, log_mul;
    int32_t n_orig;
    OX_TRY(get_float(g, a, "rope.scaling.yarn_ext_factor", 1.0f, &r->ext_factor));
    OX_TRY(get_float(g, a, "rope.scaling.yarn_beta_fast", 32.0f, &beta_fast));
    OX_TRY(get_float(g, a, "rope.scaling.yarn_beta_slow", 1.0f, &beta_slow));
    OX_TRY(get_float(g, a, "rope.scaling.yarn_log_multiplier", 0.0f, &log_mul));
    if (c->arch->mla) /* DeepSeek's converter writes a tenth of it (llama.cpp's loader) */
        log_mul /= 0.1f;
    c->yarn_log_mul = log_mul;
    OX_TRY(
        get_int(g, a, "rope.scaling.original_context_length", 1, 1 << 24, c->n_ctx_train, &n_orig));
    float lo = floorf(yarn_corr_dim(r->n_rot, n_orig, beta_fast, r->freq_base));
    float hi = ceilf(yarn_corr_dim(r->n_rot, n_orig, beta_slow, r->freq_base));
    r->corr_dims[0] = lo > 0 ? lo : 0;
    r->corr_dims[1] = hi < (float)(r->n_rot - 1) ? hi : (float)(r->n_rot - 1);
    if (r->ext_factor != 0.0f) {
        /* llama.cpp's attention factor; the rope op multiplies its own 1 + 0.1 ln(factor) back */
        float m = factor <= 1.0f ? 1.0f : 0.1f * logf(factor) + 1.0f;
        float m_all =
            factor <= 1.0f || log_mul == 0.0f ? 1.0f : 0.1f * log_mul * logf(factor) + 1.0f;
        if (c->arch->mla && log_mul != 0.0f) /* DeepSeek V2: mscale is mscale_all_dim */
            m = m_all;
        r->attn_factor *= (log_mul != 0.0f ? m / m_all : m) / (1.0f + 0.1f * logf(factor));
    }
    return OX_OK;
}

static enum ox_status read_rope(const struct ox_gguf *g, const char *a, struct model_config *c) {
    struct rope_params *r = &c->rope;
    r->n_rot = c->n_rot;
    r->neox = c->arch->position == POS_ROPE_NEOX;
    OX_TRY(get_float(g, a, "rope.freq_base", 10000.0f, &r->freq_base));
    float factor;
    OX_TRY(get_float(g, a, "rope.scaling.factor", 1.0f, &factor));
    OX_TRY(get_float(g, a, "rope.scaling.attn_factor", 1.0f, &r->attn_factor));
    char key[256];
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    const char *type = "none";
    uint64_t len = 4;
    if (gguf_find(g, key))
        OX_TRY(gguf_get_str(g, key, &type, &len));
    bool linear = len == 6 && !memcmp(type, "linear", 6),
         yarn = len == 4 && !memcmp(type, "yarn", 4);
    bool none = len == 4 && !memcmp(type, "none", 4);
    if (!linear && !yarn && !none)
        return ox_fail(OX_ERR_UNSUPPORTED, "model: rope scaling '%.*s' is not supported", (int)len,
                       type);
    if (!(factor > 0.0f) || !(r->freq_base > 0.0f))
        return ox_fail(OX_ERR_FORMAT, "model: bad rope frequency base or scaling factor");
    r->freq_scale = none ? 1.0f : 1.0f / factor;
    if (yarn)
        OX_TRY(read_yarn(g, a, c, factor));
    c->rope_swa = *r;
    return get_float(g, a, "rope.freq_base_swa", r->freq_base, &c->rope_swa.freq_base);
}

/* rope.scaling.finetuned false: attention without RoPE, in granite's family (llama.cpp reads
 * it as a switch there only). */
static enum ox_status read_rope_switch(const struct ox_gguf *g, const char *a,
                                       struct model_config *c) {
    bool rope;
    if (!c->arch->rope_switch)
        return OX_OK;
    OX_TRY(get_bool(g, a, "rope.scaling.finetuned", true, &rope));
    for (int il = 0; il < c->n_layer; il++)
        c->no_rope[il] |= !rope;
    return OX_OK;
}

/* Sliding-window attention: the window, and which layers use it (llama.cpp's pattern rule). */
static enum ox_status read_swa(const struct ox_gguf *g, const char *a, struct model_config *c) {
    const struct arch_desc *d = c->arch;
    if (!d->swa || (d->swa_if_layers > 0 && c->n_layer != d->swa_if_layers))
        return OX_OK;
    int32_t period;
    OX_TRY(get_int(g, a, "attention.sliding_window", 0, 1 << 24, d->swa_default_window,
                   &c->swa_window));
    char key[256];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", a);
    const struct gguf_value *v = gguf_find(g, key);
    if (v && v->type == OX_GGUF_ARRAY) { /* a flag per layer (gemma4) */
        int32_t flags[MODEL_MAX_LAYERS];
        OX_TRY(
            get_layer_ints(g, a, "attention.sliding_window_pattern", 0, 1, 0, c->n_layer, flags));
        for (int il = 0; il < c->n_layer; il++)
            c->is_swa[il] = c->swa_window > 0 && flags[il];
        return OX_OK;
    }
    OX_TRY(get_int(g, a, "attention.sliding_window_pattern", 0, MODEL_MAX_LAYERS, d->swa_period,
                   &period));
    for (int il = 0; il < c->n_layer; il++) /* the full layer last in each period, or first */
        c->is_swa[il] =
            c->swa_window > 0 &&
            (period == 0 || (d->swa_dense_first ? il % period != 0 : il % period < period - 1));
    return OX_OK;
}

/* The layer gemma's shared-KV rule lets layer il attend over (llama.cpp's for gemma3n and
 * gemma4): the last n_shared layers keep no cache, and each reads that of the last layer of
 * its kind before them: a full-attention layer the one just before, a sliding-window one the
 * one before that. */
static enum ox_status shared_kv_layer(const struct model_config *c, int32_t n_shared, int il,
                                      int32_t *kv_layer) {
    int32_t first = c->n_layer - n_shared;
    *kv_layer = il;
    if (il < first)
        return OX_OK;
    int32_t src = first - (c->is_swa[il] ? 2 : 1);
    const struct layer_shape *a = &c->layer[il], *b = src >= 0 ? &c->layer[src] : NULL;
    if (!b || c->is_swa[src] != c->is_swa[il] || c->is_recurrent[src] ||
        a->n_head_kv != b->n_head_kv || a->head_dim_k != b->head_dim_k ||
        a->head_dim_v != b->head_dim_v)
        return ox_fail(OX_ERR_FORMAT,
                       "model: layer %d shares the cache of layer %d, which is not of its kind "
                       "and shape",
                       il, src);
    *kv_layer = src;
    return OX_OK;
}

/* Each layer's head sizes and cache: sliding-window layers may have their own head size
 * (attention.key_length_swa) and rotary dims (rope.dimension_count_swa); with
 * attention.shared_kv_layers the last layers read an earlier layer's cache. The model-wide
 * head sizes become the largest. */
static enum ox_status read_layer_shapes(const struct ox_gguf *g, const char *a,
                                        struct model_config *c) {
    int32_t hk_swa, hv_swa, rot_swa, shared;
    OX_TRY(get_int(g, a, "attention.key_length_swa", 1, 1 << 14, c->head_dim_k, &hk_swa));
    OX_TRY(get_int(g, a, "attention.value_length_swa", 1, 1 << 14, c->head_dim_v, &hv_swa));
    OX_TRY(get_int(g, a, "rope.dimension_count_swa", 0, hk_swa, c->n_rot, &rot_swa));
    OX_TRY(get_int(g, a, "attention.shared_kv_layers", 0, c->n_layer - 1, 0, &shared));
    if (rot_swa % 2 != 0 || rot_swa > hk_swa)
        return ox_fail(OX_ERR_FORMAT,
                       "model: rope dimension count %d of sliding-window layers "
                       "is odd or above their head size %d",
                       rot_swa, hk_swa);
    c->rope_swa.n_rot = rot_swa;
    for (int il = 0; il < c->n_layer; il++) {
        struct layer_shape *l = &c->layer[il];
        l->head_dim_k = c->is_swa[il] ? hk_swa : c->head_dim_k;
        l->head_dim_v = c->is_swa[il] ? hv_swa : c->head_dim_v;
    }
    for (int il = 0; il < c->n_layer; il++)
        if (c->is_recurrent[il])
            c->layer[il].kv_layer = -1;
        else
            OX_TRY(shared_kv_layer(c, shared, il, &c->layer[il].kv_layer));
    c->head_dim_k = hk_swa > c->head_dim_k ? hk_swa : c->head_dim_k;
    c->head_dim_v = hv_swa > c->head_dim_v ? hv_swa : c->head_dim_v;
    return OX_OK;
}

/* Interleaved M-RoPE (qwen35) turns each rotated pair to one of four positions by its section;
 * a text token has its position in the first three and 0 in the fourth, so the rotation is
 * NeoX's exactly when no pair falls to the fourth (ggml_mrope_cache_init's rule). */
static enum ox_status check_rope_sections(const struct ox_gguf *g, const char *a,
                                          const struct model_config *c) {
    char key[256];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", a);
    const struct gguf_value *v = gguf_find(g, key);
    if (!v)
        return OX_OK;
    if (v->type != OX_GGUF_ARRAY || v->n != 4 ||
        (v->elem_type != OX_GGUF_INT32 && v->elem_type != OX_GGUF_UINT32))
        return ox_fail(OX_ERR_FORMAT, "model: '%s' is not an array of 4 integers", key);
    int64_t sec[4], total = 0;
    for (int i = 0; i < 4; i++) {
        struct gguf_value e;
        OX_TRY(gguf_array_elem(v, (uint64_t)i, &e));
        sec[i] = e.type == OX_GGUF_INT32 ? gguf_value_i64(&e) : (int64_t)gguf_value_u64(&e);
        if (sec[i] < 0 || sec[i] > c->n_rot)
            return ox_fail(OX_ERR_FORMAT, "model: '%s' has a section of %lld", key,
                           (long long)sec[i]);
        total += sec[i];
    }
    for (int64_t i = 0; total > 0 && i < c->n_rot / 2; i++) {
        int64_t s = i % total, k = s % 3;
        if (s >= 3 * sec[k])
            return ox_fail(OX_ERR_UNSUPPORTED,
                           "model: rope sections %lld, %lld, %lld, %lld rotate a pair by the "
                           "fourth position, which text does not use",
                           (long long)sec[0], (long long)sec[1], (long long)sec[2],
                           (long long)sec[3]);
    }
    return OX_OK;
}

/* Gated delta-net layers (qwen35): their shape, and which layers they are (all but each
 * full_attention_interval-th, as llama.cpp's loader decides without a per-layer list). */
static enum ox_status read_delta_net(const struct ox_gguf *g, const char *a,
                                     struct model_config *c) {
    if (!c->arch->delta_net)
        return OX_OK;
    int32_t inner, interval;
    OX_TRY(get_int(g, a, "ssm.conv_kernel", 1, 64, -1, &c->dn_conv));
    OX_TRY(get_int(g, a, "ssm.state_size", 1, 1024, -1, &c->dn_state)); /* a GPU block of rows */
    OX_TRY(get_int(g, a, "ssm.group_count", 1, 1 << 12, -1, &c->dn_k_heads));
    OX_TRY(get_int(g, a, "ssm.time_step_rank", 1, 1 << 12, -1, &c->dn_v_heads));
    OX_TRY(get_int(g, a, "ssm.inner_size", 1, 1 << 24, -1, &inner));
    OX_TRY(get_int(g, a, "full_attention_interval", 1, MODEL_MAX_LAYERS, 4, &interval));
    char key[256];
    snprintf(key, sizeof key, "%s.attention.recurrent_layers", a);
    if (gguf_find(g, key))
        return ox_fail(OX_ERR_UNSUPPORTED, "model: a per-layer '%s' list is not supported", key);
    if (inner != c->dn_v_heads * c->dn_state || c->dn_v_heads % c->dn_k_heads != 0)
        return ox_fail(OX_ERR_FORMAT,
                       "model: delta-net inner size %d is not %d value heads x state %d, or "
                       "%d key heads do not divide them",
                       inner, c->dn_v_heads, c->dn_state, c->dn_k_heads);
    for (int il = 0; il < c->n_layer; il++)
        if ((c->is_recurrent[il] = (il + 1) % interval != 0))
            c->n_recurrent++;
    return check_rope_sections(g, a, c);
}

/* Mamba-2 layers (granitehybrid): their shape (which layers they are came with head_count_kv). */
static enum ox_status read_mamba2(const struct ox_gguf *g, const char *a, struct model_config *c) {
    if (!c->arch->mamba2)
        return OX_OK;
    OX_TRY(get_int(g, a, "ssm.conv_kernel", 1, 64, -1, &c->dn_conv));
    OX_TRY(get_int(g, a, "ssm.state_size", 1, 1024, -1, &c->dn_state));
    OX_TRY(get_int(g, a, "ssm.inner_size", 1, 1 << 20, -1, &c->ssm_inner));
    OX_TRY(get_int(g, a, "ssm.time_step_rank", 1, 1 << 12, -1, &c->ssm_heads));
    OX_TRY(get_int(g, a, "ssm.group_count", 1, 1 << 12, -1, &c->ssm_groups));
    if (c->ssm_inner % c->ssm_heads != 0 || c->ssm_heads % c->ssm_groups != 0 ||
        c->ssm_inner % c->ssm_groups != 0)
        return ox_fail(OX_ERR_FORMAT,
                       "model: Mamba-2 inner size %d, %d heads and %d groups do not divide",
                       c->ssm_inner, c->ssm_heads, c->ssm_groups);
    return OX_OK;
}

/* Norm epsilon, attention scaling and the multipliers some architectures add. */
static enum ox_status read_scales(const struct ox_gguf *g, const char *a, struct model_config *c) {
    const char *eps_key = c->arch->norm == NORM_RMS ? "attention.layer_norm_rms_epsilon"
                                                    : "attention.layer_norm_epsilon";
    OX_TRY(get_float(g, a, eps_key, 1e-5f, &c->norm_eps));
    OX_TRY(get_float(g, a, "attention.scale", 0.0f, &c->attn_scale));
    if (c->attn_scale == 0.0f) /* the q/k norms take the place of a scale in unscaled archs */
        c->attn_scale = c->arch->attn_unscaled ? 1.0f : 1.0f / sqrtf((float)c->head_dim_k);
    if (c->arch->mla) { /* by the heads' size before absorption, with YaRN's mscale squared */
        float ln = logf(1.0f / c->rope.freq_scale);
        float mscale =
            c->rope.attn_factor * (1.0f + 0.1f * ln) * (1.0f + 0.1f * c->yarn_log_mul * ln);
        c->attn_scale = mscale * mscale / sqrtf((float)c->mla_head_k);
    }
    OX_TRY(get_float(g, a, "attn_logit_softcapping", 0.0f, &c->attn_softcap));
    OX_TRY(get_float(g, a, "final_logit_softcapping", 0.0f, &c->final_softcap));
    bool m = c->arch->minicpm_scales; /* older MiniCPM files have none of these keys */
    OX_TRY(get_float(g, a, "embedding_scale", m ? 12.0f : 0.0f, &c->embd_scale));
    OX_TRY(get_float(g, a, "residual_scale", m ? 1.4f / sqrtf((float)c->n_layer) : 0.0f,
                     &c->residual_scale));
    OX_TRY(get_float(g, a, "logit_scale", m ? 256.0f / (float)c->n_embd : 0.0f, &c->logit_scale));
    OX_TRY(get_float(g, a, "attention.temperature_scale", 0.0f, &c->attn_temp_scale));
    OX_TRY(get_int(g, a, "rope.scaling.original_context_length", 1, 1 << 24, c->n_ctx_train,
                   &c->attn_temp_floor));
    if (!isfinite(c->attn_scale) || c->attn_softcap < 0 || c->final_softcap < 0 ||
        !isfinite(c->embd_scale) || !isfinite(c->residual_scale) || !isfinite(c->logit_scale) ||
        !isfinite(c->attn_temp_scale))
        return ox_fail(OX_ERR_FORMAT, "model: a scale or soft-cap value is not a finite number");
    return OX_OK;
}

enum ox_status model_config_load(const struct ox_gguf *g, struct model_config *c) {
    memset(c, 0, sizeof *c);
    const char *name;
    uint64_t len;
    OX_TRY(gguf_get_str(g, "general.architecture", &name, &len));
    c->arch = arch_find(name, (size_t)len);
    if (!c->arch)
        return ox_fail(OX_ERR_UNSUPPORTED,
                       "model: architecture '%.*s' is not supported; the nearest supported is "
                       "'%s' (supported: %s)",
                       (int)(len > 64 ? 64 : len), name, arch_nearest(name, (size_t)len),
                       arch_supported_names());
    const char *a = c->arch->name;
    OX_TRY(read_shape(g, a, c));
    OX_TRY(read_rope(g, a, c));
    OX_TRY(read_swa(g, a, c));
    for (int il = 0; il < c->n_layer; il++) /* layers without rotation */
        c->no_rope[il] = (c->arch->nope_period > 0 && (il + 1) % c->arch->nope_period == 0) ||
                         (c->arch->nope_unless_swa && c->swa_window > 0 && !c->is_swa[il]);
    OX_TRY(read_rope_switch(g, a, c));
    OX_TRY(read_delta_net(g, a, c));
    OX_TRY(read_moe_routing(g, a, c));
    OX_TRY(read_mla(g, a, c));
    OX_TRY(read_mamba2(g, a, c));
    OX_TRY(read_scales(g, a, c)); /* the attention scale by the full layers' head size */
    OX_TRY(read_layer_shapes(g, a, c));
    /* encoders see their whole sequence unless the file says otherwise, as in llama.cpp */
    OX_TRY(get_bool(g, a, "attention.causal", !c->arch->bidirectional, &c->causal));
    OX_TRY(get_int(g, a, "pooling_type", 0, OX_POOLING_RANK, 0, &c->pooling));
    return get_int(g, a, "embedding_length_per_layer_input", 0, 1 << 16, 0, &c->n_embd_per_layer);
}
