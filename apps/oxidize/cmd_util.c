/* cmd_util.c: small helpers the subcommands share: whole-file reads, number options, a
 * monotonic clock, and a context sized for the model. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"

bool cmd_parse_number(const char *s, double lo, double hi, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (*s == 0 || *end != 0 || !(v >= lo && v <= hi))
        return false;
    *out = v;
    return true;
}

char *cmd_read_file(const char *cmd, const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "oxidize %s: cannot open %s: %s\n", cmd, path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t n = 0, cap = 0, got;
    do {
        if (cap - n < 65536) { /* grow by doubling: pipes and /proc files have no size */
            char *bigger = realloc(buf, (cap = cap * 2 + 65536) + 1);
            if (!bigger) {
                free(buf);
                fclose(f);
                fprintf(stderr, "oxidize %s: out of memory reading %s\n", cmd, path);
                return NULL;
            }
            buf = bigger;
        }
        n += got = fread(buf + n, 1, cap - n, f);
    } while (got > 0);
    fclose(f);
    buf[n] = 0;
    *len = n;
    return buf;
}

double cmd_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

enum ox_status cmd_context_create(struct ox_model *m, int n_ctx, int n_threads,
                                  struct ox_context **out) {
    struct ox_context_params cp = ox_context_params_default();
    int train = ox_model_n_ctx_train(m);
    cp.n_ctx = (uint32_t)(n_ctx < train ? n_ctx : train);
    cp.n_batch = cp.n_ctx < 512 ? cp.n_ctx : 512;
    cp.n_threads = n_threads;
    return ox_context_create(m, &cp, out);
}
