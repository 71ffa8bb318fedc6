/* pipeline.c: a model split over ranks by layers (llama.cpp's --split-mode layer): each rank
 * holds and runs its consecutive layers with their KV cache, rank 0 also the embeddings and the
 * output. A batch's hidden state goes from rank 0 through every rank in order (the group's send
 * and recv: NCCL's on GPUs) and from the last rank back to rank 0, which makes the logits. A
 * rank's model views the whole model's bytes; nothing is sliced. */
#include <stdlib.h>
#include <string.h>

#include "model/pipeline.h"

/* Why layers [begin, end) cannot be a rank's (a static string), or NULL. */
static const char *unpipeable(const struct ox_model *m, int32_t begin, int32_t end) {
    const struct model_config *c = &m->cfg;
    if (m->on_gpu)
        return "the model to split must be loaded for the CPU (n_gpu_layers = 0); its ranks' "
               "layers go to the GPUs";
    if (c->n_embd_per_layer || m->n_lora_slots)
        return "its architecture has layers that do not split by layers yet (per-layer "
               "embeddings or LoRA targets)";
    if (begin < 0 || end > c->n_layer || begin >= end)
        return "a rank has no layers (more ranks than layers?)";
    for (int32_t il = begin; il < end; il++)
        if (c->layer[il].kv_layer >= 0 && c->layer[il].kv_layer < begin)
            return "a layer reads the cache of a layer another rank runs";
    return NULL;
}

enum ox_status model_layer_shard(const struct ox_model *m, int rank, int world, int32_t begin,
                                 int32_t gpu_begin, int32_t end, bool gpu, struct ox_model **out) {
    *out = NULL;
    if (world < 1 || rank < 0 || rank >= world)
        return ox_fail(OX_ERR_INVALID_ARG, "model: rank %d of %d ranks", rank, world);
    const char *why = unpipeable(m, begin, end);
    if (why)
        return ox_fail(OX_ERR_UNSUPPORTED, "model: cannot split by layers over %d ranks: %s", world,
                       why);
    struct ox_model *sh = malloc(sizeof *sh);
    if (!sh)
        return ox_fail(OX_ERR_OOM, "model: out of memory for a rank's layers");
    *sh = *m; /* the file, vocabulary, configuration and template, borrowed */
    sh->whole = m, sh->split = NULL, sh->loras = NULL; /* its adapters' shares: split_lora.c */
    sh->weights = NULL, sh->layers = NULL, sh->type_row0 = NULL, sh->n_params = 0;
    sh->layer_begin = begin, sh->layer_end = end, sh->pipe_rank = rank, sh->pipe_world = world;
    enum ox_status st = model_bind_weights(sh); /* its own table, bound as the whole's was */
    for (int64_t i = 0; st == OX_OK && i < m->gguf->n_tensors; i++) /* the CPU's layouts */
        sh->weights[i].copy = gpu ? NULL : m->weights[i].copy,
        sh->weights[i].copy_of = gpu ? NULL : m->weights[i].copy_of;
    if (st == OX_OK && gpu) /* its layers (rank 0: and the ends) to this thread's GPU */
        st = model_upload_layers(sh, gpu_begin, end, rank == 0);
    if (st == OX_OK && gpu && gpu_begin > begin) /* the first ones stay on the host */
        model_pack_layers(sh, begin, gpu_begin);
    if (st != OX_OK) {
        ox_model_free(sh);
        return st;
    }
    *out = sh;
    return OX_OK;
}

bool pipeline_takes(const struct ox_context *ctx) {
    return ctx->pipe && ctx->rank > 0;
}

/* A hand-over's failure, kept as the batch's. */
static void note(struct ox_context *ctx, enum ox_status st) {
    if (st != OX_OK && ctx->batch_err == OX_OK)
        ctx->batch_err = st;
}

void pipeline_take(struct ox_context *ctx, struct stage *s, int n) {
    size_t floats = (size_t)n * (size_t)ctx->model->cfg.n_embd;
    note(ctx, s->be.ops->recv(&s->be, ctx->pipe, ctx->rank, ctx->rank - 1, s->act.x, floats));
}

int pipeline_pass(struct ox_context *ctx, struct stage *s, const struct batch_view *batch, int n) {
    struct backend *b = &s->be;
    const int world = ctx->model->pipe_world, last = world - 1;
    const size_t e = (size_t)ctx->model->cfg.n_embd;
    note(ctx, b->ops->send(b, ctx->pipe, ctx->rank, ctx->rank < last ? ctx->rank + 1 : 0, s->act.x,
                           (size_t)n * e));
    if (ctx->rank != 0)
        return 0;
    int out = 0; /* the last rank kept the output rows alone (transformer.c) */
    for (int t = 0; t < batch->n; t++)
        out += batch->out_row[t] >= 0;
    if (out > 0)
        note(ctx, b->ops->recv(b, ctx->pipe, 0, last, s->act.x, (size_t)out * e));
    return out;
}
