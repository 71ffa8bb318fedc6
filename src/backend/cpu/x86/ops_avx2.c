/* ops_avx2.c: AVX2 versions of the element-wise reference ops that show in profiles, and the
 * activation quantizer of the AVX2 kernels. Each performs the reference's operations in the same
 * order, so results are bit-identical. */
#include <immintrin.h>
#include <math.h>

#include "backend/cpu/ggml_numerics.h"
#include "backend/cpu/ops_simd.h"
#include "backend/cpu/qmatmul.h"
#include "backend/cpu/x86/vexp_avx2.h"
#include "core/cpu_features.h"

static bool have_avx2(void) {
    const struct cpu_features *f = cpu_features_get();
    return f->avx2 && f->fma && f->f16c;
}

bool glu_avx2(enum glu_kind kind, const float *gate, const float *up, float *y, size_t n) {
    if (kind != GLU_SILU || !have_avx2())
        return false;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 g = _mm256_loadu_ps(gate + i);
        __m256 e = expf8(_mm256_sub_ps(_mm256_setzero_ps(), g));
        __m256 silu = _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
    }
    for (; i < n; i++)
        y[i] = gate[i] / (1.0f + ggml_expf(-gate[i])) * up[i];
    return true;
}

/* f16 to f32 with F16C: exact, as the reference conversion (the KV cache is read back so every
 * decode step, for every layer). */
bool f16_to_f32_avx2(const uint16_t *x, float *y, size_t n) {
    if (!have_avx2())
        return false;
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    for (; i < n; i++)
        y[i] = _cvtsh_ss(x[i]);
    return true;
}

/* xq8_32_quantize with vectors: the same max, 127 / max, round to nearest even, f16 scale. */
void xq8_32_quantize_avx2(const float *x, void *xq, int64_t n) {
    struct xq8_32 *blk = xq;
    const __m256 abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        __m256 v[4], m = _mm256_setzero_ps();
        for (int j = 0; j < 4; j++)
            v[j] = _mm256_loadu_ps(x + 8 * j), m = _mm256_max_ps(m, _mm256_and_ps(v[j], abs));
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        float amax = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
        float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
        __m256i q[4], sum = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], _mm256_set1_ps(id)));
            sum = _mm256_add_epi32(sum, q[j]);
        }
        /* the packs interleave 128-bit lanes; the dword permute puts them back in order */
        __m256i p =
            _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)blk[b].q, p);
        __m128i s = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
        s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
        s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
        blk[b].d = _cvtsh_ss(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
        blk[b].s = blk[b].d * (float)_mm_cvtsi128_si32(s);
    }
}

void xq8_1_quantize_avx2(const float *x, void *xq, int64_t n) {
    xq8_32_quantize_avx2(x, xq, n);
    xq8_32_sums_as_q8_1(x, xq, n);
}
