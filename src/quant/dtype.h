/* dtype.h: the dtype traits table (ggml's type_traits[]): sizes, names, reference kernels. */
#ifndef OX_QUANT_DTYPE_H
#define OX_QUANT_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oxidize.h"

/* Convert n elements (a multiple of the block size) from the type's layout to float. */
typedef void (*dtype_to_float_fn)(const void *src, float *dst, int64_t n);

struct dtype_traits {
    const char *name;         /* ggml's type name, "q4_K" */
    int64_t block_size;       /* elements per block */
    size_t type_size;         /* bytes per block */
    bool is_quantized;        /* block_size > 1 or a packed format */
    dtype_to_float_fn to_float;
};

/* Traits of type id, or NULL when id is not a valid type (removed ids included). */
const struct dtype_traits *dtype_get(int id);

#endif
