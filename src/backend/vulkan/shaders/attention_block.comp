// attention_block.comp: attention.comp for prompts: a workgroup a head and 16 query tokens, over
// the cells 16 at a time: their keys and values brought into shared memory once for the 16
// queries (and not at all where none of them sees a cell of the 16), a score a thread, an online
// softmax per query, each of a query's 16 threads summing the values of every 16th dimension.
// Heads up to 128 wide; the arguments are attention.comp's.
#version 450
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
layout(local_size_x = 256) in;
#include "attention_args.glsl"

const uint BQ = 16, BC = 16, HD = 128, PER = HD / 16; // PER: a thread's value dimensions
const float NONE = -1.0 / 0.0;
shared float qs[BQ][HD], ks[BC][HD + 1], vs[BC][HD], ss[BQ][BC + 1], ps[BQ][BC + 1];
shared uint seen[3]; // whether any query sees a cell of the tile: three in turn (see below)

void main() {
    uint h = gl_WorkGroupID.x, th = gl_LocalInvocationID.x, qi = th / 16, l = th % 16;
    uint t0 = gl_WorkGroupID.y * BQ, t = t0 + qi, kvh = h / (p.n_head / p.n_head_kv);
    for (uint e = th; e < BQ * p.hd_k; e += 256) {
        uint i = e / p.hd_k, d = e % p.hd_k;
        qs[i][d] = t0 + i < p.n_q ? p.q.v[((t0 + i) * p.n_head + h) * p.hd_k + d] : 0.0;
    }
    if (th < 3)
        seen[th] = 0;
    float acc[PER];
    [[unroll]] for (uint k = 0; k < PER; k++)
        acc[k] = 0.0;
    float m = NONE, sum = 0.0;
    barrier();
    for (uint c0 = 0, step = 0; c0 < p.n_cells; c0 += BC, step++) {
        bool vis = t < p.n_q && c0 + l < p.n_cells && visible(t, c0 + l);
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
        for (uint e = th; e < BC * p.hd_k; e += 256) {
            uint j = e / p.hd_k, d = e % p.hd_k;
            ks[j][d] = c0 + j < p.n_cells ? row_at(kb + j * p.k_row, p.row_type, kvh * p.hd_k + d) : 0.0;
        }
        for (uint e = th; e < BC * p.hd_v; e += 256) {
            uint j = e / p.hd_v, d = e % p.hd_v;
            vs[j][d] = c0 + j < p.n_cells ? row_at(vb + j * p.v_row, p.row_type, kvh * p.hd_v + d) : 0.0;
        }
        barrier();
        float s = NONE;
        if (vis) {
            float dot = 0.0;
            for (uint d = 0; d < p.hd_k; d++)
                dot += qs[qi][d] * ks[l][d];
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
            if (d < p.hd_v) {
                float a = acc[k] * alpha;
                [[unroll]] for (uint j = 0; j < BC; j++)
                    a += ps[qi][j] * vs[j][d];
                acc[k] = a;
            }
        }
        // the next step's first barrier keeps its tiles from these reads
    }
    if (t >= p.n_q)
        return;
    if (uint64_t(p.sinks) != 0 && m != NONE) {
        float sink = p.sinks.v[h], m_new = max(m, sink), alpha = exp(m - m_new);
        [[unroll]] for (uint k = 0; k < PER; k++)
            acc[k] *= alpha;
        sum = sum * alpha + exp(sink - m_new);
    }
    float inv = sum == 0.0 ? 0.0 : 1.0 / sum;
    uint yrow = (t * p.n_head + h) * p.hd_v;
    [[unroll]] for (uint k = 0; k < PER; k++)
        if (l + 16 * k < p.hd_v)
            p.y.v[yrow + l + 16 * k] = acc[k] * inv;
}
