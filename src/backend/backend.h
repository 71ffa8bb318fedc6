/* backend.h: the op table every compute backend implements; the forward pass calls only these. */
#ifndef OX_BACKEND_BACKEND_H
#define OX_BACKEND_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/threadpool.h"
#include "oxidize.h"

/* A matrix of weights in any dtype: n_rows rows of n_cols elements, row_bytes apart, in the
 * backend's memory (a device copy for a GPU backend). */
struct mat_lora;
struct backend_group; /* the ranks of a split model, as a backend joins them (all_reduce) */

struct mat {
    enum ox_dtype type;
    const void *data;
    int64_t n_rows, n_cols;
    size_t row_bytes;
    const void *packed; /* the same rows in a backend's load-time layout (backend_cpu_pack), or
                           NULL */
    const struct mat_lora *lora; /* low-rank deltas its products take (compose_lora_add), or
                                    NULL */
};

/* A LoRA adapter's delta on a matrix: W x becomes W x + scale * B (A x), A [rank][n_cols] and B
 * [n_rows][rank] f32 in the backend's memory; t [n][rank] and d [n][n_rows] are room for A x
 * and B (A x). The next adapter on the same matrix, or NULL. */
struct mat_lora {
    struct mat a, b;
    float scale;
    float *t, *d;
    const struct mat_lora *next;
    bool rows; /* a token embedding's: B times A's row of each token id joins the looked-up rows
                  (compose_get_rows), A [n_vocab][rank], B [n_embd][rank]; no product takes it */
};
#define MAT_LORA_MAX 8 /* adapters a context applies at once */

/* A backend's per-context state: its table, and its own fields (threads and scratch on the
 * CPU, a stream and device buffers on a GPU) in impl, which init makes and release frees. */
struct backend {
    const struct backend_ops *ops;
    void *impl;
    size_t own_bytes; /* backend memory the backend holds itself (a GPU's scratch) */
    /* the context's LoRA deltas by a weight's lora_slot - 1 (model/lora.c), or NULL: none */
    const struct mat_lora *const *lora;
    /* batches of several tokens computed so that each token's rows come out bit for bit as a
     * step of that token alone would give them (speculative decoding's check of a draft): the
     * CPU then keeps its one-token kernels' order of sums for every batch size, the CUDA
     * backend for the steps it records (graph_max_tokens: cuda_one_token) */
    bool one_token_order;
};

/* What a context asks a backend's state to be sized for (init). */
struct backend_sizes {
    uint32_t n_batch;     /* rows of a batch */
    int n_threads;        /* the host's threads (0: one per core) */
    int64_t max_cols;     /* the widest activation row a matmul sees */
    int64_t batch_cols;   /* the widest row of a whole batch's matmul: narrower than max_cols
                             when a wide batch's FFN goes by slices */
    int64_t scratch_cols; /* the widest per-thread scratch row (the CPU's attention scores
                             over the whole context) */
    const struct backend_weights *weights; /* the model's weights this backend holds, or NULL */
};

/* A model's weights as one backend holds them: prepare_weight adds to it; the model keeps it. */
struct backend_weights {
    uint64_t bytes; /* backend memory the copies take */
    bool converts;  /* some matrix is converted before a batch's GEMM reads it (quantized, for
                       cuBLAS): each context keeps room for that */
};

/* A tensor of a model as the file has it, for prepare_weight. */
struct backend_tensor {
    enum ox_dtype type;
    const void *data;       /* the file's bytes (mapped) */
    int64_t n_rows, n_cols; /* ne[1] rows of ne[0] elements per matrix */
    int64_t n_mats;         /* ne[2] * ne[3]: matrices one after another (experts, heads) */
    int n_dims;
    size_t row_bytes, n_bytes;
};

/* The ops a backend's support is asked about at load (supports). */
enum backend_op { BACKEND_OP_MATMUL, BACKEND_OP_GET_ROWS, BACKEND_OP_COUNT };

/* Rotary position embedding settings (ggml's rope_ext with YaRN). */
struct rope_params {
    int n_rot; /* leading dims of each head that rotate */
    bool neox; /* rotate (i, i + n_rot/2) pairs instead of (i, i+1) */
    float freq_base, freq_scale;
    float ext_factor;          /* YaRN extrapolation mix (0: plain or linear scaling) */
    float attn_factor;         /* scales cos and sin */
    float corr_dims[2];        /* YaRN ramp between these dims */
    const float *freq_factors; /* n_rot/2 divisors of the angle (llama3 rope_freqs), or NULL */
};

/* A KV cell's sequences: SEQ_WORDS 64-bit words, bit s % 64 of word s / 64 set when the cell
 * belongs to sequence s. */
#define SEQ_WORDS (OX_SEQ_MAX / 64)

#ifdef __CUDACC__ /* the CUDA kernels read the sets too */
__host__ __device__
#endif
    static inline bool
    seq_set_has(const uint64_t *set, int32_t s) {
    return set[s / 64] >> (s % 64) & 1;
}

struct attn_args {
    const float *q, *k, *v;
    float *y;
    int n, n_cells, n_head, n_head_kv, hd_k, hd_v;
    const int32_t *q_pos, *q_seq;
    const int32_t *cell_pos;
    const uint64_t *cell_seq;   /* [n_cells][SEQ_WORDS] sequence sets (seq_set_has) */
    const int32_t *n_cells_now; /* n_cells again, in the backend's memory (or NULL): what a
                                   recorded decode step reads when it is replayed later */
    const int32_t *seq_span;    /* [2 s, 2 s + 1): the first and one past the last cell that
                                   sequence s holds (kv_spans), in the backend's memory, or
                                   NULL: a backend may look at those cells alone */
    float scale;                /* applied to q.k, usually 1/sqrt(hd_k) */
    float softcap;              /* scores become softcap * tanh(score / softcap); 0: off */
    const float *sinks;         /* [n_head]: a logit per head that joins each softmax with no
                                   value (gpt-oss's attention sinks), or NULL */
    int32_t window;             /* sliding window: query p sees cells with p - pos < window;
                                   0: no window */
    int32_t ahead;              /* how far past its own position a query sees: 0 (causal), half a
                                   symmetric window, or INT32_MAX (its whole sequence) */
    bool f16_cache;             /* k/v came from an f16 cache: round q and the value
                                   accumulator to f16 as llama.cpp's CPU flash attention does */
    bool one_per_seq;           /* no two queries share a sequence (a decode step of several
                                   sequences): nothing for queries to share */
    float *k_t;                 /* n_cells * n_head_kv * hd_k floats a backend may use for a
                                   transposed copy of k (large batches), or NULL */
    /* For backends whose attention_reads_cache is set: k and v are NULL and the rows come
     * from the cache itself, cache_type rows k_row / v_row bytes apart. */
    const uint8_t *k_cache, *v_cache;
    enum ox_dtype cache_type;
    size_t k_row, v_row;
};

/* A layer's keys and values of n tokens on their way into the KV cache, with the rotation of
 * q and k first (rope_store). */
struct rope_store_args {
    float *q, *k;   /* [n][n_head][hd_k] and [n][n_head_kv][hd_k]: rotated in place */
    const float *v; /* [n][n_head_kv][hd_v] */
    const int32_t *pos;
    int n, n_head, n_head_kv, hd_k, hd_v;
    const struct rope_params *rope;
    enum ox_dtype cache_type; /* f32, f16 or q8_0 rows, k_row / v_row bytes apart */
    uint8_t *k_cache, *v_cache;
    size_t k_row, v_row;
    const int32_t *cells; /* token t goes to row cells[t] */
};

/* A Mamba-2 layer's recurrence over n tokens (granitehybrid's SSM layers), each token on the
 * state of its slot, in batch order: the causal convolution of x, B and C (plus its bias, then
 * silu), then per head the scan state = state * exp(softplus(dt + dt_bias) A) +
 * softplus(..) x B, y = state . C + D x. */
struct mamba2_args {
    const float *xbc; /* [n] rows of conv_dim (x, B, C), xbc_stride floats apart */
    const float *dt;  /* [n] rows of n_head, dt_stride floats apart */
    size_t xbc_stride, dt_stride;
    const float *conv_w, *conv_b;   /* [conv_dim][d_conv], [conv_dim] (or NULL) */
    const float *dt_bias, *a, *d;   /* [n_head] */
    float *conv_state;              /* per slot [d_conv - 1][conv_dim], oldest row first */
    float *ssm_state;               /* per slot [n_head][head_dim][d_state] */
    size_t conv_stride, ssm_stride; /* floats from one slot's state to the next's */
    const int32_t *slot;            /* [n]: the state token t reads and updates */
    float *conv_out;                /* [n][conv_dim]: room for the convolved rows */
    float *y;                       /* [n][n_head * head_dim] */
    int n, n_head, head_dim, n_group, d_state, d_conv;
};

/* act(gate) * up: SiLU, GELU, sigmoid; and gpt-oss's clamped SwiGLU, min(g, 7) * sigmoid(1.702 *
 * min(g, 7)) * (clamp(up, -7, 7) + 1) (ggml_swiglu_oai with llama.cpp's alpha and limit). */
enum glu_kind { GLU_SILU, GLU_GELU, GLU_SIGMOID, GLU_SWIGLU_OAI };

/* A gated delta-net layer's recurrence over n tokens (Qwen 3.5's linear attention), each token
 * on the state of its slot, in batch order:
 *   x = silu(causal conv of the qkv row with the slot's last d_conv - 1 rows), split into q, k
 *   (n_k_heads of d_state each, L2-normed with eps) and v (n_v_heads of d_state); value head h
 *   reads key head h % n_k_heads. Per value head: g = softplus(alpha + dt_bias) * a,
 *   b = sigmoid(beta), S = S * exp(g), d = (v - S^T k) * b, S += k d^T, y = S^T q / sqrt(d_state).
 * The ssm state keeps S transposed (row j is column j of S). */
struct delta_net_args {
    const float *qkv; /* [n][conv_dim]: conv_dim = 2 n_k_heads d_state + n_v_heads d_state */
    const float *beta, *alpha;      /* [n][n_v_heads], before their activations */
    const float *conv_w;            /* [conv_dim][d_conv] */
    const float *dt_bias, *a;       /* [n_v_heads] */
    float *conv_state;              /* per slot [d_conv - 1][conv_dim], oldest row first */
    float *ssm_state;               /* per slot [n_v_heads][d_state][d_state] */
    size_t conv_stride, ssm_stride; /* floats from one slot's state to the next's */
    const int32_t *slot;            /* [n]: the state token t reads and updates */
    float *conv_out;                /* [n][conv_dim]: room for the convolved rows */
    float *y;                       /* [n][n_v_heads * d_state] */
    int n, n_k_heads, n_v_heads, d_state, d_conv;
    float eps;
};

/* An RMSNorm a fused matmul applies to its input rows first: x / rms(x) * w, or x / rms(x)
 * where w is NULL (its weight folded into the matrices: model.h's layer_weights). */
struct norm_in {
    const float *w;
    float eps;
};

/* A Mixtral-style MoE FFN over n tokens: each token's k most likely experts by the router's
 * probabilities (ties to the lower index), their GLU FFNs, weighted by the probabilities
 * renormalised over the k (or as they are, raw_weights: OLMoE), summed into y. Expert 0's matrices
 * are given; expert e's is e * n_rows * row_bytes on. The buffers are the backend's to use: */
struct moe_args {
    enum glu_kind kind;
    const struct mat *gate, *up, *down;
    const float *probs; /* [n][n_expert], softmaxed */
    const float *x;     /* [n][gate->n_cols] */
    float *y;           /* [n][down->n_rows] */
    int n, n_expert, k;
    bool raw_weights;               /* the k probabilities as they are, not over their sum */
    int n_batch;                    /* rows each buffer below holds (n <= n_batch) */
    int32_t *ids;                   /* [n_batch][k]: the choice of experts */
    float *weights;                 /* and their weights */
    float *gate_out, *up_out, *glu; /* [n_batch][gate->n_rows] */
    float *rows, *out;              /* [n_batch][gate->n_cols], [n_batch][down->n_rows] */
    bool waited; /* set by the op when it waited for the host midway (so not in a graph) */
};

/* Activations are row-major float arrays: x[n][dim], in the backend's memory, as are the KV
 * cache and the index arrays ops take (positions, cells, sequence masks): the forward pass
 * uploads those once per batch. Ops run in order; only download waits for them. */
struct backend_ops {
    const char *name;
    bool device; /* memory is not the host's: alloc/upload/download are real */
    /* Lifecycle and capability. Whether the backend can run here (a GPU present: false, with
     * no error, when there is none); whether it runs op on weights of type. */
    bool (*available)(void);
    bool (*supports)(enum backend_op op, enum ox_dtype type);
    /* A model's tensor at load: *copy gets the backend's own copy of it (device memory, or a
     * faster layout of the rows), or NULL when it reads the file's bytes as they are; the
     * bytes it takes go into bw. release_weight frees such a copy. */
    enum ox_status (*prepare_weight)(struct backend_weights *bw, const struct backend_tensor *t,
                                     const void **copy);
    void (*release_weight)(const void *copy);
    /* An RMSNorm's weight g (a copy prepare_weight made) multiplied into the copies of the count
     * matrices that read the norm's output, when the backend's kernels gain from that and every
     * product fits their type; *folded says whether it did (else nothing changed). */
    enum ox_status (*fold_norm)(struct backend_weights *bw, const float *g, const struct mat *mats,
                                int count, bool *folded);
    /* A context's state, sized for z (b->ops is set first), and its end (release on a state
     * init failed midway is fine). */
    enum ox_status (*init)(struct backend *b, const struct backend_sizes *z);
    void (*release)(struct backend *b);
    /* Host memory that downloads fill often (the logits), made page-locked where that speeds
     * them (one range per context; unpin before freeing it); a no-op where it does not. */
    void (*pin)(struct backend *b, void *host, size_t bytes);
    void (*unpin)(struct backend *b);
    /* Backend memory (NULL when there is not enough), and copies to and from the host. */
    void *(*alloc)(struct backend *b, size_t bytes);
    void (*free)(struct backend *b, void *p);
    void (*upload)(struct backend *b, void *dst, const void *host, size_t bytes);
    /* download waits for the ops before it, and reports the first failure of any of them */
    enum ox_status (*download)(struct backend *b, void *host, const void *src, size_t bytes);
    /* y[t] = W x[t] for t < n: y is [n][w->n_rows], x is [n][w->n_cols] */
    void (*matmul)(struct backend *b, const struct mat *w, const float *x, float *y, int n);
    /* y[t] = row ids[t] of w as floats: y is [n][w->n_cols] */
    void (*get_rows)(struct backend *b, const struct mat *w, const int32_t *ids, float *y, int n);
    /* y = x / rms(x) * g, per row of dim elements (g may be NULL) */
    void (*rms_norm)(struct backend *b, const float *x, const float *g, float *y, int n, int dim,
                     float eps);
    /* y = (x - mean(x)) / sqrt(var(x) + eps) * g + bias, per row (g, bias may be NULL) */
    void (*layer_norm)(struct backend *b, const float *x, const float *g, const float *bias,
                       float *y, int n, int dim, float eps);
    /* rotate the first n_rot dims of each head of x[n][n_heads][head_dim] by pos[t] */
    void (*rope)(struct backend *b, float *x, const int32_t *pos, int n, int n_heads, int head_dim,
                 const struct rope_params *p);
    /* y = act(gate) * up, elementwise over n values */
    void (*glu)(struct backend *b, enum glu_kind kind, const float *gate, const float *up, float *y,
                size_t n);
    /* y = gelu(x) over n values (in place allowed) */
    void (*gelu)(struct backend *b, const float *x, float *y, size_t n);
    /* y += x over n values */
    void (*add)(struct backend *b, float *y, const float *x, size_t n);
    /* y[t] += row for each of n rows of dim values (biases) */
    void (*add_row)(struct backend *b, float *y, const float *row, int n, int dim);
    /* y *= s over n values */
    void (*scale)(struct backend *b, float *y, float s, size_t n);
    /* softmax of each of n rows of dim values, in place */
    void (*softmax)(struct backend *b, float *x, int n, int dim);
    /* y = cap * tanh(y / cap) over n values (logit soft-capping) */
    void (*softcap)(struct backend *b, float *y, float cap, size_t n);
    /* Attention of queries q[n][n_head][hd_k] over cached keys k[n_cells][n_head_kv][hd_k]
     * and values v[n_cells][n_head_kv][hd_v]: query t sees cell c when c's sequence set has
     * q_seq[t], cell_pos[c] - q_pos[t] <= ahead (causal: 0), and (with a window) q_pos[t] -
     * cell_pos[c] < window.
     * Heads share kv heads in groups (GQA). y is
     * [n][n_head][hd_v]. */
    void (*attention)(struct backend *b, const struct attn_args *a);
    /* y[t] *= sigmoid(g[t]) for each of n rows of dim values (a shared expert's gate); NULL:
     * the backend has none */
    void (*sigmoid_scale_rows)(struct backend *b, float *y, const float *g, int n, int dim);
    /* a gated delta-net layer's recurrence (struct delta_net_args); NULL: the backend has none */
    void (*delta_net)(struct backend *b, const struct delta_net_args *a);
    /* a Mamba-2 layer's (struct mamba2_args); NULL: the backend has none */
    void (*mamba2)(struct backend *b, const struct mamba2_args *a);
    /* Row r of dst = row r of src for rows rows of cols floats (strides in floats). */
    void (*copy_rows)(struct backend *b, float *dst, size_t dst_stride, const float *src,
                      size_t src_stride, int rows, int cols);
    /* y += w * x over n values */
    void (*axpy)(struct backend *b, float *y, const float *x, float w, size_t n);
    /* y = 0 over n values */
    void (*zero)(struct backend *b, float *y, size_t n);
    /* KV cache rows (type f32, f16 or q8_0; row_bytes apart from base): store n rows of dim
     * floats into rows cells[t]; load rows [0, n_cells) as floats, skipping those whose
     * cell_pos is negative (free cells, which attention never reads; NULL: load all). */
    void (*cache_store)(struct backend *b, enum ox_dtype type, const float *x, int n, int dim,
                        uint8_t *base, size_t row_bytes, const int32_t *cells);
    void (*cache_load)(struct backend *b, enum ox_dtype type, const uint8_t *base, size_t row_bytes,
                       float *y, int n_cells, int dim, const int32_t *cell_pos);
    /* Optional fusions (NULL, or false returned: the caller runs the ops they stand for):
     * y += W x, a projection added to the residual; */
    bool (*matmul_add)(struct backend *b, const struct mat *w, const float *x, float *y, int n);
    /* y[m] = w[m] x for count (<= 3) matrices of one width (q, k and v); */
    bool (*matmul_multi)(struct backend *b, int count, const struct mat *w, const float *x,
                         const struct norm_in *norm, float *const *y, int n);
    /* y = act(gate x) * (up x), a GLU FFN's first half. Both take x through the RMSNorm norm
     * first unless that is NULL (the normed rows are not stored). */
    bool (*matmul_glu)(struct backend *b, enum glu_kind kind, const struct mat *gate,
                       const struct mat *up, const float *x, const struct norm_in *norm, float *y,
                       int n);
    /* rope of q and k, then cache_store of k and v, in one op; */
    bool (*rope_store)(struct backend *b, const struct rope_store_args *a);
    /* a MoE FFN, the experts chosen by the backend where the probabilities are. */
    bool (*moe_ffn)(struct backend *b, struct moe_args *a);
    /* Optional (NULL: none): record the ops up to graph_end once per key and replay them after.
     * graph_begin returns true when it replayed a recording (skip the ops then); the ops
     * between must not read the host (no download) and must repeat exactly for a key (the
     * cells in use may change: attention reads their count from n_cells_now). */
    bool (*graph_begin)(struct backend *b, uint64_t key);
    void (*graph_end)(struct backend *b);
    int graph_max_tokens;       /* steps of up to this many tokens may be recorded, */
    int graph_max_seqs;         /* and steps of one token for each of up to this many sequences */
    int graph_long_cells;       /* steps whose cells in use reach this many are recorded apart
                                   from shorter ones (their attention split otherwise); 0: not */
    bool attention_reads_cache; /* attention takes the cache's rows (no cache_load first) */
    /* Optional (NULL: the backend cannot run a rank of a split model): the ranks of group g
     * each call it with their n partial sums x; every rank's x becomes their sum, added in rank
     * order (the same floats on every rank), or where `to` is not NULL, to[i] += the sum (x
     * then undefined: a residual takes the sum in the same step). An error once the group was
     * ended by group_abort: a rank is gone. */
    enum ox_status (*all_reduce)(struct backend *b, struct backend_group *g, int rank, float *x,
                                 size_t n, float *to);
    /* With all_reduce: rank's n floats x to rank `to` of the group, and from rank `from` into x
     * (a pipeline's hidden state); each send meets the recv that names it, in order. */
    enum ox_status (*send)(struct backend *b, struct backend_group *g, int rank, int to,
                           const float *x, size_t n);
    enum ox_status (*recv)(struct backend *b, struct backend_group *g, int rank, int from, float *x,
                           size_t n);
    /* With all_reduce: a group of world ranks of this process, rank r on device devices[r]
     * (the CPU has none: NULL), each on a thread of its own that group_enter makes rank's (its
     * device current) before it makes the rank's shard and context; NULL with the error set
     * where it cannot be made. devices counts the devices present (the CPU: 0). */
    struct backend_group *(*group_create)(int world, const int *devices);
    enum ox_status (*group_enter)(struct backend_group *g, int rank);
    void (*group_free)(struct backend_group *g);
    /* Ends the group from any thread (a watcher that saw a rank's process go): sums waiting
     * for that rank, and every later one, fail rather than wait forever. */
    void (*group_abort)(struct backend_group *g);
    /* Optional (NULL: never): whether a step whose sums over g are of up to n floats each, and
     * that hands nothing over, may be recorded as a graph: its sums still end when the group is
     * ended inside a recording (NCCL's kernels recorded in a graph outlive ncclCommAbort). */
    bool (*group_recordable)(struct backend_group *g, size_t n);
    /* The calling thread's current device, and setting it back (group_enter changes it on the
     * thread of a split's rank 0, the caller's); NULL where there is none. */
    int (*device_get)(void);
    void (*device_set)(int device);
    int (*devices)(void);
    /* Optional (NULL: no groups across processes): the bytes (*len, at most GROUP_ID_MAX) every
     * process's group_join takes, made by rank 0's (make) and handed to the others; a group of
     * world ranks of which this process holds rank, on device (group_enter takes that rank). */
    enum ox_status (*group_id)(bool make, void *id, size_t *len);
    struct backend_group *(*group_join)(int world, int rank, int device, const void *id);
};
#define GROUP_ID_MAX 256

extern const struct backend_ops backend_cpu_ops;
/* The first op a model's layers need that the table lacks (its name), or NULL (registry.c). */
const char *backend_missing_op(const struct backend_ops *b);

/* A group of world ranks in this process, each on its own thread running the CPU backend,
 * whose all_reduce calls meet (cpu_group.c); NULL with the error set when out of memory. */
struct backend_group *backend_cpu_group_create(int world);
void backend_cpu_group_free(struct backend_group *g);

/* The backends this build has (registry.c): the host's, and the device backend the build
 * includes (NULL when it has none) that models offload their layers to. */
const struct backend_ops *backend_host(void);
const struct backend_ops *backend_device(void);
/* The device the next model loads on: "cuda", "vulkan", "vulkan:N" or "none" (the CPU alone);
 * NULL: OX_DEVICE's, else CUDA where built. A name this build cannot run is refused. */
enum ox_status backend_choose_device(const char *spec);
/* What was chosen, else OX_DEVICE, else "" (into buf). */
const char *backend_device_spec(char *buf, size_t cap);

/* The CPU reference attention, and the dispatcher that prefers a SIMD version of it
 * (backend/cpu/attention_ref.c). */
void cpu_attention_ref(struct backend *b, const struct attn_args *a);
void cpu_attention(struct backend *b, const struct attn_args *a);

#endif
