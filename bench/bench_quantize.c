/* bench_quantize.c: per tensor type, bits/weight, round-trip RMSE and single-thread quantize
 * speed over every matrix of a float GGUF model (the shared llama-f32.gguf by default). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "oxidize.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct totals {
    double sq_err, sq_ref, secs;
    uint64_t n, bytes_in, bytes_out;
};

/* Quantize one f32 matrix to type, time it, and add its round-trip error. */
static void run_tensor(enum ox_dtype type, const struct ox_tensor_info *t, const float *ones,
                       void *q, float *back, struct totals *tot) {
    const float *x = t->data;
    int64_t n = t->ne[0] * t->ne[1];
    double t0 = now();
    ox_quantize(type, x, q, t->ne[1], t->ne[0], ox_dtype_needs_imatrix(type) ? ones : NULL);
    tot->secs += now() - t0;
    ox_dequantize(type, q, back, n);
    for (int64_t i = 0; i < n; i++) {
        double d = (double)back[i] - x[i];
        tot->sq_err += d * d;
        tot->sq_ref += (double)x[i] * x[i];
    }
    tot->n += (uint64_t)n;
    tot->bytes_in += (uint64_t)n * 4;
    tot->bytes_out += (uint64_t)(n / ox_dtype_block_size(type)) * ox_dtype_type_size(type);
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "../shared/testdata/models/llama-f32.gguf";
    struct ox_gguf *g;
    if (ox_gguf_open(path, &g) != OX_OK) {
        fprintf(stderr, "bench_quantize: %s\n", ox_last_error());
        return 1;
    }
    int64_t max_n = 0, max_row = 0;
    for (int64_t i = 0; i < ox_gguf_n_tensors(g); i++) {
        struct ox_tensor_info t;
        ox_gguf_tensor(g, i, &t);
        max_n = t.ne[0] * t.ne[1] > max_n ? t.ne[0] * t.ne[1] : max_n;
        max_row = t.ne[0] > max_row ? t.ne[0] : max_row;
    }
    void *q = malloc((size_t)max_n * 4);
    float *back = malloc((size_t)max_n * sizeof(float)), *ones = malloc((size_t)max_row * 4);
    for (int64_t i = 0; i < max_row; i++)
        ones[i] = 1.0f; /* a neutral importance matrix for the types that require one */
    printf("| type    | bits/weight | RMSE       | rel. RMSE | quantize MB/s (1 thread) |\n");
    printf("|---------|-------------|------------|-----------|--------------------------|\n");
    for (int id = 0; id < OX_DTYPE_COUNT; id++) {
        enum ox_dtype type = (enum ox_dtype)id;
        if (!ox_dtype_valid(id) || !ox_dtype_can_quantize(type) || type == OX_DTYPE_F32)
            continue;
        struct totals tot = {0};
        for (int64_t i = 0; i < ox_gguf_n_tensors(g); i++) {
            struct ox_tensor_info t;
            ox_gguf_tensor(g, i, &t);
            if (t.type == OX_DTYPE_F32 && t.n_dims == 2 && t.ne[0] % ox_dtype_block_size(type) == 0)
                run_tensor(type, &t, ones, q, back, &tot);
        }
        printf("| %-7s | %11.4f | %.4e | %9.5f | %24.1f |\n", ox_dtype_name(type),
               8.0 * (double)tot.bytes_out / (double)tot.n, sqrt(tot.sq_err / (double)tot.n),
               sqrt(tot.sq_err / tot.sq_ref), (double)tot.bytes_in / 1e6 / tot.secs);
    }
    free(q), free(back), free(ones);
    ox_gguf_free(g);
    return 0;
}
