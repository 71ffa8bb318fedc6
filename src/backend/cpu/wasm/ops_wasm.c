/* ops_wasm.c: SIMD128 versions of the element-wise reference ops that show in profiles (SiLU's
 * gate, the f16 KV cache read back), as ops_neon.c has them. */
#include <math.h>
#include <wasm_simd128.h>

#include "backend/cpu/ggml_numerics.h"
#include "backend/cpu/ops_simd.h"
#include "backend/cpu/wasm/level_wasm.h"
#include "backend/cpu/wasm/vexp_wasm.h"
#include "core/cpu_features.h"

bool glu_wasm(enum glu_kind kind, const float *gate, const float *up, float *y, size_t n) {
    if (kind != GLU_SILU || !cpu_features_get()->wasm_simd)
        return false;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        v128_t g = wasm_v128_load(gate + i);
        v128_t e = expf4(wasm_f32x4_neg(g));
        v128_t silu = wasm_f32x4_div(g, wasm_f32x4_add(wasm_f32x4_splat(1.0f), e));
        wasm_v128_store(y + i, wasm_f32x4_mul(silu, wasm_v128_load(up + i)));
    }
    for (; i < n; i++)
        y[i] = gate[i] / (1.0f + ggml_expf(-gate[i])) * up[i];
    return true;
}

/* f16 to f32: exact, as the reference conversion (the KV cache is read back so every decode
 * step, for every layer). */
bool f16_to_f32_wasm(const uint16_t *x, float *y, size_t n) {
    if (!cpu_features_get()->wasm_simd)
        return false;
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        wasm_v128_store(y + i, f16x4(x + i));
    for (; i < n; i++)
        y[i] = fp16_to_fp32(x[i]);
    return true;
}
