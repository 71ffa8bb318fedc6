/* cpu_features.c: runtime CPU feature detection (cpuid + XCR0 on x86-64, hwcaps on AArch64). */
#define _GNU_SOURCE
#include "core/cpu_features.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "oxidize.h"

static struct cpu_features features;  /* detected */
static struct cpu_features effective; /* lowered by OX_CPU_ISA */
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

#elif defined(__wasm__)
static void detect(void) {
    /* WebAssembly has no runtime detection: a module built with SIMD128 fails to load where the
     * engine lacks it, so a module that runs has what it was built with */
#ifdef __wasm_simd128__
    features.wasm_simd = true;
#endif
}

#else
static void detect(void) {
    /* unknown architecture: no SIMD features, the scalar reference paths run */
}
#endif

/* The instruction-set levels, lowest first. has() says whether a CPU has the level; lower()
 * removes from a feature set what lies above it. */
struct isa_level {
    const char *name;
    bool (*has)(const struct cpu_features *f);
    void (*lower)(struct cpu_features *f);
};

static bool has_scalar(const struct cpu_features *f) {
    (void)f;
    return true;
}

static void lower_scalar(struct cpu_features *f) {
    *f = (struct cpu_features){0};
}
static void lower_none(struct cpu_features *f) {
    (void)f;
}

#if defined(__x86_64__) || defined(__i386__)
static bool has_avx2(const struct cpu_features *f) {
    return f->avx2 && f->fma && f->f16c;
}
static bool has_avx2_vnni(const struct cpu_features *f) {
    return has_avx2(f) && f->avx_vnni;
}
static bool has_avx512(const struct cpu_features *f) {
    return has_avx2(f) && f->avx512f && f->avx512bw && f->avx512dq && f->avx512vl && f->avx512vnni;
}
static void lower_avx2(struct cpu_features *f) {
    f->avx_vnni = false;
    f->avx512f = f->avx512bw = f->avx512dq = f->avx512vl = f->avx512vnni = f->avx512bf16 = false;
}
static void lower_avx2_vnni(struct cpu_features *f) {
    bool vnni = f->avx_vnni;
    lower_avx2(f);
    f->avx_vnni = vnni;
}
#elif defined(__aarch64__)
static bool has_neon(const struct cpu_features *f) {
    return f->neon;
}
static bool has_neon_dotprod(const struct cpu_features *f) {
    return f->neon && f->dotprod;
}
static bool has_neon_i8mm(const struct cpu_features *f) {
    return f->neon && f->dotprod && f->i8mm;
}
static void lower_neon(struct cpu_features *f) {
    f->dotprod = f->i8mm = false;
}
static void lower_neon_dotprod(struct cpu_features *f) {
    f->i8mm = false;
}
#elif defined(__wasm__)
static bool has_wasm_simd(const struct cpu_features *f) {
    return f->wasm_simd;
}
#endif

static const struct isa_level levels[] = {
    {"scalar", has_scalar, lower_scalar},
#if defined(__x86_64__) || defined(__i386__)
    {"avx2", has_avx2, lower_avx2},
    {"avx2-vnni", has_avx2_vnni, lower_avx2_vnni},
    {"avx512", has_avx512, lower_none},
#elif defined(__aarch64__)
    {"neon", has_neon, lower_neon},
    {"neon-dotprod", has_neon_dotprod, lower_neon_dotprod},
    {"neon-i8mm", has_neon_i8mm, lower_none},
#elif defined(__wasm__)
    {"wasm-simd", has_wasm_simd, lower_none},
#endif
};
enum { N_LEVELS = sizeof levels / sizeof levels[0] };

static const struct isa_level *active_level;
static const char *isa_error; /* why OX_CPU_ISA was not applied, or NULL */
static char isa_error_buf[192];

/* Detect, then apply OX_CPU_ISA: a known level this CPU has lowers the effective features;
 * anything else leaves them as detected and is reported by cpu_isa_check. */
static void init(void) {
    detect();
    effective = features;
    const char *want = getenv("OX_CPU_ISA");
    const struct isa_level *best = &levels[0];
    for (int i = 0; i < N_LEVELS; i++)
        if (levels[i].has(&features))
            best = &levels[i];
    active_level = best;
    if (!want || !*want)
        return;
    for (int i = 0; i < N_LEVELS; i++) {
        if (strcmp(want, levels[i].name) != 0)
            continue;
        if (!levels[i].has(&features)) {
            snprintf(isa_error_buf, sizeof isa_error_buf,
                     "OX_CPU_ISA=%s: this CPU does not have that instruction set (its best is %s)",
                     want, best->name);
            isa_error = isa_error_buf;
            return;
        }
        levels[i].lower(&effective);
        active_level = &levels[i];
        return;
    }
    char names[96] = "";
    for (int i = 0; i < N_LEVELS; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                 levels[i].name);
    snprintf(isa_error_buf, sizeof isa_error_buf,
             "OX_CPU_ISA=%.40s: unknown instruction set (this build knows %s)", want, names);
    isa_error = isa_error_buf;
}

const struct cpu_features *cpu_features_get(void) {
    pthread_once(&features_once, init);
    return &effective;
}

enum ox_status cpu_isa_check(void) {
    pthread_once(&features_once, init);
    return isa_error ? ox_fail(OX_ERR_UNSUPPORTED, "%s", isa_error) : OX_OK;
}

const char *ox_cpu_isa(void) {
    pthread_once(&features_once, init);
    return active_level->name;
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
        {f->wasm_simd, "simd128"},
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
