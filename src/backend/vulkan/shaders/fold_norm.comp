// fold_norm.comp: an RMSNorm's weights g multiplied into the columns of an f16 matrix that reads
// the norm's output, once at load (vk_fold_norm.c): w[r][c] = f16(w[r][c] g[c]) to nearest, ties
// to even (round_to_f16); or, with check set, only whether some product would be past f16's range
// (*flag = 1), which leaves the matrix as it was. A workgroup a row at a time, a thread a column.
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Flag { uint v; };
layout(push_constant) uniform Args {
    Halves w;
    Floats g;
    Flag flag;
    uint rows, cols, row_halves, check;
} p;

void main() {
    for (uint r = gl_WorkGroupID.x; r < p.rows; r += gl_NumWorkGroups.x) {
        Halves row = Halves(uint64_t(p.w) + uint64_t(r) * p.row_halves * 2);
        for (uint c = gl_LocalInvocationID.x; c < p.cols; c += gl_WorkGroupSize.x) {
            float v = round_to_f16(float(row.v[c]) * p.g.v[c]);
            if (p.check == 0)
                row.v[c] = float16_t(v); // exact: v is an f16 value
            else if (isinf(v))
                p.flag.v = 1;
        }
    }
}
