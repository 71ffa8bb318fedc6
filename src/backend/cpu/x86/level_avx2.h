/* level_avx2.h: what differs between the AVX2 and AVX-VNNI builds of the AVX2 kernel files
 * (qkernels_block32_avx2vnni.c and qkernels_kquant_avx2vnni.c include them with OX_AVX_VNNI
 * defined; test_qmatmul builds them a third time with OX_AVX_VNNI_EMULATED too): their names and
 * the integer primitives; everything else is the same code. */
#ifndef OX_BACKEND_CPU_X86_LEVEL_AVX2_H
#define OX_BACKEND_CPU_X86_LEVEL_AVX2_H

#include <immintrin.h>

/* The two primitives: add the byte products of w (unsigned) and x (signed) to a partial
 * sum, and widen that partial sum to int32 lanes. */
#ifdef OX_AVX_VNNI
enum { VNNI = 1 };
#ifndef OX_AVX_VNNI_EMULATED
#define QK_LEVEL   avx2vnni
#define LEVEL_NAME "avx2-vnni"
static inline __m256i accumulate(__m256i part, __m256i w, __m256i x) {
    return _mm256_dpbusd_avx_epi32(part, w, x);
}
#else
/* A third build for test_qmatmul alone, so the VNNI kernels run on CPUs without AVX-VNNI (and
 * QEMU has no AVX-VNNI either): VPDPBUSD's exact sums from AVX2, each byte product in a 16-bit
 * lane (even and odd bytes apart) and VPMADDWD's pair sums in int32, where nothing saturates. */
#define QK_LEVEL   avx2vnni_emulated
#define LEVEL_NAME "avx2-vnni (emulated)"
static inline __m256i accumulate(__m256i part, __m256i w, __m256i x) {
    __m256i w_even = _mm256_and_si256(w, _mm256_set1_epi16(0x00FF));
    __m256i w_odd = _mm256_srli_epi16(w, 8);
    __m256i x_even = _mm256_srai_epi16(_mm256_slli_epi16(x, 8), 8);
    __m256i x_odd = _mm256_srai_epi16(x, 8);
    __m256i even = _mm256_madd_epi16(w_even, x_even), odd = _mm256_madd_epi16(w_odd, x_odd);
    return _mm256_add_epi32(part, _mm256_add_epi32(even, odd));
}
#endif
static inline __m256i widen(__m256i part) {
    return part;
}
/* 8 rows' group scales from bytes (unsigned, signed) as scale_sum takes them, int32 per row,
 * and a partial sum times them. */
static inline __m256i group_scales_u8(const void *p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}
static inline __m256i group_scales_i8(const void *p) {
    return _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p));
}
static inline __m256i scale_sum(__m256i part, __m256i sc) {
    return _mm256_mullo_epi32(part, sc);
}
#else
enum { VNNI = 0 };
#define QK_LEVEL   avx2
#define LEVEL_NAME "avx2"
static inline __m256i accumulate(__m256i part, __m256i w, __m256i x) {
    return _mm256_add_epi16(part, _mm256_maddubs_epi16(w, x));
}
static inline __m256i widen(__m256i part) {
    return _mm256_madd_epi16(part, _mm256_set1_epi16(1));
}
/* The int16 pair sums times the scale: each row's scale in both words of its lane, so one
 * VPMADDWD widens and scales at once. From 8 bytes, one shuffle each: unsigned bytes into both
 * words of their lane with zero above; signed ones doubled, then sign-extended to words. */
static inline __m256i group_scales_u8(const void *p) {
    long long b;
    __builtin_memcpy(&b, p, 8);
    return _mm256_shuffle_epi8(_mm256_set1_epi64x(b),
                               _mm256_setr_epi8(0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3,
                                                -1, 4, -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1,
                                                7, -1));
}
static inline __m256i group_scales_i8(const void *p) {
    __m128i b = _mm_loadl_epi64((const __m128i *)p);
    return _mm256_cvtepi8_epi16(
        _mm_shuffle_epi8(b, _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7)));
}
static inline __m256i scale_sum(__m256i part, __m256i sc) {
    return _mm256_madd_epi16(part, sc);
}
#endif

#endif
