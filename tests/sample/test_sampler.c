/* test_sampler.c: the sampler chain against hand-computed sets and llama.cpp's own picks. */
#include <math.h>
#include <stdint.h>

#include "oxidize.h"
#include "sample/sample.h"
#include "test.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static struct ox_sampler *new_sampler(void) {
    struct ox_sampler *s = NULL;
    CHECK_EQ(ox_sampler_create(&s), OX_OK);
    return s;
}

/* Run the chain and return the surviving candidates (sampler-owned). */
static size_t kept(struct ox_sampler *s, const float *logits, int n, const struct smp_cand **c) {
    size_t n_kept = 0;
    ptrdiff_t sel;
    CHECK_EQ(smp_sampler_apply(s, logits, n, c, &n_kept, &sel), OX_OK);
    return n_kept;
}

/* The kept ids, as a bit set over ids < 32 (order-independent comparison). */
static uint32_t kept_set(struct ox_sampler *s, const float *logits, int n) {
    const struct smp_cand *c;
    size_t k = kept(s, logits, n, &c);
    uint32_t set = 0;
    for (size_t i = 0; i < k; i++)
        set |= 1u << c[i].id;
    return set;
}

#define BIT(i) (1u << (i))

/* The example every set test uses: ids 1 and 3 tie for the maximum.
 * softmax: id1 .3889, id3 .3889, id2 .1431, id0 .0526, id4 .0194, id5 .0071 */
static const float EX[6] = {1.0f, 3.0f, 2.0f, 3.0f, 0.0f, -1.0f};

/* ---- MT19937 and the uniform draw ---------------------------------------------------------- */

static void test_mt19937(void) {
    struct smp_mt19937 r;
    smp_mt_seed(&r, 5489u);
    uint32_t x = 0;
    for (int i = 0; i < 10000; i++)
        x = smp_mt_next(&r);
    CHECK_EQ(x, 4123659995u); /* the C++ standard's check value for mt19937 */
    smp_mt_seed(&r, 42u);     /* std::mt19937(42)'s first outputs */
    CHECK_EQ(smp_mt_next(&r), 1608637542u);
    CHECK_EQ(smp_mt_next(&r), 3421126067u);
    CHECK_EQ(smp_mt_next(&r), 4083286876u);
    /* std::uniform_real_distribution<double>(0, 1) over std::mt19937(5489), libstdc++ */
    smp_mt_seed(&r, 5489u);
    CHECK(smp_mt_canonical_double(&r) == 0.1354770042967805);
    CHECK(smp_mt_canonical_double(&r) == 0.8350085899945795);
    CHECK(smp_mt_canonical_double(&r) == 0.96886777112423139);
}

/* ---- sorting: ties ordered as libstdc++ ---------------------------------------------------- */

static void test_sort(void) {
    /* 40 candidates, 4 distinct values: a full sort must be descending; its tie order is
     * checked against llama.cpp through the golden tie-heavy chains below. */
    struct smp_cand a[40];
    for (int i = 0; i < 40; i++)
        a[i] = (struct smp_cand){.id = i, .logit = (float)((i * 7) % 4)};
    smp_sort(a, 40);
    int ok = 1, seen[40] = {0};
    for (int i = 0; i < 40; i++) {
        seen[a[i].id]++;
        if (i && a[i].logit > a[i - 1].logit)
            ok = 0;
    }
    for (int i = 0; i < 40; i++)
        ok &= seen[i] == 1;
    CHECK(ok);
    /* partial: the 5 largest first, sorted; the rest is some permutation */
    for (int i = 0; i < 40; i++)
        a[i] = (struct smp_cand){.id = i, .logit = (float)((i * 13) % 40)};
    smp_partial_sort(a, 5, 40);
    CHECK(a[0].logit == 39.0f && a[1].logit == 38.0f && a[4].logit == 35.0f);
}

/* ---- greedy -------------------------------------------------------------------------------- */

static void test_greedy(void) {
    struct ox_sampler *s = new_sampler();
    CHECK_EQ(ox_sampler_add_greedy(s), OX_OK);
    CHECK_EQ(ox_sampler_sample(s, EX, 6), 1); /* ids 1 and 3 tie: the first wins */
    const float neg[4] = {-5.0f, -2.0f, -3.0f, -2.0f};
    CHECK_EQ(ox_sampler_sample(s, neg, 4), 1);
    const float one[1] = {-1e30f};
    CHECK_EQ(ox_sampler_sample(s, one, 1), 0);
    const float last[5] = {0, 0, 0, 0, 0.5f};
    CHECK_EQ(ox_sampler_sample(s, last, 5), 4);
    ox_sampler_free(s);
}

/* ---- top-k --------------------------------------------------------------------------------- */

static uint32_t top_k_set(int32_t k) {
    struct ox_sampler *s = new_sampler();
    CHECK_EQ(ox_sampler_add_top_k(s, k), OX_OK);
    uint32_t set = kept_set(s, EX, 6);
    ox_sampler_free(s);
    return set;
}

static void test_top_k(void) {
    CHECK_EQ(top_k_set(2), BIT(1) | BIT(3));
    CHECK_EQ(top_k_set(3), BIT(1) | BIT(3) | BIT(2));
    CHECK_EQ(top_k_set(5), 0x3fu & ~BIT(5));
    CHECK_EQ(top_k_set(0), 0x3fu); /* 0 = no limit */
    CHECK_EQ(top_k_set(6), 0x3fu);
    CHECK_EQ(top_k_set(1000), 0x3fu); /* k > n_vocab keeps all */
    /* k = 1 on a tie: std::partial_sort keeps the first-seen maximum here */
    CHECK_EQ(top_k_set(1), BIT(1));
    /* kept candidates come out sorted, descending */
    struct ox_sampler *s = new_sampler();
    CHECK_EQ(ox_sampler_add_top_k(s, 4), OX_OK);
    const struct smp_cand *c;
    CHECK_EQ(kept(s, EX, 6, &c), 4);
    CHECK(c[0].logit == 3.0f && c[1].logit == 3.0f && c[2].id == 2 && c[3].id == 0);
    ox_sampler_free(s);
    /* the bucketed path (k > 128) keeps exactly the k largest */
    float big[1000];
    for (int i = 0; i < 1000; i++)
        big[i] = (float)((i * 389) % 1000) * 0.02f - 10.0f; /* a permutation of 1000 values */
    s = new_sampler();
    CHECK_EQ(ox_sampler_add_top_k(s, 200), OX_OK);
    size_t n = kept(s, big, 1000, &c);
    CHECK_EQ(n, 200);
    int ok = 1;
    for (size_t i = 0; i < n; i++)
        ok &= c[i].logit == (float)(999 - (int)i) * 0.02f - 10.0f;
    CHECK(ok);
    ox_sampler_free(s);
}

/* ---- top-p --------------------------------------------------------------------------------- */

static uint32_t top_p_set(float p, size_t min_keep) {
    struct ox_sampler *s = new_sampler();
    CHECK_EQ(ox_sampler_add_top_p(s, p, min_keep), OX_OK);
    uint32_t set = kept_set(s, EX, 6);
    ox_sampler_free(s);
    return set;
}

static void test_top_p(void) {
    CHECK_EQ(top_p_set(0.5f, 1), BIT(1) | BIT(3)); /* .389 < .5 <= .778 */
    CHECK_EQ(top_p_set(0.77f, 1), BIT(1) | BIT(3));
    CHECK_EQ(top_p_set(0.8f, 1), BIT(1) | BIT(3) | BIT(2));          /* .778 < .8 <= .921 */
    CHECK_EQ(top_p_set(0.95f, 1), 0x3fu & ~(BIT(4) | BIT(5)));       /* .921 < .95 <= .974 */
    CHECK_EQ(top_p_set(0.5f, 4), BIT(1) | BIT(3) | BIT(2) | BIT(0)); /* min_keep wins */
    CHECK_EQ(top_p_set(0.5f, 100), 0x3fu);
    CHECK_EQ(top_p_set(1.0f, 1), 0x3fu); /* p = 1: no-op */
    CHECK_EQ(top_p_set(0.0f, 3), BIT(1) | BIT(3) | BIT(2));
    uint32_t one = top_p_set(0.0f, 0); /* p = 0 still keeps one */
    CHECK(one == BIT(1) || one == BIT(3));
    /* probabilities are computed and the kept set is sorted */
    struct ox_sampler *s = new_sampler();
    CHECK_EQ(ox_sampler_add_top_p(s, 0.8f, 1), OX_OK);
    const struct smp_cand *c;
    CHECK_EQ(kept(s, EX, 6, &c), 3);
    CHECK_NEAR(c[0].p, 1.0 / (2.0 + exp(-1.0) + exp(-2.0) + exp(-3.0) + exp(-4.0)), 1e-6);
    CHECK_EQ(c[2].id, 2);
    ox_sampler_free(s);
}

/* ---- min-p --------------------------------------------------------------------------------- */

static uint32_t min_p_set(float p, size_t min_keep) {
    struct ox_sampler *s = new_sampler();
    CHECK_EQ(ox_sampler_add_min_p(s, p, min_keep), OX_OK);
    uint32_t set = kept_set(s, EX, 6);
    ox_sampler_free(s);
    return set;
}

static void test_min_p(void) {
    /* keep logit >= 3 + ln p */
    CHECK_EQ(min_p_set(0.3f, 1), BIT(1) | BIT(3) | BIT(2));          /* cut 1.796 */
    CHECK_EQ(min_p_set(0.5f, 1), BIT(1) | BIT(3));                   /* cut 2.307 */
    CHECK_EQ(min_p_set(0.5f, 3), BIT(1) | BIT(3) | BIT(2));          /* min_keep forces the 3rd */
    CHECK_EQ(min_p_set(0.1f, 1), BIT(1) | BIT(3) | BIT(2) | BIT(0)); /* cut 0.697 */
    CHECK_EQ(min_p_set(0.0f, 1), 0x3fu);                             /* p = 0: no-op */
    CHECK_EQ(min_p_set(1.0f, 1), BIT(1) | BIT(3));                   /* only the maxima */
    CHECK_EQ(min_p_set(1.0f, 6), 0x3fu);
    /* the unsorted path keeps the original (id) order */
    struct ox_sampler *s = new_sampler();
    CHECK_EQ(ox_sampler_add_min_p(s, 0.3f, 1), OX_OK);
    const struct smp_cand *c;
    CHECK_EQ(kept(s, EX, 6, &c), 3);
    CHECK(c[0].id == 1 && c[1].id == 2 && c[2].id == 3);
    ox_sampler_free(s);
}

/* ---- temperature --------------------------------------------------------------------------- */

static void test_temp(void) {
    struct ox_sampler *s = new_sampler();
    CHECK_EQ(ox_sampler_add_temp(s, 2.0f), OX_OK);
    const struct smp_cand *c;
    CHECK_EQ(kept(s, EX, 6, &c), 6);
    int ok = 1;
    for (int i = 0; i < 6; i++)
        ok &= c[i].id == i && c[i].logit == EX[i] / 2.0f;
    CHECK(ok);
    ox_sampler_free(s);
    /* t <= 0: only the first maximum stays finite, so any draw returns it */
    for (int neg = 0; neg < 2; neg++) {
        s = new_sampler();
        CHECK_EQ(ox_sampler_add_temp(s, neg ? -0.5f : 0.0f), OX_OK);
        CHECK_EQ(kept(s, EX, 6, &c), 6);
        CHECK(c[1].logit == 3.0f && isinf(c[3].logit) && isinf(c[0].logit));
        CHECK_EQ(ox_sampler_add_dist(s, 123), OX_OK);
        int all = 1;
        for (int i = 0; i < 200; i++)
            all &= ox_sampler_sample(s, EX, 6) == 1;
        CHECK(all);
        ox_sampler_free(s);
    }
}

/* ---- dist ---------------------------------------------------------------------------------- */

static void test_dist_reproducible(void) {
    float logits[50];
    for (int i = 0; i < 50; i++)
        logits[i] = (float)((i * 17) % 50) * 0.1f;
    struct ox_sampler *a = new_sampler(), *b = new_sampler(), *c = new_sampler();
    CHECK_EQ(ox_sampler_add_dist(a, 42), OX_OK);
    CHECK_EQ(ox_sampler_add_dist(b, 42), OX_OK);
    CHECK_EQ(ox_sampler_add_dist(c, 43), OX_OK);
    ox_token first[100];
    int same = 1, differs = 0;
    for (int i = 0; i < 100; i++) {
        first[i] = ox_sampler_sample(a, logits, 50);
        same &= first[i] == ox_sampler_sample(b, logits, 50);
        differs |= first[i] != ox_sampler_sample(c, logits, 50);
    }
    CHECK(same);
    CHECK(differs);
    ox_sampler_reset(a); /* restarts the stream from the seed */
    same = 1;
    for (int i = 0; i < 100; i++)
        same &= first[i] == ox_sampler_sample(a, logits, 50);
    CHECK(same);
    /* one candidate is picked without a draw (as llama.cpp): the stream does not move */
    ox_sampler_reset(a);
    CHECK_EQ(ox_sampler_sample(a, logits, 1), 0);
    CHECK_EQ(ox_sampler_sample(a, logits, 50), first[0]);
    ox_sampler_free(a);
    ox_sampler_free(b);
    ox_sampler_free(c);
}

/* Chi-square of n draws against softmax(logits / temp); the seed is fixed, so this is
 * deterministic. 5 bins = 4 degrees of freedom: 30 is past p = 1e-5. */
static double chi_square(float temp, uint32_t seed, int n) {
    const float logits[5] = {0.0f, 1.0f, 2.0f, 0.5f, -1.0f};
    double p[5], z = 0;
    for (int i = 0; i < 5; i++)
        z += p[i] = exp(logits[i] / temp);
    struct ox_sampler *s = new_sampler();
    if (temp != 1.0f)
        CHECK_EQ(ox_sampler_add_temp(s, temp), OX_OK);
    CHECK_EQ(ox_sampler_add_dist(s, seed), OX_OK);
    int count[5] = {0}, bad = 0;
    for (int i = 0; i < n; i++) {
        ox_token t = ox_sampler_sample(s, logits, 5);
        if (t >= 0 && t < 5)
            count[t]++;
        else
            bad++;
    }
    CHECK_EQ(bad, 0);
    ox_sampler_free(s);
    double chi = 0;
    for (int i = 0; i < 5; i++) {
        double e = n * p[i] / z;
        chi += (count[i] - e) * (count[i] - e) / e;
    }
    return chi;
}

static void test_dist_frequencies(void) {
    const struct {
        float temp;
        uint32_t seed;
    } runs[3] = {{1.0f, 1}, {0.5f, 2}, {2.0f, 3}};
    for (int r = 0; r < 3; r++) {
        double chi = chi_square(runs[r].temp, runs[r].seed, 200000);
        CHECK_MSG(chi < 30.0, "temp %g: chi2 %g", (double)runs[r].temp, chi);
    }
    /* and the test has power: temp 0.5 draws are far from the temp 1 distribution */
    const float logits[5] = {0.0f, 1.0f, 2.0f, 0.5f, -1.0f};
    struct ox_sampler *s = new_sampler();
    CHECK_EQ(ox_sampler_add_temp(s, 0.5f), OX_OK);
    CHECK_EQ(ox_sampler_add_dist(s, 9), OX_OK);
    int top = 0;
    for (int i = 0; i < 10000; i++)
        top += ox_sampler_sample(s, logits, 5) == 2;
    /* P(id 2): 0.634 at temp 1 vs 0.838 at temp 0.5 */
    CHECK_MSG(top > 8100 && top < 8650, "%d", top);
    ox_sampler_free(s);
}

/* ---- golden picks from llama.cpp ----------------------------------------------------------- */

/* Picks of llama.cpp's own samplers (src/llama-sampler.cpp at d32676d7, built with GCC 12 /
 * libstdc++, chains fed through llama_sampler_apply) on the logits gen() makes below: 50
 * draws per chain, logits regenerated before each draw. */
static const int32_t GOLDEN[12][50] = {
    /* topk40_topp09_minp005_temp08_dist42 */
    {23639, 4283,  3076,  29037, 25677, 12853, 9210,  18362, 26409, 30092, 17032, 10212, 24746,
     9886,  2190,  22202, 28191, 13038, 6814,  1634,  6280,  20548, 5388,  26057, 9297,  9344,
     3459,  27789, 2920,  31913, 12192, 18496, 10338, 31037, 24589, 7458,  10905, 12602, 29866,
     29149, 10246, 5119,  24184, 30300, 24908, 4434,  19613, 25083, 19749, 10043},
    /* topp095_dist1234 */
    {13302, 18550, 19370, 24674, 25312, 5235,  11209, 30335, 1601,  1069,  2912, 31120, 16999,
     15624, 25726, 2345,  2592,  2621,  29822, 31301, 1610,  17171, 17084, 7649, 19717, 24155,
     10253, 25088, 25505, 14346, 17616, 12949, 18048, 25772, 19148, 29603, 670,  9611,  11370,
     12425, 18683, 15362, 8815,  16394, 20813, 26551, 14349, 7348,  9780,  1420},
    /* minp01_temp15_dist7 */
    {7110,  10550, 31282, 13897, 10232, 8423,  2665,  13349, 441,   16676, 27451, 10806, 12672,
     21736, 21808, 22218, 10852, 29773, 8629,  23992, 8004,  27256, 5286,  25411, 30042, 14691,
     12194, 11064, 6319,  3294,  15342, 19538, 30297, 10846, 8707,  14218, 30681, 5704,  4792,
     2838,  18282, 9674,  9296,  29345, 13577, 13201, 31529, 25274, 11500, 9177},
    /* temp07_topk300_dist99 */
    {1855, 2749, 28,   4492, 3091, 920,  3510, 256, 59,   2960, 3154, 3801, 4576,
     3059, 3538, 1633, 4024, 1285, 2698, 1281, 302, 1215, 2273, 3850, 3981, 3840,
     1029, 1520, 2777, 1546, 1774, 4982, 807,  347, 804,  277,  422,  3141, 1304,
     2387, 2443, 3713, 80,   1457, 2209, 1469, 84,  911,  1239, 802},
    /* ties_topk50_dist5 */
    {644, 850, 756, 412, 26,  48,  100, 467, 241, 170, 166, 400, 657, 152, 798, 295, 1016,
     565, 504, 495, 694, 280, 77,  843, 985, 528, 397, 755, 647, 107, 352, 249, 331, 35,
     166, 567, 214, 59,  484, 197, 330, 714, 98,  660, 939, 7,   385, 95,  21,  507},
    /* ties_topp05_keep3_dist6 */
    {488,  2492, 1919, 2700, 2844, 2141, 1403, 160,  11,   790,  1467, 597,  2629,
     2236, 7,    2736, 672,  821,  644,  658,  1037, 1703, 2319, 1051, 526,  518,
     2211, 2708, 2736, 1700, 597,  186,  2117, 1113, 1171, 2276, 442,  1675, 2377,
     1010, 473,  815,  1427, 2567, 2668, 696,  2886, 1160, 2189, 2339},
    /* ties_minp03_keep400_topk200_dist8 */
    {727, 20,  15,  21,  340, 766, 663, 41,  869, 486, 851, 141, 402, 825, 771, 233, 708,
     819, 587, 26,  74,  144, 203, 926, 485, 507, 622, 628, 992, 618, 143, 103, 921, 174,
     78,  812, 563, 336, 667, 629, 882, 691, 101, 660, 37,  975, 539, 845, 899, 360},
    /* ties_topp08_dist9 */
    {10, 20, 59, 11, 25, 14, 60, 59, 66, 71, 18, 0,  93, 28, 20, 36, 48,
     22, 86, 61, 47, 24, 6,  50, 88, 34, 43, 34, 27, 6,  45, 9,  77, 83,
     31, 43, 76, 44, 75, 72, 94, 29, 74, 28, 3,  11, 70, 28, 75, 85},
    /* empty_stages_dist11 */
    {32,  312, 57,  471, 61,  121, 435, 413, 88,  458, 356, 244, 415, 307, 376, 370, 480,
     497, 426, 2,   462, 172, 93,  95,  392, 84,  413, 254, 400, 20,  342, 254, 448, 64,
     262, 252, 356, 244, 155, 242, 22,  74,  231, 24,  2,   467, 356, 472, 246, 421},
    /* temp0_dist3 */
    {8, 33, 2, 3,  1,  4, 12, 2, 12, 1,  20, 1,  1,  6,  1, 4, 46, 14, 16, 2,  29, 3,  11, 41, 20,
     8, 13, 1, 48, 14, 1, 1,  0, 0,  20, 9,  45, 16, 32, 0, 7, 10, 32, 19, 27, 22, 18, 7,  4,  12},
    /* ties_dist_only */
    {4,  60, 58, 27, 28, 20, 61, 39, 36, 12, 44, 54, 2,  60, 48, 38, 5,
     8,  59, 13, 52, 23, 37, 55, 9,  48, 58, 20, 35, 35, 28, 13, 20, 24,
     62, 54, 39, 27, 49, 14, 35, 63, 60, 63, 7,  16, 45, 11, 59, 55},
    /* ties_topk20_greedy */
    {3,   82,  84,  142, 136, 180, 53, 43, 57, 142, 101, 164, 32, 35,  132, 42, 146,
     34,  21,  56,  157, 145, 22,  76, 32, 41, 21,  107, 37,  27, 223, 37,  28, 111,
     128, 123, 172, 8,   186, 0,   18, 54, 57, 112, 28,  117, 50, 68,  213, 74},
};

static const struct {
    int n_vocab, ties;
} GOLDEN_SHAPE[12] = {{32000, 0}, {32000, 0}, {32000, 0}, {5000, 0}, {2000, 1}, {3000, 1},
                      {1000, 1},  {100, 1},   {500, 0},   {1000, 1}, {64, 1},   {3000, 1}};

static uint32_t xorshift32(uint32_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* Smooth logits in [-8, 8), or tie-heavy ones (17 values, step 0.5) that exercise the exact
 * tie order of every sort. */
static void gen(uint32_t *st, int ties, float *out, int n) {
    for (int i = 0; i < n; i++) {
        uint32_t x = xorshift32(st);
        out[i] = ties ? (float)((x >> 8) % 17u) * 0.5f - 4.0f
                      : (float)(x >> 8) * (1.0f / 16777216.0f) * 16.0f - 8.0f;
    }
}

/* One stage of a golden chain: kind k(top-k n) p(top-p f, min_keep n) m(min-p f, min_keep n)
 * t(temp f) d(dist seed n) g(greedy); a chain ends at kind 0. */
struct gstage {
    char kind;
    float f;
    uint32_t n;
};

static const struct gstage GOLDEN_CHAIN[12][6] = {
    {{'k', 0, 40}, {'p', 0.9f, 1}, {'m', 0.05f, 1}, {'t', 0.8f, 0}, {'d', 0, 42}},
    {{'p', 0.95f, 1}, {'d', 0, 1234}},
    {{'m', 0.1f, 1}, {'t', 1.5f, 0}, {'d', 0, 7}},
    {{'t', 0.7f, 0}, {'k', 0, 300}, {'d', 0, 99}},
    {{'k', 0, 50}, {'d', 0, 5}},
    {{'p', 0.5f, 3}, {'d', 0, 6}},
    {{'m', 0.3f, 400}, {'k', 0, 200}, {'d', 0, 8}},
    {{'p', 0.8f, 1}, {'d', 0, 9}},
    {{'k', 0, 0}, {'p', 1.0f, 1}, {'m', 0.0f, 1}, {'t', 1.0f, 0}, {'d', 0, 11}},
    {{'t', 0.0f, 0}, {'d', 0, 3}},
    {{'d', 0, 0xFFFFFFFEu}},
    {{'k', 0, 20}, {'g', 0, 0}},
};

static void golden_chain(struct ox_sampler *s, int c) {
    for (const struct gstage *g = GOLDEN_CHAIN[c]; g->kind; g++) {
        enum ox_status st = OX_ERR_INVALID_ARG;
        switch (g->kind) {
        case 'k': st = ox_sampler_add_top_k(s, (int32_t)g->n); break;
        case 'p': st = ox_sampler_add_top_p(s, g->f, g->n); break;
        case 'm': st = ox_sampler_add_min_p(s, g->f, g->n); break;
        case 't': st = ox_sampler_add_temp(s, g->f); break;
        case 'd': st = ox_sampler_add_dist(s, g->n); break;
        case 'g': st = ox_sampler_add_greedy(s); break;
        }
        CHECK_EQ(st, OX_OK);
    }
}

static void test_golden(void) {
    static float logits[32000];
    for (int c = 0; c < 12; c++) {
        struct ox_sampler *s = new_sampler();
        golden_chain(s, c);
        uint32_t st = 0x9E3779B9u ^ (uint32_t)(c * 7919 + 1);
        int match = 0;
        for (int t = 0; t < 50; t++) {
            gen(&st, GOLDEN_SHAPE[c].ties, logits, GOLDEN_SHAPE[c].n_vocab);
            match += ox_sampler_sample(s, logits, GOLDEN_SHAPE[c].n_vocab) == GOLDEN[c][t];
        }
        CHECK_MSG(match == 50, "chain %d: %d of 50 picks equal llama.cpp's", c, match);
        ox_sampler_free(s);
    }
}

/* ---- arguments and edge cases -------------------------------------------------------------- */

static void test_invalid(void) {
    struct ox_sampler *s = new_sampler();
    const float nan = NAN, inf = INFINITY;
    CHECK_EQ(ox_sampler_add_temp(s, nan), OX_ERR_INVALID_ARG);
    CHECK(strstr(ox_last_error(), "temperature") != NULL);
    CHECK_EQ(ox_sampler_add_temp(s, inf), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_add_temp(s, -inf), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_add_top_k(s, -1), OX_ERR_INVALID_ARG);
    CHECK(strstr(ox_last_error(), "top-k") != NULL);
    CHECK_EQ(ox_sampler_add_top_p(s, -0.01f, 1), OX_ERR_INVALID_ARG);
    CHECK(strstr(ox_last_error(), "top_p") != NULL);
    CHECK_EQ(ox_sampler_add_top_p(s, 1.01f, 1), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_add_top_p(s, nan, 1), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_add_min_p(s, -0.5f, 1), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_add_min_p(s, 2.0f, 1), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_add_min_p(s, nan, 1), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_add_greedy(NULL), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_add_dist(NULL, 1), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_add_top_k(NULL, 1), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_sampler_create(NULL), OX_ERR_INVALID_ARG);
    /* nothing was added: the chain is still empty */
    CHECK_EQ(ox_sampler_sample(s, EX, 6), -1);
    ox_sampler_free(s);
    ox_sampler_free(NULL);
    ox_sampler_reset(NULL);
}

static void test_cannot_pick(void) {
    const float l[6] = {0.5f, 2.0f, 1.0f, -1.0f, 3.0f, 0.0f};
    struct ox_sampler *s = new_sampler();
    CHECK_EQ(ox_sampler_add_top_k(s, 3), OX_OK);
    CHECK_EQ(ox_sampler_sample(s, l, 6), -1); /* no final picker */
    CHECK_EQ(ox_sampler_add_greedy(s), OX_OK);
    CHECK_EQ(ox_sampler_sample(s, l, 6), 4);
    CHECK_EQ(ox_sampler_sample(s, l, 0), -1);
    CHECK_EQ(ox_sampler_sample(s, l, -3), -1);
    CHECK_EQ(ox_sampler_sample(s, NULL, 6), -1);
    CHECK_EQ(ox_sampler_sample(NULL, l, 6), -1);
    CHECK_EQ(ox_sampler_add_temp(s, 0.5f), OX_OK);
    CHECK_EQ(ox_sampler_sample(s, l, 6), -1); /* the picker is no longer last */
    ox_sampler_free(s);
}

/* The candidate buffer grows with n_vocab and is reused; ASan checks the bounds. */
static void test_growth(void) {
    static float big[5000];
    for (int i = 0; i < 5000; i++)
        big[i] = (float)(i % 97) * 0.01f;
    big[4321] = 5.0f;
    struct ox_sampler *s = new_sampler();
    CHECK_EQ(ox_sampler_add_top_k(s, 300), OX_OK);
    CHECK_EQ(ox_sampler_add_top_p(s, 0.9f, 1), OX_OK);
    CHECK_EQ(ox_sampler_add_greedy(s), OX_OK);
    ox_token t = ox_sampler_sample(s, EX, 6); /* the sort decides which of the tied maxima */
    CHECK(t == 1 || t == 3);
    CHECK_EQ(ox_sampler_sample(s, big, 5000), 4321);
    CHECK_EQ(ox_sampler_sample(s, EX, 6), t);
    CHECK_EQ(ox_sampler_sample(s, big, 5000), 4321);
    ox_sampler_free(s);
}

/* ---- the pick straight from the logits (direct_start) ------------------------------------- */

/* A chain of each kind twice, one picking through ox_sampler_sample (which may start from the
 * logits: greedy, top-k <= 128 after inert penalties) and one through smp_sampler_apply (the
 * whole candidates array, as llama.cpp): the same pick every time, on logits full of ties
 * (few distinct values) with NaNs and infinities among them. */
enum { DIRECT_KINDS = 6 };
static struct ox_sampler *direct_chain(int kind) {
    struct ox_sampler *s = new_sampler();
    CHECK_EQ(ox_sampler_add_penalties(s, 64, kind == 5 ? 1.3f : 1.0f, 0.0f, 0.0f), OX_OK);
    if (kind == 0 || kind == 5) {
        CHECK_EQ(ox_sampler_add_greedy(s), OX_OK);
        return s;
    }
    const int32_t k[] = {0, 40, 128, 129, 1};
    CHECK_EQ(ox_sampler_add_top_k(s, k[kind]), OX_OK);
    CHECK_EQ(ox_sampler_add_top_p(s, 0.95f, 1), OX_OK);
    CHECK_EQ(ox_sampler_add_min_p(s, 0.05f, 1), OX_OK);
    CHECK_EQ(ox_sampler_add_temp(s, 0.8f), OX_OK);
    CHECK_EQ(ox_sampler_add_dist(s, 1234), OX_OK);
    return s;
}

static void test_direct(void) {
    enum { N = 3001 };
    static float logits[N];
    uint32_t r = 7;
    for (int kind = 0; kind < DIRECT_KINDS; kind++) {
        struct ox_sampler *a = direct_chain(kind), *b = direct_chain(kind);
        int same = 0;
        for (int step = 0; step < 150; step++) {
            for (int i = 0; i < N; i++) {
                r = r * 1664525u + 1013904223u;
                logits[i] = (float)(r >> 26) * 0.25f; /* 64 values: ties everywhere */
            }
            if (step % 3 == 0)
                logits[r % N] = NAN, logits[(r >> 8) % N] = -INFINITY;
            if (step % 5 == 0)
                logits[0] = NAN; /* a NaN first: the heap's least, argmax's start */
            ox_token x = ox_sampler_sample(a, logits, N);
            const struct smp_cand *c;
            size_t n;
            ptrdiff_t sel;
            CHECK_EQ(smp_sampler_apply(b, logits, N, &c, &n, &sel), OX_OK);
            ox_token y = sel >= 0 && (size_t)sel < n ? c[sel].id : -1;
            same += x == y;
            if (x >= 0)
                ox_sampler_accept(a, x), ox_sampler_accept(b, x);
        }
        CHECK_MSG(same == 150, "chain %d: %d of 150 picks as the whole array's", kind, same);
        ox_sampler_free(a);
        ox_sampler_free(b);
    }
}

int main(void) {
    test_mt19937();
    test_sort();
    test_greedy();
    test_top_k();
    test_top_p();
    test_min_p();
    test_temp();
    test_dist_reproducible();
    test_dist_frequencies();
    test_golden();
    test_invalid();
    test_cannot_pick();
    test_growth();
    test_direct();
    return test_finish("test_sampler");
}
