/* test_rope.c: the CPU RoPE op against the formula worked out in double precision: normal and
 * NeoX pairing, partial rotary, linear scaling, YaRN and llama3 frequency factors. */
#include <math.h>

#include "backend/backend.h"
#include "test.h"

#define HD 16

/* The rotation of pair i of a head at pos, per RoPE with YaRN (Peng et al.), in double. */
static void expect(const double *x, double *y, int pos, const struct rope_params *p) {
    for (int d = 0; d < HD; d++)
        y[d] = x[d];
    for (int i = 0; i < p->n_rot; i += 2) {
        double ff = p->freq_factors ? p->freq_factors[i / 2] : 1.0;
        double extrap = pos * pow(p->freq_base, -(double)i / p->n_rot) / ff;
        double interp = p->freq_scale * extrap, theta = interp, m = p->attn_factor;
        if (p->ext_factor != 0) {
            double r = (i / 2 - p->corr_dims[0]) / fmax(0.001, p->corr_dims[1] - p->corr_dims[0]);
            double mix = (1 - fmin(1, fmax(0, r))) * p->ext_factor;
            theta = interp * (1 - mix) + extrap * mix;
            m *= 1 + 0.1 * log(1 / p->freq_scale);
        }
        int a = p->neox ? i / 2 : i, b = p->neox ? i / 2 + p->n_rot / 2 : i + 1;
        y[a] = (x[a] * cos(theta) - x[b] * sin(theta)) * m;
        y[b] = (x[a] * sin(theta) + x[b] * cos(theta)) * m;
    }
}

static void check_case(const char *what, const struct rope_params *p) {
    double worst = 0;
    for (int pos = 0; pos < 300; pos += 37) {
        float x[HD];
        double xd[HD], want[HD];
        for (int d = 0; d < HD; d++)
            xd[d] = x[d] = (float)sin(d * 1.7 + pos * 0.3);
        backend_cpu_ops.rope(NULL, x, &pos, 1, 1, HD, p);
        expect(xd, want, pos, p);
        for (int d = 0; d < HD; d++)
            worst = fmax(worst, fabs(x[d] - want[d]));
    }
    printf("  %-22s max error %.2g\n", what, worst);
    CHECK_MSG(worst < 2e-5, "%s: %g", what, worst); /* float angles at pos ~300 */
}

int main(void) {
    struct rope_params p = {.n_rot = HD, .freq_base = 10000, .freq_scale = 1, .attn_factor = 1};
    check_case("normal", &p);
    p.neox = true;
    check_case("neox", &p);
    p.n_rot = 8;
    check_case("neox, partial (8 of 16)", &p);
    p.neox = false;
    check_case("normal, partial", &p);
    p.n_rot = HD;
    p.freq_scale = 0.25f;
    check_case("linear x4", &p);
    p.ext_factor = 1, p.corr_dims[0] = 2, p.corr_dims[1] = 6;
    check_case("yarn x4", &p);
    static const float ff[HD / 2] = {1, 1, 1.5f, 2, 4, 8, 8, 8};
    p.ext_factor = 0, p.freq_scale = 1, p.freq_factors = ff;
    check_case("llama3 freq factors", &p);
    return test_finish("test_rope");
}
