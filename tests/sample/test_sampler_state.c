/* test_sampler_state.c: a sampler chain's saved state (ox_sampler_state_*) goes on exactly: the
 * tokens drawn after a load equal those drawn after the save, for chains with penalties, DRY,
 * XTC and a seeded draw, with mirostat, and with a grammar, loaded into the same chain later and
 * into a fresh one built the same way; the state of another chain, cut short or altered is
 * refused and leaves the chain drawing as before. */
#include <stdlib.h>
#include <string.h>

#include "oxidize.h"
#include "test.h"

#define N_VOCAB 50257 /* GPT-2's */
#define STEPS   24

static struct ox_vocab *vocab;
static float logits[N_VOCAB];

/* Logits that move with the step, so every draw sees a new distribution. */
static void make_logits(int step) {
    uint32_t x = 2654435761u * (uint32_t)(step + 1);
    for (int i = 0; i < N_VOCAB; i++) {
        x = x * 1664525u + 1013904223u;
        logits[i] = (float)(x >> 8) / (float)(1 << 24) * 8.0f;
    }
}

/* Draw and accept steps [from, to), the picks into out. */
static void draw(struct ox_sampler *s, int from, int to, ox_token *out) {
    for (int i = from; i < to; i++) {
        make_logits(i);
        out[i - from] = ox_sampler_sample(s, logits, N_VOCAB);
        CHECK_MSG(out[i - from] >= 0, "step %d: no pick", i);
        ox_sampler_accept(s, out[i - from]);
    }
}

typedef struct ox_sampler *(*chain_fn)(void);

static struct ox_sampler *sampling_chain(void) {
    struct ox_sampler *s = NULL;
    CHECK_EQ(ox_sampler_create(&s), OX_OK);
    CHECK_EQ(ox_sampler_add_penalties(s, 64, 1.3f, 0.1f, 0.1f), OX_OK);
    CHECK_EQ(ox_sampler_add_dry(s, vocab, 0.8f, 1.75f, 2, 64, NULL, 0), OX_OK);
    CHECK_EQ(ox_sampler_add_top_k(s, 40), OX_OK);
    CHECK_EQ(ox_sampler_add_xtc(s, 0.5f, 0.1f, 1, 11), OX_OK);
    CHECK_EQ(ox_sampler_add_temp(s, 0.9f), OX_OK);
    CHECK_EQ(ox_sampler_add_dist(s, 42), OX_OK);
    return s;
}

static struct ox_sampler *mirostat_chain(void) {
    struct ox_sampler *s = NULL;
    CHECK_EQ(ox_sampler_create(&s), OX_OK);
    CHECK_EQ(ox_sampler_add_temp(s, 0.8f), OX_OK);
    CHECK_EQ(ox_sampler_add_mirostat_v2(s, 5, 5.0f, 0.1f), OX_OK);
    return s;
}

static struct ox_sampler *grammar_chain(void) {
    static const char gbnf[] = "root ::= [a-z ]+\n";
    struct ox_sampler *s = NULL;
    CHECK_EQ(ox_sampler_create(&s), OX_OK);
    CHECK_EQ(ox_sampler_add_grammar(s, vocab, gbnf, strlen(gbnf)), OX_OK);
    CHECK_EQ(ox_sampler_add_top_k(s, 20), OX_OK);
    CHECK_EQ(ox_sampler_add_dist(s, 3), OX_OK);
    return s;
}

/* Save after STEPS draws: the next STEPS draws, again from the same chain after a load (it has
 * drawn on meanwhile), and from a fresh chain with the load. */
static void check_chain(const char *name, chain_fn make) {
    struct ox_sampler *a = make(), *b = make();
    ox_token first[STEPS], want[STEPS], again[STEPS], fresh[STEPS];
    for (int i = 0; i < 5; i++)
        ox_sampler_accept_prompt(a, 100 + i); /* a prompt in the histories */
    draw(a, 0, STEPS, first);
    size_t n = ox_sampler_state_size(a), written = 0;
    uint8_t *state = malloc(n);
    CHECK_EQ(ox_sampler_state_save(a, state, n, &written), OX_OK);
    CHECK_EQ(written, n);
    draw(a, STEPS, 2 * STEPS, want);
    CHECK_EQ(ox_sampler_state_load(a, state, n), OX_OK);
    draw(a, STEPS, 2 * STEPS, again);
    CHECK_EQ(ox_sampler_state_load(b, state, n), OX_OK);
    draw(b, STEPS, 2 * STEPS, fresh);
    CHECK_MSG(!memcmp(want, again, sizeof want), "%s: the same chain after a load differs", name);
    CHECK_MSG(!memcmp(want, fresh, sizeof want), "%s: a fresh chain after a load differs", name);
    /* refusals leave the chain as it was: it draws what it would have */
    ox_token after[STEPS], base[STEPS];
    CHECK_EQ(ox_sampler_state_load(b, state, n), OX_OK);
    CHECK_EQ(ox_sampler_state_load(b, state, n - 1), OX_ERR_FORMAT); /* cut short */
    uint8_t *bad = malloc(n);
    memcpy(bad, state, n);
    bad[12] ^= 1; /* the first stage's kind */
    CHECK_EQ(ox_sampler_state_load(b, bad, n), OX_ERR_FORMAT);
    CHECK(strstr(ox_last_error(), "not a state of this sampler chain") != NULL);
    draw(b, STEPS, 2 * STEPS, after);
    CHECK_EQ(ox_sampler_state_load(a, state, n), OX_OK);
    draw(a, STEPS, 2 * STEPS, base);
    CHECK_MSG(!memcmp(after, base, sizeof after), "%s: a refused load changed the chain", name);
    free(bad), free(state);
    ox_sampler_free(a), ox_sampler_free(b);
}

/* The state of one chain is not another's, even when their stages hold the same kind of data. */
static void check_other_chain(void) {
    struct ox_sampler *a = sampling_chain(), *m = mirostat_chain(), *p = NULL;
    CHECK_EQ(ox_sampler_create(&p), OX_OK);
    CHECK_EQ(ox_sampler_add_dry(p, vocab, 0.8f, 1.75f, 2, 64, NULL, 0), OX_OK); /* penalties' */
    CHECK_EQ(ox_sampler_add_penalties(p, 64, 1.3f, 0.1f, 0.1f), OX_OK);         /* swapped */
    CHECK_EQ(ox_sampler_add_top_k(p, 40), OX_OK);
    CHECK_EQ(ox_sampler_add_xtc(p, 0.5f, 0.1f, 1, 11), OX_OK);
    CHECK_EQ(ox_sampler_add_temp(p, 0.9f), OX_OK);
    CHECK_EQ(ox_sampler_add_dist(p, 42), OX_OK);
    size_t n = ox_sampler_state_size(a);
    uint8_t *state = malloc(n);
    CHECK_EQ(ox_sampler_state_save(a, state, n, NULL), OX_OK);
    CHECK_EQ(ox_sampler_state_load(m, state, n), OX_ERR_FORMAT);
    CHECK_EQ(ox_sampler_state_load(p, state, n), OX_ERR_FORMAT);
    CHECK_EQ(ox_sampler_state_save(a, state, n - 1, NULL), OX_ERR_INVALID_ARG); /* no room */
    free(state);
    ox_sampler_free(a), ox_sampler_free(m), ox_sampler_free(p);
}

int main(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-gpt-2.gguf", test_data_dir());
    CHECK_MSG(ox_vocab_load(path, &vocab) == OX_OK, "%s", ox_last_error());
    if (vocab) {
        check_chain("penalties, dry, top-k, xtc, temp, dist", sampling_chain);
        check_chain("temp, mirostat v2", mirostat_chain);
        check_chain("grammar, top-k, dist", grammar_chain);
        check_other_chain();
    }
    ox_vocab_free(vocab);
    return test_finish("test_sampler_state");
}
