/* model.c: ox_model_load / ox_model_free and the model getters. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu_features.h"
#include "core/log.h"
#include "model/lora.h"
#include "model/model.h"
#include "model/shard.h"
#include "model/split.h"
#include "tokenizer/vocab.h"

struct ox_model_params ox_model_params_default(void) {
    return (struct ox_model_params){
        .use_mmap = true, .n_gpu_layers = -1, .split_mode = OX_SPLIT_AUTO};
}

/* "CPU", or the device backend's name in capitals, after "CPU+" when the CPU runs some layers;
 * a split model's backend followed by " x N", its ranks. */
static void describe_backend(struct ox_model *m) {
    char *d = m->backend_desc;
    size_t cap = sizeof m->backend_desc, at = 0;
    if (!m->on_gpu || m->gpu_layer_begin > 0)
        at = (size_t)snprintf(d, cap, "CPU%s", m->on_gpu ? "+" : "");
    const char *name = m->split ? m->split->ops->name : m->on_gpu ? m->gpu->name : "";
    if (m->split)
        at = 0;
    for (const char *c = name; *c && at + 1 < cap; c++)
        d[at++] = (char)toupper((unsigned char)*c);
    d[at] = '\0';
    if (m->split)
        snprintf(d + at, cap - at, " x %d", m->split->world);
}

/* The split plan asks for on ops, true with its status in *st; false where the model stays
 * whole (may_stay): one that does not split by layers (llama-cpp-python's default mode) loads
 * unsplit, with a warning, rather than not at all. */
static bool split_or_whole(struct ox_model *m, const struct backend_ops *ops,
                           const struct split_plan *plan, bool may_stay, bool asked,
                           enum ox_status *st) {
    *st = model_split(m, ops, plan);
    if (*st == OX_ERR_UNSUPPORTED && plan->mode == OX_SPLIT_LAYER && may_stay) {
        ox_log(asked ? OX_LOG_WARN : OX_LOG_INFO, "%s; the model runs unsplit", ox_last_error());
        return false;
    }
    return true;
}

/* OX_SPLIT_CPU_RANKS=N (0 where unset): a split mode asked of a model on the CPU splits it
 * over N ranks of host threads, so that the split (the ranks' calls, their sums and
 * hand-overs, the saved states) can be tried and tested without GPUs; slower than one
 * context's threads. */
static enum ox_status cpu_ranks(int *n) {
    const char *env = getenv("OX_SPLIT_CPU_RANKS");
    *n = 0;
    if (!env || !*env)
        return OX_OK;
    char *end;
    long v = strtol(env, &end, 10);
    if (*end || v < 2 || v > SPLIT_MAX)
        return ox_fail(OX_ERR_INVALID_ARG, "model: OX_SPLIT_CPU_RANKS='%s' is not 2 to %d", env,
                       SPLIT_MAX);
    *n = (int)v;
    return OX_OK;
}

/* This process's rank of a model split across processes (dist_*): by rows, or by layers where
 * it asks for them or the model does not split by rows. */
static enum ox_status join_processes(struct ox_model *m, const struct ox_model_params *p) {
    const struct backend_ops *gpu = backend_device();
    struct dist_params dp = {.addr = p->dist_addr,
                             .rank = p->dist_rank,
                             .world = p->dist_world,
                             .timeout_ms = p->dist_timeout_ms > 0 ? p->dist_timeout_ms : 60000};
    if (!gpu || !gpu->available() || !p->dist_addr)
        return ox_fail(OX_ERR_UNSUPPORTED,
                       "model: a split across processes takes a GPU in each (and rank 0's "
                       "address, dist_addr)%s",
                       gpu ? "" : ": this build has no GPU backend");
    if (p->n_gpu_layers > 0 && p->n_gpu_layers < m->cfg.n_layer)
        return ox_fail(OX_ERR_UNSUPPORTED,
                       "model: a split across processes runs every layer on the GPUs, but "
                       "n_gpu_layers %d of %d leaves some to the CPU",
                       p->n_gpu_layers, m->cfg.n_layer);
    int mode = p->split_mode == OX_SPLIT_AUTO || p->split_mode == OX_SPLIT_NONE
                   ? (split_rows_by_default(m, p->dist_world, NULL) ? OX_SPLIT_ROW : OX_SPLIT_LAYER)
                   : p->split_mode;
    return model_split_join(m, gpu, NULL, &dp, p->main_gpu, mode);
}

/* The weights where the parameters put them: on GPUs split by rows or layers (on CPU ranks
 * with OX_SPLIT_CPU_RANKS), on one GPU (all layers or the last ones), or on the CPU (its
 * layouts made for the layers it runs). */
static enum ox_status place_weights(struct ox_model *m, const struct ox_model_params *p) {
    enum ox_status st = OX_OK;
    if (p->dist_world > 1)
        return join_processes(m, p);
    const struct backend_ops *gpu = backend_device();
    struct ox_model_params q = *p; /* OX_SPLIT_AUTO made a mode */
    q.split_mode = split_auto_mode(m, p, gpu && gpu->available() ? gpu->devices() : 0);
    struct split_plan plan;
    OX_TRY(split_devices(&q, gpu, m->cfg.n_layer, &plan));
    /* on GPU 0, the current one, when it stays whole */
    bool asked = p->split_mode != OX_SPLIT_AUTO;
    if (plan.world > 1 && split_or_whole(m, gpu, &plan, p->main_gpu == 0, asked, &st))
        return st;
    OX_TRY(model_upload_weights(m, p->n_gpu_layers));
    if (!m->on_gpu || m->gpu_layer_begin > 0)
        model_pack_weights(m);
    plan = (struct split_plan){.mode = q.split_mode};
    OX_TRY(cpu_ranks(&plan.world));
    if (m->on_gpu || q.split_mode == OX_SPLIT_NONE || plan.world < 2 ||
        !split_or_whole(m, backend_host(), &plan, true, asked, &st))
        return OX_OK;
    return st;
}

static enum ox_status load(struct ox_model *m, const char *path, const struct ox_model_params *p) {
    OX_TRY(gguf_open_model(path, p->use_mmap, &m->gguf));
    OX_TRY(model_config_load(m->gguf, &m->cfg));
    if (p->progress && !p->progress(0.25f, p->progress_user))
        return ox_fail(OX_ERR_ABORTED, "model: loading cancelled");
    OX_TRY(vocab_from_gguf(m->gguf, &m->vocab)); /* the file is open already: not a second time */
    OX_TRY(model_bind_weights(m));
    OX_TRY(place_weights(m, p));
    describe_backend(m);
    const char *tmpl;
    uint64_t tmpl_len;
    if (gguf_find(m->gguf, "tokenizer.chat_template") &&
        gguf_get_str(m->gguf, "tokenizer.chat_template", &tmpl, &tmpl_len) == OX_OK &&
        (m->chat_template = malloc((size_t)tmpl_len + 1)) != NULL) {
        memcpy(m->chat_template, tmpl, (size_t)tmpl_len);
        m->chat_template[tmpl_len] = '\0';
    }
    if (ox_vocab_n_tokens(m->vocab) > m->cfg.n_vocab)
        return ox_fail(OX_ERR_FORMAT, "model: %d tokens but token_embd has %d rows",
                       ox_vocab_n_tokens(m->vocab), m->cfg.n_vocab);
    if (p->progress && !p->progress(1.0f, p->progress_user))
        return ox_fail(OX_ERR_ABORTED, "model: loading cancelled");
    return OX_OK;
}

enum ox_status ox_model_load(const char *path, const struct ox_model_params *params,
                             struct ox_model **out) {
    if (!out || !path)
        return ox_fail(OX_ERR_INVALID_ARG, "ox_model_load: NULL argument");
    *out = NULL;
    OX_TRY(cpu_isa_check()); /* an OX_CPU_ISA this CPU cannot run is an error, not a fallback */
    struct ox_model_params p = params ? *params : ox_model_params_default();
    OX_TRY(backend_choose_device(p.device));
    struct ox_model *m = calloc(1, sizeof *m);
    if (!m)
        return ox_fail(OX_ERR_OOM, "model: out of memory");
    enum ox_status s = load(m, path, &p);
    if (s != OX_OK) {
        ox_model_free(m);
        return s;
    }
    *out = m;
    return OX_OK;
}

void ox_model_free(struct ox_model *m) {
    if (!m)
        return;
    if (m->whole) { /* a shard owns its tables, device copies and slices' layouts alone */
        model_free_gpu_weights(m);
        for (int64_t i = 0; m->weights && i < m->gguf->n_tensors; i++)
            if (m->weights[i].copy && m->weights[i].copy != m->whole->weights[i].copy)
                m->weights[i].copy_of->release_weight(m->weights[i].copy);
        for (int i = 0; i < m->n_shard_rows; i++)
            free(m->shard_rows[i]);
        free(m->shard_rows);
        for (int i = 0; i < m->n_gathers; i++)
            free(m->gathers[i].span);
        free(m->gathers);
        model_free_loras(m); /* its shares of the whole's adapters (split_lora.c) */
        free(m->layers), free(m->type_row0), free(m->weights), free(m);
        return;
    }
    model_split_free(m); /* the shards view its bytes */
    model_free_loras(m);
    model_free_gpu_weights(m);
    for (int64_t i = 0; m->weights && m->gguf && i < m->gguf->n_tensors; i++)
        if (m->weights[i].copy) /* the host's */
            m->weights[i].copy_of->release_weight(m->weights[i].copy);
    free(m->layers);
    free(m->type_row0);
    free(m->weights);
    free(m->chat_template);
    ox_vocab_free(m->vocab); /* before the GGUF it borrows */
    gguf_free(m->gguf);
    free(m);
}

enum ox_status ox_model_follow(struct ox_model *m) {
    if (!m)
        return ox_fail(OX_ERR_INVALID_ARG, "ox_model_follow: NULL model");
    return split_follow(m);
}

const struct ox_vocab *ox_model_vocab(const struct ox_model *m) {
    return m->vocab;
}
int32_t ox_model_n_vocab(const struct ox_model *m) {
    return m->cfg.n_vocab;
}
int32_t ox_model_n_ctx_train(const struct ox_model *m) {
    return m->cfg.n_ctx_train;
}
int32_t ox_model_n_embd(const struct ox_model *m) {
    return m->cfg.n_embd;
}
int32_t ox_model_n_layer(const struct ox_model *m) {
    return m->cfg.n_layer;
}
uint64_t ox_model_n_params(const struct ox_model *m) {
    return m->n_params;
}
enum ox_pooling ox_model_pooling(const struct ox_model *m) {
    return (enum ox_pooling)m->cfg.pooling;
}
int32_t ox_model_n_cls_out(const struct ox_model *m) {
    return m->cls_out ? (int32_t)m->cls_out->ne[1] : m->cls ? m->cfg.n_embd : 0;
}
bool ox_model_has_logits(const struct ox_model *m) {
    return m->output != NULL;
}
bool ox_model_is_recurrent(const struct ox_model *m) {
    return m->cfg.n_recurrent > 0;
}
const char *ox_model_backend(const struct ox_model *m) {
    return m->backend_desc;
}
uint64_t ox_model_gpu_bytes(const struct ox_model *m) {
    uint64_t bytes = m->gpu_weights.bytes;
    for (int r = 0; m->split && r < m->split->n_local; r++) /* this process's ranks */
        bytes += m->split->shard[r]->gpu_weights.bytes;
    return bytes;
}

size_t ox_model_desc(const struct ox_model *m, char *buf, size_t cap) {
    double n = (double)m->n_params;
    const char *unit = n >= 1e9 ? "B" : "M";
    /* the file type llama-quantize recorded (Q4_K_M mixes types), else a weight's type */
    const char *type = ox_dtype_name((m->layers[0].wo ? m->layers[0].wo : m->output)->type);
    uint64_t ftype;
    if (gguf_find(m->gguf, "general.file_type") &&
        gguf_get_uint(m->gguf, "general.file_type", 1024, &ftype) == OX_OK &&
        ox_ftype_name((enum ox_ftype)ftype))
        type = ox_ftype_name((enum ox_ftype)ftype);
    int len = snprintf(buf, cap, "%s %.1f%s %s", m->cfg.arch->name, n / (n >= 1e9 ? 1e9 : 1e6),
                       unit, type);
    return len < 0 ? 0 : (size_t)len;
}

const char *ox_model_chat_template(const struct ox_model *m, const char *name) {
    if (!m)
        return NULL;
    if (!name)
        return m->chat_template;
    char key[256]; /* named variants are rare: read from the file each time */
    static _Thread_local char *named;
    snprintf(key, sizeof key, "tokenizer.chat_template.%s", name);
    const char *t;
    uint64_t len;
    if (!gguf_find(m->gguf, key) || gguf_get_str(m->gguf, key, &t, &len) != OX_OK)
        return NULL;
    free(named);
    if (!(named = malloc((size_t)len + 1)))
        return NULL;
    memcpy(named, t, (size_t)len);
    named[len] = '\0';
    return named;
}
