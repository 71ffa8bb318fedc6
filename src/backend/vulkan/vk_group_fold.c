/* vk_group_fold.c: a decode step's products whose output the next product takes as int8 groups
 * of 32 make those groups themselves (matvec_group.comp: a workgroup 32 rows), so that no op runs
 * between them: y += W x (the o projection, down) before a normed product of y (q, k and v; the
 * FFN's gate and up) writes the group of y times the RMSNorm's weights and each workgroup's sum of
 * squares, and the products after it (matvec.comp's NORM_FOLD) multiply their sums by the norm's
 * 1 / rms from those sums; a GLU before the product of its output (down) writes its groups as
 * quantize_q8.comp would. Such products wait to be recorded (vk_dispatch_later) until the op after
 * them says how it takes their output; then they are recorded on matvec_group.comp, or as they
 * are. */
#include <stdatomic.h>

#include "backend/vulkan/vk_backend.h"
#include "backend/vulkan/vk_internal.h"

/* The outputs taken as groups (vk_backend_group_folds_taken), over every context. */
static _Atomic uint64_t folds_taken;

uint64_t vk_backend_group_folds_taken(void) {
    return folds_taken;
}

/* The fold buffer's halves: a norm's groups, and a GLU's (down reads the GLU's while it writes
 * the norm's). */
enum { NORM_HALF, GLU_HALF };

/* The waiting product of this mode (y += W x of one matrix, or a GLU) that wrote x, cols rows for
 * n tokens, with nothing recorded since it was kept waiting; or NULL. */
static struct matvec_args *waiting_product(struct vk_state *s, int mode, const float *x, int n,
                                           int64_t cols) {
    if (s->group_serial != s->serial || s->n_waiting < 1)
        return NULL;
    struct matvec_args *m = vk_waiting_args(s, s->n_waiting - 1, sizeof *m);
    /* a GLU's groups go where halves says (it may take a norm's groups: fold), y += W x's as
     * its block (fold) says */
    bool ours = m && m->mode == (uint32_t)mode && m->y[0] == vk_addr(x) &&
                m->rows[0] == (uint32_t)cols && m->n == (uint32_t)n && !m->rope &&
                (mode == MV_GLU ? !m->halves : !m->fold && m->rows[1] == 0);
    return ours ? m : NULL;
}

/* Where half `half` of the fold buffer starts, each half bytes long at least: 0 where it had to
 * grow (the flush recorded what waited as it was) or cannot (no memory: not tried again, for each
 * try flushes and drops the recorded steps). */
static uint64_t fold_half(struct vk_state *s, int half, size_t bytes) {
    if (2 * bytes > s->fold_bytes) {
        size_t want = bytes > (1u << 20) ? 2 * bytes : 2u << 20;
        if (!s->fold_lost && !vk_regrow(s, &s->fold, &s->fold_bytes, want))
            s->fold_lost = true;
        return 0;
    }
    return vk_addr(s->fold) + (uint64_t)half * (s->fold_bytes / 2);
}

/* The waiting product (of this mode, for x) made to write its groups: y += W x as the block at
 * says, a GLU at `at` itself; false where it stays as it was. */
static bool take(struct vk_state *s, int mode, const float *x, int n, int64_t cols, uint64_t at) {
    struct matvec_args *m = waiting_product(s, mode, x, n, cols);
    uint32_t groups = (uint32_t)(cols / 32), gx = groups < 65535 ? groups : 65535;
    if (mode == MV_GLU && m && m->x >= at && m->x < at + s->fold_bytes / 2)
        return false; /* its own x there (a GLU of a GLU's groups): it would write what it reads */
    if (!at || !m ||
        !vk_waiting_redirect(s, s->n_waiting - 1, s->group_shader, gx, (groups + gx - 1) / gx))
        return false;
    if (mode == MV_GLU)
        m->halves = at;
    else
        m->fold = at;
    vk_record_waiting(s); /* before the products after it, which may wait in turn */
    folds_taken++;
    return true;
}

/* Whether a fold of x (n tokens, cols wide) may be tried at all. */
static bool foldable(struct vk_state *s, int n, int64_t cols) {
    return s->d->group_folds && n == 1 && cols % 32 == 0;
}

uint64_t vk_group_fold_norm(struct backend *b, const float *x, const struct norm_in *norm, int n,
                            int64_t cols, uint64_t *block) {
    struct vk_state *s = vk_of(b);
    if (!foldable(s, n, cols) || vk_addr(norm->w) % 16 || !waiting_product(s, MV_ADD, x, n, cols))
        return 0;
    uint64_t bytes = fold_half(s, NORM_HALF, (size_t)n * (size_t)cols * 2);
    if (!bytes)
        return 0;
    /* the bytes, then the groups' (d, sums), then the sums of squares */
    const uint64_t squares = (uint64_t)n * (uint64_t)cols * 3 / 2;
    struct norm_block want = {.g = vk_addr(norm->w),
                              .bytes = bytes,
                              .partials = bytes + squares,
                              .parts = (uint32_t)(cols / 32),
                              .dim = (uint32_t)cols,
                              .eps = norm->eps};
    /* a new block: its upload records y += W x as it was */
    *block = vk_block_address(b, &want, sizeof want);
    return take(s, MV_ADD, x, n, cols, *block) ? bytes : 0;
}

uint64_t vk_group_fold_bytes(struct backend *b, const float *x, int n, int64_t cols) {
    struct vk_state *s = vk_of(b);
    if (!foldable(s, n, cols) || !waiting_product(s, MV_GLU, x, n, cols))
        return 0;
    uint64_t bytes = fold_half(s, GLU_HALF, (size_t)n * (size_t)cols * 2);
    return take(s, MV_GLU, x, n, cols, bytes) ? bytes : 0;
}
