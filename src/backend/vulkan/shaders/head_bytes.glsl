// head_bytes.glsl: a decode attention's head output as the int8 groups of the product after it
// (quantize_q8.comp's layout: bytes at 32 a group, then the query tokens' (d, sums) at
// N_Q * n_head * HEAD_WIDTH), from the shared array HEAD_OUT that the including shader defines
// (HEAD_WIDTH values, a multiple of 32), after quantize_group.glsl.
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Quads { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Metas { vec4 v[]; };

// Group g0 + i of y's by thread i (a barrier first: HEAD_OUT written by every thread).
void head_bytes(uint th, uint g0) {
    barrier();
    if (th >= HEAD_WIDTH / 32)
        return;
    vec4 v[8];
    [[unroll]] for (uint k = 0; k < 32; k++)
        v[k / 4][k % 4] = HEAD_OUT[32 * th + k];
    uint g = g0 + th;
    Quads q = Quads(p.bytes + 32 * uint64_t(g));
    Metas m = Metas(p.bytes + uint64_t(N_Q) * N_HEAD * HEAD_WIDTH + 16 * uint64_t(g));
    quantize_group(v, q.v[0], q.v[1], m.v[0]);
}
