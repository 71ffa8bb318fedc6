/* vk_rope_fold.c: a decode step's RoPE of q and k and its cache stores of k and v done by q, k and
 * v's matrix-vector products as they write them (matvec.comp's rope block), not by rope_store.comp
 * after them: one dispatch less a layer. Normal RoPE rotates rows 2i and 2i + 1, which one
 * workgroup's four rows hold, so no workgroup waits for another. The products wait to be
 * recorded (vk_dispatch_later) until rope_store comes, which gives them each layer's block. */
#include <stdatomic.h>

#include "backend/vulkan/vk_backend.h"
#include "backend/vulkan/vk_internal.h"

/* The rope_store calls the products took (vk_backend_rope_folds), over every context. */
static _Atomic uint64_t folds_taken;

uint64_t vk_backend_rope_folds(void) {
    return folds_taken;
}

/* matvec.comp's RopeBlock: the outputs it applies to, the cache rows, positions, cells, and the
 * rotation's parameters (as rope_store.comp takes them). */
struct rope_block {
    uint64_t q, k, v, k_cache, v_cache, pos, cells, ff;
    uint32_t k_row, v_row, hd_k, n_rot, half_rows, pad;
    float theta_scale, freq_scale, ext_factor, attn_factor, corr0, corr1;
};
_Static_assert(sizeof(struct rope_block) == 112, "matvec.comp's RopeBlock is 112 bytes");

/* The block of a's layer as the products take it. */
static struct rope_block block_of(const struct rope_store_args *a) {
    const struct rope_params *r = a->rope;
    return (struct rope_block){
        .q = vk_addr(a->q),
        .k = vk_addr(a->k),
        .v = vk_addr(a->v),
        .k_cache = vk_addr(a->k_cache),
        .v_cache = vk_addr(a->v_cache),
        .pos = vk_addr(a->pos),
        .cells = vk_addr(a->cells),
        .ff = vk_addr(r->freq_factors),
        .k_row = (uint32_t)a->k_row,
        .v_row = (uint32_t)a->v_row,
        .hd_k = (uint32_t)a->hd_k,
        .n_rot = (uint32_t)r->n_rot,
        .half_rows = a->cache_type == OX_DTYPE_F16,
        .theta_scale = vk_theta_scale(r),
        .freq_scale = r->freq_scale,
        .ext_factor = r->ext_factor,
        .attn_factor = r->attn_factor,
        .corr0 = r->corr_dims[0],
        .corr1 = r->corr_dims[1],
    };
}

/* Whether the waiting dispatches are q, k and v's products for a's tokens (one or two
 * dispatches: their types' runs), every output one of a's three, each rows a multiple of 4 (a
 * workgroup's rows one matrix's) and even (whole pairs). */
static bool waiting_are_qkv(struct vk_state *s, const struct rope_store_args *a) {
    const uint64_t want[3] = {vk_addr(a->q), vk_addr(a->k), vk_addr(a->v)};
    const int64_t rows[3] = {(int64_t)a->n_head * a->hd_k, (int64_t)a->n_head_kv * a->hd_k,
                             (int64_t)a->n_head_kv * a->hd_v};
    int found = 0;
    struct matvec_args *m;
    for (int i = 0; (m = vk_waiting_args(s, i, sizeof *m)); i++) {
        if (m->mode != MV_SET || m->n != (uint32_t)a->n)
            return false;
        for (int j = 0; j < 3 && m->rows[j]; j++) {
            int o = 0;
            while (o < 3 && m->y[j] != want[o])
                o++;
            if (o == 3 || (int64_t)m->rows[j] != rows[o] || rows[o] % 4)
                return false;
            found |= 1 << o;
        }
    }
    return found == 7;
}

bool vk_rope_fold(struct backend *b, const struct rope_store_args *a) {
    struct vk_state *s = vk_of(b);
    const struct rope_params *r = a->rope;
    if (!s->d->folds || r->neox || r->n_rot % 2 || a->hd_k % 2 || a->n > 8 ||
        !waiting_are_qkv(s, a))
        return false;
    /* the first step of a layer uploads its block (recording q, k and v's products first):
     * the products take it from the next */
    struct rope_block want = block_of(a);
    uint64_t at = vk_block_address(b, &want, sizeof want);
    struct matvec_args *m;
    for (int i = 0; at && (m = vk_waiting_args(s, i, sizeof *m)); i++)
        m->rope = at;
    folds_taken += at != 0;
    return at != 0;
}
