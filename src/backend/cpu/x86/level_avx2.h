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
/* Group scales (int32 per row) as scale_sum takes them, and a partial sum times them. */
static inline __m256i group_scales(__m256i sc) {
    return sc;
}
static inline __m256i scale_sum(__m256i part, __m256i sc) {
    return _mm256_mullo_epi32(part, sc);
}
/* A term v (even, |v / 2| < 2^15) as scale_sum takes a partial sum, so that scale_sum gives
 * v times each row's scale. */
static inline __m256i group_bias(int v) {
    return _mm256_set1_epi32(v);
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
/* The int16 pair sums times the scale: each row's scale in both words of its lane, so one
 * VPMADDWD widens and scales at once. */
static inline __m256i group_scales(__m256i sc) {
    return _mm256_or_si256(_mm256_and_si256(sc, _mm256_set1_epi32(0xFFFF)),
                           _mm256_slli_epi32(sc, 16));
}
static inline __m256i scale_sum(__m256i part, __m256i sc) {
    return _mm256_madd_epi16(part, sc);
}
/* v / 2 in both words of each lane: VPMADDWD against the doubled scale gives v times it. */
static inline __m256i group_bias(int v) {
    return _mm256_set1_epi16((short)(v / 2));
}
#endif

#endif
