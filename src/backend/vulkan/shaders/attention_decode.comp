// attention_decode.comp: attention.comp's job for f16 cache rows and heads HD wide (keys and
// values alike), one query token and head a workgroup, with about no barriers: the subgroups take
// turns at runs of SG cells, a cell a lane (its key row's dot product in the lane, the run's
// softmax by subgroup operations), each lane summing its slice of the head's values (the weights
// by shuffles), and meet once in shared memory at the end. A run's loads (key rows, the cells'
// sequence words and positions, value slices) are all issued before any is waited for.
// attention.comp's ten barriers a tile of 256 cells and its value loads behind the softmax took
// 9 us of a 1B model's layer on an H200 however short the context was (this: 6.8). Contexts of
// 512 cells or more are split among the grid's z workgroups where vk_attention.c asks (a head's
// 32 workgroups had left most of an H200 idle), the last of a head's to finish meeting them.
#version 450
#include "common.glsl"
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require
layout(local_size_x = 128) in;
// The device's subgroup size (vk_attention.c sets it; 4 .. HD / 2): a run is SG cells, a lane's
// slice of a value row R halves. The arrays below are as long as the smallest subgroups need;
// their loops run to the specialized counts, which the driver's compiler then knows.
layout(constant_id = 0) const uint SG = 32;
const uint NSG = 128 / SG, R = HD / SG, WORDS = R / 2, MAX_R = HD / 4;
// The cells of a run whose value slices a lane holds at once (64 words): all of them but for
// HD 256, half.
#if HD == 256
const uint VB = SG / 2;
#else
const uint VB = SG;
#endif
#include "attention_args.glsl"

layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Rows16 { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer Rows4 { uint v[]; };
// Where split contexts keep their counters ([n_q][n_head], then 16-byte aligned) and each split's
// softmax and sums (vk_attention.c's decode_splits; 0: none): an address as two specialization
// constants, the push constants being full. Read and written past the caches, the counters
// atomically.
layout(constant_id = 1) const uint PARTS_LO = 0;
layout(constant_id = 2) const uint PARTS_HI = 0;
#define PARTS packUint2x32(uvec2(PARTS_LO, PARTS_HI))
layout(buffer_reference, std430, buffer_reference_align = 4) coherent buffer Parts { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) coherent buffer Counters { uint v[]; };
// Contexts of at least this many rounds of 128 cells are split among the grid's z workgroups
// (each its share of the rounds, the last to finish meeting them all); shorter ones take one
// workgroup, the others doing nothing.
const uint SPLIT_ROUNDS = 4;

shared float qs[HD], outs[HD];
shared bool last_one;
shared float part_m[NSG], part_l[NSG], part_acc[NSG * HD]; // each subgroup's softmax and sums
#include "quantize_group.glsl"
#define HEAD_OUT outs // the head's output, made int8 groups for the next product (head_bytes)
#define HEAD_WIDTH HD
#include "head_bytes.glsl"

// q . k for a key row (its head's HD halves, r) as 16-byte words, four sums.
float key_dot(uvec4 r[HD / 8]) {
    vec4 d = vec4(0.0);
    [[unroll]] for (uint i = 0; i < HD / 8; i++)
        [[unroll]] for (uint k = 0; k < 4; k++) {
            vec2 h = unpackHalf2x16(r[i][k]);
            d[k] += qs[8 * i + 2 * k] * h.x + qs[8 * i + 2 * k + 1] * h.y;
        }
    return (d.x + d.y) + (d.z + d.w);
}

// The value slices (this lane's R halves, from address slice in the head) of cells c0 + j,
// j < VB: cells past the last one in use read the last one's (their weights are 0).
void load_values(out uint w[64], uint64_t slice, uint c0) {
    [[unroll]] for (uint j = 0; j < VB; j++) {
        Rows4 r = Rows4(slice + uint64_t(min(c0 + j, n_cells - 1)) * p.v_row);
        [[unroll]] for (uint i = 0; i < WORDS; i++)
            w[j * WORDS + i] = r.v[i];
    }
}

// acc += the weights (lane j's e for cell j0 + j of the run) times the slices w. A weight of 0
// adds nothing even where its cell's row holds no number (a cell never written).
void add_values(inout float acc[MAX_R], uint w[64], float e, uint j0) {
    [[unroll]] for (uint j = 0; j < VB; j++) {
        float pj = subgroupShuffle(e, j0 + j);
        [[unroll]] for (uint i = 0; i < WORDS; i++) {
            vec2 h = unpackHalf2x16(w[j * WORDS + i]);
            acc[2 * i] += pj != 0.0 ? pj * h.x : 0.0;
            acc[2 * i + 1] += pj != 0.0 ? pj * h.y : 0.0;
        }
    }
}

// y's row (and the form the next product takes) from the head's sums o (outs) over total.
void write_out(uint h, uint t, uint th, float total) {
    float inv = total == 0.0 ? 0.0 : 1.0 / total;
    uint yrow = (t * N_HEAD + h) * HD;
    for (uint i = th; i < HD; i += 128) {
        float o = outs[i] * inv;
        p.y.v[yrow + i] = o;
        outs[i] = o;
        if ((p.bytes & 1) != 0) // y's f16 copy (bit 0 set), as halves.comp makes it
            Halves(p.bytes & ~uint64_t(1)).v[yrow + i] = float16_t(round_to_f16(o));
    }
    if (p.bytes != 0 && (p.bytes & 1) == 0) // the head's groups of 32, as quantize_q8.comp's
        head_bytes(th, yrow / 32);
}

// The gpt-oss sink (no value) joined to a softmax whose maximum is top, total and sums outs:
// where some cell was seen.
float with_sink(uint h, uint th, float top, float total) {
    if (uint64_t(p.sinks) == 0 || top == -1.0 / 0.0)
        return total;
    float mf = max(top, p.sinks.v[h]), alpha = exp(top - mf);
    for (uint i = th; i < HD; i += 128)
        outs[i] *= alpha;
    return total * alpha + exp(p.sinks.v[h] - mf);
}

// The workgroup's subgroups met: their maximum, the sum (returned) and the sums of values in outs,
// all scaled to that maximum.
float subgroups_met(uint th, out float top) {
    top = -1.0 / 0.0;
    for (uint j = 0; j < NSG; j++)
        top = max(top, part_m[j]);
    float f[32], total = 0.0; // NSG of them
    for (uint j = 0; j < NSG; j++) {
        f[j] = part_m[j] == -1.0 / 0.0 ? 0.0 : exp(part_m[j] - top);
        total += part_l[j] * f[j];
    }
    for (uint i = th; i < HD; i += 128) {
        float o = 0.0;
        for (uint j = 0; j < NSG; j++)
            o += part_acc[j * HD + i] * f[j];
        outs[i] = o;
    }
    return total;
}

// A split context's part z: (maximum, sum, sums of values) to its slot; whether this workgroup
// was the last of the head's to finish (its counter then back to 0 for the next step).
bool part_done(uint h, uint t, uint th, uint z, float top, float total) {
    uint head = t * N_HEAD + h, splits = gl_NumWorkGroups.z;
    uint64_t base = PARTS + (uint64_t(N_Q) * N_HEAD * 4 + 15) / 16 * 16;
    Parts part = Parts(base + uint64_t((head * splits + z) * (HD + 2)) * 4);
    if (th == 0)
        part.v[0] = top, part.v[1] = total;
    for (uint i = th; i < HD; i += 128)
        part.v[2 + i] = outs[i];
    memoryBarrierBuffer();
    barrier(); // every thread's writes made before the count
    if (th == 0) {
        uint before = atomicAdd(Counters(PARTS).v[head], 1u);
        last_one = before == splits - 1;
        if (last_one)
            Counters(PARTS).v[head] = 0;
    }
    barrier();
    memoryBarrierBuffer();
    return last_one;
}

// The head's parts met by the last of its workgroups: outs and the sum (returned), scaled to the
// parts' maximum (top).
float parts_met(uint h, uint t, uint th, out float top) {
    uint head = t * N_HEAD + h, splits = gl_NumWorkGroups.z;
    uint64_t base = PARTS + (uint64_t(N_Q) * N_HEAD * 4 + 15) / 16 * 16;
    Parts first = Parts(base + uint64_t(head * splits * (HD + 2)) * 4);
    top = -1.0 / 0.0;
    for (uint z = 0; z < splits; z++)
        top = max(top, first.v[z * (HD + 2)]);
    float total = 0.0;
    for (uint z = 0; z < splits; z++) {
        float m = first.v[z * (HD + 2)];
        total += m == -1.0 / 0.0 ? 0.0 : first.v[z * (HD + 2) + 1] * exp(m - top);
    }
    for (uint i = th; i < HD; i += 128) {
        float o = 0.0;
        for (uint z = 0; z < splits; z++) {
            float m = first.v[z * (HD + 2)];
            o += m == -1.0 / 0.0 ? 0.0 : first.v[z * (HD + 2) + 2 + i] * exp(m - top);
        }
        outs[i] = o;
    }
    return total;
}

void main() {
    uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, th = gl_LocalInvocationID.x;
    uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID, first;
    int qp = p.q_pos.v[t], seq = p.q_seq.v[t];
    // runs start at multiples of the workgroup's 128 cells: the same sums with spans as without
    cell_range(seq, 128, first, n_cells);
    uint rounds = n_cells > first ? (n_cells - first + 127) / 128 : 0, z = gl_WorkGroupID.z;
    bool split = PARTS != 0 && gl_NumWorkGroups.z > 1 && rounds >= SPLIT_ROUNDS;
    if (!split && z > 0)
        return; // a short context: workgroup 0 takes it alone
    uint stride = split ? 128 * gl_NumWorkGroups.z : 128, start = split ? 128 * z : 0;
    uint kvh = h / (N_HEAD / N_HEAD_KV), qrow = (t * N_HEAD + h) * HD;
    for (uint i = th; i < HD; i += 128)
        qs[i] = p.q.v[qrow + i];
    barrier();
    float m = -1.0 / 0.0, l = 0.0, acc[MAX_R];
    [[unroll]] for (uint i = 0; i < R; i++)
        acc[i] = 0.0;
    uint64_t slice = p.v + (kvh * HD + lane * R) * 2;
    for (uint c0 = first + start + sg * SG; c0 < n_cells; c0 += stride) {
        // the lane's cell's key row, sequence word and position, and the run's value slices:
        // every load of the run issued before any is waited for
        uint c = c0 + lane, cc = min(c, n_cells - 1);
        uvec4 k[HD / 8];
        Rows16 krow = Rows16(p.k + uint64_t(cc) * p.k_row + kvh * HD * 2);
        [[unroll]] for (uint i = 0; i < HD / 8; i++)
            k[i] = krow.v[i];
        uint64_t word = Words(p.cell_seq).v[cc * SEQ_WORDS + uint(max(seq, 0)) / 64];
        int kp = p.cell_pos.v[cc];
        uint w[64];
        load_values(w, slice, c0);
        // visible_from's test on the loads above (its own loads one after the other, behind a
        // branch, held up the rows')
        bool seen = c < n_cells && seq >= 0 && word_holds(word, seq) && in_reach(qp, kp);
        float dot = key_dot(k);
        float s = !seen ? -1.0 / 0.0
                : p.softcap == 0.0 ? dot * p.scale
                                   : p.softcap * tanh(dot * (p.scale / p.softcap));
        float m_new = max(m, subgroupMax(s));
        if (m_new == -1.0 / 0.0)
            continue; // nothing visible yet (the same in every lane)
        float alpha = exp(m - m_new), e = seen ? exp(s - m_new) : 0.0;
        l = l * alpha + e; // the lane's share of the sum, added up at the end
        m = m_new;
        [[unroll]] for (uint i = 0; i < R; i++)
            acc[i] *= alpha;
        add_values(acc, w, e, 0);
        [[unroll]] for (uint j0 = VB; j0 < SG; j0 += VB) { // HD 256: the second half
            load_values(w, slice, c0 + j0);
            add_values(acc, w, e, j0);
        }
    }
    float lsum = subgroupAdd(l);
    if (subgroupElect())
        part_m[sg] = m, part_l[sg] = lsum;
    [[unroll]] for (uint i = 0; i < R; i++)
        part_acc[sg * HD + lane * R + i] = acc[i];
    barrier();
    float top, total = subgroups_met(th, top);
    if (split) {
        if (!part_done(h, t, th, z, top, total))
            return;
        total = parts_met(h, t, th, top);
    }
    barrier(); // outs made
    write_out(h, t, th, with_sink(h, th, top, total));
}
