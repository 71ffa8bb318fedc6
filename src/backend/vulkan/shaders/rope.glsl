// rope.glsl: RoPE's rotation for pair k of a head at a position (ops_ref.c's rope_head): the angle
// with YaRN's mix and scale and llama 3's frequency factors, its sine and cosine to float's
// precision. rope.comp and rope_store.comp share it; their push constants name the parameters.

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

// (sin, cos) of pair k's angle at position pos, times the magnitude scale; ff its frequency
// divisor (1 where none).
vec2 rope_sin_cos(float pos, uint k, float ff) {
    float theta_base = pos; // advanced by multiplication, as the CPU's is
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
    return sin_cos(theta) * mscale;
}

// Pair k of the head at x + base (floats): its two elements' indices (NeoX: k and k + n_rot / 2;
// else 2k and 2k + 1) rotated by sc, as (index a, index b) and their new values.
void rope_pair(Floats x, uint base, uint k, uint n_rot, bool neox, vec2 sc, out uint a, out uint b,
               out vec2 v) {
    a = base + (neox ? k : 2 * k), b = base + (neox ? k + n_rot / 2 : 2 * k + 1);
    float x0 = x.v[a], x1 = x.v[b];
    v = vec2(fma(x0, sc.y, -(x1 * sc.x)), fma(x0, sc.x, x1 * sc.y));
    x.v[a] = v.x, x.v[b] = v.y;
}
