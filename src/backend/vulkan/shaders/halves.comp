// halves.comp: n floats as f16 (to nearest, ties to even, whatever the driver's conversion does),
// the activations gemm_cm.comp and f16 weights' matvec.comp read: converted once a product, not
// once for every tile of rows that reads them.
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Args {
    Floats x;
    Halves y;
    uint n;
} p;

void main() {
    GRID_STRIDE(i, p.n) {
        p.y.v[i] = float16_t(round_to_f16(p.x.v[i])); // exact: the conversion cannot round
    }
}
