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
// products. NORM_FOLD (with X_Q8): x as y += W x (matvec_group.comp) made it, the RMSNorm of y
// without its 1 / rms, which the sums are multiplied by at the end (fold: its NormBlock).
// NORM_IN (with X_F16, one token): x the floats before an RMSNorm whose weights were multiplied
// into W at load (vk_fold_norm.c), so the norm is the team's sum of x's squares beside its dot
// products and the sums times 1 / rms (fold: a NormBlock for dim and eps); no op between the
// product before and this one.
#version 450
#include "common.glsl"
#include "dequant.glsl"
#extension GL_KHR_shader_subgroup_arithmetic : require
#ifdef X_Q8
#include "dequant_q8.glsl"
#endif
layout(local_size_x = 128) in;
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Vec4s { vec4 v[]; };
#include "matvec_args.glsl"

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

// SLOTS: rows a workgroup, 2 a team; NT: the most tokens (ONE_TOKEN: the decode of one
// sequence, whose sums then take 16 registers rather than 128)
#ifdef ONE_TOKEN
const uint NT = 1;
#else
const uint NT = 8;
#endif
const uint TEAM = 64, TEAMS = 2, SLOTS = 4, WG = TEAMS * TEAM;
shared float part[SLOTS][NT][TEAM + 1], sums[SLOTS][NT];
#ifdef NORM_FOLD
#include "matvec_norm.glsl"
#endif
#ifdef NORM_IN
#if !defined(X_F16) || !defined(ONE_TOKEN)
#error "NORM_IN: f16 weights, one token"
#endif
shared float team_squares[TEAMS][TEAM];
#endif

#include "matvec_rows.glsl"

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

#ifdef NORM_IN
// The team's sum of x's squares into team_squares, as team_parts adds up its sums.
void team_square_parts(uint team, uint lane) {
    uint size = gl_SubgroupSize;
    if (size <= TEAM) {
        float q = subgroupAdd(x_squares);
        if (gl_SubgroupInvocationID == 0)
            team_squares[team][lane / size] = q;
    } else
        team_squares[team][lane] = x_squares;
}

// The norm's 1 / rms from team's parts (after a barrier).
float team_norm_scale(uint team, uint parts) {
    float q = 0;
    for (uint l = 0; l < parts; l++)
        q += team_squares[team][l];
    return block_norm_scale(NormBlock(p.fold), q);
}
#endif

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
#ifdef NORM_IN
    count_squares = false;
#endif
    if (has1 && m1 != m0)
        rows_times_x(m1, r1, false, lane, s1, s0);
#ifdef NORM_FOLD
    add_squares();
#endif
    uint parts = team_parts(team, lane, s0, s1);
#ifdef NORM_IN
    team_square_parts(team, lane);
#endif
    barrier();
    uint i = gl_LocalInvocationID.x, k = i / NT, t = i % NT; // thread i < 32: slot k, token t
    bool summing = i < SLOTS * NT && t < p.n;
    if (summing) {
        float sum = 0;
        for (uint l = 0; l < parts; l++)
            sum += part[k][t][l];
#ifdef NORM_FOLD
        sum *= norm_scale(t);
#endif
#ifdef NORM_IN
        sum *= team_norm_scale(k / 2, parts);
#endif
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
