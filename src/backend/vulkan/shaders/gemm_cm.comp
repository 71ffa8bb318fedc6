// gemm_cm.comp: gemm.comp's product on cooperative matrices (VK_KHR_cooperative_matrix: the
// tensor cores), built where glslc knows them and run where the device has 16x16x16 f16 blocks
// summed in f32 and subgroups of 32: a workgroup of 8 subgroups a tile of 64 rows by 64 tokens,
// 128 columns a step in shared memory as f16 pairs. Each thread dequantizes one group of a row,
// four consecutive threads a row's four (a subgroup's weight reads: 8 runs of a row, not 32
// scattered rows), and reads 32 of the tokens' values, which halves.comp made f16 (16 bytes a
// read); the next step is read into registers while the subgroups multiply this one's blocks.
// Each subgroup sums the blocks of a 16-row by 32-token corner, then writes them out through a
// 16x16 staging block of its own. A product of few tiles (decode steps of 9 to 63 sequences, a
// few hundred rows) is cut into column slices, one a workgroup of z, each writing its own sums to
// p.part for split_sum.comp to add up: 8 to 32 workgroups alone leave most of a large GPU idle.
#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#include "common.glsl"
#include "dequant.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Args {
    uint64_t w;
    uint64_t x; // f16 [n][cols], 16-byte aligned rows
    Floats y;
    uint64_t tab;
    uint rows, cols, n, row_bytes, add; // add: y += W X
    uint slice;   // columns a workgroup of z sums (a multiple of K; cols: one slice)
    Floats part;  // where slice z writes its sums ([z][n][rows]; unset: y itself)
} p;

// S: a row's stride in shared memory, in f16 pairs (padded: 16-byte aligned rows, fewer conflicts)
const uint BM = 64, BN = 64, K = 128, S = K / 2 + 4;
shared f16vec2 ws[BM * S], xs[BN * S]; // ws: a row's 128 columns; xs: a token's
shared float staging[8 * 256];

#define MAT_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define MAT_C coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>

// This thread's part of the step at column c0: group th % 4 of the step's four in row th / 4
// (zeros past the row's last), and 4 runs of 8 of the tokens' 64 x 128 values (consecutive
// threads: consecutive runs of a token's columns).
void fetch(uint th, uint64_t row, uint t0, uint c0, uint c_end, out float w[32], out uvec4 x[4]) {
    uint g = c0 / 32 + th % 4;
    if (g < c_end / 32)
        dq_group(row, g, p.tab, w);
    else
        [[unroll]] for (uint k = 0; k < 32; k++)
            w[k] = 0.0;
    [[unroll]] for (uint i = 0; i < 4; i++) {
        uint e = th + 256 * i, t = e / (K / 8), c = c0 + e % (K / 8) * 8;
        bool in_x = t0 + t < p.n && c < c_end; // c a multiple of 8, c_end of 32: c + 7 too
        x[i] = in_x ? Quads(p.x + (uint64_t(t0 + t) * p.cols + c) * 2).v[0] : uvec4(0);
    }
}

void store(uint th, float w[32], uvec4 x[4]) {
    uint at = th / 4 * S + th % 4 * 16;
    [[unroll]] for (uint k = 0; k < 16; k++)
        ws[at + k] = f16vec2(w[2 * k], w[2 * k + 1]);
    [[unroll]] for (uint i = 0; i < 4; i++) {
        uint e = th + 256 * i, base = e / (K / 8) * S + e % (K / 8) * 4;
        [[unroll]] for (uint q = 0; q < 4; q++)
            xs[base + q] = unpackFloat2x16(x[i][q]);
    }
}

void main() {
    uint th = gl_LocalInvocationID.x, sg = gl_SubgroupID;
    uint r0 = gl_WorkGroupID.x * BM, t0 = gl_WorkGroupID.y * BN;
    uint sr = sg % 4 * 16, st = sg / 4 * 32; // this subgroup's corner of the tile
    MAT_C acc[2] = {MAT_C(0.0), MAT_C(0.0)};
    uint64_t row = p.w + uint64_t(min(r0 + th / 4, p.rows - 1)) * p.row_bytes;
    uint c_begin = gl_WorkGroupID.z * p.slice, c_end = min(p.cols, c_begin + p.slice);
    float w[32];
    uvec4 x[4];
    fetch(th, row, t0, c_begin, c_end, w, x);
    store(th, w, x);
    barrier();
    for (uint c0 = c_begin; c0 < c_end; c0 += K) {
        bool next = c0 + K < c_end;
        if (next)
            fetch(th, row, t0, c0 + K, c_end, w, x);
        [[unroll]] for (uint kk = 0; kk < K / 2; kk += 8) { // 16 columns: 8 pairs
            MAT_A a;
            MAT_B b[2];
            coopMatLoad(a, ws, sr * S + kk, S, gl_CooperativeMatrixLayoutRowMajor);
            [[unroll]] for (uint j = 0; j < 2; j++)
                coopMatLoad(b[j], xs, (st + 16 * j) * S + kk, S, gl_CooperativeMatrixLayoutColumnMajor);
            [[unroll]] for (uint j = 0; j < 2; j++)
                acc[j] = coopMatMulAdd(a, b[j], acc[j]);
        }
        barrier(); // every subgroup done with this step's blocks
        if (next)
            store(th, w, x);
        barrier();
    }
    uint lane = gl_SubgroupInvocationID, base = sg * 256;
    [[unroll]] for (uint j = 0; j < 2; j++) {
        // column-major: block element (row m, token t) at t * 16 + m, so y's rows are runs
        coopMatStore(acc[j], staging, base, 16, gl_CooperativeMatrixLayoutColumnMajor);
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        for (uint e = lane; e < 256; e += gl_SubgroupSize) {
            uint r = r0 + sr + e % 16, t = t0 + st + 16 * j + e / 16;
            if (r < p.rows && t < p.n) {
                uint at = t * p.rows + r;
                if (uint64_t(p.part) != 0)
                    p.part.v[(gl_WorkGroupID.z * p.n + t) * p.rows + r] = staging[base + e];
                else
                    p.y.v[at] = p.add != 0 ? p.y.v[at] + staging[base + e] : staging[base + e];
            }
        }
        subgroupBarrier();
    }
}
