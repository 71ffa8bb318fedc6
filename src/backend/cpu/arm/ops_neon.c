/* ops_neon.c: NEON versions of the element-wise reference ops that show in profiles, and the
 * activation quantizer of the NEON kernels (every level: built for plain ARMv8-A). Each performs
 * the reference's operations in the same order, so results are bit-identical. */
#include <arm_neon.h>
#include <math.h>

#include "backend/cpu/arm/vexp_neon.h"
#include "backend/cpu/ggml_numerics.h"
#include "backend/cpu/ops_simd.h"
#include "backend/cpu/qmatmul.h"
#include "core/cpu_features.h"

bool glu_neon(enum glu_kind kind, const float *gate, const float *up, float *y, size_t n) {
    if (kind != GLU_SILU || !cpu_features_get()->neon)
        return false;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t g = vld1q_f32(gate + i);
        float32x4_t e = expf4(vnegq_f32(g));
        float32x4_t silu = vdivq_f32(g, vaddq_f32(vdupq_n_f32(1.0f), e));
        vst1q_f32(y + i, vmulq_f32(silu, vld1q_f32(up + i)));
    }
    for (; i < n; i++)
        y[i] = gate[i] / (1.0f + ggml_expf(-gate[i])) * up[i];
    return true;
}

/* f16 to f32 (FCVTL): exact, as the reference conversion (the KV cache is read back so every
 * decode step, for every layer). */
bool f16_to_f32_neon(const uint16_t *x, float *y, size_t n) {
    if (!cpu_features_get()->neon)
        return false;
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(x + i))));
    for (; i < n; i++)
        y[i] = vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(x[i]))), 0);
    return true;
}

/* xq8_32_quantize with vectors: the same max, 127 / max, round to nearest even (FCVTNS, as
 * lrintf in the default rounding mode), the scale rounded through f16 in hardware. */
void xq8_32_quantize_neon(const float *x, void *xq, int64_t n) {
    struct xq8_32 *blk = xq;
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        float32x4_t v[8], m = vdupq_n_f32(0.0f);
        for (int j = 0; j < 8; j++)
            v[j] = vld1q_f32(x + 4 * j), m = vmaxq_f32(m, vabsq_f32(v[j]));
        float amax = vmaxvq_f32(m);
        float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
        int32x4_t q[8], sum = vdupq_n_s32(0);
        for (int j = 0; j < 8; j++) {
            q[j] = vcvtnq_s32_f32(vmulq_n_f32(v[j], id));
            sum = vaddq_s32(sum, q[j]);
        }
        for (int j = 0; j < 8; j += 4) {
            int16x8_t lo = vcombine_s16(vqmovn_s32(q[j]), vqmovn_s32(q[j + 1]));
            int16x8_t hi = vcombine_s16(vqmovn_s32(q[j + 2]), vqmovn_s32(q[j + 3]));
            vst1q_s8(blk[b].q + 4 * j, vcombine_s8(vqmovn_s16(lo), vqmovn_s16(hi)));
        }
        float32x4_t dh = vcvt_f32_f16(vcvt_f16_f32(vdupq_n_f32(d)));
        blk[b].d = vgetq_lane_f32(dh, 0);
        blk[b].s = blk[b].d * (float)vaddvq_s32(sum);
    }
}

void xq8_1_quantize_neon(const float *x, void *xq, int64_t n) {
    xq8_32_quantize_neon(x, xq, n);
    xq8_32_sums_as_q8_1(x, xq, n);
}
