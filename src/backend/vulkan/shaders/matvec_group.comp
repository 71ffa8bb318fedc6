// matvec_group.comp: a decode step's y += W x (the o projection) or GLU (gate and up) for one
// token whose output the product after it takes as int8 groups of 32 (vk_group_fold.c): a
// workgroup makes 32 rows of y, a whole group, so it quantizes the group itself and no op runs
// between the two products (rows.comp's RMSNorm, quantize_q8.comp). 16 teams of 16 threads, a
// team rows 2j and 2j + 1 of the group (y += W x), or those rows of the gate and of up (a GLU),
// x and the weights as matvec.comp's X_Q8 takes them (matvec_rows.glsl).
// y += W x: the group is that of y times the RMSNorm's weights, the norm's 1 / rms left to the
// products after it (matvec.comp's NORM_FOLD, or a GLU here), which add up each workgroup's sum
// of squares of y. A GLU: the group is that of y (written where halves says); its x may be such
// a norm's (fold given). Rows a multiple of 32; the output's float rows are written too. One
// token: for 8 sequences its teams of 16 ran slower than matvec.comp (vk_matmul.c's group_form).
#version 450
#include "common.glsl"
#include "dequant.glsl"
#include "dequant_q8.glsl"
#include "quantize_group.glsl"
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = 256) in;
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Vec4s { vec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Levels { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Metas { vec4 v[]; };
#include "matvec_args.glsl"

const uint NT = 1;
const uint TEAM = 16, TEAMS = 16, GROUP = 32, WG = TEAMS * TEAM;
// slots 0..31: the group's rows (of the gate for a GLU); 32..63: up's. A team's lanes' sums, or
// (one token) its subgroups'.
shared float part[2 * GROUP][NT][TEAM + 1], outs[GROUP][NT];

#include "matvec_rows.glsl"
#include "matvec_norm.glsl"

// A team's sums of rows 2 team and 2 team + 1 (s0, s1) into part, slots from at: one token's
// added by subgroups first where a team is whole subgroups (threads numbered by subgroup), as
// matvec.comp's team_parts; how many entries a slot fills.
uint team_parts(uint at, uint team, uint lane, float s0[NT], float s1[NT]) {
    uint size = gl_SubgroupSize;
    bool whole = NT == 1 && size <= TEAM;
    [[unroll]] for (uint t = 0; t < NT; t++)
        if (t < p.n && whole) {
            float a = subgroupAdd(s0[t]), b = subgroupAdd(s1[t]);
            if (gl_SubgroupInvocationID == 0)
                part[at + 2 * team][t][lane / size] = a, part[at + 2 * team + 1][t][lane / size] = b;
        } else if (t < p.n)
            part[at + 2 * team][t][lane] = s0[t], part[at + 2 * team + 1][t][lane] = s1[t];
    return whole ? TEAM / size : TEAM;
}

float slot_sum(uint k, uint t, uint parts) {
    float sum = 0;
    for (uint l = 0; l < parts; l++)
        sum += part[k][t][l];
    return sum;
}

// Token t's group (outs) times the norm's weights g (0: none) as int8 levels and (d, sums) at
// `to`, as quantize_q8.comp lays them out; its sum of squares of y (the group's, before g).
// Every read through a pointer that may be null is behind an if, not in a ?: or && (which
// compile to selects that read both sides: Mesa 26's lavapipe then loads from address 0).
float write_group(uint wg, uint t, uint64_t g, uint64_t to) {
    vec4 v[8];
    float squares = 0;
    [[unroll]] for (uint j = 0; j < 8; j++) {
        v[j] = vec4(outs[4 * j][t], outs[4 * j + 1][t], outs[4 * j + 2][t], outs[4 * j + 3][t]);
        squares += dot(v[j], v[j]);
        if (g != 0) // 16-byte aligned (vk_group_fold.c)
            v[j] *= Vec4s(g + 4 * (uint64_t(GROUP) * wg + 4 * j)).v[0];
    }
    uvec4 lo, hi;
    vec4 meta;
    quantize_group(v, lo, hi, meta);
    uint dim = p.rows[0];
    Levels bytes = Levels(to + uint64_t(t) * dim + GROUP * wg);
    bytes.v[0] = lo, bytes.v[1] = hi;
    Metas(to + uint64_t(p.n) * dim + (uint64_t(t) * (dim / GROUP) + wg) * 16).v[0] = meta;
    return squares;
}

// A GLU's groups where halves says; y += W x's, times the norm's weights, where its block says,
// with the workgroup's sum of squares of y.
void write_groups(uint wg, uint t, bool is_glu) {
    if (is_glu) {
        write_group(wg, t, 0, p.halves);
        return;
    }
    NormBlock nb = NormBlock(p.fold);
    nb.partials.v[t * nb.parts + wg] = write_group(wg, t, uint64_t(nb.g), nb.bytes);
}

void main() {
    uint th = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID; // teams whole subgroups
    uint team = th / TEAM, lane = th % TEAM;
    uint wg = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; // past 65535 in x
    if (wg >= p.rows[0] / GROUP) // the grid's last row past the rows (the whole workgroup)
        return;
    uint r = GROUP * wg + 2 * team;
    bool is_glu = p.mode == MODE_GLU;
    float s0[NT], s1[NT];
    [[unroll]] for (uint t = 0; t < NT; t++)
        s0[t] = 0, s1[t] = 0;
    rows_times_x(0, r, true, lane, s0, s1);
    uint parts = team_parts(0, team, lane, s0, s1);
    if (is_glu) { // up's rows: the same x, mostly from the cache now
        [[unroll]] for (uint t = 0; t < NT; t++)
            s0[t] = 0, s1[t] = 0;
        rows_times_x(1, r, true, lane, s0, s1);
        team_parts(GROUP, team, lane, s0, s1);
    }
    bool normed = is_glu && p.fold != 0; // x a norm's groups without its 1 / rms (no read: &&)
    if (normed)
        add_squares();
    barrier();
    th = gl_LocalInvocationID.x;
    uint k = th / NT, t = th % NT; // thread th < 256: row k of the group, token t
    if (k < GROUP && t < p.n) {
        Floats y = Floats(p.y[0]);
        uint at = t * p.rows[0] + GROUP * wg + k;
        float v = slot_sum(k, t, parts);
        if (is_glu) {
            float u = slot_sum(GROUP + k, t, parts);
            if (normed) { // an if: norm_scale reads fold's block
                float scale = norm_scale(t);
                v *= scale, u *= scale;
            }
            v = glu(p.glu_kind, v, u);
        } else
            v += y.v[at];
        y.v[at] = v;
        outs[k][t] = v;
    }
    barrier();
    if (th < p.n)
        write_groups(wg, th, is_glu);
}
