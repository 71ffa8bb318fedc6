/* level_avx2.h: what differs between the AVX2 and AVX-VNNI builds of the AVX2 kernel files
 * (qkernels_avx2vnni.c includes them with OX_AVX_VNNI defined): their names and the two integer
 * primitives; everything else is the same code. */
#ifndef OX_BACKEND_CPU_X86_LEVEL_AVX2_H
#define OX_BACKEND_CPU_X86_LEVEL_AVX2_H

#include <immintrin.h>

/* The two primitives: add the byte products of w (unsigned) and x (signed) to a partial
 * sum, and widen that partial sum to int32 lanes. */
#ifdef OX_AVX_VNNI
enum { VNNI = 1 };
#define LEVEL_NAME   "avx2-vnni"
#define KERNEL_TABLE qkernels_avx2vnni
#define KQUANT_TABLE qkernels_kquant_avx2vnni
static inline __m256i accumulate(__m256i part, __m256i w, __m256i x) {
    return _mm256_dpbusd_avx_epi32(part, w, x);
}
static inline __m256i widen(__m256i part) {
    return part;
}
#else
enum { VNNI = 0 };
#define LEVEL_NAME   "avx2"
#define KERNEL_TABLE qkernels_avx2
#define KQUANT_TABLE qkernels_kquant_avx2
static inline __m256i accumulate(__m256i part, __m256i w, __m256i x) {
    return _mm256_add_epi16(part, _mm256_maddubs_epi16(w, x));
}
static inline __m256i widen(__m256i part) {
    return _mm256_madd_epi16(part, _mm256_set1_epi16(1));
}
#endif

#endif
