// causal_conv.glsl: one channel's step of a recurrent layer's causal convolution (ggml's
// ssm_conv), shared by the conv passes of delta_net.comp and mamba2.comp (a thread a channel).

// x convolved with the slot's d_conv - 1 previous inputs of channel c (state: rows conv_dim
// apart, oldest first, summed in that order as the CPU does) and the channel's d_conv taps of w;
// the rows then move on by one, taking x. Returns the sum, before any bias and activation.
float causal_conv_channel(Floats state, uint c, uint conv_dim, Floats w, uint d_conv, float x) {
    uint hist = d_conv - 1, taps = c * d_conv;
    float sum = 0.0;
    for (uint k = 0; k < hist; k++)
        sum += state.v[k * conv_dim + c] * w.v[taps + k];
    sum += x * w.v[taps + hist];
    for (uint k = 0; k + 1 < hist; k++)
        state.v[k * conv_dim + c] = state.v[(k + 1) * conv_dim + c];
    if (hist > 0)
        state.v[(hist - 1) * conv_dim + c] = x;
    return sum;
}

// Slot s's rows of a per-slot state, stride floats apart (64-bit: slots times their size can
// pass 2^32 floats).
Floats slot_state(Floats base, int s, uint stride) {
    return Floats(uint64_t(base) + uint64_t(s) * uint64_t(stride) * 4);
}
