/* qkernels.c: the kernel table for CPUs without a SIMD kernel set: empty, so every
 * matmul takes the scalar reference path in ops_ref.c. */
#include "backend/cpu/qmatmul.h"

const struct qkernel *qkernels_generic(enum ox_dtype type) {
    (void)type;
    return NULL;
}
