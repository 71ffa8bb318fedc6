// delta_net.comp: the gated delta-net recurrence (backend.h's delta_net op) in two passes, each
// walking the batch's tokens in order, as a slot's state must take them. PASS_CONV: a workgroup
// a head of d_state channels (q's heads, k's, then v's): the causal convolution a thread a
// channel through silu, then q's and k's heads L2-normed by a shared-memory sum. Otherwise: a
// workgroup per 64 rows of one value head's state (a thread a row, the rows independent):
// decay, the delta against k, the update, the read-out against q.
#version 450
#include "common.glsl"
#include "causal_conv.glsl"

#ifdef PASS_CONV
layout(local_size_x = 128) in;
layout(push_constant) uniform Args {
    Floats qkv, conv_w, conv_state, conv_out;
    Ints slot;
    uint conv_stride, n, conv_dim, d_state, n_norm, d_conv; // n_norm: q's and k's heads
    float eps;
} p;

shared float part[128];

float reduce_sum(float v) {
    uint t = gl_LocalInvocationID.x;
    part[t] = v;
    barrier();
    for (uint s = 64; s > 0; s >>= 1) {
        if (t < s)
            part[t] += part[t + s];
        barrier();
    }
    float r = part[0];
    barrier();
    return r;
}

void main() {
    uint head = gl_WorkGroupID.x, th = gl_LocalInvocationID.x, d = p.d_state;
    for (uint t = 0; t < p.n; t++) {
        Floats state = slot_state(p.conv_state, p.slot.v[t], p.conv_stride);
        uint row = t * p.conv_dim + head * d;
        float sq = 0.0;
        for (uint i = th; i < d; i += 128) {
            uint c = head * d + i;
            float sum = causal_conv_channel(state, c, p.conv_dim, p.conv_w, p.d_conv,
                                            p.qkv.v[t * p.conv_dim + c]);
            float y = sum / (1.0 + exp(-sum));
            p.conv_out.v[row + i] = y;
            sq += y * y;
        }
        if (head < p.n_norm) { // the same for the whole workgroup: its barriers are safe
            float scale = 1.0 / max(sqrt(reduce_sum(sq)), p.eps);
            for (uint i = th; i < d; i += 128)
                p.conv_out.v[row + i] *= scale;
        }
    }
}

#else
layout(local_size_x = 64) in;
layout(push_constant) uniform Args {
    Floats conv_out, beta, alpha, dt_bias, a, ssm_state;
    Ints slot;
    Floats y;
    uint ssm_stride, n, n_k_heads, n_v_heads, d_state;
} p;

shared float qs[256], ks[256]; // this token's q and k head (vk_recurrent.c: d_state <= 256)

void main() {
    uint h = gl_WorkGroupID.y, th = gl_LocalInvocationID.x, j = gl_WorkGroupID.x * 64 + th;
    uint d = p.d_state, kh = h % p.n_k_heads, key_dim = p.n_k_heads * d;
    uint conv_dim = 2 * key_dim + p.n_v_heads * d;
    float scale = 1.0 / sqrt(float(d));
    for (uint t = 0; t < p.n; t++) {
        uint row = t * conv_dim;
        barrier(); // the last token's q and k are read
        for (uint i = th; i < d; i += 64) {
            qs[i] = p.conv_out.v[row + kh * d + i];
            ks[i] = p.conv_out.v[row + key_dim + kh * d + i];
        }
        barrier();
        if (j < d) {
            float x = p.alpha.v[t * p.n_v_heads + h] + p.dt_bias.v[h];
            float softplus = x > 20.0 ? x : log(1.0 + exp(x));
            float decay = exp(softplus * p.a.v[h]);
            float beta = 1.0 / (1.0 + exp(-p.beta.v[t * p.n_v_heads + h]));
            Floats state = slot_state(p.ssm_state, p.slot.v[t], p.ssm_stride);
            Floats m = Floats(uint64_t(state) + (uint64_t(h) * d + j) * d * 4);
            float dot_k = 0.0;
            for (uint i = 0; i < d; i++) {
                float v = m.v[i] * decay;
                m.v[i] = v;
                dot_k += v * ks[i];
            }
            float delta = (p.conv_out.v[row + 2 * key_dim + h * d + j] - dot_k) * beta;
            float dot_q = 0.0;
            for (uint i = 0; i < d; i++) {
                float v = m.v[i] + ks[i] * delta;
                m.v[i] = v;
                dot_q += v * qs[i];
            }
            p.y.v[(t * p.n_v_heads + h) * d + j] = dot_q * scale;
        }
    }
}
#endif
