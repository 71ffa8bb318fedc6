/* iq_tables.h: the lookup tables of the i-quants and fp4 formats (data in iq_tables.c). */
#ifndef OX_QUANT_IQ_TABLES_H
#define OX_QUANT_IQ_TABLES_H

#include <stdint.h>

/* Grid entries pack one element per byte, element j in bits 8j..8j+7, so they are read with
 * shifts and do not depend on the host's byte order. */

extern const uint8_t iq_sign_patterns[128]; /* 7 stored sign bits -> 8 (even parity) */
extern const uint64_t iq2xxs_grid[256];     /* 8 magnitudes */
extern const uint64_t iq2xs_grid[512];      /* 8 magnitudes */
extern const uint64_t iq2s_grid[1024];      /* 8 magnitudes */
extern const uint32_t iq3xxs_grid[256];     /* 4 magnitudes */
extern const uint32_t iq3s_grid[512];       /* 4 magnitudes */
extern const uint64_t iq1s_grid[2048];      /* 8 values in {-1, 0, 1}, as int8 */
extern const int8_t iq4nl_values[16];       /* non-linear 4-bit levels */
extern const int8_t fp4_e2m1_values[16];    /* e2m1 values times 2 */

#endif
