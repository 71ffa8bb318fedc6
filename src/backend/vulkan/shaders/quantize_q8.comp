// quantize_q8.comp: activations as int8 for matvec.comp's integer products (X_Q8), a thread a
// group of 32 (quantize_group.glsl): 8 words of bytes at q + 32 g, (d, sums) at m + 16 g.
#version 450
#include "common.glsl"
#extension GL_EXT_control_flow_attributes : require
#include "quantize_group.glsl"
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
        [[unroll]] for (uint i = 0; i < 8; i++)
            v[i] = p.x.v[8 * g + i];
        quantize_group(v, p.q.v[2 * g], p.q.v[2 * g + 1], p.m.v[g]);
    }
}
