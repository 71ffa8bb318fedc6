// attention.comp: one query token and head per workgroup over keys and values read from the KV
// cache's f32, f16 or q8_0 rows (or float rows given as such): scores of the visible cells 256 at a
// time, an online softmax (a gpt-oss sink joins it last, with no value), the values accumulated
// in shared memory by dimension; f16 rows split each dot product and sum among threads. A decode
// step's output is also made int8 groups for the next product (bytes), one op where two ran, or
// f16 (bytes with bit 0 set: the address of its halves) where that product takes those.
#version 450
#include "common.glsl"
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 256) in;
#include "attention_args.glsl"
#include "reduce.glsl"

shared float qs[512], acc[512], prob[256], part[256];
// f16 rows of heads a multiple of 64 wide, up to 256 (the usual cache): the scores' dot products
// and the values' sums split among threads, 16-byte loads all issued at once (a thread a cell
// and a dimension at a time waited for one load after another): partials for 256 cells by 8
// eighths of a head, or for 8 dimensions by 2048 / hd_v groups of cells.
shared float split[2048];
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Rows16 { uvec4 v[]; };
#include "quantize_group.glsl"
#define HEAD_OUT acc // the head's output, made int8 groups for the next product (head_bytes)
#define HEAD_WIDTH HD_V
#include "head_bytes.glsl"

bool f16_split(uint hd) {
    return ROW_TYPE == ROW_F16 && hd % 64 == 0 && hd <= 256;
}

// The dot product of 8 halves (a uvec4) with qs[at .. at + 7].
float dot8(uvec4 u, uint at) {
    float d = 0.0;
    [[unroll]] for (uint k = 0; k < 4; k++) {
        vec2 h = unpackHalf2x16(u[k]);
        d += qs[at + 2 * k] * h.x + qs[at + 2 * k + 1] * h.y;
    }
    return d;
}

// The scores' dot products of the tile's cells (from c0, count of them), each into split[cell]:
// thread th takes eighth th % 8 of cell th / 8 + 32 j for every j, then sums a cell's eighths.
float split_dot(uint c0, uint count, uint th, uint kvh) {
    uint eighth = th % 8, lanes = HD_K / 64; // uvec4 loads an eighth
    float part8[8];
    [[unroll]] for (uint j = 0; j < 8; j++) {
        uint c = c0 + th / 8 + 32 * j;
        part8[j] = 0.0;
        if (th / 8 + 32 * j < count) {
            uint dim0 = kvh * HD_K + eighth * 8 * lanes;
            Rows16 r = Rows16(p.k + uint64_t(c) * p.k_row + dim0 * 2);
            [[unroll]] for (uint l = 0; l < 4; l++)
                if (l < lanes)
                    part8[j] += dot8(r.v[l], eighth * 8 * lanes + 8 * l);
        }
    }
    barrier();
    [[unroll]] for (uint j = 0; j < 8; j++)
        split[(th / 8 + 32 * j) * 8 + eighth] = part8[j];
    barrier();
    float d = 0.0;
    [[unroll]] for (uint e = 0; e < 8; e++)
        d += split[th * 8 + e];
    return d;
}

// The tile's values weighted by prob, added to acc (scaled by alpha first): thread th sums
// dimensions 8 (th % w) .. + 7 (w = hd_v / 8) over cells th / w, + 256 / w, ..., then the groups'
// sums are added.
void split_values(uint c0, uint count, uint th, uint kvh, float alpha) {
    uint w = HD_V / 8, groups = 256 / w, chunk = th % w, g = th / w;
    float a[8] = float[8](0, 0, 0, 0, 0, 0, 0, 0);
    for (uint j = g; j < count; j += 4 * groups) {
        uvec4 u[4];
        float pj[4];
        [[unroll]] for (uint k = 0; k < 4; k++) { // four cells' loads issued together
            uint jj = j + k * groups;
            pj[k] = jj < count ? prob[jj] : 0.0;
            if (pj[k] != 0.0) {
                uint64_t row = p.v + uint64_t(c0 + jj) * p.v_row;
                u[k] = Rows16(row + (kvh * HD_V + 8 * chunk) * 2).v[0];
            }
        }
        [[unroll]] for (uint k = 0; k < 4; k++)
            if (pj[k] != 0.0)
                [[unroll]] for (uint e = 0; e < 4; e++) {
                    vec2 h = unpackHalf2x16(u[k][e]);
                    a[2 * e] += pj[k] * h.x, a[2 * e + 1] += pj[k] * h.y;
                }
    }
    [[unroll]] for (uint e = 0; e < 8; e++)
        split[g * HD_V + 8 * chunk + e] = a[e];
    barrier();
    for (uint i = th; i < HD_V; i += 256) {
        float sum = acc[i] * alpha;
        for (uint q = 0; q < groups; q++)
            sum += split[q * HD_V + i];
        acc[i] = sum;
    }
}

void main() {
    uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, th = gl_LocalInvocationID.x, first;
    cell_range(p.q_seq.v[t], 256, first, n_cells);
    uint kvh = h / (N_HEAD / N_HEAD_KV);
    uint qrow = (t * N_HEAD + h) * HD_K;
    for (uint i = th; i < HD_K; i += 256)
        qs[i] = p.q.v[qrow + i];
    for (uint i = th; i < HD_V; i += 256)
        acc[i] = 0.0;
    barrier();
    float m = -1.0 / 0.0, sum = 0.0;
    bool split_k = f16_split(HD_K), split_v = f16_split(HD_V);
    for (uint c0 = first; c0 < n_cells; c0 += 256) {
        uint c = c0 + th;
        float s = -1.0 / 0.0;
        float split_d = split_k ? split_dot(c0, min(256, n_cells - c0), th, kvh) : 0.0;
        if (c < n_cells && visible(t, c) && split_k) {
            float dot = split_d;
            s = p.softcap == 0.0 ? dot * p.scale : p.softcap * tanh(dot * (p.scale / p.softcap));
        } else if (c < n_cells && visible(t, c)) {
            uint64_t krow = p.k + uint64_t(c) * p.k_row;
            float dot = 0.0;
            for (uint i = 0; i < HD_K; i += 4) { // four loads issued, then summed in order
                float kv[4];
                [[unroll]] for (uint u = 0; u < 4; u++)
                    kv[u] = i + u < HD_K ? row_at(krow, ROW_TYPE, kvh * HD_K + i + u) : 0.0;
                [[unroll]] for (uint u = 0; u < 4; u++)
                    if (i + u < HD_K)
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
        uint cells = min(256, n_cells - c0);
        if (split_v) {
            barrier(); // prob written
            split_values(c0, cells, th, kvh, alpha);
        } else if (HD_V < 256) { // the tile's cells split among 256 / hd_v threads a dimension
            uint pieces = 256 / HD_V, i = th % HD_V, piece = th / HD_V;
            float a = 0.0;
            for (uint j = piece; piece < pieces && j < cells; j += 4 * pieces) {
                float w[4], vv[4]; // four cells' loads issued, then summed in order
                [[unroll]] for (uint u = 0; u < 4; u++) {
                    uint jj = j + u * pieces;
                    w[u] = jj < cells ? prob[jj] : 0.0;
                    vv[u] = w[u] != 0.0 ? row_at(p.v + uint64_t(c0 + jj) * p.v_row, ROW_TYPE,
                                                 kvh * HD_V + i)
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
                    a += part[q * HD_V + i];
                acc[i] = a;
            }
        } else
            for (uint i = th; i < HD_V; i += 256) {
                float a = acc[i] * alpha;
                for (uint j = 0; j < cells; j++)
                    if (prob[j] != 0.0)
                        a += prob[j] * row_at(p.v + uint64_t(c0 + j) * p.v_row, ROW_TYPE, kvh * HD_V + i);
                acc[i] = a;
            }
        barrier();
    }
    if (uint64_t(p.sinks) != 0 && m != -1.0 / 0.0) {
        float sink = p.sinks.v[h], m_new = max(m, sink), alpha = exp(m - m_new);
        for (uint i = th; i < HD_V; i += 256)
            acc[i] *= alpha;
        sum = sum * alpha + exp(sink - m_new);
    }
    float inv = sum == 0.0 ? 0.0 : 1.0 / sum;
    uint yrow = (t * N_HEAD + h) * HD_V;
    for (uint i = th; i < HD_V; i += 256)
        p.y.v[yrow + i] = acc[i] *= inv;
    if ((p.bytes & 1) != 0) // y's f16 copy (bit 0 set), as halves.comp makes it
        for (uint i = th; i < HD_V; i += 256)
            Halves(p.bytes & ~uint64_t(1)).v[yrow + i] = float16_t(round_to_f16(acc[i]));
    else if (p.bytes != 0) // the head's groups of 32, as quantize_q8.comp makes y's
        head_bytes(th, yrow / 32);
}
