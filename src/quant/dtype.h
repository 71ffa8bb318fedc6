/* dtype.h: the dtype traits table (ggml's type_traits[]): sizes, names, reference kernels. */
#ifndef OX_QUANT_DTYPE_H
#define OX_QUANT_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oxidize.h"

/* Convert n elements (a multiple of the block size) from the type's layout to float. */
typedef void (*dtype_to_float_fn)(const void *src, float *dst, int64_t n);

/* Quantize n_rows rows of n_per_row floats (a multiple of the block size) into dst, row after
 * row; imatrix is NULL or n_per_row importance weights for the columns (llama.cpp's
 * quant_weights). Returns the bytes written: n_rows * n_per_row / block_size * type_size. */
typedef size_t (*dtype_from_float_fn)(const float *src, void *dst, int64_t n_rows,
                                      int64_t n_per_row, const float *imatrix);

struct dtype_traits {
    const char *name;         /* ggml's type name, "q4_K" */
    int64_t block_size;       /* elements per block */
    size_t type_size;         /* bytes per block */
    bool is_quantized;        /* block_size > 1 or a packed format */
    dtype_to_float_fn to_float;
    dtype_from_float_fn from_float; /* NULL for types that are not quantization targets */
    bool needs_imatrix;             /* from_float requires an importance matrix */
    enum ox_dtype vec_dot_type;     /* activations are rounded to this type for dot products
                                       with weights of this type (llama.cpp's CPU backend) */
};

/* Traits of type id, or NULL when id is not a valid type (removed ids included). */
const struct dtype_traits *dtype_get(int id);

#endif
