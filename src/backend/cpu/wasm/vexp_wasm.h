/* vexp_wasm.h: ggml's vector exp for 4 floats in SIMD128, shared by the wasm ops and attention:
 * the steps of ggml_numerics.c's ggml_expf with each multiply-add rounded twice (SIMD128 has no
 * fused one), so values agree with the reference to about an ulp, not bit for bit. */
#ifndef OX_BACKEND_CPU_WASM_VEXP_WASM_H
#define OX_BACKEND_CPU_WASM_VEXP_WASM_H

#include <wasm_simd128.h>

#include "backend/cpu/ggml_numerics.h"
#include "backend/cpu/wasm/level_wasm.h"

/* n = round(x / ln 2), b = x - n ln 2 in two parts, j = a degree-5 polynomial in b, then
 * j * 2^n: one exact multiply by a normal power of two while |n| <= 126; lanes past that
 * (results near over- or underflow, -inf) go through the scalar function. */
static inline v128_t expf4(v128_t x) {
    const v128_t r = wasm_f32x4_splat(0x1.8p23f);
    const v128_t n = wasm_f32x4_sub(fmadd(r, x, wasm_f32x4_splat(0x1.715476p+0f)), r);
    const v128_t b =
        wasm_f32x4_sub(wasm_f32x4_sub(x, wasm_f32x4_mul(n, wasm_f32x4_splat(0x1.62e4p-1f))),
                       wasm_f32x4_mul(n, wasm_f32x4_splat(0x1.7f7d1cp-20f)));
    v128_t far = wasm_f32x4_gt(wasm_f32x4_abs(n), wasm_f32x4_splat(126.0f));
    if (__builtin_expect(wasm_v128_any_true(far), 0)) {
        float v[4];
        wasm_v128_store(v, x);
        for (int i = 0; i < 4; i++)
            v[i] = ggml_expf(v[i]);
        return wasm_v128_load(v);
    }
    const v128_t u = wasm_f32x4_mul(b, b);
    const v128_t hi =
        fmadd(fmadd(wasm_f32x4_splat(0x1.fffdb6p-2f), wasm_f32x4_splat(0x1.555e66p-3f), b),
              fmadd(wasm_f32x4_splat(0x1.573e2ep-5f), wasm_f32x4_splat(0x1.0e4020p-7f), b), u);
    const v128_t j =
        fmadd(fmadd(wasm_f32x4_splat(1.0f), wasm_f32x4_splat(0x1.ffffecp-1f), b), hi, u);
    v128_t e =
        wasm_i32x4_shl(wasm_i32x4_add(wasm_i32x4_trunc_sat_f32x4(n), wasm_i32x4_splat(127)), 23);
    return wasm_f32x4_mul(j, e);
}

#endif
