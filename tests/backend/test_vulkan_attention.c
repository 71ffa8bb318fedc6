/* test_vulkan_attention.c: the Vulkan backend's attention against the CPU backend's on random
 * inputs: decode's and prompts' shapes, the cache's row types, spans, one sequence's prompts
 * (attention_cm2.comp's whole, skipped and part tiles where the device has it) and the bytes or
 * halves a decode step's attention writes for the o projection. Skipped (77) where there is no
 * Vulkan device with what the shaders need (test_vulkan_ops.c has the other ops). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/vulkan/vk_backend.h"
#include "device_ops_common.h"
#include "test.h"

/* Attention of nt queries of two sequences over shared cells (GQA), causal or with a window, a
 * soft cap, sinks, and a query that sees no cell; over rows of floats, or (cache f16 or q8_0)
 * read from the cache's rows as the model's layers give them, against the CPU over the same rows
 * loaded back as floats. Past 6 queries (a prompt's shape: the shader 16 at a time), a run of
 * positions from 100 in both sequences. */
/* a's host arrays copied to the device (its n queries, n_cells cells of keys and values, the
 * sinks), y allocated there; attn_free frees every device array of it. */
static struct attn_args attn_up(const struct attn_args *a) {
    size_t nq = (size_t)a->n * a->n_head * a->hd_k, ny = (size_t)a->n * a->n_head * a->hd_v;
    size_t kv = (size_t)a->n_cells * a->n_head_kv, cells = (size_t)a->n_cells;
    struct attn_args d = *a;
    d.q = up(a->q, nq * 4), d.k = up(a->k, kv * a->hd_k * 4), d.v = up(a->v, kv * a->hd_v * 4);
    d.y = gpu.ops->alloc(&gpu, ny * 4);
    d.q_pos = up(a->q_pos, (size_t)a->n * 4), d.q_seq = up(a->q_seq, (size_t)a->n * 4);
    d.cell_pos = up(a->cell_pos, cells * 4), d.cell_seq = up(a->cell_seq, cells * SEQ_WORDS * 8);
    d.sinks = a->sinks ? up(a->sinks, (size_t)a->n_head * 4) : NULL;
    return d;
}

static void attn_free(const struct attn_args *d) {
    const void *dev[] = {d->q,        d->k,        d->v,     d->y,       d->q_pos,   d->q_seq,
                         d->cell_pos, d->cell_seq, d->sinks, d->k_cache, d->v_cache, d->seq_span};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        gpu.ops->free(&gpu, (void *)dev[i]);
}

/* x (cells rows of width values) as the cache's rows of a type (xc: rows of row bytes), and x
 * made the floats those rows stand for. */
static void cache_rows(enum ox_dtype type, float *x, int cells, int width, size_t row,
                       uint8_t *xc) {
    int32_t *all = malloc((size_t)cells * 4);
    for (int c = 0; c < cells; c++)
        all[c] = c;
    cpu.ops->cache_store(&cpu, type, x, cells, width, xc, row, all);
    cpu.ops->cache_load(&cpu, type, xc, row, x, cells, width, NULL);
    free(all);
}

/* d's keys and values (attn_up's rows of floats, freed) replaced by the cache's rows of a type made
 * from host's, whose floats become the values those rows stand for. */
static void use_cache_rows(struct attn_args *d, const struct attn_args *host, enum ox_dtype type) {
    int cells = host->n_cells, k_width = host->n_head_kv * host->hd_k;
    int v_width = host->n_head_kv * host->hd_v;
    size_t k_row = (size_t)k_width / ox_dtype_block_size(type) * ox_dtype_type_size(type);
    size_t v_row = (size_t)v_width / ox_dtype_block_size(type) * ox_dtype_type_size(type);
    uint8_t *kc = malloc(cells * k_row), *vc = malloc(cells * v_row);
    cache_rows(type, (float *)host->k, cells, k_width, k_row, kc);
    cache_rows(type, (float *)host->v, cells, v_width, v_row, vc);
    d->k_cache = up(kc, cells * k_row), d->v_cache = up(vc, cells * v_row);
    d->cache_type = type, d->k_row = k_row, d->v_row = v_row;
    gpu.ops->free(&gpu, (void *)d->k), gpu.ops->free(&gpu, (void *)d->v);
    d->k = d->v = NULL;
    free(kc), free(vc);
}

/* Attention's arguments over host arrays: n queries (positions, sequences), n_cells cells, heads
 * of hd wide, the usual scale; the rest (softcap, sinks, window) 0. */
static struct attn_args attn_host(float *q, float *k, float *v, int n, int n_cells, int n_head,
                                  int n_head_kv, int hd, const int32_t *q_pos, const int32_t *q_seq,
                                  const int32_t *cell_pos, const uint64_t *cell_seq) {
    return (struct attn_args){.q = q,
                              .k = k,
                              .v = v,
                              .n = n,
                              .n_cells = n_cells,
                              .n_head = n_head,
                              .n_head_kv = n_head_kv,
                              .hd_k = hd,
                              .hd_v = hd,
                              .q_pos = q_pos,
                              .q_seq = q_seq,
                              .cell_pos = cell_pos,
                              .cell_seq = cell_seq,
                              .scale = 1.0f / sqrtf((float)hd)};
}

/* Runs attention a (host arrays; a->y unused) on the CPU and on the device, k and v as the cache's
 * rows of that type (or floats: OX_DTYPE_F32), and checks the device's output against the CPU's;
 * name says which case failed. */
static void attention_check(struct attn_args a, enum ox_dtype cache, const char *name) {
    size_t nq = (size_t)a.n * a.n_head * a.hd_v, cells = (size_t)a.n_cells;
    int k_width = a.n_head_kv * a.hd_k, v_width = a.n_head_kv * a.hd_v;
    size_t k_row = (size_t)k_width / ox_dtype_block_size(cache) * ox_dtype_type_size(cache);
    size_t v_row = (size_t)v_width / ox_dtype_block_size(cache) * ox_dtype_type_size(cache);
    uint8_t *kc = malloc(cells * k_row), *vc = malloc(cells * v_row);
    if (cache != OX_DTYPE_F32) {
        cache_rows(cache, (float *)a.k, (int)cells, k_width, k_row, kc);
        cache_rows(cache, (float *)a.v, (int)cells, v_width, v_row, vc);
    }
    float *want = malloc(nq * sizeof *want);
    a.y = want;
    cpu.ops->attention(&cpu, &a);
    struct attn_args d = attn_up(&a);
    if (cache != OX_DTYPE_F32) { /* k and v from the cache's rows instead */
        d.k_cache = up(kc, cells * k_row), d.v_cache = up(vc, cells * v_row);
        d.cache_type = cache, d.k_row = k_row, d.v_row = v_row;
        gpu.ops->free(&gpu, (void *)d.k), gpu.ops->free(&gpu, (void *)d.v);
        d.k = d.v = NULL;
    }
    gpu.ops->attention(&gpu, &d);
    float *got = down(d.y, nq);
    /* attention_cm(2).comp's queries and softmax weights are f16 on the matrices (H100: 1.5e-4) */
    bool cm = vk_backend_coopmat() && cache == OX_DTYPE_F16 && a.n >= 16 && a.hd_k % 16 == 0 &&
              a.hd_v % 16 == 0 && a.hd_k <= 128 && a.hd_v <= 128;
    CHECK_CLOSE(got, want, nq, cm ? 1e-3 : 2e-6, "%s", name);
    if (getenv("OX_TEST_DUMP")) /* where a failing attention goes wrong: token, head, dim */
        for (size_t i = 0; i < nq; i++)
            if (!(fabsf(got[i] - want[i]) <= 1e-2f))
                fprintf(stderr, "  t %zu h %zu d %zu: got %g want %g\n",
                        i / (a.n_head * (size_t)a.hd_v), i / a.hd_v % a.n_head, i % a.hd_v, got[i],
                        want[i]);
    printf("  %-44s relative error %.2g%s\n", name, rel_err(got, want, nq),
           cm ? " (matrices)" : "");
    attn_free(&d);
    free(want), free(got), free(kc), free(vc);
}

/* Attention of nt query tokens against 300 cells of two sequences. spread: queries and keys of
 * few bits (1/8 steps up to 8), so that with hd 64's scale of 1/8 the scores are exact in f16
 * (attention_cm.comp's queries) and spread over tens: the online softmax's max moves far from
 * one tile to the next, and most weights underflow. */
static void attention_case(int nt, int window, float softcap, bool sinks, int hd,
                           enum ox_dtype cache, bool spread) {
    enum { NT = 130, CELLS = 300, HEADS = 8, KV_HEADS = 2 };
    int32_t q_pos[NT] = {3, 150, 151, 152, 0, 290}, q_seq[NT] = {0, 0, 0, 0, 77, 5};
    for (int i = 6; i < NT; i++)
        q_pos[i] = 100 + i, q_seq[i] = i % 3 == 0 ? 77 : 0;
    int32_t *cell_pos = malloc(CELLS * 4);
    uint64_t *cell_seq = calloc((size_t)CELLS * SEQ_WORDS, 8);
    for (int c = 0; c < CELLS; c++) { /* sequence 0 on the even cells, 77 on the odd ones */
        cell_pos[c] = c / 2;
        int s = c % 2 ? 77 : 0;
        cell_seq[(size_t)c * SEQ_WORDS + s / 64] |= 1ull << (s % 64);
    }
    size_t nq = (size_t)nt * HEADS * hd, nk = (size_t)CELLS * KV_HEADS * hd;
    float *q = random_floats(nq, 1.0f), *k = random_floats(nk, 1.0f), *v = random_floats(nk, 1.0f);
    float *sk = random_floats(HEADS, 2.0f);
    for (size_t i = 0; spread && i < nq; i++)
        q[i] = roundf(q[i] * 64.0f) / 8.0f;
    for (size_t i = 0; spread && i < nk; i++)
        k[i] = roundf(k[i] * 64.0f) / 8.0f;
    struct attn_args a =
        attn_host(q, k, v, nt, CELLS, HEADS, KV_HEADS, hd, q_pos, q_seq, cell_pos, cell_seq);
    a.softcap = softcap, a.sinks = sinks ? sk : NULL, a.window = window;
    char name[64];
    snprintf(name, sizeof name, "attention %d x hd %d%s%s%s%s%s%s", nt, hd, window ? " window" : "",
             softcap != 0.0f ? " softcap" : "", sinks ? " sinks" : "", spread ? " spread" : "",
             cache != OX_DTYPE_F32 ? " cache " : "",
             cache != OX_DTYPE_F32 ? ox_dtype_name(cache) : "");
    attention_check(a, cache, name);
    free(q), free(k), free(v), free(sk), free(cell_pos), free(cell_seq);
}

/* A prompt's attention as a model runs it: nt tokens of one sequence, the last of cells cells at
 * positions 0 to cells - 1 (in the order of the cells, or from the last cell back with
 * reversed), every hole-th cell free (no sequence; 0: none), heads hd_k wide for keys and hd_v
 * for values, with a window, sinks or softcap where asked. The workgroup-matrix path sees most
 * tiles whole, skips those ahead of its queries or past the window, and checks cells one by one
 * only on the tiles between. */
struct prompt_case {
    int nt, cells, hd_k, hd_v, window, hole;
    bool reversed, sinks;
    float softcap;
};

static void attention_prompt(struct prompt_case pc) {
    enum { HEADS = 4, KV_HEADS = 2 };
    int nt = pc.nt, n_cells = pc.cells;
    int32_t *q_pos = malloc((size_t)nt * 4), *q_seq = calloc((size_t)nt, 4);
    int32_t *cell_pos = malloc((size_t)n_cells * 4);
    uint64_t *cell_seq = calloc((size_t)n_cells * SEQ_WORDS, 8);
    for (int t = 0; t < nt; t++)
        q_pos[t] = n_cells - nt + t;
    for (int c = 0; c < n_cells; c++) {
        cell_pos[c] = pc.reversed ? n_cells - 1 - c : c;
        bool free_cell = pc.hole > 0 && c % pc.hole == pc.hole - 1 && cell_pos[c] < n_cells - nt;
        cell_seq[(size_t)c * SEQ_WORDS] = free_cell ? 0 : 1;
    }
    size_t nq = (size_t)nt * HEADS * pc.hd_k, nk = (size_t)n_cells * KV_HEADS * pc.hd_k;
    size_t nv = (size_t)n_cells * KV_HEADS * pc.hd_v;
    float *q = random_floats(nq, 1.0f), *k = random_floats(nk, 1.0f), *v = random_floats(nv, 1.0f);
    float *sk = random_floats(HEADS, 2.0f);
    struct attn_args a =
        attn_host(q, k, v, nt, n_cells, HEADS, KV_HEADS, pc.hd_k, q_pos, q_seq, cell_pos, cell_seq);
    a.hd_v = pc.hd_v, a.window = pc.window, a.softcap = pc.softcap, a.sinks = pc.sinks ? sk : NULL;
    char name[96];
    snprintf(name, sizeof name, "prompt %d of %d cells x hd %d/%d%s%s%s%s%s", nt, n_cells, pc.hd_k,
             pc.hd_v, pc.window ? " window" : "", pc.hole ? " holes" : "",
             pc.reversed ? " reversed" : "", pc.sinks ? " sinks" : "",
             pc.softcap != 0.0f ? " softcap" : "");
    attention_check(a, OX_DTYPE_F16, name);
    free(q), free(k), free(v), free(sk), free(q_pos), free(q_seq), free(cell_pos), free(cell_seq);
}

static void test_attention(int nt, int window, float softcap, bool sinks, int hd,
                           enum ox_dtype cache) {
    attention_case(nt, window, softcap, sinks, hd, cache, false);
}

/* Attention over a cache whose sequences hold runs of cells, given each sequence's span (the
 * device looks at those cells alone): 20 sequences' next tokens at once (one_per_seq: a
 * workgroup each), and 20 queries of one sequence (the prompt path, over the union of their
 * spans), against the CPU's attention over every cell. */
static void test_attention_spans(bool one_per_seq, bool f16) {
    enum { SEQS = 20, RUN = 15, CELLS = SEQS * RUN, HEADS = 4, HD = 64, NQ = 20 };
    int32_t q_pos[NQ], q_seq[NQ], *cell_pos = malloc(CELLS * 4);
    int32_t *span = calloc(2 * OX_SEQ_MAX, sizeof *span);
    uint64_t *cell_seq = calloc((size_t)CELLS * SEQ_WORDS, 8);
    for (int c = 0; c < CELLS; c++) { /* sequence 3 i in cells 15 i .. 15 i + 14 */
        int sq = 3 * (c / RUN);
        cell_pos[c] = c % RUN, cell_seq[(size_t)c * SEQ_WORDS + sq / 64] |= 1ull << (sq % 64);
        if (c % RUN == 0)
            span[2 * sq] = c;
        span[2 * sq + 1] = c + 1;
    }
    for (int t = 0; t < NQ; t++) /* each sequence's next token, or sequence 30's 5 .. 24 */
        q_seq[t] = one_per_seq ? 3 * t : 30, q_pos[t] = one_per_seq ? RUN : 5 + t;
    size_t nq = (size_t)NQ * HEADS * HD, nk = (size_t)CELLS * HEADS * HD;
    float *q = random_floats(nq, 1.0f), *k = random_floats(nk, 1.0f), *v = random_floats(nk, 1.0f);
    float *want = malloc(nq * 4);
    struct attn_args a = {.q = q,
                          .k = k,
                          .v = v,
                          .y = want,
                          .n = NQ,
                          .n_cells = CELLS,
                          .n_head = HEADS,
                          .n_head_kv = HEADS,
                          .hd_k = HD,
                          .hd_v = HD,
                          .q_pos = q_pos,
                          .q_seq = q_seq,
                          .cell_pos = cell_pos,
                          .cell_seq = cell_seq,
                          .scale = 0.125f,
                          .one_per_seq = one_per_seq};
    size_t row = (size_t)HEADS * HD * 2; /* f16 cache rows: the floats they stand for first */
    uint8_t *kc = f16 ? malloc(CELLS * row) : NULL, *vc = f16 ? malloc(CELLS * row) : NULL;
    if (f16) {
        cache_rows(OX_DTYPE_F16, k, CELLS, HEADS * HD, row, kc);
        cache_rows(OX_DTYPE_F16, v, CELLS, HEADS * HD, row, vc);
    }
    cpu.ops->attention(&cpu, &a);
    struct attn_args d = attn_up(&a);
    d.seq_span = up(span, 2 * OX_SEQ_MAX * sizeof *span);
    if (f16) { /* attention_cm.comp's path where the device has the matrices */
        d.k_cache = up(kc, CELLS * row), d.v_cache = up(vc, CELLS * row);
        d.cache_type = OX_DTYPE_F16, d.k_row = d.v_row = row;
        gpu.ops->free(&gpu, (void *)d.k), gpu.ops->free(&gpu, (void *)d.v);
        d.k = d.v = NULL;
    }
    gpu.ops->attention(&gpu, &d);
    float *got = down(d.y, nq);
    bool cm = f16 && !one_per_seq && vk_backend_coopmat();
    CHECK_CLOSE(got, want, nq, cm ? 1e-3 : 2e-6, "attention over spans, %s%s",
                one_per_seq ? "a query a sequence" : "one sequence", f16 ? ", f16 rows" : "");
    printf("  attention over spans, %s%s: relative error %.2g\n",
           one_per_seq ? "a query a sequence" : "one sequence", f16 ? ", f16 rows" : "",
           rel_err(got, want, nq));
    attn_free(&d);
    free(q), free(k), free(v), free(want), free(got), free(cell_pos), free(cell_seq), free(span);
    free(kc), free(vc);
}

/* A decode step's attention makes its output the form the product after it (the o projection)
 * takes: the integer form's bytes (q4_K weights), or f16 (f16 weights: where the product before
 * it took f16 too, as q, k and v of the same type would); that product gives what it gives where
 * an op between makes it convert the output itself. */
static void test_attention_output_form(enum ox_dtype type, int n, int hd, bool f16_rows) {
    enum { CELLS = 40, HEADS = 8, KV_HEADS = 2, ROWS = 96 };
    int32_t q_pos[8], q_seq[8] = {0}, *cell_pos = malloc(CELLS * 4);
    uint64_t *cell_seq = calloc((size_t)CELLS * SEQ_WORDS, 8);
    for (int c = 0; c < CELLS; c++)
        cell_pos[c] = c, cell_seq[(size_t)c * SEQ_WORDS] = 1;
    for (int t = 0; t < n; t++)
        q_pos[t] = CELLS - n + t;
    size_t nq = (size_t)n * HEADS * hd, nk = (size_t)CELLS * KV_HEADS * hd;
    uint8_t *hw;
    struct mat w = random_weight(type, ROWS, HEADS * hd, &hw);
    float *q = random_floats(nq, 1.0f), *k = random_floats(nk, 1.0f), *v = random_floats(nk, 1.0f);
    struct attn_args host =
        attn_host(q, k, v, n, CELLS, HEADS, KV_HEADS, hd, q_pos, q_seq, cell_pos, cell_seq);
    struct attn_args a = attn_up(&host);
    if (f16_rows) /* read from the cache's rows (attention_decode.comp where the device takes it) */
        use_cache_rows(&a, &host, OX_DTYPE_F16);
    float *dz[2] = {gpu.ops->alloc(&gpu, (size_t)n * ROWS * 4),
                    gpu.ops->alloc(&gpu, (size_t)n * ROWS * 4)};
    for (int apart = 0; apart < 2; apart++) {
        gpu.ops->matmul(&gpu, &w, a.y, dz[apart], n); /* the product before it, of that type */
        gpu.ops->attention(&gpu, &a);
        if (apart) /* an op between: the product converts the output itself */
            gpu.ops->scale(&gpu, a.y, 1.0f, nq);
        gpu.ops->matmul(&gpu, &w, a.y, dz[apart], n);
    }
    float *fused = down(dz[0], (size_t)n * ROWS), *apart = down(dz[1], (size_t)n * ROWS);
    CHECK_CLOSE(fused, apart, (size_t)n * ROWS, 0.0, "attention's output for %s, n=%d hd %d%s",
                ox_dtype_name(type), n, hd, f16_rows ? ", f16 rows" : "");
    printf("  attention's output for %s n=%d hd %d%s\n", ox_dtype_name(type), n, hd,
           f16_rows ? ", f16 rows" : "");
    attn_free(&a);
    gpu.ops->free(&gpu, dz[0]), gpu.ops->free(&gpu, dz[1]), gpu.ops->free(&gpu, (void *)w.data);
    free(q), free(k), free(v), free(cell_pos), free(cell_seq), free(hw), free(fused), free(apart);
}

/* A decode step over f16 cache rows some of which were never written (NaN here): the cells past
 * the count in use (n_cells_now, as a recorded step reads it) and a free cell among them (no
 * sequence). Their weights are 0; the device must not let their rows into the sums (0 x NaN). */
static void test_attention_unwritten(int hd) {
    enum { CELLS = 100, USED = 60, FREE = 10, NT = 3, HEADS = 4, KV_HEADS = 2 };
    int32_t q_pos[NT] = {57, 58, 59}, q_seq[NT] = {0, 0, 0}, used = USED, cell_pos[CELLS];
    uint64_t cell_seq[CELLS * SEQ_WORDS] = {0};
    for (int c = 0; c < CELLS; c++)
        cell_pos[c] = c, cell_seq[(size_t)c * SEQ_WORDS] = c < USED && c != FREE;
    size_t nq = (size_t)NT * HEADS * hd, nk = (size_t)CELLS * KV_HEADS * hd;
    float *q = random_floats(nq, 1.0f), *k = random_floats(nk, 1.0f), *v = random_floats(nk, 1.0f);
    float *want = malloc(nq * 4);
    struct attn_args host =
        attn_host(q, k, v, NT, CELLS, HEADS, KV_HEADS, hd, q_pos, q_seq, cell_pos, cell_seq);
    struct attn_args d = attn_up(&host);
    for (size_t i = 0; i < nk; i++) { /* the rows never written: NaN on the device */
        size_t c = i / ((size_t)KV_HEADS * hd);
        if (c >= USED || c == FREE)
            k[i] = v[i] = NAN;
    }
    use_cache_rows(&d, &host, OX_DTYPE_F16);
    for (size_t i = 0; i < nk; i++) /* the CPU sees numbers there (none of them visible) */
        k[i] = isnan(k[i]) ? 0.0f : k[i], v[i] = isnan(v[i]) ? 0.0f : v[i];
    host.y = want, host.n_cells = USED;
    cpu.ops->attention(&cpu, &host);
    d.n_cells_now = up(&used, sizeof used);
    gpu.ops->attention(&gpu, &d);
    float *got = down(d.y, nq);
    CHECK_CLOSE(got, want, nq, 2e-6, "attention with rows never written, hd %d", hd);
    printf("  attention with rows never written, hd %d: relative error %.2g\n", hd,
           rel_err(got, want, nq));
    gpu.ops->free(&gpu, (void *)d.n_cells_now);
    attn_free(&d);
    free(q), free(k), free(v), free(want), free(got);
}

/* nt queries over the cache's row types and head widths: decode's shape (6) or a prompt's (40). */
static void test_row_types(int nt) {
    test_attention(nt, 0, 0.0f, false, 128, OX_DTYPE_F32);
    test_attention(nt, 0, 0.0f, false, 64, OX_DTYPE_F32);
    test_attention(nt, 40, 0.0f, false, 128, OX_DTYPE_F32);
    test_attention(nt, 0, 30.0f, true, 256, OX_DTYPE_F32);
    test_attention(nt, 0, 30.0f, true, 80, OX_DTYPE_F32);
    test_attention(nt, 0, 0.0f, false, 128, OX_DTYPE_F16);
    test_attention(nt, 40, 0.0f, true, 64, OX_DTYPE_Q8_0);
    test_attention(nt, 0, 30.0f, true, 256, OX_DTYPE_F16); /* f16 rows' split sums */
    test_attention(nt, 40, 0.0f, false, 64, OX_DTYPE_F16);
    test_attention(nt, 0, 30.0f, true, 64, OX_DTYPE_F16);
    test_attention(nt, 0, 0.0f, false, 80, OX_DTYPE_F16); /* 16-wide blocks, not 32 */
}

/* A decode step over a long context (1100 cells of one sequence): attention_decode.comp splits
 * each head's cells among workgroups, the last to finish meeting their parts; a query that sees
 * only the first cells leaves most parts empty; a window, sinks and a soft cap. */
static void test_attention_long(int hd, int window, float softcap, bool sinks) {
    enum { CELLS = 1100, NT = 4, HEADS = 8, KV_HEADS = 2 };
    int32_t q_pos[NT] = {1097, 1098, 1099, 5}, q_seq[NT] = {0, 0, 0, 0}, cell_pos[CELLS];
    uint64_t cell_seq[CELLS * SEQ_WORDS];
    memset(cell_seq, 0, sizeof cell_seq);
    for (int c = 0; c < CELLS; c++)
        cell_pos[c] = c, cell_seq[(size_t)c * SEQ_WORDS] = 1;
    size_t nq = (size_t)NT * HEADS * hd, nk = (size_t)CELLS * KV_HEADS * hd;
    float *q = random_floats(nq, 1.0f), *k = random_floats(nk, 1.0f), *v = random_floats(nk, 1.0f);
    float *sk = random_floats(HEADS, 2.0f);
    struct attn_args a =
        attn_host(q, k, v, NT, CELLS, HEADS, KV_HEADS, hd, q_pos, q_seq, cell_pos, cell_seq);
    a.window = window, a.softcap = softcap, a.sinks = sinks ? sk : NULL;
    char name[80];
    snprintf(name, sizeof name, "decode over %d cells x hd %d%s%s%s", CELLS, hd,
             window ? " window" : "", softcap != 0.0f ? " softcap" : "", sinks ? " sinks" : "");
    uint64_t before = vk_backend_decode_splits_taken(),
             decodes = vk_backend_decode_attentions_taken();
    attention_check(a, OX_DTYPE_F16, name);
    /* split wherever it ran on attention_decode.comp (not hd 256 at subgroups of 4: its shared
     * memory) and splitting is on */
    CHECK_MSG(vk_backend_decode_attentions_taken() == decodes || !vk_backend_decode_split() ||
                  vk_backend_decode_splits_taken() > before,
              "%s: not split", name);
    a.n_cells = 511; /* a shorter context (the cells past it unseen): one workgroup a head */
    before = vk_backend_decode_splits_taken();
    attention_check(a, OX_DTYPE_F16, "decode over 511 cells");
    CHECK_MSG(vk_backend_decode_splits_taken() == before, "511 cells split");
    free(q), free(k), free(v), free(sk);
}

/* Decode's shapes over the cache's row types (a query a workgroup: attention.comp, or
 * attention_decode.comp over f16 rows where the device takes it), and the bytes or halves they
 * leave for the o projection. */
static void test_decodes(void) {
    test_row_types(6);
    attention_case(6, 0, 0.0f, true, 64, OX_DTYPE_F16, true);
    for (int f16 = 0; f16 < 2; f16++) {
        enum ox_dtype type = f16 ? OX_DTYPE_F16 : OX_DTYPE_Q4_K;
        for (int rows = 0; rows < 2; rows++) {
            test_attention_output_form(type, 1, 128, rows),
                test_attention_output_form(type, 3, 64, rows);
            test_attention_output_form(type, 1, 256, rows);
        }
    }
    test_attention_spans(true, false), test_attention_spans(true, true);
    test_attention_unwritten(64), test_attention_unwritten(128), test_attention_unwritten(256);
    test_attention_long(64, 0, 0.0f, false), test_attention_long(128, 300, 0.0f, true);
    test_attention_long(256, 0, 30.0f, true);
    test_attention_long(64, 0, 0.0f, false); /* again: the counters were set back */
}

/* Prompts' shapes over the cache's row types. */
static void test_prompts(void) {
    test_row_types(40);
    /* queries in several workgroups (attention_cm.comp's 64 a group, the last one part full) */
    test_attention(130, 0, 0.0f, false, 128, OX_DTYPE_F16);
    test_attention(130, 40, 30.0f, true, 64, OX_DTYPE_F16);
    attention_case(130, 0, 0.0f, false, 64, OX_DTYPE_F16, true);
    attention_case(130, 0, 0.0f, true, 64, OX_DTYPE_F16, true);
    attention_case(130, 0, 0.0f, false, 64, OX_DTYPE_F32, true);
    /* one sequence's prompt: tiles seen whole, skipped or in part (attention_cm2.comp) */
    static const struct prompt_case prompts[] = {
        {.nt = 200, .cells = 200, .hd_k = 128, .hd_v = 128},
        {.nt = 150, .cells = 333, .hd_k = 64, .hd_v = 64},
        {.nt = 129, .cells = 300, .hd_k = 128, .hd_v = 128, .window = 70},
        {.nt = 100, .cells = 260, .hd_k = 64, .hd_v = 64, .hole = 7},
        {.nt = 64, .cells = 256, .hd_k = 128, .hd_v = 128, .reversed = true},
        {.nt = 77, .cells = 77, .hd_k = 80, .hd_v = 80},
        {.nt = 130, .cells = 300, .hd_k = 128, .hd_v = 128, .sinks = true, .softcap = 30.0f},
        {.nt = 100, .cells = 200, .hd_k = 128, .hd_v = 64, .sinks = true},
        {.nt = 100, .cells = 200, .hd_k = 64, .hd_v = 128, .window = 50},
    };
    for (size_t i = 0; i < sizeof prompts / sizeof *prompts; i++)
        attention_prompt(prompts[i]);
    test_attention_spans(false, false), test_attention_spans(false, true);
}

int main(void) {
    int rc = device_open(&backend_vulkan_ops, "Vulkan");
    if (rc)
        return rc;
    /* decode's shapes on attention_decode.comp (every device the tests meet takes its f16 rows
     * of 128 wide: subgroups of 4 to 64), then on attention.comp */
    uint64_t before = vk_backend_decode_attentions_taken();
    test_decodes();
    uint64_t taken = vk_backend_decode_attentions_taken() - before;
    CHECK_MSG(!vk_backend_decode_attention() || taken > 0, "attention_decode.comp taken %llu times",
              (unsigned long long)taken);
    printf("  decode attentions on attention_decode.comp: %llu\n", (unsigned long long)taken);
    if (vk_backend_decode_attention()) {
        vk_backend_set_decode_attention(false);
        test_decodes();
        vk_backend_set_decode_attention(true);
    }
    CHECK_MSG(vk_backend_decode_attentions_taken() == before + taken,
              "attention_decode.comp taken while off");
    test_prompts();
    gpu.ops->release(&gpu);
    cpu.ops->release(&cpu);
    return test_finish("test_vulkan_attention");
}
