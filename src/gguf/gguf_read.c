/* gguf_read.c: parses and validates a GGUF file; hostile input is the normal case. */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "gguf/gguf.h"
#include "quant/dtype.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "GGUF parsing assumes little-endian");

/* A bounds-checked read position in the file. */
struct cursor {
    const uint8_t *buf;
    size_t size;
    size_t pos;
};

static size_t remaining(const struct cursor *c) {
    return c->size - c->pos;
}

static enum ox_status take(struct cursor *c, uint64_t n, const uint8_t **p, const char *what) {
    if (n > remaining(c))
        return ox_fail(OX_ERR_FORMAT,
                       "gguf: %s needs %llu bytes at offset %zu, past the end of "
                       "the %zu-byte file",
                       what, (unsigned long long)n, c->pos, c->size);
    *p = c->buf + c->pos;
    c->pos += (size_t)n;
    return OX_OK;
}

static enum ox_status read_u32(struct cursor *c, uint32_t *v, const char *what) {
    const uint8_t *p = NULL;
    OX_TRY(take(c, 4, &p, what));
    memcpy(v, p, 4);
    return OX_OK;
}

static enum ox_status read_u64(struct cursor *c, uint64_t *v, const char *what) {
    const uint8_t *p = NULL;
    OX_TRY(take(c, 8, &p, what));
    memcpy(v, p, 8);
    return OX_OK;
}

/* A length-prefixed string: its bytes stay in the file. */
static enum ox_status read_str(struct cursor *c, const uint8_t **s, uint64_t *len,
                               const char *what) {
    OX_TRY(read_u64(c, len, what));
    return take(c, *len, s, what);
}

size_t gguf_type_size(enum ox_gguf_type type) {
    static const size_t sizes[] = {
#define X(name, id, str, size) [id] = size,
        OX_GGUF_TYPE_LIST(X)
#undef X
    };
    return (unsigned)type < OX_GGUF_TYPE_COUNT ? sizes[type] : 0;
}

/* Checks a raw type word before it becomes an enum (an out-of-range enum is UB). */
static enum ox_status check_type(uint32_t raw, const char *key, const char *what) {
    if (raw >= OX_GGUF_TYPE_COUNT)
        return ox_fail(OX_ERR_FORMAT, "gguf: key '%s': %s %u is not a GGUF value type", key, what,
                       raw);
    return OX_OK;
}

static enum ox_status parse_value(struct cursor *c, enum ox_gguf_type type, int depth,
                                  const char *key, struct gguf_value *out);

/* Arrays of strings or arrays: each element is parsed into its own value. */
static enum ox_status parse_array_elems(struct cursor *c, struct gguf_value *v, int depth,
                                        const char *key) {
    /* each element takes at least 8 bytes (a string length, or an array's type + count) */
    uint64_t min_size = v->elem_type == OX_GGUF_STRING ? 8 : 12;
    if (v->n > remaining(c) / min_size)
        return ox_fail(OX_ERR_FORMAT,
                       "gguf: key '%s': array of %llu %s elements cannot fit "
                       "in the %zu bytes left",
                       key, (unsigned long long)v->n, ox_gguf_type_name(v->elem_type),
                       remaining(c));
    if (v->n == 0)
        return OX_OK;
    struct gguf_value *elems = calloc((size_t)v->n, sizeof *elems);
    if (!elems)
        return ox_fail(OX_ERR_OOM, "gguf: key '%s': cannot allocate %llu array elements", key,
                       (unsigned long long)v->n);
    v->elems = elems; /* owned from here: gguf_free releases partial arrays too */
    const uint8_t *start = c->buf + c->pos;
    for (uint64_t i = 0; i < v->n; i++)
        OX_TRY(parse_value(c, v->elem_type, depth + 1, key, &elems[i]));
    v->data = start;
    return OX_OK;
}

static enum ox_status parse_array(struct cursor *c, int depth, const char *key,
                                  struct gguf_value *v) {
    if (depth >= GGUF_MAX_ARRAY_DEPTH)
        return ox_fail(OX_ERR_FORMAT, "gguf: key '%s': arrays nested deeper than %d", key,
                       GGUF_MAX_ARRAY_DEPTH);
    uint32_t raw = 0;
    OX_TRY(read_u32(c, &raw, "array element type"));
    OX_TRY(check_type(raw, key, "array element type"));
    v->elem_type = (enum ox_gguf_type)raw;
    OX_TRY(read_u64(c, &v->n, "array length"));
    size_t esize = gguf_type_size(v->elem_type);
    if (esize == 0)
        return parse_array_elems(c, v, depth, key);
    if (v->n > remaining(c) / esize)
        return ox_fail(OX_ERR_FORMAT,
                       "gguf: key '%s': array of %llu %s elements (%zu bytes "
                       "each) runs past the end of the file",
                       key, (unsigned long long)v->n, ox_gguf_type_name(v->elem_type), esize);
    return take(c, v->n * esize, &v->data, "array data");
}

static enum ox_status parse_value(struct cursor *c, enum ox_gguf_type type, int depth,
                                  const char *key, struct gguf_value *out) {
    memset(out, 0, sizeof *out);
    out->type = type;
    out->n = 1;
    if (type == OX_GGUF_STRING)
        return read_str(c, &out->data, &out->n, "string value");
    if (type == OX_GGUF_ARRAY)
        return parse_array(c, depth, key, out);
    OX_TRY(take(c, gguf_type_size(type), &out->data, "scalar value"));
    if (type == OX_GGUF_BOOL && out->data[0] > 1)
        return ox_fail(OX_ERR_FORMAT, "gguf: key '%s': bool value %u is not 0 or 1", key,
                       out->data[0]);
    return OX_OK;
}

/* Copies a name out of the file; rejects embedded NULs, which would truncate it. */
static enum ox_status copy_name(const uint8_t *s, uint64_t len, char **out, const char *what) {
    if (memchr(s, 0, (size_t)len))
        return ox_fail(OX_ERR_FORMAT, "gguf: %s contains a NUL byte", what);
    char *name = malloc((size_t)len + 1);
    if (!name)
        return ox_fail(OX_ERR_OOM, "gguf: cannot allocate a %s", what);
    memcpy(name, s, (size_t)len);
    name[len] = 0;
    *out = name;
    return OX_OK;
}

static enum ox_status parse_kv(struct cursor *c, struct ox_gguf *g, int64_t i) {
    const uint8_t *s = NULL;
    uint64_t len = 0;
    OX_TRY(read_str(c, &s, &len, "key"));
    if (len == 0 || len > GGUF_MAX_KEY)
        return ox_fail(OX_ERR_FORMAT, "gguf: key #%lld has length %llu (must be 1..%d)",
                       (long long)i, (unsigned long long)len, GGUF_MAX_KEY);
    char *key = NULL;
    OX_TRY(copy_name(s, len, &key, "key"));
    g->kv[i].key = key;
    g->n_kv = i + 1; /* from here the key is owned by g */
    int64_t dup = -1;
    OX_TRY(strmap_insert(&g->key_index, key, (size_t)len, i, &dup));
    if (dup >= 0)
        return ox_fail(OX_ERR_FORMAT, "gguf: duplicate key '%s' (entries %lld and %lld)", key,
                       (long long)dup, (long long)i);
    uint32_t raw = 0;
    OX_TRY(read_u32(c, &raw, "value type"));
    OX_TRY(check_type(raw, key, "value type"));
    return parse_value(c, (enum ox_gguf_type)raw, 0, key, &g->kv[i].value);
}

static enum ox_status parse_alignment(struct ox_gguf *g) {
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const struct gguf_value *v = gguf_find(g, "general.alignment");
    if (!v)
        return OX_OK;
    if (v->type != OX_GGUF_UINT32)
        return ox_fail(OX_ERR_FORMAT, "gguf: key 'general.alignment' has type %s, expected u32",
                       ox_gguf_type_name(v->type));
    uint32_t a = (uint32_t)gguf_value_u64(v);
    if (a == 0 || (a & (a - 1)) != 0)
        return ox_fail(OX_ERR_FORMAT, "gguf: key 'general.alignment' = %u is not a power of two",
                       a);
    g->alignment = a;
    return OX_OK;
}

/* Shape and type checks; computes n_bytes. */
static enum ox_status check_tensor_shape(struct gguf_tensor *t, uint32_t raw_type,
                                         const uint64_t *dims) {
    const struct dtype_traits *tr = raw_type < OX_DTYPE_COUNT ? dtype_get((int)raw_type) : NULL;
    if (!tr)
        return ox_fail(OX_ERR_FORMAT, "gguf: tensor '%s' has unknown type %u", t->name, raw_type);
    t->type = (enum ox_dtype)raw_type;
    uint64_t n = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        uint64_t ne = d < t->n_dims ? dims[d] : 1;
        if (ne == 0 || ne > (uint64_t)INT64_MAX)
            return ox_fail(OX_ERR_FORMAT,
                           "gguf: tensor '%s' dimension %d is %lld (must be "
                           "positive)",
                           t->name, d, (long long)ne);
        if (ox_mul_overflows(n, ne, &n) || n > (uint64_t)INT64_MAX)
            return ox_fail(OX_ERR_FORMAT, "gguf: tensor '%s' element count overflows", t->name);
        t->ne[d] = (int64_t)ne;
    }
    if (t->ne[0] % tr->block_size != 0)
        return ox_fail(OX_ERR_FORMAT,
                       "gguf: tensor '%s' row of %lld elements is not a multiple "
                       "of %s's block size %lld",
                       t->name, (long long)t->ne[0], tr->name, (long long)tr->block_size);
    if (ox_mul_overflows(n / (uint64_t)tr->block_size, tr->type_size, &t->n_bytes))
        return ox_fail(OX_ERR_FORMAT, "gguf: tensor '%s' byte size overflows", t->name);
    return OX_OK;
}

static enum ox_status parse_tensor_info(struct cursor *c, struct ox_gguf *g, int64_t i) {
    struct gguf_tensor *t = &g->tensors[i];
    const uint8_t *s = NULL;
    uint64_t len = 0;
    OX_TRY(read_str(c, &s, &len, "tensor name"));
    if (len == 0 || len >= GGUF_MAX_NAME)
        return ox_fail(OX_ERR_FORMAT, "gguf: tensor #%lld name has length %llu (must be 1..%d)",
                       (long long)i, (unsigned long long)len, GGUF_MAX_NAME - 1);
    char *name = NULL;
    OX_TRY(copy_name(s, len, &name, "tensor name"));
    t->name = name;
    g->n_tensors = i + 1;
    int64_t dup = -1;
    OX_TRY(strmap_insert(&g->tensor_index, name, (size_t)len, i, &dup));
    if (dup >= 0)
        return ox_fail(OX_ERR_FORMAT, "gguf: duplicate tensor name '%s'", name);
    uint32_t n_dims = 0, raw_type = 0;
    OX_TRY(read_u32(c, &n_dims, "tensor n_dims"));
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return ox_fail(OX_ERR_FORMAT, "gguf: tensor '%s' has %u dimensions (must be 1..%d)", name,
                       n_dims, GGUF_MAX_DIMS);
    t->n_dims = (int)n_dims;
    uint64_t dims[GGUF_MAX_DIMS];
    for (uint32_t d = 0; d < n_dims; d++)
        OX_TRY(read_u64(c, &dims[d], "tensor dimension"));
    OX_TRY(read_u32(c, &raw_type, "tensor type"));
    OX_TRY(read_u64(c, &t->offset, "tensor offset"));
    return check_tensor_shape(t, raw_type, dims);
}

/* Tensor data must be packed in info order, each tensor at the aligned end of the previous
 * one (as ggml writes it), and lie inside the file. */
static enum ox_status check_tensor_data(struct ox_gguf *g, size_t info_end) {
    if (ox_pad_overflows(info_end, g->alignment, &g->data_offset))
        return ox_fail(OX_ERR_FORMAT, "gguf: data section offset overflows");
    uint64_t expect = 0;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        struct gguf_tensor *t = &g->tensors[i];
        if (t->offset != expect)
            return ox_fail(OX_ERR_FORMAT,
                           "gguf: tensor '%s' data offset %llu, expected %llu "
                           "(data must be aligned to %u and packed in order)",
                           t->name, (unsigned long long)t->offset, (unsigned long long)expect,
                           g->alignment);
        uint64_t start, end;
        if (ox_add_overflows(g->data_offset, t->offset, &start) ||
            ox_add_overflows(start, t->n_bytes, &end) || end > g->size)
            return ox_fail(OX_ERR_FORMAT,
                           "gguf: tensor '%s' data (%llu bytes at offset %llu) "
                           "ends past the end of the %zu-byte file",
                           t->name, (unsigned long long)t->n_bytes, (unsigned long long)t->offset,
                           g->size);
        t->data = g->buf + start;
        if (ox_pad_overflows(t->offset + t->n_bytes, g->alignment, &expect))
            return ox_fail(OX_ERR_FORMAT, "gguf: tensor '%s' padded end overflows", t->name);
    }
    return OX_OK;
}

static enum ox_status parse_header(struct cursor *c, struct ox_gguf *g, uint64_t *n_kv,
                                   uint64_t *n_tensors) {
    const uint8_t *magic = NULL;
    OX_TRY(take(c, 4, &magic, "magic"));
    if (memcmp(magic, GGUF_MAGIC, 4) != 0)
        return ox_fail(OX_ERR_FORMAT, "gguf: bad magic %02x %02x %02x %02x (not a GGUF file)",
                       magic[0], magic[1], magic[2], magic[3]);
    OX_TRY(read_u32(c, &g->version, "version"));
    if ((g->version & 0xffff) == 0 && g->version != 0)
        return ox_fail(OX_ERR_FORMAT,
                       "gguf: version 0x%08x looks byte-swapped (big-endian "
                       "files are not supported)",
                       g->version);
    if (g->version < 2 || g->version > 3)
        return ox_fail(OX_ERR_FORMAT, "gguf: version %u is not supported (only 2 and 3)",
                       g->version);
    OX_TRY(read_u64(c, n_tensors, "tensor count"));
    OX_TRY(read_u64(c, n_kv, "metadata count"));
    /* a key/value pair takes at least 14 bytes and a tensor info at least 33: reject counts
     * the file cannot hold before allocating for them */
    if (*n_kv > remaining(c) / 14)
        return ox_fail(OX_ERR_FORMAT, "gguf: metadata count %llu cannot fit in a %zu-byte file",
                       (unsigned long long)*n_kv, c->size);
    if (*n_tensors > remaining(c) / 33)
        return ox_fail(OX_ERR_FORMAT, "gguf: tensor count %llu cannot fit in a %zu-byte file",
                       (unsigned long long)*n_tensors, c->size);
    return OX_OK;
}

static enum ox_status parse_all(struct ox_gguf *g) {
    struct cursor c = {g->buf, g->size, 0};
    uint64_t n_kv = 0, n_tensors = 0;
    OX_TRY(parse_header(&c, g, &n_kv, &n_tensors));
    g->kv = calloc(n_kv ? (size_t)n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors)
        return ox_fail(OX_ERR_OOM, "gguf: cannot allocate %llu keys and %llu tensors",
                       (unsigned long long)n_kv, (unsigned long long)n_tensors);
    OX_TRY(strmap_reserve(&g->key_index, (size_t)n_kv));
    OX_TRY(strmap_reserve(&g->tensor_index, (size_t)n_tensors));
    for (uint64_t i = 0; i < n_kv; i++)
        OX_TRY(parse_kv(&c, g, (int64_t)i));
    OX_TRY(parse_alignment(g));
    for (uint64_t i = 0; i < n_tensors; i++)
        OX_TRY(parse_tensor_info(&c, g, (int64_t)i));
    return check_tensor_data(g, c.pos);
}

enum ox_status gguf_parse(const uint8_t *buf, size_t size, struct ox_gguf **out) {
    *out = NULL;
    if (!buf && size)
        return ox_fail(OX_ERR_INVALID_ARG, "gguf: NULL buffer");
    struct ox_gguf *g = calloc(1, sizeof *g);
    if (!g)
        return ox_fail(OX_ERR_OOM, "gguf: out of memory");
    g->buf = buf;
    g->size = size;
    enum ox_status s = parse_all(g);
    if (s != OX_OK) {
        gguf_free(g);
        return s;
    }
    *out = g;
    return OX_OK;
}

enum ox_status gguf_open(const char *path, bool use_mmap, struct ox_gguf **out) {
    *out = NULL;
    struct file_map map;
    OX_TRY(file_map_open(path, use_mmap, &map));
    enum ox_status s = gguf_parse(map.data, map.size, out);
    if (s != OX_OK) {
        file_map_close(&map);
        return s;
    }
    (*out)->map = map;
    return OX_OK;
}

static void free_value(struct gguf_value *v) {
    if (!v->elems)
        return;
    for (uint64_t i = 0; i < v->n; i++)
        free_value(&v->elems[i]);
    free(v->elems);
}

void gguf_free(struct ox_gguf *g) {
    if (!g)
        return;
    for (int64_t i = 0; i < g->n_kv; i++) {
        free((char *)g->kv[i].key);
        free_value(&g->kv[i].value);
    }
    for (int64_t i = 0; i < g->n_tensors; i++)
        free((char *)g->tensors[i].name);
    free(g->kv);
    free(g->tensors);
    strmap_free(&g->key_index);
    strmap_free(&g->tensor_index);
    file_map_close(&g->map);
    for (int i = 0; i < g->n_parts; i++)
        gguf_free(g->parts[i]);
    free(g->parts);
    free(g);
}
