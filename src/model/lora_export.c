/* lora_export.c: adapters merged into a copy of their base model, as llama.cpp's export-lora
 * does: each weight an adapter targets becomes W + sum of scale * alpha / rank * B A over the
 * adapters, in float, written as F16 (F32 where the base's is F32); every other tensor and the
 * metadata are copied as they are, general.file_type then saying F16. Streamed tensor by tensor,
 * so a model larger than memory merges. */
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "model/lora.h"
#include "quant/dtype.h"

#define FTYPE_MOSTLY_F16 1 /* llama.cpp's LLAMA_FTYPE_MOSTLY_F16 */

/* W (n_out rows of n_in floats) += scale * B A for pair p; for the token embedding, row v
 * (n_embd floats) += scale * B times A's row v. */
static void add_delta(float *w, const struct lora_pair *p, float scale) {
    int64_t n_in = p->target->ne[0], n_out = p->target->ne[1], r = p->rank;
    if (p->rows) {
        for (int64_t v = 0; v < n_out; v++)
            for (int64_t e = 0; e < n_in; e++) {
                float sum = 0.0f;
                for (int64_t k = 0; k < r; k++)
                    sum += p->b[e * r + k] * p->a[v * r + k];
                w[v * n_in + e] += scale * sum;
            }
        return;
    }
    for (int64_t o = 0; o < n_out; o++) {
        float *row = w + o * n_in;
        for (int64_t k = 0; k < r; k++) {
            const float bk = scale * p->b[o * r + k], *a = p->a + k * n_in;
            for (int64_t i = 0; i < n_in; i++)
                row[i] += bk * a[i];
        }
    }
}

/* The pair of adapter l that targets w, or NULL. */
static const struct lora_pair *pair_for(const struct ox_lora *l, const struct weight *w) {
    for (int i = 0; i < l->n_pairs; i++)
        if (l->pairs[i].target == w)
            return &l->pairs[i];
    return NULL;
}

/* Tensor i as the merged file holds it: the base's bytes, or (*owned) merged ones. */
static enum ox_status tensor_out(const struct ox_model *m, struct ox_lora *const *loras,
                                 const float *scales, int32_t n, int64_t i, enum ox_dtype *type,
                                 const void **data, uint64_t *bytes, void **owned) {
    const struct gguf_tensor *t = &m->gguf->tensors[i];
    const struct weight *w = &m->weights[i];
    *type = t->type, *data = t->data, *bytes = t->n_bytes, *owned = NULL;
    bool merged = false;
    for (int32_t a = 0; a < n; a++)
        merged = merged || pair_for(loras[a], w);
    if (!merged)
        return OX_OK;
    int64_t count = t->ne[0] * t->ne[1];
    float *f = malloc((size_t)count * sizeof *f);
    if (!f)
        return ox_fail(OX_ERR_OOM, "export-lora: no memory for '%s'", t->name);
    enum ox_status st = ox_dequantize(t->type, t->data, f, count);
    for (int32_t a = 0; st == OX_OK && a < n; a++) {
        const struct lora_pair *p = pair_for(loras[a], w);
        if (p)
            add_delta(f, p, lora_pair_scale(loras[a], p, scales[a]));
    }
    *type = t->type == OX_DTYPE_F32 ? OX_DTYPE_F32 : OX_DTYPE_F16;
    *bytes = (uint64_t)count * (*type == OX_DTYPE_F32 ? 4 : 2);
    void *out = f;
    if (st == OX_OK && *type == OX_DTYPE_F16) {
        out = malloc((size_t)*bytes);
        st = out ? ox_quantize(OX_DTYPE_F16, f, out, t->ne[1], t->ne[0], NULL)
                 : ox_fail(OX_ERR_OOM, "export-lora: no memory for '%s'", t->name);
        free(f);
    }
    if (st != OX_OK) {
        if (out != f)
            free(out);
        return st;
    }
    *data = *owned = out;
    return OX_OK;
}

enum ox_status ox_lora_export(struct ox_model *model, struct ox_lora *const *loras,
                              const float *scales, int32_t n, const char *out_path) {
    if (!model || !out_path || n < 0 || (n && (!loras || !scales)))
        return ox_fail(OX_ERR_INVALID_ARG, "export-lora: model, adapters and a path needed");
    for (int32_t a = 0; a < n; a++)
        if (!loras[a] || loras[a]->model != model)
            return ox_fail(OX_ERR_INVALID_ARG, "export-lora: adapter %d is another model's", a);
    const struct ox_gguf *g = model->gguf;
    struct gguf_writer *w = NULL;
    struct gguf_stream *s = NULL;
    OX_TRY(gguf_writer_create(&w));
    enum ox_status st = OX_OK;
    for (int64_t i = 0; st == OX_OK && i < g->n_kv; i++)
        st = gguf_writer_set(w, g->kv[i].key, &g->kv[i].value);
    if (st == OX_OK && n)
        st = gguf_writer_set_u32(w, "general.file_type", FTYPE_MOSTLY_F16);
    for (int64_t i = 0; st == OX_OK && i < g->n_tensors; i++) { /* shapes and types first */
        const struct gguf_tensor *t = &g->tensors[i];
        enum ox_dtype type = t->type;
        for (int32_t a = 0; a < n; a++)
            if (pair_for(loras[a], &model->weights[i]))
                type = t->type == OX_DTYPE_F32 ? OX_DTYPE_F32 : OX_DTYPE_F16;
        st = gguf_writer_add_tensor(w, t->name, type, t->n_dims, t->ne, NULL);
    }
    if (st == OX_OK)
        st = gguf_writer_stream_open(w, out_path, &s);
    for (int64_t i = 0; st == OX_OK && i < g->n_tensors; i++) {
        enum ox_dtype type;
        const void *data;
        uint64_t bytes;
        void *owned;
        st = tensor_out(model, loras, scales, n, i, &type, &data, &bytes, &owned);
        if (st == OX_OK)
            st = gguf_stream_tensor(s, data, bytes);
        free(owned);
    }
    if (st == OX_OK)
        st = gguf_stream_close(s);
    else if (s)
        gguf_stream_abort(s);
    gguf_writer_free(w);
    return st;
}
