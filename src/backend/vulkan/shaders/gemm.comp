// gemm.comp: Y = W X (or Y += W X) for many tokens (prompts), W of the type dequant.glsl is built
// for and rows of whole 32-value groups: a workgroup a tile of 64 rows by 64 tokens, each step
// bringing one group of 32 columns of both into shared memory (the weights dequantized once, the
// tokens' columns read as consecutive floats), each thread summing a 4 x 4 block of the tile.
#version 450
#include "common.glsl"
#include "dequant.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Args {
    uint64_t w;
    Floats x, y;
    uint64_t tab;
    uint rows, cols, n, row_bytes, add; // add: y += W X
} p;

const uint TILE = 64, K = 32;
shared float ws[K][TILE + 1], xs[K][TILE + 1]; // column-major: a step's column k is a row here

void main() {
    uint th = gl_LocalInvocationID.x;
    uint r0 = gl_WorkGroupID.x * TILE, t0 = gl_WorkGroupID.y * TILE;
    uint tr = th / 16 * 4, tt = th % 16 * 4; // this thread's 4 rows and 4 tokens in the tile
    float acc[4][4];
    for (uint a = 0; a < 4; a++)
        for (uint c = 0; c < 4; c++)
            acc[a][c] = 0;
    for (uint g = 0; g < p.cols / K; g++) {
        if (th < TILE) { // a thread a weight row: one group dequantized
            float v[32];
            uint r = min(r0 + th, p.rows - 1);
            dq_group(p.w + uint64_t(r) * p.row_bytes, g, p.tab, v);
            for (uint k = 0; k < K; k++)
                ws[k][th] = v[k];
        }
        for (uint e = th; e < TILE * K; e += 256) { // the tokens' 32 columns, 8 a thread
            uint t = e / K, k = e % K;
            xs[k][t] = t0 + t < p.n ? x_as_weight(p.x.v[(t0 + t) * p.cols + g * K + k]) : 0;
        }
        barrier();
        for (uint k = 0; k < K; k++) {
            vec4 a = vec4(ws[k][tr], ws[k][tr + 1], ws[k][tr + 2], ws[k][tr + 3]);
            vec4 b = vec4(xs[k][tt], xs[k][tt + 1], xs[k][tt + 2], xs[k][tt + 3]);
            for (uint i = 0; i < 4; i++)
                for (uint j = 0; j < 4; j++)
                    acc[i][j] += a[i] * b[j];
        }
        barrier();
    }
    for (uint j = 0; j < 4; j++) {
        uint t = t0 + tt + j;
        if (t >= p.n)
            break;
        for (uint i = 0; i < 4; i++)
            if (r0 + tr + i < p.rows) {
                uint at = t * p.rows + r0 + tr + i;
                p.y.v[at] = p.add != 0 ? p.y.v[at] + acc[i][j] : acc[i][j];
            }
    }
}
