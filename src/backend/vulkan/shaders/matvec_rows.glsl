// matvec_rows.glsl: rows of W times the tokens' x for matvec.comp and matvec_group.comp, a team
// of TEAM threads two rows (rows_times_x), in the form x takes (X_Q8: integer dot products; X_F16
// with f16 weights; else each group dequantized to floats). The includer declares p
// (matvec_args.glsl), NT and TEAM.
#ifdef X_Q8
// A token's group as bytes (xa, xb; scale and sums xm) times a row's (levels q, scales ab).
float group_dot(uvec4 xa, uvec4 xb, vec4 xm, uint q[8], vec4 ab) {
    int lo = sdot4(q[0], xa.x) + sdot4(q[1], xa.y) + sdot4(q[2], xa.z) + sdot4(q[3], xa.w);
    int hi = sdot4(q[4], xb.x) + sdot4(q[5], xb.y) + sdot4(q[6], xb.z) + sdot4(q[7], xb.w);
    return xm.x * (ab.x * float(lo) + ab.y * float(hi) + ab.z * xm.y + ab.w * xm.z);
}

#ifdef Q8_PAIRS
// Rows r and r + 1 of matrix m times the tokens' x, into s0 and s1 (r + 1 where two), a lane
// taking groups 2c and 2c + 1 (dequant_q8.glsl's q8_pair) and x's 64 bytes for them.
void rows_times_x(uint m, uint r, bool two, uint lane, inout float s0[NT], inout float s1[NT]) {
    uint64_t base = p.w[m] + uint64_t(r) * p.row_bytes[m];
    uint64_t metas = p.x + uint64_t(p.n) * p.cols;
    for (uint c = lane; c < p.cols / 64; c += TEAM) {
        uint q0[8], q1[8], u0[8], u1[8];
        vec4 ab0, ab1, cd0, cd1;
        q8_pair(base, c, q0, q1, ab0, ab1);
        if (two)
            q8_pair(base + p.row_bytes[m], c, u0, u1, cd0, cd1);
        [[unroll]] for (uint t = 0; t < NT; t++) {
            if (t < p.n) {
                Quads xq = Quads(p.x + uint64_t(t) * p.cols + 64 * c);
                uvec4 xa = xq.v[0], xb = xq.v[1], xc = xq.v[2], xd = xq.v[3];
                Vec4s xv = Vec4s(metas + (uint64_t(t) * (p.cols / 32) + 2 * c) * 16);
                vec4 xm = xv.v[0], xn = xv.v[1];
                s0[t] += group_dot(xa, xb, xm, q0, ab0) + group_dot(xc, xd, xn, q1, ab1);
                if (two)
                    s1[t] += group_dot(xa, xb, xm, u0, cd0) + group_dot(xc, xd, xn, u1, cd1);
            }
        }
    }
}
#else
// Rows r and r + 1 of matrix m times the tokens' x, into s0 and s1 (r + 1 where two).
void rows_times_x(uint m, uint r, bool two, uint lane, inout float s0[NT], inout float s1[NT]) {
    uint64_t base = p.w[m] + uint64_t(r) * p.row_bytes[m];
    uint64_t metas = p.x + uint64_t(p.n) * p.cols;
    for (uint g = lane; g < p.cols / 32; g += TEAM) {
        uint q0[8], q1[8];
        vec4 ab0, ab1;
        q8_group(base, g, p.tab, q0, ab0);
        if (two)
            q8_group(base + p.row_bytes[m], g, p.tab, q1, ab1);
        [[unroll]] for (uint t = 0; t < NT; t++) {
            if (t < p.n) {
                Quads xq = Quads(p.x + uint64_t(t) * p.cols + 32 * g);
                uvec4 xa = xq.v[0], xb = xq.v[1];
                vec4 xm = Vec4s(metas + (uint64_t(t) * (p.cols / 32) + g) * 16).v[0];
                s0[t] += group_dot(xa, xb, xm, q0, ab0);
                if (two)
                    s1[t] += group_dot(xa, xb, xm, q1, ab1);
            }
        }
    }
}
#endif
#elif defined(TYPE_F16) && defined(X_F16)
// Eight f16 weights (or x values) times eight.
float dot8(uvec4 a, uvec4 b) {
    return dot(vec4(unpackHalf2x16(a.x), unpackHalf2x16(a.y)),
               vec4(unpackHalf2x16(b.x), unpackHalf2x16(b.y))) +
           dot(vec4(unpackHalf2x16(a.z), unpackHalf2x16(a.w)),
               vec4(unpackHalf2x16(b.z), unpackHalf2x16(b.w)));
}

#ifdef NORM_IN
// Eight f16 weights times eight floats of x (lo, hi).
float dot8f(uvec4 a, vec4 lo, vec4 hi) {
    return dot(vec4(unpackHalf2x16(a.x), unpackHalf2x16(a.y)), lo) +
           dot(vec4(unpackHalf2x16(a.z), unpackHalf2x16(a.w)), hi);
}

// x's sum of squares as this thread reads it, while count_squares (its team's first row: each
// team reads all of x)
float x_squares = 0;
bool count_squares = true;
#endif

// Rows r and r + 1 of matrix m times the tokens' x, into s0 and s1 (r + 1 where two), for f16
// weights (rows 16-byte aligned: vk_matmul.c's matvec_takes): a lane reads 8 weights at a time,
// the team's lanes consecutive runs of 16 bytes (a subgroup's load one run of 512), four runs a
// row in flight. The dequant.glsl path below gives each lane a whole 64-byte group, so one load
// of a subgroup touched 16 bytes in every 64 of 2 KiB: the 1B F16's tg128 on an H200 ran at 591
// / 597 t/s that way and 691 / 699 this way (session 32).
void rows_times_x(uint m, uint r, bool two, uint lane, inout float s0[NT], inout float s1[NT]) {
    Quads w0 = Quads(p.w[m] + uint64_t(r) * p.row_bytes[m]);
    Quads w1 = Quads(p.w[m] + uint64_t(r + (two ? 1 : 0)) * p.row_bytes[m]);
    const uint U = 4;
    uint runs = p.cols / 8;
    for (uint c0 = lane; c0 < runs; c0 += U * TEAM) {
        uvec4 a[U], b[U];
        [[unroll]] for (uint j = 0; j < U; j++) {
            uint c = c0 + j * TEAM;
            a[j] = c < runs ? w0.v[c] : uvec4(0);
            b[j] = c < runs && two ? w1.v[c] : uvec4(0);
        }
        [[unroll]] for (uint t = 0; t < NT; t++) {
            if (t < p.n) {
#ifdef NORM_IN
                Vec4s xf = Vec4s(p.x + uint64_t(t) * p.cols * 4);
                [[unroll]] for (uint j = 0; j < U; j++) {
                    uint c = c0 + j * TEAM;
                    vec4 lo = vec4(0), hi = vec4(0);
                    if (c < runs) // (no load inside ?:, which a compiler may issue anyway)
                        lo = xf.v[2 * c], hi = xf.v[2 * c + 1];
                    if (count_squares)
                        x_squares += dot(lo, lo) + dot(hi, hi);
                    s0[t] += dot8f(a[j], lo, hi), s1[t] += dot8f(b[j], lo, hi);
                }
#else
                Quads xh = Quads(p.x + uint64_t(t) * p.cols * 2);
                [[unroll]] for (uint j = 0; j < U; j++) {
                    uint c = c0 + j * TEAM;
                    uvec4 xq = c < runs ? xh.v[c] : uvec4(0);
                    s0[t] += dot8(a[j], xq), s1[t] += dot8(b[j], xq);
                }
#endif
            }
        }
    }
}
#else
// Rows r and r + 1 of matrix m times the tokens' x, into s0 and s1 (r + 1 where two): the two
// rows' loads issued together, each x read once for both.
void rows_times_x(uint m, uint r, bool two, uint lane, inout float s0[NT], inout float s1[NT]) {
    uint64_t base = p.w[m] + uint64_t(r) * p.row_bytes[m];
    for (uint g = lane; g < p.cols / 32; g += TEAM) {
        float v[32], u[32];
        dq_group(base, g, p.tab, v);
        if (two)
            dq_group(base + p.row_bytes[m], g, p.tab, u);
        [[unroll]] for (uint t = 0; t < NT; t++) {
            if (t < p.n) {
#ifdef X_F16
                Quads xh = Quads(p.x + (uint64_t(t) * p.cols + 32 * g) * 2);
                uvec4 h[4] = uvec4[4](xh.v[0], xh.v[1], xh.v[2], xh.v[3]);
#else
                Vec4s xv = Vec4s(p.x + (uint64_t(t) * p.cols + 32 * g) * 4);
#endif
                float a0 = 0, a1 = 0;
                [[unroll]] for (uint q = 0; q < 8; q++) {
#ifdef X_F16
                    vec4 xq = vec4(unpackHalf2x16(h[q / 2][2 * (q % 2)]),
                                   unpackHalf2x16(h[q / 2][2 * (q % 2) + 1]));
#else
                    vec4 xq = xv.v[q];
                    xq = vec4(x_as_weight(xq.x), x_as_weight(xq.y), x_as_weight(xq.z),
                              x_as_weight(xq.w));
#endif
                    a0 += dot(vec4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]), xq);
                    if (two)
                        a1 += dot(vec4(u[4 * q], u[4 * q + 1], u[4 * q + 2], u[4 * q + 3]), xq);
                }
                s0[t] += a0, s1[t] += a1;
            }
        }
    }
}
#endif
