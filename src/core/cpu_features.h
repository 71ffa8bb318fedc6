/* cpu_features.h: what the running CPU can execute, detected once at runtime. */
#ifndef OX_CORE_CPU_FEATURES_H
#define OX_CORE_CPU_FEATURES_H

#include <stdbool.h>
#include <stddef.h>

#include "oxidize.h"

struct cpu_features {
    /* x86-64; the AVX flags also require the OS to save the wider registers (XCR0) */
    bool sse3, ssse3, fma, f16c, avx, avx2;
    bool avx512f, avx512bw, avx512dq, avx512vl, avx512vnni, avx512bf16, avx_vnni;
    /* AArch64 */
    bool neon, dotprod, i8mm, fp16;
    /* WebAssembly: SIMD128 (set when the module was built with it) */
    bool wasm_simd;
};

/* The features the kernels may use: those detected on first call, lowered to the level named
 * by OX_CPU_ISA when it is set and this CPU has that level. Thread-safe. */
const struct cpu_features *cpu_features_get(void);

/* OX_OK, or OX_ERR_UNSUPPORTED (with the last error set) when OX_CPU_ISA names an unknown
 * level or one this CPU lacks. Model loading and context creation call it. */
enum ox_status cpu_isa_check(void);

/* Data cache sizes in bytes: L1d and L2 of one core (cpu0's), L3 of its shared instance (0:
 * none). Kernels size their cache blocks from these rather than from one CPU's numbers. */
struct cpu_caches {
    size_t l1d, l2, l3;
    const char *source; /* "OX_CPU_CACHE", "sysfs", "cpuid" or "default" */
};

/* What a CPU that reports nothing gets: a common desktop core of the AVX2 years. */
#define CPU_DEFAULT_L1D ((size_t)32 << 10)
#define CPU_DEFAULT_L2  ((size_t)1 << 20)
#define CPU_DEFAULT_L3  ((size_t)8 << 20)

/* The caches, detected on first call: OX_CPU_CACHE=L1:L2:L3 (KiB) when set and valid, else
 * sysfs (Linux), else cpuid leaf 4 (Intel) or 0x8000001D (AMD); levels none reports take the
 * defaults above. Thread-safe. */
const struct cpu_caches *cpu_caches_get(void);

/* The parsers behind it, for tests: cache_dir holds index<N>/{level,type,size} as in
 * /sys/devices/system/cpu/cpu0/cache; spec is "L1:L2:L3" in KiB. False (out untouched) when
 * neither L1d nor L2 could be read, or the spec is malformed. */
bool cpu_caches_from_sysfs(const char *cache_dir, struct cpu_caches *out);
bool cpu_caches_from_spec(const char *spec, struct cpu_caches *out);

/* How many items of item_bytes a block a kernel keeps reusing may hold: half the L2 (the rest
 * is left to the data streaming past the block, the outputs and what the prefetchers bring),
 * rounded down to a multiple of `multiple` (a kernel's tile), at least one multiple; n when all
 * n fit. */
int cpu_l2_block(const struct cpu_caches *c, size_t item_bytes, int multiple, int n);

#endif
