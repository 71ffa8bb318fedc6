/* cuda_moe.cu: a MoE FFN on the device: the router's top experts chosen by a kernel; for decode
 * steps the experts' matmuls read that choice on the device (cuda_gemv_q8.cu) and the host never
 * sees it, so the step stays one graph; for prompts the host groups the tokens by expert and
 * each expert multiplies its tokens at once. */
#include <stdlib.h>

#include "backend/cuda/cuda_ops.cuh"
extern "C" {
#include "backend/cuda/cuda_backend.h" /* the table's download and upload */
}

/* Token t's k most likely experts in order (ties to the lower index, as the host's choice) and
 * their probabilities (raw), or those over the sum of the k, the sum taken in double as ggml's. Any
 * probabilities, NaN too, give k distinct experts in range. */
__global__ static void moe_route_kernel(const float *__restrict__ probs, int n, int n_expert, int k,
                                        bool raw, int32_t *__restrict__ ids,
                                        float *__restrict__ weights) {
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
        weights[(size_t)t * k + j] = raw ? p[id[j]] : p[id[j]] / (float)sum;
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

/* y[ids[j]] += weights[j] * rows[j] for j < n (the tokens of one expert: each row of y once). */
__global__ static void moe_scatter_add_kernel(const float *__restrict__ rows,
                                              const int32_t *__restrict__ ids,
                                              const float *__restrict__ weights, int dim,
                                              float *__restrict__ y, size_t n_values) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_values)
        return;
    const size_t j = i / dim, c = i % dim;
    y[(size_t)ids[j] * dim + c] += weights[j] * rows[i];
}

/* Expert e's matrix of a MoE tensor. */
static struct mat expert(const struct mat *w, int e) {
    struct mat m = *w;
    m.data = (const uint8_t *)w->data + (size_t)e * (size_t)w->n_rows * w->row_bytes;
    return m;
}

/* Decode steps: every token-expert pair at once through the integer GEMV, which reads the
 * choice on the device; the pairs' outputs are then summed in each token's order. */
static void moe_pairs(struct backend *b, const struct moe_args *a) {
    const int pairs = a->n * a->k;
    if (!cuda_experts_glu(b, a->kind, a->gate, a->up, a->x, a->n, a->ids, a->k, a->glu) ||
        !cuda_experts(b, a->down, a->glu, a->ids, pairs, a->out))
        cuda_note(b, cudaErrorInvalidValue, "moe experts declined"); /* checked before */
    const size_t values = (size_t)a->n * (size_t)a->down->n_rows;
    moe_combine_kernel<<<cuda_blocks(values, 256), 256, 0, cuda_of(b)->stream>>>(
        a->out, a->weights, a->k, (int)a->down->n_rows, a->y, values);
    CUDA_LAUNCHED(b, "moe combine");
}

/* Prompts: the choice comes to the host (one wait per layer), which groups the tokens by
 * expert; each expert that has tokens then multiplies all of their rows at once (cuBLAS from 9
 * rows), and adds its weighted outputs into y, the experts in order. */
static void moe_grouped(struct backend *b, const struct moe_args *a) {
    cuda_state *s = cuda_of(b);
    const int n = a->n, k = a->k, pairs = n * k, d_in = (int)a->gate->n_cols;
    const int d_out = (int)a->down->n_rows, ff = (int)a->gate->n_rows;
    int32_t *ids = (int32_t *)malloc((size_t)pairs * sizeof *ids);
    float *w = (float *)malloc((size_t)pairs * sizeof *w);
    int32_t *order = (int32_t *)malloc((size_t)pairs * sizeof *order);
    float *order_w = (float *)malloc((size_t)pairs * sizeof *order_w);
    int *start = (int *)calloc((size_t)a->n_expert + 1, sizeof *start);
    bool got = false;
    if (!ids || !w || !order || !order_w || !start)
        cuda_note(b, cudaErrorMemoryAllocation, "moe: host memory");
    else if (backend_cuda_ops.download(b, ids, a->ids, (size_t)pairs * sizeof *ids) != OX_OK ||
             backend_cuda_ops.download(b, w, a->weights, (size_t)pairs * sizeof *w) != OX_OK)
        cuda_note_again(b, ox_last_error()); /* for the batch's last download to report */
    else
        got = true;
    if (!got) {
        cuda_zero(b, a->y, (size_t)n * (size_t)d_out); /* no stale output either way */
    } else {
        for (int p = 0; p < pairs; p++) /* counting sort by expert, tokens in order */
            start[ids[p] + 1]++;
        for (int e = 0; e < a->n_expert; e++)
            start[e + 1] += start[e];
        for (int p = 0, *next = start; p < pairs; p++) {
            const int at = next[ids[p]]++;
            order[at] = p / k, order_w[at] = w[p];
        }
        for (int e = a->n_expert; e > 0; e--) /* next[] moved the starts on: back by one */
            start[e] = start[e - 1];
        start[0] = 0;
        backend_cuda_ops.upload(b, a->ids, order, (size_t)pairs * sizeof *order);
        backend_cuda_ops.upload(b, a->weights, order_w, (size_t)pairs * sizeof *order_w);
        cuda_zero(b, a->y, (size_t)n * (size_t)d_out);
        const size_t x_row = (size_t)d_in * sizeof(float);
        const struct mat xs = {OX_DTYPE_F32, a->x, n, d_in, x_row, nullptr, nullptr};
        for (int e = 0; e < a->n_expert; e++) {
            const int c = start[e + 1] - start[e];
            if (c == 0)
                continue;
            const struct mat g = expert(a->gate, e), u = expert(a->up, e), dn = expert(a->down, e);
            cuda_get_rows(b, &xs, a->ids + start[e], a->rows, c); /* the expert's tokens */
            cuda_forget_xq(s); /* rows changed behind the q8_1 bookkeeping */
            cuda_matmul(b, &g, a->rows, a->gate_out, c);
            cuda_matmul(b, &u, a->rows, a->up_out, c);
            cuda_glu(b, a->kind, a->gate_out, a->up_out, a->glu, (size_t)c * (size_t)ff);
            cuda_forget_xq(s);
            cuda_matmul(b, &dn, a->glu, a->out, c);
            const size_t values = (size_t)c * (size_t)d_out;
            moe_scatter_add_kernel<<<cuda_blocks(values, 256), 256, 0, s->stream>>>(
                a->out, a->ids + start[e], a->weights + start[e], d_out, a->y, values);
            CUDA_LAUNCHED(b, "moe scatter");
        }
    }
    free(ids), free(w), free(order), free(order_w), free(start);
}

/* Whether moe_pairs takes n of the tokens: both expert matmuls take their pairs' shapes, which
 * must hold before anything runs. */
static bool pairs_take(struct backend *b, const struct moe_args *a, int n) {
    const int pairs = n * a->k;
    return pairs <= a->n_batch && cuda_q8_takes_experts(b, a->gate, pairs) &&
           cuda_q8_takes_experts(b, a->down, pairs) && cuda_q8_fits(b, n, a->gate->n_cols);
}

/* moe_pairs a token at a time, the pairs' buffers reused: in one-token order (cuda_one_token) a
 * batch the pairs path does not take keeps a lone token's sums. */
static void moe_pairs_apart(struct backend *b, const struct moe_args *a) {
    for (int t = 0; t < a->n; t++) {
        struct moe_args one = *a;
        one.n = 1;
        one.x += (size_t)t * (size_t)a->gate->n_cols;
        one.y += (size_t)t * (size_t)a->down->n_rows;
        one.ids += (size_t)t * (size_t)a->k;
        one.weights += (size_t)t * (size_t)a->k;
        moe_pairs(b, &one);
    }
}

bool cuda_moe_ffn(struct backend *b, struct moe_args *a) {
    const struct mat *g = a->gate, *u = a->up;
    if (a->k < 1 || a->k > a->n_expert || a->n < 1 || a->n > a->n_batch || g->type != u->type ||
        g->n_rows != u->n_rows || g->n_cols != u->n_cols || g->row_bytes != u->row_bytes ||
        a->down->n_cols != g->n_rows)
        return false;
    moe_route_kernel<<<cuda_blocks((size_t)a->n, 64), 64, 0, cuda_of(b)->stream>>>(
        a->probs, a->n, a->n_expert, a->k, a->raw_weights, a->ids, a->weights);
    CUDA_LAUNCHED(b, "moe routing");
    if (pairs_take(b, a, a->n)) {
        moe_pairs(b, a);
    } else if (cuda_one_token(b, a->n) && pairs_take(b, a, 1)) {
        moe_pairs_apart(b, a);
    } else {
        moe_grouped(b, a);
        a->waited = true;
    }
    cuda_forget_xq(cuda_of(b)); /* y may have been a q8_1 copy's source */
    return true;
}
