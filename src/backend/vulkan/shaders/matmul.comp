// matmul.comp: y[t] = W x[t] for f32 or f16 weights (HALF) whose rows are not whole groups of 32
// (matvec.comp and gemm.comp take the others): a workgroup per row and block of up to 8 tokens,
// its threads along the columns, their sums reduced in shared memory.
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Args {
    uint64_t w;
    Floats x, y;
    uint rows, cols, n, row_elems; // row_elems: a row's stride in weights
} p;

#ifdef HALF // x rounded to f16, as ggml's CPU multiplies it with f16 weights
#define ROW Halves
#define HALF_BYTES 2
#define X_AS_WEIGHT(v) round_to_f16(v)
#else
#define X_AS_WEIGHT(v) (v)
#define ROW Floats
#define HALF_BYTES 4
#endif

shared float part[8][256];

void main() {
    uint row = gl_WorkGroupID.x, t0 = gl_WorkGroupID.y * 8, th = gl_LocalInvocationID.x;
    uint nt = min(8, p.n - t0);
    ROW w = ROW(p.w + uint64_t(row) * p.row_elems * (HALF_BYTES));
    float s[8] = float[8](0, 0, 0, 0, 0, 0, 0, 0);
    for (uint c = th; c < p.cols; c += 256) {
        float wv = float(w.v[c]);
        for (uint t = 0; t < nt; t++)
            s[t] += wv * X_AS_WEIGHT(p.x.v[(t0 + t) * p.cols + c]);
    }
    for (uint t = 0; t < 8; t++)
        part[t][th] = s[t];
    barrier();
    for (uint k = 128; k > 0; k >>= 1) {
        if (th < k)
            for (uint t = 0; t < nt; t++)
                part[t][th] += part[t][th + k];
        barrier();
    }
    if (th < nt)
        p.y.v[(t0 + th) * p.rows + row] = part[th][0];
}
