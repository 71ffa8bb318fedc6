/* cpu_caches.c: the data cache sizes of the running CPU (sysfs, else cpuid, else defaults), read
 * once, for kernels whose blocking depends on them. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu_features.h"
#include "oxidize.h"

/* A cache size as sysfs writes it ("32K", "1024K", "2M"; plain bytes), in bytes; 0 if bad. */
static size_t parse_size(const char *s) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s)
        return 0;
    switch (*end) {
    case 'K':
    case 'k': v <<= 10; break;
    case 'M':
    case 'm': v <<= 20; break;
    case 'G':
    case 'g': v <<= 30; break;
    default: break;
    }
    return (size_t)v;
}

/* The first line of dir/name into buf (newline removed); false if unreadable. */
static bool read_line(const char *dir, const char *name, char *buf, size_t cap) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool ok = fgets(buf, (int)cap, f) != NULL;
    fclose(f);
    if (!ok) { /* an empty file leaves buf as it was */
        buf[0] = 0;
        return false;
    }
    buf[strcspn(buf, "\n")] = 0;
    return true;
}

/* Records one cache of the given level and sysfs type (instruction caches are not wanted). */
static void note_cache(struct cpu_caches *c, int level, const char *type, size_t bytes) {
    if (!bytes || strcmp(type, "Instruction") == 0)
        return;
    if (level == 1)
        c->l1d = bytes;
    else if (level == 2)
        c->l2 = bytes;
    else if (level == 3)
        c->l3 = bytes;
}

bool cpu_caches_from_sysfs(const char *cache_dir, struct cpu_caches *out) {
    struct cpu_caches c = {0, 0, 0, "sysfs"};
    for (int i = 0; i < 16; i++) { /* index0 .. index15; the numbering may have gaps */
        char dir[400], level[32], type[32], size[32];
        snprintf(dir, sizeof dir, "%s/index%d", cache_dir, i);
        if (!read_line(dir, "level", level, sizeof level) ||
            !read_line(dir, "type", type, sizeof type) ||
            !read_line(dir, "size", size, sizeof size))
            continue;
        note_cache(&c, atoi(level), type, parse_size(size));
    }
    if (!c.l1d && !c.l2)
        return false;
    *out = c;
    return true;
}

bool cpu_caches_from_spec(const char *spec, struct cpu_caches *out) {
    unsigned long long kib[3];
    char rest;
    if (!spec || sscanf(spec, "%llu:%llu:%llu%c", &kib[0], &kib[1], &kib[2], &rest) != 3)
        return false;
    if (!kib[0] || !kib[1]) /* an L3 may be absent (0); L1 and L2 may not */
        return false;
    *out = (struct cpu_caches){kib[0] << 10, kib[1] << 10, kib[2] << 10, "OX_CPU_CACHE"};
    return true;
}

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* Intel's leaf 4 and AMD's 0x8000001D describe caches alike: type in eax[4:0] (0: no more),
 * level in eax[7:5], size = ways x partitions x line size x sets, each field stored minus 1. */
static bool caches_from_cpuid(struct cpu_caches *out) {
    unsigned a, b, c, d, leaf = 4;
    if (!__get_cpuid(0, &a, &b, &c, &d))
        return false;
    if (b == 0x68747541 || b == 0x6f677948) { /* "Auth"enticAMD, "Hygo"nGenuine */
        if (!__get_cpuid(0x80000000, &a, &b, &c, &d) || a < 0x8000001D)
            return false;
        leaf = 0x8000001D;
    } else if (a < 4) {
        return false;
    }
    struct cpu_caches r = {0, 0, 0, "cpuid"};
    for (unsigned i = 0; i < 16; i++) {
        __cpuid_count(leaf, i, a, b, c, d);
        unsigned type = a & 0x1f;
        if (type == 0)
            break;
        size_t bytes = (size_t)((b >> 22) + 1) * (((b >> 12) & 0x3ff) + 1) * ((b & 0xfff) + 1) *
                       ((size_t)c + 1);
        note_cache(&r, (int)((a >> 5) & 7), type == 2 ? "Instruction" : "Data", bytes);
    }
    if (!r.l1d && !r.l2)
        return false;
    *out = r;
    return true;
}
#else
static bool caches_from_cpuid(struct cpu_caches *out) {
    (void)out;
    return false;
}
#endif

static struct cpu_caches caches;
static pthread_once_t caches_once = PTHREAD_ONCE_INIT;

/* OX_CPU_CACHE first (tests, and machines that report nonsense), then sysfs, then cpuid; a
 * level none of them gave takes the default of a common desktop core. */
static void detect_caches(void) {
    struct cpu_caches c = {0, 0, 0, "default"};
    if (cpu_caches_from_spec(getenv("OX_CPU_CACHE"), &c)) {
        caches = c; /* as given: an L3 of 0 means none */
        return;
    }
    if (!cpu_caches_from_sysfs("/sys/devices/system/cpu/cpu0/cache", &c))
        caches_from_cpuid(&c);
    c.l1d = c.l1d ? c.l1d : CPU_DEFAULT_L1D;
    c.l2 = c.l2 ? c.l2 : CPU_DEFAULT_L2;
    c.l3 = c.l3 ? c.l3 : CPU_DEFAULT_L3;
    caches = c;
}

const struct cpu_caches *cpu_caches_get(void) {
    pthread_once(&caches_once, detect_caches);
    return &caches;
}

int cpu_l2_block(const struct cpu_caches *c, size_t item_bytes, int multiple, int n) {
    size_t fit = c->l2 / 2 / (item_bytes ? item_bytes : 1);
    if (fit >= (size_t)n)
        return n;
    multiple = multiple > 0 ? multiple : 1;
    return fit < (size_t)multiple ? multiple : (int)(fit - fit % (size_t)multiple);
}

/* "32K" up to 1 MiB, then "2M": the way lscpu and sysfs write sizes. */
static void size_str(char *buf, size_t cap, size_t bytes) {
    if (bytes >= (1u << 20) && bytes % (1u << 20) == 0)
        snprintf(buf, cap, "%zuM", bytes >> 20);
    else
        snprintf(buf, cap, "%zuK", bytes >> 10);
}

size_t ox_cpu_caches(char *buf, size_t cap) {
    const struct cpu_caches *c = cpu_caches_get();
    char l1[24], l2[24], l3[24];
    size_str(l1, sizeof l1, c->l1d);
    size_str(l2, sizeof l2, c->l2);
    if (c->l3)
        size_str(l3, sizeof l3, c->l3);
    else
        snprintf(l3, sizeof l3, "none");
    int n = snprintf(buf, cap, "l1d %s, l2 %s per core, l3 %s shared (%s)", l1, l2, l3, c->source);
    return n < 0 ? 0 : (size_t)n;
}
