/* test_state.c: a sequence's saved state continues exactly: a prompt decoded, saved, loaded
 * into a fresh context (and into another sequence of a busy one) gives the same logits, bit for
 * bit, for the tokens that follow as the context that never saved; a file keeps the tokens with
 * it; states from another model, cut short, corrupt, or too large for the free cells are
 * refused and leave the sequence as it was. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <unistd.h>

#include "oxidize.h"
#include "test.h"

#define N    20
#define MORE 6

static struct ox_model *load(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/%s", test_data_dir(), name);
    struct ox_model_params p = test_model_params();
    struct ox_model *m = NULL;
    CHECK_MSG(ox_model_load(path, &p, &m) == OX_OK, "%s: %s", name, ox_last_error());
    return m;
}

static struct ox_context *context(struct ox_model *m, uint32_t n_ctx, uint32_t n_seq) {
    struct ox_context_params p = ox_context_params_default();
    p.n_ctx = n_ctx, p.n_seq_max = n_seq, p.n_threads = 2;
    struct ox_context *c = NULL;
    CHECK_MSG(ox_context_create(m, &p, &c) == OX_OK, "%s", ox_last_error());
    return c;
}

/* Decode tokens t[0, n) of sequence seq from position p0; the last one's logits. */
static const float *feed(struct ox_context *c, const ox_token *t, int n, int32_t p0, int32_t seq) {
    int32_t pos[N], seqs[N];
    bool want[N];
    for (int i = 0; i < n; i++)
        pos[i] = p0 + i, seqs[i] = seq, want[i] = i == n - 1;
    struct ox_batch b = {.n_tokens = n, .token = t, .pos = pos, .seq_id = seqs, .logits = want};
    CHECK_EQ(ox_decode(c, &b), OX_OK);
    return ox_get_logits(c, n - 1);
}

/* The logits of MORE tokens after the prompt, one at a time, from sequence seq of c. */
static float *continue_from(struct ox_context *c, int32_t seq, int n_vocab) {
    float *out = calloc((size_t)MORE * n_vocab, sizeof *out);
    for (int i = 0; i < MORE; i++) {
        ox_token t = (ox_token)(5 + 11 * i);
        const float *l = feed(c, &t, 1, N + i, seq);
        if (l)
            memcpy(out + (size_t)i * n_vocab, l, (size_t)n_vocab * sizeof *out);
    }
    return out;
}

/* A model with recurrent layers (the repository's qwen35, gated delta-net beside attention):
 * its state goes with the KV rows, and continues as exactly. */
static void check_recurrent(void) {
    struct ox_model_params p = test_model_params();
    struct ox_model *m = NULL;
    CHECK_MSG(ox_model_load(OX_SOURCE_DIR "/tests/data/arch/models/qwen35-f16.gguf", &p, &m) ==
                  OX_OK,
              "qwen35: %s", ox_last_error());
    if (!m)
        return;
    int nv = ox_model_n_vocab(m);
    ox_token prompt[N];
    for (int i = 0; i < N; i++)
        prompt[i] = (ox_token)((3 + 37 * i) % nv);
    struct ox_context *a = context(m, 128, 1), *b = context(m, 128, 2);
    feed(a, prompt, N, 0, 0);
    size_t size = ox_state_seq_size(a, 0);
    uint8_t *state = malloc(size);
    CHECK_EQ(ox_state_seq_save(a, 0, state, size, NULL), OX_OK);
    float *want = continue_from(a, 0, nv);
    CHECK_MSG(ox_state_seq_load(b, 1, state, size) == OX_OK, "%s", ox_last_error());
    float *got = continue_from(b, 1, nv);
    CHECK_MSG(!memcmp(want, got, (size_t)MORE * nv * sizeof *got),
              "qwen35: logits after the load differ");
    free(want), free(got), free(state);
    ox_context_free(a), ox_context_free(b);
    ox_model_free(m);
}

int main(void) {
    struct ox_model *m = load("llama-q8_0.gguf"), *other = load("llama-q4_0.gguf");
    if (!m || !other)
        return test_finish("test_state");
    int nv = ox_model_n_vocab(m);
    ox_token prompt[N];
    for (int i = 0; i < N; i++)
        prompt[i] = (ox_token)((3 + 37 * i) % nv);

    /* the reference: a context that never saves */
    struct ox_context *a = context(m, 128, 1);
    feed(a, prompt, N, 0, 0);
    size_t size = ox_state_seq_size(a, 0), written = 0;
    uint8_t *state = malloc(size);
    CHECK(size > 0 && state);
    CHECK_MSG(ox_state_seq_save(a, 0, state, size, &written) == OX_OK, "%s", ox_last_error());
    CHECK_EQ(written, size);
    float *want = continue_from(a, 0, nv);

    /* a fresh context: the same bits */
    struct ox_context *b = context(m, 128, 1);
    CHECK_MSG(ox_state_seq_load(b, 0, state, size) == OX_OK, "%s", ox_last_error());
    CHECK_EQ(ox_kv_seq_pos_max(b, 0), N - 1);
    float *got = continue_from(b, 0, nv);
    CHECK_MSG(!memcmp(want, got, (size_t)MORE * nv * sizeof *got), "fresh context: logits differ");
    free(got);

    /* sequence 2 of a context whose sequences 0 and 1 hold other tokens (which stay theirs) */
    struct ox_context *c = context(m, 256, 3);
    ox_token noise[N];
    for (int i = 0; i < N; i++)
        noise[i] = (ox_token)((7 + 13 * i) % nv);
    feed(c, noise, N, 0, 0), feed(c, noise, 9, 0, 1);
    CHECK_MSG(ox_state_seq_load(c, 2, state, size) == OX_OK, "%s", ox_last_error());
    got = continue_from(c, 2, nv);
    CHECK_MSG(!memcmp(want, got, (size_t)MORE * nv * sizeof *got), "busy context: logits differ");
    CHECK_EQ(ox_kv_seq_pos_max(c, 0), N - 1);
    CHECK_EQ(ox_kv_seq_pos_max(c, 1), 8);
    free(got);

    /* a file with its tokens */
    char path[] = "/tmp/ox-state-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    CHECK_MSG(ox_state_seq_save_file(b, 0, path, prompt, N) == OX_OK, "%s", ox_last_error());
    struct ox_context *d = context(m, 128, 1);
    ox_token back[64];
    size_t n_back = 0;
    CHECK_MSG(ox_state_seq_load_file(d, 0, path, back, 64, &n_back) == OX_OK, "%s",
              ox_last_error());
    CHECK(n_back == N && !memcmp(back, prompt, sizeof prompt));
    CHECK_EQ(ox_kv_seq_pos_max(d, 0), N + MORE - 1); /* b had gone on by MORE tokens */
    CHECK(ox_state_seq_load_file(d, 0, path, back, 4, &n_back) == OX_ERR_INVALID_ARG);

    /* refused: another model, cut short, corrupt magic, more cells than are free */
    struct ox_context *e = context(other, 128, 1);
    feed(e, noise, 3, 0, 0);
    CHECK(ox_state_seq_load(e, 0, state, size) == OX_ERR_FORMAT &&
          strstr(ox_last_error(), "another model"));
    CHECK_EQ(ox_kv_seq_pos_max(e, 0), 2); /* untouched */
    CHECK(ox_state_seq_load(b, 0, state, size - 1) == OX_ERR_FORMAT);
    uint8_t *bad = malloc(size);
    memcpy(bad, state, size);
    bad[0] = 'X';
    CHECK(ox_state_seq_load(b, 0, bad, size) == OX_ERR_FORMAT);
    free(bad);
    struct ox_context *small = context(m, 16, 1);
    CHECK(ox_state_seq_load(small, 0, state, size) != OX_OK);
    CHECK(ox_state_seq_load(b, 7, state, size) == OX_ERR_INVALID_ARG);
    FILE *f = fopen(path, "ab"); /* a byte past the end of the file */
    fputc(0, f);
    fclose(f);
    CHECK(ox_state_seq_load_file(d, 0, path, back, 64, &n_back) == OX_ERR_FORMAT);
    unlink(path);

    check_recurrent();
    free(want), free(state);
    ox_context_free(a), ox_context_free(b), ox_context_free(c), ox_context_free(d);
    ox_context_free(e), ox_context_free(small);
    ox_model_free(m), ox_model_free(other);
    return test_finish("test_state");
}
