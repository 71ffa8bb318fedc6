/* bench_tokenize.c: tokenize and detokenize throughput (MB/s of text, one thread) for each
 * vocabulary given, on a text file repeated to at least 4 MB. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "oxidize.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static char *load_text(const char *path, size_t min_size, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    size_t n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    size_t reps = n ? (min_size + n - 1) / n : 1;
    char *buf = malloc(n * reps + 1);
    if (!buf || fread(buf, 1, n, f) != n) {
        fclose(f);
        free(buf);
        return NULL;
    }
    fclose(f);
    for (size_t r = 1; r < reps; r++)
        memcpy(buf + r * n, buf, n);
    *len = n * reps;
    return buf;
}

static void bench_vocab(const char *path, const char *text, size_t len) {
    struct ox_vocab *v;
    if (ox_vocab_load(path, &v) != OX_OK) {
        printf("| %-32s | %s |\n", strrchr(path, '/') + 1, ox_last_error());
        return;
    }
    size_t n = 0;
    double t0 = now();
    ox_tokenize(v, text, len, NULL, 0, &n, false, false);
    double t_count = now() - t0;
    ox_token *ids = malloc(n * sizeof *ids);
    ox_tokenize(v, text, len, ids, n, &n, false, false);
    char *out = malloc(len * 2 + 16);
    t0 = now();
    int64_t m = ox_detokenize(v, ids, n, out, len * 2 + 16, false, false);
    double t_detok = now() - t0;
    printf("| %-32s | %-4s | %-14s | %9zu | %6.2f | %8.1f | %8.1f |\n", strrchr(path, '/') + 1,
           ox_vocab_kind(v), ox_vocab_pre(v), n, (double)len / (double)n, len / 1e6 / t_count,
           (double)m / 1e6 / t_detok);
    free(out);
    free(ids);
    ox_vocab_free(v);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_tokenize TEXT VOCAB.gguf...\n");
        return 2;
    }
    size_t len;
    char *text = load_text(argv[1], 4u << 20, &len);
    if (!text) {
        perror(argv[1]);
        return 1;
    }
    printf("%.1f MB of %s\n\n", len / 1e6, argv[1]);
    printf("| vocabulary                       | kind | pre            | tokens    | B/tok  | tok MB/s | detok MB/s |\n");
    printf("|----------------------------------|------|----------------|-----------|--------|----------|------------|\n");
    for (int i = 2; i < argc; i++)
        bench_vocab(argv[i], text, len);
    free(text);
    return 0;
}
