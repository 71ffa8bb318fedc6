/* test_sampler_ext.c: penalties, DRY, typical, top-n-sigma, XTC, mirostat and logit bias
 * against llama.cpp's test-sampling.cpp vectors and hand-computed cases. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "oxidize.h"
#include "sample/sample.h"
#include "test.h"

static struct ox_sampler *new_sampler(void) {
    struct ox_sampler *s = NULL;
    CHECK_EQ(ox_sampler_create(&s), OX_OK);
    return s;
}

/* As test-sampling.cpp's sampler_tester: logits = log(probs), the chain runs, and the
 * surviving candidates' p must equal the expected list, in order (to 1e-5). Frees s. */
static void expect_probs(struct ox_sampler *s, const float *probs, int n, const float *want,
                         size_t n_want, int line) {
    float logits[16];
    for (int i = 0; i < n; i++)
        logits[i] = logf(probs[i]);
    const struct smp_cand *c;
    size_t k = 0;
    ptrdiff_t sel;
    CHECK_EQ(smp_sampler_apply(s, logits, n, &c, &k, &sel), OX_OK);
    CHECK_MSG(k == n_want, "line %d: kept %zu, want %zu", line, k, n_want);
    for (size_t i = 0; i < k && i < n_want; i++)
        CHECK_MSG(fabsf(c[i].p - want[i]) < 1e-5f, "line %d: p[%zu] = %f, want %f", line, i,
                  (double)c[i].p, (double)want[i]);
    ox_sampler_free(s);
}

#define N(a)                   (sizeof(a) / sizeof((a)[0]))
#define EXPECT(s, probs, want) expect_probs((s), (probs), (int)N(probs), (want), N(want), __LINE__)

/* ---- penalties (test-sampling.cpp's six cases) -------------------------------------------- */

static void penalties_case(const int32_t *last, size_t n_last, const float *want, float rep,
                           float freq, float pres, int line) {
    static const float P5[5] = {0.2f, 0.2f, 0.2f, 0.2f, 0.2f};
    struct ox_sampler *s = new_sampler();
    CHECK_EQ(ox_sampler_add_penalties(s, (int32_t)n_last, rep, freq, pres), OX_OK);
    CHECK_EQ(ox_sampler_add_dist(s, 0), OX_OK);
    for (size_t i = 0; i < n_last; i++)
        CHECK_EQ(ox_sampler_accept(s, last[i]), OX_OK);
    expect_probs(s, P5, 5, want, 5, line);
}

static void test_penalties(void) {
    static const int32_t L1[] = {0}, L3[] = {0, 1, 2}, L5[] = {0, 1, 2, 0, 0};
    /* repeat 50: log(0.2) < 0 is multiplied by 50, so a seen token's p goes to ~0 */
    penalties_case(L1, 1, (const float[]){0, 0.25f, 0.25f, 0.25f, 0.25f}, 50, 0, 0, __LINE__);
    penalties_case(L3, 3, (const float[]){0, 0, 0, 0.5f, 0.5f}, 50, 0, 0, __LINE__);
    penalties_case(L5, 5, (const float[]){0, 0, 0, 0.5f, 0.5f}, 50, 0, 0, __LINE__);
    /* freq 5, presence 5: a token seen c times loses 5c + 5 */
    penalties_case(L1, 1, (const float[]){0.000011f, 0.249997f, 0.249997f, 0.249997f, 0.249997f}, 1,
                   5, 5, __LINE__);
    penalties_case(L3, 3, (const float[]){0.000023f, 0.000023f, 0.000023f, 0.499966f, 0.499966f}, 1,
                   5, 5, __LINE__);
    penalties_case(L5, 5, (const float[]){0.000000f, 0.000023f, 0.000023f, 0.499977f, 0.499977f}, 1,
                   5, 5, __LINE__);
    /* the window: last_n = 1 only remembers the newest token (2), so 0 is not penalized */
    struct ox_sampler *s = new_sampler();
    CHECK_EQ(ox_sampler_add_penalties(s, 1, 50, 0, 0), OX_OK);
    CHECK_EQ(ox_sampler_add_dist(s, 0), OX_OK);
    CHECK_EQ(ox_sampler_accept(s, 0), OX_OK);
    CHECK_EQ(ox_sampler_accept(s, 2), OX_OK);
    EXPECT(s, ((const float[]){0.25f, 0.25f, 0.25f, 0.25f}),
           ((const float[]){0.333333f, 0.333333f, 0, 0.333333f}));
    /* reset forgets the history */
    s = new_sampler();
    CHECK_EQ(ox_sampler_add_penalties(s, 4, 50, 0, 0), OX_OK);
    CHECK_EQ(ox_sampler_add_dist(s, 0), OX_OK);
    CHECK_EQ(ox_sampler_accept(s, 0), OX_OK);
    ox_sampler_reset(s);
    EXPECT(s, ((const float[]){0.5f, 0.5f}), ((const float[]){0.5f, 0.5f}));
}

/* ---- DRY (test-sampling.cpp's five cases, token-id breakers) ------------------------------ */

static void dry_case(const float *probs, int n, const int32_t *last, size_t n_last,
                     const float *want, float mult, float base, int allowed, int last_n,
                     const int32_t *breaker, size_t breaker_len, int line) {
    struct ox_sampler *s = new_sampler();
    const int32_t *br[1] = {breaker};
    CHECK_EQ(smp_sampler_add_dry_tokens(s, mult, base, allowed, last_n, br, &breaker_len,
                                        breaker ? 1 : 0),
             OX_OK);
    CHECK_EQ(ox_sampler_add_dist(s, 0), OX_OK);
    for (size_t i = 0; i < n_last; i++)
        CHECK_EQ(ox_sampler_accept(s, last[i]), OX_OK);
    expect_probs(s, probs, n, want, (size_t)n, line);
}

static void test_dry(void) {
    static const float P4[4] = {0.25f, 0.25f, 0.25f, 0.25f};
    static const float P5[5] = {0.2f, 0.2f, 0.2f, 0.2f, 0.2f};
    /* too short a history: nothing happens */
    dry_case(P4, 4, (const int32_t[]){0, 1}, 2, P4, 1.0f, 1.1f, 2, 4, NULL, 0, __LINE__);
    /* 0 1 2 0 1: "0 1" repeats, so 2 would extend it to length 3: penalty 1 * 1.1^0 */
    dry_case(P4, 4, (const int32_t[]){0, 1, 2, 0, 1}, 5,
             (const float[]){0.296923f, 0.296923f, 0.109232f, 0.296923f}, 1.0f, 1.1f, 2, 5, NULL, 0,
             __LINE__);
    /* breaker 3 splits the history, so the repeat "0 1" is cut */
    dry_case(P5, 5, (const int32_t[]){0, 1, 3, 4, 0, 1}, 6, P5, 1.0f, 1.1f, 2, 6,
             (const int32_t[]){3}, 1, __LINE__);
    dry_case(P5, 5, (const int32_t[]){0, 1, 2, 0, 1}, 5,
             (const float[]){0.241818f, 0.241818f, 0.032727f, 0.241818f, 0.241818f}, 2.0f, 1.1f, 2,
             5, NULL, 0, __LINE__);
    dry_case(P5, 5, (const int32_t[]){0, 1, 2, 3, 4, 0, 1}, 7, P5, 1.0f, 1.1f, 4, 7, NULL, 0,
             __LINE__);
    /* a two-token breaker "3 4" (head 3, then 4). History 3 4 0 1 2 3 4 0 1: the suffix
     * "3 4 0 1" occurred before, followed by 2, so 2 would make a repeat of 5 > allowed 2:
     * penalty 1.1^(4-2) = 1.21. With the breaker the repeat may not reach back past the
     * newest "3 4": capped at 2, penalty 1.1^0 = 1. */
    static const int32_t H[9] = {3, 4, 0, 1, 2, 3, 4, 0, 1};
    dry_case(P5, 5, H, 9, (const float[]){0.232656f, 0.232656f, 0.069377f, 0.232656f, 0.232656f},
             1.0f, 1.1f, 2, 9, NULL, 0, __LINE__);
    dry_case(P5, 5, H, 9, (const float[]){0.228945f, 0.228945f, 0.084224f, 0.228945f, 0.228945f},
             1.0f, 1.1f, 2, 9, (const int32_t[]){3, 4}, 2, __LINE__);
}

/* DRY's breakers from strings over a real vocabulary: "\n" is one GPT-2 token (198), a
 * single-token breaker, so it is never penalized even when it would extend a repeat. */
static struct ox_vocab *VOCAB_GPT2;

static void test_dry_vocab(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-gpt-2.gguf", test_data_dir());
    struct ox_vocab *v = NULL;
    if (ox_vocab_load(path, &v) != OX_OK) {
        printf("test_dry_vocab: skipped (%s)\n", ox_last_error());
        return;
    }
    ox_token nl = -1;
    size_t n = 0;
    CHECK_EQ(ox_tokenize(v, "\n", 1, &nl, 1, &n, false, false), OX_OK);
    CHECK_EQ(n, 1);
    static const char *const BR[] = {"\n", "", NULL};
    /* history a b NL a b: NL would extend "a b" (length 2 >= allowed 2) */
    const int32_t hist[5] = {10, 11, nl, 10, 11};
    float *logits = calloc((size_t)nl + 1, sizeof *logits);
    for (int with_breaker = 0; with_breaker < 2; with_breaker++) {
        struct ox_sampler *s = new_sampler();
        CHECK_EQ(ox_sampler_add_dry(s, v, 1.0f, 1.75f, 2, 16, BR, with_breaker ? 3 : 0), OX_OK);
        for (int i = 0; i < 5; i++)
            CHECK_EQ(ox_sampler_accept(s, hist[i]), OX_OK);
        const struct smp_cand *c;
        size_t k;
        ptrdiff_t sel;
        CHECK_EQ(smp_sampler_apply(s, logits, nl + 1, &c, &k, &sel), OX_OK);
        /* with the breaker the repeat is cut at NL (rep_limit 2 >= allowed): NL itself is
         * exempt; without it NL loses 1 * 1.75^0 */
        CHECK_NEAR(c[nl].logit, with_breaker ? 0.0 : -1.0, 1e-6);
        ox_sampler_free(s);
    }
    free(logits);
    VOCAB_GPT2 = v; /* kept for golden_dry_vocab, freed in main */
}

/* ---- typical, top-n-sigma, XTC (test-sampling.cpp's cases) -------------------------------- */

static void test_typical(void) {
    struct ox_sampler *s = new_sampler();
    CHECK_EQ(ox_sampler_add_typical(s, 0.5f, 0), OX_OK);
    EXPECT(s, ((const float[]){0.97f, 0.01f, 0.01f, 0.01f}), ((const float[]){0.97f}));
    s = new_sampler();
    CHECK_EQ(ox_sampler_add_typical(s, 0.5f, 0), OX_OK);
    EXPECT(s, ((const float[]){0.4f, 0.2f, 0.2f, 0.2f}), ((const float[]){0.2f, 0.2f, 0.2f}));
    /* min_keep 4 overrides the cut */
    s = new_sampler();
    CHECK_EQ(ox_sampler_add_typical(s, 0.5f, 4), OX_OK);
    EXPECT(s, ((const float[]){0.97f, 0.01f, 0.01f, 0.01f}),
           ((const float[]){0.97f, 0.01f, 0.01f, 0.01f}));
}

static void test_top_n_sigma(void) {
    static const float P[4] = {0.1f, 0.2f, 0.3f, 0.4f};
    /* logits ln .1 .. ln .4: mean -1.5439, sd 0.5048; max - sd = -1.4211 keeps .3 and .4 */
    static const float W1[4] = {0.0f, 0.0f, 0.428571f, 0.571429f};
    const float ns[3] = {1.0f, 0.0f, 3.0f};
    const float *want[3] = {W1, P, P};
    for (int i = 0; i < 3; i++) {
        struct ox_sampler *s = new_sampler();
        CHECK_EQ(ox_sampler_add_top_n_sigma(s, ns[i]), OX_OK);
        CHECK_EQ(ox_sampler_add_dist(s, 0), OX_OK);
        expect_probs(s, P, 4, want[i], 4, __LINE__);
    }
}

static void test_xtc(void) {
    static const float P[4] = {0.4f, 0.3f, 0.2f, 0.1f};
    /* mt19937(0)'s first float is 0.549 < 0.99, so XTC fires: every token with p >= t but
     * the last of them is dropped */
    const float ts[4] = {0.09f, 0.19f, 0.29f, 0.39f};
    const size_t n_want[4] = {1, 2, 3, 4};
    for (int i = 0; i < 4; i++) {
        struct ox_sampler *s = new_sampler();
        CHECK_EQ(ox_sampler_add_xtc(s, 0.99f, ts[i], 0, 0), OX_OK);
        expect_probs(s, P, 4, P + 4 - n_want[i], n_want[i], __LINE__);
    }
    /* probability 0.5 with mt19937(0): the draw 0.549 > 0.5, nothing happens */
    struct ox_sampler *s = new_sampler();
    CHECK_EQ(ox_sampler_add_xtc(s, 0.5f, 0.09f, 0, 0), OX_OK);
    EXPECT(s, P, ((const float[]){0, 0, 0, 0}));
    /* min_keep 2: keeping 1 is not enough, so nothing is dropped */
    s = new_sampler();
    CHECK_EQ(ox_sampler_add_xtc(s, 0.99f, 0.09f, 2, 0), OX_OK);
    EXPECT(s, P, P);
}

static void test_canonical_float(void) {
    struct smp_mt19937 r;
    smp_mt_seed(&r, 0u); /* std::mt19937(0)'s first output 2357136044, / 2^32 in float */
    CHECK(smp_mt_canonical_float(&r) == 2357136044.0f / 4294967296.0f);
}

/* ---- mirostat (hand-computed) -------------------------------------------------------------- */

/* probs .5 .25 .125 .125, tau 1 (mu = 2), eta .1, seed 5489 (first canonical double .135).
 * v1, m = 100, n_vocab 4: s_hat = (t0 b0 + t1 b1 + t2 b2) / sum t^2 with t_i = ln((i+2)/(i+1)),
 * b_i = ln(p_i / p_i+1) = (ln2 ln2 + ln1.5 ln2 + 0) / (.4805 + .1644 + .0828) = 1.04657;
 * k = (eps 2^mu / (1 - 4^-eps))^(1/s_hat) = 2.838 -> top-2 -> {2/3, 1/3}, .135 picks 0.
 * v2: surprises 1 2 3 3 bits; those <= mu = 2 stay -> {2/3, 1/3}, picks 0. */
static void test_mirostat(void) {
    static const float P[4] = {0.5f, 0.25f, 0.125f, 0.125f};
    float logits[4];
    for (int i = 0; i < 4; i++)
        logits[i] = logf(P[i]);
    for (int v = 1; v <= 2; v++) {
        struct ox_sampler *s = new_sampler();
        CHECK_EQ(v == 1 ? ox_sampler_add_mirostat(s, 4, 5489, 1.0f, 0.1f, 100)
                        : ox_sampler_add_mirostat_v2(s, 5489, 1.0f, 0.1f),
                 OX_OK);
        const struct smp_cand *c;
        size_t k;
        ptrdiff_t sel;
        CHECK_EQ(smp_sampler_apply(s, logits, 4, &c, &k, &sel), OX_OK);
        CHECK_EQ(k, 2);
        CHECK_EQ(sel, 0);
        CHECK_NEAR(c[0].p, 2.0 / 3, 1e-6);
        CHECK_NEAR(c[1].p, 1.0 / 3, 1e-6);
        /* a picker ends a chain; the same seed after reset gives the same picks */
        ox_token a[8], b[8];
        ox_sampler_reset(s);
        for (int i = 0; i < 8; i++)
            a[i] = ox_sampler_sample(s, logits, 4);
        ox_sampler_reset(s);
        for (int i = 0; i < 8; i++)
            b[i] = ox_sampler_sample(s, logits, 4);
        int same = 1;
        for (int i = 0; i < 8; i++)
            same &= a[i] == b[i] && a[i] >= 0 && a[i] < 4;
        CHECK(same);
        ox_sampler_free(s);
    }
}

/* ---- logit bias ------------------------------------------------------------------------- */

static void test_logit_bias(void) {
    static const float L[6] = {1.0f, 3.0f, 2.0f, 3.0f, 0.0f, -1.0f};
    struct ox_sampler *s = new_sampler();
    const struct ox_logit_bias b1[2] = {{0, 5.0f}, {1, -INFINITY}};
    CHECK_EQ(ox_sampler_add_logit_bias(s, b1, 2), OX_OK);
    CHECK_EQ(ox_sampler_add_greedy(s), OX_OK);
    CHECK_EQ(ox_sampler_sample(s, L, 6), 0); /* 1 + 5 = 6 beats 3 */
    ox_sampler_free(s);
    /* after top-k reorders, ids no longer sit at their index: the bias is looked up */
    s = new_sampler();
    const struct ox_logit_bias b2[2] = {{2, 10.0f}, {99, 1.0f}};
    CHECK_EQ(ox_sampler_add_top_k(s, 3), OX_OK);
    CHECK_EQ(ox_sampler_add_logit_bias(s, b2, 2), OX_OK);
    CHECK_EQ(ox_sampler_add_greedy(s), OX_OK);
    CHECK_EQ(ox_sampler_sample(s, L, 6), 2);
    ox_sampler_free(s);
}

/* ---- the CLI's default chain: seeded, reproducible ------------------------------------- */

static void build_default(struct ox_sampler *s, uint32_t seed) {
    static const char *const BR[1] = {"\n"};
    CHECK_EQ(ox_sampler_add_penalties(s, 64, 1.1f, 0.1f, 0.1f), OX_OK);
    CHECK_EQ(ox_sampler_add_dry(s, NULL, 0.8f, 1.75f, 2, 64, BR, 0), OX_OK);
    CHECK_EQ(ox_sampler_add_top_n_sigma(s, 1.5f), OX_OK);
    CHECK_EQ(ox_sampler_add_top_k(s, 40), OX_OK);
    CHECK_EQ(ox_sampler_add_typical(s, 0.9f, 1), OX_OK);
    CHECK_EQ(ox_sampler_add_top_p(s, 0.95f, 1), OX_OK);
    CHECK_EQ(ox_sampler_add_min_p(s, 0.05f, 1), OX_OK);
    CHECK_EQ(ox_sampler_add_xtc(s, 0.5f, 0.1f, 1, seed), OX_OK);
    CHECK_EQ(ox_sampler_add_temp(s, 0.8f), OX_OK);
    CHECK_EQ(ox_sampler_add_dist(s, seed), OX_OK);
}

static void run_default(struct ox_sampler *s, ox_token *out, int n) {
    float logits[300];
    uint32_t x = 12345;
    for (int t = 0; t < n; t++) {
        for (int i = 0; i < 300; i++) { /* xorshift noise, a few ties */
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            logits[i] = (float)(x % 64) / 8.0f;
        }
        out[t] = ox_sampler_sample(s, logits, 300);
        CHECK_EQ(ox_sampler_accept(s, out[t]), OX_OK);
    }
}

static void test_default_chain(void) {
    ox_token a[32], b[32], c[32];
    struct ox_sampler *s1 = new_sampler(), *s2 = new_sampler();
    build_default(s1, 42);
    build_default(s2, 42);
    run_default(s1, a, 32);
    run_default(s2, b, 32);
    ox_sampler_reset(s1);
    run_default(s1, c, 32);
    int same = 1, valid = 1;
    for (int i = 0; i < 32; i++) {
        same &= a[i] == b[i] && a[i] == c[i];
        valid &= a[i] >= 0 && a[i] < 300;
    }
    CHECK(same);
    CHECK(valid);
    ox_sampler_free(s1);
    ox_sampler_free(s2);
}

/* ---- golden picks from llama.cpp ----------------------------------------------------------- */

/* Chains built the same way on both sides, fed the same xorshift logits, every pick accepted;
 * the picks below are what llama.cpp's samplers (libllama, GCC/libstdc++) chose. mode 0:
 * logits in 64 steps of 1/8 (many ties); mode 1: a fine grid; mode 2: mode 0 plus a +6 peak
 * cycling over six tokens, so the history repeats and the penalties and DRY engage. */
static const struct {
    int chain, n_vocab, mode;
    int32_t picks[30];
} GOLDEN_EXT[] = {
    {0, 1000, 2, {86, 2,   198, 874, 684, 712, 1,   127, 108, 973, 25, 449, 1,   2,  198,
                  3,  675, 4,   741, 276, 316, 601, 698, 62,  384, 2,  595, 967, 25, 798}},
    {0, 8, 0, {3, 3, 4, 6, 6, 1, 5, 7, 5, 2, 7, 6, 0, 3, 1,
               5, 4, 7, 2, 3, 6, 4, 1, 0, 3, 7, 2, 4, 0, 4}},
    {1, 1000, 2, {185, 650, 141, 960, 406, 92,  1, 874, 53, 407, 25,  732, 335, 394, 863,
                  916, 301, 665, 595, 2,   198, 3, 603, 4,  56,  707, 510, 339, 643, 387}},
    {1, 50257, 1, {48419, 2013,  35862, 11938, 29611, 9268,  49868, 35890, 45705, 45276,
                   25699, 28234, 38910, 24167, 18358, 42066, 8027,  4718,  49225, 30900,
                   38817, 1603,  12861, 47889, 25024, 43340, 2557,  30196, 39960, 24744}},
    {2, 50257, 2, {1,     2,     198,   3, 25,    4, 32426, 2,     41081, 3,
                   13667, 4,     30239, 2, 27659, 3, 45021, 34413, 29545, 2,
                   42216, 33027, 12950, 4, 8268,  2, 46976, 3,     21277, 4}},
    {3, 1000, 2, {424, 2,   622, 520, 733, 395, 56,  63,  746, 911, 855, 253, 729, 198, 198,
                  74,  152, 797, 843, 317, 14,  736, 672, 59,  437, 362, 313, 578, 333, 762}},
    {4, 8, 2, {1, 2, 6, 3, 1, 4, 1, 2, 0, 5, 5, 4, 1, 3, 6,
               3, 1, 6, 1, 2, 6, 3, 5, 4, 1, 2, 6, 7, 1, 1}},
    {5, 1000, 2, {699, 2,   28, 80, 25,  716, 628, 2,   509, 3, 25,  4,   259, 2,  53,
                  424, 738, 4,  30, 915, 198, 3,   340, 285, 1, 800, 198, 186, 25, 4}},
};

static uint32_t xs(uint32_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return *x;
}

static void golden_logits(uint32_t *x, float *l, int n, int mode, int t) {
    static const int PEAK[6] = {1, 2, 198, 3, 25, 4};
    for (int i = 0; i < n; i++) {
        const uint32_t r = xs(x);
        l[i] =
            mode != 1 ? (float)(r % 64) / 8.0f : (float)((int)(r % 2000000) - 1000000) / 250000.0f;
    }
    if (mode == 2)
        l[PEAK[t % 6] % n] += 6.0f;
}

static void golden_ext_chain(struct ox_sampler *s, int c, int nv, uint32_t seed) {
    const struct ox_logit_bias bias[3] = {{3, 2.0f}, {5, -INFINITY}, {7, 0.5f}};
    int st = 0;
    switch (c) {
    case 0: build_default(s, seed); break; /* the CLI order, top-n-sigma 1.5 */
    case 1:
        st |= ox_sampler_add_penalties(s, 32, 1.3f, 0.0f, 0.0f);
        st |= ox_sampler_add_top_k(s, 100);
        st |= ox_sampler_add_mirostat(s, nv, seed, 5.0f, 0.1f, 100);
        break;
    case 2: st |= ox_sampler_add_mirostat_v2(s, seed, 5.0f, 0.1f); break;
    case 3:
        st |= ox_sampler_add_logit_bias(s, bias, 3);
        st |= ox_sampler_add_typical(s, 0.5f, 1);
        st |= ox_sampler_add_dist(s, seed);
        break;
    case 4:
        st |= ox_sampler_add_dry(s, NULL, 0.8f, 1.75f, 2, 128, NULL, 0);
        st |= ox_sampler_add_penalties(s, 16, 1.0f, 0.3f, 0.2f);
        st |= ox_sampler_add_dist(s, seed);
        break;
    case 5:
        st |= ox_sampler_add_xtc(s, 0.9f, 0.05f, 2, seed);
        st |= ox_sampler_add_mirostat_v2(s, seed + 1, 3.0f, 0.2f);
        break;
    }
    CHECK_EQ(st, OX_OK);
}

static void test_golden_ext(void) {
    float *l = malloc(50257 * sizeof *l);
    for (size_t g = 0; g < N(GOLDEN_EXT); g++) {
        const int c = GOLDEN_EXT[g].chain, nv = GOLDEN_EXT[g].n_vocab, mode = GOLDEN_EXT[g].mode;
        uint32_t x = 777u + (uint32_t)(c * 31 + (nv == 8 ? 0 : nv == 1000 ? 1 : 2) * 7 + mode);
        struct ox_sampler *s = new_sampler();
        golden_ext_chain(s, c, nv, 1234u + (uint32_t)c);
        int first_bad = -1;
        for (int t = 0; t < 30; t++) {
            golden_logits(&x, l, nv, mode, t);
            const ox_token id = ox_sampler_sample(s, l, nv);
            CHECK_EQ(ox_sampler_accept(s, id), OX_OK);
            if (id != GOLDEN_EXT[g].picks[t] && first_bad < 0)
                first_bad = t;
        }
        CHECK_MSG(first_bad < 0, "golden chain %d (n_vocab %d, mode %d) differs at pick %d", c, nv,
                  mode, first_bad);
        ox_sampler_free(s);
    }
    free(l);
}

/* llama.cpp's picks with DRY's default breakers over GPT-2's vocabulary (golden_logits mode
 * 2, the same harness as GOLDEN_EXT); without the breakers pick 60 differs. */
static const int32_t GOLDEN_DRY_VOCAB[60] = {
    1931, 1715, 198,  1061, 711,  1792, 1,    57,   1957, 425,  810,  1895, 330,  2,   293,
    2367, 53,   2512, 1,    188,  1161, 3,    25,   247,  2189, 1779, 1348, 1656, 648, 979,
    2054, 588,  1246, 3,    25,   4,    2998, 2281, 2293, 3,    2472, 1942, 981,  280, 2429,
    1152, 2468, 1073, 363,  1281, 1863, 3,    133,  2360, 1,    2,    2009, 3,    25,  118};

static void golden_dry_vocab(const struct ox_vocab *v) {
    static const char *const BR[4] = {"\n", ":", "\"", "*"};
    const int nv = 50257;
    float *l = malloc((size_t)nv * sizeof *l);
    struct ox_sampler *s = new_sampler();
    CHECK_EQ(ox_sampler_add_penalties(s, 64, 1.05f, 0.0f, 0.0f), OX_OK);
    CHECK_EQ(ox_sampler_add_dry(s, v, 0.8f, 1.75f, 2, 128, BR, 4), OX_OK);
    CHECK_EQ(ox_sampler_add_top_k(s, 40), OX_OK);
    CHECK_EQ(ox_sampler_add_dist(s, 1240), OX_OK);
    uint32_t x = 777u + 6 * 31 + 2 * 7 + 2;
    int first_bad = -1;
    for (int t = 0; t < 60; t++) {
        golden_logits(&x, l, nv, 2, t);
        const ox_token id = ox_sampler_sample(s, l, nv);
        CHECK_EQ(ox_sampler_accept(s, id), OX_OK);
        if (id != GOLDEN_DRY_VOCAB[t] && first_bad < 0)
            first_bad = t;
    }
    CHECK_MSG(first_bad < 0, "golden DRY over GPT-2's vocab differs at pick %d", first_bad);
    ox_sampler_free(s);
    free(l);
}

/* ---- refused parameters ---------------------------------------------------------------- */

static void test_invalid_ext(void) {
    struct ox_sampler *s = new_sampler();
    const float nan = NAN;
    CHECK_EQ(ox_sampler_add_penalties(s, -1, 1.1f, 0, 0), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_add_penalties(s, 64, nan, 0, 0), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_add_penalties(s, 64, 0.0f, 0, 0), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_add_penalties(s, 64, 1.1f, nan, 0), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_add_penalties(s, 64, 1.1f, 0, INFINITY), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_add_dry(s, NULL, nan, 1.75f, 2, 64, NULL, 0), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_add_dry(s, NULL, 0.8f, 1.75f, -1, 64, NULL, 0), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_add_dry(s, NULL, 0.8f, 1.75f, 2, -1, NULL, 0), OX_ERR_INVALID_ARG);
    const char *br[1] = {"\n"};
    CHECK_EQ(ox_sampler_add_dry(s, NULL, 0.8f, 1.75f, 2, 64, br, 1), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_add_typical(s, nan, 1), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_add_typical(s, -0.5f, 1), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_add_top_n_sigma(s, nan), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_add_xtc(s, nan, 0.1f, 1, 0), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_add_xtc(s, 0.5f, nan, 1, 0), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_add_mirostat(s, 0, 0, 5.0f, 0.1f, 100), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_add_mirostat(s, 100, 0, 5.0f, 0.1f, 0), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_add_mirostat(s, 100, 0, nan, 0.1f, 100), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_add_mirostat_v2(s, 0, 5.0f, nan), OX_ERR_INVALID_ARG);
    const struct ox_logit_bias bad[2] = {{-3, 1.0f}, {1, nan}};
    CHECK_EQ(ox_sampler_add_logit_bias(s, bad, 1), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_add_logit_bias(s, bad + 1, 1), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_add_logit_bias(s, NULL, 1), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_accept(s, -1), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_accept(NULL, 1), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_add_penalties(NULL, 64, 1.1f, 0, 0), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_add_mirostat_v2(NULL, 0, 5.0f, 0.1f), OX_ERR_INVALID_ARG);
    /* nothing was added: the chain still cannot pick */
    const float l[2] = {0, 1};
    CHECK_EQ(ox_sampler_sample(s, l, 2), -1);
    ox_sampler_free(s);
}

int main(void) {
    test_canonical_float();
    test_penalties();
    test_dry();
    test_dry_vocab();
    test_typical();
    test_top_n_sigma();
    test_xtc();
    test_mirostat();
    test_logit_bias();
    test_default_chain();
    test_golden_ext();
    if (VOCAB_GPT2)
        golden_dry_vocab(VOCAB_GPT2);
    ox_vocab_free(VOCAB_GPT2);
    test_invalid_ext();
    return test_finish("test_sampler_ext");
}
