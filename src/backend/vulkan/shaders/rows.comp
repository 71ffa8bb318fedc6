// rows.comp: the ops that read a whole row first (RMSNorm, LayerNorm, softmax, and RMSNorm into
// int8 groups for matvec.comp's integer products or into f16 for f16 weights'): one workgroup a
// row, its sums reduced by subgroups (reduce.glsl).
#version 450
#include "common.glsl"
#extension GL_EXT_control_flow_attributes : require
#include "quantize_group.glsl"
layout(local_size_x = 256) in;
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Quads { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Metas { vec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Vec4s { vec4 v[]; };
layout(push_constant) uniform Args {
    Floats y, x, g, bias; // g, bias: 0 where the op has none
    uint dim, op;
    float eps;
    uint64_t meta; // OP_RMS_NORM_Q8: y the rows' bytes (dim a row), meta their groups' (d, sums);
                   // OP_RMS_NORM: 0, or where y's f16 copy goes (to nearest; vk_ops.c's halves)
} p;

#define OP_RMS_NORM 0
#define OP_LAYER_NORM 1
#define OP_SOFTMAX 2
#define OP_RMS_NORM_Q8 3
#define OP_RMS_NORM_F16 4 // y the rows as f16 (to nearest), what f16 weights' matvec.comp reads

#include "reduce.glsl"
#extension GL_KHR_shader_subgroup_shuffle : require

// Elements i, i + 256, i + 512 and i + 768 of a row (0 past its end). The norms' sums take STEP
// elements a step (16 a thread: a 4096-wide row in one), their loads issued together rather than
// one latency a step.
const uint STEP = 4096;
vec4 four(Floats x, uint i) {
    vec4 v = vec4(0);
    [[unroll]] for (uint k = 0; k < 4; k++)
        if (i + 256 * k < p.dim)
            v[k] = x.v[i + 256 * k];
    return v;
}

// 1 where four's elements are in the row, 0 past its end.
vec4 in_row(uint i) {
    return vec4(lessThan(uvec4(i) + uvec4(0, 256, 512, 768), uvec4(p.dim)));
}

// Elements at..at + 3 of a row (vec: 16-byte loads).
vec4 load4(Floats a, uint at, bool vec) {
    if (vec)
        return Vec4s(uint64_t(a) + 4 * uint64_t(at)).v[0];
    return vec4(a.v[at], a.v[at + 1], a.v[at + 2], a.v[at + 3]);
}

// Half h of its row's group h / 2 (in_row: h inside the row) as int8 levels, v its 16 values
// normed: the halves' maxima and sums met by shuffles between neighbouring threads t and t ^ 1
// (one subgroup: t numbered by subgroup); the same bytes and (d, sums) as quantize_group.
void half_to_bytes(uint h, uint t, bool in_row, vec4 v[4]) {
    uint row = gl_WorkGroupID.x;
    Quads bytes = Quads(uint64_t(p.y) + uint64_t(row) * p.dim);
    Metas metas = Metas(p.meta + uint64_t(row) * (p.dim / 32) * 16);
    float amax = 0.0;
    [[unroll]] for (uint k = 0; k < 4; k++)
        amax = max(amax, abs_max4(v[k]));
    float d = max(amax, subgroupShuffleXor(amax, 1)) / 127.0, id = d != 0 ? 1.0 / d : 0.0;
    int sum = 0;
    uvec4 w;
    [[unroll]] for (uint k = 0; k < 4; k++)
        w[k] = levels4(v[k], id, sum);
    int other = subgroupShuffleXor(sum, 1);
    if (in_row) {
        bytes.v[h] = w;
        if (t % 2 == 0)
            metas.v[h / 2] = vec4(d, float(sum), float(other), 0);
    }
}

// The RMSNorm of a row of at most 4096 into int8 groups, each thread's 16 values loaded once for
// the sum of squares and kept for the bytes (the longer rows below read x twice).
void rms_norm_held(Floats x, bool has_g) {
    uint t = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
    bool in_row = t < p.dim / 16, vec = ((uint64_t(x) | uint64_t(p.g)) & 15) == 0;
    vec4 v[4] = vec4[4](vec4(0), vec4(0), vec4(0), vec4(0));
    float q = 0.0;
    if (in_row)
        [[unroll]] for (uint k = 0; k < 4; k++) {
            v[k] = load4(x, 16 * t + 4 * k, vec);
            q += dot(v[k], v[k]);
        }
    float scale = 1.0 / sqrt(reduce(q, false) / float(p.dim) + p.eps);
    if (in_row)
        [[unroll]] for (uint k = 0; k < 4; k++)
            v[k] = has_g ? v[k] * scale * load4(p.g, 16 * t + 4 * k, vec) : v[k] * scale;
    half_to_bytes(t, t, in_row, v);
}

// The row x times scale (and g) as int8 groups: a thread each half of a group, its 16 values
// loaded at once (half_to_bytes).
void norm_to_bytes(Floats x, float scale, bool has_g) {
    uint t = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
    bool vec = ((uint64_t(x) | uint64_t(p.g)) & 15) == 0;
    for (uint h0 = 0; h0 < p.dim / 16; h0 += 256) { // every thread: the shuffles
        uint h = h0 + t;                             // half h % 2 of group h / 2
        bool in_row = h < p.dim / 16;
        vec4 v[4] = vec4[4](vec4(0), vec4(0), vec4(0), vec4(0));
        if (in_row)
            [[unroll]] for (uint k = 0; k < 4; k++) {
                vec4 e = load4(x, 16 * h + 4 * k, vec) * scale;
                v[k] = has_g ? e * load4(p.g, 16 * h + 4 * k, vec) : e;
            }
        half_to_bytes(h, t, in_row, v);
    }
}

void main() {
    uint row = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
    uint64_t off = uint64_t(row) * p.dim * 4;
    Floats x = Floats(uint64_t(p.x) + off), y = Floats(uint64_t(p.y) + off);
    bool has_g = uint64_t(p.g) != 0, has_b = uint64_t(p.bias) != 0;
    if (p.op == OP_SOFTMAX) {
        float m = -1.0 / 0.0;
        for (uint i = t; i < p.dim; i += 256)
            m = max(m, x.v[i]);
        m = reduce(m, true);
        float s = 0.0;
        for (uint i = t; i < p.dim; i += 256) {
            float e = exp(x.v[i] - m);
            y.v[i] = e;
            s += e;
        }
        float inv = 1.0 / reduce(s, false);
        for (uint i = t; i < p.dim; i += 256)
            y.v[i] *= inv;
        return;
    }
    if (p.op == OP_RMS_NORM_Q8 && p.dim <= 16 * 256) {
        rms_norm_held(x, has_g);
        return;
    }
    float mean = 0.0;
    if (p.op == OP_LAYER_NORM) {
        float s = 0.0;
        for (uint i = t; i < p.dim; i += STEP)
            [[unroll]] for (uint u = 0; u < STEP; u += 1024)
                s += dot(four(x, i + u), vec4(1));
        mean = reduce(s, false) / float(p.dim);
    }
    float q = 0.0;
    for (uint i = t; i < p.dim; i += STEP)
        [[unroll]] for (uint u = 0; u < STEP; u += 1024) {
            vec4 d = (four(x, i + u) - mean) * in_row(i + u);
            q += dot(d, d);
        }
    float scale = 1.0 / sqrt(reduce(q, false) / float(p.dim) + p.eps);
    if (p.op == OP_RMS_NORM_Q8) { // normed as below, then made bytes as quantize_group does
        norm_to_bytes(x, scale, has_g);
        return;
    }
    Halves halves = Halves(uint64_t(p.y) + uint64_t(row) * p.dim * 2);
    Halves copy = Halves(p.meta + uint64_t(row) * p.dim * 2);
    bool copied = p.op == OP_RMS_NORM && p.meta != 0;
    for (uint i = t; i < p.dim; i += 4 * 256) {
        vec4 v = (four(x, i) - mean) * scale;
        v = has_g ? v * four(p.g, i) : v;
        v = has_b ? v + four(p.bias, i) : v;
        [[unroll]] for (uint k = 0; k < 4; k++)
            if (i + 256 * k < p.dim && p.op == OP_RMS_NORM_F16)
                halves.v[i + 256 * k] = float16_t(round_to_f16(v[k]));
            else if (i + 256 * k < p.dim) {
                y.v[i + 256 * k] = v[k];
                if (copied)
                    copy.v[i + 256 * k] = float16_t(round_to_f16(v[k]));
            }
    }
}
