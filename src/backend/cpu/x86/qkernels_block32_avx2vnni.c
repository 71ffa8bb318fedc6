/* qkernels_block32_avx2vnni.c: the AVX2 kernels of the 32-block types built again for CPUs with
 * AVX-VNNI (Intel 12th generation and later, AMD Zen 5): VPDPBUSD on 256-bit registers takes
 * the byte products (level_avx2.h). */
#define OX_AVX_VNNI 1
#include "qkernels_block32_avx2.c"
