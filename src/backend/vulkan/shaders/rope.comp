// rope.comp: each head's first n_rot dims rotated by the token's position, pairs (i, i + 1) or
// NeoX's (i, i + n_rot / 2), with YaRN's mix and scale and llama 3's frequency factors (ops_ref.c's
// rope_head, one pair a thread).
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

// sin and cos of theta to float's precision: GLSL's own need only be within 2^-11 (lavapipe's
// are off by 3e-5), and a position's angle reaches thousands of radians. Whole quarter turns
// come off first (pi / 2 in three parts), then Cephes' polynomials on [-pi / 4, pi / 4].
vec2 sin_cos(float theta) {
    float j = round(theta * 0.63661977236758134);
    float r = fma(-j, 1.5703125, theta);
    r = fma(-j, 4.837512969970703125e-4, r);
    r = fma(-j, 7.54978995489188216e-8, r);
    float r2 = r * r;
    float s = r + r * r2 * (-1.6666654611e-1 + r2 * (8.3321608736e-3 + r2 * -1.9515295891e-4));
    float c = 1.0 - 0.5 * r2 +
              r2 * r2 * (4.166664568298827e-2 + r2 * (-1.388731625493765e-3 + r2 * 2.443315711809948e-5));
    int q = int(j) & 3; // the quarter turns taken off
    return q == 0 ? vec2(s, c) : q == 1 ? vec2(c, -s) : q == 2 ? vec2(-s, -c) : vec2(-c, s);
}

void main() {
    uint half_rot = p.n_rot / 2, pairs = p.n * p.n_heads * half_rot;
    GRID_STRIDE(j, pairs) {
        uint k = j % half_rot, head = j / half_rot, t = head / p.n_heads;
        uint i = 2 * k;
        float ff = uint64_t(p.ff) != 0 ? p.ff.v[k] : 1.0;
        float theta_base = float(p.pos.v[t]); // advanced by multiplication, as the CPU's is
        for (uint s = 0; s < k; s++)
            theta_base *= p.theta_scale;
        float extrap = theta_base / ff;
        float interp = p.freq_scale * extrap, theta = interp, mscale = p.attn_factor;
        if (p.ext_factor != 0.0) {
            float y = (float(k) - p.corr0) / max(0.001, p.corr1 - p.corr0);
            float mix = (1.0 - min(1.0, max(0.0, y))) * p.ext_factor;
            theta = fma(interp, 1.0 - mix, extrap * mix);
            mscale *= fma(0.1, log(1.0 / p.freq_scale), 1.0);
        }
        vec2 sc = sin_cos(theta) * mscale;
        uint base = head * p.head_dim;
        uint a = base + (p.neox != 0 ? k : i), b = base + (p.neox != 0 ? k + half_rot : i + 1);
        float x0 = p.x.v[a], x1 = p.x.v[b];
        p.x.v[a] = fma(x0, sc.y, -(x1 * sc.x));
        p.x.v[b] = fma(x0, sc.x, x1 * sc.y);
    }
}
