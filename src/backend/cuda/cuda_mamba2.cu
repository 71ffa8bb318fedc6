/* cuda_mamba2.cu: the Mamba-2 recurrence (backend.h's mamba2 op) on the GPU: the causal
 * convolution a thread per channel, then the scan a block per head (a thread per row of its
 * state), each walking the batch's tokens in order, as a sequence's state must take them. */
#include <math.h>

#include "backend/cuda/causal_conv.cuh"
#include "backend/cuda/cuda_ops.cuh"

/* Channel c of every token: the slot's d_conv - 1 previous inputs and this one, oldest first,
 * plus the bias, through silu; the slot's rows then move on by one. */
__global__ static void conv_kernel(struct mamba2_args a, int conv_dim) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= conv_dim)
        return;
    const float *w = a.conv_w + (size_t)c * a.d_conv;
    for (int t = 0; t < a.n; t++) {
        float *state = a.conv_state + (size_t)a.slot[t] * a.conv_stride + c;
        float sum = causal_conv_channel(state, (size_t)conv_dim, w, a.d_conv,
                                        a.xbc[(size_t)t * a.xbc_stride + c]);
        if (a.conv_b)
            sum += a.conv_b[c];
        a.conv_out[(size_t)t * conv_dim + c] = sum / (1.0f + expf(-sum));
    }
}

/* Head blockIdx.x, thread i: row i of its state over every token: decay, the token's
 * x dt B, the read-out through C, plus D x. */
__global__ static void scan_kernel(struct mamba2_args a, int conv_dim) {
    int h = blockIdx.x, i = threadIdx.x, hd = a.head_dim, ds = a.d_state;
    int g = h / (a.n_head / a.n_group);
    size_t inner = (size_t)a.n_head * hd;
    if (i >= hd)
        return;
    for (int t = 0; t < a.n; t++) {
        const float *row = a.conv_out + (size_t)t * conv_dim;
        const float *B = row + inner + (size_t)g * ds;
        const float *C = row + inner + (size_t)a.n_group * ds + (size_t)g * ds;
        float x = row[(size_t)h * hd + i];
        float dt = a.dt[(size_t)t * a.dt_stride + h] + a.dt_bias[h];
        float soft = dt > 20.0f ? dt : log1pf(expf(dt));
        float decay = expf(soft * a.a[h]), x_dt = x * soft, sum = 0.0f;
        float *s = a.ssm_state + (size_t)a.slot[t] * a.ssm_stride + ((size_t)h * hd + i) * ds;
        for (int j = 0; j < ds; j++) {
            float v = s[j] * decay + B[j] * x_dt;
            sum += v * C[j];
            s[j] = v;
        }
        a.y[(size_t)t * inner + (size_t)h * hd + i] = sum + x * a.d[h];
    }
}

void cuda_mamba2(struct backend *b, const struct mamba2_args *a) {
    cudaStream_t s = cuda_of(b)->stream;
    int conv_dim = a->n_head * a->head_dim + 2 * a->n_group * a->d_state;
    conv_kernel<<<cuda_blocks((size_t)conv_dim, 256), 256, 0, s>>>(*a, conv_dim);
    int threads = a->head_dim < 1024 ? (a->head_dim + 31) / 32 * 32 : 1024;
    scan_kernel<<<(unsigned)a->n_head, threads, 0, s>>>(*a, conv_dim);
    CUDA_LAUNCHED(b, "mamba2");
}
