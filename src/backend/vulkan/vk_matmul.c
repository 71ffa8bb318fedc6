/* vk_matmul.c: products with a model's weights and rows looked up from them, for every weight
 * type the CUDA backend runs (dequant.glsl's), and the lookup tables the table-coded types read
 * (the weights' copies on the device: vk_weights.c). */
#include <stdatomic.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/vk_backend.h"
#include "backend/vulkan/vk_ops.h"
#include "core/status.h"
#include "quant/iq_tables.h"

/* The weight types with shaders of their own (CMakeLists.txt's OX_VK_WEIGHT_TYPES): a
 * matrix-vector product for up to 8 tokens, a tiled product for more, and row lookups. */
/* clang-format off */
#define VK_WEIGHT_TYPES(X)                                                                         \
    X(F32) X(F16) X(BF16)                                                                          \
    X(Q4_0) X(Q4_1) X(Q5_0) X(Q5_1) X(Q8_0) X(Q1_0) X(Q2_0)                                        \
    X(Q2_K) X(Q3_K) X(Q4_K) X(Q5_K) X(Q6_K)                                                        \
    X(IQ4_NL) X(IQ4_XS) X(IQ3_S) X(MXFP4) X(TQ1_0) X(TQ2_0)
/* The types with a cooperative-matrix product too (CMakeLists.txt's OX_VK_COOPMAT_TYPES, built
 * where glslc can): all but f32 and bf16, whose values f16 blocks would round. */
#ifdef OX_VK_COOPMAT
#define VK_COOPMAT_TYPES(X)                                                                        \
    X(F16)                                                                                         \
    X(Q4_0) X(Q4_1) X(Q5_0) X(Q5_1) X(Q8_0) X(Q1_0) X(Q2_0)                                        \
    X(Q2_K) X(Q3_K) X(Q4_K) X(Q5_K) X(Q6_K)                                                        \
    X(IQ4_NL) X(IQ4_XS) X(IQ3_S) X(MXFP4) X(TQ1_0) X(TQ2_0)
#else
#define VK_COOPMAT_TYPES(X)
#endif
/* The types whose decode products have an integer form too (CMakeLists.txt's OX_VK_Q8_TYPES):
 * dequant_q8.glsl's levels as bytes against x made int8. */
#define VK_Q8_TYPES(X)                                                                             \
    X(Q4_0) X(Q4_1) X(Q5_0) X(Q5_1) X(Q8_0) X(Q2_K) X(Q3_K) X(Q4_K) X(Q5_K) X(Q6_K)
/* The types whose long prompts' products may take their weights made f16 first
 * (CMakeLists.txt's OX_VK_DEQUANT_TYPES: dequant_f16.comp): the quantized ones. */
#define VK_DEQUANT_TYPES(X)                                                                        \
    X(Q4_0) X(Q4_1) X(Q5_0) X(Q5_1) X(Q8_0) X(Q1_0) X(Q2_0)                                        \
    X(Q2_K) X(Q3_K) X(Q4_K) X(Q5_K) X(Q6_K)                                                        \
    X(IQ4_NL) X(IQ4_XS) X(IQ3_S) X(MXFP4) X(TQ1_0) X(TQ2_0)
/* clang-format on */

struct weight_shaders {
    enum vk_shader matvec, matvec1, gemm, get_rows; /* matvec1: one token */
    enum vk_shader gemm_cm;           /* gemm on cooperative matrices, or VK_SHADER_COUNT: none */
    enum vk_shader gemm_cm2[4];       /* on workgroup matrices: cm2_tiles' shapes (or none) */
    enum vk_shader matvecq, matvecq1; /* matvec(1) on int8 x, or VK_SHADER_COUNT: none */
    enum vk_shader dequant;           /* the weights made f16 (dequant_f16.comp), or none */
    enum vk_shader matvecqn1;         /* matvecq1 on a norm's groups (vk_group_fold.c), or none */
    enum vk_shader matvecg1;          /* matvec_group.comp (the same): none where no matvecq */
    enum vk_shader matvecn1;          /* matvec1 taking an RMSNorm in (vk_fold_norm.c): f16 alone */
};

static enum vk_shader dequant_shader(enum ox_dtype type) {
    switch (type) {
#define VK_CASE_(name)                                                                             \
    case OX_DTYPE_##name: return VK_SHADER_dequant_f16_##name;
        VK_DEQUANT_TYPES(VK_CASE_)
#undef VK_CASE_
    default: return VK_SHADER_COUNT;
    }
}

static void q8_shaders(enum ox_dtype type, struct weight_shaders *s) {
    s->matvecq = s->matvecq1 = s->matvecqn1 = s->matvecg1 = VK_SHADER_COUNT;
    switch (type) {
#define VK_CASE_(name)                                                                             \
    case OX_DTYPE_##name:                                                                          \
        s->matvecq = VK_SHADER_matvecq_##name, s->matvecq1 = VK_SHADER_matvecq1_##name;            \
        s->matvecqn1 = VK_SHADER_matvecqn1_##name, s->matvecg1 = VK_SHADER_matvecg1_##name;        \
        break;
        VK_Q8_TYPES(VK_CASE_)
#undef VK_CASE_
    default: break;
    }
}

static enum vk_shader coopmat_shader(enum ox_dtype type) {
    switch (type) {
#define VK_CASE_(name)                                                                             \
    case OX_DTYPE_##name: return VK_SHADER_gemm_cm_##name;
        VK_COOPMAT_TYPES(VK_CASE_)
#undef VK_CASE_
    default: return VK_SHADER_COUNT;
    }
}

/* gemm_cm2.comp's tiles (rows x tokens) in gemm_cm2[]'s order: coopmat2_tile says which. */
static const struct {
    uint32_t rows, tokens;
} cm2_tiles[4] = {{64, 64}, {128, 256}, {64, 256}, {32, 256}};

/* gemm_cm2.comp's tiles, built where glslc can (CMakeLists.txt's OX_VK_COOPMAT2): f16 weights
 * at 64 x 64 and 128 x 256, q4_K's and q6_K's at 64 x 64, 64 x 256 and 32 x 256 (its header says
 * why not the other types). f16's 128 x 256 ran the 1B F16's pp512 on an H200 4% faster than 128 x
 * 128 (56476 against 54352 t/s; 256 x 128 at 53176, 128 x 128 with a k step of 32 at 54760). */
static void coopmat2_shaders(enum ox_dtype type, struct weight_shaders *s) {
    s->gemm_cm2[0] = s->gemm_cm2[1] = s->gemm_cm2[2] = s->gemm_cm2[3] = VK_SHADER_COUNT;
#ifdef OX_VK_COOPMAT2
    if (type == OX_DTYPE_F16)
        s->gemm_cm2[0] = VK_SHADER_gemm_cm2_64x64_F16,
        s->gemm_cm2[1] = VK_SHADER_gemm_cm2_128x256_F16;
    if (type == OX_DTYPE_Q4_K)
        s->gemm_cm2[0] = VK_SHADER_gemm_cm2_64x64_Q4_K,
        s->gemm_cm2[2] = VK_SHADER_gemm_cm2_64x256_Q4_K,
        s->gemm_cm2[3] = VK_SHADER_gemm_cm2_32x256_Q4_K;
    if (type == OX_DTYPE_Q6_K)
        s->gemm_cm2[0] = VK_SHADER_gemm_cm2_64x64_Q6_K,
        s->gemm_cm2[2] = VK_SHADER_gemm_cm2_64x256_Q6_K,
        s->gemm_cm2[3] = VK_SHADER_gemm_cm2_32x256_Q6_K;
#else
    (void)type;
#endif
}

static bool weight_shaders(enum ox_dtype type, struct weight_shaders *s) {
    switch (type) {
#define VK_CASE_(name)                                                                             \
    case OX_DTYPE_##name:                                                                          \
        *s = (struct weight_shaders){.matvec = VK_SHADER_matvec_##name,                            \
                                     .matvec1 = VK_SHADER_matvec1_##name,                          \
                                     .gemm = VK_SHADER_gemm_##name,                                \
                                     .get_rows = VK_SHADER_get_rows_##name,                        \
                                     .gemm_cm = coopmat_shader(type),                              \
                                     .dequant = dequant_shader(type),                              \
                                     .matvecn1 = type == OX_DTYPE_F16 ? VK_SHADER_matvecn1_F16     \
                                                                      : VK_SHADER_COUNT};          \
        q8_shaders(type, s);                                                                       \
        coopmat2_shaders(type, s);                                                                 \
        return true;
        VK_WEIGHT_TYPES(VK_CASE_)
#undef VK_CASE_
    default: return false;
    }
}

bool vk_backend_q8_type(enum ox_dtype type) {
    struct weight_shaders s;
    return weight_shaders(type, &s) && s.matvecq != VK_SHADER_COUNT;
}

bool vk_supports(enum backend_op op, enum ox_dtype type) {
    (void)op;
    struct weight_shaders s;
    return weight_shaders(type, &s);
}

/* The lookup tables dequant.glsl reads, as 32-bit integers: iq4_nl's levels at 0, e2m1's at 16,
 * iq3_s's grid at 32. Uploaded once, by the first context made. */
enum { TAB_IQ4NL = 0, TAB_E2M1 = 16, TAB_IQ3S = 32, TAB_WORDS = 32 + 512 };
static pthread_mutex_t tables_lock = PTHREAD_MUTEX_INITIALIZER;

enum ox_status vk_tables_ready(struct backend *b) {
    struct vk_state *s = vk_of(b);
    pthread_mutex_lock(&tables_lock);
    enum ox_status st = OX_OK;
    if (!s->d->tables) {
        int32_t tab[TAB_WORDS];
        for (int i = 0; i < 16; i++)
            tab[TAB_IQ4NL + i] = iq4nl_values[i], tab[TAB_E2M1 + i] = fp4_e2m1_values[i];
        memcpy(tab + TAB_IQ3S, iq3s_grid, sizeof iq3s_grid);
        void *p = vk_mem_alloc(s->d, sizeof tab);
        if (!p)
            st = ox_fail(OX_ERR_OOM, "vulkan: no device memory for the lookup tables");
        else {
            vk_upload(b, p, tab, sizeof tab);
            st = vk_download(b, NULL, NULL, 0);
            if (st == OX_OK)
                s->d->tables = p;
            else
                vk_mem_free(s->d, p);
        }
    }
    pthread_mutex_unlock(&tables_lock);
    return st;
}

struct matmul_args {
    uint64_t w, x, y;
    uint32_t rows, cols, n, row_elems;
};

/* The plain f32/f16 product, for rows that are not whole groups of 32. */
static void matmul_plain(struct backend *b, const struct mat *w, const float *x, float *y, int n) {
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

bool vk_regrow(struct vk_state *s, void **buf, size_t *have, size_t bytes) {
    if (!vk_flush(s))
        return false;
    if (*buf)
        vk_mem_free(s->d, *buf);
    *buf = vk_mem_alloc(s->d, bytes);
    *have = *buf ? bytes : 0;
    s->epoch++; /* the recorded steps read the old one */
    return *buf != NULL;
}

/* The context's scratch buffer for activations converted for a product (f16 for gemm_cm.comp,
 * int8 for matvec.comp's integer form), at least bytes long: grown where too small (vk_regrow);
 * NULL (noted) where there is no memory for it. */
static void *scratch(struct vk_state *s, size_t bytes) {
    if (bytes > s->scratch_bytes) {
        s->held_form = 0; /* holds nothing */
        size_t want = bytes > (8u << 20) ? bytes : 8u << 20;
        if (!vk_regrow(s, &s->scratch, &s->scratch_bytes, want)) {
            if (!s->scratch)
                vk_note(s, VK_ERROR_OUT_OF_DEVICE_MEMORY, "matmul: activations converted");
            return NULL;
        }
    }
    return s->scratch;
}

uint8_t *vk_bytes_target(struct vk_state *s, size_t count) {
    return s->d->dot8 && count % 32 == 0 ? scratch(s, count + count / 32 * 16) : NULL;
}

void *vk_halves_target(struct vk_state *s, size_t count) {
    return s->d->coopmat ? scratch(s, count * 2) : NULL;
}

/* How a matvec of these weights takes x: as it is, as bytes (the integer form), or as f16 (f16
 * weights: matvec.comp's X_F16; the cooperative-matrix products'). */
enum x_form { X_AS_IS, X_BYTES, X_HALVES };

void *vk_step_halves_target(struct vk_state *s, size_t count) {
    return s->last_form == X_HALVES ? scratch(s, count * 2) : NULL;
}

/* Whether scratch holds x's count values in this form, nothing having run since it was last
 * read (a prompt's q, k and v, its gate and up, read one x). */
static bool scratch_holds(const struct vk_state *s, enum x_form form, uint64_t x, size_t count) {
    return s->held_form == (int)form && x && s->held_of == x && s->held_count == count &&
           s->held_serial == s->serial;
}

/* Scratch now holds x's count values in this form (x 0: not any floats'), as of this point. */
static void scratch_made(struct vk_state *s, enum x_form form, uint64_t x, size_t count) {
    s->held_form = (int)form, s->held_of = x, s->held_count = count, s->held_serial = s->serial;
    s->held_at = 0;
}

/* A product that read x (or scratch's form of it) and wrote y (at most bytes long) ran: what
 * scratch holds is still x's, unless y overlaps x. Called for each of its outputs. */
static void scratch_read(struct vk_state *s, uint64_t y, uint64_t bytes) {
    uint64_t x = s->held_of, x_end = x + (uint64_t)s->held_count * sizeof(float);
    if (!s->held_form || !x)
        return;
    if (y < x_end && y + bytes > x)
        s->held_form = 0; /* x rewritten */
    else
        s->held_serial = s->serial;
}

void vk_bytes_made(struct vk_state *s, const float *x, size_t count) {
    scratch_made(s, X_BYTES, vk_addr(x), count);
}

void vk_halves_made(struct vk_state *s, const float *x, size_t count) {
    scratch_made(s, X_HALVES, vk_addr(x), count);
}

struct halves_args {
    uint64_t x, y;
    uint32_t n;
};

/* The count floats of x as f16 in the scratch buffer, or NULL (noted): kept from the last
 * product where that was of the same x and nothing ran since (a prompt's q, k and v, its gate and
 * up read one). */
static const void *x_as_halves(struct vk_state *s, uint64_t x, size_t count) {
    if (scratch_holds(s, X_HALVES, x, count))
        return (uint8_t *)s->scratch + s->held_at;
    void *y = scratch(s, count * 2);
    if (!y)
        return NULL;
    struct halves_args a = {x, vk_addr(y), (uint32_t)count};
    vk_dispatch(s, VK_SHADER_halves, &a, sizeof a, vk_groups(count), 1, 1);
    scratch_made(s, X_HALVES, x, count);
    return y;
}

struct dequant_args {
    uint64_t w, y, tab;
    uint32_t rows, cols, row_bytes;
};

/* The most bytes a weight made f16 may take: larger ones (a large vocabulary's output matrix)
 * keep their own product. */
#define WIDE_MOST ((size_t)512 << 20)

static int coopmat2_tile(const struct vk_state *s, const struct weight_shaders *sh,
                         const struct mat *w, uint64_t y, int toks);

/* Whether a product of n tokens into y takes w made f16 first (weights_as_halves): where it has
 * at least the device's dequant_tokens (vk_device.c's dequant_tokens says why), w is quantized,
 * its f16 form fits in WIDE_MOST, and it would not run on gemm_cm2.comp tiles of its own
 * (coopmat2_tile: the types without them, the 8B's k and v of q4_K and q6_K). Where q4_K's and
 * q6_K's tiles take it they stay faster: on an H200 the 8B Q4_K_M's pp512 ran at 8717 t/s on
 * them and at 8150 made f16 first, whose f16 tiles took 265 us a product against their 287 but
 * the conversion 47 more (session 32). */
static bool dequantizes(const struct vk_state *s, const struct weight_shaders *sh,
                        const struct mat *w, const float *y, int n) {
    return s->d->dequant_tokens && (uint32_t)n >= s->d->dequant_tokens &&
           sh->dequant != VK_SHADER_COUNT &&
           (size_t)w->n_rows * (size_t)w->n_cols * 2 <= WIDE_MOST &&
           coopmat2_tile(s, sh, w, vk_addr(y), n) < 0;
}

/* w's rows made f16 in the context's wide buffer (grown where too small: vk_regrow), described as
 * f16 weights by *f; false where there is no memory for it (the quantized product runs instead)
 * or the flush failed (noted). */
static bool weights_as_halves(struct vk_state *s, const struct mat *w,
                              const struct weight_shaders *sh, struct mat *f) {
    size_t bytes = (size_t)w->n_rows * (size_t)w->n_cols * 2;
    if (bytes > s->wide_bytes && !vk_regrow(s, &s->wide, &s->wide_bytes, bytes))
        return false;
    struct dequant_args a = {vk_addr(w->data),    vk_addr(s->wide),    vk_addr(s->d->tables),
                             (uint32_t)w->n_rows, (uint32_t)w->n_cols, (uint32_t)w->row_bytes};
    uint64_t before = s->serial;
    vk_dispatch(s, sh->dequant, &a, sizeof a, vk_groups(bytes / 64), 1, 1);
    if (s->held_serial == before) /* it wrote neither x nor scratch: x's halves there stay */
        s->held_serial = s->serial;
    *f = *w;
    f->type = OX_DTYPE_F16, f->data = s->wide, f->row_bytes = (size_t)w->n_cols * 2;
    f->packed = NULL;
    return true;
}

struct quantize_args {
    uint64_t x, q, m;
    uint32_t groups;
};

struct gemm_args {
    uint64_t w, x, y, tab;
    uint32_t rows, cols, n, row_bytes, add;
    uint32_t slice; /* gemm_cm.comp's column slices (column_slices) */
    uint64_t part;
    uint64_t w2, y2, w3, y3; /* gemm_cm2.comp's second and third matrix and y (cm2_multi), or 0 */
    uint32_t rows2, rows3;
};

/* Whether matvec.comp takes these tokens: up to 8, rows of x 16-byte aligned (read 16 bytes at
 * a time), rows of whole groups; f16 weights' rows 16-byte aligned too (the same). */
static bool matvec_takes(const struct mat *w, const float *x, int n) {
    bool rows_aligned = vk_addr(w->data) % 16 == 0 && w->row_bytes % 16 == 0;
    return n <= 8 && vk_addr(x) % 16 == 0 && w->n_cols % 32 == 0 &&
           (w->type != OX_DTYPE_F16 || rows_aligned);
}

/* Whether products with these weights take the integer form on this device. */
static bool on_bytes(const struct vk_state *s, const struct weight_shaders *sh) {
    return s->d->dot8 && sh->matvecq != VK_SHADER_COUNT;
}

static enum x_form x_form(const struct vk_state *s, const struct weight_shaders *sh,
                          enum ox_dtype type) {
    return on_bytes(s, sh) ? X_BYTES : type == OX_DTYPE_F16 ? X_HALVES : X_AS_IS;
}

/* x as a matvec takes it (x 0, noted, where there is no room): its bytes for the integer form
 * or its halves, RMSNorm'd first where norm is given (one op), bytes kept from the last product
 * where that was of the same x and nothing ran since (q, k and v of two types read one); or x
 * itself (norm NULL). Bytes are made by the product that wrote x where that waits
 * (vk_group_fold.c): .fold is then the block of the norm, which the product applies. */
struct x_in {
    uint64_t x, fold;
};
static struct x_in matvec_input(struct backend *b, enum x_form form, const float *x,
                                const struct norm_in *norm, int n, int64_t cols) {
    struct vk_state *s = vk_of(b);
    struct x_in in = {0, 0};
    if (form == X_AS_IS)
        return (struct x_in){vk_addr(x), 0};
    if (form == X_HALVES && norm && (in.fold = vk_norm_in_block(b, x, norm, n, cols)))
        return (struct x_in){vk_addr(x), in.fold}; /* the product takes the norm in */
    if (form == X_HALVES && norm) {                /* the RMSNorm writes the halves: one op */
        void *y = scratch(s, (size_t)n * (size_t)cols * 2);
        if (y) {
            vk_rms_norm_halves(s, x, norm->w, norm->eps, n, (int)cols, y);
            scratch_made(s, X_HALVES, 0, (size_t)n * (size_t)cols);
        }
        return (struct x_in){vk_addr(y), 0};
    }
    if (form == X_HALVES)
        return (struct x_in){vk_addr(x_as_halves(s, vk_addr(x), (size_t)n * (size_t)cols)), 0};
    size_t count = (size_t)n * (size_t)cols;
    if (!norm && scratch_holds(s, X_BYTES, vk_addr(x), count))
        return (struct x_in){vk_addr(s->scratch) + s->held_at, 0};
    if (norm && (in.x = vk_group_fold_norm(b, x, norm, n, cols, &in.fold)))
        return in;
    if (!norm && (in.x = vk_group_fold_bytes(b, x, n, cols)))
        return in;
    uint8_t *q = vk_bytes_target(s, count);
    if (!q)
        return in;
    if (norm)
        vk_rms_norm_bytes(s, x, norm->w, norm->eps, n, (int)cols, q);
    else {
        struct quantize_args a = {vk_addr(x), vk_addr(q), vk_addr(q + count),
                                  (uint32_t)(count / 32)};
        vk_dispatch(s, VK_SHADER_quantize_q8, &a, sizeof a, vk_groups(count / 32), 1, 1);
    }
    scratch_made(s, X_BYTES, norm ? 0 : vk_addr(x), count);
    return (struct x_in){vk_addr(q), 0};
}

/* The matvec_group.comp form a decode step's product with these weights waits on for the op
 * after it, which may take its output as int8 groups that it makes itself (vk_group_fold.c): on
 * the integer form, one token, rows whole groups and no wider than group_cols; VK_SHADER_COUNT:
 * none (it does not wait). Its workgroups of 32 rows are too few to stream a wide product: on an
 * H200 (session 35) the 8B's down (14336 wide) took 58 us a call that way against 24 as
 * matvec.comp's, and teams of 64 threads rather than 16 brought it to 30, no more than the RMSNorm
 * it saves (the 8B's tg128 344 t/s either way, the 1B's 935 against 965 without). For 8
 * sequences its teams of 16 ran slower than matvec.comp (the 1B: 3745 against 3922 t/s). */
static enum vk_shader group_form(const struct vk_state *s, const struct weight_shaders *sh,
                                 const struct mat *w, int n) {
    if (!s->d->group_folds || !on_bytes(s, sh) || w->n_rows % 32 || n != 1 ||
        w->n_cols > s->d->group_cols)
        return VK_SHADER_COUNT;
    return sh->matvecg1;
}

/* The product just kept waiting is one that may make them, on matvec_group.comp's form sh. */
static void waits_for_groups(struct vk_state *s, enum vk_shader sh) {
    s->group_serial = s->serial, s->group_shader = sh;
}

/* One matvec.comp dispatch over count matrices' rows (of one type: sh's) with x as matvec_input
 * gave it (bytes: the integer form), 4 rows a workgroup (a GLU: 2 of the gate, 2 of up). */
static void matvec(struct vk_state *s, const struct weight_shaders *sh, int count,
                   const struct mat *w, struct x_in x, bool bytes, float *const *y, int n, int mode,
                   int glu_kind, uint64_t halves, bool later) {
    struct matvec_args a = {.x = x.x,
                            .fold = x.fold,
                            .tab = vk_addr(s->d->tables),
                            .cols = (uint32_t)w[0].n_cols,
                            .n = (uint32_t)n,
                            .mode = (uint32_t)mode,
                            .glu_kind = (uint32_t)glu_kind,
                            .halves = halves};
    s->last_form = bytes ? X_BYTES : w[0].type == OX_DTYPE_F16 ? X_HALVES : X_AS_IS;
    size_t rows = 0;
    for (int m = 0; m < count; m++) {
        a.w[m] = vk_addr(w[m].data), a.y[m] = vk_addr(y[m]);
        a.rows[m] = (uint32_t)w[m].n_rows, a.row_bytes[m] = (uint32_t)w[m].row_bytes;
        rows += (size_t)w[m].n_rows;
    }
    size_t groups = mode == MV_GLU ? (a.rows[0] + 1) / 2 : (rows + 3) / 4;
    enum vk_shader shader = x.fold  ? (bytes ? sh->matvecqn1 /* one token: vk_group_fold.c */
                                             : sh->matvecn1) /* vk_fold_norm.c */
                            : bytes ? (n == 1 ? sh->matvecq1 : sh->matvecq)
                                    : (n == 1 ? sh->matvec1 : sh->matvec);
    uint32_t gx = groups > 65535 ? 65535 : (uint32_t)groups,
             gy = (uint32_t)((groups + gx - 1) / gx);
    if (later)
        vk_dispatch_later(s, shader, &a, sizeof a, gx, gy, 1);
    else
        vk_dispatch(s, shader, &a, sizeof a, gx, gy, 1);
    for (int m = 0; m < count; m++) /* what it read of scratch stays x's, unless it wrote x */
        scratch_read(s, a.y[m], (uint64_t)a.rows[m] * (uint64_t)n * sizeof(float));
}

/* The workgroups a product of toks tokens takes at cm2_tiles[i]. */
static int64_t cm2_groups(const struct mat *w, int toks, int i) {
    int64_t r = cm2_tiles[i].rows, t = cm2_tiles[i].tokens;
    return (w->n_rows + r - 1) / r * ((toks + t - 1) / t);
}

/* Which of gemm_cm2.comp's tiles (cm2_tiles) a product of toks tokens takes, or -1 where it
 * cannot: no such shader (f16, q4_K and q6_K weights only) or device, or weights or y not 16-byte
 * aligned (the bases of its tensor loads and stores must be). The larger tiles where there are
 * enough of them to keep a large GPU busy (128: an H100 has 132 multiprocessors), else 64 x 64:
 * f16's 128 x 256, q4_K's and q6_K's 64 x 256, which decodes each weight once for 256 tokens
 * (q6_K's taken as q4_K's, not measured apart). On the H100 (one lease), q4_K's 64 x 256 from
 * 128 tiles ran the 8B's pp512 at 7000 t/s and from 264 at 6550, the 1B's at 29405 and 29256;
 * in an earlier lease, on every product at 6820 and 25428, on none at 6081 and 29283 (on every
 * one it starves the 1B's small ones: 16 to 64 tiles).
 * Fewer than 256 tokens would leave every 64 x 256 tile at the edge (bounds-checked loads).
 * Quantized products of fewer than 64 tokens (decode steps of 9 to 63 sequences) stay on
 * gemm_cm.comp: with q4_K's on gemm_cm2's edge tiles, 32 sequences of the 1B decoded at 1611
 * t/s, against 2998 in the session before on gemm_cm.comp (different leases); back there, 3031
 * and 3123 in two later leases. Quantized products of 64 x 64 tiles with at most 1024 rows of
 * 4096 or more columns (the 8B's k and v) take gemm_cm.comp too: on an H200 its q4_K ones took
 * 67 us there against 76 on gemm_cm2, its q6_K ones 95 against 142, and its pp512 ran at 8548
 * t/s against 7912 (one lease). Not the smaller models' 64 x 64 products: with every one of them
 * on gemm_cm.comp the 1B's pp512 fell from 35464 to 28100 t/s. q4_K's and q6_K's products that
 * 64 x 256 leaves with fewer than 128 tiles take 32 x 256 where that makes 128 (the 1B's
 * 2048-row products of 512 tokens: the weights still decoded once for 256 tokens), before 64 x
 * 64: the 1B Q4_K_M's pp512 on an H200 went from 50194 / 50312 t/s to 51862 / 51955 with it
 * (session 34, each with cm2_takes' tile for all the rows of q, k and v). */
static int coopmat2_tile(const struct vk_state *s, const struct weight_shaders *sh,
                         const struct mat *w, uint64_t y, int toks) {
    if (!s->d->coopmat2 || sh->gemm_cm2[0] == VK_SHADER_COUNT || vk_addr(w->data) % 16 || y % 16 ||
        w->row_bytes % 2)
        return -1;
    if (w->type != OX_DTYPE_F16 && toks < 64) /* see above */
        return -1;
    int tile = sh->gemm_cm2[1] != VK_SHADER_COUNT && cm2_groups(w, toks, 1) >= 128 ? 1 : 0;
    if (sh->gemm_cm2[2] != VK_SHADER_COUNT && toks >= 256 && cm2_groups(w, toks, 2) >= 128)
        tile = 2;
    if (tile == 0 && sh->gemm_cm2[3] != VK_SHADER_COUNT && toks >= 256 &&
        cm2_groups(w, toks, 3) >= 128)
        tile = 3;
    if (w->type != OX_DTYPE_F16 && tile == 0 && w->n_rows <= 1024 && w->n_cols >= 4096)
        return -1; /* see above */
    return tile;
}

static _Atomic uint64_t cuts_taken; /* products cut so (vk_backend_cm2_cuts_taken) */

uint64_t vk_backend_cm2_cuts_taken(void) {
    return cuts_taken;
}

/* How many column slices gemm_cm2.comp cuts a product of toks tokens into at 128 x 256
 * (cm2_tiles[1]), or 1: f16 weights whose 128 x 256 tiles number fewer than 128 (coopmat2_tile
 * then gives 64 x 64, at about 120 TFLOPS on an H200 against 180), of at least 256 tokens, cut
 * into slices alike of 512 columns or more for about 128 workgroups (fewer where the 64-column
 * steps do not divide so); split_sum.comp adds their sums
 * (OX_VK_CM2_SLICES=0: never). Rows a multiple of 4 (each slice's sums 16-byte aligned). A 1B's o
 * and down (2048 rows: 32 tiles) take 4, its q, k and v together (3072: 48) 2, an 8B's k and v
 * made f16 (1024 rows of 4096: 16 tiles) 8. */
static int cm2_slices(const struct vk_state *s, const struct weight_shaders *sh,
                      const struct mat *w, int toks, int tile) {
    if (!s->d->cm2_slices || tile != 0 || w->type != OX_DTYPE_F16 || toks < 256 || w->n_rows % 4 ||
        sh->gemm_cm2[1] == VK_SHADER_COUNT)
        return 1;
    int64_t groups = cm2_groups(w, toks, 1), steps = w->n_cols / 64;
    int64_t want = (128 + groups - 1) / groups, most = w->n_cols / 512;
    int64_t slices = want < most ? want : most;
    while (slices > 1 && steps % slices) /* slices all alike (gemm_cm2.comp's SLICE) */
        slices--;
    return slices >= 2 ? (int)slices : 1;
}

struct split_sum_args {
    uint64_t part, y;
    uint32_t n, slices, add;
};

/* How many column slices gemm_cm.comp cuts a product of toks tokens into: enough for about 128
 * workgroups where its 64 x 64 tiles number fewer than 64 (decode steps of 9 to 63 sequences: a
 * 1B's 2048-row products made 32 workgroups, its k and v 8, on a GPU of 132 multiprocessors), each
 * slice at least 256 columns; 1: not cut. */
static int column_slices(const struct mat *w, int toks) {
    int64_t tiles = (w->n_rows + 63) / 64 * ((toks + 63) / 64);
    if (tiles >= 64)
        return 1;
    int64_t want = (128 + tiles - 1) / tiles, most = w->n_cols / 256;
    return (int)(want < most ? want : most > 1 ? most : 1);
}

/* gemm_cm.comp's product of a.n tokens (its arguments but the slices set), cut into at most
 * slices column slices (column_slices'), their sums then added up into y by split_sum.comp
 * (behind the tokens' halves in the scratch buffer, made first: partial, their bytes). */
static void coopmat_product(struct vk_state *s, const struct weight_shaders *sh, struct gemm_args a,
                            int slices, uint64_t partial) {
    uint32_t groups_x = (a.rows + 63) / 64, groups_y = (a.n + 63) / 64;
    a.slice = a.cols, a.part = 0;
    if (slices > 1) {
        /* slices of whole 128-column steps; the last may be shorter */
        uint32_t per = (a.cols + (uint32_t)slices - 1) / (uint32_t)slices;
        a.slice = (per + 127) / 128 * 128;
        slices = (int)((a.cols + a.slice - 1) / a.slice);
        a.part = partial;
    }
    vk_dispatch(s, sh->gemm_cm, &a, sizeof a, groups_x, groups_y, (uint32_t)slices);
    if (slices > 1) {
        struct split_sum_args sum = {partial, a.y, a.rows * a.n, (uint32_t)slices, a.add};
        vk_dispatch(s, VK_SHADER_split_sum, &sum, sizeof sum, vk_groups((size_t)a.rows * a.n), 1,
                    1);
    }
}

/* How many 64-column steps a trip of gemm_cm2.comp's loop takes (its UNROLL) for f16 weights (sh
 * with f16's 128 x 256 tile) over span columns: the most, up to the device's cm2_unroll, that
 * divides the span's steps; 1 for the quantized types (their superblocks' steps are unrolled). */
static uint32_t cm2_unroll(const struct vk_state *s, const struct weight_shaders *sh,
                           uint32_t span) {
    uint32_t u = (uint32_t)s->d->cm2_unroll;
    if (sh->gemm_cm2[1] == VK_SHADER_COUNT || span % 64)
        return 1;
    while (u > 1 && (span / 64) % u)
        u--;
    return u;
}

/* gemm_cm2.comp's product at cm2_tiles[tile] (of a second and third matrix too where a->w2 and
 * a->w3 are set), its pipeline specialized to the weights' shape: rows (where all have the same),
 * columns and row stride then constants to the driver's compiler (a pipeline for each shape, a
 * model's few). On an H200 the 8B Q4_K_M's pp512 ran 1.6% faster that way (10138 against 9981
 * t/s), the 1B's no differently (session 34). The tile's sides and k step are specialization
 * constants too (those of cm2_tiles), and the steps a trip of its loop takes (cm2_unroll). */
static void cm2_product(struct vk_state *s, const struct weight_shaders *sh,
                        const struct gemm_args *a, int tile, int slices, uint64_t partial) {
    enum vk_shader shader = sh->gemm_cm2[tile];
    uint32_t bm = cm2_tiles[tile].rows, bn = cm2_tiles[tile].tokens;
    bool shapes = s->d->cm2_shapes,
         one_height = (!a->w2 || a->rows2 == a->rows) && (!a->w3 || a->rows3 == a->rows);
    uint32_t spec[VK_SPEC] = {shapes && one_height ? a->rows : 0,
                              shapes ? a->cols : 0,
                              shapes ? a->row_bytes : 0,
                              bm,
                              bn,
                              64,
                              slices > 1 ? a->cols / (uint32_t)slices : 0,
                              cm2_unroll(s, sh, a->cols / (uint32_t)slices)};
    uint32_t tiles = (a->rows + bm - 1) / bm + (a->w2 ? (a->rows2 + bm - 1) / bm : 0) +
                     (a->w3 ? (a->rows3 + bm - 1) / bm : 0);
    /* cut into slices (alike, of whole 64-column steps: cm2_slices): each matrix's sums to a slab
     * of partial ([slice][n][rows]), then added into its y */
    struct gemm_args cut = *a;
    uint64_t *ys[3] = {&cut.y, &cut.y2, &cut.y3}, at = partial;
    uint32_t rows[3] = {a->rows, a->rows2, a->rows3};
    for (int m = 0; slices > 1 && m < 3; m++)
        if (*ys[m]) {
            *ys[m] = at;
            at += ((uint64_t)slices * a->n * rows[m] * 4 + 255) / 256 * 256;
        }
    vk_dispatch_special(s, shader, spec, &cut, sizeof cut, tiles, (a->n + bn - 1) / bn,
                        (uint32_t)slices);
    cuts_taken += slices > 1;
    const uint64_t real[3] = {a->y, a->y2, a->y3};
    for (int m = 0; slices > 1 && m < 3; m++)
        if (real[m]) {
            struct split_sum_args sum = {*ys[m], real[m], rows[m] * a->n, (uint32_t)slices, a->add};
            vk_dispatch(s, VK_SHADER_split_sum, &sum, sizeof sum, vk_groups((size_t)rows[m] * a->n),
                        1, 1);
        }
}

/* y = W x (or y += W x: add): up to 8 tokens through matvec.comp (4 rows a workgroup), more
 * through gemm_cm2.comp or gemm_cm.comp where the device has cooperative matrices (tiles as
 * coopmat2_tile says; 64 x 64), else gemm.comp (64 x 64). */
static void matmul_quant(struct backend *b, const struct mat *w, const struct weight_shaders *sh,
                         const float *x, float *y, int n, bool add) {
    struct vk_state *s = vk_of(b);
    if (matvec_takes(w, x, n)) {
        struct x_in in = matvec_input(b, x_form(s, sh, w->type), x, NULL, n, w->n_cols);
        enum vk_shader group = add ? group_form(s, sh, w, n) : VK_SHADER_COUNT;
        bool wait = group != VK_SHADER_COUNT;
        if (in.x)
            matvec(s, sh, 1, w, in, on_bytes(s, sh), &y, n, add ? MV_ADD : MV_SET, 0, 0, wait);
        if (in.x && wait)
            waits_for_groups(s, group);
        return;
    }
    struct mat halves;
    struct weight_shaders f16;
    if (dequantizes(s, sh, w, y, n) && weights_as_halves(s, w, sh, &halves)) {
        weight_shaders(OX_DTYPE_F16, &f16);
        matmul_quant(b, &halves, &f16, x, y, n, add);
        return;
    }
    /* token rows past 2^31 floats of x or y would pass the shader's 32-bit indices */
    int64_t widest = w->n_rows > w->n_cols ? w->n_rows : w->n_cols;
    int step = (int64_t)INT32_MAX / widest < 64 * 65535 ? (int)(INT32_MAX / widest) : 64 * 65535;
    for (int t0 = 0; t0 < n; t0 += step) {
        int toks = n - t0 < step ? n - t0 : step;
        struct gemm_args a = {.w = vk_addr(w->data),
                              .x = vk_addr(x) + (uint64_t)t0 * (uint64_t)w->n_cols * sizeof(float),
                              .y = vk_addr(y) + (uint64_t)t0 * (uint64_t)w->n_rows * sizeof(float),
                              .tab = vk_addr(s->d->tables),
                              .rows = (uint32_t)w->n_rows,
                              .cols = (uint32_t)w->n_cols,
                              .n = (uint32_t)toks,
                              .row_bytes = (uint32_t)w->row_bytes,
                              .add = add,
                              .slice = (uint32_t)w->n_cols};
        bool cm = s->d->coopmat && sh->gemm_cm != VK_SHADER_COUNT;
        int tile = cm ? coopmat2_tile(s, sh, w, a.y, toks) : -1;
        int slices = cm && tile < 0 ? column_slices(w, toks) : 1;
        int cut = cm2_slices(s, sh, w, toks, tile); /* 64 x 64's product on 128 x 256, cut */
        if (cut > 1)
            tile = 1, slices = cut;
        uint64_t partial = 0;
        if (cm) { /* gemm_cm(2).comp read x as f16; gemm_cm's slices' sums go behind them */
            size_t halves = ((size_t)toks * (size_t)w->n_cols * 2 + 255) / 256 * 256;
            size_t sums = slices > 1 ? (size_t)slices * (size_t)toks * (size_t)w->n_rows * 4 : 0;
            if (sums && !scratch(s, halves + sums))
                return;
            const void *x16 = x_as_halves(s, a.x, (size_t)toks * (size_t)w->n_cols);
            if (!x16)
                return;
            a.x = vk_addr(x16), partial = vk_addr(x16) + halves;
        }
        if (cm && tile < 0)
            coopmat_product(s, sh, a, slices, partial);
        else if (tile >= 0)
            cm2_product(s, sh, &a, tile, slices, partial);
        else
            vk_dispatch(s, sh->gemm, &a, sizeof a, (uint32_t)(w->n_rows + 63) / 64,
                        (uint32_t)(toks + 63) / 64, 1);
        if (cm) /* it read x's halves */
            scratch_read(s, a.y, (uint64_t)toks * (uint64_t)w->n_rows * sizeof(float));
    }
}

void vk_matmul(struct backend *b, const struct mat *w, const float *x, float *y, int n) {
    if (n <= 0 || w->n_rows <= 0)
        return;
    struct weight_shaders sh;
    if (!weight_shaders(w->type, &sh)) {
        vk_note(vk_of(b), VK_ERROR_FORMAT_NOT_SUPPORTED, "matmul: a weight type without a shader");
        return;
    }
    if (w->n_cols % 32 == 0)
        matmul_quant(b, w, &sh, x, y, n, false);
    else if (w->type == OX_DTYPE_F32 || w->type == OX_DTYPE_F16)
        matmul_plain(b, w, x, y, n);
    else
        vk_note(vk_of(b), VK_ERROR_FORMAT_NOT_SUPPORTED, "matmul: rows not whole groups of 32");
}

bool vk_matmul_add(struct backend *b, const struct mat *w, const float *x, float *y, int n) {
    struct weight_shaders sh;
    if (n <= 0 || w->n_rows <= 0 || w->n_cols % 32 != 0 || !weight_shaders(w->type, &sh))
        return false;
    matmul_quant(b, w, &sh, x, y, n, true);
    return true;
}

/* Whether count matrices (up to 3) of one width go through matvec.comp: one dispatch where they
 * are of one type; on the integer form a dispatch for each run of one type, x made bytes once
 * (RMSNorm'd in the same op where norm is given, as f16 weights' halves are: the float form leaves
 * that to the caller). */
static bool matvec_fuses(struct vk_state *s, int count, const struct mat *w, const float *x,
                         const struct norm_in *norm, int n) {
    struct weight_shaders sh;
    if (count < 1 || count > 3 || !matvec_takes(&w[0], x, n))
        return false;
    bool one_type = true, bytes = true;
    for (int m = 0; m < count; m++) {
        if (!weight_shaders(w[m].type, &sh) || w[m].n_cols != w[0].n_cols ||
            !matvec_takes(&w[m], x, n))
            return false;
        one_type = one_type && w[m].type == w[0].type, bytes = bytes && on_bytes(s, &sh);
    }
    return bytes || (one_type && (!norm || w[0].type == OX_DTYPE_F16));
}

/* Whether count (2 or 3) products of n tokens by these matrices go through one dispatch of
 * gemm_cm2.comp (cm2_multi): all of one type and width, each one that coopmat2_tile takes alone;
 * *tile then the one it chooses for all their rows together. The 1B Q4_K_M's sliced gate and up
 * (2048 rows each, 64 x 64 tiles alone) then take 64 x 256, its q, k and v (3072 rows) 32 x 256:
 * on an H200 its pp512 went from 43321 / 43470 t/s to 50194 / 50312 with the tile of all the
 * rows, to 51862 / 51955 with 32 x 256 too (session 34). Each alone: the 8B's k and v (1024
 * rows, left to gemm_cm.comp or made f16) stay apart from q; merged into q's 64 x 256 tiles the
 * 8B's pp512 read 10781 / 10789 against 10827 / 10857. */
static bool cm2_takes(const struct vk_state *s, int count, const struct mat *w, float *const *y,
                      int n, int *tile) {
    struct weight_shaders shaders, *sh = &shaders;
    int64_t widest = w->n_cols;
    for (int m = 0; m < count; m++)
        widest = w[m].n_rows > widest ? w[m].n_rows : widest;
    if (!s->d->coopmat2 || !weight_shaders(w->type, sh) || sh->gemm_cm == VK_SHADER_COUNT ||
        n > INT32_MAX / widest)
        return false;
    struct mat all = *w; /* the tile chosen for all the rows together */
    all.n_rows = 0;
    for (int m = 0; m < count; m++) {
        if (w[m].type != w->type || w[m].n_cols != w->n_cols || w[m].row_bytes != w->row_bytes ||
            coopmat2_tile(s, sh, &w[m], vk_addr(y[m]), n) < 0)
            return false;
        all.n_rows += w[m].n_rows;
    }
    *tile = coopmat2_tile(s, sh, &all, vk_addr(y[0]), n);
    return *tile >= 0;
}

/* Products of one x by up to three matrices of one type and width (a prompt's gate and up; its
 * q, k and v) in one dispatch of gemm_cm2.comp, on the tile cm2_takes chose for them: their tiles
 * in one grid, so that the last wave of one fills up with the next's (the 8B's 14336-row gate and
 * up make 448 tiles of 64 x 256 each, 3.4 waves on 132 multiprocessors; the 1B's k and v make 64
 * small tiles each). On an H200 (session 34) gate and up took 666 us together where they had taken
 * 379 each, and q, k and v together ran the 1B's pp512 at 43077 / 43531 t/s against 41674 / 41594
 * (the 1B F16's at 62500 / 63012 against 58766 / 58772). */
static void cm2_multi(struct vk_state *s, int count, const struct mat *w, const float *x,
                      float *const *y, int n, int tile) {
    struct weight_shaders sh;
    weight_shaders(w->type, &sh);
    struct mat all = *w; /* f16's too few large tiles cut into slices for all the rows */
    bool aligned = true; /* each matrix's slab of sums 16-byte aligned */
    all.n_rows = 0;
    for (int m = 0; m < count; m++)
        all.n_rows += w[m].n_rows, aligned = aligned && w[m].n_rows % 4 == 0;
    int slices = aligned ? cm2_slices(s, &sh, &all, n, tile) : 1;
    tile = slices > 1 ? 1 : tile;
    size_t halves = ((size_t)n * (size_t)w->n_cols * 2 + 255) / 256 * 256;
    size_t sums = slices > 1 ? (size_t)slices * (size_t)n * (size_t)all.n_rows * 4 + 3 * 256 : 0;
    if (sums && !scratch(s, halves + sums))
        return; /* noted */
    const void *x16 = x_as_halves(s, vk_addr(x), (size_t)n * (size_t)w->n_cols);
    if (!x16)
        return; /* noted */
    const struct mat *last = &w[count - 1];
    struct gemm_args a = {.w = vk_addr(w->data),
                          .x = vk_addr(x16),
                          .y = vk_addr(y[0]),
                          .tab = vk_addr(s->d->tables),
                          .rows = (uint32_t)w->n_rows,
                          .cols = (uint32_t)w->n_cols,
                          .n = (uint32_t)n,
                          .row_bytes = (uint32_t)w->row_bytes,
                          .slice = (uint32_t)w->n_cols,
                          .w2 = vk_addr(w[1].data),
                          .y2 = vk_addr(y[1]),
                          .rows2 = (uint32_t)w[1].n_rows,
                          .w3 = count == 3 ? vk_addr(last->data) : 0,
                          .y3 = count == 3 ? vk_addr(y[2]) : 0,
                          .rows3 = count == 3 ? (uint32_t)last->n_rows : 0};
    cm2_product(s, &sh, &a, tile, slices, vk_addr(x16) + halves);
    for (int m = 0; m < count; m++) /* it read x's halves */
        scratch_read(s, vk_addr(y[m]), (uint64_t)n * (uint64_t)w[m].n_rows * sizeof(float));
}

/* A prompt's products of one x by up to three matrices (no norm): each run of matrices that
 * cm2_multi takes in one dispatch, the rest apart; false where no run is (the caller runs
 * them). */
static bool prompt_multi(struct backend *b, int count, const struct mat *w, const float *x,
                         float *const *y, int n) {
    struct vk_state *s = vk_of(b);
    /* run[m]: the matrices from m in one dispatch, on tile[m] */
    int taken = 0, run[3] = {1, 1, 1}, tile[3];
    for (int m = 0; m < count; m += run[m]) {
        for (int k = count - m; k >= 2 && run[m] == 1; k--)
            if (cm2_takes(s, k, &w[m], &y[m], n, &tile[m]))
                run[m] = k;
        taken += run[m] > 1;
    }
    if (!taken)
        return false;
    for (int m = 0; m < count; m += run[m])
        if (run[m] > 1)
            cm2_multi(s, run[m], &w[m], x, &y[m], n, tile[m]);
        else
            vk_matmul(b, &w[m], x, y[m], n);
    return true;
}

bool vk_matmul_multi(struct backend *b, int count, const struct mat *w, const float *x,
                     const struct norm_in *norm, float *const *y, int n) {
    struct vk_state *s = vk_of(b);
    if (count >= 2 && !norm && n > 8 && prompt_multi(b, count, w, x, y, n))
        return true;
    if (!matvec_fuses(s, count, w, x, norm, n))
        return false;
    struct weight_shaders sh;
    weight_shaders(w[0].type, &sh);
    bool bytes = on_bytes(s, &sh);
    struct x_in in = matvec_input(b, x_form(s, &sh, w[0].type), x, norm, n, w[0].n_cols);
    /* q, k and v's products wait for the op after them, which may have them rotate and store
     * them too (vk_rope_fold.c); runs of two types (a Q4_K_M's q4_K q and k, q6_K v) each read
     * x and write their own y and cache rows, so they run side by side (vk_join_waiting): on an
     * H200 the 1B Q4_K_M's tg128 went from 984.5 / 961.9 t/s to 1036.9 / 1010.5, the 8B's from
     * 344.7 / 342.4 to 353.2 / 351.5 (the q6_K v's product, 7.6 us a layer, was a dispatch of
     * its own after q and k's) */
    bool later = count == 3 && s->d->folds;
    for (int m = 0, run; in.x && m < count; m += run) {
        for (run = 1; m + run < count && w[m + run].type == w[m].type; run++)
            ;
        weight_shaders(w[m].type, &sh);
        if (m > 0 && later)
            vk_join_waiting(s);
        matvec(s, &sh, run, w + m, in, bytes, y + m, n, MV_SET, 0, 0, later);
    }
    return true;
}

bool vk_matmul_glu(struct backend *b, enum glu_kind kind, const struct mat *gate,
                   const struct mat *up, const float *x, const struct norm_in *norm, float *y,
                   int n) {
    struct vk_state *s = vk_of(b);
    struct mat both[2] = {*gate, *up};
    float *out[2] = {y, y};
    struct weight_shaders sh;
    if (gate->type != up->type || gate->n_rows != up->n_rows ||
        !matvec_fuses(s, 2, both, x, norm, n))
        return false;
    weight_shaders(gate->type, &sh);
    enum x_form form = x_form(s, &sh, gate->type);
    /* f16 weights' GLU writes its output's f16 copy too, for down (matvec_input finds it): behind
     * x's in scratch, which is made big enough first (growing it after would lose x's) */
    size_t in_bytes = ((size_t)n * (size_t)gate->n_cols * 2 + 255) / 256 * 256,
           count = (size_t)n * (size_t)gate->n_rows;
    bool halves = form == X_HALVES && scratch(s, s->held_at + in_bytes + count * 2);
    struct x_in in = matvec_input(b, form, x, norm, n, gate->n_cols);
    if (!in.x)
        return true;
    /* x's offset in scratch, plus (x itself where the product takes its norm in) */
    size_t at = halves && !in.fold ? (size_t)(in.x - vk_addr(s->scratch)) + in_bytes : 0;
    enum vk_shader group = group_form(s, &sh, gate, n);
    bool wait = group != VK_SHADER_COUNT;
    matvec(s, &sh, 2, both, in, on_bytes(s, &sh), out, n, MV_GLU, (int)kind,
           halves ? vk_addr(s->scratch) + at : 0, wait);
    if (wait)
        waits_for_groups(s, group);
    if (halves)
        scratch_made(s, X_HALVES, vk_addr(y), count), s->held_at = at;
    return true;
}

struct get_rows_args {
    uint64_t w, ids, y;
    uint32_t cols, n, row_elems;
};

struct get_rows_quant_args {
    uint64_t w, ids, y, tab;
    uint32_t cols, n, row_bytes;
};

void vk_get_rows(struct backend *b, const struct mat *w, const int32_t *ids, float *y, int n) {
    if (n <= 0)
        return;
    struct vk_state *s = vk_of(b);
    struct weight_shaders sh;
    if (!weight_shaders(w->type, &sh)) {
        vk_note(s, VK_ERROR_FORMAT_NOT_SUPPORTED, "get_rows: a weight type without a shader");
        return;
    }
    if (w->n_cols % 32 == 0) {
        struct get_rows_quant_args a = {vk_addr(w->data),      vk_addr(ids),        vk_addr(y),
                                        vk_addr(s->d->tables), (uint32_t)w->n_cols, (uint32_t)n,
                                        (uint32_t)w->row_bytes};
        vk_dispatch(s, sh.get_rows, &a, sizeof a, vk_groups((size_t)n * (size_t)w->n_cols / 32), 1,
                    1);
        return;
    }
    if (w->type != OX_DTYPE_F32 && w->type != OX_DTYPE_F16) {
        vk_note(s, VK_ERROR_FORMAT_NOT_SUPPORTED, "get_rows: rows not whole groups of 32");
        return;
    }
    bool half = w->type == OX_DTYPE_F16;
    struct get_rows_args args = {vk_addr(w->data), vk_addr(ids),
                                 vk_addr(y),       (uint32_t)w->n_cols,
                                 (uint32_t)n,      (uint32_t)(w->row_bytes / (half ? 2 : 4))};
    vk_dispatch(s, half ? VK_SHADER_get_rows_f16 : VK_SHADER_get_rows_f32, &args, sizeof args,
                vk_groups((size_t)n * (size_t)w->n_cols), 1, 1);
}
