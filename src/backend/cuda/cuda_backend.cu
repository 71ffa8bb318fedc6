/* cuda_backend.cu: the CUDA backend's op table, its per-context state (stream, cuBLAS,
 * scratch), device memory and host copies, and the device copies of a model's weights. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_ops.cuh"
/* after: cuda_ops.cuh declares the C headers with C linkage */
#include "backend/cuda/cuda_backend.h" /* the group functions the table names */

void cuda_note(struct backend *b, cudaError_t e, const char *what) {
    cuda_state *s = cuda_of(b);
    if (e == cudaSuccess || s->err != OX_OK)
        return;
    s->err = OX_ERR_DEVICE;
    snprintf(s->msg, sizeof s->msg, "cuda: %s: %s", what, cudaGetErrorString(e));
}

void cuda_note_blas(struct backend *b, cublasStatus_t e, const char *what) {
    cuda_state *s = cuda_of(b);
    if (e == CUBLAS_STATUS_SUCCESS || s->err != OX_OK)
        return;
    s->err = OX_ERR_DEVICE;
    snprintf(s->msg, sizeof s->msg, "cublas: %s: %s", what, cublasGetStatusString(e));
}

void cuda_note_again(struct backend *b, const char *msg) {
    cuda_state *s = cuda_of(b);
    if (s->err != OX_OK)
        return;
    s->err = OX_ERR_DEVICE;
    snprintf(s->msg, sizeof s->msg, "%s", msg);
}

static void *cu_alloc(struct backend *b, size_t bytes) {
    (void)b;
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        cudaGetLastError(); /* an allocation failure is not sticky: clear it */
        return NULL;
    }
    return p;
}

static void cu_free(struct backend *b, void *p) {
    (void)b;
    cudaFree(p);
}

/* Through the pinned staging buffer when it has room (a truly asynchronous copy, filled here
 * and not reused before the next download waits for it), else from pageable memory, which
 * returns once the bytes are staged by the driver. Either way the host buffer (even a stack
 * variable) may change right after. */
static void cu_upload(struct backend *b, void *dst, const void *host, size_t bytes) {
    cuda_state *s = cuda_of(b);
    if (!bytes)
        return;
    const void *src = host;
    if (s->staging && s->staging_size - s->staging_used >= bytes) {
        src = memcpy(s->staging + s->staging_used, host, bytes);
        s->staging_used += (bytes + 255) / 256 * 256;
        if (s->staging_used > s->staging_size)
            s->staging_used = s->staging_size;
    }
    cuda_note(b, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s->stream), "upload");
}

/* Through the pinned staging buffer when it is big enough (a DMA at full speed, then a host
 * copy), else straight to pageable memory. The uploads that staged through it come earlier on
 * the same stream, so they have read it before this copy writes it. */
static enum ox_status cu_download(struct backend *b, void *host, const void *src, size_t bytes) {
    cuda_state *s = cuda_of(b);
    const uint8_t *h = (const uint8_t *)host;
    bool direct = s->pinned && h >= s->pinned && h - s->pinned <= (ptrdiff_t)s->pinned_size &&
                  bytes <= s->pinned_size - (size_t)(h - s->pinned);
    bool staged = !direct && bytes && s->staging && bytes <= s->staging_size;
    if (bytes)
        cuda_note(b,
                  cudaMemcpyAsync(staged ? s->staging : host, src, bytes, cudaMemcpyDeviceToHost,
                                  s->stream),
                  "download");
    cuda_note(b, cudaStreamSynchronize(s->stream), "running the batch");
    if (staged && s->err == OX_OK)
        memcpy(host, s->staging, bytes);
    s->staging_used = 0;
    if (s->err == OX_OK)
        return OX_OK;
    enum ox_status st = s->err;
    s->err = OX_OK;
    return ox_fail(st, "%s", s->msg);
}

/* A decode step is recorded once per key (batch size, cells seen) and replayed: one launch
 * instead of a few hundred. A new key re-records; the executable graph is updated in place
 * when only parameters changed (the usual case: more cells seen). */
static bool cu_graph_begin(struct backend *b, uint64_t key) {
    cuda_state *s = cuda_of(b);
    cuda_forget_xq(s); /* a replay skips the ops that would keep them current */
    if (s->err != OX_OK)
        return false;
    if (s->graph && s->graph_key == key) {
        cuda_note(b, cudaGraphLaunch(s->graph, s->stream), "graph launch");
        return true;
    }
    /* many sequences' steps: recorded from their second time of a size, after a first that
     * runs as it comes (cuBLAS picks its GEMMs' kernels then, not inside a recording) */
    if (key > CUDA_Q8_MAX_N && s->probe_key != key) {
        s->probe_key = key;
        return false;
    }
    cudaError_t e = cudaStreamBeginCapture(s->stream, cudaStreamCaptureModeThreadLocal);
    cuda_note(b, e, "graph capture");
    s->capturing = e == cudaSuccess;
    s->graph_key = key;
    return false;
}

static void cu_graph_end(struct backend *b) {
    cuda_state *s = cuda_of(b);
    if (!s->capturing)
        return;
    s->capturing = false;
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(s->stream, &g);
    if (e == cudaSuccess && s->graph) {
        cudaGraphExecUpdateResultInfo info;
        if (cudaGraphExecUpdate(s->graph, g, &info) != cudaSuccess) {
            cudaGetLastError();
            cudaGraphExecDestroy(s->graph);
            s->graph = NULL;
        }
    }
    if (e == cudaSuccess && !s->graph)
        e = cudaGraphInstantiate(&s->graph, g, 0);
    if (e == cudaSuccess)
        e = cudaGraphLaunch(s->graph, s->stream);
    if (g)
        cudaGraphDestroy(g);
    if (e != cudaSuccess && s->graph) {
        cudaGraphExecDestroy(s->graph);
        s->graph = NULL;
    }
    cuda_note(b, e, "recording the decode step");
}

/* Every op that writes device memory may change rows whose q8_1 copy the next matmul would
 * reuse (cuda_gemv_q8.cu): the table calls those ops through clears_xq, which forgets the copy
 * first. The norm and the matmuls keep it current themselves. */
template <auto F> struct clears_xq;
template <typename... A, void (*F)(struct backend *, A...)> struct clears_xq<F> {
    static void op(struct backend *b, A... a) {
        cuda_forget_xq(cuda_of(b));
        F(b, a...);
    }
};

static bool cu_available(void) {
    int n = 0;
    bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
    cudaGetLastError(); /* "no device" is an answer, not an error to keep */
    return ok;
}

/* Whether a GEMM over the tensor's device copy (rows row_bytes apart) needs it dequantized to
 * f16 first (cuda_matmul.cu's gemm): matrices of a quantized type, or whose rows are not
 * 16-byte aligned. */
static bool needs_dequant(const struct backend_tensor *t, size_t row_bytes) {
    bool plain = t->type == OX_DTYPE_F32 || t->type == OX_DTYPE_F16 || t->type == OX_DTYPE_BF16;
    return t->n_dims >= 2 && (!plain || row_bytes % 16 != 0);
}

/* Every tensor of the layers the GPU runs is copied up as it is, synchronously. */
static enum ox_status cu_prepare_weight(struct backend_weights *bw, const struct backend_tensor *t,
                                        const void **copy) {
    void *dev = NULL;
    /* a shard's column slice (model/shard.c) has rows apart in the file (an expert's matrices
     * too, whose rows stay evenly spaced from one to the next); its copy's follow each other,
     * as the forward pass reads device copies (as_mat, slice_mat) */
    const size_t dense =
        (size_t)(t->n_cols / ox_dtype_block_size(t->type)) * (size_t)ox_dtype_type_size(t->type);
    const bool strided = t->row_bytes != dense;
    const size_t rows = (size_t)t->n_rows * (size_t)t->n_mats;
    size_t bytes = strided ? dense * rows : t->n_bytes;
    *copy = NULL;
    cudaError_t e = cudaMalloc(&dev, bytes ? bytes : 1);
    if (e == cudaSuccess && strided)
        e = cudaMemcpy2D(dev, dense, t->data, t->row_bytes, dense, rows, cudaMemcpyHostToDevice);
    else if (e == cudaSuccess)
        e = cudaMemcpy(dev, t->data, bytes, cudaMemcpyHostToDevice);
    if (e == cudaSuccess) {
        *copy = dev;
        bw->bytes += bytes;
        bw->converts |= needs_dequant(t, dense); /* a slice's copy: its rows packed */
        return OX_OK;
    }
    cudaGetLastError();
    cudaFree(dev);
    return ox_fail(e == cudaErrorMemoryAllocation ? OX_ERR_OOM : OX_ERR_DEVICE,
                   "cuda: cannot upload %zu MiB of weights: %s", bytes >> 20,
                   cudaGetErrorString(e));
}

static void cu_release_weight(const void *dev) {
    cudaFree((void *)dev);
}

/* What a context's CUDA state is sized for. Decode kernels start during the previous one's
 * tail (programmatic dependent launch) where the GPU can; early_launch (big models) lets each
 * integer GEMV's successor launch as the GEMV starts rather than after its dot products. */
struct cuda_sizes {
    uint32_t n_batch;     /* rows of a batch */
    int64_t max_cols;     /* the widest row a matmul may see */
    int64_t batch_cols;   /* the widest of a batch of n_batch rows (n x cols <= n_batch x this) */
    size_t dequant_bytes; /* room for weights dequantized for cuBLAS: 0 when every matrix is
                             read as it is, else dequant_room's */
    bool early_launch;
};

static enum ox_status cu_init_sized(struct backend *b, const struct cuda_sizes *z) {
    cuda_state *s = (cuda_state *)calloc(1, sizeof *s);
    if (!s)
        return ox_fail(OX_ERR_OOM, "cuda: out of host memory");
    s->early = z->early_launch;
    b->impl = s;
    int major = 0;
    cudaError_t e = cudaGetDevice(&s->device);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, s->device);
    s->pdl = major >= 9;
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&s->n_sm, cudaDevAttrMultiProcessorCount, s->device);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cuda_matmul_init();
    if (e == cudaSuccess)
        e = cuda_gemv_q8_init();
    if (e == cudaSuccess)
        e = cuda_mmq_init();
    if (e == cudaSuccess)
        e = cuda_flash_attention_init();
    s->scratch_floats = z->dequant_bytes / sizeof(float);
    s->xh_halves = (size_t)z->n_batch * (size_t)z->batch_cols;
    if (e == cudaSuccess && s->scratch_floats)
        e = cudaMalloc(&s->scratch, s->scratch_floats * sizeof(float));
    if (e == cudaSuccess)
        e = cudaMalloc(&s->xh, s->xh_halves * 2);
    size_t attn_bytes = 0;
    if (e == cudaSuccess)
        e = cuda_attention_alloc(s, &attn_bytes);
    /* the tensor-core matmuls quantize their batches there too */
    size_t q8_rows = (size_t)cuda_mmq_max_n() < z->n_batch ? (size_t)cuda_mmq_max_n() : z->n_batch;
    q8_rows = q8_rows > (size_t)CUDA_Q8_MAX_N ? q8_rows : (size_t)CUDA_Q8_MAX_N;
    s->xq_blocks = q8_rows * (size_t)(z->max_cols / 32);
    for (int i = 0; i < 2 && e == cudaSuccess; i++)
        e = cudaMalloc(&s->xq[i], s->xq_blocks * 40 + 1); /* cvd_xq */
    if (e == cudaSuccess) /* 32 levels and at most 2 scale words a group */
        e = cudaMalloc(&s->xm, s->xq_blocks * 40 + 1);
    b->own_bytes =
        s->scratch_floats * sizeof(float) + s->xh_halves * 2 + 3 * s->xq_blocks * 40 + attn_bytes;
    s->staging_size = (size_t)1 << 22; /* batch indices and cell lists: far less per batch */
    if (e == cudaSuccess)
        e = cudaMallocHost(&s->staging, s->staging_size);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return ox_fail(OX_ERR_DEVICE, "cuda: cannot set up the context: %s", cudaGetErrorString(e));
    }
    if (cudaMalloc(&s->blas_work, CUDA_BLAS_WORK) != cudaSuccess) {
        cudaGetLastError();
        return ox_fail(OX_ERR_DEVICE, "cublas: no room for its workspace");
    }
    b->own_bytes += CUDA_BLAS_WORK;
    cublasStatus_t be = cublasCreate(&s->blas);
    if (be == CUBLAS_STATUS_SUCCESS) /* the stream first: setting it resets the workspace */
        be = cublasSetStream(s->blas, s->stream);
    if (be == CUBLAS_STATUS_SUCCESS)
        be = cublasSetWorkspace(s->blas, s->blas_work, CUDA_BLAS_WORK);
    if (be != CUBLAS_STATUS_SUCCESS)
        return ox_fail(OX_ERR_DEVICE, "cublas: cannot start: %s", cublasGetStatusString(be));
    return OX_OK;
}

static void cu_unpin(struct backend *b) {
    cuda_state *s = cuda_of(b);
    if (s->pinned)
        cudaHostUnregister(s->pinned);
    s->pinned = nullptr, s->pinned_size = 0;
}

static void cu_pin(struct backend *b, void *host, size_t bytes) {
    cuda_state *s = cuda_of(b);
    cu_unpin(b);
    if (bytes && cudaHostRegister(host, bytes, cudaHostRegisterDefault) == cudaSuccess)
        s->pinned = (uint8_t *)host, s->pinned_size = bytes;
    else
        cudaGetLastError(); /* not an error to keep: downloads stage instead */
}

/* Room for weights dequantized for cuBLAS: 2048 rows of the widest batch row, and at least 32
 * MiB, so a small model's output matrix is not dequantized and multiplied in a hundred slices
 * of 1024 rows (the 1B's, 128256 x 2048, in 16 of 8192: H100, 1B Q4_0 decoding 256 sequences
 * 21.0k -> 25.1k t/s, Q8_0 19.6k -> 24.2k); OX_CUDA_DEQUANT_MB sets the floor (measuring). The
 * 8B's FFN then goes in two chunks, not four (H100, A/B in one lease: Q4_K_M pp512 14.8k / 14.9k
 * -> 15.4k / 15.3k t/s, 160 / 224 / 256 sequences 7.3k / 8.0k / 8.7k -> 7.5k / 8.4k / 9.2k; the
 * 1B's within noise: its room stays at the floor). */
static size_t dequant_room(int64_t batch_cols) {
    const size_t floor_mb = (size_t)cuda_env_int("OX_CUDA_DEQUANT_MB", 32, 0, 1 << 16);
    const size_t rows = (size_t)batch_cols * 4096, least = floor_mb << 20;
    return rows > least ? rows : least;
}

/* The CUDA policy a context's sizes come from: big models' decode GEMVs let the next kernel
 * launch as they start (cuda_gemv_q8.cu), from 4 GiB of weights on (OX_CUDA_EARLY=0 or 1
 * overrides); the matmuls' widths size their buffers; weights cuBLAS cannot read as they are
 * get dequant_room to be dequantized in chunks. */
static enum ox_status cu_init(struct backend *b, const struct backend_sizes *z) {
    const char *early = getenv("OX_CUDA_EARLY");
    uint64_t bytes = z->weights ? z->weights->bytes : 0;
    bool converts = !z->weights || z->weights->converts;
    struct cuda_sizes cz = {.n_batch = z->n_batch,
                            .max_cols = z->max_cols,
                            .batch_cols = z->batch_cols,
                            .dequant_bytes = converts ? dequant_room(z->batch_cols) : 0,
                            .early_launch =
                                early ? atoi(early) != 0 : bytes >= ((uint64_t)4 << 30)};
    return cu_init_sized(b, &cz);
}

static void cu_release(struct backend *b) {
    cuda_state *s = cuda_of(b);
    if (!s)
        return;
    if (s->stream)
        cudaStreamSynchronize(s->stream);
    if (s->blas)
        cublasDestroy(s->blas);
    cudaFree(s->blas_work);
    cudaFree(s->scratch);
    cudaFree(s->xh);
    cudaFree(s->xq[0]);
    cudaFree(s->xq[1]);
    cudaFree(s->xm);
    cudaFree(s->attn_part);
    cudaFree(s->attn_count);
    cudaFreeHost(s->staging);
    if (s->graph)
        cudaGraphExecDestroy(s->graph);
    if (s->stream)
        cudaStreamDestroy(s->stream);
    free(s);
    b->impl = NULL;
}

extern "C" {

const struct backend_ops backend_cuda_ops = {
    .name = "cuda",
    .device = true,
    .available = cu_available,
    .supports = cuda_supports,
    .prepare_weight = cu_prepare_weight,
    .release_weight = cu_release_weight,
    .fold_norm = cuda_fold_norm,
    .init = cu_init,
    .release = cu_release,
    .pin = cu_pin,
    .unpin = cu_unpin,
    .alloc = cu_alloc,
    .free = cu_free,
    .upload = clears_xq<cu_upload>::op,
    .download = cu_download,
    .matmul = cuda_matmul,
    .get_rows = clears_xq<cuda_get_rows>::op,
    .rms_norm = cuda_rms_norm,
    .layer_norm = clears_xq<cuda_layer_norm>::op,
    .rope = clears_xq<cuda_rope>::op,
    .glu = clears_xq<cuda_glu>::op,
    .gelu = clears_xq<cuda_gelu>::op,
    .add = clears_xq<cuda_add>::op,
    .add_row = clears_xq<cuda_add_row>::op,
    .scale = clears_xq<cuda_scale>::op,
    .softmax = clears_xq<cuda_softmax>::op,
    .softcap = clears_xq<cuda_softcap>::op,
    .attention = clears_xq<cuda_attention>::op,
    .sigmoid_scale_rows = clears_xq<cuda_sigmoid_scale_rows>::op,
    .delta_net = clears_xq<cuda_delta_net>::op,
    .mamba2 = clears_xq<cuda_mamba2>::op,
    .copy_rows = clears_xq<cuda_copy_rows>::op,
    .axpy = clears_xq<cuda_axpy>::op,
    .zero = clears_xq<cuda_zero>::op,
    .cache_store = clears_xq<cuda_cache_store>::op,
    .cache_load = clears_xq<cuda_cache_load>::op,
    .matmul_add = cuda_matmul_add,
    .matmul_multi = cuda_matmul_multi,
    .matmul_glu = cuda_matmul_glu,
    .rope_store = cuda_rope_store,
    .moe_ffn = cuda_moe_ffn,
    .graph_begin = cu_graph_begin,
    .graph_end = cu_graph_end,
    .graph_max_tokens = CUDA_Q8_MAX_N,      /* the attention that reads the cells in use from device
                                             * memory takes them (cuda_attention.cu) */
    .graph_max_seqs = CUDA_MMQ_SMALL_MAX_N, /* as many as the int8 matmul takes of any matrix
                                             * (cuBLAS's GEMMs, past it or for f16 weights,
                                             * are recorded too: cu_graph_begin's probe) */
    .graph_long_cells = 0,                  /* its recordings the same at any length */
    .attention_reads_cache = true,
    .all_reduce = cuda_all_reduce,
    .send = cuda_send,
    .recv = cuda_recv,
    .group_create = backend_cuda_group_create,
    .group_enter = backend_cuda_group_enter,
    .group_free = backend_cuda_group_free,
    .group_abort = backend_cuda_group_abort,
    .group_recordable = backend_cuda_group_recordable,
    .device_get = cuda_device_get,
    .device_set = cuda_device_set,
    .devices = cuda_devices,
    .group_id = backend_cuda_group_id,
    .group_join = backend_cuda_group_join,
};

} /* extern "C" */
