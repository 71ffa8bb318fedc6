// get_rows_q.comp: y[t] = row ids[t] of W as floats, W of the type dequant.glsl is built for and
// rows of whole 32-value groups: a thread a group.
#version 450
#include "common.glsl"
#include "dequant.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Args {
    uint64_t w;
    Ints ids;
    Floats y;
    uint64_t tab;
    uint cols, n, row_bytes;
} p;

void main() {
    uint groups = p.cols / 32;
    GRID_STRIDE(i, p.n * groups) {
        uint t = i / groups, g = i % groups;
        float v[32];
        dq_group(p.w + uint64_t(p.ids.v[t]) * p.row_bytes, g, p.tab, v);
        for (uint j = 0; j < 32; j++)
            p.y.v[t * p.cols + 32 * g + j] = v[j];
    }
}
