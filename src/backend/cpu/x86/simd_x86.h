/* simd_x86.h: small helpers every x86 kernel file shares (AVX2 + F16C level, so both the AVX2
 * and the AVX-512 files can include it). */
#ifndef OX_BACKEND_CPU_X86_SIMD_X86_H
#define OX_BACKEND_CPU_X86_SIMD_X86_H

#include <immintrin.h>
#include <stdint.h>

/* An f16 scale as float. */
static inline float f16(uint16_t h) {
    return _cvtsh_ss(h);
}

/* The sum of 8 floats. */
static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Keeps a running integer sum's additions in order: left to itself, GCC turns an unrolled run
 * of them into a tree whose many live products spill to the stack (the AVX2 batch tiles ran
 * 30% slower so). */
#define PIN(v) __asm__("" : "+x"(v))

#endif
