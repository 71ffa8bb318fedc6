/* test_cuda_vecdot.cu: the integer dot products the q8 GEMV runs (cuda_vecdot.cuh, host side)
 * against double-precision sums over the CPU's dequantized weights, for every type with an
 * integer path. The activations are chosen exactly representable in q8_1 (levels times a power
 * of two), so the only error left is float rounding: a misplaced bit fails by orders of
 * magnitude. Needs no GPU. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "backend/cuda/cuda_vecdot.cuh"
extern "C" {
#include "core/fp16.h"
}
#include "oxidize.h"

#ifndef OX_SOURCE_DIR
#define OX_SOURCE_DIR "."
#endif
#include "../test.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

static float frand(void) { /* uniform in [-1, 1) */
    return (float)rnd() / 2097152.0f - 1.0f;
}

/* One block of 32 activations x_j = 2^e * q_j, max |q_j| = 127: its q8_1 form (d = 2^e, the
 * levels and their sum) is exact. */
static void exact_block(cvd_xq *b, float *x) {
    const int e = (int)(rnd() % 16) - 10;
    const float d = ldexpf(1.0f, e);
    int8_t q[32];
    int sum = 0;
    for (int j = 0; j < 32; j++)
        q[j] = (int8_t)((int)(rnd() % 255) - 127);
    q[rnd() % 32] = (rnd() & 1) ? 127 : -127;
    for (int j = 0; j < 32; j++)
        sum += q[j];
    for (int j = 0; j < 32; j++)
        x[j] = d * (float)q[j];
    b->d = fp32_to_fp16(d);
    b->sq = (int16_t)sum;
    memcpy(b->qs, q, sizeof q);
}

/* The dot of every group of a row of n weights (bytes row) with exact activations. */
template <enum ox_dtype T>
static void check_row(const uint8_t *row, int64_t n, const char *what, int *worst_group) {
    std::vector<float> w((size_t)n), x((size_t)n);
    std::vector<cvd_xq> xb((size_t)n / 32);
    CHECK_MSG(ox_dequantize(T, row, w.data(), n) == OX_OK, "%s: dequantize", what);
    for (int64_t g = 0; g < n / 32; g++)
        exact_block(&xb[(size_t)g], &x[(size_t)(32 * g)]);
    std::vector<float> got((size_t)n / 32);
    for (int64_t g = 0; g < n / 32;
         g++) { /* the k-quants' groups by pairs, as the GPU reads them */
        constexpr int S = cvd_pair_stride<T>();
        if constexpr (S > 0) {
            if (g % (2 * S) < S) {
                cvd_w w0, w1;
                vd<T>::template unpack_pair<2>(row, g, w0, w1);
                got[(size_t)g] = cvd_dot_pair<T>(w0, xb[(size_t)g]);
                got[(size_t)(g + S)] = cvd_dot_pair<T>(w1, xb[(size_t)(g + S)]);
            }
        } else {
            cvd_w wg;
            vd<T>::template unpack<1>(row, g, wg);
            got[(size_t)g] = cvd_dot<T>(wg, xb[(size_t)g]);
        }
    }
    for (int64_t g = 0; g < n / 32; g++) {
        double want = 0.0, mag = 0.0;
        for (int j = 0; j < 32; j++) {
            want += (double)w[(size_t)(32 * g + j)] * x[(size_t)(32 * g + j)];
            mag += fabs((double)w[(size_t)(32 * g + j)] * x[(size_t)(32 * g + j)]);
        }
        /* a handful of float roundings of partial sums, each within 2^-24 of the magnitude */
        const bool ok = fabs(got[(size_t)g] - want) <= 1e-5 * mag + 1e-30;
        if (!ok && *worst_group < 0) {
            *worst_group = (int)g;
            CHECK_MSG(ok, "%s (%s) group %lld: %.9g, want %.9g (magnitude %.3g)", what,
                      ox_dtype_name(T), (long long)g, (double)got[(size_t)g], want, mag);
        }
    }
}

/* The offsets of a block's fp16 scale fields, which random bytes must keep finite (the levels
 * take every bit pattern). */
static int scale_offsets(enum ox_dtype t, int *off) {
    switch (t) {
    case OX_DTYPE_Q4_1:
    case OX_DTYPE_Q5_1:
    case OX_DTYPE_Q4_K:
    case OX_DTYPE_Q5_K: off[0] = 0, off[1] = 2; return 2;
    case OX_DTYPE_Q2_K: off[0] = 80, off[1] = 82; return 2;
    case OX_DTYPE_Q3_K: off[0] = 108; return 1;
    case OX_DTYPE_Q6_K: off[0] = 208; return 1;
    default: off[0] = 0; return 1; /* q4_0, q5_0, q8_0, iq4_nl, iq4_xs: d first */
    }
}

/* Rows quantized from random floats by the CPU quantizer, then rows of random bytes (the scale
 * fields kept finite) so every bit pattern of the levels shows up. */
template <enum ox_dtype T> static void test_type(void) {
    const int64_t n = 4096;
    const size_t row_bytes = (size_t)n / dq<T>::QK * dq<T>::BS;
    std::vector<float> src((size_t)n);
    std::vector<uint8_t> row(row_bytes);
    int worst = -1;
    for (int rep = 0; rep < 4; rep++) {
        for (float &v : src)
            v = frand() * (rep + 1);
        CHECK(ox_quantize(T, src.data(), row.data(), 1, n, NULL) == OX_OK);
        check_row<T>(row.data(), n, "quantized row", &worst);
    }
    for (int rep = 0; rep < 4; rep++) {
        for (uint8_t &byte : row)
            byte = (uint8_t)rnd();
        int off[2];
        const int n_off = scale_offsets(T, off);
        for (size_t b = 0; b < row.size(); b += dq<T>::BS)
            for (int k = 0; k < n_off; k++) {
                uint8_t *hi = &row[b + (size_t)off[k] + 1];
                if ((*hi & 0x7c) == 0x7c) /* inf or NaN: clear an exponent bit */
                    *hi &= (uint8_t)~0x40;
            }
        check_row<T>(row.data(), n, "random bytes", &worst);
    }
    printf("  %-8s %s\n", ox_dtype_name(T), worst < 0 ? "ok" : "FAILED");
}

/* The device helpers' host forms: byte subtraction and the fifth-bit spread. */
static void test_helpers(void) {
    for (int v = 0; v < 128; v++)
        for (int k = 0; k <= 128; k += 4) {
            const uint32_t r = cvd_sub_bytes((uint32_t)v * 0x01010101u, (uint32_t)k * 0x01010101u);
            for (int b = 0; b < 4; b++)
                CHECK_MSG((int8_t)(r >> (8 * b)) == (int8_t)(v - k), "sub_bytes %d - %d", v, k);
        }
    for (uint32_t x = 0; x < 16; x++)
        for (int b = 0; b < 4; b++)
            CHECK_MSG((cvd_bit4(x) >> (8 * b) & 0xff) == ((x >> b & 1) << 4), "bit4 %u", x);
    CHECK(cvd_dp4a(0xff7f0102u, (int32_t)0x80ff0203u, 5) == 5 + 2 * 3 + 1 * 2 - 127 + 128);
}

int main(void) {
    test_helpers();
#define CVD_TEST_(name) test_type<OX_DTYPE_##name>();
    CVD_TYPES(CVD_TEST_)
#undef CVD_TEST_
    return test_finish("test_cuda_vecdot");
}
