/* cpu_features.h: what the running CPU can execute, detected once at runtime. */
#ifndef OX_CORE_CPU_FEATURES_H
#define OX_CORE_CPU_FEATURES_H

#include <stdbool.h>

#include "oxidize.h"

struct cpu_features {
    /* x86-64; the AVX flags also require the OS to save the wider registers (XCR0) */
    bool sse3, ssse3, fma, f16c, avx, avx2;
    bool avx512f, avx512bw, avx512dq, avx512vl, avx512vnni, avx512bf16, avx_vnni;
    /* AArch64 */
    bool neon, dotprod, i8mm, fp16;
};

/* The features the kernels may use: those detected on first call, lowered to the level named
 * by OX_CPU_ISA when it is set and this CPU has that level. Thread-safe. */
const struct cpu_features *cpu_features_get(void);

/* OX_OK, or OX_ERR_UNSUPPORTED (with the last error set) when OX_CPU_ISA names an unknown
 * level or one this CPU lacks. Model loading and context creation call it. */
enum ox_status cpu_isa_check(void);

#endif
