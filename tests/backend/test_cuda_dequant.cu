/* test_cuda_dequant.cu: the CUDA dequantizers' host side (the same code the kernels run) against
 * the CPU reference ox_dequantize, bit for bit, on every tensor of the shared models and on random
 * blocks. Needs no GPU. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "backend/cuda/cuda_dequant.cuh"
#include "oxidize.h"

#ifndef OX_SOURCE_DIR
#define OX_SOURCE_DIR "."
#endif
#include "../test.h"

/* The offsets in a block of the fp16 scale fields, which random bytes must keep finite: the GPU
 * gives canonical NaNs where the CPU propagates payloads and signs, so NaN scales are outside
 * the bit-identity promise. */
struct rand_layout {
    enum ox_dtype type;
    int scale_offsets[2]; /* -1: none */
};

static const rand_layout layouts[] = {
    {OX_DTYPE_F32, {-1, -1}},   {OX_DTYPE_F16, {-1, -1}},   {OX_DTYPE_BF16, {-1, -1}},
    {OX_DTYPE_Q4_0, {0, -1}},   {OX_DTYPE_Q4_1, {0, 2}},    {OX_DTYPE_Q5_0, {0, -1}},
    {OX_DTYPE_Q5_1, {0, 2}},    {OX_DTYPE_Q8_0, {0, -1}},   {OX_DTYPE_Q1_0, {0, -1}},
    {OX_DTYPE_Q2_0, {0, -1}},   {OX_DTYPE_Q2_K, {80, 82}},  {OX_DTYPE_Q3_K, {108, -1}},
    {OX_DTYPE_Q4_K, {0, 2}},    {OX_DTYPE_Q5_K, {0, 2}},    {OX_DTYPE_Q6_K, {208, -1}},
    {OX_DTYPE_IQ4_NL, {0, -1}}, {OX_DTYPE_IQ4_XS, {0, -1}}, {OX_DTYPE_IQ3_S, {0, -1}},
    {OX_DTYPE_MXFP4, {-1, -1}}, {OX_DTYPE_TQ1_0, {52, -1}}, {OX_DTYPE_TQ2_0, {64, -1}},
};

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

/* Dequantize n elements both ways and compare the bits; names the first differing element. */
static void compare(enum ox_dtype type, const void *data, int64_t n, const char *what) {
    std::vector<float> ref((size_t)n), got((size_t)n);
    CHECK_MSG(ox_dequantize(type, data, ref.data(), n) == OX_OK, "%s: ox_dequantize", what);
    CHECK_MSG(cdq_row_host(type, data, n, got.data()), "%s: type not handled", what);
    const bool same = memcmp(ref.data(), got.data(), (size_t)n * sizeof(float)) == 0;
    int64_t i = 0;
    while (!same && i < n && memcmp(&ref[(size_t)i], &got[(size_t)i], sizeof(float)) == 0)
        i++;
    CHECK_MSG(same, "%s (%s): element %lld: %a (reference) vs %a", what, ox_dtype_name(type),
              (long long)i, same ? 0.0 : (double)ref[(size_t)i],
              same ? 0.0 : (double)got[(size_t)i]);
}

static bool supported(enum ox_dtype type) {
    for (const rand_layout &l : layouts)
        if (l.type == type)
            return true;
    return false;
}

/* Every tensor of a supported type in every model of the shared folder. */
static void test_models(int *seen) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/models", test_data_dir());
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "test_cuda_dequant: no %s, model tensors skipped\n", dir);
        return;
    }
    for (struct dirent *e; (e = readdir(d)) != nullptr;) {
        const size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".gguf") != 0)
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct ox_gguf *g;
        CHECK_MSG(ox_gguf_open(path, &g) == OX_OK, "%s: %s", path, ox_last_error());
        if (!g)
            continue;
        for (int64_t i = 0; i < ox_gguf_n_tensors(g); i++) {
            struct ox_tensor_info t;
            if (ox_gguf_tensor(g, i, &t) != OX_OK || !supported(t.type))
                continue;
            int64_t n = 1;
            for (int k = 0; k < t.n_dims; k++)
                n *= t.ne[k];
            char what[512];
            snprintf(what, sizeof what, "%s:%s", e->d_name, t.name);
            compare(t.type, t.data, n, what);
            seen[t.type]++;
        }
        ox_gguf_free(g);
    }
    closedir(d);
}

/* 64 random blocks of each type (4096 elements for the plain types, plus an odd tail). */
static void test_random(void) {
    for (const rand_layout &l : layouts) {
        const int64_t bk = ox_dtype_block_size(l.type);
        const size_t bs = ox_dtype_type_size(l.type);
        const int64_t n_blocks = bk == 1 ? 4096 + 19 : 64;
        for (int rep = 0; rep < 8; rep++) {
            /* also from an odd address: the host path must not assume alignment */
            const size_t shift = (size_t)(rep & 1);
            std::vector<uint8_t> data(n_blocks * bs + 1);
            for (uint8_t &byte : data)
                byte = (uint8_t)rnd();
            for (int64_t b = 0; b < n_blocks; b++) {
                for (int off : l.scale_offsets) {
                    if (off < 0)
                        continue;
                    uint8_t *hi = &data[shift + (size_t)b * bs + (size_t)off + 1];
                    if ((*hi & 0x7c) == 0x7c) /* inf or NaN: clear an exponent bit */
                        *hi &= (uint8_t)~0x40;
                }
            }
            char what[64];
            snprintf(what, sizeof what, "random rep %d", rep);
            compare(l.type, data.data() + shift, n_blocks * bk, what);
        }
    }
}

int main(void) {
    int seen[OX_DTYPE_COUNT] = {0};
    test_models(seen);
    for (const rand_layout &l : layouts)
        printf("  %-8s %3d model tensors + random blocks\n", ox_dtype_name(l.type), seen[l.type]);
    test_random();
    return test_finish("test_cuda_dequant");
}
