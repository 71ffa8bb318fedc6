/* dtype.c: the dtype traits table, built from OX_DTYPE_LIST, and the public dtype functions. */
#include "quant/dtype.h"

#include <inttypes.h>

#include "core/status.h"
#include "quant/blocks.h"
#include "quant/quantize.h"

/* What oxidize supplies for each type of OX_DTYPE_LIST, by the list's NAME: the C type of one
 * block (one element for the plain types), its element count, its reference dequantizer, its
 * quantizer from float (NULL: not a weight type), whether quantizing needs an importance
 * matrix (ggml_quantize_requires_imatrix: these types are too coarse without one), and the type
 * activations are rounded to for dot products with it (ggml-cpu's vec_dot_type).
 * A type added to the list without an entry here fails to compile. */
#define IMPL_F32(X)     X(float, 1, dequant_f32, quant_f32, false, OX_DTYPE_F32)
#define IMPL_F16(X)     X(uint16_t, 1, dequant_f16, quant_f16, false, OX_DTYPE_F16)
#define IMPL_BF16(X)    X(uint16_t, 1, dequant_bf16, quant_bf16, false, OX_DTYPE_BF16)
#define IMPL_F64(X)     X(double, 1, dequant_f64, NULL, false, OX_DTYPE_F64)
#define IMPL_I8(X)      X(int8_t, 1, dequant_i8, NULL, false, OX_DTYPE_I8)
#define IMPL_I16(X)     X(int16_t, 1, dequant_i16, NULL, false, OX_DTYPE_I16)
#define IMPL_I32(X)     X(int32_t, 1, dequant_i32, NULL, false, OX_DTYPE_I32)
#define IMPL_I64(X)     X(int64_t, 1, dequant_i64, NULL, false, OX_DTYPE_I64)
#define IMPL_Q1_0(X)    X(struct block_q1_0, 128, dequant_q1_0, quant_q1_0, false, OX_DTYPE_Q8_0)
#define IMPL_Q2_0(X)    X(struct block_q2_0, 64, dequant_q2_0, quant_q2_0, false, OX_DTYPE_Q8_0)
#define IMPL_Q4_0(X)    X(struct block_q4_0, 32, dequant_q4_0, quant_q4_0, false, OX_DTYPE_Q8_0)
#define IMPL_Q4_1(X)    X(struct block_q4_1, 32, dequant_q4_1, quant_q4_1, false, OX_DTYPE_Q8_1)
#define IMPL_Q5_0(X)    X(struct block_q5_0, 32, dequant_q5_0, quant_q5_0, false, OX_DTYPE_Q8_0)
#define IMPL_Q5_1(X)    X(struct block_q5_1, 32, dequant_q5_1, quant_q5_1, false, OX_DTYPE_Q8_1)
#define IMPL_Q8_0(X)    X(struct block_q8_0, 32, dequant_q8_0, quant_q8_0, false, OX_DTYPE_Q8_0)
#define IMPL_Q8_1(X)    X(struct block_q8_1, 32, dequant_q8_1, quant_q8_1, false, OX_DTYPE_Q8_1)
#define IMPL_Q2_K(X)    X(struct block_q2_K, QK_SUPER, dequant_q2_K, quant_q2_K, false, OX_DTYPE_Q8_K)
#define IMPL_Q3_K(X)    X(struct block_q3_K, QK_SUPER, dequant_q3_K, quant_q3_K, false, OX_DTYPE_Q8_K)
#define IMPL_Q4_K(X)    X(struct block_q4_K, QK_SUPER, dequant_q4_K, quant_q4_K, false, OX_DTYPE_Q8_K)
#define IMPL_Q5_K(X)    X(struct block_q5_K, QK_SUPER, dequant_q5_K, quant_q5_K, false, OX_DTYPE_Q8_K)
#define IMPL_Q6_K(X)    X(struct block_q6_K, QK_SUPER, dequant_q6_K, quant_q6_K, false, OX_DTYPE_Q8_K)
#define IMPL_Q8_K(X)    X(struct block_q8_K, QK_SUPER, dequant_q8_K, quant_q8_K, false, OX_DTYPE_Q8_K)
#define IMPL_IQ2_XXS(X) X(struct block_iq2_xxs, QK_SUPER, dequant_iq2_xxs, quant_iq2_xxs, true, OX_DTYPE_Q8_K)
#define IMPL_IQ2_XS(X)  X(struct block_iq2_xs, QK_SUPER, dequant_iq2_xs, quant_iq2_xs, true, OX_DTYPE_Q8_K)
#define IMPL_IQ2_S(X)   X(struct block_iq2_s, QK_SUPER, dequant_iq2_s, quant_iq2_s, false, OX_DTYPE_Q8_K)
#define IMPL_IQ3_XXS(X) X(struct block_iq3_xxs, QK_SUPER, dequant_iq3_xxs, quant_iq3_xxs, false, OX_DTYPE_Q8_K)
#define IMPL_IQ3_S(X)   X(struct block_iq3_s, QK_SUPER, dequant_iq3_s, quant_iq3_s, false, OX_DTYPE_Q8_K)
#define IMPL_IQ1_S(X)   X(struct block_iq1_s, QK_SUPER, dequant_iq1_s, quant_iq1_s, true, OX_DTYPE_Q8_K)
#define IMPL_IQ1_M(X)   X(struct block_iq1_m, QK_SUPER, dequant_iq1_m, quant_iq1_m, false, OX_DTYPE_Q8_K)
#define IMPL_IQ4_NL(X)  X(struct block_iq4_nl, 32, dequant_iq4_nl, quant_iq4_nl, false, OX_DTYPE_Q8_0)
#define IMPL_IQ4_XS(X)  X(struct block_iq4_xs, QK_SUPER, dequant_iq4_xs, quant_iq4_xs, false, OX_DTYPE_Q8_K)
#define IMPL_MXFP4(X)   X(struct block_mxfp4, 32, dequant_mxfp4, quant_mxfp4, false, OX_DTYPE_Q8_0)
#define IMPL_NVFP4(X)   X(struct block_nvfp4, 64, dequant_nvfp4, quant_nvfp4, false, OX_DTYPE_Q8_0)
#define IMPL_TQ1_0(X)   X(struct block_tq1_0, QK_SUPER, dequant_tq1_0, quant_tq1_0, false, OX_DTYPE_Q8_K)
#define IMPL_TQ2_0(X)   X(struct block_tq2_0, QK_SUPER, dequant_tq2_0, quant_tq2_0, false, OX_DTYPE_Q8_K)

#define LAYOUT_(layout, block, deq, q, imx, vdt)  layout
#define BLOCK_(layout, block, deq, q, imx, vdt)   block
#define DEQUANT_(layout, block, deq, q, imx, vdt) deq
#define QUANT_(layout, block, deq, q, imx, vdt)   q
#define IMATRIX_(layout, block, deq, q, imx, vdt) imx
#define VDT_(layout, block, deq, q, imx, vdt)     vdt

/* The list's sizes must be the ones the dequantizers are written for. */
#define CHECK_(NAME, id, str, blck, size)                                                          \
    _Static_assert(sizeof(IMPL_##NAME(LAYOUT_)) == (size), str ": block bytes differ");            \
    _Static_assert(IMPL_##NAME(BLOCK_) == (blck), str ": block size differs");                     \
    _Static_assert((id) >= 0 && (id) < OX_DTYPE_COUNT, str ": id out of range");
OX_DTYPE_LIST(CHECK_)
#undef CHECK_

/* Indexed by type id; removed ids are left zero (name NULL). */
static const struct dtype_traits traits_table[OX_DTYPE_COUNT] = {
#define ENTRY_(NAME, id, str, blck, size)                                                          \
    [id] = {.name = str,                                                                           \
            .block_size = (blck),                                                                  \
            .type_size = (size),                                                                   \
            .is_quantized = (blck) > 1,                                                            \
            .to_float = IMPL_##NAME(DEQUANT_),                                                   \
            .from_float = IMPL_##NAME(QUANT_),                                                   \
            .needs_imatrix = IMPL_##NAME(IMATRIX_),                                              \
            .vec_dot_type = IMPL_##NAME(VDT_)},
    OX_DTYPE_LIST(ENTRY_)
#undef ENTRY_
};

const struct dtype_traits *dtype_get(int id) {
    if (id < 0 || id >= OX_DTYPE_COUNT || !traits_table[id].name)
        return NULL;
    return &traits_table[id];
}

bool ox_dtype_valid(int id) {
    return dtype_get(id) != NULL;
}

const char *ox_dtype_name(enum ox_dtype type) {
    const struct dtype_traits *t = dtype_get((int)type);
    return t ? t->name : NULL;
}

int64_t ox_dtype_block_size(enum ox_dtype type) {
    const struct dtype_traits *t = dtype_get((int)type);
    return t ? t->block_size : 0;
}

size_t ox_dtype_type_size(enum ox_dtype type) {
    const struct dtype_traits *t = dtype_get((int)type);
    return t ? t->type_size : 0;
}

enum ox_status ox_dequantize(enum ox_dtype type, const void *src, float *dst, int64_t n) {
    const struct dtype_traits *t = dtype_get((int)type);
    if (!t)
        return ox_fail(OX_ERR_INVALID_ARG, "dequantize: invalid type id %d", (int)type);
    if (!src || !dst)
        return ox_fail(OX_ERR_INVALID_ARG, "dequantize: %s is NULL", !src ? "src" : "dst");
    if (n < 0)
        return ox_fail(OX_ERR_INVALID_ARG, "dequantize: negative element count n=%" PRId64, n);
    if (n % t->block_size != 0)
        return ox_fail(OX_ERR_INVALID_ARG,
                       "dequantize: n=%" PRId64 " is not a multiple of %s's block size %" PRId64, n,
                       t->name, t->block_size);
    t->to_float(src, dst, n);
    return OX_OK;
}

bool ox_dtype_can_quantize(enum ox_dtype type) {
    const struct dtype_traits *t = dtype_get((int)type);
    /* q8_1 and q8_K hold activations inside dot products, never stored weights */
    return t && t->from_float && type != OX_DTYPE_Q8_1 && type != OX_DTYPE_Q8_K;
}

bool ox_dtype_needs_imatrix(enum ox_dtype type) {
    const struct dtype_traits *t = dtype_get((int)type);
    return t && t->needs_imatrix;
}

enum ox_status ox_quantize(enum ox_dtype type, const float *src, void *dst, int64_t n_rows,
                           int64_t n_per_row, const float *imatrix) {
    const struct dtype_traits *t = dtype_get((int)type);
    if (!t || !t->from_float)
        return ox_fail(OX_ERR_UNSUPPORTED, "quantize: cannot quantize to %s",
                       t ? t->name : "an invalid type");
    if (!src || !dst)
        return ox_fail(OX_ERR_INVALID_ARG, "quantize: %s is NULL", !src ? "src" : "dst");
    if (n_rows < 0 || n_per_row <= 0 || n_per_row % t->block_size != 0)
        return ox_fail(OX_ERR_INVALID_ARG,
                       "quantize: %" PRId64 " x %" PRId64 " does not fit %s's block size %" PRId64,
                       n_rows, n_per_row, t->name, t->block_size);
    if (t->needs_imatrix && !imatrix)
        return ox_fail(OX_ERR_INVALID_ARG, "quantize: %s needs an importance matrix", t->name);
    t->from_float(src, dst, n_rows, n_per_row, imatrix);
    return OX_OK;
}
