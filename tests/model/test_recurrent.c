/* test_recurrent.c: a model with recurrent layers (qwen35's gated delta-net, granitehybrid's
 * Mamba-2) keeps one state per sequence beside the KV cache: a prompt in pieces continues the
 * state it left, sequences in one batch keep theirs apart, seq_cp copies a state, a removal
 * from a sequence drops all of it (positions and state), a removal past its end drops nothing,
 * and clear starts every state over. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "oxidize.h"
#include "reference_files.h"

enum { N_PROMPT = 20 };

static struct ox_model *model;
static struct ox_context *ctx;
static int n_vocab;

/* Decodes tokens [0, n) of toks on sequence seq from position p0; the last token's logits into
 * out (n_vocab floats) when out is not NULL. */
static void decode(const ox_token *toks, int n, int32_t seq, int32_t p0, float *out) {
    int32_t pos[N_PROMPT], seqs[N_PROMPT];
    bool want[N_PROMPT] = {0};
    for (int i = 0; i < n; i++)
        pos[i] = p0 + i, seqs[i] = seq;
    want[n - 1] = true;
    struct ox_batch b = {.n_tokens = n, .token = toks, .pos = pos, .seq_id = seqs, .logits = want};
    CHECK_MSG(ox_decode(ctx, &b) == OX_OK, "decode: %s", ox_last_error());
    const float *l = ox_get_logits(ctx, n - 1);
    if (out && l)
        memcpy(out, l, (size_t)n_vocab * sizeof *out);
}

/* How far logits of the same history may be apart: on the CPU every batch size and cache
 * size gives the same bits; a GPU's matmuls round activations by batch size (f16 for cuBLAS,
 * q8_1 for the integer kernels) and its attention sums cells in blocks, a few 1e-3 apart. A
 * state mixed up between sequences moves logits by whole units. */
static float tolerance(float cpu) {
    return strcmp(ox_model_backend(model), "CPU") ? 2e-2f : cpu;
}

static float max_diff(const float *a, const float *b) {
    float m = 0.0f;
    for (int i = 0; i < n_vocab; i++)
        m = fmaxf(m, fabsf(a[i] - b[i]));
    return m;
}

static void check_states(const ox_token *prompt) {
    float *whole = malloc((size_t)n_vocab * sizeof *whole);
    float *piece = malloc((size_t)n_vocab * sizeof *piece);
    float *other = malloc((size_t)n_vocab * sizeof *other);
    decode(prompt, N_PROMPT, 0, 0, whole);
    decode(prompt, 7, 1, 0, NULL); /* the same prompt on sequence 1, in three pieces */
    decode(prompt + 7, 7, 1, 7, NULL);
    decode(prompt + 14, N_PROMPT - 14, 1, 14, piece);
    printf("pieces vs one batch: max |logit diff| %.2e\n", max_diff(whole, piece));
    CHECK(max_diff(whole, piece) <= tolerance(1e-4f));

    /* the next token of both sequences in one batch: the same history, the same logits */
    ox_token next[2] = {prompt[3], prompt[3]};
    int32_t pos[2] = {N_PROMPT, N_PROMPT}, seqs[2] = {0, 1};
    bool want[2] = {true, true};
    struct ox_batch b = {.n_tokens = 2, .token = next, .pos = pos, .seq_id = seqs, .logits = want};
    CHECK_EQ(ox_decode(ctx, &b), OX_OK);
    memcpy(whole, ox_get_logits(ctx, 0), (size_t)n_vocab * sizeof *whole);
    memcpy(piece, ox_get_logits(ctx, 1), (size_t)n_vocab * sizeof *piece);
    printf("two sequences in one batch: max |logit diff| %.2e\n", max_diff(whole, piece));
    CHECK(max_diff(whole, piece) <= tolerance(1e-4f));

    /* a copied sequence continues as its source does */
    ox_kv_seq_cp(ctx, 0, 2, -1, -1);
    decode(prompt + 5, 1, 2, N_PROMPT + 1, other);
    decode(prompt + 5, 1, 0, N_PROMPT + 1, whole);
    printf("a copied sequence: max |logit diff| %.2e\n", max_diff(whole, other));
    CHECK(max_diff(whole, other) <= tolerance(0.0f));

    /* removing past the end drops nothing; removing inside drops the whole sequence */
    ox_kv_seq_rm(ctx, 1, N_PROMPT + 1, -1);
    CHECK_EQ(ox_kv_seq_pos_max(ctx, 1), N_PROMPT);
    ox_kv_seq_rm(ctx, 0, 10, -1);
    CHECK_EQ(ox_kv_seq_pos_max(ctx, 0), -1);
    CHECK_EQ(ox_kv_seq_pos_max(ctx, 1), N_PROMPT);

    /* sequence 0 from the start again, beside the others: its first logits as at first */
    decode(prompt, N_PROMPT, 0, 0, other);
    ox_kv_clear(ctx);
    CHECK_EQ(ox_kv_seq_pos_max(ctx, 1), -1);
    decode(prompt, N_PROMPT, 0, 0, piece);
    printf("after clear: max |logit diff| %.2e\n", max_diff(other, piece));
    CHECK(max_diff(other, piece) <= tolerance(0.0f));
    free(whole), free(piece), free(other);
}

int main(void) {
    static const char *const names[] = {"qwen35-f16", "granitehybrid-f16"}; /* both kinds */
    for (size_t m = 0; m < sizeof names / sizeof names[0]; m++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/models/%s.gguf", ARCH_REFERENCE_DIR, names[m]);
        printf("%s:\n", names[m]);
        struct ox_model_params mp = test_model_params(); /* the GPU too, where there is one */
        CHECK_EQ(ox_model_load(path, &mp, &model), OX_OK);
        struct ox_context_params cp = ox_context_params_default();
        cp.n_ctx = 512, cp.n_seq_max = 3, cp.n_threads = 2;
        ctx = NULL;
        CHECK_EQ(model ? ox_context_create(model, &cp, &ctx) : OX_ERR_INVALID_ARG, OX_OK);
        if (ctx) {
            n_vocab = ox_model_n_vocab(model);
            ox_token prompt[N_PROMPT];
            for (int i = 0; i < N_PROMPT; i++)
                prompt[i] = (ox_token)(100 + 37 * i % (n_vocab - 100));
            check_states(prompt);
        }
        ox_context_free(ctx);
        ox_model_free(model);
    }
    return test_finish("test_recurrent");
}
