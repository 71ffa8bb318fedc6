// get_rows.comp: y[t] = row ids[t] of W as floats, for f32 or f16 weights (HALF).
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Args {
    uint64_t w;
    Ints ids;
    Floats y;
    uint cols, n, row_elems;
} p;

#ifdef HALF
#define ROW Halves
#define HALF_BYTES 2
#else
#define ROW Floats
#define HALF_BYTES 4
#endif

void main() {
    uint total = p.n * p.cols;
    GRID_STRIDE(i, total) {
        uint t = i / p.cols, c = i % p.cols;
        ROW w = ROW(p.w + uint64_t(p.ids.v[t]) * p.row_elems * (HALF_BYTES));
        p.y.v[i] = float(w.v[c]);
    }
}
