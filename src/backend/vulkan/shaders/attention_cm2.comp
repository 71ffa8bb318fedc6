// attention_cm2.comp: prompts' attention over f16 cache rows on workgroup-wide cooperative matrices
// (VK_NV_cooperative_matrix2), flash-attention style: a workgroup of 128 takes a head and BQ query
// tokens (32: vk_attention.c), and goes over the cells BC (64) at a time. Keys and values come in
// through tensor loads (the driver stages them in shared memory); scores, the softmax's running max
// and sum, and the output sums are f32 matrices; the weights are rounded to f16 for P V, and the
// sum is taken of those same f16 weights (a product with a matrix of ones). Max and sum are kept
// smeared along each row (every column holds the row's value), which is what the row reductions
// make and what rescaling the output by elements needs. Each tile is first seen whole by every
// query, by none (skipped), or in part, from the tile's and the queries' ranges of positions and
// their sequence; only the last compare each cell with each query, from positions staged in shared
// memory (or, for queries of several sequences, attention_args.glsl's visible()). Heads up to HD
// wide (64 or 128, a build each; vk_attention.c), multiples of 16; the arguments are
// attention.comp's.
#version 450
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
layout(local_size_x = 128) in;
#include "attention_args.glsl"
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Rows {
    float16_t v[];
};

// queries and cells a tile (vk_attention.c's cm2_tile specializes them)
layout(constant_id = 0) const uint BQ = 64;
layout(constant_id = 1) const uint BC = 64;
#define ACC(cols) coopmat<float, gl_ScopeWorkgroup, BQ, cols, gl_MatrixUseAccumulator>
#define MAT_Q coopmat<float16_t, gl_ScopeWorkgroup, BQ, HD, gl_MatrixUseA>
#define MAT_P coopmat<float16_t, gl_ScopeWorkgroup, BQ, BC, gl_MatrixUseA>
#define MAT_KT coopmat<float16_t, gl_ScopeWorkgroup, HD, BC, gl_MatrixUseB>
#define MAT_V coopmat<float16_t, gl_ScopeWorkgroup, BC, HD, gl_MatrixUseB>
#define CLAMPED tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV>
const float NONE = -1.0 / 0.0; // -inf: a cell the query does not see
// the running max's start: finite, so a row that has seen nothing yet rescales by exp(0), and its
// weights are exp(-inf) = 0, never exp(NaN)
const float LOWEST = -1.7014117e38; // -FLT_MAX / 2
const uint SKIP = 0, WHOLE = 1, PART = 2; // how the workgroup's queries see a tile

float max_of(const in float a, const in float b) {
    return max(a, b);
}
float first_of(const in float a, const in float b) {
    return a;
}

// A score, or NONE where query t0 + r does not see cell c0 + c (or either is past the end).
float masked(const in uint r, const in uint c, const in float s, const in uint t0,
             const in uint c0) {
    uint t = t0 + r, cell = c0 + c;
    return t < N_Q && cell < n_cells && visible(t, cell) ? s : NONE;
}

// A part tile's cells as the workgroup's one sequence has them (their positions, ABSENT where not
// in it or past the end), and the queries' positions (ABSENT past the tokens), for masked_staged.
const int ABSENT = -0x7fffffff - 1;
shared int staged_cell[BC], staged_query[BQ];

float masked_staged(const in uint r, const in uint c, const in float s) {
    int kp = staged_cell[c], qp = staged_query[r];
    bool seen = kp != ABSENT && qp != ABSENT && kp - qp <= p.ahead &&
                (p.window <= 0 || qp - kp < p.window);
    return seen ? s : NONE;
}

// The workgroup's queries, as each subgroup works them out alike: their range of positions and
// the one sequence all are in (-1 where they are not all in one; they then see no tile whole).
struct Queries {
    int low, high, seq;
};

Queries queries_of(uint t0) {
    int low = 0x7fffffff, high = -0x7fffffff - 1, seq_low = 0x7fffffff, seq_high = -1;
    for (uint i = gl_SubgroupInvocationID; i < BQ; i += gl_SubgroupSize)
        if (t0 + i < N_Q) {
            int qp = p.q_pos.v[t0 + i], s = p.q_seq.v[t0 + i];
            low = min(low, qp), high = max(high, qp);
            seq_low = min(seq_low, s), seq_high = max(seq_high, s);
        }
    Queries q;
    q.low = subgroupMin(low), q.high = subgroupMax(high);
    seq_low = subgroupMin(seq_low), seq_high = subgroupMax(seq_high);
    q.seq = seq_low == seq_high && seq_low >= 0 ? seq_low : -1;
    return q;
}

// How the queries see cells [c0, c0 + BC): SKIP where none sees any of them (all ahead of every
// query, or all past the window, or none in the queries' one sequence), WHOLE where every query
// sees every cell (all in use and in the sequence, none ahead, none past the window), else PART.
uint tile_kind(uint c0, Queries q) {
    int low = 0x7fffffff, high = -0x7fffffff - 1;
    bool all_in = true, any_in = false;
    for (uint i = gl_SubgroupInvocationID; i < BC; i += gl_SubgroupSize) {
        uint c = c0 + i;
        if (c >= n_cells) {
            all_in = false;
            continue;
        }
        int kp = p.cell_pos.v[c];
        low = min(low, kp), high = max(high, kp);
        bool in_seq = in_sequence(c, q.seq);
        all_in = all_in && in_seq, any_in = any_in || in_seq;
    }
    low = subgroupMin(low), high = subgroupMax(high);
    all_in = subgroupAnd(all_in), any_in = subgroupOr(any_in);
    if (high < low) // no cell in use
        return SKIP;
    // differences of positions as 64-bit, away from int overflow
    int64_t ahead = int64_t(low) - q.high, behind = int64_t(q.low) - high;
    bool after_window = p.window > 0 && behind >= p.window;
    if (ahead > p.ahead || after_window || (q.seq >= 0 && !any_in))
        return SKIP;
    bool none_ahead = int64_t(high) - q.low <= p.ahead;
    bool in_window = p.window <= 0 || int64_t(q.high) - low < p.window;
    return all_in && none_ahead && in_window ? WHOLE : PART;
}

void main() {
    uint h = gl_WorkGroupID.x, t0 = gl_WorkGroupID.y * BQ, kvh = h / (N_HEAD / N_HEAD_KV);
    Queries q = queries_of(t0);
    // the cells: the union of the queries' cell_range
    uint first = 0xffffffffu, end = 0;
    for (uint i = gl_SubgroupInvocationID; i < BQ; i += gl_SubgroupSize)
        if (t0 + i < N_Q) {
            uint f, e;
            cell_range(p.q_seq.v[t0 + i], BC, f, e);
            if (e > f)
                first = min(first, f), end = max(end, e);
        }
    first = subgroupMin(first), n_cells = subgroupMax(end);
    uint th = gl_LocalInvocationID.x;
    if (th < BQ)
        staged_query[th] = t0 + th < N_Q ? p.q_pos.v[t0 + th] : ABSENT;
    barrier();

    // the queries, scaled, as f16; past the tokens and the head's width zeros
    CLAMPED lq = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    lq = setTensorLayoutDimensionNV(lq, N_Q, HD_K);
    lq = setTensorLayoutStrideNV(lq, N_HEAD * HD_K, 1);
    ACC(HD) qf;
    coopMatLoadTensorNV(qf, p.q.v, h * HD_K, sliceTensorLayoutNV(lq, t0, BQ, 0, HD));
    MAT_Q qa = MAT_Q(qf * p.scale);

    // keys and values: cells by dimensions, head kvh's; the tiles past the cells in use (or with
    // heads narrower than HD) read zeros there, the others take loads without bounds checks
    tensorLayoutNV<2> lk = createTensorLayoutNV(2), lv = createTensorLayoutNV(2);
    lk = setTensorLayoutDimensionNV(lk, n_cells, HD_K);
    lk = setTensorLayoutStrideNV(lk, p.k_row / 2 & ~7u, 1);
    lv = setTensorLayoutDimensionNV(lv, n_cells, HD_V);
    lv = setTensorLayoutStrideNV(lv, p.v_row / 2 & ~7u, 1);
    CLAMPED lkc = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    CLAMPED lvc = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    lkc = setTensorLayoutDimensionNV(lkc, n_cells, HD_K);
    lkc = setTensorLayoutStrideNV(lkc, p.k_row / 2, 1);
    lvc = setTensorLayoutDimensionNV(lvc, n_cells, HD_V);
    lvc = setTensorLayoutStrideNV(lvc, p.v_row / 2, 1);
    tensorViewNV<2, false, 1, 0> transpose = createTensorViewNV(2, false, 1, 0);
    bool full_heads = HD_K == HD && HD_V == HD;

    ACC(HD) o = ACC(HD)(0.0);
    ACC(BC) m = ACC(BC)(LOWEST), l = ACC(BC)(0.0);
    coopmat<float16_t, gl_ScopeWorkgroup, BC, BC, gl_MatrixUseB> ones =
        coopmat<float16_t, gl_ScopeWorkgroup, BC, BC, gl_MatrixUseB>(1.0);
    [[dont_unroll]] for (uint c0 = first; c0 < n_cells; c0 += BC) {
        uint kind = tile_kind(c0, q);
        if (kind == SKIP)
            continue;
        bool inside = full_heads && c0 + BC <= n_cells;
        MAT_KT kt;
        if (inside)
            coopMatLoadTensorNV(kt, Rows(p.k).v, kvh * HD_K,
                                sliceTensorLayoutNV(lk, c0, BC, 0, HD), transpose);
        else
            coopMatLoadTensorNV(kt, Rows(p.k).v, kvh * HD_K,
                                sliceTensorLayoutNV(lkc, c0, BC, 0, HD), transpose);
        ACC(BC) s = coopMatMulAdd(qa, kt, ACC(BC)(0.0));
        if (p.softcap != 0.0)
            for (int k = 0; k < s.length(); k++)
                s[k] = p.softcap * tanh(s[k] / p.softcap);
        // part tiles: their cells' positions in shared memory first where the queries are of one
        // sequence (on an H200, 97 -> 84 us a layer of the 8B's pp512 against reading them from
        // memory for every score), else each score's query and cell read there
        if (kind == PART && q.seq >= 0) {
            barrier(); // the last part tile's cells read
            if (th < BC) {
                uint c = c0 + th;
                bool in_seq = c < n_cells && in_sequence(c, q.seq);
                staged_cell[th] = in_seq ? p.cell_pos.v[c] : ABSENT;
            }
            barrier();
            coopMatPerElementNV(s, s, masked_staged);
        } else if (kind == PART)
            coopMatPerElementNV(s, s, masked, t0, c0);
        // the online softmax: m the new running max, e the old sums' rescale, s the weights
        ACC(BC) row_max, e;
        coopMatReduceNV(row_max, s, gl_CooperativeMatrixReduceRowNV, max_of);
        for (int k = 0; k < s.length(); k++) {
            float m_new = max(m[k], row_max[k]);
            e[k] = exp(m[k] - m_new);
            s[k] = exp(s[k] - m_new);
            m[k] = m_new;
        }
        MAT_P pa = MAT_P(s);
        l = l * e + coopMatMulAdd(pa, ones, ACC(BC)(0.0));
        ACC(HD) rescale;
        coopMatReduceNV(rescale, e, gl_CooperativeMatrixReduceRowNV, first_of);
        MAT_V v;
        if (inside)
            coopMatLoadTensorNV(v, Rows(p.v).v, kvh * HD_V, sliceTensorLayoutNV(lv, c0, BC, 0, HD));
        else
            coopMatLoadTensorNV(v, Rows(p.v).v, kvh * HD_V, sliceTensorLayoutNV(lvc, c0, BC, 0, HD));
        o = coopMatMulAdd(pa, v, o * rescale);
    }

    // the sum, and the sink's weight (attention_cm.comp's), as the output's shape; a row that saw
    // no cell (sum 0) writes zeros
    ACC(HD) sum, row_max;
    coopMatReduceNV(sum, l, gl_CooperativeMatrixReduceRowNV, first_of);
    if (uint64_t(p.sinks) != 0) {
        coopMatReduceNV(row_max, m, gl_CooperativeMatrixReduceRowNV, first_of);
        float sink = p.sinks.v[h];
        for (int k = 0; k < sum.length(); k++)
            if (sum[k] != 0.0) {
                float m_new = max(row_max[k], sink), alpha = exp(row_max[k] - m_new);
                o[k] *= alpha;
                sum[k] = sum[k] * alpha + exp(sink - m_new);
            }
    }
    for (int k = 0; k < sum.length(); k++)
        sum[k] = sum[k] == 0.0 ? 0.0 : 1.0 / sum[k];
    o = o * sum;
    CLAMPED ly = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    ly = setTensorLayoutDimensionNV(ly, N_Q, HD_V);
    ly = setTensorLayoutStrideNV(ly, N_HEAD * HD_V, 1);
    coopMatStoreTensorNV(o, p.y.v, h * HD_V, sliceTensorLayoutNV(ly, t0, BQ, 0, HD));
}
