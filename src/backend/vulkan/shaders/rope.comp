// rope.comp: each head's first n_rot dims rotated by the token's position, pairs (i, i + 1) or
// NeoX's (i, i + n_rot / 2), one pair a thread (rope.glsl).
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Args {
    Floats x;
    Ints pos;
    Floats ff; // n_rot / 2 divisors, or 0
    uint n, n_heads, head_dim, n_rot, neox;
    float theta_scale, freq_scale, ext_factor, attn_factor, corr0, corr1;
} p;
#include "rope.glsl"

void main() {
    uint half_rot = p.n_rot / 2, pairs = p.n * p.n_heads * half_rot;
    GRID_STRIDE(j, pairs) {
        uint k = j % half_rot, head = j / half_rot, t = head / p.n_heads, a, b;
        float ff = 1.0; // an if, as attention_args.glsl's cell_range (ff may be null)
        if (uint64_t(p.ff) != 0)
            ff = p.ff.v[k];
        vec2 v, sc = rope_sin_cos(float(p.pos.v[t]), k, ff);
        rope_pair(p.x, head * p.head_dim, k, p.n_rot, p.neox != 0, sc, a, b, v);
    }
}
