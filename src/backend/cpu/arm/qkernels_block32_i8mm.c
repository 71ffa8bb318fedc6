/* qkernels_block32_i8mm.c: the 32-block kernels of qkernels_block32_neon.c built for CPUs with the
 * int8 matrix multiply extension: batches on SMMLA, single tokens on SDOT (level_neon.h). */
#define OX_NEON_I8MM 1
#include "qkernels_block32_neon.c"
