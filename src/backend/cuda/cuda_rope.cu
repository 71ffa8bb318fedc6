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

/* The rotation of pair i (i0 of ggml: the even dim index) for position pos, scaled. */
__device__ static float2 rope_cos_sin(int i, int32_t pos, const rope_k &p) {
    float ff = p.freq_factors ? p.freq_factors[i / 2] : 1.0f;
    float theta_base = (float)pos * powf(p.theta_scale, (float)(i / 2));
    float extrap = theta_base / ff, interp = p.freq_scale * extrap, theta = interp;
    float mscale = p.attn_factor;
    if (p.ext_factor != 0.0f) {
        float mix = yarn_ramp(p.corr0, p.corr1, i) * p.ext_factor;
        theta = interp * (1 - mix) + extrap * mix;
        mscale *= 1.0f + 0.1f * logf(1.0f / p.freq_scale);
    }
    return make_float2(cosf(theta) * mscale, sinf(theta) * mscale);
}

/* Rotate pair i of the head at xh by cs (rope_cos_sin). */
__device__ static void rope_rotate(float *xh, int i, float2 cs, const rope_k &p) {
    int a = p.neox ? i / 2 : i, bidx = p.neox ? i / 2 + p.n_rot / 2 : i + 1;
    float x0 = xh[a], x1 = xh[bidx];
    xh[a] = x0 * cs.x - x1 * cs.y;
    xh[bidx] = x0 * cs.y + x1 * cs.x;
}

__device__ static void rope_pair(float *xh, int i, int32_t pos, const rope_k &p) {
    rope_rotate(xh, i, rope_cos_sin(i, pos, p), p);
}

__global__ static void rope_kernel(float *x, const int32_t *pos, int n_heads, int head_dim,
                                   rope_k p, size_t n_pairs) {
    size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    int half = p.n_rot / 2;
    if (j >= n_pairs)
        return;
    size_t th = j / (size_t)half; /* token * n_heads + head */
    rope_pair(x + th * (size_t)head_dim, (int)(j % (size_t)half) * 2, pos[th / (size_t)n_heads], p);
}

static rope_k rope_settings(const struct rope_params *p) {
    return {p->n_rot,        p->neox,
            p->freq_scale,   p->ext_factor,
            p->attn_factor,  p->corr_dims[0],
            p->corr_dims[1], powf(p->freq_base, -2.0f / (float)p->n_rot),
            p->freq_factors};
}

void cuda_rope(struct backend *b, float *x, const int32_t *pos, int n, int n_heads, int head_dim,
               const struct rope_params *p) {
    size_t pairs = (size_t)n * (size_t)n_heads * (size_t)(p->n_rot / 2);
    if (pairs)
        rope_kernel<<<cuda_blocks(pairs, 256), 256, 0, cuda_of(b)->stream>>>(
            x, pos, n_heads, head_dim, rope_settings(p), pairs);
    CUDA_LAUNCHED(b, "rope");
}

/* One block per head of a token: blocks [0, n_head) rotate a q head, the next n_head_kv a k
 * head, which they also store, the last n_head_kv store a v head. The head goes through shared
 * memory, so the rotation and the q8_0 blocks see all of it; the arithmetic is rope_kernel's
 * and store_kernel's, so the results are the same bits. The arguments come by value; their
 * rope pointer (host memory) is not read here, p holds those settings. */
__global__ static void rope_store_kernel(rope_store_args a, rope_k p) {
    extern __shared__ float head[];
    cuda_let_next_start();
    const int t = blockIdx.y, h = blockIdx.x;
    const int kind = h < a.n_head ? 0 : h < a.n_head + a.n_head_kv ? 1 : 2; /* q, k, v */
    /* the rotations depend on the position alone (uploaded before the step's kernels): worked
     * out while the previous kernel finishes (H200 tg128, 8B F16 251.5 -> 254.6 t/s) */
    constexpr int PAIRS = 4; /* per thread: n_rot <= hd (cuda_rope_store's threads) */
    float2 cs[PAIRS];
#pragma unroll
    for (int r = 0; r < PAIRS; r++) {
        const int j = threadIdx.x + r * blockDim.x;
        if (kind < 2 && j < p.n_rot / 2)
            cs[r] = rope_cos_sin(2 * j, a.pos[t], p);
    }
    cuda_wait_previous();
    const int hh = kind == 0 ? h : kind == 1 ? h - a.n_head : h - a.n_head - a.n_head_kv;
    const int hd = kind == 2 ? a.hd_v : a.hd_k, heads = kind == 0 ? a.n_head : a.n_head_kv;
    float *x = (kind == 0 ? a.q : kind == 1 ? a.k : (float *)a.v) + ((size_t)t * heads + hh) * hd;
    for (int i = threadIdx.x; i < hd; i += blockDim.x)
        head[i] = x[i];
    __syncthreads();
    if (kind < 2) {
#pragma unroll
        for (int r = 0; r < PAIRS; r++) {
            const int j = threadIdx.x + r * blockDim.x;
            if (j < p.n_rot / 2)
                rope_rotate(head, 2 * j, cs[r], p);
        }
        __syncthreads();
        for (int i = threadIdx.x; i < hd; i += blockDim.x)
            x[i] = head[i];
    }
    if (kind == 0)
        return;
    uint8_t *row =
        (kind == 1 ? a.k_cache + a.cells[t] * a.k_row : a.v_cache + a.cells[t] * a.v_row);
    const int per_row = a.cache_type == OX_DTYPE_Q8_0 ? hd / 32 : hd;
    /* the head's slice of the row: hd values from element hh * hd (a block boundary for q8_0) */
    uint8_t *slice = row + (size_t)hh * hd / (a.cache_type == OX_DTYPE_Q8_0 ? 32 : 1) *
                               (a.cache_type == OX_DTYPE_Q8_0  ? sizeof(kv_q8_0)
                                : a.cache_type == OX_DTYPE_F16 ? 2
                                                               : 4);
    for (int i = threadIdx.x; i < per_row; i += blockDim.x)
        kv_put(a.cache_type, slice, head, i);
}

/* Any batch: one launch where the separate kernels take four (a step of 32 sequences of the
 * 8B spent 6 us a layer more on them). A block has a thread per dimension of the wider head,
 * up to 128, so heads of 64 leave no lane idle. */
bool cuda_rope_store(struct backend *b, const struct rope_store_args *a) {
    const bool q8 = a->cache_type == OX_DTYPE_Q8_0;
    if (a->n <= 0 || a->n > 65535 || (q8 && (a->hd_k % 32 || a->hd_v % 32)) ||
        a->hd_k > 1024 || a->hd_v > 1024 || a->rope->n_rot > a->hd_k)
        return false;
    cuda_forget_xq(cuda_of(b)); /* q and k change (cuda_gemv_q8.cu) */
    const int hd = a->hd_k > a->hd_v ? a->hd_k : a->hd_v;
    /* PAIRS (4) rotations a thread cover n_rot / 2 <= hd / 2 pairs */
    const unsigned threads = hd >= 128 ? 128 : (unsigned)(hd + 31) / 32 * 32;
    dim3 grid((unsigned)(a->n_head + 2 * a->n_head_kv), (unsigned)a->n);
    cuda_note(b,
              cuda_launch_early(cuda_of(b)->pdl, rope_store_kernel, grid, dim3(threads),
                                (size_t)hd * sizeof(float), cuda_of(b)->stream, *a,
                                rope_settings(a->rope)),
              "rope_store");
    return true;
}
