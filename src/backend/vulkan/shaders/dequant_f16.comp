// dequant_f16.comp: rows r0 .. r0+rows-1 of W (the type dequant.glsl is built for, rows of whole
// 32-value groups) as f16, to nearest: a long prompt's weights for gemm_cm2.comp's f16 tiles
// (vk_dequant.c says when). A thread a group, its 32 values stored 16 bytes at a time.
#version 450
#include "common.glsl"
#include "dequant.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Args {
    uint64_t w; // W's row r0
    uint64_t y; // f16 [rows][cols], 16-byte aligned
    uint64_t tab;
    uint rows, cols, row_bytes;
} p;

layout(buffer_reference, std430, buffer_reference_align = 16) writeonly buffer Out { uvec4 v[]; };

uint pair(float a, float b) {
    return packHalf2x16(vec2(round_to_f16(a), round_to_f16(b))); // exact: already f16 values
}

void main() {
    uint groups = p.cols / 32;
    GRID_STRIDE(i, p.rows * groups) {
        uint r = i / groups, g = i % groups;
        float v[32];
        dq_group(p.w + uint64_t(r) * p.row_bytes, g, p.tab, v);
        Out o = Out(p.y + uint64_t(i) * 64);
        [[unroll]] for (uint j = 0; j < 4; j++)
            o.v[j] = uvec4(pair(v[8 * j], v[8 * j + 1]), pair(v[8 * j + 2], v[8 * j + 3]),
                           pair(v[8 * j + 4], v[8 * j + 5]), pair(v[8 * j + 6], v[8 * j + 7]));
    }
}
