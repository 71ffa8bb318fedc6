/* weights_gpu.c: a model's weights copied to GPU memory once, at load, when the CUDA backend
 * runs it (every tensor the forward pass reads; the file's copy stays for inspection). */
#include "model/model.h"

#ifdef OX_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "core/log.h"

/* Matrices the kernels must multiply or look rows up in; norms and biases are f32. */
static enum ox_status check_types(const struct ox_model *m) {
    for (int64_t i = 0; i < m->gguf->n_tensors; i++) {
        const struct weight *w = &m->weights[i];
        if (!backend_cuda_supports(w->type))
            return ox_fail(OX_ERR_UNSUPPORTED,
                           "model: tensor '%s' is %s, which the CUDA backend does not run yet "
                           "(n_gpu_layers = 0 runs the model on the CPU)",
                           w->name, ox_dtype_name(w->type));
    }
    return OX_OK;
}

enum ox_status model_upload_weights(struct ox_model *m, int32_t n_gpu_layers) {
    if (n_gpu_layers == 0 || (n_gpu_layers < 0 && !backend_cuda_available()))
        return OX_OK;
    if (!backend_cuda_available())
        return ox_fail(OX_ERR_DEVICE, "model: n_gpu_layers = %d but no CUDA GPU is usable",
                       n_gpu_layers);
    if (n_gpu_layers > 0 && n_gpu_layers < m->cfg.n_layer)
        return ox_fail(OX_ERR_UNSUPPORTED,
                       "model: offloading %d of %d layers is not supported yet: all or none",
                       n_gpu_layers, m->cfg.n_layer);
    enum ox_status st = check_types(m);
    for (int64_t i = 0; st == OX_OK && i < m->gguf->n_tensors; i++) {
        struct weight *w = &m->weights[i];
        void *dev;
        st = backend_cuda_upload_weights(w->data, (size_t)m->gguf->tensors[i].n_bytes, &dev);
        w->dev = dev;
        m->gpu_bytes += st == OX_OK ? m->gguf->tensors[i].n_bytes : 0;
    }
    if (st != OX_OK) { /* asked for explicitly: an error; by default: the CPU, with a note */
        model_free_gpu_weights(m);
        if (n_gpu_layers > 0)
            return st;
        ox_log(OX_LOG_WARN, "%s; running on the CPU", ox_last_error());
        return OX_OK;
    }
    const struct weight *freqs = NULL; /* rope reads its frequency factors on the device too */
    for (int64_t i = 0; i < m->gguf->n_tensors; i++)
        if (m->cfg.rope.freq_factors == (const float *)m->weights[i].data)
            freqs = &m->weights[i];
    if (freqs)
        m->cfg.rope.freq_factors = m->cfg.rope_swa.freq_factors = freqs->dev;
    m->on_gpu = true;
    return OX_OK;
}

void model_free_gpu_weights(struct ox_model *m) {
    for (int64_t i = 0; m->weights && m->gguf && i < m->gguf->n_tensors; i++)
        if (m->weights[i].dev) {
            backend_cuda_free_weights((void *)m->weights[i].dev);
            m->weights[i].dev = NULL;
        }
    m->gpu_bytes = 0;
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

#endif
