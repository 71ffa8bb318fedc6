/* weights_gpu.c: a model's weights copied to the device backend once, at load, when it runs
 * the model: all of them, or those of its last layers and the output (the file's copy stays). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "model/layer_ops.h"
#include "model/model.h"

/* The layer a tensor belongs to (its name is "blk.N...."), or -1 for the model's own. */
static int32_t tensor_layer(const struct weight *w) {
    int32_t il = -1;
    return sscanf(w->name, "blk.%" SCNd32 ".", &il) == 1 ? il : -1;
}

/* Whether the GPU runs a tensor when layers [begin, end) are there: those layers', and with
 * ends the output's, and the embeddings' (and the per-layer ones made with them) when the first
 * layer is there too (a tied output takes token_embd too); the model's small tensors (norms,
 * rope factors) always. */
static bool runs_on_gpu(const struct ox_model *m, const struct weight *w, int32_t begin,
                        int32_t end, bool ends) {
    int32_t il = tensor_layer(w);
    if (il >= 0)
        return il >= begin && il < end;
    if (w == m->output)
        return ends;
    bool embeddings = w == m->tok_embd || w == m->pos_embd || w == m->ple_tok_embd ||
                      w == m->ple_model_proj || w == m->ple_proj_norm;
    return !embeddings || (ends && begin == 0);
}

/* Matrices the kernels must multiply or look rows up in; norms and biases are f32. */
static enum ox_status check_types(const struct ox_model *m, const struct backend_ops *gpu,
                                  int32_t begin, int32_t end, bool ends) {
    for (int64_t i = 0; i < m->gguf->n_tensors; i++) {
        const struct weight *w = &m->weights[i];
        if (runs_on_gpu(m, w, begin, end, ends) && (!gpu->supports(BACKEND_OP_MATMUL, w->type) ||
                                                    !gpu->supports(BACKEND_OP_GET_ROWS, w->type)))
            return ox_fail(OX_ERR_UNSUPPORTED,
                           "model: tensor '%s' is %s, which the %s backend does not run yet "
                           "(n_gpu_layers = 0 runs the model on the CPU)",
                           w->name, ox_dtype_name(w->type), gpu->name);
    }
    return OX_OK;
}

/* The device copies of the count matrices (NULLs skipped) that read a norm's output, given to
 * the backend to take the norm's weight (fold_norm); *folded when it did. */
static enum ox_status fold_into(struct ox_model *m, const struct weight *norm,
                                const struct weight *const *mats, int count, bool *folded) {
    struct backend b = {.ops = m->gpu};
    struct mat copies[4];
    int n = 0;
    for (int i = 0; i < count && n < 4; i++)
        if (mats[i] && mats[i]->copy_of == m->gpu)
            copies[n++] = as_mat(&b, mats[i]);
        else if (mats[i])
            return OX_OK; /* one stays on the host: nothing to fold into */
    return m->gpu->fold_norm(&m->gpu_weights, vec(&b, norm), copies, n, folded);
}

/* Where the backend's kernels read a RMSNorm's weight better from the matrices after it, the
 * weights of the norms before the attention and the FFN go into them: a pre-norm block whose
 * normed rows nothing else reads (a parallel block's FFN does; a bias or a MoE router would). */
static enum ox_status fold_norms(struct ox_model *m) {
    const struct arch_desc *d = m->cfg.arch;
    if (d->norm != NORM_RMS || d->parallel || d->no_pre_norm || !m->gpu->fold_norm)
        return OX_OK; /* (fold_norm is optional: a backend without it reads the norms' weights) */
    for (int32_t il = m->gpu_layer_begin; il < m->cfg.n_layer; il++) {
        struct layer_weights *l = &m->layers[il];
        const struct weight *attn[] = {l->wqkv, l->wq, l->wk, l->wv};
        const struct weight *ffn[] = {l->ffn_gate, l->ffn_up};
        if (l->attn_norm && l->attn_norm->copy && !l->attn_norm_b)
            OX_TRY(fold_into(m, l->attn_norm, attn, 4, &l->attn_norm_folded));
        if (l->ffn_norm && l->ffn_norm->copy && !l->ffn_norm_b && !l->ffn_gate_inp)
            OX_TRY(fold_into(m, l->ffn_norm, ffn, 2, &l->ffn_norm_folded));
    }
    return OX_OK;
}

/* The weights the GPU runs with layers [begin, end) there (runs_on_gpu), copied to it, and the
 * norms folded into them. */
static enum ox_status upload_range(struct ox_model *m, const struct backend_ops *gpu, int32_t begin,
                                   int32_t end, bool ends) {
    m->gpu = gpu;
    enum ox_status st = check_types(m, gpu, begin, end, ends);
    for (int64_t i = 0; st == OX_OK && i < m->gguf->n_tensors; i++) {
        struct weight *w = &m->weights[i];
        if (!runs_on_gpu(m, w, begin, end, ends))
            continue;
        struct backend_tensor t = model_file_tensor(m, &m->weights[i]);
        st = gpu->prepare_weight(&m->gpu_weights, &t, &w->copy);
        w->copy_of = w->copy ? gpu : NULL;
    }
    if (st == OX_OK) {
        m->gpu_layer_begin = begin;
        st = fold_norms(m);
    }
    return st;
}

enum ox_status model_upload_layers(struct ox_model *m, int32_t begin, int32_t end, bool ends) {
    const struct backend_ops *gpu = backend_device();
    if (!gpu || !gpu->available())
        return ox_fail(OX_ERR_DEVICE, "model: no GPU for layers %d to %d", begin, end - 1);
    enum ox_status st = upload_range(m, gpu, begin, end, ends);
    if (st != OX_OK) {
        model_free_gpu_weights(m);
        m->gpu = NULL, m->gpu_layer_begin = 0;
        return st;
    }
    m->on_gpu = true;
    return OX_OK;
}

/* The first op this model's layers call that the device backend lacks, or NULL: the ops every
 * model calls, then its recurrent layers'. */
static const char *model_missing_op(const struct ox_model *m, const struct backend_ops *gpu) {
    const char *missing = backend_missing_op(gpu);
    if (!missing && m->cfg.arch->mamba2 && !gpu->mamba2)
        missing = "mamba2";
    if (!missing && m->cfg.arch->delta_net && !gpu->delta_net)
        missing = "delta_net";
    return missing;
}

enum ox_status model_upload_weights(struct ox_model *m, int32_t n_gpu_layers) {
    const struct backend_ops *gpu = backend_device();
    char spec[16]; /* a device named (not "none") must be there, n_gpu_layers -1 or not */
    bool named = backend_device_spec(spec, sizeof spec)[0] && strcmp(spec, "none") != 0;
    if (n_gpu_layers == 0 || !strcmp(spec, "none") ||
        (n_gpu_layers < 0 && !named && (!gpu || !gpu->available())))
        return OX_OK;
    if (!gpu)
        return ox_fail(OX_ERR_UNSUPPORTED,
                       "model: n_gpu_layers = %d, but this build has no GPU backend "
                       "(build with make CUDA=1 or VULKAN=1)",
                       n_gpu_layers);
    if (!gpu->available()) { /* its reason, where the backend kept one */
        char why[400];
        snprintf(why, sizeof why, "%s", ox_last_error());
        return ox_fail(OX_ERR_DEVICE, "model: n_gpu_layers = %d but no %s GPU is usable%s%s",
                       n_gpu_layers, gpu->name, named ? ": " : "", named ? why : "");
    }
    const char *missing = model_missing_op(m, gpu);
    if (missing)
        return ox_fail(OX_ERR_UNSUPPORTED,
                       "model: the %s backend cannot run a model's layers yet "
                       "(it has no %s op); -ngl 0 keeps the CPU",
                       gpu->name, missing);
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
    enum ox_status st = upload_range(m, gpu, gpu_begin, n_layer, true);
    if (st != OX_OK) { /* asked for explicitly: an error; by default: the CPU, with a note */
        model_free_gpu_weights(m);
        m->gpu = NULL, m->gpu_layer_begin = 0;
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
            return m->weights[i].copy_of == m->gpu ? m->weights[i].copy : NULL;
    return NULL;
}

void model_free_gpu_weights(struct ox_model *m) {
    for (int64_t i = 0; m->weights && m->gguf && i < m->gguf->n_tensors; i++)
        if (m->weights[i].copy && m->weights[i].copy_of == m->gpu) {
            m->gpu->release_weight(m->weights[i].copy);
            m->weights[i].copy = NULL, m->weights[i].copy_of = NULL;
        }
    for (int32_t il = 0; m->layers && il < m->cfg.n_layer; il++)
        m->layers[il].attn_norm_folded = m->layers[il].ffn_norm_folded = false;
    m->gpu_weights = (struct backend_weights){0};
}
