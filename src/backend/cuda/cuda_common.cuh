/* cuda_common.cuh: what every CUDA op file shares: the backend's per-context state, error
 * recording, and launch helpers. */
#ifndef OX_BACKEND_CUDA_COMMON_CUH
#define OX_BACKEND_CUDA_COMMON_CUH

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdlib.h>

extern "C" {
#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "core/status.h"
}

/* The CUDA backend's state for one context (struct backend's impl). */
struct cuda_state {
    int device;
    int n_sm;            /* multiprocessors: how many blocks fill the chip */
    cudaStream_t stream; /* every op of the context runs on it, in order */
    cublasHandle_t blas; /* bound to stream, */
    void *blas_work;     /* with its workspace (CUDA_BLAS_WORK bytes) */
    float *scratch;      /* weights dequantized (to f16) for cuBLAS GEMMs, or the partial
                            sums of cuda_mmq.cu's column splits */
    size_t scratch_floats;
    void *xh; /* a batch of activations in f16 or bf16 for the GEMMs */
    size_t xh_halves;
    const float *xh_src; /* the rows xh holds (cleared as xq_src is: q, k and v, and every
                            slice's gate and up of a sliced FFN, read one x), */
    size_t xh_count;     /* how many floats, */
    bool xh_bf16;        /* and in which form */
    uint8_t *staging;    /* pinned host memory: uploads copy through it, so they are async */
    uint8_t *pinned;     /* a host range downloads may fill directly (the table's pin) */
    size_t pinned_size;
    size_t staging_size, staging_used; /* reset at each download, which waits for the copies */
    void *xq[2];           /* activations quantized to q8_1 (cvd_xq) for the integer matmuls, */
    int xq_cur;            /* in this one (a gate/up GEMV reads it and quantizes into the other) */
    size_t xq_blocks;      /* room in each for a matmul's rows of the widest matrix, up to
                              cuda_mmq_max_n() (the int8 tensor-core matmul's batches) */
    const float *xq_src;   /* the rows it holds (an op that may change them clears this), */
    int xq_n;              /* how many, */
    int64_t xq_cols;       /* and their width */
    uint8_t *xm;           /* the int8 tensor-core matmul's copy (cuda_mmq.cu: levels, then
                              scale words; xq_blocks groups), kept for the next matmul of */
    const float *xm_src;   /* these rows (cleared as xq_src is), */
    int xm_n;              /* how many, */
    int64_t xm_cols;       /* their width, */
    bool xm_q8k;           /* and its form (q8_K or q8_1) */
    float *attn_part;      /* decode attention split along the cells (cuda_attention.cu,
                              cuda_decode_attention.cu): CUDA_ATTN_PART floats for each */
    int *attn_count;       /* block's running max, sum and outputs, and per query and head the */
    int attn_blocks;       /* blocks done (back to 0 after); room for this many blocks, */
    size_t attn_floats;    /* and the floats attn_part holds (twice their partials: a batch in
                              one-token order keeps a single query's splits for each query) */
    cudaGraphExec_t graph; /* the recorded decode step, and its key */
    uint64_t graph_key;
    uint64_t probe_key; /* a step of more than CUDA_Q8_MAX_N tokens is first run as it comes */
    bool capturing;
    bool pdl;           /* the GPU launches kernels early (cuda_launch_early): Hopper on */
    bool early;         /* and the decode GEMVs let the next kernel launch as they start */
    enum ox_status err; /* the first failure since the last download, which reports it */
    char msg[256];
};

/* cuBLAS's workspace, the handle's own, so that a recorded step's GEMMs allocate nothing (what
 * its guide asks for on Hopper; a default workspace may be allocated as a graph records). */
constexpr size_t CUDA_BLAS_WORK = (size_t)32 << 20;

/* Floats a split of the decode attention leaves for the block combining them: its running
 * maximum, its sum and up to 512 outputs. */
constexpr int CUDA_ATTN_PART = 514;

/* A measuring knob from the environment: name's integer, clamped to [lo, hi], or def when unset. */
static inline int cuda_env_int(const char *name, int def, int lo, int hi) {
    const char *e = getenv(name);
    if (!e || !*e)
        return def;
    const long v = strtol(e, nullptr, 10);
    return v < lo ? lo : v > hi ? hi : (int)v;
}

/* Rows whose quantized or halved copies (xq_src's, xm_src's, xh_src's) may no longer hold:
 * forget them. */
static inline void cuda_forget_xq(cuda_state *s) {
    s->xq_src = nullptr;
    s->xm_src = nullptr;
    s->xh_src = nullptr;
}

/* Batches up to this many tokens are decode steps: recorded as graphs, their RoPE and cache
 * stores fused, MoE experts by (token, expert) pair in the integer GEMV (cuda_gemv_q8.cu). */
constexpr int CUDA_Q8_MAX_N = 8;

/* A step of n tokens in one-token order (struct backend's one_token_order): every row comes out
 * as a step of that token alone computes it, which the kernels keep for the steps a graph
 * records (up to CUDA_Q8_MAX_N tokens): the GEMV's lanes sum a token's products in the order
 * they do for one, the types and shapes it does not take go a token at a time, the norm stays
 * fused, and each query's attention splits its cells as a step of it alone would. */
static inline bool cuda_one_token(const struct backend *b, int n) {
    return b->one_token_order && n > 1 && n <= CUDA_Q8_MAX_N;
}
/* Dense matmuls of up to this many tokens take the GEMV, more the int8 tensor-core matmul, which
 * costs about the same from 2 tokens to 16 (it is bound by unpacking the weights) while the
 * GEMV's costs grow with the tokens: H100, us, 14336 x 4096 q4_K, GEMV / tensor cores: 4 tokens
 * 33.6 / 34.5, 8 52.4 / 34.8; the 8B Q4_K_M decoded 862 t/s in steps of 8 sequences by the GEMV,
 * 1300 by the tensor cores, 771 / 656 in steps of 4. */
constexpr int CUDA_GEMV_MAX_N = 4;
/* Larger ones up to this many take the int8 tensor-core matmul (cuda_mmq.cu); beyond, the
 * weights are dequantized for cuBLAS, whose f16 GEMM wins there. H100, us per matmul, one
 * against the other (bench_cuda_matmul; OX_CUDA_MMQ_MAX_N overrides this): at 128 tokens 4096 x
 * 14336 q4_K 111 vs 158, 14336 x 4096 q6_K 154 vs 175, 4096 x 4096 q4_0 40 vs 55, 128256 x
 * 2048 q6_K 536 vs 605; at 256 cuBLAS wins most shapes (14336 x 4096 q4_K 242 vs 166), and
 * `oxidize bench` agrees: 128 sequences of the 8B Q4_K_M 5.9k against 5.2k tokens/s, 256 6.6k
 * against 8.2k. Up to 192 the int8 kernel's 64 x 192 tiles win: the 8B Q4_K_M decoded 6.37k /
 * 7.18k t/s in steps of 160 / 192 sequences against 6.01k / 6.47k with cuBLAS for its FFN and
 * output matrices, but with two such tiles 5.69k / 6.17k against 7.41k / 7.97k at 224 / 256. */
constexpr int CUDA_MMQ_MAX_N = 192;
/* Matrices of fewer weights than this keep the int8 kernel up to CUDA_MMQ_SMALL_MAX_N tokens:
 * there cuBLAS's GEMM, too small to fill the GPU, no longer makes up for dequantizing the
 * weights in chunks (H100, t/s, the 1B Q4_0 decoding 160 / 256 sequences: 15.9k / 21.5k against
 * 12.8-14.2k / 18.7-19.7k with cuBLAS past 128 tokens; its FFN goes by slices of 4096 x 2048
 * there). The 8B's 4096 x 4096 ones come out even (8.0k t/s at 256 either way) and its FFN's
 * and output matrices keep cuBLAS (on the int8 kernel too: 7.2k). */
constexpr int64_t CUDA_MMQ_SMALL_WEIGHTS = (int64_t)24 << 20;
constexpr int CUDA_MMQ_SMALL_MAX_N = 256;

/* Where a query's cells end in one-token order (cuda_one_token): after its sequence's last cell
 * at or before its own position, which is where a step of it alone found its sequence ending
 * (the batch's later tokens not stored yet). Any cell past that one is another sequence's or
 * later in this one, which a causal query never sees, so the cut is exact whatever the cells
 * hold. The search looks back four recorded steps' worth of cells; past that, end stands (the
 * same result, the cells split another way). */
__device__ __forceinline__ int cuda_one_token_end(const int32_t *cell_pos, const uint64_t *cell_seq,
                                                  int end, int32_t qp, int32_t qs) {
    for (int c = end - 1; c >= 0 && c >= end - 4 * CUDA_Q8_MAX_N; c--) {
        const int32_t p = cell_pos[c];
        if (p >= 0 && p <= qp && (cell_seq[(size_t)c * SEQ_WORDS + qs / 64] >> (qs % 64) & 1))
            return c + 1;
    }
    return end;
}

/* The GLU activation of the gate (enum glu_kind): SiLU, sigmoid, or ggml's tanh GELU computed in
 * float (the CPU reads it from an f16 table). */
__device__ __forceinline__ float cuda_glu_act(int kind, float g) {
    if (kind == GLU_SILU)
        return g / (1.0f + expf(-g));
    if (kind == GLU_SIGMOID)
        return 1.0f / (1.0f + expf(-g));
    const float k = 0.7978845608028654f, c = 0.044715f;
    return 0.5f * g * (1.0f + tanhf(k * g * (1.0f + c * g * g)));
}

/* Sum of one value per thread across the block (whole warps, at most 1024 threads); every
 * thread gets it. shared: 32 floats. */
__device__ __forceinline__ float cuda_block_sum(float v, float *shared) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();
    if (lane == 0)
        shared[warp] = v;
    __syncthreads();
    v = lane < (int)(blockDim.x / 32) ? shared[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* A GLU's output from its gate and up values (GLU_SWIGLU_OAI: ggml_swiglu_oai, alpha 1.702,
 * limit 7). */
__device__ __forceinline__ float cuda_glu_value(int kind, float g, float u) {
    if (kind == GLU_SWIGLU_OAI) {
        const float x = fminf(g, 7.0f), v = fminf(fmaxf(u, -7.0f), 7.0f);
        return x / (1.0f + expf(1.702f * (-x))) * (v + 1.0f);
    }
    return cuda_glu_act(kind, g) * u;
}

/* ggml's block_q8_0 (x = d * q), as the KV cache may hold it. */
struct kv_q8_0 {
    __half d;
    int8_t q[32];
};
static_assert(sizeof(kv_q8_0) == 34, "q8_0 layout");

/* Element i of row r of a KV cache of type T (OX_DTYPE_F32, F16 or Q8_0), rows row_bytes
 * apart: what attention reads in place of a float copy of the cache. */
template <int T>
__device__ __forceinline__ float kv_elem(const uint8_t *base, size_t row_bytes, size_t r, int i) {
    const uint8_t *row = base + r * row_bytes;
    if constexpr (T == OX_DTYPE_F16) {
        return __half2float(((const __half *)row)[i]);
    } else if constexpr (T == OX_DTYPE_Q8_0) {
        const kv_q8_0 *blk = (const kv_q8_0 *)row + i / 32;
        return __half2float(blk->d) * (float)blk->q[i % 32];
    } else {
        return ((const float *)row)[i];
    }
}

/* Element i (f32, f16) or 32-element block i (q8_0) of the cache row at row, from the floats
 * xr of that row, rounded as the CPU stores them (q8_0: amax / 127 as the scale, as ggml's
 * reference quantizer). */
__device__ __forceinline__ void kv_put(int type, uint8_t *row, const float *xr, int i) {
    if (type == OX_DTYPE_F32) {
        ((float *)row)[i] = xr[i];
    } else if (type == OX_DTYPE_F16) {
        ((__half *)row)[i] = __float2half_rn(xr[i]);
    } else {
        kv_q8_0 *blk = (kv_q8_0 *)row + i;
        float amax = 0.0f;
        for (int k = 0; k < 32; k++)
            amax = fmaxf(amax, fabsf(xr[i * 32 + k]));
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        blk->d = __float2half_rn(d);
        for (int k = 0; k < 32; k++)
            blk->q[k] = (int8_t)roundf(xr[i * 32 + k] * id);
    }
}

/* A head's sink joins its softmax last, as ggml's (and the CPU's) does: the running maximum m
 * and sum move to take it; returns the factor the accumulated values take with them. */
__device__ __forceinline__ float cuda_join_sink(const float *sinks, int h, float *m, float *sum) {
    if (!sinks)
        return 1.0f;
    float s = sinks[h], m_new = fmaxf(*m, s);
    float alpha = *m == -INFINITY ? 0.0f : expf(*m - m_new);
    *sum = *sum * alpha + expf(s - m_new);
    *m = m_new;
    return alpha;
}

static inline cuda_state *cuda_of(struct backend *b) {
    return (cuda_state *)b->impl;
}

/* Record a failed CUDA call (the first one wins; download turns it into ox_last_error). */
void cuda_note(struct backend *b, cudaError_t e, const char *what);
void cuda_note_blas(struct backend *b, cublasStatus_t e, const char *what);
/* After a kernel launch: a bad configuration shows up here. */
#define CUDA_LAUNCHED(b, what) cuda_note((b), cudaGetLastError(), (what))
/* A failure that a download in the middle of a batch returned (and so cleared), noted again for
 * the batch's last download to report. */
void cuda_note_again(struct backend *b, const char *msg);

/* Programmatic dependent launch (Hopper): a kernel launched with cuda_launch_early(true, ...)
 * may start while the kernel before it on the stream finishes, so its launch and any prologue
 * that reads nothing earlier kernels wrote (weights) hide in that kernel's tail. Such a kernel
 * calls cuda_wait_previous() before touching anything else, and cuda_let_next_start() where the
 * next may come (first, or once its main work is done): the next launches when all its blocks
 * have called it. With false (or before Hopper) both are no-ops and launches keep plain stream
 * order. */
__device__ __forceinline__ void cuda_let_next_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void cuda_wait_previous() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

template <typename... Params, typename... Args>
static inline cudaError_t cuda_launch_early(bool early, void (*kernel)(Params...), dim3 grid,
                                            dim3 block, size_t smem, cudaStream_t stream,
                                            Args... args) {
    cudaLaunchAttribute attr = {};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = stream;
    cfg.attrs = &attr, cfg.numAttrs = early ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, kernel, ((Params)args)...);
}

static inline unsigned cuda_blocks(size_t n, unsigned threads) {
    return (unsigned)((n + threads - 1) / threads);
}

#endif
