/* causal_conv.cuh: one channel's step of a recurrent layer's causal convolution on the GPU,
 * shared by the gated delta-net's and Mamba-2's conv kernels (a thread per channel). */
#ifndef OX_BACKEND_CUDA_CAUSAL_CONV_CUH
#define OX_BACKEND_CUDA_CAUSAL_CONV_CUH

#include <stddef.h>

/* x convolved with the slot's d_conv - 1 previous inputs of this channel (state: rows
 * conv_dim apart, oldest first) and w, the channel's d_conv taps; the rows then move on by
 * one, taking x. Returns the sum, before any bias and activation. */
__device__ __forceinline__ float causal_conv_channel(float *state, size_t conv_dim, const float *w,
                                                     int d_conv, float x) {
    int hist = d_conv - 1;
    float sum = 0.0f;
    for (int k = 0; k < hist; k++)
        sum += state[(size_t)k * conv_dim] * w[k];
    sum += x * w[hist];
    for (int k = 0; k + 1 < hist; k++)
        state[(size_t)k * conv_dim] = state[(size_t)(k + 1) * conv_dim];
    if (hist > 0)
        state[(size_t)(hist - 1) * conv_dim] = x;
    return sum;
}

#endif
