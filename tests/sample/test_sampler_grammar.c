/* test_sampler_grammar.c: a grammar stage in a real chain over a real vocabulary: whatever the
 * logits favour, the sampled tokens spell a sentence of the grammar and end where it ends,
 * both when the first (unconstrained) pick is kept and when it has to be redrawn. */
#include <math.h>
#include <string.h>

#include "oxidize.h"
#include "test.h"

static uint32_t rng = 99;
static float uniform(void) {
    rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
    return (float)(rng >> 8) / 8388608.0f;
}

/* Sample until end-of-generation (at most 64 tokens); the text produced goes to out. */
static bool generate(const struct ox_vocab *v, const char *gbnf, ox_token favoured, char *out,
                     size_t cap) {
    struct ox_sampler *s = NULL;
    int32_t n_vocab = ox_vocab_n_tokens(v);
    static float logits[200000];
    CHECK_EQ(ox_sampler_create(&s), OX_OK);
    CHECK_EQ(ox_sampler_add_grammar(s, v, gbnf, strlen(gbnf)), OX_OK);
    CHECK_EQ(ox_sampler_add_top_k(s, 40), OX_OK);
    CHECK_EQ(ox_sampler_add_dist(s, 7), OX_OK);
    size_t len = 0;
    bool ended = false;
    for (int step = 0; step < 64 && !ended; step++) {
        for (int32_t i = 0; i < n_vocab; i++)
            logits[i] = 4.0f * uniform();
        if (favoured >= 0) /* a token the grammar rarely wants, far ahead of the rest */
            logits[favoured] = 50.0f;
        ox_token t = ox_sampler_sample(s, logits, n_vocab);
        CHECK(t >= 0);
        if (t < 0)
            break;
        if (ox_vocab_is_eog(v, t)) {
            ended = true;
            break;
        }
        int32_t n = ox_token_to_piece(v, t, out + len, cap - len - 1, 0, false);
        len += n > 0 ? (size_t)n : 0;
        CHECK_EQ(ox_sampler_accept(s, t), OX_OK);
    }
    out[len] = '\0';
    ox_sampler_free(s);
    return ended;
}

int main(void) {
    char path[1024], text[1024];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-llama-spm.gguf", test_data_dir());
    struct ox_vocab *v = NULL;
    CHECK_MSG(ox_vocab_load(path, &v) == OX_OK, "%s", ox_last_error());
    if (!v)
        return test_finish("test_sampler_grammar");
    const char *gbnf = "root ::= \" Yes\" | \" No\" | \" Maybe so\"\n";
    ox_token favoured[] = {-1, 100, 2}; /* none; some token; the end-of-sequence token */
    for (int i = 0; i < 3; i++) {
        bool ended = generate(v, gbnf, favoured[i], text, sizeof text);
        CHECK_MSG(ended &&
                      (!strcmp(text, " Yes") || !strcmp(text, " No") || !strcmp(text, " Maybe so")),
                  "favoured %d: '%s' (ended %d)", favoured[i], text, ended);
    }
    struct ox_sampler *s = NULL;
    CHECK_EQ(ox_sampler_create(&s), OX_OK);
    CHECK_EQ(ox_sampler_add_grammar(s, v, "root ::= undefined_rule\n", 24), OX_ERR_FORMAT);
    CHECK(strstr(ox_last_error(), "undefined_rule") != NULL);
    ox_sampler_free(s);
    ox_vocab_free(v);
    return test_finish("test_sampler_grammar");
}
