/* qkernels_kquant_dotprod.c: the k-quant kernels of qkernels_kquant_neon.c built for CPUs with
 * the dot-product extension (SDOT; level_neon.h). */
#define OX_NEON_DOTPROD 1
#include "qkernels_kquant_neon.c"
