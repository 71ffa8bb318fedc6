/* vk_ops.c: the op table's vector ops on the Vulkan device: elementwise (eltwise.comp), whole
 * rows (rows.comp: norms and softmax), rows with a stride or a per-row gate (rowwise.comp) and
 * RoPE (rope.comp). Each op pushes its pointers as device addresses and dispatches once. */

#include "backend/vulkan/vk_ops.h"

/* eltwise.comp's ops, in its order */
enum vk_eltwise {
    EW_ADD,
    EW_SCALE,
    EW_ZERO,
    EW_AXPY,
    EW_GELU,
    EW_SOFTCAP,
    EW_SILU_GLU,
    EW_GELU_GLU,
    EW_SIGMOID_GLU,
    EW_OAI_GLU
};

struct eltwise_args {
    uint64_t y, x, z;
    uint32_t n, op;
    float a;
    uint64_t halves; /* a GLU's y also as f16 (to nearest) there; 0: not */
};

/* One eltwise.comp op; halves: a GLU's f16 copy of y too (vk_halves_target), or NULL. */
static void eltwise(struct backend *b, enum vk_eltwise op, float *y, const float *x, const float *z,
                    size_t n, float a, void *halves) {
    if (n == 0)
        return;
    if (n > UINT32_MAX) {
        vk_note(vk_of(b), VK_ERROR_OUT_OF_DEVICE_MEMORY, "an elementwise op over 2^32 values");
        return;
    }
    struct eltwise_args args = {vk_addr(y),   vk_addr(x), vk_addr(z),     (uint32_t)n,
                                (uint32_t)op, a,          vk_addr(halves)};
    vk_dispatch(vk_of(b), VK_SHADER_eltwise, &args, sizeof args, vk_groups(n), 1, 1);
}

void vk_add(struct backend *b, float *y, const float *x, size_t n) {
    eltwise(b, EW_ADD, y, x, NULL, n, 0.0f, NULL);
}

void vk_scale(struct backend *b, float *y, float s, size_t n) {
    eltwise(b, EW_SCALE, y, NULL, NULL, n, s, NULL);
}

void vk_zero(struct backend *b, float *y, size_t n) {
    eltwise(b, EW_ZERO, y, NULL, NULL, n, 0.0f, NULL);
}

void vk_axpy(struct backend *b, float *y, const float *x, float w, size_t n) {
    eltwise(b, EW_AXPY, y, x, NULL, n, w, NULL);
}

void vk_gelu(struct backend *b, const float *x, float *y, size_t n) {
    eltwise(b, EW_GELU, y, x, NULL, n, 0.0f, NULL);
}

void vk_softcap(struct backend *b, float *y, float cap, size_t n) {
    eltwise(b, EW_SOFTCAP, y, NULL, NULL, n, cap, NULL);
}

void vk_glu(struct backend *b, enum glu_kind kind, const float *gate, const float *up, float *y,
            size_t n) {
    enum vk_eltwise op = kind == GLU_SILU      ? EW_SILU_GLU
                         : kind == GLU_GELU    ? EW_GELU_GLU
                         : kind == GLU_SIGMOID ? EW_SIGMOID_GLU
                                               : EW_OAI_GLU;
    /* its f16 copy too for the product after it (down), where that runs on cooperative
     * matrices: one op where halves.comp's conversion ran after it (prompts) */
    struct vk_state *s = vk_of(b);
    void *halves = n <= UINT32_MAX ? vk_halves_target(s, n) : NULL;
    eltwise(b, op, y, gate, up, n, 0.0f, halves);
    if (halves)
        vk_halves_made(s, y, n);
}

/* rows.comp's ops */
enum { ROWS_RMS_NORM, ROWS_LAYER_NORM, ROWS_SOFTMAX, ROWS_RMS_NORM_BYTES, ROWS_RMS_NORM_HALVES };

struct rows_args {
    uint64_t y, x, g, bias;
    uint32_t dim, op;
    float eps;
    uint64_t meta;
};

/* One rows.comp op over n rows; halves: an RMSNorm's f16 copy of y too (its meta), where there
 * is one dispatch (n <= 65535), or NULL. */
static void rows(struct backend *b, int op, const float *x, const float *g, const float *bias,
                 float *y, int n, int dim, float eps, void *halves) {
    if (n <= 0 || dim <= 0)
        return;
    struct rows_args args = {vk_addr(y),    vk_addr(x),   vk_addr(g), vk_addr(bias),
                             (uint32_t)dim, (uint32_t)op, eps,        vk_addr(halves)};
    for (int r0 = 0; r0 < n; r0 += 65535) { /* a workgroup a row, at most 65535 a dispatch */
        int part = n - r0 < 65535 ? n - r0 : 65535;
        size_t skip = (size_t)r0 * (size_t)dim * sizeof(float);
        struct rows_args a = args;
        a.y += skip, a.x += skip;
        vk_dispatch(vk_of(b), VK_SHADER_rows, &a, sizeof a, (uint32_t)part, 1, 1);
    }
}

void vk_rms_norm(struct backend *b, const float *x, const float *g, float *y, int n, int dim,
                 float eps) {
    /* a prompt's norm (9 tokens or more: cooperative-matrix products) writes its f16 copy too,
     * for the products after it: one op where halves.comp's conversion ran after it */
    struct vk_state *s = vk_of(b);
    size_t count = (size_t)n * (size_t)(dim > 0 ? dim : 0);
    void *halves = n >= 9 && n <= 65535 ? vk_halves_target(s, count) : NULL;
    rows(b, ROWS_RMS_NORM, x, g, NULL, y, n, dim, eps, halves);
    if (halves)
        vk_halves_made(s, y, count);
}

void vk_rms_norm_bytes(struct vk_state *s, const float *x, const float *g, float eps, int n,
                       int dim, uint8_t *q) {
    struct rows_args a = {
        vk_addr(q),    vk_addr(x),          vk_addr(g), 0,
        (uint32_t)dim, ROWS_RMS_NORM_BYTES, eps,        vk_addr(q + (size_t)n * (size_t)dim)};
    vk_dispatch(s, VK_SHADER_rows, &a, sizeof a, (uint32_t)n, 1, 1);
}

void vk_rms_norm_halves(struct vk_state *s, const float *x, const float *g, float eps, int n,
                        int dim, void *y) {
    struct rows_args a = {vk_addr(y),    vk_addr(x),           vk_addr(g), 0,
                          (uint32_t)dim, ROWS_RMS_NORM_HALVES, eps,        0};
    vk_dispatch(s, VK_SHADER_rows, &a, sizeof a, (uint32_t)n, 1, 1);
}

void vk_layer_norm(struct backend *b, const float *x, const float *g, const float *bias, float *y,
                   int n, int dim, float eps) {
    rows(b, ROWS_LAYER_NORM, x, g, bias, y, n, dim, eps, NULL);
}

void vk_softmax(struct backend *b, float *x, int n, int dim) {
    rows(b, ROWS_SOFTMAX, x, NULL, NULL, x, n, dim, 0.0f, NULL);
}

/* rowwise.comp's ops */
enum { RW_ADD_ROW, RW_COPY_ROWS, RW_SIGMOID_SCALE };

struct rowwise_args {
    uint64_t y, x;
    uint32_t rows, cols, y_stride, x_stride, op;
};

static void rowwise(struct backend *b, int op, float *y, size_t y_stride, const float *x,
                    size_t x_stride, int n, int cols) {
    if (n <= 0 || cols <= 0)
        return;
    struct rowwise_args args = {vk_addr(y),         vk_addr(x),         (uint32_t)n, (uint32_t)cols,
                                (uint32_t)y_stride, (uint32_t)x_stride, (uint32_t)op};
    vk_dispatch(vk_of(b), VK_SHADER_rowwise, &args, sizeof args,
                vk_groups((size_t)n * (size_t)cols), 1, 1);
}

void vk_add_row(struct backend *b, float *y, const float *row, int n, int dim) {
    rowwise(b, RW_ADD_ROW, y, (size_t)dim, row, 0, n, dim);
}

void vk_copy_rows(struct backend *b, float *dst, size_t dst_stride, const float *src,
                  size_t src_stride, int rows, int cols) {
    rowwise(b, RW_COPY_ROWS, dst, dst_stride, src, src_stride, rows, cols);
}

void vk_sigmoid_scale_rows(struct backend *b, float *y, const float *g, int n, int dim) {
    rowwise(b, RW_SIGMOID_SCALE, y, (size_t)dim, g, 1, n, dim);
}

struct rope_args {
    uint64_t x, pos, ff;
    uint32_t n, n_heads, head_dim, n_rot, neox;
    float theta_scale, freq_scale, ext_factor, attn_factor, corr0, corr1;
};

void vk_rope(struct backend *b, float *x, const int32_t *pos, int n, int n_heads, int head_dim,
             const struct rope_params *p) {
    if (n <= 0 || n_heads <= 0 || p->n_rot <= 0)
        return;
    struct rope_args args = {vk_addr(x),         vk_addr(pos),      vk_addr(p->freq_factors),
                             (uint32_t)n,        (uint32_t)n_heads, (uint32_t)head_dim,
                             (uint32_t)p->n_rot, p->neox,           vk_theta_scale(p),
                             p->freq_scale,      p->ext_factor,     p->attn_factor,
                             p->corr_dims[0],    p->corr_dims[1]};
    size_t pairs = (size_t)n * (size_t)n_heads * (size_t)(p->n_rot / 2);
    vk_dispatch(vk_of(b), VK_SHADER_rope, &args, sizeof args, vk_groups(pairs), 1, 1);
}
