// quantize_q8.comp: activations as int8 for matvec.comp's integer products (X_Q8), a thread a
// group of 32: the scale d = max|x| / 127, levels round(x / d) (halves away from zero, as ggml's
// q8_1), stored as 8 words of bytes at q + 32 g, and (d, the levels' sums over elements 0..15 and
// 16..31, 0) at m + 16 g.
#version 450
#include "common.glsl"
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 256) in;
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Vec4s { vec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Quads { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Metas { vec4 v[]; };
layout(push_constant) uniform Args {
    Vec4s x;
    Quads q;
    Metas m;
    uint groups;
} p;

void main() {
    GRID_STRIDE(g, p.groups) {
        vec4 v[8];
        float amax = 0;
        [[unroll]] for (uint i = 0; i < 8; i++) {
            v[i] = p.x.v[8 * g + i];
            vec4 a = abs(v[i]);
            amax = max(amax, max(max(a.x, a.y), max(a.z, a.w)));
        }
        float d = amax / 127.0, id = d != 0 ? 1.0 / d : 0.0;
        uint w[8];
        int sums[2] = int[2](0, 0);
        [[unroll]] for (uint i = 0; i < 8; i++) {
            ivec4 l = ivec4(sign(v[i]) * floor(abs(v[i]) * id + 0.5));
            sums[i / 4] += l.x + l.y + l.z + l.w;
            w[i] = (uint(l.x) & 0xffu) | (uint(l.y) & 0xffu) << 8 | (uint(l.z) & 0xffu) << 16 |
                   (uint(l.w) & 0xffu) << 24;
        }
        p.q.v[2 * g] = uvec4(w[0], w[1], w[2], w[3]);
        p.q.v[2 * g + 1] = uvec4(w[4], w[5], w[6], w[7]);
        p.m.v[g] = vec4(d, float(sums[0]), float(sums[1]), 0);
    }
}
