/* vk_recurrent.c: the recurrent layers' ops on the Vulkan device, each a conv pass then a scan
 * pass over the batch's tokens in order: the gated delta-net's (delta_net.comp, its conv pass
 * L2-norming q's and k's heads too) and Mamba-2's (mamba2.comp). */
#include "backend/vulkan/vk_ops.h"

/* The scan passes keep a token's q and k (or B and C) in shared arrays of this many floats, and
 * take 64 rows of a head's state a workgroup (as the shaders say). */
enum { VK_RECUR_MAX_STATE = 256, VK_RECUR_ROWS = 64 };

struct dn_conv_args {
    uint64_t qkv, conv_w, conv_state, conv_out, slot;
    uint32_t conv_stride, n, conv_dim, d_state, n_norm, d_conv;
    float eps;
};

struct dn_scan_args {
    uint64_t conv_out, beta, alpha, dt_bias, a, ssm_state, slot, y;
    uint32_t ssm_stride, n, n_k_heads, n_v_heads, d_state;
};

/* Whether the shapes fit the shaders: 32-bit strides and a state the shared arrays hold. */
static bool shapes_ok(struct backend *b, const char *op, int d_state, size_t conv_stride,
                      size_t ssm_stride) {
    if (d_state > VK_RECUR_MAX_STATE || conv_stride > UINT32_MAX || ssm_stride > UINT32_MAX) {
        vk_note(vk_of(b), VK_ERROR_FORMAT_NOT_SUPPORTED, op);
        return false;
    }
    return true;
}

static uint32_t row_groups(int rows) {
    return (uint32_t)((rows + VK_RECUR_ROWS - 1) / VK_RECUR_ROWS);
}

void vk_delta_net(struct backend *b, const struct delta_net_args *a) {
    if (a->n <= 0 || a->n_v_heads <= 0)
        return;
    if (!shapes_ok(b, "delta_net: a state wider than 256 or strides past 2^32", a->d_state,
                   a->conv_stride, a->ssm_stride))
        return;
    int heads = 2 * a->n_k_heads + a->n_v_heads; /* q's, k's and v's: a conv workgroup each */
    struct dn_conv_args conv = {vk_addr(a->qkv),        vk_addr(a->conv_w),
                                vk_addr(a->conv_state), vk_addr(a->conv_out),
                                vk_addr(a->slot),       (uint32_t)a->conv_stride,
                                (uint32_t)a->n,         (uint32_t)(heads * a->d_state),
                                (uint32_t)a->d_state,   (uint32_t)(2 * a->n_k_heads),
                                (uint32_t)a->d_conv,    a->eps};
    vk_dispatch(vk_of(b), VK_SHADER_delta_net_conv, &conv, sizeof conv, (uint32_t)heads, 1, 1);
    struct dn_scan_args scan = {
        vk_addr(a->conv_out), vk_addr(a->beta),       vk_addr(a->alpha),
        vk_addr(a->dt_bias),  vk_addr(a->a),          vk_addr(a->ssm_state),
        vk_addr(a->slot),     vk_addr(a->y),          (uint32_t)a->ssm_stride,
        (uint32_t)a->n,       (uint32_t)a->n_k_heads, (uint32_t)a->n_v_heads,
        (uint32_t)a->d_state};
    vk_dispatch(vk_of(b), VK_SHADER_delta_net, &scan, sizeof scan, row_groups(a->d_state),
                (uint32_t)a->n_v_heads, 1);
}

struct m2_conv_args {
    uint64_t xbc, conv_w, conv_b, conv_state, conv_out, slot;
    uint32_t xbc_stride, conv_stride, n, conv_dim, d_conv;
};

struct m2_scan_args {
    uint64_t conv_out, dt, dt_bias, a, d, ssm_state, slot, y;
    uint32_t dt_stride, ssm_stride, n, n_head, head_dim, n_group, d_state;
};

void vk_mamba2(struct backend *b, const struct mamba2_args *a) {
    if (a->n <= 0 || a->n_head <= 0)
        return;
    if (!shapes_ok(b, "mamba2: a state wider than 256 or strides past 2^32", a->d_state,
                   a->conv_stride, a->ssm_stride) ||
        a->xbc_stride > UINT32_MAX || a->dt_stride > UINT32_MAX)
        return;
    int conv_dim = a->n_head * a->head_dim + 2 * a->n_group * a->d_state;
    struct m2_conv_args conv = {
        vk_addr(a->xbc),      vk_addr(a->conv_w), vk_addr(a->conv_b),      vk_addr(a->conv_state),
        vk_addr(a->conv_out), vk_addr(a->slot),   (uint32_t)a->xbc_stride, (uint32_t)a->conv_stride,
        (uint32_t)a->n,       (uint32_t)conv_dim, (uint32_t)a->d_conv};
    vk_dispatch(vk_of(b), VK_SHADER_mamba2_conv, &conv, sizeof conv,
                (uint32_t)((conv_dim + 255) / 256), 1, 1);
    struct m2_scan_args scan = {
        vk_addr(a->conv_out),   vk_addr(a->dt),          vk_addr(a->dt_bias), vk_addr(a->a),
        vk_addr(a->d),          vk_addr(a->ssm_state),   vk_addr(a->slot),    vk_addr(a->y),
        (uint32_t)a->dt_stride, (uint32_t)a->ssm_stride, (uint32_t)a->n,      (uint32_t)a->n_head,
        (uint32_t)a->head_dim,  (uint32_t)a->n_group,    (uint32_t)a->d_state};
    vk_dispatch(vk_of(b), VK_SHADER_mamba2, &scan, sizeof scan, row_groups(a->head_dim),
                (uint32_t)a->n_head, 1);
}
