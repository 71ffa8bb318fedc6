// gemm_cm2.comp: gemm.comp's product for f16 weights on workgroup-wide cooperative matrices
// (VK_NV_cooperative_matrix2): a workgroup of 256 sums a tile of BM rows by BN tokens, BK columns
// a step, through tensor loads; the driver stages the blocks through shared memory and shares the
// tile among its subgroups. x comes in as f16 rows (halves.comp's) and y goes out through views
// that swap the two dimensions. Tiles wholly inside the matrices take loads without bounds
// checks; those at the edges read zeros past them and write nothing there.
// Quantized weights stay on gemm_cm.comp. On the H100, decoding them a weight at a time in the
// tensor loads (each 16 columns' scales in shared memory, the levels read in the decode
// function) measured 1.8 to 4 times as slow as gemm_cm.comp, and dequantizing them into shared
// memory as gemm_cm.comp does, the workgroup's matrix loaded from there, 1.2 to 1.6 times.
// TILE: 128 (128 x 128 a workgroup, for products with many tiles) or 64 (64 x 64).
#version 450
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_buffer_reference : require
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Args {
    uint64_t w; // f16 [rows][cols], rows row_bytes apart
    uint64_t x; // f16 [n][cols], 16-byte aligned rows
    uint64_t y; // f32 [n][rows]
    uint64_t tab;
    uint rows, cols, n, row_bytes, add; // add: y += W X
} p;

const uint BM = TILE, BN = TILE, BK = 64;
#define MAT_A coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB>
#define MAT_C coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>

layout(buffer_reference, std430, buffer_reference_align = 16) buffer Out { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer In { float16_t v[]; };

// The tile's product over every column, its loads through layouts lw and lx (with or without
// bounds checks), added to acc.
#define PRODUCT(lw, lx)                                                                            \
    for (uint c0 = 0; c0 < p.cols; c0 += BK) {                                                     \
        MAT_A a;                                                                                   \
        MAT_B b;                                                                                   \
        coopMatLoadTensorNV(a, In(p.w).v, 0, sliceTensorLayoutNV(lw, r0, BM, c0, BK));             \
        coopMatLoadTensorNV(b, In(p.x).v, 0, sliceTensorLayoutNV(lx, t0, BN, c0, BK), swap);       \
        acc = coopMatMulAdd(a, b, acc);                                                            \
    }

// Whether the tile is wholly inside the matrices, with rows of x, y and f16 weights whole 16-byte
// runs (so loads need no bounds checks and can be 16 bytes wide).
bool inside(uint r0, uint t0) {
    bool aligned = p.cols % BK == 0 && p.rows % 8 == 0 && p.row_bytes % 16 == 0;
    return aligned && r0 + BM <= p.rows && t0 + BN <= p.n;
}

void main() {
    uint r0 = gl_WorkGroupID.x * BM, t0 = gl_WorkGroupID.y * BN;
    tensorViewNV<2, false, 1, 0> swap = createTensorViewNV(2, false, 1, 0);
    MAT_C acc = MAT_C(0.0);
    // W: rows x cols, rows row_bytes apart; x and y: token-major, read and written transposed.
    // Strides rounded down to what inside() found them multiples of, which tells the compiler so
    // (without them it ran 2.2 times as slow on the H100).
    if (inside(r0, t0)) {
        tensorLayoutNV<2> lw = createTensorLayoutNV(2);
        lw = setTensorLayoutDimensionNV(lw, p.rows, p.cols);
        lw = setTensorLayoutStrideNV(lw, p.row_bytes / 2 & ~7u, 1);
        tensorLayoutNV<2> lx = createTensorLayoutNV(2);
        lx = setTensorLayoutDimensionNV(lx, p.n, p.cols);
        lx = setTensorLayoutStrideNV(lx, p.cols & ~7u, 1);
        tensorLayoutNV<2> ly = createTensorLayoutNV(2);
        ly = setTensorLayoutDimensionNV(ly, p.n, p.rows);
        ly = setTensorLayoutStrideNV(ly, p.rows & ~7u, 1);
        if (p.add != 0)
            coopMatLoadTensorNV(acc, Out(p.y).v, 0, sliceTensorLayoutNV(ly, t0, BN, r0, BM), swap);
        PRODUCT(lw, lx)
        coopMatStoreTensorNV(acc, Out(p.y).v, 0, sliceTensorLayoutNV(ly, t0, BN, r0, BM), swap);
    } else {
        tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lw =
            createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
        lw = setTensorLayoutDimensionNV(lw, p.rows, p.cols);
        lw = setTensorLayoutStrideNV(lw, p.row_bytes / 2, 1);
        tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lx =
            createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
        lx = setTensorLayoutDimensionNV(lx, p.n, p.cols);
        tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> ly =
            createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
        ly = setTensorLayoutDimensionNV(ly, p.n, p.rows);
        if (p.add != 0)
            coopMatLoadTensorNV(acc, Out(p.y).v, 0, sliceTensorLayoutNV(ly, t0, BN, r0, BM), swap);
        PRODUCT(lw, lx)
        coopMatStoreTensorNV(acc, Out(p.y).v, 0, sliceTensorLayoutNV(ly, t0, BN, r0, BM), swap);
    }
}
