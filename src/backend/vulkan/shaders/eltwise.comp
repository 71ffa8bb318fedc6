// eltwise.comp: the elementwise ops over n floats, one per dispatch (op): y op= x, or y = f(x, z)
// (a GLU's y also as f16 where h is given).
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Args {
    Floats y, x, z;
    uint n, op;
    float a;
    Halves h; // the GLUs: 0, or where y's f16 copy goes (to nearest; vk_ops.c's halves)
} p;

// The op codes (vk_ops.c's enum vk_eltwise).
#define OP_ADD 0      // y += x
#define OP_SCALE 1    // y *= a
#define OP_ZERO 2     // y = 0
#define OP_AXPY 3     // y += a x
#define OP_GELU 4     // y = gelu(x)
#define OP_SOFTCAP 5  // y = a tanh(y / a)
#define OP_SILU_GLU 6 // y = silu(x) z
#define OP_GELU_GLU 7 // y = gelu(x) z
#define OP_SIGM_GLU 8 // y = sigmoid(x) z
#define OP_OAI_GLU 9  // gpt-oss's clamped SwiGLU

void main() {
    GRID_STRIDE(i, p.n) {
        switch (p.op) {
        case OP_ADD: p.y.v[i] += p.x.v[i]; break;
        case OP_SCALE: p.y.v[i] *= p.a; break;
        case OP_ZERO: p.y.v[i] = 0.0; break;
        case OP_AXPY: p.y.v[i] += p.a * p.x.v[i]; break;
        case OP_GELU: p.y.v[i] = gelu(p.x.v[i]); break;
        case OP_SOFTCAP: p.y.v[i] = tanh(p.y.v[i] / p.a) * p.a; break;
        case OP_SILU_GLU:
        case OP_GELU_GLU:
        case OP_SIGM_GLU:
        case OP_OAI_GLU: {
            float v = glu(p.op - OP_SILU_GLU, p.x.v[i], p.z.v[i]);
            p.y.v[i] = v;
            if (uint64_t(p.h) != 0)
                p.h.v[i] = float16_t(round_to_f16(v));
            break;
        }
        }
    }
}
