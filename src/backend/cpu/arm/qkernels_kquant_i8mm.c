/* qkernels_kquant_i8mm.c: the k-quant kernels of qkernels_kquant_neon.c built for CPUs with the
 * int8 matrix multiply extension: batches on SMMLA (level_neon.h). */
#define OX_NEON_I8MM 1
#include "qkernels_kquant_neon.c"
