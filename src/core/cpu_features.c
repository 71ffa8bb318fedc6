/* cpu_features.c: runtime CPU feature detection (cpuid + XCR0 on x86-64, hwcaps on AArch64). */
#define _GNU_SOURCE
#include "core/cpu_features.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "oxidize.h"

static struct cpu_features features;
static pthread_once_t features_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static unsigned long long read_xcr0(void) {
    unsigned int lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

static void detect(void) {
    unsigned int a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return;
    features.sse3 = c & (1u << 0);
    features.ssse3 = c & (1u << 9);
    features.fma = c & (1u << 12);
    features.f16c = c & (1u << 29);
    bool osxsave = c & (1u << 27);
    bool avx_hw = c & (1u << 28);
    unsigned long long xcr0 = osxsave ? read_xcr0() : 0;
    bool os_avx = (xcr0 & 0x6) == 0x6;      /* XMM + YMM state */
    bool os_avx512 = (xcr0 & 0xe6) == 0xe6; /* + opmask, ZMM_Hi256, Hi16_ZMM */
    features.avx = avx_hw && os_avx;
    features.fma = features.fma && os_avx;
    features.f16c = features.f16c && os_avx;
    unsigned int b7 = 0, c7 = 0, d7 = 0, a71 = 0;
    if (__get_cpuid_count(7, 0, &a, &b7, &c7, &d7)) {
        features.avx2 = os_avx && (b7 & (1u << 5));
        features.avx512f = os_avx512 && (b7 & (1u << 16));
        features.avx512bw = features.avx512f && (b7 & (1u << 30));
        features.avx512dq = features.avx512f && (b7 & (1u << 17));
        features.avx512vl = features.avx512f && (b7 & (1u << 31));
        features.avx512vnni = features.avx512f && (c7 & (1u << 11));
    }
    if (__get_cpuid_count(7, 1, &a71, &b, &c, &d)) {
        features.avx512bf16 = features.avx512f && (a71 & (1u << 5));
        features.avx_vnni = os_avx && (a71 & (1u << 4));
    }
}

#elif defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>

static void detect(void) {
    unsigned long hw = getauxval(AT_HWCAP);
    unsigned long hw2 = getauxval(AT_HWCAP2);
    features.neon = hw & HWCAP_ASIMD;
    features.dotprod = hw & HWCAP_ASIMDDP;
    features.fp16 = hw & HWCAP_FPHP;
#ifdef HWCAP2_I8MM
    features.i8mm = hw2 & HWCAP2_I8MM;
#else
    (void)hw2;
#endif
}

#else
static void detect(void) {
    /* unknown architecture: no SIMD features, the scalar reference paths run */
}
#endif

const struct cpu_features *cpu_features_get(void) {
    pthread_once(&features_once, detect);
    return &features;
}

size_t ox_cpu_features(char *buf, size_t cap) {
    const struct cpu_features *f = cpu_features_get();
    const struct {
        bool on;
        const char *name;
    } list[] = {
        {f->sse3, "sse3"},
        {f->ssse3, "ssse3"},
        {f->avx, "avx"},
        {f->avx2, "avx2"},
        {f->fma, "fma"},
        {f->f16c, "f16c"},
        {f->avx512f, "avx512f"},
        {f->avx512bw, "avx512bw"},
        {f->avx512dq, "avx512dq"},
        {f->avx512vl, "avx512vl"},
        {f->avx512vnni, "avx512vnni"},
        {f->avx512bf16, "avx512bf16"},
        {f->avx_vnni, "avxvnni"},
        {f->neon, "neon"},
        {f->dotprod, "dotprod"},
        {f->i8mm, "i8mm"},
        {f->fp16, "fp16"},
    };
    char tmp[256] = "";
    size_t len = 0;
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) {
        if (list[i].on)
            len +=
                (size_t)snprintf(tmp + len, sizeof tmp - len, "%s%s", len ? " " : "", list[i].name);
    }
    if (cap)
        snprintf(buf, cap, "%s", tmp);
    return len;
}
