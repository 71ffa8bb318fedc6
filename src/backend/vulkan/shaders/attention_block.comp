// attention_block.comp: attention.comp for prompts: a workgroup a head and 16 query tokens, over
// the cells 16 at a time: their keys and values brought into shared memory once for the 16
// queries (and not at all where none of them sees a cell of the 16), a score a thread, an online
// softmax per query, each of a query's 16 threads summing every 16th group of 4 of the value
// dimensions. Shared rows are vec4s: a load brings 4 values. Heads up to 128 wide, multiples of
// 4 (vk_attention.c); the arguments are attention.comp's.
#version 450
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
layout(local_size_x = 256) in;
#include "attention_args.glsl"

const uint BQ = 16, BC = 16, HD4 = 128 / 4, PER = HD4 / 16; // PER: a thread's vec4s of values
const float NONE = -1.0 / 0.0;
shared vec4 qs[BQ][HD4], ks[BC][HD4 + 1], vs[BC][HD4]; // ks padded: rows in other banks
shared float ss[BQ][BC + 1], ps[BQ][BC + 1];
shared uint seen[3]; // whether any query sees a cell of the tile: three in turn (see below)
shared uint range_first, range_end; // the union of the queries' cell_range

// Elements 4i .. 4i + 3 of head kvh in a row of keys or values (hd: the head's width).
vec4 row4(uint64_t row, uint kvh, uint hd, uint i) {
    uint at = kvh * hd + 4 * i;
    return vec4(row_at(row, ROW_TYPE, at), row_at(row, ROW_TYPE, at + 1),
                row_at(row, ROW_TYPE, at + 2), row_at(row, ROW_TYPE, at + 3));
}

void main() {
    uint h = gl_WorkGroupID.x, th = gl_LocalInvocationID.x, qi = th / 16, l = th % 16;
    uint t0 = gl_WorkGroupID.y * BQ, t = t0 + qi, kvh = h / (N_HEAD / N_HEAD_KV);
    uint k4 = HD_K / 4, v4 = HD_V / 4;
    for (uint e = th; e < BQ * k4; e += 256) {
        uint i = e / k4, d = e % k4, at = ((t0 + i) * N_HEAD + h) * HD_K + 4 * d;
        bool in_q = t0 + i < N_Q;
        qs[i][d] = in_q ? vec4(p.q.v[at], p.q.v[at + 1], p.q.v[at + 2], p.q.v[at + 3]) : vec4(0.0);
    }
    if (th < 3)
        seen[th] = 0;
    if (th == 0)
        range_first = 0xffffffffu, range_end = 0;
    vec4 acc[PER];
    [[unroll]] for (uint k = 0; k < PER; k++)
        acc[k] = vec4(0.0);
    float m = NONE, sum = 0.0;
    int qp = t < N_Q ? p.q_pos.v[t] : 0, qseq = t < N_Q ? p.q_seq.v[t] : -1; // read once
    barrier();
    uint first, end;
    cell_range(qseq, BC, first, end);
    if (l == 0 && end > first)
        atomicMin(range_first, first), atomicMax(range_end, end);
    barrier();
    n_cells = range_end;
    for (uint c0 = range_first, step = 0; c0 < n_cells; c0 += BC, step++) {
        bool vis = qseq >= 0 && c0 + l < n_cells && visible_from(qp, qseq, c0 + l);
        if (vis)
            seen[step % 3] = 1;
        barrier();
        bool any = seen[step % 3] != 0;
        // the flag two steps on: last read a step ago (before the barrier above), next written
        // after the next step's barrier, so one barrier a step keeps the three apart
        if (th == 0)
            seen[(step + 2) % 3] = 0;
        if (!any)
            continue;
        uint64_t kb = p.k + uint64_t(c0) * p.k_row, vb = p.v + uint64_t(c0) * p.v_row;
        for (uint e = th; e < BC * k4; e += 256) {
            uint j = e / k4, d = e % k4;
            ks[j][d] = c0 + j < n_cells ? row4(kb + j * p.k_row, kvh, HD_K, d) : vec4(0.0);
        }
        for (uint e = th; e < BC * v4; e += 256) {
            uint j = e / v4, d = e % v4;
            vs[j][d] = c0 + j < n_cells ? row4(vb + j * p.v_row, kvh, HD_V, d) : vec4(0.0);
        }
        barrier();
        float s = NONE;
        if (vis) {
            vec4 part = vec4(0.0); // four sums in turn: the loads pipelined, not one chain
            [[unroll]] for (uint d = 0; d < HD4; d++)
                if (d < k4)
                    part += qs[qi][d] * ks[l][d];
            float dot = (part.x + part.y) + (part.z + part.w);
            s = p.softcap == 0.0 ? dot * p.scale : p.softcap * tanh(dot * (p.scale / p.softcap));
        }
        ss[qi][l] = s;
        barrier();
        float m_new = m; // the same in each of the query's 16 threads
        [[unroll]] for (uint j = 0; j < BC; j++)
            m_new = max(m_new, ss[qi][j]);
        float alpha = m_new == NONE ? 1.0 : exp(m - m_new);
        ps[qi][l] = s == NONE ? 0.0 : exp(s - m_new);
        barrier();
        float tile_sum = 0.0;
        [[unroll]] for (uint j = 0; j < BC; j++)
            tile_sum += ps[qi][j];
        sum = sum * alpha + tile_sum;
        m = m_new;
        [[unroll]] for (uint k = 0; k < PER; k++) {
            uint d = l + 16 * k;
            if (d < v4) {
                vec4 a = acc[k] * alpha;
                [[unroll]] for (uint j = 0; j < BC; j++)
                    a += ps[qi][j] * vs[j][d];
                acc[k] = a;
            }
        }
        // the next step's first barrier keeps its tiles from these reads
    }
    if (t >= N_Q)
        return;
    if (uint64_t(p.sinks) != 0 && m != NONE) {
        float sink = p.sinks.v[h], m_new = max(m, sink), alpha = exp(m - m_new);
        [[unroll]] for (uint k = 0; k < PER; k++)
            acc[k] *= alpha;
        sum = sum * alpha + exp(sink - m_new);
    }
    float inv = sum == 0.0 ? 0.0 : 1.0 / sum;
    uint yrow = (t * N_HEAD + h) * HD_V;
    [[unroll]] for (uint k = 0; k < PER; k++) {
        uint d = l + 16 * k;
        if (d < v4)
            [[unroll]] for (uint c = 0; c < 4; c++)
                p.y.v[yrow + 4 * d + c] = acc[k][c] * inv;
    }
}
