/* bench_dequant.c: reference dequantization throughput for every tensor type in a GGUF file. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "oxidize.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Dequantize every tensor of the file `reps` times; report elements/s and bytes read/s. */
static int bench_file(const char *path, int reps) {
    double t0 = now();
    struct ox_gguf *g;
    if (ox_gguf_open(path, &g) != OX_OK) {
        fprintf(stderr, "bench_dequant: %s\n", ox_last_error());
        return 1;
    }
    double t_open = now() - t0;
    int64_t max_n = 0, total_n = 0;
    uint64_t total_bytes = 0;
    for (int64_t i = 0; i < ox_gguf_n_tensors(g); i++) {
        struct ox_tensor_info t;
        ox_gguf_tensor(g, i, &t);
        int64_t n = t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3];
        max_n = n > max_n ? n : max_n;
    }
    float *out = malloc((size_t)max_n * sizeof(float));
    t0 = now();
    for (int r = 0; r < reps; r++) {
        for (int64_t i = 0; i < ox_gguf_n_tensors(g); i++) {
            struct ox_tensor_info t;
            ox_gguf_tensor(g, i, &t);
            int64_t n = t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3];
            ox_dequantize(t.type, t.data, out, n);
            total_n += n;
            total_bytes += t.n_bytes;
        }
    }
    double dt = now() - t0;
    const char *name = path;
    for (const char *p = path; *p; p++)
        if (*p == '/')
            name = p + 1;
    printf("| %-24s | %8.3f | %10.1f | %10.1f |\n", name, t_open * 1e3, total_n / dt / 1e6,
           total_bytes / dt / 1e6);
    free(out);
    ox_gguf_free(g);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_dequant MODEL.gguf...\n");
        return 2;
    }
    printf("| file                     | open ms  | Melem/s    | MB read/s  |\n");
    printf("|--------------------------|----------|------------|------------|\n");
    int rc = 0;
    for (int i = 1; i < argc; i++)
        rc |= bench_file(argv[i], 20);
    return rc;
}
