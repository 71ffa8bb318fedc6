/* vexp_avx2.h: ggml's vector exp for 8 floats with AVX2 + FMA, shared by the AVX2 ops and
 * attention: the steps of ggml_numerics.c's ggml_expf (the AVX-512 form), so values are the
 * reference's bit for bit. */
#ifndef OX_BACKEND_CPU_X86_VEXP_AVX2_H
#define OX_BACKEND_CPU_X86_VEXP_AVX2_H

#include <immintrin.h>
#include <math.h>

#include "backend/cpu/ggml_numerics.h"

/* n = round(x / ln 2), b = x - n ln 2 in two parts, j = a degree-5 polynomial in b, then
 * j * 2^n: one exact multiply by a normal power of two while |n| <= 126, which rounds as ldexpf
 * does; lanes past that (results near over- or underflow) go through the scalar function. */
static inline __m256 expf8(__m256 x) {
    const __m256 r = _mm256_set1_ps(0x1.8p23f);
    const __m256 n = _mm256_sub_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r), r);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256 far = _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), n),
                                     _mm256_set1_ps(126.0f), _CMP_GT_OQ);
    if (__builtin_expect(_mm256_movemask_ps(far) != 0, 0)) {
        float v[8];
        _mm256_storeu_ps(v, x);
        for (int i = 0; i < 8; i++)
            v[i] = ggml_expf(v[i]);
        return _mm256_loadu_ps(v);
    }
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(
            _mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
            _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
        u, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(j, _mm256_castsi256_ps(e));
}

#endif
