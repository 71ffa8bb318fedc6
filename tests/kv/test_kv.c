/* test_kv.c: the KV cache's cells and sequences (src/kv): placement, the sequence operations,
 * shifts and row sizes, by hand-worked cases and against a plain model of random operations. */
#include <stdlib.h>
#include <string.h>

#include "kv/kv_cache.h"
#include "quant/dtype.h"
#include "test.h"

/* The cells a shift reports moved. */
struct moves {
    int32_t cells[4];
    int n;
};

static void record(void *user, int32_t cell) {
    struct moves *m = user;
    m->cells[m->n++] = cell;
}

/* A worked example on 4 cells: a prompt of 3 tokens, a fork, removal, reuse, a shift. */
static void test_worked_example(void) {
    struct kv_cache kv;
    CHECK(kv_init(&kv, OX_DTYPE_F16, 4) == OX_OK);
    int32_t next[OX_SEQ_MAX], cells[4];
    kv_next_positions(&kv, next);
    CHECK_EQ(next[0], 0);
    CHECK_EQ(kv_seq_pos_max(&kv, 0), -1);
    int32_t pos[3] = {0, 1, 2}, seq[3] = {0, 0, 0};
    CHECK(kv_place(&kv, 3, pos, seq, cells) == OX_OK);
    CHECK(cells[0] == 0 && cells[1] == 1 && cells[2] == 2);
    CHECK_EQ(kv.used_end, 3);
    CHECK_EQ(kv_seq_pos_max(&kv, 0), 2);
    kv_next_positions(&kv, next);
    CHECK(next[0] == 3 && next[1] == 0);

    /* two more do not fit in the one cell left: refused, nothing changed */
    int32_t pos_before[4], cells2[2];
    uint64_t seq_before[4 * SEQ_WORDS];
    memcpy(pos_before, kv.pos, sizeof pos_before);
    memcpy(seq_before, kv.seq, sizeof seq_before);
    CHECK(kv_place(&kv, 2, (int32_t[]){3, 4}, (int32_t[]){0, 0}, cells2) == OX_ERR_CONTEXT_FULL);
    CHECK(!memcmp(pos_before, kv.pos, sizeof pos_before));
    CHECK(!memcmp(seq_before, kv.seq, sizeof seq_before));
    CHECK_EQ(kv.used_end, 3);

    /* sequence 200 (a later word of the sets) shares positions 1 and 2 */
    kv_seq_cp(&kv, 0, 200, 1, -1);
    CHECK(!kv_cell_in(&kv, 0, 200) && kv_cell_in(&kv, 1, 200) && kv_cell_in(&kv, 2, 200));
    CHECK_EQ(kv_seq_pos_max(&kv, 200), 2);
    CHECK(kv_seq_holds(&kv, 200, 2, 3) && !kv_seq_holds(&kv, 200, 0, 1));

    /* sequence 0 leaves everything: cell 0 is free, 1 and 2 stay for 200 */
    kv_seq_rm(&kv, 0, -1, -1);
    CHECK(kv.pos[0] == -1 && kv.pos[1] == 1 && kv.pos[2] == 2);
    CHECK_EQ(kv_seq_pos_max(&kv, 0), -1);
    CHECK(!kv_seq_holds(&kv, 0, -1, -1) && kv_seq_holds(&kv, -1, -1, -1));

    /* the lowest free cell goes first */
    CHECK(kv_place(&kv, 1, (int32_t[]){7}, (int32_t[]){5}, cells) == OX_OK);
    CHECK_EQ(cells[0], 0);
    CHECK(kv_cell_in(&kv, 0, 5) && !kv_cell_in(&kv, 0, 200));

    /* 200 shifted back by 2: position 1 falls out (freed), 2 becomes 0 and is reported */
    struct moves moved = {{0}, 0};
    kv_seq_add(&kv, 200, -1, -1, -2, record, &moved);
    CHECK(moved.n == 1 && moved.cells[0] == 2);
    CHECK(kv.pos[1] == -1 && kv.pos[2] == 0);
    CHECK(!kv_cell_in(&kv, 1, 200));
    CHECK_EQ(kv_seq_pos_max(&kv, 200), 0);

    kv_clear(&kv);
    CHECK_EQ(kv.used_end, 0);
    for (int c = 0; c < 4; c++)
        CHECK(kv.pos[c] == -1 && !kv_cell_in(&kv, c, 200) && !kv_cell_in(&kv, c, 5));
    kv_free(&kv);
}

/* Row sizes: f16 keys of 64 floats are 128 bytes; values kept in the keys' rows read those;
 * q8_0 rows are 34 bytes a block of 32. */
static void test_rows(void) {
    struct kv_cache kv;
    CHECK(kv_init(&kv, OX_DTYPE_F16, 2) == OX_OK);
    kv_set_layer(&kv, 0, 64, 32);
    kv_set_layer(&kv, 1, 64, 0);
    CHECK(kv.k_row[0] == 128 && kv.v_row[0] == 64 && kv_v_row(&kv, 0) == 64);
    CHECK(kv.k_row[1] == 128 && kv.v_row[1] == 0 && kv_v_row(&kv, 1) == 128);
    CHECK(kv.k_row[2] == 0 && kv_v_row(&kv, 2) == 0); /* a layer keeping none */
    kv_free(&kv);
    CHECK(kv_init(&kv, OX_DTYPE_Q8_0, 2) == OX_OK);
    kv_set_layer(&kv, 0, 64, 64);
    CHECK(kv.k_row[0] == 68 && kv.v_row[0] == 68);
    kv_free(&kv);
}

/* The plain model: per cell a position and a membership per sequence, each operation written
 * as its definition reads. */
enum { CELLS = 24, SEQS = 6 };
struct plain {
    int32_t pos[CELLS];
    bool in[CELLS][SEQS];
};

static bool plain_range(int32_t pos, int32_t p0, int32_t p1) {
    return pos >= (p0 < 0 ? 0 : p0) && (p1 < 0 || pos < p1);
}

static void plain_free(struct plain *p, int c) {
    p->pos[c] = -1;
    memset(p->in[c], 0, sizeof p->in[c]);
}

static bool plain_empty(const struct plain *p, int c) {
    for (int s = 0; s < SEQS; s++)
        if (p->in[c][s])
            return false;
    return true;
}

static void check_same(const struct kv_cache *kv, const struct plain *p, int step) {
    for (int c = 0; c < CELLS; c++) {
        CHECK_MSG(kv->pos[c] == p->pos[c], "step %d cell %d: pos %d, want %d", step, c, kv->pos[c],
                  p->pos[c]);
        for (int s = 0; s < SEQS; s++)
            CHECK_MSG(kv_cell_in(kv, c, s) == p->in[c][s], "step %d cell %d seq %d", step, c, s);
        if (p->pos[c] >= 0)
            CHECK_MSG(c < kv->used_end, "step %d: cell %d in use past used_end", step, c);
    }
    for (int s = 0; s < SEQS; s++) {
        int32_t max = -1;
        for (int c = 0; c < CELLS; c++)
            if (p->pos[c] >= 0 && p->in[c][s] && p->pos[c] > max)
                max = p->pos[c];
        CHECK_MSG(kv_seq_pos_max(kv, s) == max, "step %d seq %d max", step, s);
    }
    struct kv_cache spans = *kv; /* kv_spans writes only its own span array */
    kv_spans(&spans);
    for (int s = 0; s < SEQS; s++) {
        int32_t first = 0, end = 0;
        for (int c = 0; c < CELLS; c++)
            if (p->pos[c] >= 0 && p->in[c][s]) {
                first = end ? first : c;
                end = c + 1;
            }
        CHECK_MSG(spans.span[2 * s] == first && spans.span[2 * s + 1] == end,
                  "step %d seq %d: span [%d, %d), want [%d, %d)", step, s, spans.span[2 * s],
                  spans.span[2 * s + 1], first, end);
    }
}

/* The plain model's cell for a token of sequence seq: the first free one of its region (the
 * seq-th of `regions` equal runs) if it has one, else the first free one; -1 when none. */
static int plain_cell(const struct plain *p, int regions, int seq) {
    int size = regions > 1 ? CELLS / regions : 0;
    for (int c = seq * size; size && seq < regions && c < (seq + 1) * size; c++)
        if (p->pos[c] < 0)
            return c;
    for (int c = 0; c < CELLS; c++)
        if (p->pos[c] < 0)
            return c;
    return -1;
}

/* 4000 random operations, with the cells in `regions` runs (0: none), each against the plain
 * model. */
static void test_random_operations(int regions) {
    struct kv_cache kv;
    struct plain p;
    CHECK(kv_init(&kv, OX_DTYPE_F16, CELLS) == OX_OK);
    kv_set_regions(&kv, regions);
    for (int c = 0; c < CELLS; c++)
        plain_free(&p, c);
    srand(7);
    for (int step = 0; step < 4000 && !test_failures; step++) {
        int op = rand() % 5, s = rand() % SEQS, s2 = rand() % SEQS;
        int32_t p0 = rand() % 12 - 2, p1 = rand() % 3 ? p0 + rand() % 10 : -1;
        if (op == 0) { /* a batch of 1-5 tokens at random positions and sequences */
            int n = 1 + rand() % 5, found = 0, want[5];
            int32_t pos[5], seq[5], cells[5];
            for (int t = 0; t < n; t++)
                pos[t] = rand() % 16, seq[t] = rand() % SEQS;
            struct plain before = p;
            for (int t = 0; t < n && (want[t] = plain_cell(&p, regions, seq[t])) >= 0; t++) {
                found++;
                p.pos[want[t]] = pos[t]; /* taken for the batch's next tokens */
            }
            p = before;
            enum ox_status st = kv_place(&kv, n, pos, seq, cells);
            CHECK_EQ(st, found < n ? OX_ERR_CONTEXT_FULL : OX_OK);
            for (int t = 0; st == OX_OK && t < n; t++) {
                CHECK_EQ(cells[t], want[t]);
                plain_free(&p, want[t]);
                p.pos[want[t]] = pos[t], p.in[want[t]][seq[t]] = true;
            }
        } else if (op == 1) { /* remove one sequence, or every one (-1) */
            int seq = rand() % 4 ? s : -1;
            kv_seq_rm(&kv, seq, p0, p1);
            for (int c = 0; c < CELLS; c++) {
                if (p.pos[c] < 0 || !plain_range(p.pos[c], p0, p1))
                    continue;
                for (int q = 0; q < SEQS; q++)
                    p.in[c][q] &= seq >= 0 && q != seq;
                if (plain_empty(&p, c))
                    p.pos[c] = -1;
            }
        } else if (op == 2) {
            kv_seq_cp(&kv, s, s2, p0, p1);
            for (int c = 0; c < CELLS; c++)
                if (p.pos[c] >= 0 && p.in[c][s] && plain_range(p.pos[c], p0, p1))
                    p.in[c][s2] = true;
        } else if (op == 3) {
            int32_t delta = rand() % 9 - 4;
            kv_seq_add(&kv, s, p0, p1, delta, NULL, NULL);
            for (int c = 0; c < CELLS; c++) {
                if (p.pos[c] < 0 || !p.in[c][s] || !plain_range(p.pos[c], p0, p1))
                    continue;
                p.pos[c] += delta;
                if (p.pos[c] < 0)
                    plain_free(&p, c);
            }
        } else {
            bool any = false;
            for (int c = 0; c < CELLS; c++)
                any |= p.pos[c] >= 0 && p.in[c][s] && plain_range(p.pos[c], p0, p1);
            CHECK_EQ(kv_seq_holds(&kv, s, p0, p1), any);
        }
        check_same(&kv, &p, step);
    }
    kv_free(&kv);
}

/* A step of several sequences' next tokens: each in its own run of cells, so a sequence's
 * cells stay together; one that outgrows its run goes on in the first free cell. */
static void test_regions(void) {
    struct kv_cache kv;
    int32_t cells[4];
    CHECK(kv_init(&kv, OX_DTYPE_F16, 8) == OX_OK);
    kv_set_regions(&kv, 4); /* runs of 2 cells */
    for (int32_t step = 0; step < 2; step++) {
        CHECK(kv_place(&kv, 4, (int32_t[]){step, step, step, step}, (int32_t[]){3, 2, 1, 0},
                       cells) == OX_OK);
        for (int t = 0; t < 4; t++)
            CHECK_EQ(cells[t], 2 * (3 - t) + step);
    }
    kv_spans(&kv);
    for (int s = 0; s < 4; s++)
        CHECK(kv.span[2 * s] == 2 * s && kv.span[2 * s + 1] == 2 * s + 2);
    CHECK(kv.span[8] == 0 && kv.span[9] == 0); /* sequence 4 holds nothing */
    kv_seq_rm(&kv, 0, -1, -1);                 /* cells 0 and 1 free again */
    CHECK(kv_place(&kv, 1, (int32_t[]){2}, (int32_t[]){3}, cells) == OX_OK);
    CHECK_EQ(cells[0], 0); /* sequence 3's run is full: the first free cell */
    kv_spans(&kv);
    CHECK(kv.span[6] == 0 && kv.span[7] == 8);
    kv_set_regions(&kv, 9); /* more runs than cells: none */
    CHECK_EQ(kv.n_regions, 0);
    kv_free(&kv);
}

int main(void) {
    test_worked_example();
    test_rows();
    test_random_operations(0);
    test_random_operations(4); /* sequences 0-3 in regions of 6 cells, 4 and 5 anywhere */
    test_regions();
    return test_finish("kv");
}
