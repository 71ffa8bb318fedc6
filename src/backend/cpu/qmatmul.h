/* qmatmul.h: the fast CPU matmul: activations quantized once per call into the kernel's block
 * format, then integer (or SIMD float) dot products over tiles of weight rows x tokens. */
#ifndef OX_BACKEND_CPU_QMATMUL_H
#define OX_BACKEND_CPU_QMATMUL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

/* Activations for the 32-element block families: q = round(x / d) in [-127, 127], d rounded
 * through f16 as ggml's q8_0, and s = d * sum(q) so that offset and min terms of the weights
 * cost one multiply-add per block. */
struct xq8_32 {
    float d, s;
    int8_t q[32];
};

/* One kernel: y[c * y_stride + r] = row r of w . column c of the quantized activations, for
 * r < nr rows (w_stride bytes apart) and c < nc columns (x_stride bytes apart). */
typedef void (*qtile_fn)(int64_t n, const uint8_t *w, size_t w_stride, int nr, const uint8_t *x,
                         size_t x_stride, int nc, float *y, size_t y_stride);

struct qkernel {
    const char *name;                 /* "q4_0 avx512-vnni" */
    size_t (*x_row_bytes)(int64_t n); /* bytes of one quantized activation row */
    void (*quantize_x)(const float *x, void *xq, int64_t n);
    void (*x_to_float)(const void *xq, float *x, int64_t n); /* the values the kernel sees */
    qtile_fn tile;
    int max_nr, max_nc; /* the largest tile the kernel takes in one call */
    /* Optional batch path: 16 rows repacked into a scratch layout once (at most
     * PACK16_BYTES(n) bytes), then tiles of those 16 rows x up to pack_nc tokens over it. */
    void (*repack16)(int64_t n, const uint8_t *w, size_t w_stride, int nr, void *dst);
    void (*tile16)(int64_t n, const void *packed, int nr, const uint8_t *x, size_t x_stride, int nc,
                   float *y, size_t y_stride);
    int pack_nc;
    int min_pack_n; /* batches from this size take the packed path (0: pack_nc) */
    /* Optional load-time layout (struct mat.packed): groups of 16 rows, each made by pack()
     * from the file's rows; gemv16 runs up to pack_nc tokens over one group, and unpack16
     * turns a group into repack16's scratch layout for the batch path. */
    size_t (*packed_group_bytes)(int64_t n);
    void (*pack)(int64_t n, const uint8_t *w, size_t w_stride, void *dst);
    void (*gemv16)(int64_t n, const void *group, const uint8_t *x, size_t x_stride, int nc,
                   float *y, size_t y_stride);
    void (*unpack16)(int64_t n, const void *group, void *dst);
    /* Row `lane` of a group back in the file's block layout (for embedding lookups). */
    void (*file_row)(int64_t n, const void *group, int lane, void *dst);
};

/* Row r of a packed matrix in the file's layout into dst (row_bytes); false if the kernel
 * cannot give it back (the caller reads w->data). */
bool qmatmul_file_row(const struct mat *w, int64_t r, void *dst);

/* A copy of a weight matrix in the kernels' interleaved layout, made once at load (NULL when its
 * type has none, its shape does not fit, or memory is short: matmul then reads the file's
 * layout). Free with cpu_pack_free. */
void *cpu_pack_rows(enum ox_dtype type, const void *data, int64_t n_rows, int64_t n_cols,
                    size_t row_bytes);
void cpu_pack_free(void *packed);

#define PACK16_BYTES(n) ((size_t)(n) / 32 * (16 * 32 + 16 * 8) + 64)

/* The best kernel for weights of this type on this CPU, or NULL (the reference path runs): a
 * lookup in a table built once from the levels' tables (qkernels.h). */
const struct qkernel *qkernel_for(enum ox_dtype type);

/* y = W x with the fast kernel; false when there is none for w's type (nothing was done). */
bool qmatmul(struct backend *b, const struct mat *w, const float *x, float *y, int n);

/* The backend's matmul_multi and matmul_glu fusions (qmatmul_fused.c) for single tokens and
 * batches of up to QMATMUL_FUSED_MAX_N over the load-time layout; false (nothing done) for
 * anything else, norms included (the caller norms first and asks again without). */
enum { QMATMUL_FUSED_MAX_N = 8 };
bool qmatmul_multi(struct backend *b, int count, const struct mat *w, const float *x,
                   const struct norm_in *norm, float *const *y, int n);
bool qmatmul_glu(struct backend *b, enum glu_kind kind, const struct mat *gate,
                 const struct mat *up, const float *x, const struct norm_in *norm, float *y, int n);

/* Least multiply-adds per part before a matmul is split across threads. Handing a part to an
 * awake worker costs about 0.25 us (measured on a 2-core EPYC VM: a job of W ns of work split
 * in two took W/2 + 0.2..0.3 us), and a single-token matmul does 20 to 40 multiply-adds per ns,
 * so 32K of them (1 to 1.5 us) per part keeps the hand-off well under the time saved. */
#define QMATMUL_MIN_MACS_PER_PART 32768.0

/* How many chunks a job's groups of 16 rows go in, claimed by threads as they finish the last
 * (qmatmul.c says why). */
int64_t qmatmul_chunk_count(double macs_per_group, int64_t groups, int nth);
/* Claims the next of chunks chunks of groups (next counts the claims): [*g0, *g1), false when
 * none is left. */
bool qmatmul_claim(atomic_int *next, int64_t groups, int64_t chunks, int64_t *g0, int64_t *g1);

/* The load-time layout of q4_0, q5_0 and q8_0 shared by the x86 and NEON levels (qpack16.c): per
 * block of 32, 16 f16 scales, then the rows' quants in chunks of 4 bytes, chunk-major; q5_0
 * then the fifth bits of each level chunk k (0..7) as 64 bits at QPACK16_Q5_0_BITS + 8 k, bit
 * 4 r + j for element j of row r's chunk (the byte of the chunk's 16 rows x 4 levels). */
enum {
    QPACK16_Q4_0_BLOCK = 32 + 16 * 16,
    QPACK16_Q5_0_BITS = QPACK16_Q4_0_BLOCK,
    QPACK16_Q5_0_BLOCK = QPACK16_Q5_0_BITS + 8 * 8,
    QPACK16_Q8_0_BLOCK = 32 + 16 * 32
};
size_t qpack16_group_bytes_q4_0(int64_t n);
size_t qpack16_group_bytes_q5_0(int64_t n);
size_t qpack16_group_bytes_q8_0(int64_t n);
void qpack16_pack_q4_0(int64_t n, const uint8_t *w, size_t w_stride, void *dst);
void qpack16_pack_q5_0(int64_t n, const uint8_t *w, size_t w_stride, void *dst);
void qpack16_pack_q8_0(int64_t n, const uint8_t *w, size_t w_stride, void *dst);
void qpack16_file_row_q4_0(int64_t n, const void *group, int lane, void *dst);
void qpack16_file_row_q5_0(int64_t n, const void *group, int lane, void *dst);
void qpack16_file_row_q8_0(int64_t n, const void *group, int lane, void *dst);

/* The batch tiles' scratch layout of the k-quants (repack16 / unpack16 output, shared by the
 * x86 levels), per super-block of 16 rows: the levels as bytes chunk-major ([64 chunks][16
 * rows][4]), the int8 scale of each group of 16 ([group][row]), the int16 multipliers of the
 * activation sums in pairs of groups ([group pair][row][2]), and the two f32 factors per row. */
enum {
    KP_SC = 16 * 256,
    KP_BIAS = KP_SC + 16 * 16,
    KP_D = KP_BIAS + 8 * 16 * 4,
    KP_DB = KP_D + 16 * 4,
    KP_BLOCK = KP_DB + 16 * 4,
};

/* The load-time layouts of q4_K and q6_K (kpack16.c), per super-block of a 16-row group.
 * q4_K: f16 d and dmin per row, the 6-bit scales as bytes ([sub-block][row]), the mins as byte
 * pairs ([sub-block pair][row][2]), then the file's qs in 4-byte chunks ([32][row][4]).
 * q6_K: f16 d per row, the int8 scales ([group][row]), then per group of 16 elements three
 * vectors [row][4]: the 6-bit levels of chunks 0, 1, 2 in their low bits, chunk 3's in their top
 * bit pairs (kpack16.c). */
enum {
    K4P_D = 0,
    K4P_DMIN = 32,
    K4P_SC = 64,
    K4P_M = K4P_SC + 8 * 16,
    K4P_QS = K4P_M + 4 * 32,
    K4P_BLOCK = K4P_QS + 32 * 64,
    K6P_D = 0,
    K6P_SC = 32,
    K6P_Q = K6P_SC + 16 * 16,
    K6P_BLOCK = K6P_Q + 16 * 192,
};
_Static_assert(K6P_BLOCK == 16 * 210, "q6_K's layout keeps the file's 210 bytes a row");
_Static_assert(K4P_QS % 64 == 0 && K4P_BLOCK == 16 * 144 + 64, "q4_K's levels start a line");

size_t kpack16_group_bytes_q4_K(int64_t n);
size_t kpack16_group_bytes_q6_K(int64_t n);
void kpack16_pack_q4_K(int64_t n, const uint8_t *w, size_t w_stride, void *dst);
void kpack16_pack_q6_K(int64_t n, const uint8_t *w, size_t w_stride, void *dst);
void kpack16_unpack_q4_K(int64_t n, const void *group, void *dst);
void kpack16_unpack_q6_K(int64_t n, const void *group, void *dst);
void kpack16_file_row_q4_K(int64_t n, const void *group, int lane, void *dst);
void kpack16_file_row_q6_K(int64_t n, const void *group, int lane, void *dst);

/* The activations of the 32-block types (struct xq8_32): the scalar quantizer (qkernels.c,
 * vectorized by the compiler) and the levels' own (ops_<isa>.c), all with the same results. */
size_t xq8_32_row_bytes(int64_t n);
void xq8_32_quantize(const float *x, void *xq, int64_t n);
void xq8_32_to_float(const void *xq, float *x, int64_t n);
void xq8_32_quantize_avx2(const float *x, void *xq, int64_t n); /* the same, with AVX2 */
void xq8_32_quantize_neon(const float *x, void *xq, int64_t n); /* the same, with NEON */
void xq8_32_sums_as_q8_1(const float *x, void *xq, int64_t n);  /* s as ggml's q8_1 rounds it */
/* The activations of q4_1 and q5_1: xq8_32 with s as ggml's q8_1 has it. */
void xq8_1_quantize_avx2(const float *x, void *xq, int64_t n);
void xq8_1_quantize_neon(const float *x, void *xq, int64_t n);

/* The activations of the k-quants and iq4_xs: ggml's q8_K (struct block_q8_K). xq8_K_quantize is
 * the reference quantizer (qkernels.c; NEON's); the x86 levels have their own, byte for byte the
 * same. */
size_t xq8_K_row_bytes(int64_t n);
void xq8_K_quantize(const float *x, void *xq, int64_t n);

/* The activations of the f32/f16/bf16 kernels, shared by every instruction set. */
size_t xf32_row_bytes(int64_t n);
size_t xhalf_row_bytes(int64_t n);
void xf32_quantize(const float *x, void *xq, int64_t n);
void xf32_to_float(const void *xq, float *x, int64_t n);
void xf16_quantize(const float *x, void *xq, int64_t n); /* f16-rounded, stored as f32 */
void xbf16_quantize(const float *x, void *xq, int64_t n);
void xbf16_to_float(const void *xq, float *x, int64_t n);

#endif
