/* causal_conv.h: one step of a recurrent layer's causal convolution (ggml's ssm_conv), shared
 * by the gated delta-net's and Mamba-2's CPU recurrences. */
#ifndef OX_BACKEND_CPU_CAUSAL_CONV_H
#define OX_BACKEND_CPU_CAUSAL_CONV_H

#include <stddef.h>
#include <string.h>

#include "backend/cpu/ggml_numerics.h"

/* out = silu(x convolved with the slot's d_conv - 1 previous rows in state (oldest first,
 * summed in that order as ggml's ssm_conv), plus bias when not NULL) over conv_dim channels
 * (w: [conv_dim][d_conv]); state then moves on by one row, taking x. */
static inline void causal_conv_step(float *state, const float *x, const float *w, const float *bias,
                                    float *out, int conv_dim, int d_conv) {
    int hist = d_conv - 1;
    for (int c = 0; c < conv_dim; c++) {
        const float *wc = w + (size_t)c * (size_t)d_conv;
        float sum = 0.0f;
        for (int k = 0; k < hist; k++)
            sum += state[(size_t)k * (size_t)conv_dim + (size_t)c] * wc[k];
        sum += x[c] * wc[hist];
        if (bias)
            sum += bias[c];
        out[c] = sum / (1.0f + ggml_expf(-sum)); /* silu, as ggml's vector silu */
    }
    if (hist > 0) {
        memmove(state, state + conv_dim, (size_t)(hist - 1) * (size_t)conv_dim * sizeof *state);
        memcpy(state + (size_t)(hist - 1) * (size_t)conv_dim, x, (size_t)conv_dim * sizeof *x);
    }
}

#endif
