/* test_core.c: status and errors, logging, allocation, files, strmap, fp16/bf16, CPU features. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>

#include "core/alloc.h"
#include "core/cpu_features.h"
#include "core/file.h"
#include "core/fp16.h"
#include "core/log.h"
#include "core/strmap.h"
#include "test.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

static void check_status(void) {
    CHECK_STR(ox_status_name(OX_OK), "OX_OK");
    CHECK_STR(ox_status_name(OX_ERR_CONTEXT_FULL), "OX_ERR_CONTEXT_FULL");
    CHECK_STR(ox_status_name((enum ox_status)99), "OX_UNKNOWN");
    CHECK_EQ(ox_fail(OX_ERR_IO, "x=%d", 42), OX_ERR_IO);
    CHECK_STR(ox_last_error(), "x=42");
}

static void *other_thread(void *arg) {
    (void)arg;
    /* the last error is per thread: this one starts empty */
    int empty = ox_last_error()[0] == 0;
    ox_fail(OX_ERR_OOM, "from the other thread");
    return (void *)(intptr_t)empty;
}

static void check_thread_local_error(void) {
    ox_fail(OX_ERR_IO, "main thread");
    pthread_t t;
    void *ret = NULL;
    CHECK_EQ(pthread_create(&t, NULL, other_thread, NULL), 0);
    pthread_join(t, &ret);
    CHECK(ret == (void *)1);
    CHECK_STR(ox_last_error(), "main thread");
}

static int log_calls;
static void log_cb(enum ox_log_level level, const char *msg, void *user) {
    log_calls += level == OX_LOG_WARN && strcmp(msg, "hello 7") == 0 && user == &log_calls;
}

static void check_log(void) {
    ox_log(OX_LOG_WARN, "silent by default %d", 1);
    ox_log_set(log_cb, &log_calls);
    ox_log(OX_LOG_WARN, "hello %d", 7);
    ox_log_set(NULL, NULL);
    ox_log(OX_LOG_WARN, "hello %d", 7);
    CHECK_EQ(log_calls, 1);
}

static void check_alloc(void) {
    for (size_t size = 0; size < 5000; size += 777) {
        void *p = ox_aligned_alloc(OX_ALIGN, size);
        CHECK(p && (uintptr_t)p % OX_ALIGN == 0);
        ox_aligned_free(p);
    }
    uint64_t r;
    CHECK(ox_mul_overflows(1ull << 32, 1ull << 32, &r));
    CHECK(!ox_mul_overflows(1ull << 31, 1ull << 32, &r) && r == 1ull << 63);
    CHECK(ox_add_overflows(UINT64_MAX, 1, &r));
    CHECK(!ox_pad_overflows(33, 32, &r) && r == 64);
    CHECK(ox_pad_overflows(UINT64_MAX - 3, 32, &r));
}

static void check_file(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/llama-q4_0.gguf", test_data_dir());
    struct file_map a, b;
    CHECK_EQ(file_map_open(path, true, &a), OX_OK);
    CHECK_EQ(file_map_open(path, false, &b), OX_OK);
    CHECK(a.mapped && !b.mapped && a.size == b.size && a.size > 1000);
    CHECK(a.data && b.data && memcmp(a.data, b.data, a.size) == 0);
    file_map_close(&a);
    file_map_close(&b);
    file_map_close(&b); /* closing twice is harmless */
    CHECK_EQ(file_map_open("/nonexistent/model.gguf", true, &a), OX_ERR_IO);
    CHECK(strstr(ox_last_error(), "/nonexistent/model.gguf") != NULL);
    CHECK_EQ(file_map_open(test_data_dir(), true, &a), OX_ERR_IO);
    CHECK(a.data == NULL);
}

static void check_strmap(void) {
    static char keys[5000][16];
    struct strmap m = {0};
    CHECK_EQ(strmap_find(&m, "x", 1), -1);
    for (int i = 0; i < 5000; i++) {
        snprintf(keys[i], sizeof keys[i], "key%d", i);
        int64_t dup = 0;
        CHECK_EQ(strmap_insert(&m, keys[i], strlen(keys[i]), i, &dup), OX_OK);
        CHECK_EQ(dup, -1);
    }
    int64_t dup = 0;
    CHECK_EQ(strmap_insert(&m, "key17", 5, 99, &dup), OX_OK);
    CHECK_EQ(dup, 17);
    int found = 0;
    for (int i = 0; i < 5000; i++)
        found += strmap_find(&m, keys[i], strlen(keys[i])) == i;
    CHECK_EQ(found, 5000);
    CHECK_EQ(strmap_find(&m, "key5000", 7), -1);
    CHECK_EQ(strmap_find(&m, "key1", 3), -1); /* a prefix is a different key */
    strmap_free(&m);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rng32(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

/* Round to nearest even, worked out in double arithmetic: an independent oracle for bf16. */
static uint16_t bf16_oracle(float f) {
    uint32_t u = fp32_bits(f);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    double x = f, dl = bf16_to_fp32(lo), dh = bf16_to_fp32(hi);
    if (((fp32_bits(bf16_to_fp32(hi)) >> 23) & 0xff) == 0xff) /* rounding up overflows to inf */
        dh = (u >> 31 ? -1 : 1) * 0x1p128;
    double el = fabs(x - dl), eh = fabs(dh - x);
    if (el < eh || (el == eh && (lo & 1) == 0))
        return lo;
    return hi;
}

static void check_bf16(void) {
    CHECK_EQ(fp32_to_bf16(1.0f), 0x3f80);
    CHECK_EQ(fp32_to_bf16(fp32_from_bits(0x3f808000)), 0x3f80); /* tie, even stays */
    CHECK_EQ(fp32_to_bf16(fp32_from_bits(0x3f818000)), 0x3f82); /* tie, odd rounds up */
    CHECK_EQ(fp32_to_bf16(fp32_from_bits(0x7f800001)) & 0x7fc0, 0x7fc0); /* NaN stays NaN */
    int bad = 0;
    for (int i = 0; i < 2000000; i++) {
        float f = fp32_from_bits(rng32() | (uint32_t)(i & 1) << 31);
        if (isnan(f) || isinf(f))
            continue;
        bad += fp32_to_bf16(f) != bf16_oracle(f);
    }
    CHECK_EQ(bad, 0);
    for (uint32_t h = 0; h < 65536; h++)
        bad += !isnan(bf16_to_fp32((uint16_t)h)) && fp32_to_bf16(bf16_to_fp32((uint16_t)h)) != h;
    CHECK_EQ(bad, 0);
}

#if defined(__x86_64__)
/* The CPU's own converter (F16C, round to nearest even) is the oracle for fp16. */
__attribute__((target("f16c"))) static void check_fp16_hw(void) {
    int bad_up = 0, bad_down = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float ours = fp16_to_fp32((uint16_t)h), hw = _cvtsh_ss((unsigned short)h);
        bad_up += fp32_bits(ours) != fp32_bits(hw); /* bit-exact, NaN payloads included */
    }
    for (int i = 0; i < 4000000; i++) {
        uint32_t u = rng32();
        /* half the samples near the half range, where every rounding case happens */
        if (i & 1)
            u = (u & 0x8fffffffu) | 0x30000000u;
        float f = fp32_from_bits(u);
        uint16_t hw = (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
        uint16_t ours = fp32_to_fp16(f);
        bad_down += ours != hw && !(isnan(f) && (ours & 0x7e00) == 0x7e00);
    }
    CHECK_EQ(bad_up, 0);
    CHECK_EQ(bad_down, 0);
}
#endif

static void check_fp16(void) {
    CHECK_EQ(fp32_to_fp16(1.0f), 0x3c00);
    CHECK_EQ(fp32_to_fp16(65504.0f), 0x7bff);
    CHECK_EQ(fp32_to_fp16(65520.0f), 0x7c00); /* rounds to inf */
    CHECK_EQ(fp32_to_fp16(0x1p-24f), 0x0001);
    CHECK_EQ(fp32_to_fp16(0x1p-25f), 0x0000); /* tie to even (zero) */
    CHECK(fp16_to_fp32(0x0001) == 0x1p-24f);
    CHECK(fp16_to_fp32(0xfbff) == -65504.0f);
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = fp16_to_fp32((uint16_t)h);
        bad += !isnan(f) && fp32_to_fp16(f) != h;
    }
    CHECK_EQ(bad, 0);
#if defined(__x86_64__)
    if (cpu_features_get()->f16c)
        check_fp16_hw();
#endif
}

/* ox_cpu_features follows the snprintf rule and agrees with the kernel's view of the CPU. */
static void check_cpu_features(void) {
    char small[4];
    size_t need = ox_cpu_features(small, sizeof small);
    char *full = malloc(need + 1);
    CHECK_EQ(ox_cpu_features(full, need + 1), need);
    CHECK_EQ(strlen(full), need);
    CHECK(need < 4 || (strlen(small) == 3 && memcmp(small, full, 3) == 0));
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[8192];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "flags", 5) != 0)
                continue;
            const struct cpu_features *cf = cpu_features_get();
            CHECK_EQ(cf->avx2, strstr(line, " avx2") != NULL);
            CHECK_EQ(cf->fma, strstr(line, " fma") != NULL);
            CHECK_EQ(cf->avx512f, strstr(line, " avx512f") != NULL);
            CHECK_EQ(cf->avx512vnni, strstr(line, " avx512_vnni") != NULL);
            break;
        }
        fclose(f);
    }
    printf("cpu features: %s\n", full);
    free(full);
}

int main(void) {
    check_status();
    check_thread_local_error();
    check_log();
    check_alloc();
    check_file();
    check_strmap();
    check_fp16();
    check_bf16();
    check_cpu_features();
    return test_finish("test_core");
}
