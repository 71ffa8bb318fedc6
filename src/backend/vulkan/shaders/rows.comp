// rows.comp: the ops that read a whole row first (RMSNorm, LayerNorm, softmax): one workgroup a
// row, its sums reduced in shared memory.
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Args {
    Floats y, x, g, bias; // g, bias: 0 where the op has none
    uint dim, op;
    float eps;
} p;

#define OP_RMS_NORM 0
#define OP_LAYER_NORM 1
#define OP_SOFTMAX 2

shared float part[256];

// The sum (or, with take_max, the maximum) of every thread's v, on every thread.
float reduce(float v, bool take_max) {
    uint t = gl_LocalInvocationID.x;
    part[t] = v;
    barrier();
    for (uint s = 128; s > 0; s >>= 1) {
        if (t < s)
            part[t] = take_max ? max(part[t], part[t + s]) : part[t] + part[t + s];
        barrier();
    }
    float r = part[0];
    barrier();
    return r;
}

void main() {
    uint row = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
    uint64_t off = uint64_t(row) * p.dim * 4;
    Floats x = Floats(uint64_t(p.x) + off), y = Floats(uint64_t(p.y) + off);
    bool has_g = uint64_t(p.g) != 0, has_b = uint64_t(p.bias) != 0;
    if (p.op == OP_SOFTMAX) {
        float m = -1.0 / 0.0;
        for (uint i = t; i < p.dim; i += 256)
            m = max(m, x.v[i]);
        m = reduce(m, true);
        float s = 0.0;
        for (uint i = t; i < p.dim; i += 256) {
            float e = exp(x.v[i] - m);
            y.v[i] = e;
            s += e;
        }
        float inv = 1.0 / reduce(s, false);
        for (uint i = t; i < p.dim; i += 256)
            y.v[i] *= inv;
        return;
    }
    float mean = 0.0;
    if (p.op == OP_LAYER_NORM) {
        float s = 0.0;
        for (uint i = t; i < p.dim; i += 256)
            s += x.v[i];
        mean = reduce(s, false) / float(p.dim);
    }
    float q = 0.0;
    for (uint i = t; i < p.dim; i += 256) {
        float d = x.v[i] - mean;
        q += d * d;
    }
    float scale = 1.0 / sqrt(reduce(q, false) / float(p.dim) + p.eps);
    for (uint i = t; i < p.dim; i += 256) {
        float v = (x.v[i] - mean) * scale;
        v = has_g ? v * p.g.v[i] : v;
        y.v[i] = has_b ? v + p.bias.v[i] : v;
    }
}
