/* vk_matmul.c: products with a model's weights and rows looked up from them, for the weight types
 * the Vulkan backend has shaders for (f32, f16), and the weights' copies on the device. */
#include <pthread.h>
#include <stdlib.h>

#include "backend/vulkan/vk_ops.h"
#include "core/status.h"

bool vk_supports(enum backend_op op, enum ox_dtype type) {
    (void)op;
    return type == OX_DTYPE_F32 || type == OX_DTYPE_F16;
}

struct matmul_args {
    uint64_t w, x, y;
    uint32_t rows, cols, n, row_elems;
};

void vk_matmul(struct backend *b, const struct mat *w, const float *x, float *y, int n) {
    if (n <= 0 || w->n_rows <= 0)
        return;
    if (!vk_supports(BACKEND_OP_MATMUL, w->type)) {
        vk_note(vk_of(b), VK_ERROR_FORMAT_NOT_SUPPORTED, "matmul: a weight type without a shader");
        return;
    }
    bool half = w->type == OX_DTYPE_F16;
    struct matmul_args args = {vk_addr(w->data),
                               vk_addr(x),
                               vk_addr(y),
                               (uint32_t)w->n_rows,
                               (uint32_t)w->n_cols,
                               0,
                               (uint32_t)(w->row_bytes / (half ? 2 : 4))};
    for (int r0 = 0; r0 < w->n_rows; r0 += 65535) /* a workgroup a row */
        for (int t0 = 0; t0 < n; t0 += 8 * 65535) {
            struct matmul_args a = args;
            int rows = w->n_rows - r0 < 65535 ? (int)w->n_rows - r0 : 65535;
            int toks = n - t0 < 8 * 65535 ? n - t0 : 8 * 65535;
            a.w += (uint64_t)r0 * w->row_bytes;
            a.x += (uint64_t)t0 * (uint64_t)w->n_cols * sizeof(float);
            a.y += ((uint64_t)t0 * (uint64_t)w->n_rows + (uint64_t)r0) * sizeof(float);
            a.n = (uint32_t)toks;
            vk_dispatch(vk_of(b), half ? VK_SHADER_matmul_f16 : VK_SHADER_matmul_f32, &a, sizeof a,
                        (uint32_t)rows, (uint32_t)(toks + 7) / 8, 1);
        }
}

struct get_rows_args {
    uint64_t w, ids, y;
    uint32_t cols, n, row_elems;
};

void vk_get_rows(struct backend *b, const struct mat *w, const int32_t *ids, float *y, int n) {
    if (n <= 0)
        return;
    if (!vk_supports(BACKEND_OP_GET_ROWS, w->type)) {
        vk_note(vk_of(b), VK_ERROR_FORMAT_NOT_SUPPORTED,
                "get_rows: a weight type without a shader");
        return;
    }
    bool half = w->type == OX_DTYPE_F16;
    struct get_rows_args args = {vk_addr(w->data), vk_addr(ids),
                                 vk_addr(y),       (uint32_t)w->n_cols,
                                 (uint32_t)n,      (uint32_t)(w->row_bytes / (half ? 2 : 4))};
    vk_dispatch(vk_of(b), half ? VK_SHADER_get_rows_f16 : VK_SHADER_get_rows_f32, &args,
                sizeof args, vk_groups((size_t)n * (size_t)w->n_cols), 1, 1);
}

/* The loader's stream: weights go up through it, one at a time (a model loads on one thread,
 * but two models may load at once). */
static struct backend loader;
static pthread_mutex_t loader_lock = PTHREAD_MUTEX_INITIALIZER;

enum ox_status vk_prepare_weight(struct backend_weights *bw, const struct backend_tensor *t,
                                 const void **copy) {
    *copy = NULL;
    struct vk_device *d = vk_device_get();
    if (!d)
        return OX_ERR_DEVICE;
    void *p = vk_mem_alloc(d, t->n_bytes);
    if (!p)
        return ox_fail(OX_ERR_OOM, "vulkan: no device memory for a weight of %zu bytes",
                       t->n_bytes);
    pthread_mutex_lock(&loader_lock);
    enum ox_status st = loader.impl ? OX_OK : vk_init(&loader, NULL);
    if (st == OX_OK) {
        vk_upload(&loader, p, t->data, t->n_bytes);
        st = vk_download(&loader, NULL, NULL, 0);
    }
    pthread_mutex_unlock(&loader_lock);
    if (st != OX_OK) {
        vk_mem_free(d, p);
        return st;
    }
    bw->bytes += t->n_bytes;
    *copy = p;
    return OX_OK;
}

void vk_release_weight(const void *copy) {
    struct vk_device *d = copy ? vk_device_get() : NULL;
    if (d)
        vk_mem_free(d, copy);
}
