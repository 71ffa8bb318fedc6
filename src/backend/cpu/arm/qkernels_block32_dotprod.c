/* qkernels_block32_dotprod.c: the 32-block kernels of qkernels_block32_neon.c built for CPUs with
 * the dot-product extension (SDOT; level_neon.h). */
#define OX_NEON_DOTPROD 1
#include "qkernels_block32_neon.c"
