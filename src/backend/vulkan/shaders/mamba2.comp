// mamba2.comp: the Mamba-2 recurrence (backend.h's mamba2 op) in two passes, each walking the
// batch's tokens in order, as a slot's state must take them. PASS_CONV: the causal convolution
// of x, B and C a thread a channel, plus the bias, through silu. Otherwise: the scan, a
// workgroup per 64 rows of one head's state (a thread a row): decay, the token's x dt B, the
// read-out through C, plus D x.
#version 450
#include "common.glsl"
#include "causal_conv.glsl"

#ifdef PASS_CONV
layout(local_size_x = 256) in;
layout(push_constant) uniform Args {
    Floats xbc, conv_w, conv_b, conv_state, conv_out; // conv_b: 0 where there is none
    Ints slot;
    uint xbc_stride, conv_stride, n, conv_dim, d_conv;
} p;

void main() {
    uint c = gl_GlobalInvocationID.x;
    if (c >= p.conv_dim)
        return;
    bool has_b = uint64_t(p.conv_b) != 0;
    for (uint t = 0; t < p.n; t++) {
        Floats state = slot_state(p.conv_state, p.slot.v[t], p.conv_stride);
        float sum = causal_conv_channel(state, c, p.conv_dim, p.conv_w, p.d_conv,
                                        p.xbc.v[t * p.xbc_stride + c]);
        if (has_b)
            sum += p.conv_b.v[c];
        p.conv_out.v[t * p.conv_dim + c] = sum / (1.0 + exp(-sum));
    }
}

#else
layout(local_size_x = 64) in;
layout(push_constant) uniform Args {
    Floats conv_out, dt, dt_bias, a, d, ssm_state;
    Ints slot;
    Floats y;
    uint dt_stride, ssm_stride, n, n_head, head_dim, n_group, d_state;
} p;

shared float bs[256], cs[256]; // this token's B and C of the head's group (d_state <= 256)

// log(1 + u) without losing small u to the rounding of 1 + u (GLSL has no log1p).
float log1p_(float u) {
    float w = 1.0 + u;
    return w == 1.0 ? u : log(w) * (u / (w - 1.0));
}

void main() {
    uint h = gl_WorkGroupID.y, th = gl_LocalInvocationID.x, i = gl_WorkGroupID.x * 64 + th;
    uint hd = p.head_dim, ds = p.d_state, g = h / (p.n_head / p.n_group);
    uint inner = p.n_head * hd, conv_dim = inner + 2 * p.n_group * ds;
    for (uint t = 0; t < p.n; t++) {
        uint row = t * conv_dim;
        barrier(); // the last token's B and C are read
        for (uint j = th; j < ds; j += 64) {
            bs[j] = p.conv_out.v[row + inner + g * ds + j];
            cs[j] = p.conv_out.v[row + inner + (p.n_group + g) * ds + j];
        }
        barrier();
        if (i < hd) {
            float x = p.conv_out.v[row + h * hd + i];
            float dt = p.dt.v[t * p.dt_stride + h] + p.dt_bias.v[h];
            float soft = dt > 20.0 ? dt : log1p_(exp(dt));
            float decay = exp(soft * p.a.v[h]), x_dt = x * soft, sum = 0.0;
            Floats state = slot_state(p.ssm_state, p.slot.v[t], p.ssm_stride);
            Floats s = Floats(uint64_t(state) + (uint64_t(h) * hd + i) * ds * 4);
            for (uint j = 0; j < ds; j++) {
                float v = s.v[j] * decay + bs[j] * x_dt;
                sum += v * cs[j];
                s.v[j] = v;
            }
            p.y.v[t * inner + h * hd + i] = sum + x * p.d.v[h];
        }
    }
}
#endif
