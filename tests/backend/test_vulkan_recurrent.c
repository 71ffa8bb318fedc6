/* test_vulkan_recurrent.c: the Vulkan backend's recurrent-layer ops (the gated delta-net's and
 * Mamba-2's) against the CPU backend's on random inputs and states: one token (decode), and
 * batches whose tokens share a slot and interleave slots, so the state must move on token by
 * token. Skipped (77) where there is no Vulkan device with what the shaders need. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/vulkan/vk_backend.h"
#include "device_ops_common.h"
#include "test.h"

enum { N_SLOTS = 3 };

/* A host array and its device copy, compared after the ops when out is set. */
struct arr {
    float *host, *dev;
    size_t n;
};

static struct arr arr_random(size_t n, float scale) {
    struct arr a = {random_floats(n, scale), NULL, n};
    a.dev = up(a.host, n * sizeof(float));
    return a;
}

/* Negative decay rates, -exp(u) for u in [-1, 1), as the models' A (or a) are. */
static struct arr arr_negative(size_t n) {
    struct arr a = {random_floats(n, 1.0f), NULL, n};
    for (size_t i = 0; i < n; i++)
        a.host[i] = -expf(a.host[i]);
    a.dev = up(a.host, n * sizeof(float));
    return a;
}

static void arr_check(const struct arr *a, const char *what, const char *op, double tol) {
    float *got = down(a->dev, a->n);
    double e = rel_err(got, a->host, a->n);
    CHECK_CLOSE(got, a->host, a->n, tol, "%s %s", op, what);
    printf("    %-10s relative error %.2g\n", what, e);
    free(got);
}

static void arr_free(struct arr *a) {
    gpu.ops->free(&gpu, a->dev);
    free(a->host);
}

static int32_t *slots_dev(const int32_t *slot, int n) {
    return up(slot, (size_t)n * sizeof *slot);
}

static void test_delta_net(const int32_t *slot, int n, int d, int nk, int nv, int d_conv) {
    printf("  delta_net n %d, d_state %d, %d k heads, %d v heads\n", n, d, nk, nv);
    size_t conv_dim = (size_t)(2 * nk + nv) * d, cs = (size_t)(d_conv - 1) * conv_dim;
    size_t ss = (size_t)nv * d * d;
    struct arr qkv = arr_random((size_t)n * conv_dim, 2.0f);
    struct arr beta = arr_random((size_t)n * nv, 3.0f), alpha = arr_random((size_t)n * nv, 3.0f);
    struct arr w = arr_random(conv_dim * d_conv, 0.7f), dtb = arr_random((size_t)nv, 1.0f);
    struct arr a = arr_negative((size_t)nv);
    struct arr conv = arr_random(N_SLOTS * cs, 2.0f), ssm = arr_random(N_SLOTS * ss, 0.1f);
    struct arr out = arr_random((size_t)n * conv_dim, 1.0f),
               y = arr_random((size_t)n * nv * d, 1.0f);
    int32_t *dslot = slots_dev(slot, n);
    struct delta_net_args args = {
        qkv.host, beta.host, alpha.host, w.host, dtb.host, a.host, conv.host, ssm.host, cs,   ss,
        slot,     out.host,  y.host,     n,      nk,       nv,     d,         d_conv,   1e-6f};
    cpu.ops->delta_net(&cpu, &args);
    args = (struct delta_net_args){qkv.dev, beta.dev, alpha.dev, w.dev,  dtb.dev, a.dev, conv.dev,
                                   ssm.dev, cs,       ss,        dslot,  out.dev, y.dev, n,
                                   nk,      nv,       d,         d_conv, 1e-6f};
    gpu.ops->delta_net(&gpu, &args);
    arr_check(&y, "y", "delta_net", 1e-4);
    arr_check(&out, "conv_out", "delta_net", 1e-5);
    arr_check(&conv, "conv_state", "delta_net", 0.0);
    arr_check(&ssm, "ssm_state", "delta_net", 1e-4);
    struct arr *all[] = {&qkv, &beta, &alpha, &w, &dtb, &a, &conv, &ssm, &out, &y};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        arr_free(all[i]);
    gpu.ops->free(&gpu, dslot);
}

/* Mamba-2 over n tokens of rows laid out as the model's (z, then x B C, then dt). */
static void test_mamba2(const int32_t *slot, int n, int n_head, int hd, int n_group, int ds,
                        bool bias) {
    printf("  mamba2 n %d, %d heads of %d, %d groups, d_state %d, %s\n", n, n_head, hd, n_group, ds,
           bias ? "conv bias" : "no conv bias");
    int d_conv = 4;
    size_t inner = (size_t)n_head * hd, conv_dim = inner + 2 * (size_t)n_group * ds;
    size_t row = inner + conv_dim + (size_t)n_head, cs = (size_t)(d_conv - 1) * conv_dim;
    size_t ss = inner * (size_t)ds;
    struct arr in = arr_random((size_t)n * row, 2.0f), w = arr_random(conv_dim * d_conv, 0.7f);
    struct arr cb = arr_random(conv_dim, 0.5f), dtb = arr_random((size_t)n_head, 1.0f);
    struct arr a = arr_negative((size_t)n_head), dd = arr_random((size_t)n_head, 1.0f);
    struct arr conv = arr_random(N_SLOTS * cs, 2.0f), ssm = arr_random(N_SLOTS * ss, 0.5f);
    struct arr out = arr_random((size_t)n * conv_dim, 1.0f),
               y = arr_random((size_t)n * inner, 1.0f);
    int32_t *dslot = slots_dev(slot, n);
    struct mamba2_args args = {in.host + inner,
                               in.host + inner + conv_dim,
                               row,
                               row,
                               w.host,
                               bias ? cb.host : NULL,
                               dtb.host,
                               a.host,
                               dd.host,
                               conv.host,
                               ssm.host,
                               cs,
                               ss,
                               slot,
                               out.host,
                               y.host,
                               n,
                               n_head,
                               hd,
                               n_group,
                               ds,
                               d_conv};
    cpu.ops->mamba2(&cpu, &args);
    args = (struct mamba2_args){in.dev + inner,
                                in.dev + inner + conv_dim,
                                row,
                                row,
                                w.dev,
                                bias ? cb.dev : NULL,
                                dtb.dev,
                                a.dev,
                                dd.dev,
                                conv.dev,
                                ssm.dev,
                                cs,
                                ss,
                                dslot,
                                out.dev,
                                y.dev,
                                n,
                                n_head,
                                hd,
                                n_group,
                                ds,
                                d_conv};
    gpu.ops->mamba2(&gpu, &args);
    arr_check(&y, "y", "mamba2", 1e-4);
    arr_check(&out, "conv_out", "mamba2", 1e-5);
    arr_check(&conv, "conv_state", "mamba2", 0.0);
    arr_check(&ssm, "ssm_state", "mamba2", 1e-4);
    struct arr *all[] = {&in, &w, &cb, &dtb, &a, &dd, &conv, &ssm, &out, &y};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        arr_free(all[i]);
    gpu.ops->free(&gpu, dslot);
}

int main(void) {
    int rc = device_open(&backend_vulkan_ops, "Vulkan");
    if (rc)
        return rc;
    static const int32_t one[] = {1}, mixed[] = {0, 2, 0, 0, 1, 2, 1}, same[] = {2, 2, 2};
    test_delta_net(one, 1, 128, 2, 4, 4);
    test_delta_net(mixed, 7, 128, 2, 4, 4);
    test_delta_net(same, 3, 64, 2, 4, 4);
    test_delta_net(mixed, 7, 64, 1, 1, 4);
    for (int bias = 0; bias < 2; bias++) {
        test_mamba2(one, 1, 8, 64, 1, 128, bias);
        test_mamba2(mixed, 7, 8, 64, 2, 128, bias);
        test_mamba2(same, 3, 8, 64, 2, 16, bias);
    }
    test_mamba2(mixed, 7, 4, 100, 1, 16, true); /* a head of more than one workgroup's rows */
    gpu.ops->release(&gpu);
    cpu.ops->release(&cpu);
    return test_finish("test_vulkan_recurrent");
}
