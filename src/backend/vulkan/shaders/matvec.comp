// matvec.comp: y = W x for up to 8 tokens (decode), W of the type dequant.glsl is built for and
// rows of whole 32-value groups: a team of 64 threads a row, each thread dequantizing whole groups
// once and using them for every token (x read 16 bytes at a time: vk_matmul.c sends rows of x
// that are not 16-byte aligned to gemm.comp), the team's sums added in shared memory. The rows
// are those of up to 3 matrices of one width and type in turn (q, k and v: one dispatch), and
// mode asks for y = W x, y += W x, or a GLU: the two teams of a workgroup take row r of the gate
// and of the up matrix, and y[r] = act(gate x) * (up x).
#version 450
#include "common.glsl"
#include "dequant.glsl"
layout(local_size_x = 128) in;
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Vec4s { vec4 v[]; };
layout(push_constant) uniform Args {
    uint64_t w[3], y[3]; // matrices and their outputs; rows[m] 0 past the last
    uint64_t x, tab;
    uint rows[3], row_bytes[3];
    uint cols, n, mode, glu_kind; // n <= 8
} p;

#define MODE_SET 0
#define MODE_ADD 1
#define MODE_GLU 2

const uint TEAM = 64, TEAMS = 2, NT = 8;
shared float part[TEAMS][NT][TEAM + 1], sums[TEAMS][NT];

// Row r of matrix m times the tokens' x, into s.
void row_times_x(uint m, uint r, uint lane, inout float s[NT]) {
    uint64_t base = p.w[m] + uint64_t(r) * p.row_bytes[m];
    for (uint g = lane; g < p.cols / 32; g += TEAM) {
        float v[32];
        dq_group(base, g, p.tab, v);
        [[unroll]] for (uint t = 0; t < NT; t++) {
            if (t < p.n) {
                Vec4s xv = Vec4s(p.x + (uint64_t(t) * p.cols + 32 * g) * 4);
                float acc = 0;
                [[unroll]] for (uint q = 0; q < 8; q++) {
                    vec4 xq = xv.v[q];
                    acc += v[4 * q] * x_as_weight(xq.x) + v[4 * q + 1] * x_as_weight(xq.y) +
                           v[4 * q + 2] * x_as_weight(xq.z) + v[4 * q + 3] * x_as_weight(xq.w);
                }
                s[t] += acc;
            }
        }
    }
}

void main() {
    uint team = gl_LocalInvocationID.x / TEAM, lane = gl_LocalInvocationID.x % TEAM;
    // this team's matrix and row: a GLU's workgroup is one row of the gate (team 0) and of up
    uint wg = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; // past 65535 in x
    uint m = 0, r = wg * TEAMS + team;
    if (p.mode == MODE_GLU)
        m = team, r = wg;
    else
        for (; m < 2 && r >= p.rows[m]; m++)
            r -= p.rows[m];
    float s[NT] = float[NT](0, 0, 0, 0, 0, 0, 0, 0);
    if (r < p.rows[m])
        row_times_x(m, r, lane, s);
    [[unroll]] for (uint t = 0; t < NT; t++)
        if (t < p.n)
            part[team][t][lane] = s[t];
    barrier();
    uint i = gl_LocalInvocationID.x, tm = i / NT, t = i % NT; // thread i < 16: team tm, token t
    bool summing = i < TEAMS * NT && t < p.n;
    if (summing) {
        float sum = 0;
        for (uint l = 0; l < TEAM; l++)
            sum += part[tm][t][l];
        sums[tm][t] = sum;
    }
    barrier();
    if (!summing)
        return;
    if (p.mode == MODE_GLU) { // team 0's thread for token t, with team 1's sum
        if (tm == 0 && wg < p.rows[0])
            Floats(p.y[0]).v[t * p.rows[0] + wg] = glu(p.glu_kind, sums[0][t], sums[1][t]);
        return;
    }
    uint m2 = 0, r2 = wg * TEAMS + tm;
    for (; m2 < 2 && r2 >= p.rows[m2]; m2++)
        r2 -= p.rows[m2];
    if (r2 < p.rows[m2]) {
        Floats y = Floats(p.y[m2]);
        uint at = t * p.rows[m2] + r2;
        y.v[at] = p.mode == MODE_ADD ? y.v[at] + sums[tm][t] : sums[tm][t];
    }
}
