/* gguf.h: the validating GGUF reader (and writer) used inside the library.
 *
 * The GGUF container, little-endian throughout (v2 and v3; v1 is rejected):
 *   1. magic "GGUF", u32 version, u64 n_tensors, u64 n_kv
 *   2. n_kv key/value pairs: string key, u32 value type, value
 *        string = u64 length + bytes (no NUL); array = u32 element type, u64 count, elements
 *   3. n_tensors tensor infos: string name, u32 n_dims, u64 ne[n_dims], u32 ggml type,
 *        u64 offset (relative to the data section)
 *   4. zero padding to general.alignment (u32, default 32)
 *   5. the data section: each tensor's bytes, padded to the alignment, in info order
 * Every count, length, offset and product is checked against the file before use.
 */
#ifndef OX_GGUF_GGUF_H
#define OX_GGUF_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/file.h"
#include "core/strmap.h"
#include "oxidize.h"

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS 4
#define GGUF_MAX_NAME 64          /* tensor names are shorter than this (ggml's limit) */
#define GGUF_MAX_KEY 65535        /* the format's limit on key length */
#define GGUF_MAX_ARRAY_DEPTH 8    /* nesting of arrays of arrays */

/* One metadata value. In a parsed file it points into the file's bytes; in a writer it owns
 * its memory. */
struct gguf_value {
    enum ox_gguf_type type;
    enum ox_gguf_type elem_type; /* arrays only */
    uint64_t n;                  /* string: bytes; array: elements; scalar: 1 */
    const uint8_t *data;         /* scalar: its bytes; string: its chars; array of fixed-size
                                    elements: n packed elements (unaligned, little-endian) */
    struct gguf_value *elems;    /* array of strings or arrays: one value per element */
};

struct gguf_kv {
    const char *key; /* NUL-terminated, owned */
    struct gguf_value value;
};

struct gguf_tensor {
    const char *name; /* NUL-terminated, owned */
    enum ox_dtype type;
    int n_dims;
    int64_t ne[GGUF_MAX_DIMS]; /* unused dims are 1 */
    uint64_t offset;           /* from the start of the data section */
    uint64_t n_bytes;
    const uint8_t *data;
};

struct ox_gguf {
    struct file_map map; /* owned when opened from a path */
    const uint8_t *buf;
    size_t size;
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset;
    int64_t n_kv;
    struct gguf_kv *kv;
    int64_t n_tensors;
    struct gguf_tensor *tensors;
    struct strmap key_index, tensor_index; /* name -> index */
    /* a split model's other parts (gguf_split.c), whose tensors are listed above; owned */
    struct ox_gguf **parts;
    int n_parts;
};

/* Parse and validate buf (borrowed: it must outlive the result). */
enum ox_status gguf_parse(const uint8_t *buf, size_t size, struct ox_gguf **out);
/* Open a file, mapped (use_mmap) or read into memory. */
enum ox_status gguf_open(const char *path, bool use_mmap, struct ox_gguf **out);
void gguf_free(struct ox_gguf *g);
/* A model's file: as gguf_open, and when it is the first part of a split model
 * (NAME-00001-of-0000N.gguf with split.count N, as llama.cpp's gguf-split writes them), the
 * other parts opened beside it and their tensors listed after the first's (gguf_split.c). */
enum ox_status gguf_open_model(const char *path, bool use_mmap, struct ox_gguf **out);

/* Lookups: NULL / -1 when absent. */
const struct gguf_value *gguf_find(const struct ox_gguf *g, const char *key);
const struct gguf_tensor *gguf_find_tensor(const struct ox_gguf *g, const char *name);

/* Typed accessors. A present key of another type is OX_ERR_FORMAT naming the key and both
 * types; an absent key is OX_ERR_FORMAT "missing" (check gguf_find first when optional). */
enum ox_status gguf_get_u32(const struct ox_gguf *g, const char *key, uint32_t *out);
enum ox_status gguf_get_i32(const struct ox_gguf *g, const char *key, int32_t *out);
enum ox_status gguf_get_u64(const struct ox_gguf *g, const char *key, uint64_t *out);
enum ox_status gguf_get_f32(const struct ox_gguf *g, const char *key, float *out);
enum ox_status gguf_get_bool(const struct ox_gguf *g, const char *key, bool *out);
/* The string's bytes (not NUL-terminated) and length. */
enum ox_status gguf_get_str(const struct ox_gguf *g, const char *key, const char **s,
                            uint64_t *len);
/* Any integer type whose value fits in [0, max]: for hyper-parameters, which converters
 * store as u32, i32 or u64. */
enum ox_status gguf_get_uint(const struct ox_gguf *g, const char *key, uint64_t max,
                             uint64_t *out);
/* An array whose elements have type elem_type (checked: a u8 array where f32 is expected is
 * an error, not a reinterpretation). */
enum ox_status gguf_get_array(const struct ox_gguf *g, const char *key,
                              enum ox_gguf_type elem_type, const struct gguf_value **out);

/* Element i of an array as a value (i < arr->n, checked). */
enum ox_status gguf_array_elem(const struct gguf_value *arr, uint64_t i,
                               struct gguf_value *out);
/* Bytes of one value of a fixed-size type (1, 2, 4 or 8), or 0 for string/array/invalid. */
size_t gguf_type_size(enum ox_gguf_type type);

/* Scalar decoding of a value of fixed-size type. */
uint64_t gguf_value_u64(const struct gguf_value *v); /* unsigned types */
int64_t gguf_value_i64(const struct gguf_value *v);  /* signed types */
double gguf_value_f64(const struct gguf_value *v);   /* float types */

/* ---- writer ----------------------------------------------------------------------------- */

struct gguf_writer;

enum ox_status gguf_writer_create(struct gguf_writer **out);
void gguf_writer_free(struct gguf_writer *w);
/* Set key to a deep copy of v (replacing an existing value in place, keeping key order). */
enum ox_status gguf_writer_set(struct gguf_writer *w, const char *key, const struct gguf_value *v);
enum ox_status gguf_writer_set_u32(struct gguf_writer *w, const char *key, uint32_t v);
enum ox_status gguf_writer_set_i32(struct gguf_writer *w, const char *key, int32_t v);
enum ox_status gguf_writer_set_f32(struct gguf_writer *w, const char *key, float v);
enum ox_status gguf_writer_set_bool(struct gguf_writer *w, const char *key, bool v);
enum ox_status gguf_writer_set_str(struct gguf_writer *w, const char *key, const char *s);
/* An array of n fixed-size elements of elem_type, copied from data. */
enum ox_status gguf_writer_set_array(struct gguf_writer *w, const char *key,
                                     enum ox_gguf_type elem_type, const void *data, uint64_t n);
enum ox_status gguf_writer_set_str_array(struct gguf_writer *w, const char *key,
                                         const char *const *strs, uint64_t n);
/* Remove key if present. */
void gguf_writer_remove(struct gguf_writer *w, const char *key);
/* Append a tensor; data (n_bytes of the type's layout) is borrowed until the write (NULL when
 * the data will be streamed). */
enum ox_status gguf_writer_add_tensor(struct gguf_writer *w, const char *name,
                                      enum ox_dtype type, int n_dims, const int64_t *ne,
                                      const void *data);
/* Streaming: write the header, metadata and tensor infos now (tensors may be added with data
 * NULL), then each tensor's data in order with gguf_stream_tensor, then gguf_stream_close,
 * which renames the temporary file to path. gguf_stream_abort deletes it instead. Lets a
 * quantizer write a model larger than memory. */
struct gguf_stream;
enum ox_status gguf_writer_stream_open(const struct gguf_writer *w, const char *path,
                                       struct gguf_stream **out);
enum ox_status gguf_stream_tensor(struct gguf_stream *s, const void *data, uint64_t n_bytes);
enum ox_status gguf_stream_close(struct gguf_stream *s);
void gguf_stream_abort(struct gguf_stream *s);
/* Write the file atomically (a temporary beside it, then rename). */
enum ox_status gguf_writer_write_file(struct gguf_writer *w, const char *path);
/* Write into a malloc'd buffer the caller frees with free(). */
enum ox_status gguf_writer_write_mem(struct gguf_writer *w, uint8_t **buf, size_t *size);

#endif
