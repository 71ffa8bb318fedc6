/* vexp_neon.h: ggml's vector exp for 4 floats on NEON, shared by the NEON ops and attention: the
 * steps of ggml_numerics.c's ggml_expf, so values are the reference's bit for bit. */
#ifndef OX_BACKEND_CPU_ARM_VEXP_NEON_H
#define OX_BACKEND_CPU_ARM_VEXP_NEON_H

#include <arm_neon.h>

#include "backend/cpu/ggml_numerics.h"

/* n = round(x / ln 2), b = x - n ln 2 in two parts (fused, as fmaf(-n, c, x)), j = a degree-5
 * polynomial in b, then j * 2^n: one exact multiply by a normal power of two while |n| <= 126,
 * which rounds as ldexpf does; lanes past that (results near over- or underflow, -inf) go
 * through the scalar function. */
static inline float32x4_t expf4(float32x4_t x) {
    const float32x4_t r = vdupq_n_f32(0x1.8p23f);
    const float32x4_t n = vsubq_f32(vfmaq_f32(r, x, vdupq_n_f32(0x1.715476p+0f)), r);
    const float32x4_t b =
        vfmsq_f32(vfmsq_f32(x, n, vdupq_n_f32(0x1.62e4p-1f)), n, vdupq_n_f32(0x1.7f7d1cp-20f));
    uint32x4_t far = vcagtq_f32(n, vdupq_n_f32(126.0f));
    if (__builtin_expect(vmaxvq_u32(far) != 0, 0)) {
        float v[4];
        vst1q_f32(v, x);
        for (int i = 0; i < 4; i++)
            v[i] = ggml_expf(v[i]);
        return vld1q_f32(v);
    }
    const float32x4_t u = vmulq_f32(b, b);
    const float32x4_t hi =
        vfmaq_f32(vfmaq_f32(vdupq_n_f32(0x1.fffdb6p-2f), vdupq_n_f32(0x1.555e66p-3f), b),
                  vfmaq_f32(vdupq_n_f32(0x1.573e2ep-5f), vdupq_n_f32(0x1.0e4020p-7f), b), u);
    const float32x4_t j =
        vfmaq_f32(vfmaq_f32(vdupq_n_f32(1.0f), vdupq_n_f32(0x1.ffffecp-1f), b), hi, u);
    int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    return vmulq_f32(j, vreinterpretq_f32_s32(e));
}

#endif
