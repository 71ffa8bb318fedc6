/* mamba2_ref.c: the CPU's Mamba-2 recurrence (backend.h's mamba2 op), as ggml's ssm_conv and
 * ssm_scan compute it: each token's x, B, C row convolved with its slot's last rows, plus the
 * bias, through silu; then per head, token by token, the decayed state plus the token's
 * update, read out through C, plus D x. The heads are split across threads. */
#include <math.h>

#include "backend/backend.h"
#include "backend/cpu/causal_conv.h"
#include "backend/cpu/cpu_ops.h"
#include "core/threadpool.h"

/* Head h over every token in order: its slot's state decays and takes the token's x B dt, and
 * y reads it through C (B and C of the head's group), plus D x. */
static void scan_head(const struct mamba2_args *a, int h, int conv_dim) {
    int hd = a->head_dim, ds = a->d_state, g = h / (a->n_head / a->n_group);
    size_t inner = (size_t)a->n_head * (size_t)hd;
    for (int t = 0; t < a->n; t++) {
        const float *row = a->conv_out + (size_t)t * (size_t)conv_dim;
        const float *x = row + (size_t)h * hd, *B = row + inner + (size_t)g * ds;
        const float *C = row + inner + (size_t)a->n_group * ds + (size_t)g * ds;
        float dt = a->dt[(size_t)t * a->dt_stride + (size_t)h] + a->dt_bias[h];
        float soft = dt > 20.0f ? dt : log1pf(expf(dt)); /* ggml_compute_softplus_f32 */
        float decay = expf(soft * a->a[h]);
        float *s = a->ssm_state + (size_t)a->slot[t] * a->ssm_stride + (size_t)h * hd * ds;
        float *y = a->y + (size_t)t * inner + (size_t)h * hd;
        for (int i = 0; i < hd; i++) {
            float x_dt = x[i] * soft, sum = 0.0f;
            for (int j = 0; j < ds; j++) {
                float v = s[(size_t)i * ds + j] * decay + B[j] * x_dt;
                sum += v * C[j];
                s[(size_t)i * ds + j] = v;
            }
            y[i] = sum + x[i] * a->d[h];
        }
    }
}

struct scan_job {
    const struct mamba2_args *a;
    int conv_dim;
};

static void run_heads(void *arg, int ith, int nth) {
    struct scan_job *j = arg;
    for (int h = ith; h < j->a->n_head; h += nth)
        scan_head(j->a, h, j->conv_dim);
}

void cpu_mamba2(struct backend *b, const struct mamba2_args *a) {
    int conv_dim = a->n_head * a->head_dim + 2 * a->n_group * a->d_state;
    for (int t = 0; t < a->n; t++) /* in order: a slot's rows move on token by token */
        causal_conv_step(a->conv_state + (size_t)a->slot[t] * a->conv_stride,
                         a->xbc + (size_t)t * a->xbc_stride, a->conv_w, a->conv_b,
                         a->conv_out + (size_t)t * (size_t)conv_dim, conv_dim, a->d_conv);
    struct scan_job j = {a, conv_dim};
    double work = (double)a->n * a->n_head * a->head_dim * a->d_state * 4.0;
    int parts = threadpool_parts(cpu_of(b)->pool, work, 32768.0);
    threadpool_run_n(cpu_of(b)->pool, run_heads, &j, parts < a->n_head ? parts : a->n_head);
}
