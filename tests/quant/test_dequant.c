/* test_dequant.c: every dtype's reference dequantization, checked bit for bit against llama.cpp
 * (the shared reference hashes of real model files, and golden hashes of random blocks) plus
 * hand-built blocks with known values and the API's error cases. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <jansson.h>
#include <stdint.h>

#include "oxidize.h"
#include "quant/dtype.h"
#include "random_blocks.h"
#include "test.h"

/* The FNV-1a start value the reference files were made with. testdata/README.md says
 * 0xcbf29ce484222325 (decimal 14695981039346656037), but every hash in reference/dequant/ was
 * computed from 1469598103934665603 = 0x14650fb0739d0383, the decimal basis missing its last
 * digit (found by running FNV-1a backwards from the hashes of the f32 norm weights: all give
 * this start value). The prime is the standard 0x100000001b3. */
#define REF_FNV_OFFSET 0x14650fb0739d0383ull

/* FNV-1a 64 of the f32 bit patterns, bytes little-endian, in order (as the reference data). */
static uint64_t fnv1a_f32(const float *y, int64_t n) {
    uint64_t h = REF_FNV_OFFSET;
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &y[i], 4);
        for (int k = 0; k < 4; k++) {
            h ^= (u >> (8 * k)) & 0xff;
            h *= 0x100000001b3ull;
        }
    }
    return h;
}

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* ---- the dtype table ---------------------------------------------------------------------- */

static void test_dtype_table(void) {
    bool listed[OX_DTYPE_COUNT] = {false};
#define X_(NAME, id, str, blck, size)                                                              \
    listed[id] = true;                                                                             \
    CHECK(ox_dtype_valid(id));                                                                     \
    CHECK_STR(ox_dtype_name(OX_DTYPE_##NAME), str);                                                \
    CHECK_EQ(ox_dtype_block_size(OX_DTYPE_##NAME), blck);                                          \
    CHECK_EQ(ox_dtype_type_size(OX_DTYPE_##NAME), size);                                           \
    CHECK(dtype_get(id) && dtype_get(id)->to_float != NULL);                                       \
    CHECK_EQ(dtype_get(id)->is_quantized, (blck) > 1);
    OX_DTYPE_LIST(X_)
#undef X_
    int n_valid = 0;
    for (int id = -3; id < OX_DTYPE_COUNT + 5; id++) {
        bool in_list = id >= 0 && id < OX_DTYPE_COUNT && listed[id];
        n_valid += in_list;
        CHECK_MSG(ox_dtype_valid(id) == in_list, "id %d", id);
        if (!in_list) {
            CHECK(dtype_get(id) == NULL);
            CHECK(ox_dtype_name((enum ox_dtype)id) == NULL);
            CHECK_EQ(ox_dtype_block_size((enum ox_dtype)id), 0);
            CHECK_EQ(ox_dtype_type_size((enum ox_dtype)id), 0);
        }
    }
    CHECK_EQ(n_valid, 35);
    const int removed[] = {4, 5, 31, 32, 33, 36, 37, 38};
    for (size_t i = 0; i < sizeof removed / sizeof removed[0]; i++)
        CHECK_MSG(!ox_dtype_valid(removed[i]), "removed id %d", removed[i]);
}

static void test_errors(void) {
    uint8_t blocks[2 * 18] = {0};
    float out[64];
    CHECK_EQ(ox_dequantize(OX_DTYPE_Q4_0, blocks, out, 33), OX_ERR_INVALID_ARG);
    CHECK_STR(ox_last_error(), "dequantize: n=33 is not a multiple of q4_0's block size 32");
    CHECK_EQ(ox_dequantize(OX_DTYPE_Q4_K, blocks, out, 32), OX_ERR_INVALID_ARG);
    CHECK(strstr(ox_last_error(), "q4_K's block size 256") != NULL);
    CHECK_EQ(ox_dequantize((enum ox_dtype)4, blocks, out, 32), OX_ERR_INVALID_ARG);
    CHECK(strstr(ox_last_error(), "invalid type id 4") != NULL);
    CHECK_EQ(ox_dequantize((enum ox_dtype) - 1, blocks, out, 32), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_dequantize(OX_DTYPE_COUNT, blocks, out, 32), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_dequantize(OX_DTYPE_Q4_0, NULL, out, 32), OX_ERR_INVALID_ARG);
    CHECK(strstr(ox_last_error(), "src is NULL") != NULL);
    CHECK_EQ(ox_dequantize(OX_DTYPE_Q4_0, blocks, NULL, 32), OX_ERR_INVALID_ARG);
    CHECK(strstr(ox_last_error(), "dst is NULL") != NULL);
    CHECK_EQ(ox_dequantize(OX_DTYPE_Q4_0, blocks, out, -32), OX_ERR_INVALID_ARG);
    /* nothing written on failure; n = 0 is a valid no-op */
    out[0] = 42.0f;
    CHECK_EQ(ox_dequantize(OX_DTYPE_Q4_0, blocks, out, 0), OX_OK);
    CHECK_EQ(ox_dequantize(OX_DTYPE_Q4_0, blocks, out, 64), OX_OK);
    CHECK(out[0] == 0.0f && out[63] == 0.0f);
}

/* An all-zero block decodes to zeros in every type (every scale is zero or every level is),
 * and exactly block_size values are written. */
static void test_zero_blocks(void) {
    for (int id = 0; id < OX_DTYPE_COUNT; id++) {
        const struct dtype_traits *t = dtype_get(id);
        if (!t)
            continue;
        uint8_t src[3 * 292] = {0}; /* the largest block is q8_K's */
        float out[3 * 256 + 4];
        for (size_t i = 0; i < sizeof out / sizeof out[0]; i++)
            out[i] = 12345.0f;
        int64_t n = 3 * t->block_size;
        CHECK_EQ(ox_dequantize((enum ox_dtype)id, src, out, n), OX_OK);
        int nonzero = 0;
        for (int64_t i = 0; i < n; i++)
            nonzero += out[i] != 0.0f;
        CHECK_MSG(nonzero == 0, "%s: %d of %lld values of zero blocks are not 0", t->name, nonzero,
                  (long long)n);
        CHECK_MSG(out[n] == 12345.0f, "%s: wrote past n", t->name);
    }
}

/* ---- hand-built blocks with known values -------------------------------------------------- */

#define FP16_HALF      0x3800 /* 0.5 */
#define FP16_ONE       0x3c00
#define FP16_TWO       0x4000
#define FP16_MINUS_ONE 0xbc00

static void put16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void test_known_legacy(void) {
    uint8_t b[36] = {0};
    float y[128];
    /* q4_0: d 0.5, byte j = j | (15 - j) << 4: x_j = (j - 8) / 2, x_{j+16} = (7 - j) / 2 */
    put16(b, FP16_HALF);
    for (int j = 0; j < 16; j++)
        b[2 + j] = (uint8_t)(j | (15 - j) << 4);
    ox_dequantize(OX_DTYPE_Q4_0, b, y, 32);
    for (int j = 0; j < 16; j++) {
        CHECK(y[j] == (j - 8) * 0.5f);
        CHECK(y[j + 16] == (7 - j) * 0.5f);
    }
    /* q4_1: d 1, m -1, both nibbles j: x = j - 1 */
    put16(b, FP16_ONE);
    put16(b + 2, FP16_MINUS_ONE);
    for (int j = 0; j < 16; j++)
        b[4 + j] = (uint8_t)(j | j << 4);
    ox_dequantize(OX_DTYPE_Q4_1, b, y, 32);
    for (int j = 0; j < 16; j++)
        CHECK(y[j] == j - 1.0f && y[j + 16] == j - 1.0f);
    /* q5_0: d 1, nibbles 0, 5th bits at odd elements: x = odd ? 0 : -16 */
    memset(b, 0, sizeof b);
    put16(b, FP16_ONE);
    memset(b + 2, 0xaa, 4);
    ox_dequantize(OX_DTYPE_Q5_0, b, y, 32);
    for (int j = 0; j < 32; j++)
        CHECK_MSG(y[j] == (j % 2 ? 0.0f : -16.0f), "q5_0 element %d: %g", j, y[j]);
    /* q8_0: d 2, q = j - 16 */
    put16(b, FP16_TWO);
    for (int j = 0; j < 32; j++)
        b[2 + j] = (uint8_t)(int8_t)(j - 16);
    ox_dequantize(OX_DTYPE_Q8_0, b, y, 32);
    for (int j = 0; j < 32; j++)
        CHECK(y[j] == 2.0f * (j - 16));
    /* q1_0: d 1, only bit 0 set: x_0 = +1, the rest -1 */
    memset(b, 0, sizeof b);
    put16(b, FP16_ONE);
    b[2] = 0x01;
    ox_dequantize(OX_DTYPE_Q1_0, b, y, 128);
    CHECK(y[0] == 1.0f && y[1] == -1.0f && y[8] == -1.0f && y[127] == -1.0f);
    /* q2_0: d 1, first byte holds codes 0 1 2 3 -> -1 0 1 2 */
    b[2] = 0xe4;
    ox_dequantize(OX_DTYPE_Q2_0, b, y, 64);
    CHECK(y[0] == -1.0f && y[1] == 0.0f && y[2] == 1.0f && y[3] == 2.0f && y[4] == -1.0f);
}

static void test_known_k(void) {
    uint8_t b[292] = {0};
    float y[256];
    /* q4_K: d 1, dmin 1; sub-block 0 scale 2 min 3; sub-block 4 scale 5 + 16 (top bits from
     * byte 0) min 1 */
    put16(b, FP16_ONE);
    put16(b + 2, FP16_ONE);
    b[4 + 0] = 2 | 0x40;
    b[4 + 4] = 3;
    b[4 + 8] = 5 | 1 << 4;
    b[16 + 0] = 0x97;  /* element 0: 7 (element 32: 9, sub-block 1 has scale 0) */
    b[16 + 64] = 0x0c; /* element 128: 12 */
    ox_dequantize(OX_DTYPE_Q4_K, b, y, 256);
    CHECK(y[0] == 2 * 7 - 3.0f && y[1] == -3.0f && y[32] == 0.0f && y[128] == 21 * 12 - 1.0f);
    /* q3_K: d 1; scale 0 = (1 | 2 << 4) - 32 = 1; element 0: level 3 with its high bit set,
     * element 1: level 0 with high bit clear -> -4 */
    memset(b, 0, sizeof b);
    b[0] = 1;                 /* hmask */
    b[32] = 3;                /* qs */
    b[96] = 1;                /* scales[0] */
    b[96 + 8] = 2;            /* scales[8] */
    put16(b + 108, FP16_ONE); /* d */
    ox_dequantize(OX_DTYPE_Q3_K, b, y, 256);
    CHECK(y[0] == 3.0f && y[1] == -4.0f);
    /* q6_K: d 1, scale 3 for elements 0..15; element 0 = (5 | 2 << 4) - 32 = 5 */
    memset(b, 0, sizeof b);
    b[0] = 0x05;   /* ql */
    b[128] = 0x02; /* qh */
    b[192] = 3;    /* scales[0] */
    put16(b + 208, FP16_ONE);
    ox_dequantize(OX_DTYPE_Q6_K, b, y, 256);
    CHECK(y[0] == 15.0f && y[1] == -96.0f && y[16] == 0.0f);
    /* q8_K: float d 0.5, q = j - 128 */
    const float half = 0.5f;
    memcpy(b, &half, 4);
    for (int j = 0; j < 256; j++)
        b[4 + j] = (uint8_t)(j - 128);
    ox_dequantize(OX_DTYPE_Q8_K, b, y, 256);
    for (int j = 0; j < 256; j++)
        CHECK(y[j] == 0.5f * (j - 128));
}

/* e2m1 values; code 8 (negative zero) decodes to +0, as ggml's integer level table has 0 */
static const float E2M1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, 0, -0.5f, -1, -1.5f, -2, -3, -4, -6};

static void test_known_fp4(void) {
    uint8_t b[36] = {0};
    float y[64];
    /* mxfp4: e 127 is a scale of 1 */
    b[0] = 127;
    for (int j = 0; j < 16; j++)
        b[1 + j] = (uint8_t)(j | (15 - j) << 4);
    ox_dequantize(OX_DTYPE_MXFP4, b, y, 32);
    for (int j = 0; j < 16; j++)
        CHECK(bits_of(y[j]) == bits_of(E2M1[j]) && bits_of(y[j + 16]) == bits_of(E2M1[15 - j]));
    b[0] = 0; /* 2^-127, a float subnormal; code 2 (value 1) */
    b[1] = 2;
    ox_dequantize(OX_DTYPE_MXFP4, b, y, 32);
    CHECK(bits_of(y[0]) == 0x00400000u);
    /* nvfp4: group scales 1.0 (0x38), NaN code 0x7f (reads as 0), 2^-9 (subnormal 0x01), 1.5 */
    memset(b, 0, sizeof b);
    b[0] = 0x38, b[1] = 0x7f, b[2] = 0x01, b[3] = 0x3c;
    for (int s = 0; s < 4; s++)
        for (int j = 0; j < 8; j++)
            b[4 + 8 * s + j] = (uint8_t)((2 * j) | (2 * j + 1) << 4);
    ox_dequantize(OX_DTYPE_NVFP4, b, y, 64);
    for (int j = 0; j < 8; j++) {
        CHECK(bits_of(y[j]) == bits_of(E2M1[2 * j]));
        CHECK(bits_of(y[j + 8]) == bits_of(E2M1[2 * j + 1]));
        CHECK(y[16 + j] == 0.0f);
        CHECK(y[32 + j] == E2M1[2 * j] * 0x1p-9f);
        CHECK(y[48 + j + 8] == E2M1[2 * j + 1] * 1.5f);
    }
    /* iq4_nl: d 1 -> the level table itself */
    static const int8_t levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                      1,    13,   25,  38,  53,  69,  89,  113};
    memset(b, 0, sizeof b);
    put16(b, FP16_ONE);
    for (int j = 0; j < 16; j++)
        b[2 + j] = (uint8_t)(j | (15 - j) << 4);
    ox_dequantize(OX_DTYPE_IQ4_NL, b, y, 32);
    for (int j = 0; j < 16; j++)
        CHECK(y[j] == levels[j] && y[j + 16] == levels[15 - j]);
}

/* tq1_0: 5 trits per byte, stored as ceil(v * 256 / 243) of the base-3 number v (first trit
 * most significant); tq2_0: 2-bit codes. */
static void test_known_ternary(void) {
    uint8_t b[66] = {0};
    float y[256];
    const int trits[5] = {2, 0, 1, 2, 1};
    int v = 0;
    for (int k = 0; k < 5; k++)
        v = 3 * v + trits[k];
    for (int m = 0; m < 48; m++)
        b[m] = (uint8_t)((v * 256 + 242) / 243);
    put16(b + 52, FP16_TWO);
    ox_dequantize(OX_DTYPE_TQ1_0, b, y, 256);
    for (int k = 0; k < 5; k++) {
        CHECK_MSG(y[32 * k] == 2.0f * (trits[k] - 1), "tq1_0 trit %d: %g", k, y[32 * k]);
        CHECK(y[160 + 16 * k] == 2.0f * (trits[k] - 1));
    }
    memset(b, 0, sizeof b);
    b[0] = 0x24; /* codes 0 1 2 0 in bit pairs 0..3 */
    put16(b + 64, FP16_ONE);
    ox_dequantize(OX_DTYPE_TQ2_0, b, y, 256);
    CHECK(y[0] == -1.0f && y[32] == 0.0f && y[64] == 1.0f && y[96] == -1.0f && y[1] == -1.0f);
}

static void test_known_iq(void) {
    uint8_t b[136] = {0}; /* the largest block here, iq4_xs */
    float y[256];
    /* iq2_xxs: d 1, scale nibble 0 -> 0.125; grid entry 0 is eight 8s -> 1.0; stored sign
     * bits 1 -> sign pattern 129 (elements 0 and 7 negative, the parity bit) */
    put16(b, FP16_ONE);
    b[2 + 4] = 1;
    ox_dequantize(OX_DTYPE_IQ2_XXS, b, y, 256);
    CHECK(y[0] == -1.0f && y[1] == 1.0f && y[6] == 1.0f && y[7] == -1.0f && y[8] == 1.0f);
    /* iq1_s: d 1, grid entry 0 is all -1, delta +1/8 -> -0.875 (scale 2*0+1) */
    memset(b, 0, sizeof b);
    put16(b, FP16_ONE);
    ox_dequantize(OX_DTYPE_IQ1_S, b, y, 256);
    CHECK(y[0] == -0.875f && y[255] == -0.875f);
    /* iq4_xs: sub-block 0 scale 33 (low nibble 1, top bits 2) -> levels times 1 */
    memset(b, 0, sizeof b);
    put16(b, FP16_ONE);
    put16(b + 2, 2);
    b[4] = 1;
    b[8] = 0xf0; /* element 0: code 0, element 16: code 15 */
    ox_dequantize(OX_DTYPE_IQ4_XS, b, y, 256);
    CHECK(y[0] == -127.0f && y[16] == 113.0f && y[32] == 32.0f * 127.0f);
}

static void test_known_plain(void) {
    float y[4];
    const uint16_t h[4] = {0x3c00, 0xc000, 0x0001, 0x7c00}; /* 1, -2, 2^-24, inf */
    ox_dequantize(OX_DTYPE_F16, h, y, 4);
    CHECK(y[0] == 1.0f && y[1] == -2.0f && y[2] == 0x1p-24f && isinf(y[3]));
    const uint16_t bf[2] = {0x3f80, 0xc040}; /* 1, -3 */
    ox_dequantize(OX_DTYPE_BF16, bf, y, 2);
    CHECK(y[0] == 1.0f && y[1] == -3.0f);
    const int8_t i8[2] = {-128, 127};
    ox_dequantize(OX_DTYPE_I8, i8, y, 2);
    CHECK(y[0] == -128.0f && y[1] == 127.0f);
    const int16_t i16[2] = {-32768, 1234};
    ox_dequantize(OX_DTYPE_I16, i16, y, 2);
    CHECK(y[0] == -32768.0f && y[1] == 1234.0f);
    const int32_t i32[2] = {16777217, -5}; /* 2^24 + 1 rounds to even */
    ox_dequantize(OX_DTYPE_I32, i32, y, 2);
    CHECK(y[0] == 16777216.0f && y[1] == -5.0f);
    const int64_t i64[2] = {INT64_MIN, 3};
    ox_dequantize(OX_DTYPE_I64, i64, y, 2);
    CHECK(y[0] == -0x1p63f && y[1] == 3.0f);
    const double f64[2] = {0.1, -1e300};
    ox_dequantize(OX_DTYPE_F64, f64, y, 2);
    CHECK(y[0] == 0.1f && isinf(y[1]) && y[1] < 0);
    const float f32[2] = {1.5f, -0.0f};
    ox_dequantize(OX_DTYPE_F32, f32, y, 2);
    CHECK(bits_of(y[0]) == bits_of(1.5f) && bits_of(y[1]) == 0x80000000u);
}

/* ---- golden hashes: random blocks, dequantized by ggml ------------------------------------- */

/* fnv1a_f32 of the output of ggml's own dequantize_row_<type> (ggml_fp16_to_fp32_row for f16,
 * ggml_bf16_to_fp32_row for bf16), llama.cpp commit d32676d7, on rb_fill(type, buf,
 * golden_blocks(type), 0x5eed). These cover the types the model files do not (iq2_*, iq3_xxs,
 * iq1_*, nvfp4, q8_K) and every bit pattern the models never produce. */
static const struct {
    enum ox_dtype type;
    uint64_t hash;
} GOLDEN[] = {
    {OX_DTYPE_F16, 0xa720c4050d0b7291ull},     {OX_DTYPE_BF16, 0x72f14df2cf67dc9eull},
    {OX_DTYPE_Q1_0, 0x0e7e0a74b6019703ull},    {OX_DTYPE_Q2_0, 0x6927bd837b38c9c8ull},
    {OX_DTYPE_Q4_0, 0x35b6c5efd81aeccfull},    {OX_DTYPE_Q4_1, 0x85232db573ddf15aull},
    {OX_DTYPE_Q5_0, 0x925ef44c8db0db75ull},    {OX_DTYPE_Q5_1, 0x2f725bf2677bead1ull},
    {OX_DTYPE_Q8_0, 0xe54e49045d2ed482ull},    {OX_DTYPE_Q2_K, 0xb042e3c67ba74569ull},
    {OX_DTYPE_Q3_K, 0x9f192c1b1a6d796eull},    {OX_DTYPE_Q4_K, 0x0fc4e8f38e3e2861ull},
    {OX_DTYPE_Q5_K, 0x00e2399fec7c6258ull},    {OX_DTYPE_Q6_K, 0x3401e9bc47d3d41aull},
    {OX_DTYPE_Q8_K, 0xb70278fb46147df2ull},    {OX_DTYPE_IQ2_XXS, 0xa5a24ab348fe8677ull},
    {OX_DTYPE_IQ2_XS, 0xe6de9b0d89381dceull},  {OX_DTYPE_IQ2_S, 0x0eca3cd96e968c4bull},
    {OX_DTYPE_IQ3_XXS, 0x95ed1e178d00e6c4ull}, {OX_DTYPE_IQ3_S, 0x91d9dabaa07ae9a8ull},
    {OX_DTYPE_IQ1_S, 0xec931cdeb800c61full},   {OX_DTYPE_IQ1_M, 0xd523cd6be94c92f8ull},
    {OX_DTYPE_IQ4_NL, 0x8bfe9e351d582003ull},  {OX_DTYPE_IQ4_XS, 0x3a58450a0624351eull},
    {OX_DTYPE_MXFP4, 0xc3b1e1829211e2eaull},   {OX_DTYPE_NVFP4, 0x877c0ab3470fe13dull},
    {OX_DTYPE_TQ1_0, 0xb0457bd20ec7a3f5ull},   {OX_DTYPE_TQ2_0, 0xa6ab012a74953c10ull},
};

/* 4096 elements, at least 16 blocks. */
static int64_t golden_blocks(enum ox_dtype type) {
    int64_t nb = 4096 / ox_dtype_block_size(type);
    return nb > 16 ? nb : 16;
}

static void test_golden(void) {
    for (size_t k = 0; k < sizeof GOLDEN / sizeof GOLDEN[0]; k++) {
        enum ox_dtype type = GOLDEN[k].type;
        int64_t nb = golden_blocks(type), n = nb * ox_dtype_block_size(type);
        uint8_t *src = malloc((size_t)nb * ox_dtype_type_size(type));
        float *y = malloc((size_t)n * sizeof *y);
        rb_fill(type, src, nb, 0x5eed);
        CHECK_EQ(ox_dequantize(type, src, y, n), OX_OK);
        uint64_t h = fnv1a_f32(y, n);
        CHECK_MSG(h == GOLDEN[k].hash, "%s: random blocks hash %016llx, ggml %016llx",
                  ox_dtype_name(type), (unsigned long long)h, (unsigned long long)GOLDEN[k].hash);
        free(src);
        free(y);
    }
}

/* ggml has no q8_1 dequantizer: it must read d and qs exactly as q8_0 and ignore s. */
static void test_q8_1_as_q8_0(void) {
    enum { NB = 16 };
    uint8_t q81[NB * 36], q80[NB * 34];
    float a[NB * 32], b[NB * 32];
    rb_fill(OX_DTYPE_Q8_1, q81, NB, 7);
    for (int i = 0; i < NB; i++) {
        memcpy(q80 + 34 * i, q81 + 36 * i, 2);          /* d */
        memcpy(q80 + 34 * i + 2, q81 + 36 * i + 4, 32); /* qs */
    }
    CHECK_EQ(ox_dequantize(OX_DTYPE_Q8_1, q81, a, NB * 32), OX_OK);
    CHECK_EQ(ox_dequantize(OX_DTYPE_Q8_0, q80, b, NB * 32), OX_OK);
    CHECK(memcmp(a, b, sizeof a) == 0);
}

/* Misaligned sources decode the same as aligned ones (blocks are read with memcpy). */
static void test_misaligned(void) {
    for (size_t k = 0; k < sizeof GOLDEN / sizeof GOLDEN[0]; k++) {
        enum ox_dtype type = GOLDEN[k].type;
        size_t size = ox_dtype_type_size(type);
        int64_t n = 2 * ox_dtype_block_size(type);
        uint8_t *buf = malloc(2 * size + 1);
        float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
        rb_fill(type, buf, 2, 99);
        ox_dequantize(type, buf, a, n);
        memmove(buf + 1, buf, 2 * size);
        ox_dequantize(type, buf + 1, b, n);
        CHECK_MSG(memcmp(a, b, (size_t)n * sizeof *a) == 0, "%s misaligned", ox_dtype_name(type));
        free(buf);
        free(a);
        free(b);
    }
}

/* ---- the reference data: llama.cpp's dequantization of every tensor of the shared models ---- */

struct tally {
    int tensors[OX_DTYPE_COUNT]; /* tensors of each type checked */
    int matched[OX_DTYPE_COUNT]; /* ... whose hash matched */
};

/* The reference's count, hash, sum, sum of squares and first values of one tensor. */
static bool check_summary(const char *where, const float *y, int64_t n, json_t *jt) {
    uint64_t want = strtoull(json_string_value(json_object_get(jt, "fnv1a64_f32")), NULL, 16);
    uint64_t got = fnv1a_f32(y, n);
    CHECK_MSG(got == want, "%s: hash %016llx, reference %016llx", where, (unsigned long long)got,
              (unsigned long long)want);
    double sum = 0, sumsq = 0;
    for (int64_t i = 0; i < n; i++) {
        sum += y[i];
        sumsq += (double)y[i] * y[i];
    }
    double ref_sum = json_number_value(json_object_get(jt, "sum"));
    double ref_sumsq = json_number_value(json_object_get(jt, "sumsq"));
    /* only summation order may differ: far below these bounds */
    CHECK_MSG(fabs(sum - ref_sum) <= 1e-9 * (1 + sqrt((double)n * ref_sumsq)),
              "%s: sum %.17g vs %.17g", where, sum, ref_sum);
    CHECK_MSG(fabs(sumsq - ref_sumsq) <= 1e-9 * (1 + ref_sumsq), "%s: sumsq %.17g vs %.17g", where,
              sumsq, ref_sumsq);
    json_t *first = json_object_get(jt, "first");
    size_t n_first = json_array_size(first);
    CHECK_MSG(n_first == (size_t)(n < 8 ? n : 8), "%s: %zu first values", where, n_first);
    /* printed with 9 significant digits, which round-trip a float exactly ("-0" included) */
    for (size_t i = 0; i < n_first && (int64_t)i < n; i++) {
        float ref = (float)json_number_value(json_array_get(first, i));
        CHECK_MSG(bits_of(y[i]) == bits_of(ref), "%s: value %zu is %.9g, reference %.9g", where, i,
                  y[i], ref);
    }
    return got == want;
}

static void check_tensor(const struct ox_gguf *g, const char *file, json_t *jt, struct tally *tl) {
    const char *name = json_string_value(json_object_get(jt, "name"));
    const char *type = json_string_value(json_object_get(jt, "type"));
    CHECK_MSG(name && type, "%s: tensor entry without name or type", file);
    if (!name || !type)
        return;
    char where[512];
    snprintf(where, sizeof where, "%s: %s (%s)", file, name, type);
    struct ox_tensor_info t;
    int64_t idx = ox_gguf_find_tensor(g, name);
    CHECK_MSG(idx >= 0 && ox_gguf_tensor(g, idx, &t) == OX_OK, "%s: not found", where);
    if (idx < 0 || ox_gguf_tensor(g, idx, &t) != OX_OK)
        return;
    CHECK_MSG(ox_dtype_name(t.type) && !strcmp(ox_dtype_name(t.type), type), "%s: file says %s",
              where, ox_dtype_name(t.type) ? ox_dtype_name(t.type) : "?");
    int64_t n = t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3];
    CHECK_MSG(n == (int64_t)json_number_value(json_object_get(jt, "n")), "%s: n %lld", where,
              (long long)n);
    CHECK_EQ(t.n_bytes, (uint64_t)(n / ox_dtype_block_size(t.type)) * ox_dtype_type_size(t.type));
    float *y = malloc((size_t)n * sizeof *y);
    CHECK(y != NULL);
    if (!y)
        return;
    enum ox_status s = ox_dequantize(t.type, t.data, y, n);
    CHECK_MSG(s == OX_OK, "%s: %s", where, ox_last_error());
    if (s == OX_OK) {
        tl->tensors[t.type]++;
        tl->matched[t.type] += check_summary(where, y, n, jt);
    }
    free(y);
}

/* One dequant/<model>.json: every tensor of its model, and no tensor left out. */
static void check_reference_file(const char *json_path, const char *json_name, struct tally *tl) {
    json_error_t err;
    /* all numbers as doubles, so that "-0" keeps its sign */
    json_t *root = json_load_file(json_path, JSON_DECODE_INT_AS_REAL, &err);
    CHECK_MSG(root != NULL, "%s: %s (line %d)", json_name, err.text, err.line);
    if (!root)
        return;
    const char *file = json_string_value(json_object_get(root, "file"));
    json_t *tensors = json_object_get(root, "tensors");
    char path[2048];
    snprintf(path, sizeof path, "%s/models/%s", test_data_dir(), file ? file : "?");
    struct ox_gguf *g = NULL;
    enum ox_status s = ox_gguf_open(path, &g);
    CHECK_MSG(s == OX_OK, "%s: %s", path, ox_last_error());
    if (s == OX_OK) {
        CHECK_MSG(ox_gguf_n_tensors(g) == (int64_t)json_array_size(tensors),
                  "%s: %lld tensors in the file, %zu in the reference", json_name,
                  (long long)ox_gguf_n_tensors(g), json_array_size(tensors));
        for (size_t i = 0; i < json_array_size(tensors); i++)
            check_tensor(g, file, json_array_get(tensors, i), tl);
        ox_gguf_free(g);
    }
    json_decref(root);
}

static int compare_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_reference_files(void) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/reference/dequant", test_data_dir());
    DIR *d = opendir(dir);
    CHECK_MSG(d != NULL, "cannot open %s (set OX_TESTDATA)", dir);
    if (!d)
        return;
    char *names[256];
    int n_files = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n_files < 256) {
        size_t len = strlen(e->d_name);
        if (len > 5 && !strcmp(e->d_name + len - 5, ".json"))
            names[n_files++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n_files, sizeof names[0], compare_names);
    CHECK_MSG(n_files > 0, "no reference files in %s", dir);
    struct tally tl = {{0}, {0}};
    for (int i = 0; i < n_files; i++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        check_reference_file(path, names[i], &tl);
        free(names[i]);
    }
    printf("reference files: %d; tensors matched / checked per type:", n_files);
    for (int id = 0; id < OX_DTYPE_COUNT; id++)
        if (tl.tensors[id])
            printf(" %s %d/%d", ox_dtype_name((enum ox_dtype)id), tl.matched[id], tl.tensors[id]);
    printf("\n");
}

int main(void) {
    test_dtype_table();
    test_errors();
    test_zero_blocks();
    test_known_legacy();
    test_known_k();
    test_known_fp4();
    test_known_ternary();
    test_known_iq();
    test_known_plain();
    test_golden();
    test_q8_1_as_q8_0();
    test_misaligned();
    test_reference_files();
    return test_finish("test_dequant");
}
