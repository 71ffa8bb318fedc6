/* mt19937.c: the 32-bit Mersenne Twister and libstdc++'s way of turning it into a double. */
#include <math.h>

#include "sample/sample.h"

enum { MT_N = 624, MT_M = 397 };

void smp_mt_seed(struct smp_mt19937 *r, uint32_t seed) {
    r->mt[0] = seed;
    for (uint32_t i = 1; i < MT_N; i++)
        r->mt[i] = 1812433253u * (r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) + i;
    r->idx = MT_N; /* the first draw regenerates the whole state, as the standard engine */
}

static void mt_twist(struct smp_mt19937 *r) {
    for (uint32_t i = 0; i < MT_N; i++) {
        uint32_t y = (r->mt[i] & 0x80000000u) | (r->mt[(i + 1) % MT_N] & 0x7fffffffu);
        r->mt[i] = r->mt[(i + MT_M) % MT_N] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    r->idx = 0;
}

uint32_t smp_mt_next(struct smp_mt19937 *r) {
    if (r->idx >= MT_N)
        mt_twist(r);
    uint32_t y = r->mt[r->idx++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

/* libstdc++ generate_canonical<double, 53>: a 53-bit mantissa needs two 32-bit draws; they
 * are summed as g0 + g1 * 2^32 in double (one rounding), divided by 2^64, and a result that
 * rounded up to 1 is pulled back to the largest double below 1. */
double smp_mt_canonical_double(struct smp_mt19937 *r) {
    double sum = (double)smp_mt_next(r);
    sum += (double)smp_mt_next(r) * 4294967296.0;
    double ret = sum / 18446744073709551616.0;
    if (ret >= 1.0)
        ret = nextafter(1.0, 0.0);
    return ret;
}

/* libstdc++ generate_canonical<float, 24>: one 32-bit draw, converted to float (rounding)
 * and divided by 2^32 in float; a result that rounded up to 1 is pulled back below 1. */
float smp_mt_canonical_float(struct smp_mt19937 *r) {
    float ret = (float)smp_mt_next(r) / 4294967296.0f;
    if (ret >= 1.0f)
        ret = nextafterf(1.0f, 0.0f);
    return ret;
}

/* libstdc++'s discrete_distribution: weights normalized by their double sum, cumulated in
 * order (the last forced to 1), and the first cumulative >= one canonical double wins. With
 * fewer than two weights it returns 0 without drawing. Cumulated on the fly: no allocation. */
size_t smp_discrete(const struct smp_cand *a, size_t n, struct smp_mt19937 *r) {
    if (n < 2)
        return 0;
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += a[i].p;
    const double u = smp_mt_canonical_double(r);
    double cum = 0.0;
    for (size_t i = 0; i + 1 < n; i++) {
        cum += a[i].p / sum;
        if (cum >= u)
            return i;
    }
    return n - 1;
}
