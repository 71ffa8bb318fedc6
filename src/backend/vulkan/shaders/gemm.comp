// gemm.comp: Y = W X (or Y += W X) for many tokens (prompts), W of the type dequant.glsl is built
// for and rows of whole 32-value groups: a workgroup a tile of 64 rows by 64 tokens, each step
// bringing two groups (64 columns) of both into shared memory (the weights dequantized once, by
// half the threads), kept as vec4s of 4 rows / 4 tokens so that each thread's 4 x 4 block of the
// tile takes two 16-byte reads a column. 32 KB of shared memory: what every device has.
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

const uint TILE = 64, K = 64;
shared vec4 ws[K][TILE / 4], xs[K][TILE / 4]; // column k of the step: rows / tokens by fours

void main() {
    uint th = gl_LocalInvocationID.x, groups = p.cols / 32;
    uint r0 = gl_WorkGroupID.x * TILE, t0 = gl_WorkGroupID.y * TILE;
    uint tr = th / 16, tt = th % 16; // this thread's rows 4 tr.. and tokens 4 tt.. in the tile
    vec4 acc[4] = vec4[4](vec4(0), vec4(0), vec4(0), vec4(0)); // acc[j]: token j's 4 rows
    for (uint g = 0; g < groups; g += 2) {
        if (th < 2 * TILE) { // a thread a weight row's group (zero past the last group)
            uint row = th % TILE, half_ = th / TILE;
            float v[32];
            if (g + half_ < groups)
                dq_group(p.w + uint64_t(min(r0 + row, p.rows - 1)) * p.row_bytes, g + half_,
                         p.tab, v);
            else
                [[unroll]] for (uint k = 0; k < 32; k++) v[k] = 0;
            [[unroll]] for (uint k = 0; k < 32; k++)
                ws[32 * half_ + k][row / 4][row % 4] = v[k];
        }
        for (uint e = th; e < TILE * K; e += 256) { // the tokens' 64 columns, 16 a thread
            uint t = e % TILE, k = e / TILE, c = 32 * g + k;
            xs[k][t / 4][t % 4] = t0 + t < p.n && c < p.cols
                                      ? x_as_weight(p.x.v[(t0 + t) * p.cols + c])
                                      : 0;
        }
        barrier();
        [[unroll]] for (uint k = 0; k < K; k++) {
            vec4 a = ws[k][tr], b = xs[k][tt];
            acc[0] += a * b.x, acc[1] += a * b.y, acc[2] += a * b.z, acc[3] += a * b.w;
        }
        barrier();
    }
    for (uint j = 0; j < 4; j++) {
        uint t = t0 + 4 * tt + j;
        if (t >= p.n)
            break;
        for (uint i = 0; i < 4; i++)
            if (r0 + 4 * tr + i < p.rows) {
                uint at = t * p.rows + r0 + 4 * tr + i;
                p.y.v[at] = p.add != 0 ? p.y.v[at] + acc[j][i] : acc[j][i];
            }
    }
}
