// gemm_cm.comp: gemm.comp's product on cooperative matrices (VK_KHR_cooperative_matrix: the
// tensor cores), built where glslc knows them and run where the device has 16x16x16 f16 blocks
// summed in f32 and subgroups of 32: a workgroup of 4 subgroups a tile of 128 rows by BN tokens,
// each step bringing one group of 32 columns of both into shared memory as f16 (a thread a weight
// row's group, dequantized once; the tokens' columns rounded), each subgroup summing the blocks of
// a 64-row by BN/2-token corner, then writing them out through a 16x16 staging block of its own.
#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#include "common.glsl"
#include "dequant.glsl"
layout(local_size_x = 128) in;
layout(push_constant) uniform Args {
    uint64_t w;
    Floats x, y;
    uint64_t tab;
    uint rows, cols, n, row_bytes, add; // add: y += W X
} p;

#ifndef BN
#define BN 64
#endif
const uint BM = 128, K = 32, S = K + 8; // S: a row's stride in shared memory (padded: fewer conflicts)
const uint TJ = BN / 32;                // a subgroup's blocks across its tokens (4 down its rows)
shared float16_t ws[BM * S], xs[BN * S]; // ws: a row's 32 columns; xs: a token's
shared float staging[4 * 256];

#define MAT_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define MAT_C coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>

void main() {
    uint th = gl_LocalInvocationID.x, sg = gl_SubgroupID;
    uint r0 = gl_WorkGroupID.x * BM, t0 = gl_WorkGroupID.y * BN;
    uint sr = sg % 2 * 64, st = sg / 2 * (BN / 2); // this subgroup's corner of the tile
    MAT_C acc[4][TJ];
    [[unroll]] for (uint i = 0; i < 4; i++)
        [[unroll]] for (uint j = 0; j < TJ; j++)
            acc[i][j] = MAT_C(0.0);
    uint64_t row = p.w + uint64_t(min(r0 + th, p.rows - 1)) * p.row_bytes;
    for (uint g = 0; g < p.cols / K; g++) {
        float v[32];
        dq_group(row, g, p.tab, v);
        [[unroll]] for (uint k = 0; k < K; k++)
            ws[th * S + k] = float16_t(v[k]);
        for (uint e = th; e < BN * K; e += 128) { // consecutive threads: consecutive columns
            uint t = e / K, k = e % K;
            float x = t0 + t < p.n ? x_as_weight(p.x.v[(t0 + t) * p.cols + g * K + k]) : 0.0;
            xs[t * S + k] = float16_t(x);
        }
        barrier();
        [[unroll]] for (uint kk = 0; kk < K; kk += 16) {
            MAT_A a[4];
            MAT_B b[TJ];
            [[unroll]] for (uint i = 0; i < 4; i++)
                coopMatLoad(a[i], ws, (sr + 16 * i) * S + kk, S, gl_CooperativeMatrixLayoutRowMajor);
            [[unroll]] for (uint j = 0; j < TJ; j++)
                coopMatLoad(b[j], xs, (st + 16 * j) * S + kk, S, gl_CooperativeMatrixLayoutColumnMajor);
            [[unroll]] for (uint i = 0; i < 4; i++)
                [[unroll]] for (uint j = 0; j < TJ; j++)
                    acc[i][j] = coopMatMulAdd(a[i], b[j], acc[i][j]);
        }
        barrier();
    }
    uint lane = gl_SubgroupInvocationID, base = sg * 256;
    [[unroll]] for (uint i = 0; i < 4; i++)
        [[unroll]] for (uint j = 0; j < TJ; j++) {
            // column-major: block element (row m, token t) at t * 16 + m, so y's rows are runs
            coopMatStore(acc[i][j], staging, base, 16, gl_CooperativeMatrixLayoutColumnMajor);
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            for (uint e = lane; e < 256; e += gl_SubgroupSize) {
                uint r = r0 + sr + 16 * i + e % 16, t = t0 + st + 16 * j + e / 16;
                if (r < p.rows && t < p.n) {
                    uint at = t * p.rows + r;
                    p.y.v[at] = p.add != 0 ? p.y.v[at] + staging[base + e] : staging[base + e];
                }
            }
            subgroupBarrier();
        }
}
