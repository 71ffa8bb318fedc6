/* cuda_moe.cu: a MoE FFN on the device: the router's top experts chosen by a kernel, the
 * experts' matmuls reading that choice (cuda_gemv_q8.cu), their outputs summed by weight. The
 * host never sees the choice, so a decode step stays one graph. */
#include "backend/cuda/cuda_ops.cuh"

/* Token t's k most likely experts in order (ties to the lower index, as the host's choice) and
 * their probabilities over the sum of the k, the sum taken in double as ggml's. Any
 * probabilities, NaN too, give k distinct experts in range. */
__global__ static void moe_route_kernel(const float *__restrict__ probs, int n, int n_expert, int k,
                                        int32_t *__restrict__ ids, float *__restrict__ weights) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n)
        return;
    const float *p = probs + (size_t)t * n_expert;
    int32_t *id = ids + (size_t)t * k;
    double sum = 0.0;
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < n_expert; e++) {
            bool taken = false;
            for (int q = 0; q < j; q++)
                taken |= id[q] == e;
            if (!taken && (best < 0 || p[e] > p[best]))
                best = e;
        }
        id[j] = best;
        sum += p[best];
    }
    for (int j = 0; j < k; j++)
        weights[(size_t)t * k + j] = p[id[j]] / (float)sum;
}

/* y[t] = sum over j of weights[t][j] * out_k[t * k + j], j in order from zero. */
__global__ static void moe_combine_kernel(const float *__restrict__ out_k,
                                          const float *__restrict__ weights, int k, int dim,
                                          float *__restrict__ y, size_t n_values) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_values)
        return;
    const size_t t = i / dim, c = i % dim;
    float acc = 0.f;
    for (int j = 0; j < k; j++)
        acc += weights[t * k + j] * out_k[(t * k + j) * dim + c];
    y[i] = acc;
}

bool cuda_moe_ffn(struct backend *b, const struct moe_args *a) {
    const int pairs = a->n * a->k;
    /* both expert matmuls must take these shapes before anything runs: past the choice there is
     * no going back to the host's path */
    const struct mat *g = a->gate, *u = a->up;
    if (a->k < 1 || a->k > a->n_expert || g->type != u->type || g->n_rows != u->n_rows ||
        g->n_cols != u->n_cols || g->row_bytes != u->row_bytes || a->down->n_cols != g->n_rows ||
        !cuda_q8_takes_experts(b, g, pairs) || !cuda_q8_takes_experts(b, a->down, pairs) ||
        !cuda_q8_fits(b, a->n, g->n_cols))
        return false;
    cudaStream_t st = cuda_of(b)->stream;
    moe_route_kernel<<<cuda_blocks((size_t)a->n, 64), 64, 0, st>>>(a->probs, a->n, a->n_expert,
                                                                   a->k, a->ids, a->weights);
    CUDA_LAUNCHED(b, "moe routing");
    if (!cuda_experts_glu(b, a->kind, a->gate, a->up, a->x, a->n, a->ids, a->k, a->hidden) ||
        !cuda_experts(b, a->down, a->hidden, a->ids, pairs, a->out_k))
        cuda_note(b, cudaErrorInvalidValue, "moe experts declined"); /* not reached */
    const size_t values = (size_t)a->n * (size_t)a->down->n_rows;
    moe_combine_kernel<<<cuda_blocks(values, 256), 256, 0, st>>>(
        a->out_k, a->weights, a->k, (int)a->down->n_rows, a->y, values);
    CUDA_LAUNCHED(b, "moe combine");
    cuda_of(b)->xq_src = nullptr; /* y may have been a q8_1 copy's source */
    return true;
}
