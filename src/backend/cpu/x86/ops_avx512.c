/* ops_avx512.c: AVX-512 versions of the element-wise reference ops that show in profiles. Each
 * performs the reference's operations in the same order, so results are bit-identical. */
#include <immintrin.h>
#include <math.h>

#include "backend/cpu/ggml_numerics.h"
#include "backend/cpu/ops_simd.h"
#include "backend/cpu/qmatmul.h"
#include "backend/cpu/x86/vexp_avx512.h"
#include "core/cpu_features.h"

static bool have_avx512(void) {
    const struct cpu_features *f = cpu_features_get();
    return f->avx512f && f->avx512dq && f->fma && f->f16c;
}

bool glu_avx512(enum glu_kind kind, const float *gate, const float *up, float *y, size_t n) {
    if (kind != GLU_SILU || !have_avx512())
        return false;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 g = _mm512_loadu_ps(gate + i);
        __m512 e = expf16(_mm512_sub_ps(_mm512_setzero_ps(), g));
        __m512 silu = _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
        _mm512_storeu_ps(y + i, _mm512_mul_ps(silu, _mm512_loadu_ps(up + i)));
    }
    for (; i < n; i++)
        y[i] = gate[i] / (1.0f + ggml_expf(-gate[i])) * up[i];
    return true;
}

/* xq8_32_quantize with vectors: the same max, 127 / max, round to nearest even, f16 scale. */
void xq8_32_quantize_avx512(const float *x, void *xq, int64_t n) {
    struct xq8_32 *blk = xq;
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
        __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, _mm512_set1_ps(id)));
        __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, _mm512_set1_ps(id)));
        _mm_storeu_si128((__m128i *)blk[b].q, _mm512_cvtsepi32_epi8(q0));
        _mm_storeu_si128((__m128i *)(blk[b].q + 16), _mm512_cvtsepi32_epi8(q1));
        int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
        blk[b].d = _cvtsh_ss(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
        blk[b].s = blk[b].d * (float)sum;
    }
}

void xq8_1_quantize_avx512(const float *x, void *xq, int64_t n) {
    xq8_32_quantize_avx512(x, xq, n);
    xq8_32_sums_as_q8_1(x, xq, n);
}
