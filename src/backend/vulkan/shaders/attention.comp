// attention.comp: one query token and head per workgroup over keys and values read from the KV
// cache's f32, f16 or q8_0 rows (or float rows given as such): scores of the visible cells 256 at a
// time, an online softmax (a gpt-oss sink joins it last, with no value), the values accumulated
// in shared memory by dimension.
#version 450
#include "common.glsl"
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 256) in;
#include "attention_args.glsl"

shared float qs[512], acc[512], prob[256], part[256];

float reduce(float v, bool take_max) {
    uint t = gl_LocalInvocationID.x;
    part[t] = v;
    barrier();
    for (uint s = 128; s > 0; s >>= 1) {
        if (t < s)
            part[t] = take_max ? max(part[t], part[t + s]) : part[t] + part[t + s];
        barrier();
    }
    float r = part[0];
    barrier();
    return r;
}

void main() {
    uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, th = gl_LocalInvocationID.x;
    uint kvh = h / (p.n_head / p.n_head_kv);
    uint qrow = (t * p.n_head + h) * p.hd_k;
    for (uint i = th; i < p.hd_k; i += 256)
        qs[i] = p.q.v[qrow + i];
    for (uint i = th; i < p.hd_v; i += 256)
        acc[i] = 0.0;
    barrier();
    float m = -1.0 / 0.0, sum = 0.0;
    for (uint c0 = 0; c0 < p.n_cells; c0 += 256) {
        uint c = c0 + th;
        float s = -1.0 / 0.0;
        if (c < p.n_cells && visible(t, c)) {
            uint64_t krow = p.k + uint64_t(c) * p.k_row;
            float dot = 0.0;
            for (uint i = 0; i < p.hd_k; i += 4) { // four loads issued, then summed in order
                float kv[4];
                [[unroll]] for (uint u = 0; u < 4; u++)
                    kv[u] = i + u < p.hd_k ? row_at(krow, p.row_type, kvh * p.hd_k + i + u) : 0.0;
                [[unroll]] for (uint u = 0; u < 4; u++)
                    if (i + u < p.hd_k)
                        dot += qs[i + u] * kv[u];
            }
            s = p.softcap == 0.0 ? dot * p.scale : p.softcap * tanh(dot * (p.scale / p.softcap));
        }
        float m_new = max(m, reduce(s, true));
        if (m_new == -1.0 / 0.0)
            continue; // nothing visible yet
        float alpha = exp(m - m_new), e = s == -1.0 / 0.0 ? 0.0 : exp(s - m_new);
        prob[th] = e;
        sum = sum * alpha + reduce(e, false);
        m = m_new;
        uint cells = min(256, p.n_cells - c0);
        if (p.hd_v < 256) { // the tile's cells split among 256 / hd_v threads a dimension
            uint pieces = 256 / p.hd_v, i = th % p.hd_v, piece = th / p.hd_v;
            float a = 0.0;
            for (uint j = piece; piece < pieces && j < cells; j += 4 * pieces) {
                float w[4], vv[4]; // four cells' loads issued, then summed in order
                [[unroll]] for (uint u = 0; u < 4; u++) {
                    uint jj = j + u * pieces;
                    w[u] = jj < cells ? prob[jj] : 0.0;
                    vv[u] = w[u] != 0.0 ? row_at(p.v + uint64_t(c0 + jj) * p.v_row, p.row_type,
                                                 kvh * p.hd_v + i)
                                        : 0.0;
                }
                [[unroll]] for (uint u = 0; u < 4; u++)
                    if (w[u] != 0.0)
                        a += w[u] * vv[u];
            }
            part[th] = a;
            barrier();
            if (piece == 0) {
                a = acc[i] * alpha;
                for (uint q = 0; q < pieces; q++)
                    a += part[q * p.hd_v + i];
                acc[i] = a;
            }
        } else
            for (uint i = th; i < p.hd_v; i += 256) {
                float a = acc[i] * alpha;
                for (uint j = 0; j < cells; j++)
                    if (prob[j] != 0.0)
                        a += prob[j] * row_at(p.v + uint64_t(c0 + j) * p.v_row, p.row_type, kvh * p.hd_v + i);
                acc[i] = a;
            }
        barrier();
    }
    if (uint64_t(p.sinks) != 0 && m != -1.0 / 0.0) {
        float sink = p.sinks.v[h], m_new = max(m, sink), alpha = exp(m - m_new);
        for (uint i = th; i < p.hd_v; i += 256)
            acc[i] *= alpha;
        sum = sum * alpha + exp(sink - m_new);
    }
    float inv = sum == 0.0 ? 0.0 : 1.0 / sum;
    uint yrow = (t * p.n_head + h) * p.hd_v;
    for (uint i = th; i < p.hd_v; i += 256)
        p.y.v[yrow + i] = acc[i] * inv;
}
