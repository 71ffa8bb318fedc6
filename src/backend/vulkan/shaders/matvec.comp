// matvec.comp: y = W x for up to 8 tokens (decode), W of the type dequant.glsl is built for and
// rows of whole 32-value groups: a team of 64 threads two rows, each thread dequantizing whole
// groups once and using them for every token (x read 16 bytes at a time, once for both rows:
// vk_matmul.c sends rows of x that are not 16-byte aligned to gemm.comp), the team's sums added
// in shared memory (one token's by subgroups first). The rows are those of up to 3 matrices of
// one width and type in turn (q, k and v: one dispatch), and mode asks for y = W x, y += W x, or
// a GLU: team 0 takes rows 2 wg and 2 wg + 1 of the gate, team 1 the same rows of up, and
// y[r] = act(gate x) * (up x).
//
// X_F16 (f16 weights): x as halves.comp made it, f16 to nearest once a product rather than in
// every lane that reads it; the team's lanes read a row 16 bytes each side by side, not a group
// each (rows_times_x's f16 form).
// X_Q8: x as quantize_q8.comp made it (x: each token's bytes, cols of them, then every token's
// groups' (d, sums) at x + n cols) and the weights as dequant_q8.glsl's bytes: integer dot
// products.
#version 450
#include "common.glsl"
#include "dequant.glsl"
#extension GL_KHR_shader_subgroup_arithmetic : require
#ifdef X_Q8
#include "dequant_q8.glsl"
#endif
layout(local_size_x = 128) in;
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Vec4s { vec4 v[]; };
layout(push_constant) uniform Args {
    uint64_t w[3], y[3]; // matrices and their outputs; rows[m] 0 past the last
    uint64_t x, tab;
    uint rows[3], row_bytes[3];
    uint cols, n, mode, glu_kind; // n <= 8
    uint64_t halves; // a GLU's y as f16 too (as halves.comp rounds it), or 0
    uint64_t rope;   // q, k and v's products in a decode step: RopeBlock, or 0
} p;

// A decode step's RoPE and cache stores, done as q, k and v are written (vk_rope_fold.c): the
// outputs that are q, k and v, the cache rows of the cells, and rope_store.comp's parameters.
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer RopeBlock {
    uint64_t q, k, v, k_cache, v_cache;
    Ints pos, cells;
    Floats ff; // n_rot / 2 divisors, or 0
    uint k_row, v_row, hd_k, n_rot, half_rows, pad;
    float theta_scale, freq_scale, ext_factor, attn_factor, corr0, corr1;
};
RopeBlock rb;
#define ROPE_ARGS rb
#include "rope.glsl"

#define MODE_SET 0
#define MODE_ADD 1
#define MODE_GLU 2

// SLOTS: rows a workgroup, 2 a team; NT: the most tokens (ONE_TOKEN: the decode of one
// sequence, whose sums then take 16 registers rather than 128)
#ifdef ONE_TOKEN
const uint NT = 1;
#else
const uint NT = 8;
#endif
const uint TEAM = 64, TEAMS = 2, SLOTS = 4;
shared float part[SLOTS][NT][TEAM + 1], sums[SLOTS][NT];

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
                Quads xh = Quads(p.x + uint64_t(t) * p.cols * 2);
                [[unroll]] for (uint j = 0; j < U; j++) {
                    uint c = c0 + j * TEAM;
                    uvec4 xq = c < runs ? xh.v[c] : uvec4(0);
                    s0[t] += dot8(a[j], xq), s1[t] += dot8(b[j], xq);
                }
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

// A team's sums of its two rows (s0, s1) into part; how many of part's entries a slot and token
// fill. One token's: each subgroup's added first (by its first thread, at its place in the team),
// unless subgroups are wider than the team. Not for more tokens: 8 sequences of the 1B decoded
// 16% slower with 16 subgroup sums a thread (H200), every lane's own into part instead.
uint team_parts(uint team, uint lane, float s0[NT], float s1[NT]) {
    uint size = gl_SubgroupSize;
    bool whole = NT == 1 && size <= TEAM;
    [[unroll]] for (uint t = 0; t < NT; t++)
        if (t < p.n && whole) {
            float a = subgroupAdd(s0[t]), b = subgroupAdd(s1[t]);
            if (gl_SubgroupInvocationID == 0)
                part[2 * team][t][lane / size] = a, part[2 * team + 1][t][lane / size] = b;
        } else if (t < p.n)
            part[2 * team][t][lane] = s0[t], part[2 * team + 1][t][lane] = s1[t];
    return whole ? TEAM / size : TEAM;
}

// Row slot k of workgroup wg (k < SLOTS): its matrix and row, false past the last.
bool slot_row(uint wg, uint k, out uint m, out uint r) {
    m = 0, r = wg * SLOTS + k;
    if (p.mode == MODE_GLU) // slots 0, 1: rows 2 wg, 2 wg + 1 of the gate; 2, 3: of up
        m = k / 2, r = wg * 2 + k % 2;
    else
        for (; m < 2 && r >= p.rows[m]; m++)
            r -= p.rows[m];
    return r < p.rows[m];
}

// Element i of the k (or v) cache row of token t's cell, as rope_store.comp stores it.
void store(bool is_k, uint t, uint i, float v) {
    uint64_t cell = uint64_t(rb.cells.v[t]);
    uint64_t row = is_k ? rb.k_cache + cell * rb.k_row : rb.v_cache + cell * rb.v_row;
    if (rb.half_rows != 0)
        Halves(row).v[i] = float16_t(v);
    else
        Floats(row).v[i] = v;
}

// Row r of matrix m for token t (slot k's sum) where the matrices are q, k and v: q's and k's
// first n_rot dimensions of each head rotated in pairs of rows (2i, 2i + 1: slots k and k + 1,
// written by k's thread) as rope_store.comp rotates them, and k and v stored into the cache.
void roped_write(uint m, uint r, uint k, uint t) {
    rb = RopeBlock(p.rope);
    uint64_t ym = p.y[m];
    bool is_q = ym == rb.q, is_k = ym == rb.k, is_v = ym == rb.v;
    uint dim = r % rb.hd_k, at = t * p.rows[m] + r;
    Floats y = Floats(ym);
    if ((is_q || is_k) && dim < rb.n_rot) {
        if (k % 2 != 0)
            return;
        float ff = 1.0; // an if, as rope_store.comp's
        if (uint64_t(rb.ff) != 0)
            ff = rb.ff.v[dim / 2];
        vec2 sc = rope_sin_cos(float(rb.pos.v[t]), dim / 2, ff);
        float x0 = sums[k][t], x1 = sums[k + 1][t];
        vec2 v = rotated(x0, x1, sc);
        y.v[at] = v.x, y.v[at + 1] = v.y;
        if (is_k)
            store(true, t, r, v.x), store(true, t, r + 1, v.y);
        return;
    }
    y.v[at] = sums[k][t];
    if (is_k || is_v)
        store(is_k, t, r, sums[k][t]);
}

void main() {
    // threads numbered by subgroup, so that a team is whole subgroups (team_parts)
    uint th = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
    uint team = th / TEAM, lane = th % TEAM;
    uint wg = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; // past 65535 in x
    uint m0, r0, m1, r1;
    bool has0 = slot_row(wg, 2 * team, m0, r0), has1 = slot_row(wg, 2 * team + 1, m1, r1);
    float s0[NT], s1[NT];
    [[unroll]] for (uint t = 0; t < NT; t++)
        s0[t] = 0, s1[t] = 0;
    if (has0 && has1 && m1 == m0) // this team's two rows, one after the other
        rows_times_x(m0, r0, true, lane, s0, s1);
    else if (has0) // the last row of a matrix: the next one's first apart
        rows_times_x(m0, r0, false, lane, s0, s1);
    if (has1 && m1 != m0)
        rows_times_x(m1, r1, false, lane, s1, s0);
    uint parts = team_parts(team, lane, s0, s1);
    barrier();
    uint i = gl_LocalInvocationID.x, k = i / NT, t = i % NT; // thread i < 32: slot k, token t
    bool summing = i < SLOTS * NT && t < p.n;
    if (summing) {
        float sum = 0;
        for (uint l = 0; l < parts; l++)
            sum += part[k][t][l];
        sums[k][t] = sum;
    }
    barrier();
    uint m, r;
    if (!summing || !slot_row(wg, k, m, r))
        return;
    if (p.rope != 0) {
        roped_write(m, r, k, t);
        return;
    }
    if (p.mode == MODE_GLU) { // the gate's slots, each with its up row's sum
        if (k < 2) {
            float v = glu(p.glu_kind, sums[k][t], sums[k + 2][t]);
            Floats(p.y[0]).v[t * p.rows[0] + r] = v;
            if (p.halves != 0)
                Halves(p.halves).v[t * p.rows[0] + r] = float16_t(round_to_f16(v));
        }
        return;
    }
    Floats y = Floats(p.y[m]);
    uint at = t * p.rows[m] + r;
    y.v[at] = p.mode == MODE_ADD ? y.v[at] + sums[k][t] : sums[k][t];
}
