/* cuda_rope.cu: rotary position embedding on the GPU (ggml's rope_ext: normal and NeoX pairs,
 * partial rotation, linear and YaRN scaling, llama3 frequency factors), one thread per pair. */
#include <math.h>

#include "backend/cuda/cuda_ops.cuh"

/* The rope settings by value: a kernel argument cannot point at host memory. */
struct rope_k {
    int n_rot, neox;
    float freq_scale, ext_factor, attn_factor, corr0, corr1, theta_scale;
    const float *freq_factors; /* device memory (the model's uploaded rope_freqs), or NULL */
};

__device__ static float yarn_ramp(float low, float high, int i0) {
    float y = ((float)(i0 / 2) - low) / fmaxf(0.001f, high - low);
    return 1.0f - fminf(1.0f, fmaxf(0.0f, y));
}

__global__ static void rope_kernel(float *x, const int32_t *pos, int n_heads, int head_dim,
                                   rope_k p, size_t n_pairs) {
    size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    int half = p.n_rot / 2;
    if (j >= n_pairs)
        return;
    int i = (int)(j % (size_t)half) * 2; /* i0 of ggml: the even dim index of the pair */
    size_t th = j / (size_t)half;        /* token * n_heads + head */
    int t = (int)(th / (size_t)n_heads);
    float *xh = x + th * (size_t)head_dim;
    float ff = p.freq_factors ? p.freq_factors[i / 2] : 1.0f;
    float theta_base = (float)pos[t] * powf(p.theta_scale, (float)(i / 2));
    float extrap = theta_base / ff, interp = p.freq_scale * extrap, theta = interp;
    float mscale = p.attn_factor;
    if (p.ext_factor != 0.0f) {
        float mix = yarn_ramp(p.corr0, p.corr1, i) * p.ext_factor;
        theta = interp * (1 - mix) + extrap * mix;
        mscale *= 1.0f + 0.1f * logf(1.0f / p.freq_scale);
    }
    float c = cosf(theta) * mscale, s = sinf(theta) * mscale;
    int a = p.neox ? i / 2 : i, bidx = p.neox ? i / 2 + half : i + 1;
    float x0 = xh[a], x1 = xh[bidx];
    xh[a] = x0 * c - x1 * s;
    xh[bidx] = x0 * s + x1 * c;
}

void cuda_rope(struct backend *b, float *x, const int32_t *pos, int n, int n_heads, int head_dim,
               const struct rope_params *p) {
    rope_k k = {p->n_rot,        p->neox,
                p->freq_scale,   p->ext_factor,
                p->attn_factor,  p->corr_dims[0],
                p->corr_dims[1], powf(p->freq_base, -2.0f / (float)p->n_rot),
                p->freq_factors};
    size_t pairs = (size_t)n * (size_t)n_heads * (size_t)(p->n_rot / 2);
    if (pairs)
        rope_kernel<<<cuda_blocks(pairs, 256), 256, 0, cuda_of(b)->stream>>>(x, pos, n_heads,
                                                                             head_dim, k, pairs);
    CUDA_LAUNCHED(b, "rope");
}
