/* quant_mix.c: llama.cpp's per-tensor type rules for each file type, so that a given input and
 * file type produce the same tensor types as llama-quantize (see docs/quantization.md). */
#define _POSIX_C_SOURCE 200809L
#include "quant/quant_mix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "quant/dtype.h"
#include "quant/ftype.h"

#define T(x) OX_DTYPE_##x
#define F(x) OX_FTYPE_MOSTLY_##x

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

static bool has(const char *s, const char *part) {
    return strstr(s, part) != NULL;
}

enum quant_category quant_category_of(const char *name) {
    static const struct {
        const char *part;
        enum quant_category cat;
    } parts[] = {
        {"attn_qkv.weight", CAT_ATTN_QKV},
        {"attn_kv_b.weight", CAT_ATTN_KV_B},
        {"attn_v.weight", CAT_ATTN_V},
        {"attn_k.weight", CAT_ATTN_K},
        {"attn_q.weight", CAT_ATTN_Q},
        {"attn_output.weight", CAT_ATTN_OUTPUT},
        {"ffn_up", CAT_FFN_UP},
        {"ffn_gate", CAT_FFN_GATE},
        {"ffn_down", CAT_FFN_DOWN},
    };
    if (strcmp(name, "output.weight") == 0)
        return CAT_OUTPUT;
    if (strcmp(name, "token_embd.weight") == 0 || strcmp(name, "per_layer_token_embd.weight") == 0)
        return CAT_TOKEN_EMBD;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) /* order matters: first wins */
        if (has(name, parts[i].part))
            return parts[i].cat;
    return CAT_OTHER;
}

/* attn_v and the fused tensors that contain it are the most sensitive to quantization. */
static bool is_attn_v_like(enum quant_category c) {
    return c == CAT_ATTN_V || c == CAT_ATTN_QKV || c == CAT_ATTN_KV_B;
}

bool quant_mix_allows(const struct quant_mix *m, const char *name, int n_dims) {
    /* small or special tensors that llama.cpp keeps as they are */
    static const char *const keep[] = {
        "_norm.weight",
        "ffn_gate_inp.weight",
        "ffn_gate_tid2eid.weight",
        "altup",
        "laurel",
        "per_layer_model_proj",
        "ssm_conv1d",
        "shortconv.conv.weight",
        "indexer.k_proj.weight",
        "indexer.q_proj.weight",
        "time_mix_first.weight",
        "time_mix_w0.weight",
        "time_mix_w1.weight",
        "time_mix_w2.weight",
        "time_mix_v0.weight",
        "time_mix_v1.weight",
        "time_mix_v2.weight",
        "time_mix_a0.weight",
        "time_mix_a1.weight",
        "time_mix_a2.weight",
        "time_mix_g1.weight",
        "time_mix_g2.weight",
        "time_mix_decay_w1.weight",
        "time_mix_decay_w2.weight",
        "time_mix_lerp_fused.weight",
        "attn_rel_b.weight",
        ".position_embd",
        "sam.pos_embd",
        "sam.neck.",
        "sam.net_",
        ".rel_pos",
        ".patch_embd",
        ".patch_merger",
        "a.rvq.codebook",
        "mm.a.code_embd",
    };
    if (m->only_copy || n_dims < 2 || !ends_with(name, "weight"))
        return false;
    if (!m->quantize_output && strcmp(name, "output.weight") == 0)
        return false;
    if (strcmp(name, "position_embd.weight") == 0 || strcmp(name, "token_types.weight") == 0)
        return false;
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        if (has(name, keep[i]))
            return false;
    return true;
}

/* Layers at both ends and every third one in between get more bits in the _M mixes. */
static bool use_more_bits(int i, int n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* The layer of a per-layer tensor: the visit counter for dense models; for MoE models the
 * number in "blk.N.", since expert tensors are not stored one layer after another. */
static enum ox_status layer_of(const struct quant_mix *m, int counter, const char *name,
                               int *layer) {
    *layer = counter;
    if (m->model.n_expert <= 1)
        return OX_OK;
    if (sscanf(name, "blk.%d.", layer) != 1)
        return ox_fail(OX_ERR_FORMAT, "quantize: cannot read the layer of tensor '%s'", name);
    if (*layer < 0 || *layer >= m->model.n_layer)
        return ox_fail(OX_ERR_FORMAT, "quantize: tensor '%s' is in layer %d of %d", name, *layer,
                       m->model.n_layer);
    return OX_OK;
}

static bool ftype_in(enum ox_ftype f, const enum ox_ftype *set, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (set[i] == f)
            return true;
    return false;
}
#define FTYPE_IN(f, ...)                                                                           \
    ftype_in(f, (const enum ox_ftype[]){__VA_ARGS__},                                              \
             sizeof((const enum ox_ftype[]){__VA_ARGS__}) / sizeof(enum ox_ftype))

/* The 1-2 bit i-quant mixes share one set of rules. */
static bool is_low_iq(enum ox_ftype f) {
    return FTYPE_IN(f, F(IQ2_XXS), F(IQ2_XS), F(IQ1_S), F(IQ2_S), F(IQ2_M), F(IQ1_M));
}

static enum ox_dtype rule_output(const struct quant_mix *m, int64_t ne0, enum ox_dtype t) {
    if (m->output_type >= 0)
        return (enum ox_dtype)m->output_type;
    if (m->ftype == F(MXFP4_MOE) || m->model.is_falcon || ne0 % dtype_get(t)->block_size != 0)
        return T(Q8_0);
    if (FTYPE_IN(m->ftype, F(IQ2_XXS), F(IQ2_XS), F(IQ3_XXS), F(IQ1_S), F(IQ2_S), F(IQ2_M),
                 F(IQ1_M)))
        return T(Q5_K);
    return t != T(Q8_0) ? T(Q6_K) : t;
}

static enum ox_dtype rule_token_embd(const struct quant_mix *m, enum ox_dtype t) {
    if (m->token_embd_type >= 0)
        return (enum ox_dtype)m->token_embd_type;
    if (FTYPE_IN(m->ftype, F(IQ2_XXS), F(IQ2_XS), F(IQ1_S), F(IQ1_M)))
        return T(Q2_K);
    if (FTYPE_IN(m->ftype, F(IQ2_S), F(IQ2_M), F(IQ3_XXS)))
        return T(IQ3_S);
    if (FTYPE_IN(m->ftype, F(TQ1_0), F(TQ2_0), F(Q2_0)))
        return T(Q4_K);
    return t;
}

/* The IQ1/IQ2 mixes: a few sensitive tensors get 2-4 bit k-quants. */
static enum ox_dtype rule_low_iq(struct quant_mix *m, enum quant_category c, enum ox_dtype t) {
    bool iq2_sm = FTYPE_IN(m->ftype, F(IQ2_S), F(IQ2_M));
    if (is_attn_v_like(c)) {
        m->i_attn_v++;
        if (m->model.n_gqa >= 4 || m->model.n_expert >= 4)
            return T(Q4_K);
        return iq2_sm ? T(IQ3_S) : T(Q2_K);
    }
    if (m->model.n_expert == 8 && c == CAT_ATTN_K)
        return T(Q4_K);
    if (c == CAT_FFN_DOWN) {
        bool first = m->i_ffn_down < m->model.n_layer / 8;
        m->i_ffn_down++;
        return first ? (iq2_sm ? T(IQ3_S) : T(Q2_K)) : t;
    }
    if (c == CAT_ATTN_OUTPUT) {
        if (m->model.n_expert == 8)
            return T(Q5_K);
        if (FTYPE_IN(m->ftype, F(IQ1_S), F(IQ1_M)))
            return T(IQ2_XXS);
        if (iq2_sm)
            return T(IQ3_S);
    }
    return t;
}

static enum ox_dtype rule_attn_v(struct quant_mix *m, enum ox_dtype t) {
    enum ox_ftype f = m->ftype;
    int gqa = m->model.n_gqa;
    if (f == F(Q2_K))
        t = gqa >= 4 ? T(Q4_K) : T(Q3_K);
    else if (f == F(Q2_K_S) && gqa >= 4)
        t = T(Q4_K);
    else if (f == F(IQ3_XXS))
        t = gqa >= 4 ? T(Q4_K) : !m->has_imatrix ? T(IQ3_S) : T(IQ3_XXS);
    else if (FTYPE_IN(f, F(IQ3_XS), F(IQ3_S)) && gqa >= 4)
        t = T(Q4_K);
    else if (f == F(IQ3_M))
        t = T(Q4_K);
    else if (f == F(Q3_K_M))
        t = m->i_attn_v < 2 ? T(Q5_K) : T(Q4_K);
    else if (f == F(Q3_K_L))
        t = T(Q5_K);
    else if (FTYPE_IN(f, F(IQ4_NL), F(IQ4_XS)) && gqa >= 4)
        t = T(Q5_K);
    else if (FTYPE_IN(f, F(Q4_K_M), F(Q5_K_M)) && use_more_bits(m->i_attn_v, m->n_attn_v))
        t = T(Q6_K);
    else if (f == F(Q4_K_S) && m->i_attn_v < 4)
        t = T(Q5_K);
    /* in a 70B model 8 heads share one attn_v, which is 8x smaller than attn_q: more bits
     * there cost almost nothing */
    if (m->model.is_70b && (t == T(Q3_K) || t == T(Q4_K)))
        t = T(Q5_K);
    if (m->model.n_expert == 8)
        t = T(Q8_0);
    m->i_attn_v++;
    return t;
}

static enum ox_status rule_ffn_down(struct quant_mix *m, const char *name, enum ox_dtype *t) {
    enum ox_ftype f = m->ftype;
    int i, n = m->model.n_layer;
    OX_TRY(layer_of(m, m->i_ffn_down, name, &i));
    bool falcon = m->model.is_falcon;
    if (f == F(Q2_K))
        *t = T(Q3_K);
    else if (f == F(Q2_K_S)) {
        if (i < n / 8)
            *t = T(Q4_K);
    } else if (f == F(IQ3_XXS) && !m->has_imatrix)
        *t = i < n / 8 ? T(Q4_K) : T(Q3_K);
    else if (f == F(Q3_K_M))
        *t = i < n / 16 ? T(Q5_K) : !falcon || use_more_bits(i, n) ? T(Q4_K) : T(Q3_K);
    else if (f == F(IQ3_M) && (i < n / 8 || (m->model.n_expert == 8 && use_more_bits(i, n))))
        *t = T(Q4_K);
    else if (f == F(Q3_K_L))
        *t = falcon ? T(Q4_K) : T(Q5_K);
    else if (f == F(Q4_K_M)) {
        if (falcon)
            *t = i < n / 16 ? T(Q6_K) : use_more_bits(i, n) ? T(Q5_K) : T(Q4_K);
        else if (use_more_bits(i, n))
            *t = T(Q6_K);
    } else if (i < n / 8 && FTYPE_IN(f, F(IQ4_NL), F(IQ4_XS)) && !m->has_imatrix)
        *t = T(Q5_K);
    else if (f == F(Q5_K_M) && use_more_bits(i, n))
        *t = T(Q6_K);
    else if (f == F(Q4_K_S) && !falcon && i < n / 8)
        *t = T(Q5_K);
    else if (FTYPE_IN(f, F(Q4_0), F(Q5_0)) && m->has_imatrix && i < n / 8)
        /* even with an imatrix the first ffn_down layers of q4_0/q5_0 can go wild */
        *t = f == F(Q4_0) ? T(Q4_1) : T(Q5_1);
    m->i_ffn_down++;
    return OX_OK;
}

static enum ox_dtype rule_attn_output(const struct quant_mix *m, enum ox_dtype t) {
    enum ox_ftype f = m->ftype;
    if (m->model.is_falcon)
        return f == F(Q3_K_L) ? T(Q4_K) : t;
    if (m->model.n_expert == 8) {
        if (FTYPE_IN(f, F(Q2_K), F(IQ3_XS), F(IQ3_XXS), F(Q3_K_S), F(Q3_K_M), F(IQ4_NL), F(Q4_K_S),
                     F(Q4_K_M), F(IQ3_S), F(IQ3_M), F(IQ4_XS)))
            return T(Q5_K);
        return t;
    }
    if (f == F(Q2_K))
        return T(Q3_K);
    if (f == F(IQ3_XXS))
        return T(IQ3_S);
    if (f == F(Q3_K_M) || f == F(IQ3_M))
        return T(Q4_K);
    if (f == F(Q3_K_L))
        return T(Q5_K);
    return t;
}

/* ffn_gate / ffn_up: only IQ3_XS drops the middle layers to IQ3_XXS. */
static enum ox_status rule_ffn_gate_up(struct quant_mix *m, int *counter, const char *name,
                                       enum ox_dtype *t) {
    int i, n = m->model.n_layer;
    OX_TRY(layer_of(m, *counter, name, &i));
    if (m->ftype == F(IQ3_XS) && i >= n / 8 && i < 7 * n / 8)
        *t = T(IQ3_XXS);
    (*counter)++;
    return OX_OK;
}

/* The mix's choice for a quantizable tensor (llama_tensor_get_type_impl). */
static enum ox_status mix_rules(struct quant_mix *m, const char *name, const int64_t ne[4],
                                enum quant_category c, enum ox_dtype *t) {
    enum ox_ftype f = m->ftype;
    if (c == CAT_OUTPUT || (m->tied_embeddings && c == CAT_TOKEN_EMBD))
        *t = rule_output(m, ne[0], *t); /* a tied token_embd is also the output matrix */
    else if (f == F(MXFP4_MOE))
        *t = ne[2] > 1 ? T(MXFP4) : T(Q8_0); /* experts in MXFP4, everything else 8-bit */
    else if (c == CAT_TOKEN_EMBD)
        *t = rule_token_embd(m, *t);
    else if (is_low_iq(f))
        *t = rule_low_iq(m, c, *t);
    else if (is_attn_v_like(c))
        *t = rule_attn_v(m, *t);
    else if (c == CAT_ATTN_K || c == CAT_ATTN_Q) {
        if (c == CAT_ATTN_K && m->model.n_expert == 8)
            *t = T(Q8_0);
        else if (f == F(IQ3_XS))
            *t = T(IQ3_XXS);
        else if (f == F(IQ3_XXS))
            *t = T(IQ2_S);
    } else if (c == CAT_FFN_DOWN)
        return rule_ffn_down(m, name, t);
    else if (c == CAT_ATTN_OUTPUT)
        *t = rule_attn_output(m, *t);
    else if (c == CAT_FFN_GATE)
        return rule_ffn_gate_up(m, &m->i_ffn_gate, name, t);
    else if (c == CAT_FFN_UP)
        return rule_ffn_gate_up(m, &m->i_ffn_up, name, t);
    return OX_OK;
}

/* A row length the chosen type cannot hold falls back to a type with smaller blocks (F16 when
 * even 32 does not divide it); types without a fallback are an error, as in llama.cpp. */
static enum ox_status fallback(struct quant_mix *m, const char *name, int64_t ne0,
                               enum ox_dtype *t) {
    if (ne0 % dtype_get(*t)->block_size == 0)
        return OX_OK;
    m->n_fallback++;
    enum ox_dtype r;
    switch (*t) {
    case T(IQ1_S):
    case T(IQ1_M):
    case T(IQ2_XXS):
    case T(IQ2_XS):
    case T(IQ2_S):
    case T(IQ3_XXS):
    case T(IQ3_S):
    case T(IQ4_XS): r = T(IQ4_NL); break;
    case T(Q2_0):
    case T(Q2_K):
    case T(Q3_K):
    case T(TQ1_0):
    case T(TQ2_0): r = T(Q4_0); break;
    case T(Q4_K): r = T(Q5_0); break;
    case T(Q5_K): r = T(Q5_1); break;
    case T(Q6_K): r = T(Q8_0); break;
    default:
        return ox_fail(OX_ERR_UNSUPPORTED,
                       "quantize: tensor '%s' has rows of %lld, not a "
                       "multiple of %s's block size, and %s has no fallback type",
                       name, (long long)ne0, ox_dtype_name(*t), ox_dtype_name(*t));
    }
    *t = ne0 % dtype_get(r)->block_size == 0 ? r : T(F16);
    return OX_OK;
}

/* --tensor-type overrides: the first pattern that matches anywhere in the name wins. */
static bool override_for(const struct quant_mix *m, const char *name, enum ox_dtype *t) {
    for (size_t i = 0; i < m->n_overrides; i++) {
        if (regexec(&m->patterns[i], name, 0, NULL, 0) == 0) {
            *t = m->overrides[i].type;
            return true;
        }
    }
    return false;
}

enum ox_status quant_mix_choose(struct quant_mix *m, const char *name, int n_dims,
                                const int64_t ne[4], enum ox_dtype current, enum ox_dtype *out) {
    enum quant_category c = quant_category_of(name);
    *out = current;
    if (!quant_mix_allows(m, name, n_dims))
        return OX_OK;
    if (m->token_embd_type >= 0 && c == CAT_TOKEN_EMBD) {
        *out = (enum ox_dtype)m->token_embd_type;
        return OX_OK;
    }
    if (m->output_type >= 0 && c == CAT_OUTPUT) {
        *out = (enum ox_dtype)m->output_type;
        return OX_OK;
    }
    *out = m->base;
    if (!dtype_get(m->base)->is_quantized)
        return OX_OK; /* F32/F16/BF16 files: every quantizable tensor in that type */
    if (!override_for(m, name, out) && !m->pure)
        OX_TRY(mix_rules(m, name, ne, c, out));
    return fallback(m, name, ne[0], out);
}

bool quant_mix_requires_imatrix(const char *name, enum ox_dtype type, enum ox_ftype ftype) {
    enum quant_category c = quant_category_of(name);
    if (c == CAT_OUTPUT || c == CAT_TOKEN_EMBD)
        return false;
    switch (type) {
    case T(IQ3_XXS):
    case T(IQ2_XXS):
    case T(IQ2_XS):
    case T(IQ2_S):
    case T(IQ1_M):
    case T(IQ1_S): return true;
    case T(Q2_K): return ftype == F(Q2_K_S); /* k-quants cope, except in the Q2_K_S mix */
    default: return false;
    }
}

static enum ox_status compile_overrides(struct quant_mix *m) {
    if (!m->n_overrides)
        return OX_OK;
    m->patterns = calloc(m->n_overrides, sizeof *m->patterns);
    if (!m->patterns)
        return ox_fail(OX_ERR_OOM, "quantize: out of memory");
    for (size_t i = 0; i < m->n_overrides; i++) {
        const struct ox_tensor_type_override *o = &m->overrides[i];
        if (!o->pattern || !ox_dtype_valid((int)o->type) || !ox_dtype_can_quantize(o->type)) {
            m->n_overrides = i;
            return ox_fail(OX_ERR_INVALID_ARG,
                           "quantize: override %zu needs a pattern and a "
                           "quantizable type",
                           i);
        }
        int rc = regcomp(&m->patterns[i], o->pattern, REG_EXTENDED | REG_NOSUB);
        if (rc != 0) {
            char why[128];
            regerror(rc, &m->patterns[i], why, sizeof why);
            m->n_overrides = i; /* only the compiled ones are freed */
            return ox_fail(OX_ERR_INVALID_ARG, "quantize: bad tensor pattern '%s': %s", o->pattern,
                           why);
        }
    }
    return OX_OK;
}

static bool valid_dtype_choice(int t) {
    return t < 0 || (dtype_get(t) && ox_dtype_can_quantize((enum ox_dtype)t));
}

enum ox_status quant_mix_init(struct quant_mix *m, const struct quant_mix_model *model,
                              const struct ox_quantize_params *p, bool has_imatrix,
                              const char *const *names, size_t n) {
    memset(m, 0, sizeof *m);
    m->model = *model;
    m->ftype = p->ftype;
    if (!ftype_base_dtype((int)p->ftype, &m->base))
        return ox_fail(OX_ERR_INVALID_ARG, "quantize: invalid file type %d", (int)p->ftype);
    if (!valid_dtype_choice(p->output_tensor_type) || !valid_dtype_choice(p->token_embedding_type))
        return ox_fail(OX_ERR_INVALID_ARG, "quantize: output/token embedding type is not a "
                                           "quantizable type");
    m->pure = p->pure;
    m->only_copy = p->only_copy;
    m->quantize_output = !p->leave_output_tensor;
    m->has_imatrix = has_imatrix;
    m->output_type = p->output_tensor_type;
    m->token_embd_type = p->token_embedding_type;
    m->overrides = p->overrides;
    m->n_overrides = p->overrides ? p->n_overrides : 0;
    m->tied_embeddings = true;
    for (size_t i = 0; i < n; i++) {
        enum quant_category c = quant_category_of(names[i]);
        m->n_attn_v += is_attn_v_like(c);
        if (c == CAT_OUTPUT)
            m->tied_embeddings = false;
    }
    return compile_overrides(m);
}

void quant_mix_free(struct quant_mix *m) {
    for (size_t i = 0; m->patterns && i < m->n_overrides; i++)
        regfree(&m->patterns[i]);
    free(m->patterns);
    m->patterns = NULL;
}
