// split_sum.comp: a product cut into column slices (gemm_cm.comp's) made whole: y = the slices'
// sums added in slice order (y += them where add), so the result does not depend on which
// workgroup finished first.
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Args {
    Floats part; // [slices][n]
    Floats y;    // [n]
    uint n, slices, add;
} p;

void main() {
    GRID_STRIDE(i, p.n) {
        float sum = p.part.v[i];
        for (uint z = 1; z < p.slices; z++)
            sum += p.part.v[z * p.n + i];
        p.y.v[i] = p.add != 0 ? p.y.v[i] + sum : sum;
    }
}
