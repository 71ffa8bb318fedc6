// gemm_cm2.comp: gemm.comp's product for f16, q4_K and q6_K weights on workgroup-wide
// cooperative matrices (VK_NV_cooperative_matrix2): a workgroup of 256 sums a tile of BM rows by
// BN tokens, BK columns a step, through tensor loads; the driver stages the blocks through shared
// memory and shares the tile among its subgroups. q4_K's and q6_K's are decoded a weight at a time
// in the loads (cm2_q4_k.glsl, cm2_q6_k.glsl). x comes in as f16 rows (halves.comp's) and y goes
// out through views that swap the two dimensions. Tiles wholly inside the matrices take loads
// without bounds checks; those at the edges read zeros past them and write nothing there.
// The other quantized types stay on gemm_cm.comp until each has a decode file like
// cm2_q4_k.glsl. On the H100, q6_K's ran the 8B Q4_K_M's pp512 10% faster than gemm_cm.comp's
// (7694 against 6968 t/s), the 1B's 4.6%. f16 sums instead of f32 (llama.cpp's default) ran it
// 1% faster with q6_K errors of 1e-3: not taken. Earlier forms of q4_K's measured slower than
// gemm_cm.comp on the H100: 16 columns' scales in shared memory with 16-bit words (not whole
// blocks) as the load's elements, 1.8 to 4 times; dequantizing into shared memory as gemm_cm.comp
// does, the workgroup's matrix loaded from there, 1.2 to 1.6 times.
// TILE_M x TILE_N: a workgroup's rows by tokens (vk_matmul.c's cm2_tiles), made specialization
// constants with the weights' shape (vk_matmul.c's cm2_product). One dispatch may take up to
// three matrices of one width and type, each with its own y (a prompt's gate and up; its q, k
// and v): each one's tiles follow the one before's in the grid's x, so a wave holds the end of one
// and the start of the next (vk_matmul.c's cm2_multi).
#version 450
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_control_flow_attributes : require
// q6_K's blocks as 16-bit words in the decode function's argument (no Int16 arithmetic follows)
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Args {
    uint64_t w; // f16 or q4_K [rows][cols], rows row_bytes apart
    uint64_t x; // f16 [n][cols], 16-byte aligned rows
    uint64_t y; // f32 [n][rows]
    uint64_t tab;
    uint rows, cols, n, row_bytes, add; // add: y += W X
    uint pad_slice;
    uint64_t pad_part; // gemm_cm.comp's (vk_matmul.c's struct gemm_args)
    uint64_t w2, y2, w3, y3; // a second and third matrix and their y, or 0
    uint rows2, rows3;       // their rows
} p;

// The tile (TILE_M x TILE_N unless vk_matmul.c specializes it otherwise) and, where specialized
// (not 0), the weights' shape: rows, cols and row_bytes then constants the driver's compiler
// knows, in place of the push constants'.
layout(constant_id = 0) const uint SHAPE_ROWS = 0;
layout(constant_id = 1) const uint SHAPE_COLS = 0;
layout(constant_id = 2) const uint SHAPE_ROW_BYTES = 0;
layout(constant_id = 3) const uint BM = TILE_M;
layout(constant_id = 4) const uint BN = TILE_N;
layout(constant_id = 5) const uint BK = 64;
// Where the product is cut into column slices (vk_matmul.c's cm2_slices; 0: not), the columns of
// each, the same for all (a whole number of BK steps): a trip count the compiler knows (a count
// it did not know ran every product 3 to 4 times as slow on an H200).
layout(constant_id = 6) const uint SLICE = 0;
// f16 weights: UNROLL steps of BK columns a trip of the loop, unrolled (vk_matmul.c's cm2_unroll
// picks a count dividing the columns' steps). On an H200 8 took the 1B F16's pp512 from 68131 to
// 81270 t/s (its products 10.66 -> 8.27 ms a prompt pair: about 240 TFLOPS), as llama.cpp unrolls
// its f16 loop 8 times. The quantized types unroll a superblock's steps already; two superblocks a
// trip (their scales in two shared buffers) ran no faster, four 3 times as slow.
layout(constant_id = 7) const uint UNROLL = 1;
#define ROWS (SHAPE_ROWS != 0 ? SHAPE_ROWS : rows_m)
#define COLS (SHAPE_COLS != 0 ? SHAPE_COLS : p.cols)
#define ROW_BYTES (SHAPE_ROW_BYTES != 0 ? SHAPE_ROW_BYTES : p.row_bytes)
#define MAT_A coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB>
#define MAT_C coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>

// This workgroup's matrix, its y and its rows (by its place in the grid's x).
uint64_t w_base, y_base;
uint rows_m;

layout(buffer_reference, std430, buffer_reference_align = 16) buffer Out { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer In { float16_t v[]; };

#if defined(TYPE_Q4_K) || defined(TYPE_Q6_K)
#if defined(TYPE_Q4_K)
#include "cm2_q4_k.glsl"
#else
#include "cm2_q6_k.glsl"
#endif
#define DECODE , decode
// a row's stride in the layout's elements: superblocks here
#define W_BLOCK QK
#define W_STRIDE (ROW_BYTES / BLOCK_BYTES)
#define W_STRIDE_INSIDE W_STRIDE
#else
// f16 weights: the tensor load's elements as they are, no superblocks
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer W { float16_t v[]; };
const uint QK = UNROLL > 1 ? BK * UNROLL : BK;
void superblocks_begin(uint r0) {}
void superblock(uint r0, uint c0) {}
#define DECODE
// a row's stride in halves; inside tiles rounded down to the multiple of 8 inside() found it
#define W_BLOCK 1
#define W_STRIDE (ROW_BYTES / 2)
#define W_STRIDE_INSIDE (ROW_BYTES / 2 & ~7u)
#endif

// The tile's product over every column, its loads through layouts lw and lx (with or without
// bounds checks), added to acc; quantized weights a superblock of QK columns at a time, its
// scales set up first (superblock()), f16 ones QK columns a trip.
#define PRODUCT(lw, lx)                                                                        \
    superblocks_begin(r0);                                                                     \
    for (uint c0 = k0; c0 < k0 + (SLICE != 0 ? SLICE : COLS); c0 += QK) {                     \
        superblock(r0, c0);                                                                    \
        [[unroll]] for (uint k = 0; k < QK; k += BK) {                                         \
            MAT_A a;                                                                           \
            MAT_B b;                                                                           \
            coopMatLoadTensorNV(a, W(w_base).v, 0,                                             \
                                sliceTensorLayoutNV(lw, r0, BM, c0 + k, BK) DECODE);           \
            coopMatLoadTensorNV(b, In(p.x).v, 0, sliceTensorLayoutNV(lx, t0, BN, c0 + k, BK),  \
                                swap);                                                         \
            acc = coopMatMulAdd(a, b, acc);                                                    \
        }                                                                                      \
    }

// Whether the tile is wholly inside the matrices, with rows of x, y and f16 weights whole 16-byte
// runs (so loads need no bounds checks and can be 16 bytes wide).
bool inside(uint r0, uint t0) {
    bool aligned = COLS % QK == 0 && COLS % BK == 0 && ROWS % 8 == 0 && ROW_BYTES % 16 == 0;
    return aligned && r0 + BM <= ROWS && t0 + BN <= p.n;
}

void main() {
    uint tile = gl_WorkGroupID.x, first = (p.rows + BM - 1) / BM, next = (p.rows2 + BM - 1) / BM;
    uint m = tile < first ? 0 : tile < first + next ? 1 : 2;
    tile -= m == 0 ? 0 : m == 1 ? first : first + next;
    w_base = m == 0 ? p.w : m == 1 ? p.w2 : p.w3, y_base = m == 0 ? p.y : m == 1 ? p.y2 : p.y3;
    rows_m = m == 0 ? p.rows : m == 1 ? p.rows2 : p.rows3;
    uint r0 = tile * BM, t0 = gl_WorkGroupID.y * BN;
    // a column slice where the product is cut into several: each y then a slab of the scratch
    // ([slice][n][rows]) that split_sum.comp adds up
    bool cut = SLICE != 0;
    uint k0 = gl_WorkGroupID.z * SLICE;
    if (cut)
        y_base += uint64_t(gl_WorkGroupID.z) * p.n * ROWS * 4;
    tensorViewNV<2, false, 1, 0> swap = createTensorViewNV(2, false, 1, 0);
    MAT_C acc = MAT_C(0.0);
    // W: rows x cols, rows row_bytes apart; x and y: token-major, read and written transposed.
    // Strides rounded down to what inside() found them multiples of, which tells the compiler so
    // (without them it ran 2.2 times as slow on the H100).
    if (inside(r0, t0)) {
        tensorLayoutNV<2> lw = createTensorLayoutNV(2);
        lw = setTensorLayoutBlockSizeNV(lw, 1, W_BLOCK);
        lw = setTensorLayoutDimensionNV(lw, ROWS, COLS);
        lw = setTensorLayoutStrideNV(lw, W_STRIDE_INSIDE, 1);
        tensorLayoutNV<2> lx = createTensorLayoutNV(2);
        lx = setTensorLayoutDimensionNV(lx, p.n, COLS);
        lx = setTensorLayoutStrideNV(lx, COLS & ~7u, 1);
        tensorLayoutNV<2> ly = createTensorLayoutNV(2);
        ly = setTensorLayoutDimensionNV(ly, p.n, ROWS);
        ly = setTensorLayoutStrideNV(ly, ROWS & ~7u, 1);
        if (p.add != 0 && !cut)
            coopMatLoadTensorNV(acc, Out(y_base).v, 0, sliceTensorLayoutNV(ly, t0, BN, r0, BM),
                                swap);
        PRODUCT(lw, lx)
        coopMatStoreTensorNV(acc, Out(y_base).v, 0, sliceTensorLayoutNV(ly, t0, BN, r0, BM), swap);
    } else {
        tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lw =
            createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
        lw = setTensorLayoutBlockSizeNV(lw, 1, W_BLOCK);
        lw = setTensorLayoutDimensionNV(lw, ROWS, COLS);
        lw = setTensorLayoutStrideNV(lw, W_STRIDE, 1);
        tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lx =
            createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
        lx = setTensorLayoutDimensionNV(lx, p.n, COLS);
        tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> ly =
            createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
        ly = setTensorLayoutDimensionNV(ly, p.n, ROWS);
        if (p.add != 0 && !cut)
            coopMatLoadTensorNV(acc, Out(y_base).v, 0, sliceTensorLayoutNV(ly, t0, BN, r0, BM),
                                swap);
        PRODUCT(lw, lx)
        coopMatStoreTensorNV(acc, Out(y_base).v, 0, sliceTensorLayoutNV(ly, t0, BN, r0, BM), swap);
    }
}
