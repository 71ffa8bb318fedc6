/* delta_net_ref.c: the CPU's gated delta-net recurrence (backend.h's delta_net op): the causal
 * convolution of each token's q, k, v row with its slot's last rows, then the delta rule per
 * value head, the heads split across threads. */
#include <math.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/causal_conv.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/ggml_numerics.h"
#include "core/threadpool.h"

/* x / max(|x|, eps) over n values (ggml_l2_norm: the sum of squares in double). */
static void l2_normalize(float *x, int n, float eps) {
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += (double)x[i] * (double)x[i];
    float scale = 1.0f / fmaxf(sqrtf((float)sum), eps);
    for (int i = 0; i < n; i++)
        x[i] *= scale;
}

static float dot(const float *x, const float *y, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++)
        s += x[i] * y[i];
    return s;
}

/* Value head h over every token in order: decay, delta update and read-out of its slot's
 * state (row j of m is column j of S). */
static void recur_head(const struct delta_net_args *a, int h, int conv_dim, float *delta) {
    int d = a->d_state, kh = h % a->n_k_heads;
    size_t key_dim = (size_t)a->n_k_heads * (size_t)d, hs = (size_t)d * (size_t)d;
    float scale = 1.0f / sqrtf((float)d);
    for (int t = 0; t < a->n; t++) {
        const float *row = a->conv_out + (size_t)t * (size_t)conv_dim;
        const float *q = row + (size_t)kh * d, *k = row + key_dim + (size_t)kh * d;
        const float *v = row + 2 * key_dim + (size_t)h * d;
        float *m = a->ssm_state + (size_t)a->slot[t] * a->ssm_stride + (size_t)h * hs;
        float x = a->alpha[(size_t)t * a->n_v_heads + h] + a->dt_bias[h];
        float softplus = x > 20.0f ? x : logf(1.0f + expf(x));
        float decay = expf(softplus * a->a[h]);
        float beta = 1.0f / (1.0f + expf(-a->beta[(size_t)t * a->n_v_heads + h]));
        for (size_t i = 0; i < hs; i++)
            m[i] *= decay;
        for (int j = 0; j < d; j++)
            delta[j] = (v[j] - dot(m + (size_t)j * d, k, d)) * beta;
        for (int j = 0; j < d; j++)
            for (int i = 0; i < d; i++)
                m[(size_t)j * d + i] += k[i] * delta[j];
        float *y = a->y + ((size_t)t * a->n_v_heads + (size_t)h) * (size_t)d;
        for (int j = 0; j < d; j++)
            y[j] = dot(m + (size_t)j * d, q, d) * scale;
    }
}

struct heads_job {
    const struct delta_net_args *a;
    int conv_dim;
    float *scratch;
    size_t per_thread;
};

static void run_heads(void *arg, int ith, int nth) {
    struct heads_job *j = arg;
    for (int h = ith; h < j->a->n_v_heads; h += nth)
        recur_head(j->a, h, j->conv_dim, j->scratch + (size_t)ith * j->per_thread);
}

void cpu_delta_net(struct backend *b, const struct delta_net_args *a) {
    int d = a->d_state, conv_dim = (2 * a->n_k_heads + a->n_v_heads) * d;
    for (int t = 0; t < a->n; t++) { /* in order: a slot's rows move on token by token */
        causal_conv_step(a->conv_state + (size_t)a->slot[t] * a->conv_stride,
                         a->qkv + (size_t)t * (size_t)conv_dim, a->conv_w, NULL,
                         a->conv_out + (size_t)t * (size_t)conv_dim, conv_dim, a->d_conv);
        float *row = a->conv_out + (size_t)t * (size_t)conv_dim;
        for (int h = 0; h < 2 * a->n_k_heads; h++) /* q's heads, then k's */
            l2_normalize(row + (size_t)h * d, d, a->eps);
    }
    struct heads_job j = {a, conv_dim, cpu_of(b)->scratch, cpu_of(b)->scratch_per_thread};
    double work = (double)a->n * a->n_v_heads * d * d * 4.0;
    int parts = threadpool_parts(cpu_of(b)->pool, work, 32768.0);
    threadpool_run_n(cpu_of(b)->pool, run_heads, &j, parts < a->n_v_heads ? parts : a->n_v_heads);
}
