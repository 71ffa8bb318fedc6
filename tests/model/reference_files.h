/* reference_files.h: the llama.cpp reference files (reference/<model>.json, the shared set's
 * and the repository's own), each handed to a check with its model's name, and small helpers
 * for those checks. */
#ifndef OX_TEST_REFERENCE_FILES_H
#define OX_TEST_REFERENCE_FILES_H

#include <dirent.h>
#include <math.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

#include "test.h"

/* n floats from a reference's binary file (logits, embeddings); NULL when it is missing or
 * short. */
static inline float *read_f32(const char *path, size_t n) {
    FILE *f = fopen(path, "rb");
    float *buf = f ? malloc(n * sizeof *buf) : NULL;
    if (buf && fread(buf, sizeof *buf, n, f) != n) {
        free(buf);
        buf = NULL;
    }
    if (f)
        fclose(f);
    return buf;
}

/* The index of the largest of x[0..n) (the first of equals). */
static inline int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

/* KL(softmax(ref) || softmax(got)) in double: the measure of DESIGN.md section 4. */
static inline double kl(const float *ref, const float *got, int n) {
    double mr = ref[argmax(ref, n)], mg = got[argmax(got, n)], zr = 0, zg = 0, s = 0;
    for (int i = 0; i < n; i++)
        zr += exp(ref[i] - mr), zg += exp(got[i] - mg);
    for (int i = 0; i < n; i++) {
        double pr = exp(ref[i] - mr) / zr;
        if (pr > 0)
            s += pr * ((ref[i] - mr - log(zr)) - (got[i] - mg - log(zg)));
    }
    return s;
}

/* Whether $OX_TEST_MODELS lists the model (names separated by commas or white space; unset or
 * empty: every model): runs under an emulator (tests/model/neon_models_qemu.sh) check a few. */
static inline bool reference_wanted(const char *name) {
    const char *p = getenv("OX_TEST_MODELS");
    if (!p || !*p)
        return true;
    while (*p) {
        p += strspn(p, " ,\t\n");
        size_t len = strcspn(p, " ,\t\n");
        if (len && len == strlen(name) && !strncmp(p, name, len))
            return true;
        p += len;
    }
    return false;
}

/* The repository's own references (tools/archref/make_refs.sh: architectures the shared set
 * lacks), in the shared set's layout. */
#define ARCH_REFERENCE_DIR OX_SOURCE_DIR "/tests/data/arch"

/* FNV-1a 64 of a file's bytes (0 when it cannot be read). */
static inline uint64_t file_fnv1a(const char *path) {
    FILE *f = fopen(path, "rb");
    uint64_t h = 0xcbf29ce484222325ull;
    int c;
    while (f && (c = getc(f)) != EOF)
        h = (h ^ (uint64_t)c) * 0x100000001b3ull;
    if (f)
        fclose(f);
    return f ? h : 0;
}

/* The model file of reference name under root into path. A quantized file the repository does
 * not keep (reference/<name>.quantize: "<source> <ftype> <fnv1a>", make_refs.sh) is made here
 * by ox_model_quantize from its f16 source into the temporary folder (reference_model_release
 * removes it), and must be byte for byte llama-quantize's file: the same FNV-1a 64 hash. False
 * when it cannot be made or differs (a failed check says why). */
static inline bool reference_model_path(const char *root, const char *name, char *path,
                                        size_t cap) {
    char recipe[1024], src[512], line[512] = "";
    unsigned ftype = 0;
    unsigned long long want = 0;
    snprintf(path, cap, "%s/models/%s.gguf", root, name);
    snprintf(recipe, sizeof recipe, "%s/reference/%s.quantize", root, name);
    FILE *f = fopen(recipe, "r");
    if (!f)
        return true; /* a file of the set itself */
    bool read = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    CHECK_MSG(read && sscanf(line, "%511s %u %llx", src, &ftype, &want) == 3, "%s: bad recipe",
              recipe);
    const char *tmp = getenv("TMPDIR");
    snprintf(path, cap, "%s/ox_ref_%d_%s.gguf", tmp && *tmp ? tmp : "/tmp", (int)getpid(), name);
    char in[1024];
    snprintf(in, sizeof in, "%s/models/%s", root, src);
    struct ox_quantize_params p = ox_quantize_params_default();
    p.ftype = (enum ox_ftype)ftype;
    p.n_threads = 2;
    enum ox_status st = ox_model_quantize(in, path, &p, NULL);
    CHECK_MSG(st == OX_OK, "%s: quantizing %s: %s", name, in, ox_last_error());
    uint64_t got = file_fnv1a(path);
    CHECK_MSG(got == (uint64_t)want,
              "%s: ox_model_quantize's file (fnv1a %016llx) is not "
              "llama-quantize's (%016llx)",
              name, (unsigned long long)got, want);
    return st == OX_OK && got == (uint64_t)want;
}

/* The temporary file reference_model_path made, removed once its checks are done. */
static inline void reference_model_release(const char *path) {
    if (strstr(path, "/ox_ref_"))
        unlink(path);
}

/* Calls check(root, name, ref) for every <root>/<sub>/<name>.json that reference_wanted;
 * returns how many were read. */
static inline int for_each_reference_in(const char *root, const char *sub,
                                        void (*check)(const char *root, const char *name,
                                                      json_t *ref)) {
    int n_models = 0;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", root, sub);
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json"))
            continue;
        char path[2048], name[256];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        snprintf(name, sizeof name, "%.*s", (int)(len - 5), e->d_name);
        if (!reference_wanted(name))
            continue;
        json_error_t err;
        json_t *ref = json_load_file(path, 0, &err);
        CHECK_MSG(ref != NULL, "%s: %s", path, err.text);
        if (ref)
            check(root, name, ref), n_models++;
        json_decref(ref);
    }
    if (d)
        closedir(d);
    return n_models;
}

/* The same for every <root>/reference/<name>.json, root being the shared test data and then the
 * repository's own (its encoders' references, in reference/embedding/, are test_encoder.c's). */
static inline int for_each_reference(void (*check)(const char *root, const char *name,
                                                   json_t *ref)) {
    return for_each_reference_in(test_data_dir(), "reference", check) +
           for_each_reference_in(ARCH_REFERENCE_DIR, "reference", check);
}

#endif
