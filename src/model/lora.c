/* lora.c: LoRA adapters, GGUF files as llama.cpp writes them (general.type = adapter,
 * adapter.type = lora, adapter.lora.alpha, tensors <name>.lora_a / <name>.lora_b), checked
 * against their base model, A and B kept as floats (lora_bind.c binds them to contexts). */
#include "model/lora.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "quant/dtype.h"

/* Weights an adapter may not target: rows looked up rather than multiplied (embeddings but
 * the token embedding, whose rows bind_pair takes its own way), the router (its scores pick
 * experts on the host), the encoders' heads (run on the host), and 3-D weights (experts,
 * heads); nor may it a vector (bind_pair). */
static bool lora_target_ok(const struct ox_model *m, const struct weight *w) {
    const struct weight *no[] = {m->pos_embd, m->ple_tok_embd, m->type_embd, m->cls,
                                 m->cls_out,  m->dense_2,      m->dense_3};
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        if (w == no[i])
            return false;
    for (int32_t il = 0; il < m->cfg.n_layer; il++)
        if (w == m->layers[il].ffn_gate_inp || w == m->layers[il].ffn_gate_inp_shexp)
            return false;
    return w->ne[2] == 1 && w->ne[3] == 1;
}

/* A tensor of the adapter as floats (malloc'd), any type the dequantizer knows. */
static enum ox_status tensor_floats(const struct gguf_tensor *t, float **out) {
    int64_t n = t->ne[0] * t->ne[1];
    if (t->n_dims != 2 || !ox_dtype_valid(t->type) || n % ox_dtype_block_size(t->type))
        return ox_fail(OX_ERR_FORMAT, "lora: tensor '%s' is not a matrix of a known type", t->name);
    *out = malloc((size_t)n * sizeof **out);
    if (!*out)
        return ox_fail(OX_ERR_OOM, "lora: no memory for '%s'", t->name);
    enum ox_status st = ox_dequantize(t->type, t->data, *out, n);
    if (st != OX_OK) {
        free(*out), *out = NULL;
        return ox_fail(st, "lora: tensor '%s' (%s) cannot be read", t->name,
                       ox_dtype_name(t->type));
    }
    return OX_OK;
}

static bool str_is(const struct ox_gguf *g, const char *key, const char *want, const char **got,
                   uint64_t *len) {
    *got = "", *len = 0;
    if (gguf_get_str(g, key, got, len) != OX_OK)
        return false;
    return *len == strlen(want) && !memcmp(*got, want, *len);
}

/* The metadata: an adapter, of kind lora, for the model's architecture; alpha (0 if absent). */
static enum ox_status check_header(const struct ox_model *m, const struct ox_gguf *g,
                                   float *alpha) {
    const char *s;
    uint64_t len;
    if (!str_is(g, "general.type", "adapter", &s, &len))
        return ox_fail(OX_ERR_INVALID_ARG, "lora: not an adapter (general.type is '%.*s')",
                       (int)len, s);
    if (!str_is(g, "adapter.type", "lora", &s, &len))
        return ox_fail(OX_ERR_UNSUPPORTED, "lora: adapter.type is '%.*s', not 'lora'", (int)len, s);
    if (!str_is(g, "general.architecture", m->cfg.arch->name, &s, &len))
        return ox_fail(OX_ERR_INVALID_ARG,
                       "lora: the adapter is for architecture '%.*s', the model is '%s'", (int)len,
                       s, m->cfg.arch->name);
    *alpha = 0.0f;
    if (gguf_find(g, "adapter.lora.alpha") && gguf_get_f32(g, "adapter.lora.alpha", alpha) != OX_OK)
        return ox_fail(OX_ERR_FORMAT, "lora: adapter.lora.alpha is not a float");
    return OX_OK;
}

/* The base tensor name of an adapter tensor and which half it is: 'a', 'b', or 0 for the norm
 * vectors llama.cpp also skips; -1: anything else. */
static int split_name(const char *name, char *base, size_t cap) {
    size_t n = strlen(name);
    if (n > 7 && n - 7 < cap &&
        (!strcmp(name + n - 7, ".lora_a") || !strcmp(name + n - 7, ".lora_b"))) {
        memcpy(base, name, n - 7), base[n - 7] = '\0';
        return name[n - 1];
    }
    return n > 12 && !strcmp(name + n - 12, "_norm.weight") ? 0 : -1;
}

/* Pair p from the adapter's tensors for base name `base`: both halves, a base weight it may
 * target, and shapes that fit (A [rank][n_in], B [n_out][rank] as ggml's ne; the token
 * embedding's A [n_vocab][rank] and B [n_embd][rank]). */
static enum ox_status bind_pair(struct ox_model *m, const struct ox_gguf *g, const char *base,
                                struct lora_pair *p) {
    char name[GGUF_MAX_NAME + 8];
    snprintf(name, sizeof name, "%s.lora_a", base);
    const struct gguf_tensor *a = gguf_find_tensor(g, name);
    snprintf(name, sizeof name, "%s.lora_b", base);
    const struct gguf_tensor *b = gguf_find_tensor(g, name);
    if (!a || !b)
        return ox_fail(OX_ERR_FORMAT, "lora: '%s' has lora_%s without lora_%s", base, a ? "a" : "b",
                       a ? "b" : "a");
    const struct gguf_tensor *t = gguf_find_tensor(m->gguf, base);
    struct weight *w = t ? &m->weights[t - m->gguf->tensors] : NULL;
    if (!w)
        return ox_fail(OX_ERR_INVALID_ARG,
                       "lora: '%s' is not in the base model (another model's adapter?)", base);
    if (!lora_target_ok(m, w) || t->n_dims != 2)
        return ox_fail(OX_ERR_UNSUPPORTED, "lora: adapters on '%s' are not supported", base);
    p->rows = w == m->tok_embd; /* A and B as llama.cpp's embedding adapters have them */
    if (p->rows ? b->ne[1] != w->ne[0] || a->ne[1] != w->ne[1] || a->ne[0] != b->ne[0]
                : a->ne[0] != w->ne[0] || b->ne[1] != w->ne[1] || a->ne[1] != b->ne[0])
        return ox_fail(OX_ERR_INVALID_ARG,
                       "lora: '%s' is %lld x %lld in the model, the adapter's A %lld x %lld and "
                       "B %lld x %lld do not fit it (another model's adapter?)",
                       base, (long long)w->ne[0], (long long)w->ne[1], (long long)a->ne[0],
                       (long long)a->ne[1], (long long)b->ne[0], (long long)b->ne[1]);
    p->target = w, p->rank = p->rows ? a->ne[0] : a->ne[1];
    if (p->rank < 1)
        return ox_fail(OX_ERR_FORMAT, "lora: '%s' has rank 0", base);
    enum ox_status st = tensor_floats(a, &p->a);
    return st == OX_OK ? tensor_floats(b, &p->b) : st;
}

static enum ox_status load_pairs(struct ox_lora *l, const struct ox_gguf *g) {
    l->pairs = calloc((size_t)(g->n_tensors ? g->n_tensors : 1), sizeof *l->pairs);
    if (!l->pairs)
        return ox_fail(OX_ERR_OOM, "lora: no memory");
    for (int64_t i = 0; i < g->n_tensors; i++) {
        char base[GGUF_MAX_NAME];
        int half = split_name(g->tensors[i].name, base, sizeof base);
        if (half < 0)
            return ox_fail(OX_ERR_FORMAT, "lora: tensor '%s' is neither a lora_a nor a lora_b",
                           g->tensors[i].name);
        if (half != 'a') /* each pair once, from its A */
            continue;
        enum ox_status st = bind_pair(l->model, g, base, &l->pairs[l->n_pairs]);
        l->n_pairs++;
        if (st != OX_OK)
            return st;
    }
    for (int64_t i = 0; i < g->n_tensors; i++) { /* a B whose A is missing */
        char base[GGUF_MAX_NAME], name[GGUF_MAX_NAME + 8];
        if (split_name(g->tensors[i].name, base, sizeof base) == 'b') {
            snprintf(name, sizeof name, "%s.lora_a", base);
            if (!gguf_find_tensor(g, name))
                return ox_fail(OX_ERR_FORMAT, "lora: '%s' has lora_b without lora_a", base);
        }
    }
    return l->n_pairs ? OX_OK : ox_fail(OX_ERR_FORMAT, "lora: the adapter has no tensors");
}

static void lora_destroy(struct ox_lora *l) {
    for (int i = 0; i < l->n_pairs; i++)
        free(l->pairs[i].a), free(l->pairs[i].b);
    free(l->pairs);
    free(l);
}

enum ox_status lora_from_gguf(struct ox_model *model, const struct ox_gguf *g,
                              struct ox_lora **out) {
    struct ox_lora *l = calloc(1, sizeof *l);
    if (!l)
        return ox_fail(OX_ERR_OOM, "lora: no memory");
    l->model = model, l->id = lora_next_id();
    enum ox_status st = check_header(model, g, &l->alpha);
    if (st == OX_OK)
        st = load_pairs(l, g);
    if (st != OX_OK) {
        lora_destroy(l);
        return st;
    }
    for (int i = 0; i < l->n_pairs; i++) /* a slot for each weight some adapter targets */
        if (!l->pairs[i].target->lora_slot)
            l->pairs[i].target->lora_slot = ++model->n_lora_slots;
    l->next = model->loras, model->loras = l;
    *out = l;
    return OX_OK;
}

enum ox_status ox_lora_load(struct ox_model *model, const char *path, struct ox_lora **out) {
    if (!out || !model || !path)
        return ox_fail(OX_ERR_INVALID_ARG, "lora: model, path and out are required");
    *out = NULL;
    struct ox_gguf *g = NULL;
    enum ox_status st = gguf_open(path, true, &g);
    if (st == OX_OK)
        st = lora_from_gguf(model, g, out);
    gguf_free(g); /* the pairs hold floats of their own */
    if (st != OX_OK) {
        char why[512]; /* the message again, naming the file */
        snprintf(why, sizeof why, "%s", ox_last_error());
        return ox_fail(st, "%s: %s", path, why);
    }
    return OX_OK;
}

void ox_lora_free(struct ox_lora *lora) {
    if (!lora)
        return;
    for (struct ox_lora **at = &lora->model->loras; *at; at = &(*at)->next)
        if (*at == lora) {
            *at = lora->next;
            break;
        }
    lora_destroy(lora);
}

uint64_t lora_next_id(void) {
    static uint64_t last; /* adapters load on any thread */
    return __atomic_add_fetch(&last, 1, __ATOMIC_RELAXED);
}

float lora_pair_scale(const struct ox_lora *l, const struct lora_pair *p, float scale) {
    return l->alpha != 0.0f ? scale * l->alpha / (float)p->rank : scale;
}

float ox_lora_alpha(const struct ox_lora *lora) {
    return lora ? lora->alpha : 0.0f;
}

int32_t ox_lora_n_tensors(const struct ox_lora *lora) {
    return lora ? lora->n_pairs : 0;
}

void model_free_loras(struct ox_model *m) {
    while (m->loras) {
        struct ox_lora *l = m->loras;
        m->loras = l->next;
        lora_destroy(l);
    }
}
