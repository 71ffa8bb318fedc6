/* gen_model.c: `gen-model --preset NAME --type TYPE OUT.gguf` writes a random-weight GGUF model
 * with the exact shapes, metadata and real tokenizer of a known model (Llama 3.2 1B, TinyLlama,
 * Qwen2.5 0.5B, Llama 3 8B), quantized with oxidize's own quantizers and llama.cpp's mix rules,
 * for speed benchmarks side by side with llama.cpp.
 *
 * Tensors are generated and quantized chunk by chunk on all cores and streamed to the file, so
 * no full-precision copy of the model is ever held: memory is one tensor's quantized bytes plus
 * a small float buffer per thread. Every value is a pure function of (seed, tensor name, row),
 * so the output does not depend on the thread count.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/status.h"
#include "core/threadpool.h"
#include "gguf/gguf.h"
#include "quant/dtype.h"
#include "quant/quant_mix.h"

#define QUANTIZATION_VERSION 2 /* ggml's GGML_QNT_VERSION */
#define MAX_TENSORS          1024
#define CHUNK_ELEMS          65536 /* floats generated + quantized per claimed chunk */
#define TOKEN_TYPE_UNUSED    5     /* llama.cpp's LLAMA_TOKEN_TYPE_UNUSED, for padding tokens */

#ifndef OX_SOURCE_DIR
#define OX_SOURCE_DIR "."
#endif

/* Llama 3.1-style rope scaling, stored as a rope_freqs.weight tensor of per-pair factors. */
struct llama3_rope {
    float factor, low_freq_factor, high_freq_factor;
    int original_ctx; /* 0: no rope_freqs tensor */
};

struct preset {
    const char *name, *arch, *model_name, *vocab_file;
    int n_embd, n_ff, n_head, n_head_kv, n_layer, n_ctx;
    float rope_base, rms_eps;
    bool tied_output, qkv_bias;
    int n_vocab_pad; /* pad the token list to this many (the real model's embedding rows) */
    struct llama3_rope rope;
};

static const struct preset presets[] = {
    {"llama-3.2-1b",
     "llama",
     "Llama 3.2 1B (random weights)",
     "ggml-vocab-llama-bpe.gguf",
     2048,
     8192,
     32,
     8,
     16,
     131072,
     500000.0f,
     1e-5f,
     true,
     false,
     0,
     {32.0f, 1.0f, 4.0f, 8192}},
    {"tinyllama-1.1b",
     "llama",
     "TinyLlama 1.1B (random weights)",
     "ggml-vocab-llama-spm.gguf",
     2048,
     5632,
     32,
     4,
     22,
     2048,
     10000.0f,
     1e-5f,
     false,
     false,
     0,
     {0, 0, 0, 0}},
    {"qwen2.5-0.5b",
     "qwen2",
     "Qwen2.5 0.5B (random weights)",
     "ggml-vocab-qwen2.gguf",
     896,
     4864,
     14,
     2,
     24,
     32768,
     1000000.0f,
     1e-6f,
     true,
     true,
     151936,
     {0, 0, 0, 0}},
    {"llama-3-8b",
     "llama",
     "Llama 3 8B (random weights)",
     "ggml-vocab-llama-bpe.gguf",
     4096,
     14336,
     32,
     8,
     32,
     8192,
     500000.0f,
     1e-5f,
     false,
     false,
     0,
     {0, 0, 0, 0}},
    /* the shape of Llama 3 70B: 140 GB in f16, more than one GPU holds (issue 27's split) */
    {"llama-3-70b",
     "llama",
     "Llama 3 70B (random weights)",
     "ggml-vocab-llama-bpe.gguf",
     8192,
     28672,
     64,
     8,
     80,
     8192,
     500000.0f,
     1e-5f,
     false,
     false,
     0,
     {0, 0, 0, 0}},
};
#define N_PRESETS (sizeof presets / sizeof presets[0])

enum init_kind { INIT_MATRIX, INIT_NORM, INIT_BIAS, INIT_ROPE_FREQS };

struct tensor_desc {
    char name[GGUF_MAX_NAME];
    int n_dims;
    int64_t ne[4];
    enum init_kind init;
    enum ox_dtype type;
    uint64_t n_bytes;
    uint64_t key; /* hash of the name: the random stream of this tensor */
};

struct options {
    const struct preset *preset;
    enum ox_ftype ftype;
    const char *out, *vocab_dir;
    int n_threads, n_layer;
    uint64_t seed;
};

struct model_plan {
    struct options opt;
    struct tensor_desc t[MAX_TENSORS];
    int n_tensors;
    int n_vocab;
    bool use_imatrix; /* a uniform importance matrix for the types that cannot do without */
    float rope_factors[256];
};

static volatile sig_atomic_t g_interrupted;

static void on_signal(int sig) {
    (void)sig;
    g_interrupted = 1;
}

/* ---- random numbers: counter-based, so any row can be generated on any thread ------------- */

static uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static uint64_t fnv1a(const char *s) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001B3ull;
    return h;
}

/* n standard normal values (Box-Muller) for row `row` of the tensor with stream key `key`. */
static void normal_row(uint64_t key, int64_t row, float *dst, int64_t n) {
    uint64_t base = splitmix64(key ^ splitmix64((uint64_t)row));
    for (int64_t i = 0; i < n; i += 2) {
        uint64_t x = splitmix64(base + (uint64_t)i);
        float u1 = ((float)(x >> 40) + 0.5f) * (1.0f / 16777216.0f); /* (0, 1) */
        float u2 = (float)(x & 0xFFFFFF) * (1.0f / 16777216.0f);     /* [0, 1) */
        float r = sqrtf(-2.0f * logf(u1)), th = 6.28318530718f * u2;
        dst[i] = r * cosf(th);
        if (i + 1 < n)
            dst[i + 1] = r * sinf(th);
    }
}

/* One row of a tensor's float values: matrices ~ N(0, 1/fan_in) with fan_in = ne0, norms
 * 1 + N(0, 0.02^2), biases N(0, 0.02^2); never all zeros. */
static void gen_row(const struct model_plan *p, const struct tensor_desc *t, int64_t row,
                    float *dst) {
    int64_t n = t->ne[0];
    if (t->init == INIT_ROPE_FREQS) {
        memcpy(dst, p->rope_factors, (size_t)n * sizeof *dst);
        return;
    }
    normal_row(t->key, row, dst, n);
    float scale = t->init == INIT_MATRIX ? 1.0f / sqrtf((float)n) : 0.02f;
    float shift = t->init == INIT_NORM ? 1.0f : 0.0f;
    for (int64_t i = 0; i < n; i++)
        dst[i] = shift + scale * dst[i];
}

/* convert_hf_to_gguf's Llama 3.1 rope factors: 1 for high frequencies, `factor` for low ones,
 * smoothly interpolated in between. */
static void llama3_rope_factors(const struct preset *pr, int head_dim, float *out) {
    const struct llama3_rope *r = &pr->rope;
    double low_wavelen = r->original_ctx / r->low_freq_factor;
    double high_wavelen = r->original_ctx / r->high_freq_factor;
    for (int i = 0; i < head_dim / 2; i++) {
        double freq = 1.0 / pow(pr->rope_base, (2.0 * i) / head_dim);
        double wavelen = 2.0 * 3.14159265358979323846 / freq;
        if (wavelen < high_wavelen) {
            out[i] = 1.0f;
        } else if (wavelen > low_wavelen) {
            out[i] = r->factor;
        } else {
            double smooth = (r->original_ctx / wavelen - r->low_freq_factor) /
                            (r->high_freq_factor - r->low_freq_factor);
            out[i] = (float)(1.0 / ((1.0 - smooth) / r->factor + smooth));
        }
    }
}

/* ---- the tensor list ------------------------------------------------------------------------ */

static enum ox_status add_tensor(struct model_plan *p, const char *name, enum init_kind init,
                                 int64_t ne0, int64_t ne1) {
    if (p->n_tensors >= MAX_TENSORS)
        return ox_fail(OX_ERR_INVALID_ARG, "more than %d tensors", MAX_TENSORS);
    struct tensor_desc *t = &p->t[p->n_tensors++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = ne1 > 1 ? 2 : 1;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = t->ne[3] = 1;
    t->init = init;
    t->type = OX_DTYPE_F32;
    t->key = fnv1a(name) ^ splitmix64(p->opt.seed);
    return OX_OK;
}

static enum ox_status add_layer(struct model_plan *p, int il) {
    const struct preset *pr = p->opt.preset;
    int64_t e = pr->n_embd, hd = pr->n_embd / pr->n_head;
    int64_t q = hd * pr->n_head, kv = hd * pr->n_head_kv, ff = pr->n_ff;
    static const char *const bias_names[] = {"attn_q.bias", "attn_k.bias", "attn_v.bias"};
    char name[GGUF_MAX_NAME];
#define LAYER_TENSOR(suffix, init, ne0, ne1)                                                       \
    do {                                                                                           \
        snprintf(name, sizeof name, "blk.%d.%s", il, suffix);                                      \
        OX_TRY(add_tensor(p, name, init, ne0, ne1));                                               \
    } while (0)
    LAYER_TENSOR("attn_norm.weight", INIT_NORM, e, 1);
    LAYER_TENSOR("attn_q.weight", INIT_MATRIX, e, q);
    LAYER_TENSOR("attn_k.weight", INIT_MATRIX, e, kv);
    LAYER_TENSOR("attn_v.weight", INIT_MATRIX, e, kv);
    for (int i = 0; pr->qkv_bias && i < 3; i++)
        LAYER_TENSOR(bias_names[i], INIT_BIAS, i == 0 ? q : kv, 1);
    LAYER_TENSOR("attn_output.weight", INIT_MATRIX, q, e);
    LAYER_TENSOR("ffn_norm.weight", INIT_NORM, e, 1);
    LAYER_TENSOR("ffn_gate.weight", INIT_MATRIX, e, ff);
    LAYER_TENSOR("ffn_up.weight", INIT_MATRIX, e, ff);
    LAYER_TENSOR("ffn_down.weight", INIT_MATRIX, ff, e);
#undef LAYER_TENSOR
    return OX_OK;
}

static int layer_of_name(const char *name) {
    int layer = -1;
    sscanf(name, "blk.%d.", &layer);
    return layer;
}

/* The order llama-quantize (and ox_model_quantize) visits and writes tensors: non-layer tensors
 * first, then by layer, then by name. The mix rules count layers in this order. */
static int tensor_order(const void *a, const void *b) {
    const struct tensor_desc *x = a, *y = b;
    int la = layer_of_name(x->name), lb = layer_of_name(y->name);
    if (la != lb)
        return la < lb ? -1 : 1;
    return strcmp(x->name, y->name);
}

static enum ox_status build_tensor_list(struct model_plan *p) {
    const struct preset *pr = p->opt.preset;
    int head_dim = pr->n_embd / pr->n_head;
    OX_TRY(add_tensor(p, "token_embd.weight", INIT_MATRIX, pr->n_embd, p->n_vocab));
    OX_TRY(add_tensor(p, "output_norm.weight", INIT_NORM, pr->n_embd, 1));
    if (!pr->tied_output)
        OX_TRY(add_tensor(p, "output.weight", INIT_MATRIX, pr->n_embd, p->n_vocab));
    if (pr->rope.original_ctx > 0) {
        llama3_rope_factors(pr, head_dim, p->rope_factors);
        OX_TRY(add_tensor(p, "rope_freqs.weight", INIT_ROPE_FREQS, head_dim / 2, 1));
    }
    for (int il = 0; il < p->opt.n_layer; il++)
        OX_TRY(add_layer(p, il));
    qsort(p->t, (size_t)p->n_tensors, sizeof p->t[0], tensor_order);
    return OX_OK;
}

/* ---- tensor types: llama.cpp's mix for the file type ------------------------------------- */

static enum ox_status choose_types(struct model_plan *p, bool has_imatrix, bool *needs_imatrix) {
    const struct preset *pr = p->opt.preset;
    struct ox_quantize_params qp = ox_quantize_params_default();
    qp.ftype = p->opt.ftype;
    struct quant_mix_model facts = {
        .is_70b = false,
        .n_layer = p->opt.n_layer,
        .n_gqa = pr->n_head / pr->n_head_kv,
    };
    const char *names[MAX_TENSORS];
    for (int i = 0; i < p->n_tensors; i++)
        names[i] = p->t[i].name;
    struct quant_mix mix;
    enum ox_status s = quant_mix_init(&mix, &facts, &qp, has_imatrix, names, (size_t)p->n_tensors);
    *needs_imatrix = false;
    for (int i = 0; s == OX_OK && i < p->n_tensors; i++) {
        struct tensor_desc *t = &p->t[i];
        s = quant_mix_choose(&mix, t->name, t->n_dims, t->ne, OX_DTYPE_F32, &t->type);
        const struct dtype_traits *d = dtype_get((int)t->type);
        if (s == OX_OK && !d->from_float)
            s = ox_fail(OX_ERR_UNSUPPORTED, "no quantizer for %s", d->name);
        if (s != OX_OK)
            break;
        t->n_bytes = (uint64_t)(t->ne[0] / d->block_size) * d->type_size * (uint64_t)t->ne[1];
        if (t->type != OX_DTYPE_F32 &&
            (d->needs_imatrix || quant_mix_requires_imatrix(t->name, t->type, p->opt.ftype)))
            *needs_imatrix = true;
    }
    quant_mix_free(&mix);
    return s;
}

/* Types like IQ2_XXS refuse to quantize without an importance matrix (llama-quantize demands
 * --imatrix): for those file types every tensor is quantized with a uniform one, as
 * llama-quantize would with an all-ones imatrix file. */
static enum ox_status plan_types(struct model_plan *p) {
    bool needs;
    OX_TRY(choose_types(p, false, &needs));
    if (!needs)
        return OX_OK;
    p->use_imatrix = true;
    fprintf(stderr, "gen-model: %s needs an importance matrix; using a uniform one\n",
            ox_ftype_name(p->opt.ftype));
    return choose_types(p, true, &needs);
}

/* ---- metadata -------------------------------------------------------------------------------- */

/* The vocabulary's tokens padded to n with "[PAD<i>]" entries of type UNUSED, as
 * convert_hf_to_gguf does when config.json's vocab_size exceeds the tokenizer's size. */
static enum ox_status pad_vocab(struct gguf_writer *w, const struct ox_gguf *v, int64_t n) {
    const struct gguf_value *toks;
    if (gguf_find(v, "tokenizer.ggml.scores"))
        return ox_fail(OX_ERR_UNSUPPORTED, "padding a vocabulary that has scores");
    OX_TRY(gguf_get_array(v, "tokenizer.ggml.tokens", OX_GGUF_STRING, &toks));
    uint64_t have = toks->n;
    char **strs = calloc((size_t)n, sizeof *strs);
    int32_t *types = calloc((size_t)n, sizeof *types);
    enum ox_status s = strs && types ? OX_OK : ox_fail(OX_ERR_OOM, "out of memory");
    const struct gguf_value *tt = NULL;
    if (s == OX_OK && gguf_find(v, "tokenizer.ggml.token_type"))
        s = gguf_get_array(v, "tokenizer.ggml.token_type", OX_GGUF_INT32, &tt);
    for (uint64_t i = 0; s == OX_OK && i < (uint64_t)n; i++) {
        char pad[32];
        snprintf(pad, sizeof pad, "[PAD%llu]", (unsigned long long)i);
        const struct gguf_value *e = i < have ? &toks->elems[i] : NULL;
        strs[i] = e ? strndup((const char *)e->data, (size_t)e->n) : strdup(pad);
        if (!strs[i])
            s = ox_fail(OX_ERR_OOM, "out of memory");
        if (tt && i < have)
            memcpy(&types[i], tt->data + 4 * i, 4);
        else
            types[i] = i < have ? 1 : TOKEN_TYPE_UNUSED;
    }
    if (s == OX_OK)
        s = gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", (const char *const *)strs,
                                      (uint64_t)n);
    if (s == OX_OK && tt)
        s = gguf_writer_set_array(w, "tokenizer.ggml.token_type", OX_GGUF_INT32, types,
                                  (uint64_t)n);
    for (int64_t i = 0; strs && i < n; i++)
        free(strs[i]);
    free(strs);
    free(types);
    return s;
}

/* Every tokenizer.* key of the vocabulary file, padded when the preset asks for it. */
static enum ox_status copy_tokenizer(struct model_plan *p, struct gguf_writer *w,
                                     const struct ox_gguf *v) {
    for (int64_t i = 0; i < v->n_kv; i++)
        if (strncmp(v->kv[i].key, "tokenizer.", 10) == 0)
            OX_TRY(gguf_writer_set(w, v->kv[i].key, &v->kv[i].value));
    const struct gguf_value *toks;
    OX_TRY(gguf_get_array(v, "tokenizer.ggml.tokens", OX_GGUF_STRING, &toks));
    p->n_vocab = (int)toks->n;
    if (p->opt.preset->n_vocab_pad > p->n_vocab) {
        OX_TRY(pad_vocab(w, v, p->opt.preset->n_vocab_pad));
        fprintf(stderr, "gen-model: padded the %d-token vocabulary to %d tokens ([PAD<i>])\n",
                p->n_vocab, p->opt.preset->n_vocab_pad);
        p->n_vocab = p->opt.preset->n_vocab_pad;
    }
    return OX_OK;
}

static enum ox_status set_arch_keys(const struct model_plan *p, struct gguf_writer *w) {
    const struct preset *pr = p->opt.preset;
    uint32_t head_dim = (uint32_t)(pr->n_embd / pr->n_head);
    char key[128];
#define ARCH_KEY(setter, suffix, value)                                                            \
    do {                                                                                           \
        snprintf(key, sizeof key, "%s.%s", pr->arch, suffix);                                      \
        OX_TRY(setter(w, key, value));                                                             \
    } while (0)
    ARCH_KEY(gguf_writer_set_u32, "block_count", (uint32_t)p->opt.n_layer);
    ARCH_KEY(gguf_writer_set_u32, "context_length", (uint32_t)pr->n_ctx);
    ARCH_KEY(gguf_writer_set_u32, "embedding_length", (uint32_t)pr->n_embd);
    ARCH_KEY(gguf_writer_set_u32, "feed_forward_length", (uint32_t)pr->n_ff);
    ARCH_KEY(gguf_writer_set_u32, "attention.head_count", (uint32_t)pr->n_head);
    ARCH_KEY(gguf_writer_set_u32, "attention.head_count_kv", (uint32_t)pr->n_head_kv);
    ARCH_KEY(gguf_writer_set_f32, "rope.freq_base", pr->rope_base);
    ARCH_KEY(gguf_writer_set_f32, "attention.layer_norm_rms_epsilon", pr->rms_eps);
    ARCH_KEY(gguf_writer_set_u32, "attention.key_length", head_dim);
    ARCH_KEY(gguf_writer_set_u32, "attention.value_length", head_dim);
    ARCH_KEY(gguf_writer_set_u32, "rope.dimension_count", head_dim);
    ARCH_KEY(gguf_writer_set_u32, "vocab_size", (uint32_t)p->n_vocab);
#undef ARCH_KEY
    return OX_OK;
}

static enum ox_status build_metadata(struct model_plan *p, struct gguf_writer *w) {
    const struct preset *pr = p->opt.preset;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", p->opt.vocab_dir, pr->vocab_file);
    struct ox_gguf *v = NULL;
    enum ox_status s = gguf_open(path, true, &v);
    if (s != OX_OK) {
        char why[512]; /* ox_fail formats into the buffer ox_last_error() returns */
        snprintf(why, sizeof why, "%s", ox_last_error());
        return ox_fail(s, "vocabulary %s: %s (--vocab-dir DIR)", path, why);
    }
    s = gguf_writer_set_str(w, "general.architecture", pr->arch);
    if (s == OX_OK)
        s = gguf_writer_set_str(w, "general.type", "model");
    if (s == OX_OK)
        s = gguf_writer_set_str(w, "general.name", pr->model_name);
    if (s == OX_OK)
        s = gguf_writer_set_u32(w, "general.file_type", (uint32_t)p->opt.ftype);
    if (s == OX_OK)
        s = gguf_writer_set_u32(w, "general.quantization_version", QUANTIZATION_VERSION);
    if (s == OX_OK)
        s = copy_tokenizer(p, w, v); /* sets n_vocab, which the arch keys need */
    if (s == OX_OK)
        s = set_arch_keys(p, w);
    gguf_free(v);
    return s;
}

/* ---- generating and quantizing, chunk by chunk on every thread ----------------------------- */

struct gen_task {
    const struct model_plan *p;
    const struct tensor_desc *t;
    uint8_t *dst;          /* the tensor's bytes */
    float *const *scratch; /* one float buffer per thread */
    const float *imatrix;  /* uniform importance, or NULL */
    int64_t chunk_rows;
    size_t row_bytes;
    atomic_llong next_row;
};

static void gen_rows(void *arg, int ith, int nth) {
    struct gen_task *g = arg;
    (void)nth;
    const struct tensor_desc *t = g->t;
    const struct dtype_traits *d = dtype_get((int)t->type);
    float *buf = g->scratch[ith];
    int64_t n_rows = t->ne[1], n = t->ne[0];
    const float *imatrix = d->is_quantized ? g->imatrix : NULL;
    while (!g_interrupted) {
        int64_t r0 = atomic_fetch_add(&g->next_row, g->chunk_rows);
        if (r0 >= n_rows)
            return;
        int64_t nr = n_rows - r0 < g->chunk_rows ? n_rows - r0 : g->chunk_rows;
        for (int64_t r = 0; r < nr; r++)
            gen_row(g->p, t, r0 + r, buf + r * n);
        d->from_float(buf, g->dst + (size_t)r0 * g->row_bytes, nr, n, imatrix);
    }
}

struct gen_buffers {
    struct threadpool *pool;
    uint8_t *out;
    float *scratch[256];
    float *imatrix;
};

static enum ox_status alloc_buffers(const struct model_plan *p, struct gen_buffers *b) {
    uint64_t max_bytes = 0;
    int64_t max_ne0 = 0;
    for (int i = 0; i < p->n_tensors; i++) {
        max_bytes = p->t[i].n_bytes > max_bytes ? p->t[i].n_bytes : max_bytes;
        max_ne0 = p->t[i].ne[0] > max_ne0 ? p->t[i].ne[0] : max_ne0;
    }
    OX_TRY(threadpool_create(p->opt.n_threads, &b->pool));
    size_t scratch = (size_t)(max_ne0 > CHUNK_ELEMS ? max_ne0 : CHUNK_ELEMS) * sizeof(float);
    b->out = ox_aligned_alloc(OX_ALIGN, (size_t)max_bytes);
    b->imatrix = malloc((size_t)max_ne0 * sizeof(float));
    bool ok = b->out && b->imatrix;
    for (int i = 0; ok && i < p->opt.n_threads; i++)
        ok = (b->scratch[i] = ox_aligned_alloc(OX_ALIGN, scratch)) != NULL;
    if (!ok)
        return ox_fail(OX_ERR_OOM, "cannot allocate %.1f MiB of buffers",
                       (double)(max_bytes + scratch * (size_t)p->opt.n_threads) / 1048576.0);
    for (int64_t i = 0; i < max_ne0; i++)
        b->imatrix[i] = 1.0f;
    return OX_OK;
}

static void free_buffers(const struct model_plan *p, struct gen_buffers *b) {
    threadpool_free(b->pool);
    ox_aligned_free(b->out);
    free(b->imatrix);
    for (int i = 0; i < p->opt.n_threads; i++)
        ox_aligned_free(b->scratch[i]);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One line per tensor on a terminal (overwritten), one per tenth of the data otherwise. */
static void progress(const struct model_plan *p, int i, uint64_t done, uint64_t total, double t0) {
    static int last_tenth = -1;
    const struct tensor_desc *t = &p->t[i];
    int tenth = (int)(10 * done / (total ? total : 1));
    bool tty = isatty(2);
    if (!tty && tenth == last_tenth && i + 1 < p->n_tensors)
        return;
    last_tenth = tenth;
    fprintf(stderr, "%s[%3d/%d] %5.1f%% %6.1fs  %-28s %-7s%s", tty ? "\r\033[K" : "", i + 1,
            p->n_tensors, 100.0 * (double)done / (double)(total ? total : 1), now_s() - t0, t->name,
            ox_dtype_name(t->type), tty ? "" : "\n");
    fflush(stderr);
}

static enum ox_status write_tensors(const struct model_plan *p, struct gen_buffers *b,
                                    struct gguf_stream *st) {
    uint64_t total = 0, done = 0;
    for (int i = 0; i < p->n_tensors; i++)
        total += p->t[i].n_bytes;
    double t0 = now_s();
    for (int i = 0; i < p->n_tensors; i++) {
        const struct tensor_desc *t = &p->t[i];
        const struct dtype_traits *d = dtype_get((int)t->type);
        struct gen_task g = {
            .p = p,
            .t = t,
            .dst = b->out,
            .scratch = b->scratch,
            .imatrix = p->use_imatrix ? b->imatrix : NULL,
            .chunk_rows = t->ne[0] >= CHUNK_ELEMS ? 1 : CHUNK_ELEMS / t->ne[0],
            .row_bytes = (size_t)(t->ne[0] / d->block_size) * d->type_size,
        };
        atomic_init(&g.next_row, 0);
        threadpool_run(b->pool, gen_rows, &g);
        if (g_interrupted)
            return ox_fail(OX_ERR_ABORTED, "interrupted");
        OX_TRY(gguf_stream_tensor(st, b->out, t->n_bytes));
        done += t->n_bytes;
        progress(p, i, done, total, t0);
    }
    if (isatty(2))
        fputc('\n', stderr);
    return OX_OK;
}

static enum ox_status generate(struct model_plan *p) {
    struct gguf_writer *w = NULL;
    struct gen_buffers b = {0};
    OX_TRY(gguf_writer_create(&w));
    enum ox_status s = build_metadata(p, w);
    if (s == OX_OK)
        s = build_tensor_list(p);
    if (s == OX_OK)
        s = plan_types(p);
    for (int i = 0; s == OX_OK && i < p->n_tensors; i++)
        s = gguf_writer_add_tensor(w, p->t[i].name, p->t[i].type, p->t[i].n_dims, p->t[i].ne, NULL);
    if (s == OX_OK)
        s = alloc_buffers(p, &b);
    struct gguf_stream *st = NULL;
    if (s == OX_OK)
        s = gguf_writer_stream_open(w, p->opt.out, &st); /* OUT.tmp.XXXXXX, renamed at close */
    if (s == OX_OK) {
        s = write_tensors(p, &b, st);
        if (s == OX_OK)
            s = gguf_stream_close(st);
        else
            gguf_stream_abort(st); /* deletes the temporary file */
    }
    free_buffers(p, &b);
    gguf_writer_free(w);
    return s;
}

/* ---- command line --------------------------------------------------------------------------- */

static void usage(FILE *f) {
    fprintf(f, "usage: gen-model --preset NAME --type TYPE [options] OUT.gguf\n"
               "  Writes a random-weight GGUF model with a real model's shapes and tokenizer,\n"
               "  quantized by oxidize with llama-quantize's per-tensor mix for TYPE.\n"
               "  --preset NAME     ");
    for (size_t i = 0; i < N_PRESETS; i++)
        fprintf(f, "%s%s", i ? ", " : "", presets[i].name);
    fprintf(f,
            "\n"
            "  --type TYPE       F32, F16, BF16, Q4_0, Q8_0, Q4_K_M, IQ4_XS, ... (any file type\n"
            "                    'oxidize quantize' takes)\n"
            "  --threads N       worker threads (default: all CPUs)\n"
            "  --seed N          random seed (default 1)\n"
            "  --layers N        fewer blocks than the real model (for quick tests)\n"
            "  --vocab-dir DIR   tokenizer GGUFs (default $OX_TESTDATA/vocab or\n"
            "                    ../shared/testdata/vocab beside the source tree)\n");
}

static const struct preset *find_preset(const char *name) {
    for (size_t i = 0; i < N_PRESETS; i++)
        if (strcmp(presets[i].name, name) == 0)
            return &presets[i];
    return NULL;
}

static bool parse_long(const char *opt, const char *s, long lo, long hi, long *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi) {
        fprintf(stderr, "gen-model: %s wants an integer in [%ld, %ld], got '%s'\n", opt, lo, hi, s);
        return false;
    }
    *out = v;
    return true;
}

static bool parse_option(struct options *o, const char *a, const char *val, bool *have_type) {
    long v;
    if (!strcmp(a, "--preset")) {
        if (!(o->preset = find_preset(val)))
            fprintf(stderr, "gen-model: unknown preset '%s' (see --help)\n", val);
        return o->preset != NULL;
    }
    if (!strcmp(a, "--type")) {
        if (ox_ftype_parse(val, &o->ftype) != OX_OK) {
            fprintf(stderr, "gen-model: unknown type '%s': %s\n", val, ox_last_error());
            return false;
        }
        return *have_type = true;
    }
    if (!strcmp(a, "--vocab-dir"))
        return (o->vocab_dir = val) != NULL;
    if (!strcmp(a, "--threads") && parse_long(a, val, 1, 256, &v))
        return (o->n_threads = (int)v) > 0;
    if (!strcmp(a, "--layers") && parse_long(a, val, 1, 4096, &v))
        return (o->n_layer = (int)v) > 0;
    if (!strcmp(a, "--seed") && parse_long(a, val, 0, 0x7fffffffL, &v))
        return (o->seed = (uint64_t)v), true;
    if (strcmp(a, "--threads") && strcmp(a, "--layers") && strcmp(a, "--seed"))
        fprintf(stderr, "gen-model: unknown option '%s' (see --help)\n", a);
    return false;
}

/* 0: parsed; 1: help printed; 2: usage error (message printed). */
static int parse_args(int argc, char **argv, struct options *o) {
    bool have_type = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 1;
        }
        if (a[0] == '-' && a[1] == '-') {
            if (i + 1 >= argc) {
                fprintf(stderr, "gen-model: %s needs a value\n", a);
                return 2;
            }
            if (!parse_option(o, a, argv[++i], &have_type))
                return 2;
        } else if (o->out) {
            fprintf(stderr, "gen-model: more than one output file ('%s', '%s')\n", o->out, a);
            return 2;
        } else {
            o->out = a;
        }
    }
    if (!o->preset || !have_type || !o->out) {
        fprintf(stderr, "gen-model: need --preset, --type and OUT.gguf\n\n");
        usage(stderr);
        return 2;
    }
    return 0;
}

int main(int argc, char **argv) {
    static struct model_plan plan; /* large: the tensor table */
    static char vocab_dir[4096];
    struct options *o = &plan.opt;
    o->seed = 1;
    int rc = parse_args(argc, argv, o);
    if (rc)
        return rc == 1 ? 0 : 2;
    if (!o->vocab_dir) {
        const char *td = getenv("OX_TESTDATA");
        snprintf(vocab_dir, sizeof vocab_dir, "%s/vocab",
                 td && *td ? td : OX_SOURCE_DIR "/../shared/testdata");
        o->vocab_dir = vocab_dir;
    }
    if (!o->n_threads)
        o->n_threads = threadpool_cpu_count() > 256 ? 256 : threadpool_cpu_count();
    if (!o->n_layer)
        o->n_layer = o->preset->n_layer;
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    fprintf(stderr, "gen-model: %s %s, %d layers, %d threads -> %s\n", o->preset->name,
            ox_ftype_name(o->ftype), o->n_layer, o->n_threads, o->out);
    double t0 = now_s();
    enum ox_status s = generate(&plan);
    if (s != OX_OK) {
        fprintf(stderr, "gen-model: %s: %s\n", o->out, ox_last_error());
        return s == OX_ERR_ABORTED ? 130 : 1;
    }
    uint64_t bytes = 0, params = 0;
    for (int i = 0; i < plan.n_tensors; i++) {
        bytes += plan.t[i].n_bytes;
        params += (uint64_t)(plan.t[i].ne[0] * plan.t[i].ne[1]);
    }
    fprintf(stderr,
            "gen-model: wrote %s: %d tensors, %.3f B params, %.1f MiB (%.2f bpw) in %.1fs\n",
            o->out, plan.n_tensors, (double)params / 1e9, (double)bytes / 1048576.0,
            8.0 * (double)bytes / (double)params, now_s() - t0);
    return 0;
}
