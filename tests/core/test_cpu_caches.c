/* test_cpu_caches.c: cache sizes from sysfs-like folders and from OX_CPU_CACHE, the L2 blocks
 * derived from them, and the one line ox_cpu_caches prints. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cpu_features.h"
#include "test.h"

/* dir/index<i>/{level,type,size} as the kernel writes them (a newline after each value). */
static void fake_cache(const char *dir, int i, const char *level, const char *type,
                       const char *size) {
    char path[512];
    snprintf(path, sizeof path, "%s/index%d", dir, i);
    mkdir(path, 0700);
    const char *names[3] = {"level", "type", "size"}, *values[3] = {level, type, size};
    for (int k = 0; k < 3; k++) {
        char file[600];
        snprintf(file, sizeof file, "%s/%s", path, names[k]);
        FILE *f = fopen(file, "w");
        if (f) {
            if (values[k])
                fprintf(f, "%s\n", values[k]);
            fclose(f);
        }
    }
}

static void remove_tree(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK_EQ(system(cmd), 0);
}

static void check_sysfs(void) {
    char dir[] = "/tmp/ox_cachesXXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    struct cpu_caches c = {1, 2, 3, "untouched"};
    CHECK(!cpu_caches_from_sysfs(dir, &c)); /* empty: nothing read, out untouched */
    CHECK_EQ(c.l1d, 1);
    /* a Zen-like core: split L1, L2 per core, L3 in megabytes; index numbers with a gap */
    fake_cache(dir, 0, "1", "Data", "48K");
    fake_cache(dir, 1, "1", "Instruction", "32K");
    fake_cache(dir, 2, "2", "Unified", "2048K");
    fake_cache(dir, 5, "3", "Unified", "96M");
    CHECK(cpu_caches_from_sysfs(dir, &c));
    CHECK_EQ(c.l1d, 48 << 10);
    CHECK_EQ(c.l2, 2 << 20);
    CHECK_EQ(c.l3, (size_t)96 << 20);
    CHECK_STR(c.source, "sysfs");
    remove_tree(dir);
    /* no L3 and an unreadable L2 size: the L3 stays 0 for the caller's default */
    strcpy(dir + strlen(dir) - 6, "XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    fake_cache(dir, 0, "1", "Data", "32K");
    fake_cache(dir, 1, "2", "Unified", NULL);
    CHECK(cpu_caches_from_sysfs(dir, &c));
    CHECK_EQ(c.l1d, 32 << 10);
    CHECK_EQ(c.l2, 0);
    CHECK_EQ(c.l3, 0);
    remove_tree(dir);
    CHECK(!cpu_caches_from_sysfs("/nonexistent/ox", &c));
}

static void check_spec(void) {
    struct cpu_caches c = {0};
    CHECK(cpu_caches_from_spec("48:2048:32768", &c));
    CHECK_EQ(c.l1d, 48 << 10);
    CHECK_EQ(c.l2, 2 << 20);
    CHECK_EQ(c.l3, (size_t)32 << 20);
    CHECK_STR(c.source, "OX_CPU_CACHE");
    CHECK(cpu_caches_from_spec("32:256:0", &c)); /* no L3 */
    CHECK_EQ(c.l3, 0);
    const char *bad[] = {NULL,      "",       "32",      "32:256",   "32:256:x",
                         "0:256:0", "32:0:8", "1:2:3:4", "32:256:8M"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(!cpu_caches_from_spec(bad[i], &c), "spec '%s' accepted", bad[i] ? bad[i] : "");
}

/* Blocks are half the L2 in whole tiles, at least one tile, n when all fit. */
static void check_blocks(void) {
    struct cpu_caches big = {48 << 10, 2 << 20, 0, "t"}, small = {32 << 10, 256 << 10, 0, "t"};
    CHECK_EQ(cpu_l2_block(&big, 2176, 4, 100000), 480);  /* 1 MiB / 2176 B = 481.9 -> 480 */
    CHECK_EQ(cpu_l2_block(&small, 2176, 4, 100000), 60); /* 128 KiB / 2176 B = 60.2 -> 60 */
    CHECK_EQ(cpu_l2_block(&small, 2176, 4, 37), 37);     /* all fit */
    CHECK_EQ(cpu_l2_block(&small, 1 << 20, 4, 1000), 4); /* rows larger than the L2: one tile */
    CHECK_EQ(cpu_l2_block(&small, 0, 0, 10), 10);
    CHECK(cpu_l2_block(&big, 2176, 4, 100000) > cpu_l2_block(&small, 2176, 4, 100000));
}

/* The process's own caches: OX_CPU_CACHE wins (this test runs with it set, see main), and
 * the line follows the snprintf rule. */
static void check_detected(void) {
    const struct cpu_caches *c = cpu_caches_get();
    CHECK_EQ(c->l1d, 40 << 10);
    CHECK_EQ(c->l2, 640 << 10);
    CHECK_EQ(c->l3, 0);
    char line[128], tiny[5];
    size_t need = ox_cpu_caches(line, sizeof line);
    CHECK_STR(line, "l1d 40K, l2 640K per core, l3 none shared (OX_CPU_CACHE)");
    CHECK_EQ(need, strlen(line));
    CHECK_EQ(ox_cpu_caches(tiny, sizeof tiny), need);
    CHECK_STR(tiny, "l1d ");
}

int main(void) {
    setenv("OX_CPU_CACHE", "40:640:0", 1); /* before the first cpu_caches_get */
    check_sysfs();
    check_spec();
    check_blocks();
    check_detected();
    return test_finish("test_cpu_caches");
}
