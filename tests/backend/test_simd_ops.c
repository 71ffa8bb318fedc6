/* test_simd_ops.c: the SIMD versions of reference ops give the reference's results bit for
 * bit: SwiGLU, the activation quantizer and the f16-cache attention (with GQA, sequences,
 * a sliding window and soft-capping), on random data; the tiled attention of large batches
 * within float rounding. Each x86 level the CPU has (AVX-512, AVX2) is checked on its own; on
 * AArch64 the NEON set. */
#include "backend/cpu/attention.h"
#include <math.h>
#include <string.h>

#include "backend/cpu/ggml_numerics.h"
#include "backend/cpu/ops_simd.h"
#include "backend/cpu/qmatmul.h"
#include "core/alloc.h"
#include "core/cpu_features.h"
#include "core/fp16.h"
#include "test.h"

#if defined(__x86_64__) || defined(__aarch64__)
static uint32_t rng = 777;
static float uniform(void) { /* xorshift32 in [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
    return (float)(rng >> 8) / 8388608.0f - 1.0f;
}

typedef bool (*glu_fn)(enum glu_kind, const float *, const float *, float *, size_t);
typedef void (*quantize_fn)(const float *, void *, int64_t);
typedef bool (*attention_fn)(struct backend *, const struct attn_args *);

static void check_glu(glu_fn glu) {
    enum { N = 1000 }; /* not a multiple of 16: the tail too */
    float g[N], u[N], want[N], got[N];
    for (int i = 0; i < N; i++) /* some beyond exp's range, where it saturates */
        g[i] = uniform() * (i % 50 == 0 ? 200.0f : 8.0f), u[i] = uniform();
    for (int i = 0; i < N; i++)
        want[i] = g[i] / (1.0f + ggml_expf(-g[i])) * u[i];
    CHECK(glu(GLU_SILU, g, u, got, N));
    CHECK(memcmp(want, got, sizeof want) == 0);
}

static void check_quantize(quantize_fn quantize) {
    enum { N = 512 };
    float x[N];
    struct xq8_32 a[N / 32], b[N / 32];
    for (int i = 0; i < N; i++)
        x[i] = uniform() * (i < 32 ? 0.0f : 3.0f); /* the first block all zero */
    xq8_32_quantize(x, a, N);
    quantize(x, b, N);
    CHECK(memcmp(a, b, sizeof a) == 0);
}

/* One attention problem: n queries of 8 heads over 2 kv heads, cells from two sequences. */
static void check_attention(attention_fn attention, int hd, int window, float softcap) {
    enum { N = 6, CELLS = 40, NH = 8, NKV = 2 };
    static float q[N * NH * 256], k[CELLS * NKV * 256], v[CELLS * NKV * 256];
    static float y_ref[N * NH * 256], y_simd[N * NH * 256];
    int32_t q_pos[N], q_seq[N], cell_pos[CELLS];
    uint64_t cell_seq[CELLS * SEQ_WORDS] = {0}; /* sequences 0 and 130 (word 2) */
    for (int i = 0; i < N * NH * hd; i++)
        q[i] = uniform() * 2.0f;
    for (int i = 0; i < CELLS * NKV * hd; i++) /* as read back from an f16 cache */
        k[i] = fp16_to_fp32(fp32_to_fp16(uniform())), v[i] = fp16_to_fp32(fp32_to_fp16(uniform()));
    for (int c = 0; c < CELLS; c++) {
        cell_pos[c] = c / 2;
        if (c % 2 == 0 || c < 4)
            cell_seq[c * SEQ_WORDS] |= 1u;
        if (c % 2 || c < 4)
            cell_seq[c * SEQ_WORDS + 2] |= 1ull << (130 - 128);
    }
    for (int t = 0; t < N; t++)
        q_pos[t] = 10 + 2 * t, q_seq[t] = t % 2 ? 130 : 0;
    struct attn_args a = {.q = q,
                          .k = k,
                          .v = v,
                          .n = N,
                          .n_cells = CELLS,
                          .n_head = NH,
                          .n_head_kv = NKV,
                          .hd_k = hd,
                          .hd_v = hd,
                          .q_pos = q_pos,
                          .q_seq = q_seq,
                          .cell_pos = cell_pos,
                          .cell_seq = cell_seq,
                          .scale = 1.0f / sqrtf((float)hd),
                          .softcap = softcap,
                          .window = window,
                          .f16_cache = true};
    struct backend b = {.ops = &backend_cpu_ops};
    CHECK(b.ops->init(&b, &(struct backend_sizes){
                              .n_batch = 8, .n_threads = 2, .max_cols = 1024}) == OX_OK);
    a.y = y_ref;
    cpu_attention_ref(&b, &a);
    a.y = y_simd;
    CHECK(attention(&b, &a));
    CHECK_MSG(memcmp(y_ref, y_simd, (size_t)N * NH * hd * sizeof(float)) == 0,
              "attention hd %d window %d softcap %g differs", hd, window, softcap);
    b.ops->release(&b);
}

/* Batches of 64+ queries take the tiled f32 kernel: compared with the reference's exact
 * (double-sum) attention over the same cache, within float rounding. nh heads share 2 kv heads:
 * groups of 4 take the kernel's all-heads-at-once pass, other sizes head by head. */
static void check_attention_tiled(attention_fn attention, int hd, int window, int nh) {
    enum { N = 70, CELLS = 90, MAX_NH = 8, NKV = 2 };
    static float q[N * MAX_NH * 128], k[CELLS * NKV * 128], v[CELLS * NKV * 128];
    static float kt[CELLS * NKV * 128], y_ref[N * MAX_NH * 128], y_simd[N * MAX_NH * 128];
    const int NH = nh;
    int32_t q_pos[N], q_seq[N], cell_pos[CELLS];
    uint64_t cell_seq[CELLS * SEQ_WORDS] = {0};
    for (int i = 0; i < N * NH * hd; i++)
        q[i] = uniform() * 2.0f;
    for (int i = 0; i < CELLS * NKV * hd; i++)
        k[i] = uniform(), v[i] = uniform();
    for (int c = 0; c < CELLS; c++) /* two sequences, the last cells of each in use */
        cell_pos[c] = c / 2, cell_seq[c * SEQ_WORDS] = c % 2 ? 2u : 1u;
    for (int t = 0; t < N; t++)
        q_pos[t] = 10 + t / 2, q_seq[t] = t % 2;
    struct attn_args a = {.q = q,
                          .k = k,
                          .v = v,
                          .n = N,
                          .n_cells = CELLS,
                          .n_head = NH,
                          .n_head_kv = NKV,
                          .hd_k = hd,
                          .hd_v = hd,
                          .q_pos = q_pos,
                          .q_seq = q_seq,
                          .cell_pos = cell_pos,
                          .cell_seq = cell_seq,
                          .scale = 1.0f / sqrtf((float)hd),
                          .window = window,
                          .k_t = kt};
    struct backend b = {.ops = &backend_cpu_ops};
    CHECK(b.ops->init(&b, &(struct backend_sizes){
                              .n_batch = 8, .n_threads = 2, .max_cols = 1024}) == OX_OK);
    a.y = y_ref;
    cpu_attention_ref(&b, &a);
    a.y = y_simd, a.f16_cache = true; /* the flag the fast path needs; the tiled one is f32 */
    CHECK(attention(&b, &a));
    double worst = 0;
    for (int i = 0; i < N * NH * hd; i++)
        worst = fmax(worst, fabs((double)y_ref[i] - y_simd[i]));
    CHECK_MSG(worst < 1e-5, "tiled attention hd %d window %d heads %d: max diff %g", hd, window, nh,
              worst);
    b.ops->release(&b);
}

static void check_level(const char *name, glu_fn glu, quantize_fn quantize,
                        attention_fn attention) {
    int before = test_failures;
    check_glu(glu);
    check_quantize(quantize);
    check_attention(attention, 64, 0, 0.0f);
    check_attention(attention, 128, 5, 0.0f);
    check_attention(attention, 80, 0,
                    50.0f); /* a head size with a tail past the 64-element steps */
    check_attention(attention, 256, 3, 30.0f);
    check_attention_tiled(attention, 64, 0, 6);
    check_attention_tiled(attention, 128, 7, 6);
    check_attention_tiled(attention, 64, 0, 8);
    check_attention_tiled(attention, 80, 3, 8); /* value rows of 64 + 16 */
    check_attention_tiled(attention, 128, 0, 8);
    printf("%s: %s\n", name, test_failures == before ? "bit for bit" : "DIFFERS");
}
#endif

int main(void) {
#if defined(__x86_64__) /* the SIMD files are built for x86-64 only */
    const struct cpu_features *f = cpu_features_get();
    if (f->avx512f && f->avx512dq && f->avx512bw && f->avx512vl && f->fma && f->f16c)
        check_level("avx512", glu_avx512, xq8_32_quantize_avx512, attention_avx512);
    if (f->avx2 && f->fma && f->f16c)
        check_level("avx2", glu_avx2, xq8_32_quantize_avx2, attention_avx2);
    else
        printf("no AVX2 on this CPU (or OX_CPU_ISA): nothing to compare\n");
#endif
#if defined(__aarch64__) /* one NEON set, built for plain ARMv8-A, serves every level */
    check_level("neon", glu_neon, xq8_32_quantize_neon, attention_neon);
#endif
    return test_finish("test_simd_ops");
}
