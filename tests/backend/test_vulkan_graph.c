/* test_vulkan_graph.c: the Vulkan backend's recorded decode steps (graph_begin / graph_end):
 * a step recorded once is replayed for its key over what device memory holds then (new inputs,
 * more cells in use), and a recording that an upload or a wait cut into is not replayed.
 * Skipped (77) where there is no Vulkan device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/vulkan/vk_backend.h"
#include "device_ops_common.h"
#include "test.h"

enum { CELLS = 200, HEADS = 4, HD = 64, SCALES = 40 }; /* SCALES: more than a submitted part */

/* A decode step's stand-in: SCALES dispatches of u *= 1.01, then one query's attention over the
 * cells in use, whose count the device holds. */
struct step {
    float *u, *q, *k, *v, *y;
    int32_t *pos, *seq, *cell_pos, *n_cells;
    uint64_t *cell_seq;
};

static void record_ops(const struct step *d) {
    for (int i = 0; i < SCALES; i++)
        gpu.ops->scale(&gpu, d->u, 1.01f, 64);
    struct attn_args a = {.q = d->q,
                          .k = d->k,
                          .v = d->v,
                          .y = d->y,
                          .n = 1,
                          .n_cells = 1, /* the host's count, stale when replayed */
                          .n_cells_now = d->n_cells,
                          .n_head = HEADS,
                          .n_head_kv = HEADS,
                          .hd_k = HD,
                          .hd_v = HD,
                          .q_pos = d->pos,
                          .q_seq = d->seq,
                          .cell_pos = d->cell_pos,
                          .cell_seq = d->cell_seq,
                          .scale = 0.125f};
    gpu.ops->attention(&gpu, &a);
}

/* Every cell at its own position, all of sequence 0. */
static void host_cells(int32_t **pos, uint64_t **seq) {
    *pos = malloc(CELLS * sizeof **pos), *seq = calloc((size_t)CELLS * SEQ_WORDS, sizeof **seq);
    for (int c = 0; c < CELLS; c++)
        (*pos)[c] = c, (*seq)[(size_t)c * SEQ_WORDS] = 1;
}

/* The step's results for query q, cells n and u0 against the CPU's. */
static void check_step(const struct step *d, const float *q, const float *k, const float *v, int n,
                       const float *u0, const char *what) {
    int32_t pos = CELLS, seq = 0, *cell_pos;
    uint64_t *cell_seq;
    host_cells(&cell_pos, &cell_seq);
    float want[HEADS * HD], u[64];
    struct attn_args a = {.q = q,
                          .k = k,
                          .v = v,
                          .y = want,
                          .n = 1,
                          .n_cells = n,
                          .n_head = HEADS,
                          .n_head_kv = HEADS,
                          .hd_k = HD,
                          .hd_v = HD,
                          .q_pos = &pos,
                          .q_seq = &seq,
                          .cell_pos = cell_pos,
                          .cell_seq = cell_seq,
                          .scale = 0.125f};
    cpu.ops->attention(&cpu, &a);
    for (int i = 0; i < 64; i++)
        u[i] = u0[i] * powf(1.01f, SCALES);
    float *got = down(d->y, HEADS * HD), *got_u = down(d->u, 64);
    CHECK_CLOSE(got, want, HEADS * HD, 2e-6, "%s: attention over %d cells", what, n);
    CHECK_CLOSE(got_u, u, 64, 1e-5, "%s: %d scalings", what, SCALES);
    free(got), free(got_u), free(cell_pos), free(cell_seq);
}

/* New inputs for the step (q, u and the cells in use) uploaded. */
static void set_inputs(const struct step *d, const float *q, const float *u, int32_t n) {
    gpu.ops->upload(&gpu, d->q, q, HEADS * HD * sizeof *q);
    gpu.ops->upload(&gpu, d->u, u, 64 * sizeof *u);
    gpu.ops->upload(&gpu, d->n_cells, &n, sizeof n);
}

int main(void) {
    int rc = device_open(&backend_vulkan_ops, "Vulkan");
    if (rc)
        return rc;
    CHECK(gpu.ops->graph_begin && gpu.ops->graph_end && gpu.ops->graph_max_tokens >= 1);
    size_t nk = (size_t)CELLS * HEADS * HD;
    float *k = random_floats(nk, 1.0f), *v = random_floats(nk, 1.0f);
    float *q1 = random_floats(HEADS * HD, 1.0f), *q2 = random_floats(HEADS * HD, 1.0f);
    float *u1 = random_floats(64, 1.0f), *u2 = random_floats(64, 1.0f);
    int32_t pos = CELLS, seq = 0, *cell_pos;
    uint64_t *cell_seq;
    host_cells(&cell_pos, &cell_seq);
    struct step d = {.k = up(k, nk * 4),
                     .v = up(v, nk * 4),
                     .q = up(q1, HEADS * HD * 4),
                     .u = up(u1, 64 * 4),
                     .y = gpu.ops->alloc(&gpu, HEADS * HD * 4),
                     .pos = up(&pos, 4),
                     .seq = up(&seq, 4),
                     .cell_pos = up(cell_pos, CELLS * 4),
                     .cell_seq = up(cell_seq, (size_t)CELLS * SEQ_WORDS * 8),
                     .n_cells = gpu.ops->alloc(&gpu, 4)};

    record_ops(&d); /* once unrecorded: the backend's scratch buffer grown, which a recording's
                       flush would cut short (its first step then runs unrecorded) */
    set_inputs(&d, q1, u1, 50); /* recorded: runs as it is recorded */
    CHECK(!gpu.ops->graph_begin(&gpu, 1));
    record_ops(&d);
    gpu.ops->graph_end(&gpu);
    check_step(&d, q1, k, v, 50, u1, "recorded");

    set_inputs(&d, q2, u2, 170); /* replayed: the ops not called again */
    CHECK(gpu.ops->graph_begin(&gpu, 1));
    check_step(&d, q2, k, v, 170, u2, "replayed");

    CHECK(!gpu.ops->graph_begin(&gpu, 2)); /* another key records its own */
    gpu.ops->scale(&gpu, d.u, 2.0f, 64);
    gpu.ops->graph_end(&gpu);
    set_inputs(&d, q1, u2, CELLS);
    CHECK(gpu.ops->graph_begin(&gpu, 1)); /* and the first is kept */
    check_step(&d, q1, k, v, CELLS, u2, "replayed after another key");

    CHECK(!gpu.ops->graph_begin(&gpu, 3)); /* an upload inside: runs once, not kept */
    set_inputs(&d, q2, u1, 120);
    record_ops(&d);
    gpu.ops->graph_end(&gpu);
    check_step(&d, q2, k, v, 120, u1, "recorded with an upload inside");
    CHECK(!gpu.ops->graph_begin(&gpu, 3));
    gpu.ops->graph_end(&gpu);

    CHECK(!gpu.ops->graph_begin(&gpu, 4)); /* a wait inside: the rest runs unrecorded */
    gpu.ops->scale(&gpu, d.u, 1.0f, 64);
    CHECK(gpu.ops->download(&gpu, NULL, NULL, 0) == OX_OK);
    set_inputs(&d, q1, u1, 90);
    record_ops(&d);
    gpu.ops->graph_end(&gpu);
    check_step(&d, q1, k, v, 90, u1, "cut by a wait");
    CHECK(!gpu.ops->graph_begin(&gpu, 4));
    gpu.ops->graph_end(&gpu);

    void *dev[] = {d.u, d.q, d.k, d.v, d.y, d.pos, d.seq, d.cell_pos, d.cell_seq, d.n_cells};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        gpu.ops->free(&gpu, dev[i]);
    free(k), free(v), free(q1), free(q2), free(u1), free(u2), free(cell_pos), free(cell_seq);
    gpu.ops->release(&gpu);
    cpu.ops->release(&cpu);
    return test_finish("test_vulkan_graph");
}
