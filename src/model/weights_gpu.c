/* weights_gpu.c: a model's weights copied to GPU memory once, at load, when the CUDA backend
 * runs it: all of them, or those of its last layers and the output (the file's copy stays). */
#include "model/model.h"

#ifdef OX_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include <inttypes.h>
#include <stdio.h>

#include "core/log.h"

/* The layer a tensor belongs to (its name is "blk.N...."), or -1 for the model's own. */
static int32_t tensor_layer(const struct weight *w) {
    int32_t il = -1;
    return sscanf(w->name, "blk.%" SCNd32 ".", &il) == 1 ? il : -1;
}

/* Whether the GPU runs a tensor when layers from gpu_begin on are there: those layers', and the
 * output's; the embeddings (and the per-layer ones made with them) only when everything is (a
 * tied output takes token_embd too). */
static bool runs_on_gpu(const struct ox_model *m, const struct weight *w, int32_t gpu_begin) {
    if (gpu_begin == 0 || w == m->output)
        return true;
    int32_t il = tensor_layer(w);
    return il >= 0 ? il >= gpu_begin
                   : w != m->tok_embd && w != m->pos_embd && w != m->ple_tok_embd &&
                         w != m->ple_model_proj && w != m->ple_proj_norm;
}

/* Matrices the kernels must multiply or look rows up in; norms and biases are f32. */
static enum ox_status check_types(const struct ox_model *m, int32_t gpu_begin) {
    for (int64_t i = 0; i < m->gguf->n_tensors; i++) {
        const struct weight *w = &m->weights[i];
        if (runs_on_gpu(m, w, gpu_begin) && !backend_cuda_supports(w->type))
            return ox_fail(OX_ERR_UNSUPPORTED,
                           "model: tensor '%s' is %s, which the CUDA backend does not run yet "
                           "(n_gpu_layers = 0 runs the model on the CPU)",
                           w->name, ox_dtype_name(w->type));
    }
    return OX_OK;
}

/* Whether a GEMM over the tensor (of n_dims dimensions) needs it dequantized to f16 first
 * (cuda_matmul.cu's gemm): matrices of a quantized type, or whose rows are not 16-byte aligned. */
static bool needs_dequant(const struct weight *w, int n_dims) {
    bool plain = w->type == OX_DTYPE_F32 || w->type == OX_DTYPE_F16 || w->type == OX_DTYPE_BF16;
    return n_dims >= 2 && (!plain || w->row_bytes % 16 != 0);
}

/* Whether the GPU copies of these matrices (count of them, NULLs skipped) may take a norm's
 * weight: f16 (whose products with a weight near 1 lose one rounding; bf16's would lose more)
 * in rows the decode GEMV streams (cuda_half_takes). */
static bool foldable(const struct weight *const *mats, int count) {
    bool any = false;
    for (int i = 0; i < count; i++) {
        const struct weight *w = mats[i];
        if (!w)
            continue;
        if (w->type != OX_DTYPE_F16 || w->ne[0] % 8 != 0 || w->row_bytes % 16 != 0 || !w->dev)
            return false;
        any = true;
    }
    return any;
}

/* Multiplies norm's weight into the count matrices (NULLs skipped) when every product fits in
 * f16; *folded says whether it did (else nothing changed, and the norm runs as it is). */
static enum ox_status fold_into(const struct weight *norm, const struct weight *const *mats,
                                int count, bool *folded) {
    *folded = false;
    for (int i = 0; i < count; i++) {
        const struct weight *w = mats[i];
        bool fits = true;
        if (w)
            OX_TRY(backend_cuda_fold_fits(w->dev, w->ne[1], w->ne[0], w->row_bytes,
                                          (const float *)norm->dev, &fits));
        if (!fits)
            return OX_OK;
    }
    for (int i = 0; i < count; i++)
        if (mats[i])
            OX_TRY(backend_cuda_fold_columns((void *)mats[i]->dev, mats[i]->ne[1], mats[i]->ne[0],
                                             mats[i]->row_bytes, (const float *)norm->dev));
    *folded = true;
    return OX_OK;
}

/* A decode step's RMSNorms before the attention and the FFN are a kernel apiece, which the
 * single-token f16 GEMV can take in only if it reads nothing beside x (cuda_gemv_half.cu):
 * so where their weights can go into the f16 matrices that read their output, they do (H200
 * tg128: 8B F16 234 -> 245 t/s, 1B F16 1065 -> 1150). Each weight takes one more rounding to
 * f16: llama-f16's prompt KL to llama.cpp went from 1.45e-6 to 2.1e-6 (the bound is 1e-5). */
static enum ox_status fold_norms(struct ox_model *m) {
    const struct arch_desc *d = m->cfg.arch;
    if (d->norm != NORM_RMS || d->parallel || d->no_pre_norm)
        return OX_OK;
    for (int32_t il = m->gpu_layer_begin; il < m->cfg.n_layer; il++) {
        struct layer_weights *l = &m->layers[il];
        const struct weight *attn[] = {l->wqkv, l->wq, l->wk, l->wv};
        const struct weight *ffn[] = {l->ffn_gate, l->ffn_up};
        if (l->attn_norm && l->attn_norm->dev && !l->attn_norm_b && foldable(attn, 4))
            OX_TRY(fold_into(l->attn_norm, attn, 4, &l->attn_norm_folded));
        if (l->ffn_norm && l->ffn_norm->dev && !l->ffn_norm_b && !l->ffn_gate_inp &&
            foldable(ffn, 2))
            OX_TRY(fold_into(l->ffn_norm, ffn, 2, &l->ffn_norm_folded));
    }
    return OX_OK;
}

enum ox_status model_upload_weights(struct ox_model *m, int32_t n_gpu_layers) {
    if (n_gpu_layers == 0 || (n_gpu_layers < 0 && !backend_cuda_available()))
        return OX_OK;
    if (!backend_cuda_available())
        return ox_fail(OX_ERR_DEVICE, "model: n_gpu_layers = %d but no CUDA GPU is usable",
                       n_gpu_layers);
    int32_t n_layer = m->cfg.n_layer;
    int32_t gpu_begin = n_gpu_layers < 0 || n_gpu_layers >= n_layer ? 0 : n_layer - n_gpu_layers;
    int32_t asked = gpu_begin;
    for (int32_t il = n_layer - 1; il >= gpu_begin; il--) /* a layer's cache is where it runs */
        if (m->cfg.layer[il].kv_layer >= 0 && m->cfg.layer[il].kv_layer < gpu_begin)
            gpu_begin = m->cfg.layer[il].kv_layer, il = n_layer; /* and again from the top */
    if (gpu_begin < asked)
        ox_log(OX_LOG_INFO,
               "model: %d layers on the GPU, not %d: the last ones read the caches of "
               "layers from %d on",
               n_layer - gpu_begin, n_layer - asked, gpu_begin);
    enum ox_status st = check_types(m, gpu_begin);
    for (int64_t i = 0; st == OX_OK && i < m->gguf->n_tensors; i++) {
        struct weight *w = &m->weights[i];
        if (!runs_on_gpu(m, w, gpu_begin))
            continue;
        void *dev;
        st = backend_cuda_upload_weights(w->data, (size_t)m->gguf->tensors[i].n_bytes, &dev);
        w->dev = dev;
        m->gpu_bytes += st == OX_OK ? m->gguf->tensors[i].n_bytes : 0;
        m->gpu_dequant |= needs_dequant(w, m->gguf->tensors[i].n_dims);
    }
    if (st == OX_OK) {
        m->gpu_layer_begin = gpu_begin;
        st = fold_norms(m);
    }
    if (st != OX_OK) { /* asked for explicitly: an error; by default: the CPU, with a note */
        model_free_gpu_weights(m);
        if (n_gpu_layers > 0)
            return st;
        ox_log(OX_LOG_WARN, "%s; running on the CPU", ox_last_error());
        return OX_OK;
    }
    m->on_gpu = true;
    return OX_OK;
}

/* The device copy of the rope frequency factors, or NULL when the model has none. */
const float *model_gpu_freq_factors(const struct ox_model *m) {
    for (int64_t i = 0; m->cfg.rope.freq_factors && i < m->gguf->n_tensors; i++)
        if (m->cfg.rope.freq_factors == (const float *)m->weights[i].data)
            return m->weights[i].dev;
    return NULL;
}

void model_free_gpu_weights(struct ox_model *m) {
    for (int64_t i = 0; m->weights && m->gguf && i < m->gguf->n_tensors; i++)
        if (m->weights[i].dev) {
            backend_cuda_free_weights((void *)m->weights[i].dev);
            m->weights[i].dev = NULL;
        }
    for (int32_t il = 0; m->layers && il < m->cfg.n_layer; il++)
        m->layers[il].attn_norm_folded = m->layers[il].ffn_norm_folded = false;
    m->gpu_bytes = 0;
    m->gpu_dequant = false;
}

#else

enum ox_status model_upload_weights(struct ox_model *m, int32_t n_gpu_layers) {
    (void)m;
    if (n_gpu_layers > 0)
        return ox_fail(OX_ERR_UNSUPPORTED,
                       "model: n_gpu_layers = %d, but this build has no CUDA backend "
                       "(build with make CUDA=1)",
                       n_gpu_layers);
    return OX_OK;
}

void model_free_gpu_weights(struct ox_model *m) {
    (void)m;
}

const float *model_gpu_freq_factors(const struct ox_model *m) {
    (void)m;
    return NULL;
}

#endif
