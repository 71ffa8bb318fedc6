/* test.h: the tiny assertion kit every test executable uses. */
#ifndef OX_TEST_H
#define OX_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_failures;
static int test_checks;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        test_checks++;                                                                             \
        if (!(cond)) {                                                                             \
            test_failures++;                                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
        }                                                                                          \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                       \
    do {                                                                                           \
        test_checks++;                                                                             \
        if (!(cond)) {                                                                             \
            test_failures++;                                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

#define CHECK_EQ(a, b)  CHECK_MSG((a) == (b), "%lld != %lld", (long long)(a), (long long)(b))
#define CHECK_STR(a, b) CHECK_MSG(strcmp((a), (b)) == 0, "'%s' != '%s'", (a), (b))
#define CHECK_NEAR(a, b, tol)                                                                      \
    CHECK_MSG(fabs((double)(a) - (double)(b)) <= (tol), "%g vs %g (tol %g)", (double)(a),          \
              (double)(b), (double)(tol))

/* The reference data folder: $OX_TESTDATA, else ../shared/testdata beside the repository. */
static inline const char *test_data_dir(void) {
    const char *env = getenv("OX_TESTDATA");
    return env && *env ? env : OX_SOURCE_DIR "/../shared/testdata";
}

#ifdef OXIDIZE_H
/* Model parameters for tests that run models: the defaults, with n_gpu_layers from
 * $OX_TEST_GPU_LAYERS when set (bench/gpu.sh runs the model tests again with only the last
 * layer on the GPU, so both halves of a split model and the hand-over between them are
 * checked against the same references). */
static inline struct ox_model_params test_model_params(void) {
    struct ox_model_params p = ox_model_params_default();
    const char *env = getenv("OX_TEST_GPU_LAYERS");
    if (env && *env)
        p.n_gpu_layers = atoi(env);
    return p;
}
#endif

/* A whole file into a NUL-terminated heap buffer (*len: its bytes; len may be NULL), or NULL. */
static inline char *test_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? (char *)malloc((size_t)n + 1) : NULL; /* C++ too (the .cu tests) */
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = 0;
        if (len)
            *len = (size_t)n;
    }
    return buf;
}

/* Print the summary line and turn the result into the exit status. */
static inline int test_finish(const char *name) {
    printf("%s: %d checks, %d passed, %d failed\n", name, test_checks, test_checks - test_failures,
           test_failures);
    return test_failures ? 1 : 0;
}

#endif
