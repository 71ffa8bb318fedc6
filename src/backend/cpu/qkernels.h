/* qkernels.h: the matmul kernels as data: one table per instruction-set level indexed by dtype
 * (qkernels.c), the structs each kernel file exports into them, and the macros that build those
 * structs, so that every level has the same kernel shapes made from its own intrinsics. */
#ifndef OX_BACKEND_CPU_QKERNELS_H
#define OX_BACKEND_CPU_QKERNELS_H

#include "backend/cpu/qmatmul.h"
#include "quant/blocks.h"

/* ---- the tables ------------------------------------------------------------------------------
 * The kernels of one level by dtype (NULL: none at that level). Each architecture's build has its
 * own levels only; qkernel_for takes, per dtype, the first level this CPU runs, best first, that
 * has a kernel for it. */
extern const struct qkernel *const qkernels_avx512[OX_DTYPE_COUNT];
extern const struct qkernel *const qkernels_avx2vnni[OX_DTYPE_COUNT];
extern const struct qkernel *const qkernels_avx2[OX_DTYPE_COUNT];
extern const struct qkernel *const qkernels_neon_i8mm[OX_DTYPE_COUNT];
extern const struct qkernel *const qkernels_neon_dotprod[OX_DTYPE_COUNT];
extern const struct qkernel *const qkernels_neon[OX_DTYPE_COUNT];
extern const struct qkernel *const qkernels_wasm_simd[OX_DTYPE_COUNT];

/* The kernel of a dtype at a level as its file exports it: qk_<level>_<type>. level may be a
 * macro (QK_LEVEL in the files built once per level, level_avx2.h and level_neon.h). */
#define QK_NAME(level, type)  QK_NAME_(level, type)
#define QK_NAME_(level, type) qk_##level##_##type

/* The dtypes of every SIMD level, as X(level, DTYPE, type), by the file that holds their kernels
 * in each instruction set: the 32-block types (qkernels_block32_<isa>.c), the k-quants and iq4_xs
 * (qkernels_kquant_<isa>.c), and the float types (qkernels_float_<isa>.c, built once per
 * instruction set: they have no byte products for the integer levels to differ in). */
#define QKERNELS_BLOCK32(X, level)                                                                 \
    X(level, Q4_0, q4_0)                                                                           \
    X(level, Q4_1, q4_1)                                                                           \
    X(level, Q5_0, q5_0)                                                                           \
    X(level, Q5_1, q5_1)                                                                           \
    X(level, Q8_0, q8_0)                                                                           \
    X(level, IQ4_NL, iq4_nl)
#define QKERNELS_KQUANT(X, level)                                                                  \
    X(level, Q2_K, q2_K)                                                                           \
    X(level, Q3_K, q3_K)                                                                           \
    X(level, Q4_K, q4_K)                                                                           \
    X(level, Q5_K, q5_K)                                                                           \
    X(level, Q6_K, q6_K)                                                                           \
    X(level, IQ4_XS, iq4_xs)
#define QKERNELS_FLOAT(X, level)                                                                   \
    X(level, F32, f32)                                                                             \
    X(level, F16, f16)                                                                             \
    X(level, BF16, bf16)

#define QKERNEL_DECLARE(level, DTYPE, type) extern const struct qkernel QK_NAME(level, type);
#define QKERNEL_ENTRY(level, DTYPE, type)   [OX_DTYPE_##DTYPE] = &QK_NAME(level, type),

/* Defines the table `name` of a level: the integer kernels of `level` and the float kernels of
 * `float_level` (its instruction set's), at their dtypes; every other entry NULL. */
#define QKERNEL_TABLE(name, level, float_level)                                                    \
    QKERNELS_BLOCK32(QKERNEL_DECLARE, level)                                                       \
    QKERNELS_KQUANT(QKERNEL_DECLARE, level)                                                        \
    QKERNELS_FLOAT(QKERNEL_DECLARE, float_level)                                                   \
    const struct qkernel *const name[OX_DTYPE_COUNT] = {                                           \
        QKERNELS_BLOCK32(QKERNEL_ENTRY, level) QKERNELS_KQUANT(QKERNEL_ENTRY, level)               \
            QKERNELS_FLOAT(QKERNEL_ENTRY, float_level)}

/* ---- the shapes every level builds from its own intrinsics ----------------------------------
 * A kernel file writes its loops with intrinsics, then exports one struct qkernel per dtype with
 * these macros. They take the file's row tile size NR x NC, its tokens per batch tile PACK_NC
 * (the integer types) and the functions they name; level_name is the level as kernel names show
 * it ("q4_0 avx2"). */

/* A 32-block type: activations as xq8_32 (quantize: the level's xq8_32 quantizer, or its q8_1
 * form for q4_1 and q5_1, whose min term reads ggml's f16 sum), the row tile tile_<type>, and
 * batches repacked by repack_<type> for tile16; then any further fields (QPACK16_LAYOUT). */
#define DEFINE_BLOCK32_KERNEL(level, level_name, type, quantize, tile16_fn, ...)                   \
    const struct qkernel QK_NAME(level, type) = {.name = #type " " level_name,                     \
                                                 .x_row_bytes = xq8_32_row_bytes,                  \
                                                 .quantize_x = quantize,                           \
                                                 .x_to_float = xq8_32_to_float,                    \
                                                 .tile = tile_##type,                              \
                                                 .max_nr = NR,                                     \
                                                 .max_nc = NC,                                     \
                                                 .repack16 = repack_##type,                        \
                                                 .tile16 = tile16_fn,                              \
                                                 .pack_nc = PACK_NC,                               \
                                                 __VA_ARGS__};

/* The fields of q4_0 and q8_0 in their load-time layout (qpack16.c): the level's single-token
 * kernel gemv16_<type> over it and its unpack16_<type> into the batch scratch layout. */
#define QPACK16_LAYOUT(type)                                                                       \
    .packed_group_bytes = qpack16_group_bytes_##type, .pack = qpack16_pack_##type,                 \
    .gemv16 = gemv16_##type, .unpack16 = unpack16_##type, .file_row = qpack16_file_row_##type

/* The fields of q4_K and q6_K in their load-time layout: kpack16.c's functions and the level's
 * single-token kernel gemv16_<type> over it. */
#define KPACK16_LAYOUT(type)                                                                       \
    .packed_group_bytes = kpack16_group_bytes_##type, .pack = kpack16_pack_##type,                 \
    .gemv16 = gemv16_##type, .unpack16 = kpack16_unpack_##type,                                    \
    .file_row = kpack16_file_row_##type

/* A k-quant or iq4_xs: activations as ggml's q8_K, and the file's three loops over its struct
 * ktype (tile_k, repack_rows, tile16_k) instantiated with the type's kt_<type>, so that its
 * decoder inlines into each; then any further fields (KPACK16_LAYOUT). */
#define DEFINE_KQUANT_KERNEL(level, level_name, type, quantize, ...)                               \
    static void tile_##type(int64_t n, const uint8_t *w, size_t w_stride, int nr,                  \
                            const uint8_t *x, size_t x_stride, int nc, float *y,                   \
                            size_t y_stride) {                                                     \
        tile_k(&kt_##type, n, w, w_stride, nr, x, x_stride, nc, y, y_stride);                      \
    }                                                                                              \
    static void repack_##type(int64_t n, const uint8_t *w, size_t w_stride, int nr, void *dst) {   \
        repack_rows(&kt_##type, n, w, w_stride, nr, dst);                                          \
    }                                                                                              \
    static void tile16_##type(int64_t n, const void *packed, int nr, const uint8_t *x,             \
                              size_t x_stride, int nc, float *y, size_t y_stride) {                \
        tile16_k(&kt_##type, n, packed, nr, x, x_stride, nc, y, y_stride);                         \
    }                                                                                              \
    const struct qkernel QK_NAME(level, type) = {.name = #type " " level_name,                     \
                                                 .x_row_bytes = xq8_K_row_bytes,                   \
                                                 .quantize_x = quantize,                           \
                                                 .x_to_float = dequant_q8_K,                       \
                                                 .tile = tile_##type,                              \
                                                 .max_nr = NR,                                     \
                                                 .max_nc = NC,                                     \
                                                 .repack16 = repack_##type,                        \
                                                 .tile16 = tile16_##type,                          \
                                                 .pack_nc = PACK_NC,                               \
                                                 __VA_ARGS__};

/* A float type: single tokens through vec_tile_<type> (ggml's vec_dot order), batches from two
 * tokens on through tile16_fn (tinyBLAS's order, pack_nc tokens a tile) over the rows in place, as
 * ggml-cpu switches orders; activations rounded to the weight's dot type (x<type>_quantize). */
#define DEFINE_FLOAT_KERNEL(level, level_name, type, row_bytes, to_float, tile16_fn, pack_nc_)     \
    const struct qkernel QK_NAME(level, type) = {.name = #type " " level_name,                     \
                                                 .x_row_bytes = row_bytes,                         \
                                                 .quantize_x = x##type##_quantize,                 \
                                                 .x_to_float = to_float,                           \
                                                 .tile = vec_tile_##type,                          \
                                                 .max_nr = NR,                                     \
                                                 .max_nc = NC,                                     \
                                                 .repack16 = float_rows_record,                    \
                                                 .tile16 = tile16_fn,                              \
                                                 .pack_nc = pack_nc_,                              \
                                                 .min_pack_n = 2};

/* The row tile of a float type: each row and token through the file's vec_<type>, one dot product
 * at a time. */
#define DEFINE_VEC_TILE(type)                                                                      \
    static void vec_tile_##type(int64_t n, const uint8_t *w, size_t w_stride, int nr,              \
                                const uint8_t *x, size_t x_stride, int nc, float *y,               \
                                size_t y_stride) {                                                 \
        for (int c = 0; c < nc; c++)                                                               \
            for (int r = 0; r < nr; r++)                                                           \
                y[(size_t)c * y_stride + (size_t)r] =                                              \
                    vec_##type(w + (size_t)r * w_stride, x + (size_t)c * x_stride, n);             \
    }

/* The float types' "repack": their rows are read in place, so the scratch only records where the
 * 16 rows are (qkernels.c) for the level's tile16. */
struct float_rows {
    const uint8_t *w;
    size_t w_stride;
};
void float_rows_record(int64_t n, const uint8_t *w, size_t w_stride, int nr, void *dst);

#endif
