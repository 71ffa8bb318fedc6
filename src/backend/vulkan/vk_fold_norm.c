/* vk_fold_norm.c: backend.h's fold_norm for the Vulkan backend: an RMSNorm's weights multiplied
 * into the f16 matrices that read its output, once at load (fold_norm.comp), so that a decode
 * step's product of one token takes the norm in (matvec.comp's NORM_IN: the floats before the
 * norm, their sum of squares beside the dot products) and no op runs between it and the product
 * before. The other products of those matrices (prompts, several sequences) take the norm
 * without its weights, as the model then asks for it. */
#include <stdatomic.h>

#include "backend/vulkan/vk_backend.h"
#include "backend/vulkan/vk_internal.h"
#include "backend/vulkan/vk_ops.h"

/* The products that took their norm in (vk_backend_norm_ins_taken), over every context. */
static _Atomic uint64_t norms_taken;

uint64_t vk_backend_norm_ins_taken(void) {
    return norms_taken;
}

/* (vk_internal.h) dim and eps alone: the product reads no more of the block */
uint64_t vk_norm_in_block(struct backend *b, const float *x, const struct norm_in *norm, int n,
                          int64_t cols) {
    if (!vk_of(b)->d->norm_in || norm->w || n != 1 || vk_addr(x) % 16 || cols % 32)
        return 0;
    struct norm_block want = {.dim = (uint32_t)cols, .eps = norm->eps};
    uint64_t block = vk_block_address(b, &want, sizeof want);
    norms_taken += block != 0;
    return block;
}

struct fold_args {
    uint64_t w, g, flag;
    uint32_t rows, cols, row_halves, check;
};

/* Whether the matrices may take the weights: f16 in 16-byte rows, as matvec.comp streams them
 * (vk_matmul.c's matvec_takes), on a device that folds (OX_VK_NORM_IN=0: not). */
static bool foldable(const struct vk_device *d, const struct mat *mats, int count) {
    if (!d->norm_in)
        return false;
    for (int i = 0; i < count; i++)
        if (mats[i].type != OX_DTYPE_F16 || vk_addr(mats[i].data) % 16 || mats[i].row_bytes % 16 ||
            mats[i].n_cols % 32)
            return false;
    return count > 0;
}

/* fold_norm.comp over each matrix: check (the flag set where a product is past f16's range) or
 * fold. */
static void fold_pass(struct backend *b, const float *g, const struct mat *mats, int count,
                      uint64_t flag, bool check) {
    for (int i = 0; i < count; i++) {
        struct fold_args a = {vk_addr(mats[i].data),
                              vk_addr(g),
                              flag,
                              (uint32_t)mats[i].n_rows,
                              (uint32_t)mats[i].n_cols,
                              (uint32_t)(mats[i].row_bytes / 2),
                              check};
        uint32_t groups = mats[i].n_rows < 65535 ? (uint32_t)mats[i].n_rows : 65535;
        vk_dispatch(vk_of(b), VK_SHADER_fold_norm, &a, sizeof a, groups, 1, 1);
    }
}

/* Each weight takes one more rounding to f16, as the CUDA backend's fold (cuda_fold.cu). */
enum ox_status vk_fold_norm(struct backend_weights *bw, const float *g, const struct mat *mats,
                            int count, bool *folded) {
    (void)bw;
    *folded = false;
    struct vk_device *d = vk_device_get();
    if (!d || !foldable(d, mats, count))
        return OX_OK;
    uint32_t *flag = vk_mem_alloc(d, sizeof *flag), over = 0;
    if (!flag)
        return ox_fail(OX_ERR_OOM, "vulkan: no device memory to fold a norm");
    enum ox_status st;
    struct backend *b = vk_loader_begin(&st);
    if (st == OX_OK) {
        vk_upload(b, flag, &over, sizeof over);
        fold_pass(b, g, mats, count, vk_addr(flag), true);
        st = vk_download(b, &over, flag, sizeof over);
    }
    if (st == OX_OK && !over) {
        fold_pass(b, g, mats, count, 0, false);
        st = vk_download(b, NULL, NULL, 0);
        *folded = st == OX_OK;
    }
    vk_loader_end();
    vk_mem_free(d, flag);
    return st;
}
