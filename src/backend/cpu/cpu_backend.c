/* cpu_backend.c: the CPU backend as a whole: its op table, its per-context state (a thread pool
 * and scratch rows) and its load-time copies of weights (the kernels' interleaved layout). */
#include <stdlib.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/qmatmul.h"
#include "core/alloc.h"

static bool cpu_available(void) {
    return true;
}

/* Every type has a reference matmul and row lookup (dequantize and multiply); the SIMD
 * kernels take the types they have. */
static bool cpu_supports(enum backend_op op, enum ox_dtype type) {
    (void)op, (void)type;
    return true;
}

/* Matrices (one per tensor) whose type has an interleaved layout are copied into it; the rest
 * are read in the file's. */
static enum ox_status cpu_prepare_weight(struct backend_weights *bw, const struct backend_tensor *t,
                                         const void **copy) {
    (void)bw;
    *copy = t->n_mats == 1 && t->n_dims <= 2
                ? cpu_pack_rows(t->type, t->data, t->n_rows, t->n_cols, t->row_bytes)
                : NULL;
    return OX_OK;
}

static void cpu_release_weight(const void *copy) {
    cpu_pack_free((void *)copy);
}

/* The CPU's norm reads its weight as cheaply as the matrix would: nothing to fold. */
static enum ox_status cpu_fold_norm(struct backend_weights *bw, const float *g,
                                    const struct mat *mats, int count, bool *folded) {
    (void)bw, (void)g, (void)mats, (void)count;
    *folded = false;
    return OX_OK;
}

static float *floats(size_t n) {
    return ox_aligned_alloc(OX_ALIGN, (n ? n : 1) * sizeof(float));
}

/* Scratch rows wide enough for the widest of a matmul's rows and the attention's scores; the
 * rounded activations of a whole batch at that width. */
static enum ox_status cpu_init(struct backend *b, const struct backend_sizes *z) {
    struct cpu_state *s = calloc(1, sizeof *s);
    if (!s)
        return ox_fail(OX_ERR_OOM, "cpu: out of memory");
    b->impl = s;
    int64_t cols = z->scratch_cols > z->max_cols ? z->scratch_cols : z->max_cols;
    int n = z->n_threads > 0 ? z->n_threads : threadpool_default_threads();
    s->scratch_per_thread = cpu_scratch_floats(cols);
    s->scratch = floats((size_t)n * s->scratch_per_thread);
    s->x_rounded = floats((size_t)z->n_batch * (size_t)cols);
    s->x_packed = ox_aligned_alloc(OX_ALIGN, (size_t)cols * sizeof(float));
    if (!s->scratch || !s->x_rounded || !s->x_packed)
        return ox_fail(OX_ERR_OOM, "cpu: out of memory for %d threads' scratch", n);
    return threadpool_create(n, &s->pool);
}

static void cpu_release(struct backend *b) {
    struct cpu_state *s = cpu_of(b);
    if (!s)
        return;
    threadpool_free(s->pool);
    ox_aligned_free(s->scratch), ox_aligned_free(s->x_rounded), ox_aligned_free(s->x_packed);
    free(s);
    b->impl = NULL;
}

/* Host memory is the backend's: downloads are copies already. */
static void cpu_pin(struct backend *b, void *host, size_t bytes) {
    (void)b, (void)host, (void)bytes;
}

static void cpu_unpin(struct backend *b) {
    (void)b;
}

const struct backend_ops backend_cpu_ops = {
    .name = "cpu",
    .available = cpu_available,
    .supports = cpu_supports,
    .prepare_weight = cpu_prepare_weight,
    .release_weight = cpu_release_weight,
    .fold_norm = cpu_fold_norm,
    .init = cpu_init,
    .release = cpu_release,
    .pin = cpu_pin,
    .unpin = cpu_unpin,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_upload,
    .download = cpu_download,
    .matmul = cpu_matmul,
    .get_rows = cpu_get_rows,
    .rms_norm = cpu_rms_norm,
    .layer_norm = cpu_layer_norm,
    .rope = cpu_rope,
    .glu = cpu_glu,
    .delta_net = cpu_delta_net,
    .mamba2 = cpu_mamba2,
    .sigmoid_scale_rows = cpu_sigmoid_scale_rows,
    .gelu = cpu_gelu,
    .add = cpu_add,
    .add_row = cpu_add_row,
    .scale = cpu_scale,
    .softmax = cpu_softmax,
    .softcap = cpu_softcap,
    .attention = cpu_attention,
    .copy_rows = cpu_copy_rows,
    .axpy = cpu_axpy,
    .zero = cpu_zero,
    .cache_store = cpu_cache_store,
    .cache_load = cpu_cache_load,
    .matmul_multi = qmatmul_multi,
    .matmul_glu = qmatmul_glu,
    .all_reduce = cpu_all_reduce,
    .send = cpu_send,
    .recv = cpu_recv,
    .group_create = cpu_group_create,
    .group_enter = cpu_group_enter,
    .group_free = backend_cpu_group_free,
    .group_abort = cpu_group_abort,
    .devices = cpu_devices,
};
