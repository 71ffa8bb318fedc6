/* test_cuda_ops.c: the CUDA backend's other ops (norms, RoPE and the KV store, get_rows, the
 * cache, attention and flash attention) against the CPU backend on random inputs, with per-op
 * tolerances. Needs a CUDA GPU; without one it reports itself skipped (exit 77). */
#include "cuda_ops_common.h"

/* Run a one-input row op on both backends: op(b, in, out) with n floats. */
typedef void (*row_op)(struct backend *b, const float *in, float *out);
static const float *g_row; /* the op's extra input (weights, ...), host and device */
static const float *g_row_dev;

static void compare_op(const char *name, row_op op, size_t n_in, size_t n_out, double tol) {
    float *x = random_floats(n_in, 3.0f), *want = calloc(n_out ? n_out : 1, 4);
    float *dx = up(x, n_in * 4), *dy = up(want, n_out * 4);
    op(&cpu, x, want);
    op(&gpu, dx, dy);
    float *got = down(dy, n_out);
    CHECK_CLOSE(got, want, n_out, tol, "%s", name);
    free(x), free(want), free(got);
    gpu.ops->free(&gpu, dx), gpu.ops->free(&gpu, dy);
}

static const float *extra(struct backend *b) {
    return b == &gpu ? g_row_dev : g_row;
}

enum { N = 7, DIM = 384 };

static void op_rms(struct backend *b, const float *x, float *y) {
    b->ops->rms_norm(b, x, extra(b), y, N, DIM, 1e-5f);
}
static void op_rms_nog(struct backend *b, const float *x, float *y) {
    b->ops->rms_norm(b, x, NULL, y, N, DIM, 1e-6f);
}
static void op_layer(struct backend *b, const float *x, float *y) {
    b->ops->layer_norm(b, x, extra(b), extra(b) + DIM, y, N, DIM, 1e-5f);
}
static void op_silu(struct backend *b, const float *x, float *y) {
    b->ops->glu(b, GLU_SILU, x, x + N * DIM, y, N * DIM);
}
static void op_geglu(struct backend *b, const float *x, float *y) {
    b->ops->glu(b, GLU_GELU, x, x + N * DIM, y, N * DIM);
}
static void op_gelu(struct backend *b, const float *x, float *y) {
    b->ops->gelu(b, x, y, N * DIM);
}
static void op_add(struct backend *b, const float *x, float *y) {
    b->ops->copy_rows(b, y, DIM, x, DIM, N, DIM);
    b->ops->add(b, y, x + N * DIM, N * DIM);
    b->ops->add_row(b, y, extra(b), N, DIM);
    b->ops->scale(b, y, 0.37f, N * DIM);
    b->ops->axpy(b, y, x, -1.5f, N * DIM);
}
static void op_softmax(struct backend *b, const float *x, float *y) {
    b->ops->copy_rows(b, y, DIM, x, DIM, N, DIM);
    b->ops->softmax(b, y, N, DIM);
}
static void op_softcap(struct backend *b, const float *x, float *y) {
    b->ops->copy_rows(b, y, DIM, x, DIM, N, DIM);
    b->ops->softcap(b, y, 2.5f, N * DIM);
}
static void op_copy_zero(struct backend *b, const float *x, float *y) {
    b->ops->copy_rows(b, y + 5, DIM, x + 2, DIM + 3, N, DIM - 9); /* strided */
    b->ops->zero(b, y + 2 * DIM, DIM);
}

/* The rope settings as each side reads them (frequency factors in its own memory). */
static struct rope_params g_rope, g_rope_dev;
static void op_rope(struct backend *b, const float *x, float *y) {
    b->ops->copy_rows(b, y, DIM, x, DIM, N, DIM);
    b->ops->rope(b, y, (const int32_t *)extra(b), N, DIM / 64, 64,
                 b == &gpu ? &g_rope_dev : &g_rope);
}

/* rope_store against the ops it fuses (rope of q and k, cache_store of k and v): the same
 * bits, for each cache type and rope variant, a decode step's few tokens and a batch's many. */
static void test_rope_store(const struct rope_params *rope, int T) {
    enum { HQ = 4, HKV = 2, HD = 64 };
    const int CELLS = T + 3; /* cells (5 t + 2) mod CELLS: distinct, CELLS prime to 5 */
    int32_t pos[64], cells[64];
    for (int t = 0; t < T; t++)
        pos[t] = (t * 883 + 3) % 1000, cells[t] = (t * 5 + 2) % CELLS;
    enum ox_dtype types[] = {OX_DTYPE_F32, OX_DTYPE_F16, OX_DTYPE_Q8_0};
    float *q = random_floats(T * HQ * HD, 2.0f), *k = random_floats(T * HKV * HD, 2.0f);
    float *v = random_floats(T * HKV * HD, 2.0f);
    int32_t *dpos = up(pos, sizeof(int32_t) * T), *dcells = up(cells, sizeof(int32_t) * T);
    float *dv = up(v, sizeof(float) * T * HKV * HD);
    for (size_t t = 0; t < 3; t++) {
        size_t row =
            (size_t)HKV * HD / ox_dtype_block_size(types[t]) * ox_dtype_type_size(types[t]);
        uint8_t *zero = calloc(CELLS, row), *got[2][2];
        float *qk[2][2];
        for (int fused = 0; fused < 2; fused++) {
            float *dq = up(q, sizeof(float) * T * HQ * HD),
                  *dk = up(k, sizeof(float) * T * HKV * HD);
            uint8_t *kc = up(zero, CELLS * row), *vc = up(zero, CELLS * row);
            if (fused) {
                struct rope_store_args a = {dq, dk,   dv,       dpos, T,  HQ,  HKV, HD,
                                            HD, rope, types[t], kc,   vc, row, row, dcells};
                CHECK_MSG(gpu.ops->rope_store(&gpu, &a), "rope_store declined");
            } else {
                gpu.ops->rope(&gpu, dq, dpos, T, HQ, HD, rope);
                gpu.ops->rope(&gpu, dk, dpos, T, HKV, HD, rope);
                gpu.ops->cache_store(&gpu, types[t], dk, T, HKV * HD, kc, row, dcells);
                gpu.ops->cache_store(&gpu, types[t], dv, T, HKV * HD, vc, row, dcells);
            }
            qk[fused][0] = down(dq, T * HQ * HD), qk[fused][1] = down(dk, T * HKV * HD);
            for (int c = 0; c < 2; c++) {
                got[fused][c] = malloc(CELLS * row);
                CHECK(gpu.ops->download(&gpu, got[fused][c], c ? vc : kc, CELLS * row) == OX_OK);
            }
            gpu.ops->free(&gpu, dq), gpu.ops->free(&gpu, dk), gpu.ops->free(&gpu, kc);
            gpu.ops->free(&gpu, vc);
        }
        CHECK_MSG(!memcmp(qk[0][0], qk[1][0], sizeof(float) * T * HQ * HD) &&
                      !memcmp(qk[0][1], qk[1][1], sizeof(float) * T * HKV * HD),
                  "rope_store q, k (%s, n_rot %d)", ox_dtype_name(types[t]), rope->n_rot);
        CHECK_MSG(!memcmp(got[0][0], got[1][0], CELLS * row) &&
                      !memcmp(got[0][1], got[1][1], CELLS * row),
                  "rope_store cache (%s, n_rot %d)", ox_dtype_name(types[t]), rope->n_rot);
        for (int f = 0; f < 2; f++)
            free(qk[f][0]), free(qk[f][1]), free(got[f][0]), free(got[f][1]);
        free(zero);
    }
    free(q), free(k), free(v);
    gpu.ops->free(&gpu, dpos), gpu.ops->free(&gpu, dcells), gpu.ops->free(&gpu, dv);
}

/* RMSNorm at the shapes its launch picks between: few rows (1024 threads: the weights the
 * registers hold before the wait cover 4096 dims, the rest come from memory) and many (a row
 * in registers, 16 values a thread, up to 16384 dims; strided past that or for widths not a
 * multiple of 4). */
static void test_rms_shapes(void) {
    static const int shapes[][2] = {{1, 4160},  {8, 5120},   {9, 4160},  {33, 2048},
                                    {12, 4098}, {10, 16384}, {10, 20000}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int n = shapes[k][0], dim = shapes[k][1];
        float *x = random_floats((size_t)n * dim, 2.0f), *g = random_floats(dim, 1.0f);
        float *want = malloc((size_t)n * dim * 4), *dx = up(x, (size_t)n * dim * 4);
        float *dg = up(g, (size_t)dim * 4), *dy = gpu.ops->alloc(&gpu, (size_t)n * dim * 4);
        for (int weighted = 0; weighted < 2; weighted++) {
            cpu.ops->rms_norm(&cpu, x, weighted ? g : NULL, want, n, dim, 1e-5f);
            gpu.ops->rms_norm(&gpu, dx, weighted ? dg : NULL, dy, n, dim, 1e-5f);
            float *got = down(dy, (size_t)n * dim);
            CHECK_CLOSE(got, want, (size_t)n * dim, 1e-5, "rms_norm %d x %d, weight %d", n, dim,
                        weighted);
            free(got);
        }
        free(x), free(g), free(want);
        gpu.ops->free(&gpu, dx), gpu.ops->free(&gpu, dg), gpu.ops->free(&gpu, dy);
    }
}

static void test_rows(void) {
    float *g = random_floats(2 * DIM, 1.0f);
    g_row = g, g_row_dev = up(g, 2 * DIM * 4);
    compare_op("rms_norm", op_rms, N * DIM, N * DIM, 1e-5);
    compare_op("rms_norm without weight", op_rms_nog, N * DIM, N * DIM, 1e-5);
    test_rms_shapes();
    compare_op("layer_norm", op_layer, N * DIM, N * DIM, 1e-5);
    compare_op("glu silu", op_silu, 2 * N * DIM, N * DIM, 1e-5);
    compare_op("glu gelu", op_geglu, 2 * N * DIM, N * DIM, 2e-3); /* the CPU's f16 table */
    compare_op("gelu", op_gelu, N * DIM, N * DIM, 2e-3);
    compare_op("add, add_row, scale, axpy", op_add, 2 * N * DIM, N * DIM, 1e-6);
    compare_op("softmax", op_softmax, N * DIM, N * DIM, 1e-5);
    compare_op("softcap", op_softcap, N * DIM, N * DIM, 1e-5);
    compare_op("copy_rows, zero", op_copy_zero, N * (DIM + 3) + 8, N * DIM + 8, 0.0);
    gpu.ops->free(&gpu, (void *)g_row_dev);
    /* rope: positions up to 4000, normal and NeoX, partial, YaRN, frequency factors */
    int32_t pos[N] = {0, 1, 7, 100, 511, 2048, 4000};
    float ff[32];
    for (int i = 0; i < 32; i++)
        ff[i] = 1.0f + (float)i / 8.0f;
    float *dff = up(ff, sizeof ff);
    g_row = (const float *)pos, g_row_dev = up(pos, sizeof pos);
    struct rope_params variants[] = {
        {.n_rot = 64, .neox = false, .freq_base = 10000.0f, .freq_scale = 1.0f, .attn_factor = 1},
        {.n_rot = 64, .neox = true, .freq_base = 500000.0f, .freq_scale = 1.0f, .attn_factor = 1},
        {.n_rot = 32, .neox = true, .freq_base = 10000.0f, .freq_scale = 0.25f, .attn_factor = 1},
        {.n_rot = 64,
         .neox = true,
         .freq_base = 10000.0f,
         .freq_scale = 0.25f,
         .ext_factor = 1.0f,
         .attn_factor = 1.0f,
         .corr_dims = {8.0f, 24.0f}},
    };
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        g_rope = g_rope_dev = variants[v];
        compare_op("rope", op_rope, N * DIM, N * DIM, 2e-4);
    }
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++)
        test_rope_store(&variants[v], 3), test_rope_store(&variants[v], 40);
    g_rope = g_rope_dev = variants[1];
    g_rope.freq_factors = ff, g_rope_dev.freq_factors = dff;
    compare_op("rope with frequency factors", op_rope, N * DIM, N * DIM, 2e-4);
    gpu.ops->free(&gpu, (void *)g_row_dev), gpu.ops->free(&gpu, dff);
    free(g);
}

static void test_cache(void) {
    const int n = 5, dim = 256, cells = 9;
    enum ox_dtype types[] = {OX_DTYPE_F32, OX_DTYPE_F16, OX_DTYPE_Q8_0};
    int32_t where[5] = {8, 0, 3, 4, 6}, cell_pos[9] = {1, -1, -1, 2, 3, -1, 4, -1, 0};
    float *x = random_floats((size_t)n * dim, 2.0f);
    float *dx = up(x, (size_t)n * dim * 4);
    int32_t *dwhere = up(where, sizeof where), *dpos = up(cell_pos, sizeof cell_pos);
    for (size_t k = 0; k < 3; k++) {
        size_t row = (size_t)dim / ox_dtype_block_size(types[k]) * ox_dtype_type_size(types[k]);
        uint8_t *base = calloc(cells, row);
        float *want = calloc((size_t)cells * dim, 4);
        uint8_t *dbase = up(base, cells * row);
        float *dy = up(want, (size_t)cells * dim * 4);
        cpu.ops->cache_store(&cpu, types[k], x, n, dim, base, row, where);
        cpu.ops->cache_load(&cpu, types[k], base, row, want, cells, dim, cell_pos);
        gpu.ops->cache_store(&gpu, types[k], dx, n, dim, dbase, row, dwhere);
        gpu.ops->cache_load(&gpu, types[k], dbase, row, dy, cells, dim, dpos);
        float *got = down(dy, (size_t)cells * dim);
        CHECK_MSG(!memcmp(got, want, (size_t)cells * dim * 4), "cache %s", ox_dtype_name(types[k]));
        free(base), free(want), free(got);
        gpu.ops->free(&gpu, dbase), gpu.ops->free(&gpu, dy);
    }
    free(x);
    gpu.ops->free(&gpu, dx), gpu.ops->free(&gpu, dwhere), gpu.ops->free(&gpu, dpos);
}

/* Two sequences, free cells, GQA, then a window and soft-capping. */
/* A matmul of one row x (on the device at dx, and its host copy) that an op just wrote, by m
 * (64 rows, made before the op: an upload would make the backend forget its q8_1 copy),
 * against the reference from the host copy: a q8_1 copy the op left must be these rows. */
static void check_matmul_after(const struct mat *m, const uint8_t *host, const float *dx,
                               const float *x, const char *what) {
    float *want = malloc(64 * 4), *dy = gpu.ops->alloc(&gpu, 64 * 4);
    matmul_ref(m->type, host, 64, (int)m->n_cols, x, 1, want);
    gpu.ops->matmul(&gpu, m, dx, dy, 1);
    float *got = down(dy, 64);
    CHECK_CLOSE(got, want, 64, 2e-2, "matmul after %s", what);
    free(got), free(want);
    gpu.ops->free(&gpu, dy);
}

static void test_attention(void) {
    enum { NT = 6, CELLS = 300, HEADS = 8, KV_HEADS = 2, HD = 128 };
    int32_t q_pos[NT] = {3, 150, 151, 152, 0, 290}, q_seq[NT] = {0, 0, 0, 0, 77, 77};
    int32_t *cell_pos = malloc(CELLS * 4);
    uint64_t *cell_seq = calloc(CELLS * SEQ_WORDS, 8);
    for (int c = 0; c < CELLS; c++) { /* sequence 0 in even cells, 77 (word 1) in odd; some free */
        cell_pos[c] = c % 17 == 5 ? -1 : c / 2;
        if (cell_pos[c] >= 0 && c % 2)
            cell_seq[c * SEQ_WORDS + 1] = 1ull << (77 - 64);
        else if (cell_pos[c] >= 0)
            cell_seq[c * SEQ_WORDS] = 1;
    }
    float *q = random_floats(NT * HEADS * HD, 1.0f), *k = random_floats(CELLS * KV_HEADS * HD, 1);
    float *v = random_floats(CELLS * KV_HEADS * HD, 1.0f);
    float *dq = up(q, sizeof(float) * NT * HEADS * HD), *dk = up(k, 4 * CELLS * KV_HEADS * HD);
    float *dv = up(v, 4 * CELLS * KV_HEADS * HD), *dy = gpu.ops->alloc(&gpu, 4 * NT * HEADS * HD);
    int32_t *dqp = up(q_pos, sizeof q_pos), *dqs = up(q_seq, sizeof q_seq);
    int32_t *dcp = up(cell_pos, CELLS * 4);
    uint64_t *dcs = up(cell_seq, CELLS * SEQ_WORDS * 8);
    float *sinks = random_floats(HEADS, 3.0f), *dsinks = up(sinks, 4 * HEADS); /* gpt-oss's */
    struct {
        int window;
        float softcap;
        bool sinks;
        int32_t ahead; /* 0: causal; encoders see their whole sequence or a symmetric window */
    } variants[] = {{0, 0.0f, false, 0},  {64, 0.0f, false, 0},      {0, 30.0f, false, 0},
                    {20, 5.0f, false, 0}, {64, 0.0f, true, 0},       {0, 0.0f, false, INT32_MAX},
                    {9, 0.0f, false, 8},  {0, 0.0f, true, INT32_MAX}};
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        float *want = malloc(4 * NT * HEADS * HD);
        struct attn_args a = {.q = q,
                              .k = k,
                              .v = v,
                              .y = want,
                              .n = NT,
                              .n_cells = CELLS,
                              .n_head = HEADS,
                              .n_head_kv = KV_HEADS,
                              .hd_k = HD,
                              .hd_v = HD,
                              .q_pos = q_pos,
                              .q_seq = q_seq,
                              .cell_pos = cell_pos,
                              .cell_seq = cell_seq,
                              .scale = 0.088f,
                              .softcap = variants[i].softcap,
                              .sinks = variants[i].sinks ? sinks : NULL,
                              .window = variants[i].window,
                              .ahead = variants[i].ahead};
        cpu_attention_ref(&cpu, &a);
        struct attn_args d = a;
        d.q = dq, d.k = dk, d.v = dv, d.y = dy, d.q_pos = dqp, d.q_seq = dqs, d.cell_pos = dcp;
        d.cell_seq = dcs, d.sinks = variants[i].sinks ? dsinks : NULL;
        gpu.ops->attention(&gpu, &d);
        float *got = down(dy, NT * HEADS * HD);
        CHECK_CLOSE(got, want, NT * HEADS * HD, 1e-5,
                    "attention window %d softcap %g sinks %d ahead %d", variants[i].window,
                    variants[i].softcap, variants[i].sinks, variants[i].ahead);
        free(want), free(got);
    }
    /* the same from the cache's own rows (f32, f16, q8_0), as the forward pass hands them: the
     * CPU reads the rows back as floats first */
    enum ox_dtype types[] = {OX_DTYPE_F32, OX_DTYPE_F16, OX_DTYPE_Q8_0};
    int32_t *cells = malloc(CELLS * 4);
    for (int c = 0; c < CELLS; c++)
        cells[c] = c;
    int32_t *dcells = up(cells, CELLS * 4);
    uint8_t *wo_host;
    struct mat wo = random_weight(OX_DTYPE_Q4_0, 64, HEADS * HD, &wo_host);
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        size_t row =
            (size_t)KV_HEADS * HD / ox_dtype_block_size(types[i]) * ox_dtype_type_size(types[i]);
        uint8_t *kc = malloc(CELLS * row), *vc = malloc(CELLS * row);
        float *kf = malloc(4 * CELLS * KV_HEADS * HD), *vf = malloc(4 * CELLS * KV_HEADS * HD);
        float *want = malloc(4 * NT * HEADS * HD);
        cpu.ops->cache_store(&cpu, types[i], k, CELLS, KV_HEADS * HD, kc, row, cells);
        cpu.ops->cache_store(&cpu, types[i], v, CELLS, KV_HEADS * HD, vc, row, cells);
        cpu.ops->cache_load(&cpu, types[i], kc, row, kf, CELLS, KV_HEADS * HD, NULL);
        cpu.ops->cache_load(&cpu, types[i], vc, row, vf, CELLS, KV_HEADS * HD, NULL);
        struct attn_args a = {.q = q,
                              .k = kf,
                              .v = vf,
                              .y = want,
                              .n = NT,
                              .n_cells = CELLS,
                              .n_head = HEADS,
                              .n_head_kv = KV_HEADS,
                              .hd_k = HD,
                              .hd_v = HD,
                              .q_pos = q_pos,
                              .q_seq = q_seq,
                              .cell_pos = cell_pos,
                              .cell_seq = cell_seq,
                              .scale = 0.088f,
                              .sinks = types[i] == OX_DTYPE_F16 ? sinks : NULL, /* and sinks */
                              .window = 100};
        cpu_attention_ref(&cpu, &a);
        uint8_t *dkc = gpu.ops->alloc(&gpu, CELLS * row), *dvc = gpu.ops->alloc(&gpu, CELLS * row);
        gpu.ops->cache_store(&gpu, types[i], dk, CELLS, KV_HEADS * HD, dkc, row, dcells);
        gpu.ops->cache_store(&gpu, types[i], dv, CELLS, KV_HEADS * HD, dvc, row, dcells);
        for (int n = 1; n <= NT; n += NT - 1) { /* the decode kernel, then the tiled one */
            struct attn_args d = a;
            d.n = n, d.q = dq, d.k = d.v = NULL, d.y = dy, d.q_pos = dqp, d.q_seq = dqs;
            d.cell_pos = dcp, d.cell_seq = dcs, d.k_cache = dkc, d.v_cache = dvc;
            d.sinks = a.sinks ? dsinks : NULL;
            d.cache_type = types[i], d.k_row = d.v_row = row;
            gpu.ops->attention(&gpu, &d);
            float *got = down(dy, (size_t)n * HEADS * HD);
            CHECK_CLOSE(got, want, (size_t)n * HEADS * HD, 1e-5, "attention over a %s cache, n %d",
                        ox_dtype_name(types[i]), n);
            if (n == 1) /* the decode kernel left its output in q8_1 for the matmul next */
                check_matmul_after(&wo, wo_host, dy, got, "attention");
            free(got);
        }
        gpu.ops->free(&gpu, dkc), gpu.ops->free(&gpu, dvc);
        free(kc), free(vc), free(kf), free(vf), free(want);
    }
    gpu.ops->free(&gpu, dcells), gpu.ops->free(&gpu, (void *)wo.data);
    free(cells), free(wo_host);
    void *bufs[] = {dq, dk, dv, dy, dqp, dqs, dcp, dcs, dsinks};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        gpu.ops->free(&gpu, bufs[i]);
    free(q), free(k), free(v), free(cell_pos), free(cell_seq), free(sinks);
}

/* Attention over a cache the forward pass hands over, against the reference over the cache's
 * values: a case's shape, its queries (nq > 0: a prompt of two sequences interleaved, one
 * position per cell; nq < 0: a decode step of -nq sequences, one query each, one_per_seq, past
 * all their cells) and mask. Free cells hold NaN values that must not reach the output. */
struct cache_case {
    int hd, heads, kv_heads, cells, nq;
    enum ox_dtype type;
    int window;
    float softcap;
    int32_t ahead;
    bool sinks; /* a sink per head (gpt-oss) */
    bool runs;  /* each sequence's cells one run, told through seq_span (as the engine keeps
                   them), rather than interleaved */
    double tol;
};

static void test_cache_attention(struct cache_case k) {
    int n_seq = k.nq < 0 ? -k.nq : 2, nq = k.nq < 0 ? -k.nq : k.nq, per = k.cells / n_seq;
    bool one_per_seq = k.nq < 0;
    int32_t *q_pos = malloc(4 * (size_t)nq), *q_seq = malloc(4 * (size_t)nq);
    int32_t *cell_pos = malloc(4 * (size_t)k.cells), *cells = malloc(4 * (size_t)k.cells);
    int32_t *span = malloc(8 * (size_t)n_seq);
    uint64_t *cell_seq = calloc((size_t)k.cells * SEQ_WORDS, 8);
    for (int t = 0; t < nq; t++)
        q_seq[t] = one_per_seq ? t
                   : t % 2     ? 77
                               : 0,
        q_pos[t] = one_per_seq ? per + 1 + t : 80 + t / 2;
    for (int s = 0; s < n_seq; s++)
        span[2 * s] = k.runs ? s * per : s, span[2 * s + 1] = k.runs ? (s + 1) * per : k.cells;
    for (int c = 0; c < k.cells; c++) {
        int s = k.runs ? c / per : one_per_seq ? c % n_seq : c % 2 ? 77 : 0;
        cells[c] = c;
        cell_pos[c] = c % 17 == 5 || (k.runs && s >= n_seq) ? -1 : k.runs ? c % per : c / n_seq;
        if (cell_pos[c] >= 0)
            cell_seq[c * SEQ_WORDS + s / 64] = 1ull << (s % 64);
    }
    size_t kv = (size_t)k.cells * k.kv_heads * k.hd, qn = (size_t)nq * k.heads * k.hd;
    float *q = random_floats(qn, 1.0f), *kf = random_floats(kv, 1.0f);
    float *vf = random_floats(kv, 1.0f), *sinks = random_floats((size_t)k.heads, 3.0f);
    for (int c = 0; c < k.cells; c++)
        if (cell_pos[c] < 0)
            for (int i = 0; i < k.kv_heads * k.hd; i++)
                kf[(size_t)c * k.kv_heads * k.hd + i] = vf[(size_t)c * k.kv_heads * k.hd + i] = NAN;
    size_t row =
        (size_t)k.kv_heads * k.hd / ox_dtype_block_size(k.type) * ox_dtype_type_size(k.type);
    uint8_t *kc = malloc(k.cells * row), *vc = malloc(k.cells * row);
    float *want = malloc(4 * qn);
    cpu.ops->cache_store(&cpu, k.type, kf, k.cells, k.kv_heads * k.hd, kc, row, cells);
    cpu.ops->cache_store(&cpu, k.type, vf, k.cells, k.kv_heads * k.hd, vc, row, cells);
    cpu.ops->cache_load(&cpu, k.type, kc, row, kf, k.cells, k.kv_heads * k.hd, NULL);
    cpu.ops->cache_load(&cpu, k.type, vc, row, vf, k.cells, k.kv_heads * k.hd, NULL);
    struct attn_args a = {.q = q,
                          .k = kf,
                          .v = vf,
                          .y = want,
                          .n = nq,
                          .n_cells = k.cells,
                          .n_head = k.heads,
                          .n_head_kv = k.kv_heads,
                          .hd_k = k.hd,
                          .hd_v = k.hd,
                          .q_pos = q_pos,
                          .q_seq = q_seq,
                          .cell_pos = cell_pos,
                          .cell_seq = cell_seq,
                          .scale = 1.0f / sqrtf((float)k.hd),
                          .softcap = k.softcap,
                          .sinks = k.sinks ? sinks : NULL,
                          .window = k.window,
                          .ahead = k.ahead,
                          .one_per_seq = one_per_seq};
    cpu_attention_ref(&cpu, &a);
    struct attn_args d = a;
    d.q = up(q, 4 * qn), d.k = d.v = NULL, d.y = gpu.ops->alloc(&gpu, 4 * qn);
    d.q_pos = up(q_pos, 4 * (size_t)nq), d.q_seq = up(q_seq, 4 * (size_t)nq);
    d.cell_pos = up(cell_pos, 4 * (size_t)k.cells);
    d.cell_seq = up(cell_seq, (size_t)k.cells * SEQ_WORDS * 8);
    d.sinks = k.sinks ? up(sinks, 4 * (size_t)k.heads) : NULL;
    d.seq_span = k.runs ? up(span, 8 * (size_t)n_seq) : NULL;
    d.k_cache = up(kc, k.cells * row), d.v_cache = up(vc, k.cells * row);
    d.cache_type = k.type, d.k_row = d.v_row = row;
    gpu.ops->attention(&gpu, &d);
    float *got = down(d.y, qn);
    CHECK_CLOSE(got, want, qn, k.tol,
                "attention hd %d, %d/%d heads, %d cells of %s, window %d softcap %g, %d queries, "
                "ahead %d, sinks %d, runs %d",
                k.hd, k.heads, k.kv_heads, k.cells, ox_dtype_name(k.type), k.window, k.softcap,
                k.nq, k.ahead, k.sinks, k.runs);
    void *bufs[] = {(void *)d.q,        d.y,
                    (void *)d.q_pos,    (void *)d.q_seq,
                    (void *)d.cell_pos, (void *)d.cell_seq,
                    (void *)d.k_cache,  (void *)d.v_cache,
                    (void *)d.sinks,    (void *)d.seq_span};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i])
            gpu.ops->free(&gpu, bufs[i]);
    free(got), free(q), free(kf), free(vf), free(kc), free(vc), free(want), free(sinks);
    free(cell_seq), free(q_pos), free(q_seq), free(cell_pos), free(cells), free(span);
}

/* Prompts on the tensor cores (f16 operands, P rounded to f16), for head sizes 64 to 256, GQA,
 * windows and soft-capping, 70 queries over 300 cells. */
static void test_flash_attention(int hd, enum ox_dtype type, int window, float softcap, int nq,
                                 int32_t ahead) {
    test_cache_attention((struct cache_case){.hd = hd,
                                             .heads = 8,
                                             .kv_heads = 2,
                                             .cells = 300,
                                             .nq = nq,
                                             .type = type,
                                             .window = window,
                                             .softcap = softcap,
                                             .ahead = ahead,
                                             .tol = 3e-3});
}

static void test_flash(void) {
    static const int hds[] = {64, 80, 96, 128, 256};
    for (size_t i = 0; i < sizeof hds / sizeof hds[0]; i++) {
        test_flash_attention(hds[i], OX_DTYPE_F16, 0, 0.0f, 70, 0);
        test_flash_attention(hds[i], OX_DTYPE_Q8_0, 0, 0.0f, 70, 0);
    }
    /* decode steps of more sequences than a recorded step takes: the per-query kernel */
    test_flash_attention(64, OX_DTYPE_F16, 0, 0.0f, -20, 0);
    test_flash_attention(128, OX_DTYPE_Q8_0, 0, 0.0f, -12, 0);
    test_flash_attention(128, OX_DTYPE_F16, 20, 0.0f, 70, 0);
    test_flash_attention(256, OX_DTYPE_F16, 50, 30.0f, 70, 0);
    test_flash_attention(96, OX_DTYPE_F16, 0, 0.0f, 20, 0); /* one block, partly filled */
    /* encoders' small heads, seeing their whole sequence or a symmetric window (4 each way) */
    test_flash_attention(16, OX_DTYPE_F16, 0, 0.0f, 70, INT32_MAX);
    test_flash_attention(32, OX_DTYPE_F16, 5, 0.0f, 70, 4);
    test_flash_attention(64, OX_DTYPE_Q8_0, 0, 0.0f, 70, INT32_MAX);
}

/* Decode steps over long f16 caches (cuda_decode_attention.cu): the heads of a kv head in one
 * block (1, 2, 4, and 7 as 4 + 3), a tile of 128, 64 or 32 cells by head size, the cells split
 * among blocks and their partials combined, windows, soft-capping, sinks, each sequence's run
 * of cells, and dims not a multiple of 64 (80, 96). */
static void test_decode_attention(void) {
    static const struct cache_case cases[] = {
        {.hd = 64, .heads = 8, .kv_heads = 2, .cells = 3000, .nq = -1},
        {.hd = 128, .heads = 32, .kv_heads = 8, .cells = 5000, .nq = -1, .sinks = true},
        {.hd = 128,
         .heads = 8,
         .kv_heads = 2,
         .cells = 2000,
         .nq = -3,
         .window = 500,
         .softcap = 30.0f,
         .runs = true},
        {.hd = 256, .heads = 8, .kv_heads = 4, .cells = 1500, .nq = -2, .runs = true},
        {.hd = 64, .heads = 4, .kv_heads = 4, .cells = 1200, .nq = -4, .runs = true, .sinks = true},
        {.hd = 80, .heads = 14, .kv_heads = 2, .cells = 900, .nq = -1},
        {.hd = 96, .heads = 14, .kv_heads = 2, .cells = 700, .nq = -5, .runs = true},
        {.hd = 128, .heads = 32, .kv_heads = 8, .cells = 40, .nq = -1}, /* one tile, partly */
        {.hd = 64, .heads = 32, .kv_heads = 8, .cells = 3300, .nq = -33, .runs = true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct cache_case k = cases[i];
        k.type = OX_DTYPE_F16, k.tol = 1e-5;
        test_cache_attention(k);
    }
}

int main(void) {
    int st = ct_open(true);
    if (st)
        return st;
    test_rows();
    test_cache();
    test_attention();
    test_flash();
    test_decode_attention();
    ct_close();
    return test_finish("test_cuda_ops");
}
