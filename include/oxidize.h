/* oxidize.h: the one public C API of oxidize (C11, also valid C++).
 *
 * Conventions (see DESIGN.md):
 * - Fallible calls return enum ox_status (OX_OK = 0); results go through out-params, which are
 *   set to NULL/zero on failure. ox_last_error() then names exactly what failed.
 * - Every _open/_load/_create has one _free; _free(NULL) is a no-op.
 * - The library never prints, exits or aborts; logging goes to the callback of ox_log_set().
 *
 * Example: list the tensors of a GGUF file.
 *
 *     struct ox_gguf *g;
 *     if (ox_gguf_open("model.gguf", &g) != OX_OK) {
 *         fprintf(stderr, "%s\n", ox_last_error());
 *         return 1;
 *     }
 *     for (int64_t i = 0; i < ox_gguf_n_tensors(g); i++) {
 *         struct ox_tensor_info t;
 *         ox_gguf_tensor(g, i, &t);
 *         printf("%s %s\n", t.name, ox_dtype_name(t.type));
 *     }
 *     ox_gguf_free(g);
 */
#ifndef OXIDIZE_H
#define OXIDIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(OX_BUILDING_LIBRARY) && (defined(__GNUC__) || defined(__clang__))
#define OX_API __attribute__((visibility("default")))
#else
#define OX_API
#endif

#define OX_VERSION_STRING "0.1.0"

/* ---- Status and errors ------------------------------------------------------------------- */

/* X(name, description) */
#define OX_STATUS_LIST(X)                                                 \
    X(OK, "ok")                                                           \
    X(ERR_IO, "input/output error")                                       \
    X(ERR_FORMAT, "malformed file or data")                               \
    X(ERR_UNSUPPORTED, "unsupported")                                     \
    X(ERR_OOM, "out of memory")                                           \
    X(ERR_DEVICE, "device error")                                         \
    X(ERR_INVALID_ARG, "invalid argument")                                \
    X(ERR_CONTEXT_FULL, "context full")                                   \
    X(ERR_ABORTED, "aborted")

enum ox_status {
#define OX_X_(name, desc) OX_##name,
    OX_STATUS_LIST(OX_X_)
#undef OX_X_
    OX_STATUS_COUNT
};

/* Short constant name of a status ("OX_ERR_FORMAT"); "OX_UNKNOWN" for values out of range. */
OX_API const char *ox_status_name(enum ox_status status);

/* The message of the last failure on this thread ("" if none yet). The pointer stays valid
 * until the next failing call on the same thread. */
OX_API const char *ox_last_error(void);

/* ---- Logging ----------------------------------------------------------------------------- */

enum ox_log_level { OX_LOG_DEBUG, OX_LOG_INFO, OX_LOG_WARN, OX_LOG_ERROR, OX_LOG_LEVEL_COUNT };

typedef void (*ox_log_fn)(enum ox_log_level level, const char *message, void *user);

/* Route library log messages to fn (NULL: silent, the default). Not thread-safe against
 * concurrent logging; call it once at startup. */
OX_API void ox_log_set(ox_log_fn fn, void *user);

/* ---- Tensor data types ------------------------------------------------------------------- */

/* Every ggml tensor type, with ggml's numeric ids, block sizes (elements) and bytes per block.
 * X(NAME, id, "name", block_size, type_size). Ids 4, 5, 31-33 and 36-38 were removed from
 * ggml and are rejected. */
#define OX_DTYPE_LIST(X)                       \
    X(F32, 0, "f32", 1, 4)                     \
    X(F16, 1, "f16", 1, 2)                     \
    X(Q4_0, 2, "q4_0", 32, 18)                 \
    X(Q4_1, 3, "q4_1", 32, 20)                 \
    X(Q5_0, 6, "q5_0", 32, 22)                 \
    X(Q5_1, 7, "q5_1", 32, 24)                 \
    X(Q8_0, 8, "q8_0", 32, 34)                 \
    X(Q8_1, 9, "q8_1", 32, 36)                 \
    X(Q2_K, 10, "q2_K", 256, 84)               \
    X(Q3_K, 11, "q3_K", 256, 110)              \
    X(Q4_K, 12, "q4_K", 256, 144)              \
    X(Q5_K, 13, "q5_K", 256, 176)              \
    X(Q6_K, 14, "q6_K", 256, 210)              \
    X(Q8_K, 15, "q8_K", 256, 292)              \
    X(IQ2_XXS, 16, "iq2_xxs", 256, 66)         \
    X(IQ2_XS, 17, "iq2_xs", 256, 74)           \
    X(IQ3_XXS, 18, "iq3_xxs", 256, 98)         \
    X(IQ1_S, 19, "iq1_s", 256, 50)             \
    X(IQ4_NL, 20, "iq4_nl", 32, 18)            \
    X(IQ3_S, 21, "iq3_s", 256, 110)            \
    X(IQ2_S, 22, "iq2_s", 256, 82)             \
    X(IQ4_XS, 23, "iq4_xs", 256, 136)          \
    X(I8, 24, "i8", 1, 1)                      \
    X(I16, 25, "i16", 1, 2)                    \
    X(I32, 26, "i32", 1, 4)                    \
    X(I64, 27, "i64", 1, 8)                    \
    X(F64, 28, "f64", 1, 8)                    \
    X(IQ1_M, 29, "iq1_m", 256, 56)             \
    X(BF16, 30, "bf16", 1, 2)                  \
    X(TQ1_0, 34, "tq1_0", 256, 54)             \
    X(TQ2_0, 35, "tq2_0", 256, 66)             \
    X(MXFP4, 39, "mxfp4", 32, 17)              \
    X(NVFP4, 40, "nvfp4", 64, 36)              \
    X(Q1_0, 41, "q1_0", 128, 18)               \
    X(Q2_0, 42, "q2_0", 64, 18)

enum ox_dtype {
#define OX_X_(name, id, str, blck, size) OX_DTYPE_##name = id,
    OX_DTYPE_LIST(OX_X_)
#undef OX_X_
    OX_DTYPE_COUNT = 43
};

/* True for ids that name a type of the list above. */
OX_API bool ox_dtype_valid(int id);
/* ggml's type name ("q4_K"), or NULL for an invalid id. */
OX_API const char *ox_dtype_name(enum ox_dtype type);
/* Elements per block (0 for an invalid id). */
OX_API int64_t ox_dtype_block_size(enum ox_dtype type);
/* Bytes per block (0 for an invalid id). */
OX_API size_t ox_dtype_type_size(enum ox_dtype type);

/* Dequantize n elements (a multiple of the block size) of src, in the type's own layout, to
 * float. Bit-identical with ggml's reference dequantization. */
OX_API enum ox_status ox_dequantize(enum ox_dtype type, const void *src, float *dst, int64_t n);

/* ---- GGUF files (read-only inspection) --------------------------------------------------- */

/* GGUF metadata value types, with the file format's numeric ids. */
#define OX_GGUF_TYPE_LIST(X)   \
    X(UINT8, 0, "u8", 1)       \
    X(INT8, 1, "i8", 1)        \
    X(UINT16, 2, "u16", 2)     \
    X(INT16, 3, "i16", 2)      \
    X(UINT32, 4, "u32", 4)     \
    X(INT32, 5, "i32", 4)      \
    X(FLOAT32, 6, "f32", 4)    \
    X(BOOL, 7, "bool", 1)      \
    X(STRING, 8, "str", 0)     \
    X(ARRAY, 9, "arr", 0)      \
    X(UINT64, 10, "u64", 8)    \
    X(INT64, 11, "i64", 8)     \
    X(FLOAT64, 12, "f64", 8)

enum ox_gguf_type {
#define OX_X_(name, id, str, size) OX_GGUF_##name = id,
    OX_GGUF_TYPE_LIST(OX_X_)
#undef OX_X_
    OX_GGUF_TYPE_COUNT
};

/* Short name of a metadata type ("u32", "arr"), or NULL for an invalid one. */
OX_API const char *ox_gguf_type_name(enum ox_gguf_type type);

struct ox_gguf;

/* One metadata value. Scalars are widened into u/i/f/b by their type; strings point into the
 * file (not NUL-terminated, length n); arrays have elem_type and n elements, read with
 * ox_gguf_array_get(). Valid while the ox_gguf lives. */
struct ox_gguf_value {
    enum ox_gguf_type type;
    enum ox_gguf_type elem_type; /* OX_GGUF_ARRAY only */
    uint64_t n;                  /* STRING: bytes; ARRAY: elements; scalars: 1 */
    union {
        uint64_t u;    /* UINT8..UINT64 */
        int64_t i;     /* INT8..INT64 */
        double f;      /* FLOAT32, FLOAT64 */
        bool b;        /* BOOL */
        const char *s; /* STRING */
    } v;
    const void *internal_; /* ARRAY: the library's handle; do not touch */
};

/* One tensor's description; name and data stay valid while the ox_gguf lives. */
struct ox_tensor_info {
    const char *name;
    enum ox_dtype type;
    int n_dims;          /* 1..4 */
    int64_t ne[4];       /* elements per dimension, ne[0] fastest; unused dims are 1 */
    uint64_t offset;     /* from the start of the data section */
    uint64_t n_bytes;    /* size of the data */
    const void *data;    /* the bytes in the mapped (or read) file */
};

/* Open and fully validate a GGUF file (v2 or v3), mapped read-only (read() into memory when
 * mmap is unavailable). A malformed file gives OX_ERR_FORMAT with a message naming the key or
 * tensor and the bad value. */
OX_API enum ox_status ox_gguf_open(const char *path, struct ox_gguf **out);
/* Same, over a caller buffer that must outlive the returned object. */
OX_API enum ox_status ox_gguf_open_buffer(const void *data, size_t size, struct ox_gguf **out);
OX_API void ox_gguf_free(struct ox_gguf *gguf);

OX_API uint32_t ox_gguf_version(const struct ox_gguf *gguf);
OX_API uint32_t ox_gguf_alignment(const struct ox_gguf *gguf);
/* Byte offset of the tensor data section in the file. */
OX_API uint64_t ox_gguf_data_offset(const struct ox_gguf *gguf);
OX_API uint64_t ox_gguf_file_size(const struct ox_gguf *gguf);

OX_API int64_t ox_gguf_n_kv(const struct ox_gguf *gguf);
/* Key of entry i (NUL-terminated), or NULL when i is out of range. */
OX_API const char *ox_gguf_key(const struct ox_gguf *gguf, int64_t i);
/* Index of key, or -1. */
OX_API int64_t ox_gguf_find_key(const struct ox_gguf *gguf, const char *key);
OX_API enum ox_status ox_gguf_value(const struct ox_gguf *gguf, int64_t i,
                                    struct ox_gguf_value *out);
/* Element i of an array value. */
OX_API enum ox_status ox_gguf_array_get(const struct ox_gguf_value *array, uint64_t i,
                                        struct ox_gguf_value *out);

OX_API int64_t ox_gguf_n_tensors(const struct ox_gguf *gguf);
/* Index of the tensor with this name, or -1. */
OX_API int64_t ox_gguf_find_tensor(const struct ox_gguf *gguf, const char *name);
OX_API enum ox_status ox_gguf_tensor(const struct ox_gguf *gguf, int64_t i,
                                     struct ox_tensor_info *out);

/* ---- CPU features ------------------------------------------------------------------------ */

/* The features of the running CPU as a space-separated list ("avx2 fma f16c avx512f ...").
 * Returns the length needed; writes at most cap bytes including the NUL (snprintf rule). */
OX_API size_t ox_cpu_features(char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* OXIDIZE_H */
