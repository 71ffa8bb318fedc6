// attention_cm.comp: attention_block.comp on cooperative matrices (VK_KHR_cooperative_matrix's
// 16x16x16 f16 blocks summed in f32, subgroups of 32, as gemm_cm.comp has them) for prompts over
// f16 cache rows: a workgroup of 4 subgroups a head and 64 query tokens, 16 a subgroup, over the
// cells 32 at a time. The workgroup brings each tile's keys and values into shared memory (and
// not at all where none of its queries sees a cell of it). A subgroup multiplies its queries
// (scaled, as f16) by the keys into 16 x 32 scores, works out their online softmax in f32 (two
// threads a query, 16 cells each), and multiplies the weights (as f16) by the values, 32 of the
// dimensions at a time, which its threads add to their running sums after the rescale (a thread:
// 16 dimensions of one query). Heads up to 128 wide, multiples of 16 (vk_attention.c); the
// arguments are attention.comp's.
#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
layout(local_size_x = 128) in;
#include "attention_args.glsl"
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Quads { uvec4 v[]; };

#define MAT_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define MAT_C coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>

// Shared arrays of 16-byte elements (uvec4: 8 halves, vec4: 4 floats): the matrix loads and
// stores need 16-byte aligned rows, and arrays of smaller types need not start at one (on the
// H100, f16 pairs loaded 4 bytes early). S: a tile row's stride (padded: rows in other banks),
// W: the weights' row stride, both in uvec4s.
const uint BQ = 64, BC = 32, HD = 128, S = HD / 8 + 1, W = BC / 8 + 1;
const float NONE = -1.0 / 0.0;
// the tile's keys (rows 0-31), then its values (32-63), a cell a row; before the first tile,
// the workgroup's 64 queries
shared uvec4 kv[2 * BC * S];
// a subgroup's two 16x16 blocks (16 x 32 scores, then 32 dims of P V), each column-major: row m
// of column n at float 16 n + m
shared vec4 scratch[4 * 16 * BC / 4];
shared uvec4 weights[4 * 16 * W];      // a subgroup's softmax weights, 16 x 32
shared uint seen[3];                   // as attention_block.comp's
shared uint range_first, range_end;    // the union of the queries' cell_range

// Cells [c0, c0 + 32) of head kvh's keys and values into kv (zeros past the cells in use), a
// thread 16 bytes at a time.
void load_tile(uint c0, uint kvh) {
    uint th = gl_LocalInvocationID.x, k8 = HD_K / 8, v8 = HD_V / 8;
    for (uint e = th; e < BC * (k8 + v8); e += 128) {
        bool key = e < BC * k8;
        uint f = key ? e : e - BC * k8, per = key ? k8 : v8, j = f / per, d = f % per;
        uint64_t row = key ? p.k + uint64_t(c0 + j) * p.k_row : p.v + uint64_t(c0 + j) * p.v_row;
        uint hd = key ? HD_K : HD_V;
        uvec4 x = c0 + j < n_cells ? Quads(row + (kvh * hd + 8 * d) * 2).v[0] : uvec4(0);
        kv[(key ? j : BC + j) * S + d] = x;
    }
}

// This thread's query's 16 cells of the tile (bit k: cell c0 + 16 side + k) that it sees.
uint visible_bits(int qp, int qseq, uint c0, uint side) {
    uint bits = 0;
    if (qseq >= 0)
        for (uint k = 0; k < 16; k++) {
            uint c = c0 + 16 * side + k;
            if (c < n_cells && visible_from(qp, qseq, c))
                bits |= 1u << k;
        }
    return bits;
}

void main() {
    uint h = gl_WorkGroupID.x, th = gl_LocalInvocationID.x, sg = gl_SubgroupID;
    uint lane = gl_SubgroupInvocationID, qi = lane / 2, side = lane % 2;
    uint t0 = gl_WorkGroupID.y * BQ, t = t0 + 16 * sg + qi, kvh = h / (N_HEAD / N_HEAD_KV);
    // the queries, scaled, as f16 rows of kv; each subgroup's 16 into its blocks
    for (uint e = th; e < BQ * HD_K / 8; e += 128) {
        uint r = e / (HD_K / 8), d = e % (HD_K / 8), at = ((t0 + r) * N_HEAD + h) * HD_K + 8 * d;
        uvec4 x = uvec4(0);
        if (t0 + r < N_Q)
            [[unroll]] for (uint i = 0; i < 4; i++)
                x[i] = packFloat2x16(f16vec2(vec2(p.q.v[at + 2 * i], p.q.v[at + 2 * i + 1]) * p.scale));
        kv[r * S + d] = x;
    }
    if (th < 3)
        seen[th] = 0;
    if (th == 0)
        range_first = 0xffffffffu, range_end = 0;
    int qp = t < N_Q ? p.q_pos.v[t] : 0, qseq = t < N_Q ? p.q_seq.v[t] : -1;
    barrier();
    MAT_A qa[HD / 16];
    [[unroll]] for (uint i = 0; i < HD / 16; i++)
        if (i < HD_K / 16)
            coopMatLoad(qa[i], kv, 16 * sg * S + 2 * i, S, gl_CooperativeMatrixLayoutRowMajor);
    uint first, end;
    cell_range(qseq, BC, first, end);
    if (side == 0 && end > first)
        atomicMin(range_first, first), atomicMax(range_end, end);
    float o[HD / 32][16]; // dims 32 r + 16 side + e of query t
    [[unroll]] for (uint r = 0; r < HD / 32; r++)
        [[unroll]] for (uint e = 0; e < 16; e++)
            o[r][e] = 0.0;
    float m = NONE, sum = 0.0;
    barrier(); // the queries' blocks read before the first tile overwrites them
    n_cells = range_end;
    uint base = sg * 16 * BC / 4, wbase = sg * 16 * W;
    for (uint c0 = range_first, step = 0; c0 < n_cells; c0 += BC, step++) {
        uint bits = visible_bits(qp, qseq, c0, side);
        if (bits != 0)
            seen[step % 3] = 1;
        barrier();
        bool any = seen[step % 3] != 0;
        if (th == 0) // see attention_block.comp
            seen[(step + 2) % 3] = 0;
        if (!any)
            continue;
        load_tile(c0, kvh);
        barrier();
        // scores: 16 queries x 32 cells, keys read as K's transpose (column-major)
        [[unroll]] for (uint j = 0; j < 2; j++) {
            MAT_C s = MAT_C(0.0);
            [[unroll]] for (uint i = 0; i < HD / 16; i++)
                if (i < HD_K / 16) {
                    MAT_B kb;
                    coopMatLoad(kb, kv, 16 * j * S + 2 * i, S, gl_CooperativeMatrixLayoutColumnMajor);
                    s = coopMatMulAdd(qa[i], kb, s);
                }
            coopMatStore(s, scratch, base + 64 * j, 4, gl_CooperativeMatrixLayoutColumnMajor);
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        // the online softmax of this thread's 16 cells, its pair's max and sum shared by shuffles
        float sc[16], mx = NONE;
        [[unroll]] for (uint k = 0; k < 16; k++) {
            float v = scratch[base + 64 * side + 4 * k + qi / 4][qi % 4];
            v = p.softcap == 0.0 ? v : p.softcap * tanh(v / p.softcap);
            sc[k] = (bits >> k & 1) != 0 ? v : NONE;
            mx = max(mx, sc[k]);
        }
        float m_new = max(m, max(mx, subgroupShuffleXor(mx, 1)));
        float alpha = m_new == NONE ? 1.0 : exp(m - m_new), part = 0.0;
        uvec4 packed[2];
        [[unroll]] for (uint k = 0; k < 16; k += 2) {
            vec2 w = vec2(sc[k] == NONE ? 0.0 : exp(sc[k] - m_new),
                          sc[k + 1] == NONE ? 0.0 : exp(sc[k + 1] - m_new));
            part += w.x + w.y;
            packed[k / 8][k / 2 % 4] = packFloat2x16(f16vec2(w));
        }
        weights[wbase + qi * W + 2 * side] = packed[0];
        weights[wbase + qi * W + 2 * side + 1] = packed[1];
        sum = sum * alpha + part + subgroupShuffleXor(part, 1);
        m = m_new;
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        // P V, 32 dims at a time through scratch: this thread's 16 of them into its sums
        MAT_A pa[2];
        [[unroll]] for (uint j = 0; j < 2; j++)
            coopMatLoad(pa[j], weights, wbase + 2 * j, W, gl_CooperativeMatrixLayoutRowMajor);
        [[unroll]] for (uint r = 0; r < HD / 32; r++) {
            if (32 * r >= HD_V)
                break;
            [[unroll]] for (uint b = 0; b < 2; b++) {
                MAT_C acc = MAT_C(0.0);
                if (32 * r + 16 * b < HD_V)
                    [[unroll]] for (uint j = 0; j < 2; j++) {
                        MAT_B vb;
                        coopMatLoad(vb, kv, (BC + 16 * j) * S + 4 * r + 2 * b, S,
                                    gl_CooperativeMatrixLayoutRowMajor);
                        acc = coopMatMulAdd(pa[j], vb, acc);
                    }
                coopMatStore(acc, scratch, base + 64 * b, 4, gl_CooperativeMatrixLayoutColumnMajor);
            }
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            [[unroll]] for (uint e = 0; e < 16; e++)
                o[r][e] = o[r][e] * alpha + scratch[base + 64 * side + 4 * e + qi / 4][qi % 4];
            subgroupBarrier(); // read before the next dims' blocks overwrite them
        }
        // the next step's first barrier keeps the tile from these reads
    }
    if (t >= N_Q)
        return;
    if (uint64_t(p.sinks) != 0 && m != NONE) {
        float sink = p.sinks.v[h], m_new = max(m, sink), alpha = exp(m - m_new);
        [[unroll]] for (uint r = 0; r < HD / 32; r++)
            [[unroll]] for (uint e = 0; e < 16; e++)
                o[r][e] *= alpha;
        sum = sum * alpha + exp(sink - m_new);
    }
    float inv = sum == 0.0 ? 0.0 : 1.0 / sum;
    uint yrow = (t * N_HEAD + h) * HD_V;
    [[unroll]] for (uint r = 0; r < HD / 32; r++)
        if (32 * r + 16 * side < HD_V)
            [[unroll]] for (uint e = 0; e < 16; e++)
                p.y.v[yrow + 32 * r + 16 * side + e] = o[r][e] * inv;
}
