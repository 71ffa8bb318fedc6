/* cuda_delta_net.cu: the gated delta-net recurrence (backend.h's delta_net op) on the GPU: the
 * causal convolution a thread per channel, the L2 norms of q's and k's heads a warp each, and
 * the delta rule a block per value head (a thread per row of its state), each walking the
 * batch's tokens in order, as a sequence's state must take them. */
#include <math.h>

#include "backend/cuda/causal_conv.cuh"
#include "backend/cuda/cuda_ops.cuh"

/* Channel c of every token: the slot's d_conv - 1 previous inputs and this one, oldest first,
 * through silu; the slot's rows then move on by one. */
__global__ static void conv_kernel(struct delta_net_args a, int conv_dim) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= conv_dim)
        return;
    const float *w = a.conv_w + (size_t)c * a.d_conv;
    for (int t = 0; t < a.n; t++) {
        float *state = a.conv_state + (size_t)a.slot[t] * a.conv_stride + c;
        float sum = causal_conv_channel(state, (size_t)conv_dim, w, a.d_conv,
                                        a.qkv[(size_t)t * conv_dim + c]);
        a.conv_out[(size_t)t * conv_dim + c] = sum / (1.0f + expf(-sum));
    }
}

/* One head of q or k of one token (block t * heads + h, one warp): x / max(|x|, eps). */
__global__ static void l2_kernel(float *rows, int conv_dim, int heads, int d, float eps) {
    int t = blockIdx.x / heads, h = blockIdx.x % heads;
    float *x = rows + (size_t)t * conv_dim + (size_t)h * d, s = 0.0f;
    for (int i = threadIdx.x; i < d; i += 32)
        s += x[i] * x[i];
    for (int o = 16; o > 0; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    float scale = 1.0f / fmaxf(sqrtf(s), eps);
    for (int i = threadIdx.x; i < d; i += 32)
        x[i] *= scale;
}

/* Value head blockIdx.x, thread j: row j of the state (column j of S) over every token:
 * decay, the delta against k, the update, then the read-out against q. */
__global__ static void recur_kernel(struct delta_net_args a, int conv_dim) {
    extern __shared__ float qk[]; /* this token's q and k head */
    int h = blockIdx.x, j = threadIdx.x, d = a.d_state, kh = h % a.n_k_heads;
    size_t key_dim = (size_t)a.n_k_heads * d;
    float scale = 1.0f / sqrtf((float)d);
    for (int t = 0; t < a.n; t++) {
        const float *row = a.conv_out + (size_t)t * conv_dim;
        __syncthreads(); /* the last token's q and k are read */
        for (int i = j; i < d; i += blockDim.x)
            qk[i] = row[(size_t)kh * d + i], qk[d + i] = row[key_dim + (size_t)kh * d + i];
        __syncthreads();
        if (j >= d)
            continue;
        float x = a.alpha[(size_t)t * a.n_v_heads + h] + a.dt_bias[h];
        float softplus = x > 20.0f ? x : logf(1.0f + expf(x));
        float decay = expf(softplus * a.a[h]);
        float beta = 1.0f / (1.0f + expf(-a.beta[(size_t)t * a.n_v_heads + h]));
        float *m = a.ssm_state + (size_t)a.slot[t] * a.ssm_stride + ((size_t)h * d + j) * d;
        float dot_k = 0.0f;
        for (int i = 0; i < d; i++) {
            float v = m[i] * decay;
            m[i] = v;
            dot_k += v * qk[d + i];
        }
        float delta = (row[2 * key_dim + (size_t)h * d + j] - dot_k) * beta, dot_q = 0.0f;
        for (int i = 0; i < d; i++) {
            float v = m[i] + qk[d + i] * delta;
            m[i] = v;
            dot_q += v * qk[i];
        }
        a.y[((size_t)t * a.n_v_heads + h) * d + j] = dot_q * scale;
    }
}

void cuda_delta_net(struct backend *b, const struct delta_net_args *a) {
    cudaStream_t s = cuda_of(b)->stream;
    int d = a->d_state, conv_dim = (2 * a->n_k_heads + a->n_v_heads) * d;
    conv_kernel<<<cuda_blocks((size_t)conv_dim, 256), 256, 0, s>>>(*a, conv_dim);
    if (a->n > 0)
        l2_kernel<<<(unsigned)(a->n * 2 * a->n_k_heads), 32, 0, s>>>(a->conv_out, conv_dim,
                                                                     2 * a->n_k_heads, d, a->eps);
    int threads = d < 1024 ? (d + 31) / 32 * 32 : 1024;
    recur_kernel<<<(unsigned)a->n_v_heads, threads, 2 * (size_t)d * sizeof(float), s>>>(*a,
                                                                                        conv_dim);
    CUDA_LAUNCHED(b, "delta_net");
}
