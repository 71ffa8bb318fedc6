/* qkernels_kquant_avx2vnni.c: the AVX2 kernels of the k-quants and iq4_xs built again for CPUs
 * with AVX-VNNI (level_avx2.h). */
#define OX_AVX_VNNI 1
#include "qkernels_kquant_avx2.c"
