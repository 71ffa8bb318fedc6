/* test_vulkan_rope_fold.c: decode's RoPE and cache stores done by q, k and v's matrix-vector
 * products as they write them (vk_rope_fold.c), against rope_store.comp after them, bit for bit,
 * on the Vulkan device (lavapipe in CI), q and k's and v's dispatches of two types side by side
 * (vk_join_waiting) and not. Skipped (77) where there is no Vulkan device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/vulkan/vk_backend.h"
#include "device_ops_common.h"
#include "quant/dtype.h"
#include "test.h"

/* test_rope_fold's layer: heads, kv heads, head width, x's width, cache cells, steps. */
enum {
    FOLD_HEADS = 8,
    FOLD_KV = 2,
    FOLD_HD = 64,
    FOLD_COLS = 512,
    FOLD_CELLS = 32,
    FOLD_STEPS = 3
};

/* One round of test_rope_fold's steps (folds on or off): q after the last step and both caches'
 * rows into got[0..2]. */
static void rope_fold_round(const struct mat dw[3], const float *dx, const struct norm_in *norm,
                            const struct rope_params *rp, enum ox_dtype cache, int n, bool folds,
                            uint8_t *got[3]) {
    const int rows[3] = {FOLD_HEADS * FOLD_HD, FOLD_KV * FOLD_HD, FOLD_KV * FOLD_HD};
    size_t row_bytes = (size_t)FOLD_KV * FOLD_HD * ox_dtype_type_size(cache);
    vk_backend_set_folds(folds);
    float *dy[3];
    for (int m = 0; m < 3; m++)
        dy[m] = gpu.ops->alloc(&gpu, (size_t)n * rows[m] * 4);
    uint8_t *kc = gpu.ops->alloc(&gpu, FOLD_CELLS * row_bytes);
    uint8_t *vc = gpu.ops->alloc(&gpu, FOLD_CELLS * row_bytes);
    gpu.ops->zero(&gpu, (float *)kc, FOLD_CELLS * row_bytes / 4);
    gpu.ops->zero(&gpu, (float *)vc, FOLD_CELLS * row_bytes / 4);
    int32_t *dpos = gpu.ops->alloc(&gpu, 8 * 4), *dcells = gpu.ops->alloc(&gpu, 8 * 4);
    for (int step = 0; step < FOLD_STEPS; step++) {
        int32_t pos[8], cells[8];
        for (int t = 0; t < n; t++)
            pos[t] = 100 * step + 7 * t, cells[t] = (step * n + t) % FOLD_CELLS;
        gpu.ops->upload(&gpu, dpos, pos, sizeof pos),
            gpu.ops->upload(&gpu, dcells, cells, sizeof cells);
        CHECK(gpu.ops->matmul_multi(&gpu, 3, dw, dx + (size_t)step * n * FOLD_COLS, norm, dy, n));
        struct rope_store_args a = {dy[0],   dy[1], dy[2], dpos, n,  FOLD_HEADS, FOLD_KV,   FOLD_HD,
                                    FOLD_HD, rp,    cache, kc,   vc, row_bytes,  row_bytes, dcells};
        CHECK(gpu.ops->rope_store(&gpu, &a));
    }
    got[0] = (uint8_t *)down(dy[0], (size_t)n * rows[0]);
    got[1] = malloc(FOLD_CELLS * row_bytes), got[2] = malloc(FOLD_CELLS * row_bytes);
    CHECK(gpu.ops->download(&gpu, got[1], kc, FOLD_CELLS * row_bytes) == OX_OK);
    CHECK(gpu.ops->download(&gpu, got[2], vc, FOLD_CELLS * row_bytes) == OX_OK);
    for (int m = 0; m < 3; m++)
        gpu.ops->free(&gpu, dy[m]);
    gpu.ops->free(&gpu, kc), gpu.ops->free(&gpu, vc), gpu.ops->free(&gpu, dpos);
    gpu.ops->free(&gpu, dcells);
}

/* Decode steps' q, k and v (three matrices of types types, the norm given to the op) and then
 * their RoPE and cache stores, as a layer runs them, three steps of n tokens: with the device's
 * folds on, the products rotate and store them as they write them from the second step on
 * (vk_rope_fold.c: the first uploads the layer's block), else rope_store.comp does. q, k and the
 * cache rows (f32 or f16) must be the same bit for bit. yarn: YaRN's mix and llama 3's frequency
 * factors too. */
static void test_rope_fold(const enum ox_dtype types[3], enum ox_dtype cache, int n, bool yarn) {
    float ff[24];
    for (int i = 0; i < 24; i++)
        ff[i] = 1.0f + (float)(i * 7 % 24) / 3.0f;
    struct rope_params rp = {.n_rot = 48,
                             .freq_base = 500000.0f,
                             .freq_scale = yarn ? 0.25f : 1.0f,
                             .ext_factor = yarn ? 1.0f : 0.0f,
                             .attn_factor = 1.0f,
                             .corr_dims = {4.0f, 20.0f},
                             .freq_factors = yarn ? up(ff, sizeof ff) : NULL};
    const int rows[3] = {FOLD_HEADS * FOLD_HD, FOLD_KV * FOLD_HD, FOLD_KV * FOLD_HD};
    uint8_t *hw[3];
    struct mat dw[3];
    for (int m = 0; m < 3; m++)
        dw[m] = random_weight(types[m], rows[m], FOLD_COLS, &hw[m]);
    float *x = random_floats((size_t)FOLD_STEPS * n * FOLD_COLS, 1.0f);
    float *g = random_floats(FOLD_COLS, 1.0f), *dx = up(x, (size_t)FOLD_STEPS * n * FOLD_COLS * 4);
    const struct norm_in norm = {up(g, FOLD_COLS * 4), 1e-5f};
    uint8_t *got[2][3];
    bool folds = vk_backend_folds();
    uint64_t taken = vk_backend_rope_folds(), joined = vk_backend_joins_taken();
    for (int round = 0; round < 2; round++)
        rope_fold_round(dw, dx, &norm, &rp, cache, n, round == 1, got[round]);
    vk_backend_set_folds(folds);
    /* on the integer form, types of two kinds are two dispatches a step, run side by side where
     * the folds keep them waiting (vk_join_waiting): none without the folds, one with */
    bool two_runs = types[0] != types[2] && vk_backend_dot8() && vk_backend_q8_type(types[0]) &&
                    vk_backend_q8_type(types[2]);
    CHECK_MSG(vk_backend_joins_taken() - joined ==
                  (two_runs && vk_backend_joins() ? FOLD_STEPS : 0),
              "%llu barriers left out in %d steps",
              (unsigned long long)(vk_backend_joins_taken() - joined), FOLD_STEPS);
    /* the products took every step's but the first, which uploaded the layer's block (or
     * found one the same from an earlier call) */
    CHECK_MSG(vk_backend_rope_folds() - taken >= FOLD_STEPS - 1, "%llu of %d steps folded",
              (unsigned long long)(vk_backend_rope_folds() - taken), FOLD_STEPS);
    size_t row_bytes = (size_t)FOLD_KV * FOLD_HD * ox_dtype_type_size(cache);
    size_t bytes[3] = {(size_t)n * rows[0] * 4, FOLD_CELLS * row_bytes, FOLD_CELLS * row_bytes};
    static const char *what[3] = {"q", "the k rows", "the v rows"};
    for (int i = 0; i < 3; i++) {
        CHECK_MSG(memcmp(got[0][i], got[1][i], bytes[i]) == 0,
                  "%s, folded into q, k and v's products (%s %s %s, %s rows, n=%d)", what[i],
                  ox_dtype_name(types[0]), ox_dtype_name(types[1]), ox_dtype_name(types[2]),
                  ox_dtype_name(cache), n);
        free(got[0][i]), free(got[1][i]);
    }
    printf("  RoPE and cache stores in q, k and v's products: %s %s %s, %s rows, n=%d%s\n",
           ox_dtype_name(types[0]), ox_dtype_name(types[1]), ox_dtype_name(types[2]),
           ox_dtype_name(cache), n, yarn ? ", YaRN and factors" : "");
    gpu.ops->free(&gpu, (void *)rp.freq_factors);
    for (int m = 0; m < 3; m++)
        free(hw[m]), gpu.ops->free(&gpu, (void *)dw[m].data);
    gpu.ops->free(&gpu, dx), gpu.ops->free(&gpu, (void *)norm.w), free(x), free(g);
}

int main(void) {
    int rc = device_open(&backend_vulkan_ops, "Vulkan");
    if (rc)
        return rc;
    static const enum ox_dtype km_v[3] = {OX_DTYPE_Q4_K, OX_DTYPE_Q4_K, OX_DTYPE_Q6_K},
                               f16[3] = {OX_DTYPE_F16, OX_DTYPE_F16, OX_DTYPE_F16};
    test_rope_fold(km_v, OX_DTYPE_F16, 1, false), test_rope_fold(km_v, OX_DTYPE_F32, 3, true);
    test_rope_fold(f16, OX_DTYPE_F16, 1, true), test_rope_fold(f16, OX_DTYPE_F16, 8, false);
    bool joins = vk_backend_joins(); /* the same with q and k, then v, one after the other */
    vk_backend_set_joins(false);
    test_rope_fold(km_v, OX_DTYPE_F16, 1, false);
    vk_backend_set_joins(joins);
    gpu.ops->release(&gpu);
    cpu.ops->release(&cpu);
    return test_finish("test_vulkan_rope_fold");
}
