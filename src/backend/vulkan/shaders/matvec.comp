// matvec.comp: y[t] = W x[t] for up to 8 tokens (decode), W of the type dequant.glsl is built for
// and rows of whole 32-value groups: a team of 32 threads a row, each thread dequantizing whole
// groups once and using them for every token, the teams' sums added in shared memory.
#version 450
#include "common.glsl"
#include "dequant.glsl"
layout(local_size_x = 128) in;
layout(push_constant) uniform Args {
    uint64_t w;
    Floats x, y;
    uint64_t tab;
    uint rows, cols, n, row_bytes; // n <= 8
} p;

const uint TEAM = 32, TEAMS = 4, NT = 8;
shared float part[TEAMS][NT][TEAM + 1];

void main() {
    uint team = gl_LocalInvocationID.x / TEAM, lane = gl_LocalInvocationID.x % TEAM;
    uint row = gl_WorkGroupID.x * TEAMS + team;
    float s[NT] = float[NT](0, 0, 0, 0, 0, 0, 0, 0);
    if (row < p.rows) {
        uint64_t base = p.w + uint64_t(row) * p.row_bytes;
        for (uint g = lane; g < p.cols / 32; g += TEAM) {
            float v[32];
            dq_group(base, g, p.tab, v);
            for (uint t = 0; t < NT; t++) {
                if (t >= p.n)
                    break;
                uint xo = t * p.cols + 32 * g;
                float acc = 0;
                for (uint j = 0; j < 32; j++)
                    acc += v[j] * x_as_weight(p.x.v[xo + j]);
                s[t] += acc;
            }
        }
    }
    for (uint t = 0; t < NT; t++)
        part[team][t][lane] = s[t];
    barrier();
    // Thread i < 32 adds up team i/8's token i%8.
    uint i = gl_LocalInvocationID.x;
    if (i < TEAMS * NT) {
        uint tm = i / NT, t = i % NT, r = gl_WorkGroupID.x * TEAMS + tm;
        if (t < p.n && r < p.rows) {
            float sum = 0;
            for (uint l = 0; l < TEAM; l++)
                sum += part[tm][t][l];
            p.y.v[t * p.rows + r] = sum;
        }
    }
}
