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
 * output's; the embeddings only when everything is (a tied output takes token_embd too). */
static bool runs_on_gpu(const struct ox_model *m, const struct weight *w, int32_t gpu_begin) {
    if (gpu_begin == 0 || w == m->output)
        return true;
    int32_t il = tensor_layer(w);
    return il >= 0 ? il >= gpu_begin : w != m->tok_embd && w != m->pos_embd;
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

enum ox_status model_upload_weights(struct ox_model *m, int32_t n_gpu_layers) {
    if (n_gpu_layers == 0 || (n_gpu_layers < 0 && !backend_cuda_available()))
        return OX_OK;
    if (!backend_cuda_available())
        return ox_fail(OX_ERR_DEVICE, "model: n_gpu_layers = %d but no CUDA GPU is usable",
                       n_gpu_layers);
    int32_t n_layer = m->cfg.n_layer;
    int32_t gpu_begin = n_gpu_layers < 0 || n_gpu_layers >= n_layer ? 0 : n_layer - n_gpu_layers;
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
    if (st != OX_OK) { /* asked for explicitly: an error; by default: the CPU, with a note */
        model_free_gpu_weights(m);
        if (n_gpu_layers > 0)
            return st;
        ox_log(OX_LOG_WARN, "%s; running on the CPU", ox_last_error());
        return OX_OK;
    }
    m->on_gpu = true;
    m->gpu_layer_begin = gpu_begin;
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
