// rope.glsl: RoPE's rotation for pair k of a head at a position (ops_ref.c's rope_head): the angle
// with YaRN's mix and scale and llama 3's frequency factors, its sine and cosine to float's
// precision. rope.comp, rope_store.comp and matvec.comp share it.

// sin and cos of theta to float's precision: GLSL's own need only be within 2^-11 (lavapipe's
// are off by 3e-5), and a position's angle reaches thousands of radians. Whole quarter turns
// come off first (pi / 2 in three parts), then Cephes' polynomials on [-pi / 4, pi / 4].
// precise: every shader that includes this gets the same bits (no products and sums fused
// where the compiler chose to in one shader and not in another), so matvec.comp's RoPE
// (vk_rope_fold.c) equals rope_store.comp's.
vec2 sin_cos(float theta) {
    precise float j = round(theta * 0.63661977236758134);
    precise float r = fma(-j, 1.5703125, theta);
    r = fma(-j, 4.837512969970703125e-4, r);
    r = fma(-j, 7.54978995489188216e-8, r);
    precise float r2 = r * r;
    precise float s =
        r + r * r2 * (-1.6666654611e-1 + r2 * (8.3321608736e-3 + r2 * -1.9515295891e-4));
    precise float c =
        1.0 - 0.5 * r2 +
        r2 * r2 *
            (4.166664568298827e-2 + r2 * (-1.388731625493765e-3 + r2 * 2.443315711809948e-5));
    int q = int(j) & 3; // the quarter turns taken off
    return q == 0 ? vec2(s, c) : q == 1 ? vec2(c, -s) : q == 2 ? vec2(-s, -c) : vec2(-c, s);
}

// (sin, cos) of pair k's angle at position pos, times the magnitude scale; ff its frequency
// divisor (1 where none). The parameters are ROPE_ARGS's (the push constants p unless the
// shader says otherwise: matvec.comp's RopeBlock).
#ifndef ROPE_ARGS
#define ROPE_ARGS p
#endif
vec2 rope_sin_cos(float pos, uint k, float ff) {
    precise float theta_base = pos; // advanced by multiplication, as the CPU's is
    for (uint s = 0; s < k; s++)
        theta_base *= ROPE_ARGS.theta_scale;
    precise float extrap = theta_base / ff;
    precise float interp = ROPE_ARGS.freq_scale * extrap, theta = interp,
                  mscale = ROPE_ARGS.attn_factor;
    if (ROPE_ARGS.ext_factor != 0.0) {
        float y = (float(k) - ROPE_ARGS.corr0) / max(0.001, ROPE_ARGS.corr1 - ROPE_ARGS.corr0);
        float mix = (1.0 - min(1.0, max(0.0, y))) * ROPE_ARGS.ext_factor;
        theta = fma(interp, 1.0 - mix, extrap * mix);
        mscale *= fma(0.1, log(1.0 / ROPE_ARGS.freq_scale), 1.0);
    }
    precise vec2 sc = sin_cos(theta) * mscale;
    return sc;
}

// The pair (x0, x1) rotated by sc (sin, cos), exactly (precise: see sin_cos).
vec2 rotated(float x0, float x1, vec2 sc) {
    precise vec2 v = vec2(fma(x0, sc.y, -(x1 * sc.x)), fma(x0, sc.x, x1 * sc.y));
    return v;
}

// Pair k of the head at x + base (floats): its two elements' indices (NeoX: k and k + n_rot / 2;
// else 2k and 2k + 1) rotated by sc, as (index a, index b) and their new values.
void rope_pair(Floats x, uint base, uint k, uint n_rot, bool neox, vec2 sc, out uint a, out uint b,
               out vec2 v) {
    a = base + (neox ? k : 2 * k), b = base + (neox ? k + n_rot / 2 : 2 * k + 1);
    float x0 = x.v[a], x1 = x.v[b];
    v = rotated(x0, x1, sc);
    x.v[a] = v.x, x.v[b] = v.y;
}
