/* quantize_model.c: ox_model_quantize, GGUF in -> GGUF out with every tensor in the type its
 * file type's mix chooses, byte-identical with llama-quantize for the same input and options. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"
#include "core/threadpool.h"
#include "gguf/gguf.h"
#include "model/imatrix.h"
#include "quant/dtype.h"
#include "quant/ftype.h"
#include "quant/quant_mix.h"

#define QUANTIZATION_VERSION 2 /* ggml's GGML_QNT_VERSION, stored in every quantized file */

/* One tensor of the output, in write order. */
struct plan_item {
    const struct gguf_tensor *src;
    enum ox_dtype type;
    uint64_t n_bytes;
    const float *imatrix; /* [ne2][ne0] or NULL */
};

struct quantize_job {
    struct ox_quantize_params params;
    struct ox_gguf *in;
    struct imatrix imatrix;
    bool has_imatrix;
    struct quant_mix mix;
    struct plan_item *plan;
    struct gguf_writer *writer;
    struct threadpool *pool;
    float *f32;   /* the current tensor as floats */
    uint8_t *out; /* its quantized bytes */
    struct ox_quantize_result result;
};

struct ox_quantize_params ox_quantize_params_default(void) {
    return (struct ox_quantize_params){
        .ftype = OX_FTYPE_MOSTLY_Q4_K_M,
        .output_tensor_type = -1,
        .token_embedding_type = -1,
    };
}

/* ---- model facts and tensor order ---------------------------------------------------------- */

/* head counts may be per-layer arrays; the rules look at layer 0 */
static uint64_t first_uint(const struct ox_gguf *g, const char *key, uint64_t fallback) {
    const struct gguf_value *v = gguf_find(g, key);
    struct gguf_value e;
    if (v && v->type == OX_GGUF_ARRAY && v->n > 0 && gguf_array_elem(v, 0, &e) == OX_OK)
        v = &e;
    if (!v)
        return fallback;
    if (v->type == OX_GGUF_UINT32 || v->type == OX_GGUF_UINT64 || v->type == OX_GGUF_UINT16)
        return gguf_value_u64(v);
    if (v->type == OX_GGUF_INT32 || v->type == OX_GGUF_INT64 || v->type == OX_GGUF_INT16)
        return gguf_value_i64(v) > 0 ? (uint64_t)gguf_value_i64(v) : 0;
    return fallback;
}

static enum ox_status model_facts(const struct ox_gguf *g, struct quant_mix_model *m) {
    const char *arch;
    uint64_t len, n_layer;
    char key[256];
    memset(m, 0, sizeof *m);
    OX_TRY(gguf_get_str(g, "general.architecture", &arch, &len));
    if (len > 128)
        return ox_fail(OX_ERR_FORMAT, "quantize: architecture name too long");
    snprintf(key, sizeof key, "%.*s.block_count", (int)len, arch);
    OX_TRY(gguf_get_uint(g, key, 4096, &n_layer));
    snprintf(key, sizeof key, "%.*s.attention.head_count", (int)len, arch);
    uint64_t n_head = first_uint(g, key, 0);
    snprintf(key, sizeof key, "%.*s.attention.head_count_kv", (int)len, arch);
    uint64_t n_head_kv = first_uint(g, key, n_head);
    snprintf(key, sizeof key, "%.*s.expert_count", (int)len, arch);
    uint64_t n_expert = first_uint(g, key, 0);
    m->n_layer = (int)n_layer;
    m->n_gqa = n_head_kv ? (int)(n_head / n_head_kv) : 0;
    m->n_expert = n_expert > 4096 ? 4096 : (int)n_expert;
    m->is_falcon = len == 6 && memcmp(arch, "falcon", 6) == 0;
    /* llama.cpp's 70B size class: 80 llama layers with grouped kv heads */
    m->is_70b = len == 5 && memcmp(arch, "llama", 5) == 0 && n_layer == 80 && n_head != n_head_kv;
    return OX_OK;
}

static int layer_of_name(const char *name) {
    int layer = -1;
    sscanf(name, "blk.%d.", &layer);
    return layer;
}

/* llama.cpp visits tensors by layer (non-layer tensors first), then by name. */
static int weight_order(const void *a, const void *b) {
    const struct plan_item *x = a, *y = b;
    int la = layer_of_name(x->src->name), lb = layer_of_name(y->src->name);
    if (la != lb)
        return la < lb ? -1 : 1;
    return strcmp(x->src->name, y->src->name);
}

/* ---- planning: every tensor's type, checked before any data is written --------------------- */

static enum ox_status attach_imatrix(struct quantize_job *j, struct plan_item *it) {
    const struct gguf_tensor *t = it->src;
    const struct imatrix_entry *e = j->has_imatrix ? imatrix_find(&j->imatrix, t->name) : NULL;
    if (!e || it->type == t->type)
        return OX_OK;
    if (e->n == t->ne[0] * t->ne[2]) {
        it->imatrix = e->values;
        return OX_OK;
    }
    /* token_embd rows are looked up, not multiplied: a mismatched entry there is harmless */
    if (quant_category_of(t->name) == CAT_TOKEN_EMBD)
        return OX_OK;
    return ox_fail(OX_ERR_FORMAT,
                   "quantize: imatrix entry for '%s' has %lld values, the tensor "
                   "needs %lld",
                   t->name, (long long)e->n, (long long)(t->ne[0] * t->ne[2]));
}

/* The dimensions that count, as ggml_n_dims counts them: trailing sizes of 1 do not (a [64, 1]
 * matrix, a classifier's single score, is a vector: it stays as it is, and is written as one). */
static int effective_dims(const int64_t *ne) {
    int n = 4;
    while (n > 1 && ne[n - 1] == 1)
        n--;
    return n;
}

static enum ox_status plan_tensor(struct quantize_job *j, struct plan_item *it) {
    const struct gguf_tensor *t = it->src;
    OX_TRY(quant_mix_choose(&j->mix, t->name, effective_dims(t->ne), t->ne, t->type, &it->type));
    const struct dtype_traits *from = dtype_get((int)t->type), *to = dtype_get((int)it->type);
    it->n_bytes = (uint64_t)(t->ne[0] / to->block_size) * to->type_size *
                  (uint64_t)(t->ne[1] * t->ne[2] * t->ne[3]);
    if (it->type == t->type)
        return OX_OK;
    if (!from->to_float || (from->is_quantized && !j->params.allow_requantize))
        return ox_fail(OX_ERR_UNSUPPORTED,
                       "quantize: tensor '%s' is already %s; requantizing "
                       "loses quality (allow it with --allow-requantize)",
                       t->name, from->name);
    OX_TRY(attach_imatrix(j, it));
    if (!it->imatrix &&
        (to->needs_imatrix || quant_mix_requires_imatrix(t->name, it->type, j->params.ftype)))
        return ox_fail(OX_ERR_INVALID_ARG,
                       "quantize: tensor '%s' as %s needs an importance "
                       "matrix (--imatrix FILE)",
                       t->name, to->name);
    return OX_OK;
}

static enum ox_status make_plan(struct quantize_job *j) {
    struct ox_gguf *g = j->in;
    size_t n = (size_t)g->n_tensors;
    j->plan = calloc(n ? n : 1, sizeof *j->plan);
    const char **names = calloc(n ? n : 1, sizeof *names);
    if (!j->plan || !names) {
        free(names);
        return ox_fail(OX_ERR_OOM, "quantize: out of memory");
    }
    for (size_t i = 0; i < n; i++)
        j->plan[i].src = &g->tensors[i];
    qsort(j->plan, n, sizeof *j->plan, weight_order);
    for (size_t i = 0; i < n; i++)
        names[i] = j->plan[i].src->name;
    struct quant_mix_model facts;
    enum ox_status s = model_facts(g, &facts);
    if (s == OX_OK)
        s = quant_mix_init(&j->mix, &facts, &j->params, j->has_imatrix, names, n);
    free(names);
    for (size_t i = 0; s == OX_OK && i < n; i++)
        s = plan_tensor(j, &j->plan[i]);
    j->result.n_fallback = j->mix.n_fallback;
    return s;
}

/* ---- output metadata ----------------------------------------------------------------------- */

/* COPY keeps the input's file type; a file without one gets F32. */
static int input_ftype(const struct ox_gguf *g) {
    const struct gguf_value *v = gguf_find(g, "general.file_type");
    return v && v->type == OX_GGUF_UINT32 ? (int)gguf_value_u64(v) : OX_FTYPE_ALL_F32;
}

/* llama.cpp's gguf_set_val removes a key and appends it: the keys it sets end up last. */
static enum ox_status append_u32(struct gguf_writer *w, const char *key, uint32_t v) {
    gguf_writer_remove(w, key);
    return gguf_writer_set_u32(w, key, v);
}

static enum ox_status append_str(struct gguf_writer *w, const char *key, const char *s) {
    char clipped[128]; /* llama-quantize passes these through a 128-byte override field */
    snprintf(clipped, sizeof clipped, "%s", s);
    gguf_writer_remove(w, key);
    return gguf_writer_set_str(w, key, clipped);
}

static enum ox_status build_metadata(struct quantize_job *j) {
    struct gguf_writer *w = j->writer;
    const struct ox_gguf *g = j->in;
    for (int64_t i = 0; i < g->n_kv; i++)
        OX_TRY(gguf_writer_set(w, g->kv[i].key, &g->kv[i].value));
    OX_TRY(append_u32(w, "general.quantization_version", QUANTIZATION_VERSION));
    uint32_t ftype = j->params.only_copy ? (uint32_t)input_ftype(g) : (uint32_t)j->params.ftype;
    OX_TRY(append_u32(w, "general.file_type", ftype));
    gguf_writer_remove(w, "split.no"); /* the output is one file */
    gguf_writer_remove(w, "split.count");
    gguf_writer_remove(w, "split.tensors.count");
    if (!j->has_imatrix)
        return OX_OK;
    OX_TRY(append_str(w, "quantize.imatrix.file", j->params.imatrix_path));
    if (j->imatrix.dataset)
        OX_TRY(append_str(w, "quantize.imatrix.dataset", j->imatrix.dataset));
    OX_TRY(append_u32(w, "quantize.imatrix.entries_count", (uint32_t)j->imatrix.n_entries));
    if (j->imatrix.chunk_count > 0)
        OX_TRY(append_u32(w, "quantize.imatrix.chunks_count", (uint32_t)j->imatrix.chunk_count));
    return OX_OK;
}

static enum ox_status add_tensor_infos(struct quantize_job *j) {
    for (int64_t i = 0; i < j->in->n_tensors; i++) {
        const struct plan_item *it = &j->plan[i];
        OX_TRY(gguf_writer_add_tensor(j->writer, it->src->name, it->type,
                                      effective_dims(it->src->ne), it->src->ne, NULL));
    }
    return OX_OK;
}

/* ---- converting one tensor ----------------------------------------------------------------- */

/* Work shared by the pool's threads: rows of one expert slice, claimed in chunks. */
struct rows_task {
    const struct plan_item *item;
    const float *src;     /* the slice's floats */
    uint8_t *dst;         /* its quantized rows */
    const float *imatrix; /* the slice's importance, or NULL */
    int64_t n_rows, n_per_row, chunk_rows;
    size_t row_bytes;
    atomic_llong next_row;
};

static void quantize_rows(void *arg, int ith, int nth) {
    struct rows_task *t = arg;
    (void)ith, (void)nth;
    const struct dtype_traits *to = dtype_get((int)t->item->type);
    for (;;) {
        int64_t r0 = atomic_fetch_add(&t->next_row, t->chunk_rows);
        if (r0 >= t->n_rows)
            return;
        int64_t nr = t->n_rows - r0 < t->chunk_rows ? t->n_rows - r0 : t->chunk_rows;
        to->from_float(t->src + r0 * t->n_per_row, t->dst + (size_t)r0 * t->row_bytes, nr,
                       t->n_per_row, t->imatrix);
    }
}

/* The tensor as floats in j->f32 (dequantized or converted when it is not f32 already). */
static enum ox_status load_floats(struct quantize_job *j, const struct gguf_tensor *t,
                                  const float **out) {
    int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    if (t->type == OX_DTYPE_F32) {
        memcpy(j->f32, t->data, (size_t)n * sizeof(float)); /* aligned, private copy */
    } else {
        dtype_get((int)t->type)->to_float(t->data, j->f32, n);
    }
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(j->f32[i]))
            return ox_fail(OX_ERR_FORMAT,
                           "quantize: tensor '%s' has a non-finite value at "
                           "element %lld",
                           t->name, (long long)i);
    *out = j->f32;
    return OX_OK;
}

static enum ox_status convert_tensor(struct quantize_job *j, const struct plan_item *it) {
    const struct gguf_tensor *t = it->src;
    const float *f32 = NULL;
    OX_TRY(load_floats(j, t, &f32));
    const struct dtype_traits *to = dtype_get((int)it->type);
    int64_t n_per_row = t->ne[0], n_rows = t->ne[1];
    size_t row_bytes = (size_t)(n_per_row / to->block_size) * to->type_size;
    /* matrices of a 3-D tensor (experts) are quantized one by one: each expert has its own
     * importance row */
    for (int64_t e = 0; e < t->ne[2] * t->ne[3]; e++) {
        struct rows_task task = {
            .item = it,
            .src = f32 + e * n_rows * n_per_row,
            .dst = j->out + (size_t)(e * n_rows) * row_bytes,
            .imatrix = it->imatrix ? it->imatrix + (e % t->ne[2]) * n_per_row : NULL,
            .n_rows = n_rows,
            .n_per_row = n_per_row,
            .chunk_rows = n_per_row >= 16384 ? 1 : (16384 + n_per_row - 1) / n_per_row,
            .row_bytes = row_bytes,
        };
        atomic_init(&task.next_row, 0);
        threadpool_run(j->pool, quantize_rows, &task);
    }
    return OX_OK;
}

/* ---- the whole file ------------------------------------------------------------------------ */

static enum ox_status alloc_buffers(struct quantize_job *j) {
    uint64_t max_elems = 0, max_bytes = 0;
    for (int64_t i = 0; i < j->in->n_tensors; i++) {
        const struct plan_item *it = &j->plan[i];
        if (it->type == it->src->type)
            continue;
        const int64_t *ne = it->src->ne;
        uint64_t n = (uint64_t)(ne[0] * ne[1] * ne[2] * ne[3]);
        max_elems = n > max_elems ? n : max_elems;
        max_bytes = it->n_bytes > max_bytes ? it->n_bytes : max_bytes;
    }
    if (max_elems > SIZE_MAX / sizeof(float))
        return ox_fail(OX_ERR_OOM, "quantize: tensor too large for this machine");
    j->f32 = ox_aligned_alloc(OX_ALIGN, (size_t)max_elems * sizeof(float));
    j->out = ox_aligned_alloc(OX_ALIGN, (size_t)max_bytes);
    if (!j->f32 || !j->out)
        return ox_fail(OX_ERR_OOM, "quantize: cannot allocate %llu bytes of work buffers",
                       (unsigned long long)(max_elems * sizeof(float) + max_bytes));
    return OX_OK;
}

static enum ox_status write_tensors(struct quantize_job *j, struct gguf_stream *st) {
    int64_t n = j->in->n_tensors;
    for (int64_t i = 0; i < n; i++) {
        const struct plan_item *it = &j->plan[i];
        const void *data = it->src->data;
        if (it->type != it->src->type) {
            OX_TRY(convert_tensor(j, it));
            data = j->out;
        }
        OX_TRY(gguf_stream_tensor(st, data, it->n_bytes));
        const int64_t *ne = it->src->ne;
        j->result.n_params += (uint64_t)(ne[0] * ne[1] * ne[2] * ne[3]);
        j->result.bytes_in += it->src->n_bytes;
        j->result.bytes_out += it->n_bytes;
        struct ox_quantize_progress p = {
            i + 1, n, it->src->name, it->src->type, it->type, it->src->n_bytes, it->n_bytes};
        if (j->params.progress && !j->params.progress(&p, j->params.progress_user))
            return ox_fail(OX_ERR_ABORTED, "quantize: aborted by the progress callback");
    }
    return OX_OK;
}

/* The output must not replace the input (same path, or another name for the same file). */
static enum ox_status check_paths(const char *in, const char *out) {
    struct stat a, b;
    if (strcmp(in, out) == 0 ||
        (stat(in, &a) == 0 && stat(out, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino))
        return ox_fail(OX_ERR_INVALID_ARG,
                       "quantize: the output '%s' is the input file; "
                       "refusing to overwrite it",
                       out);
    return OX_OK;
}

static enum ox_status run_job(struct quantize_job *j, const char *in_path, const char *out_path) {
    OX_TRY(check_paths(in_path, out_path));
    if (j->params.imatrix_path) {
        OX_TRY(imatrix_load(j->params.imatrix_path, &j->imatrix));
        j->has_imatrix = true;
        j->result.n_imatrix_entries = (int)j->imatrix.n_entries;
    }
    OX_TRY(gguf_open(in_path, true, &j->in));
    OX_TRY(make_plan(j));
    OX_TRY(gguf_writer_create(&j->writer));
    OX_TRY(build_metadata(j));
    OX_TRY(add_tensor_infos(j));
    OX_TRY(alloc_buffers(j));
    int n_threads = j->params.n_threads > 0 ? j->params.n_threads : threadpool_cpu_count();
    OX_TRY(threadpool_create(n_threads, &j->pool));
    struct gguf_stream *st;
    OX_TRY(gguf_writer_stream_open(j->writer, out_path, &st));
    enum ox_status s = write_tensors(j, st);
    if (s != OX_OK) {
        gguf_stream_abort(st);
        return s;
    }
    return gguf_stream_close(st);
}

enum ox_status ox_model_quantize(const char *in_path, const char *out_path,
                                 const struct ox_quantize_params *params,
                                 struct ox_quantize_result *result) {
    if (result)
        memset(result, 0, sizeof *result);
    if (!in_path || !out_path)
        return ox_fail(OX_ERR_INVALID_ARG, "quantize: NULL path");
    struct quantize_job j = {.params = params ? *params : ox_quantize_params_default()};
    enum ox_status s = run_job(&j, in_path, out_path);
    if (s == OX_OK && result)
        *result = j.result;
    threadpool_free(j.pool);
    ox_aligned_free(j.f32);
    ox_aligned_free(j.out);
    gguf_writer_free(j.writer);
    quant_mix_free(&j.mix);
    free(j.plan);
    gguf_free(j.in);
    imatrix_free(&j.imatrix);
    return s;
}
