/* gguf_access.c: lookups and type-checked accessors over a parsed GGUF file. */
#include <string.h>

#include "gguf/gguf.h"

const struct gguf_value *gguf_find(const struct ox_gguf *g, const char *key) {
    int64_t i = strmap_find(&g->key_index, key, strlen(key));
    return i < 0 ? NULL : &g->kv[i].value;
}

const struct gguf_tensor *gguf_find_tensor(const struct ox_gguf *g, const char *name) {
    int64_t i = strmap_find(&g->tensor_index, name, strlen(name));
    return i < 0 ? NULL : &g->tensors[i];
}

uint64_t gguf_value_u64(const struct gguf_value *v) {
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    switch (v->type) {
    case OX_GGUF_UINT8:
    case OX_GGUF_BOOL: memcpy(&u8, v->data, 1); return u8;
    case OX_GGUF_UINT16: memcpy(&u16, v->data, 2); return u16;
    case OX_GGUF_UINT32: memcpy(&u32, v->data, 4); return u32;
    case OX_GGUF_UINT64: memcpy(&u64, v->data, 8); return u64;
    default: return 0;
    }
}

int64_t gguf_value_i64(const struct gguf_value *v) {
    int8_t i8;
    int16_t i16;
    int32_t i32;
    int64_t i64;
    switch (v->type) {
    case OX_GGUF_INT8: memcpy(&i8, v->data, 1); return i8;
    case OX_GGUF_INT16: memcpy(&i16, v->data, 2); return i16;
    case OX_GGUF_INT32: memcpy(&i32, v->data, 4); return i32;
    case OX_GGUF_INT64: memcpy(&i64, v->data, 8); return i64;
    default: return 0;
    }
}

double gguf_value_f64(const struct gguf_value *v) {
    float f;
    double d;
    switch (v->type) {
    case OX_GGUF_FLOAT32: memcpy(&f, v->data, 4); return f;
    case OX_GGUF_FLOAT64: memcpy(&d, v->data, 8); return d;
    default: return 0;
    }
}

static enum ox_status get_typed(const struct ox_gguf *g, const char *key, enum ox_gguf_type type,
                                const struct gguf_value **out) {
    const struct gguf_value *v = gguf_find(g, key);
    if (!v)
        return ox_fail(OX_ERR_FORMAT, "gguf: required key '%s' is missing", key);
    if (v->type != type)
        return ox_fail(OX_ERR_FORMAT, "gguf: key '%s' has type %s, expected %s", key,
                       ox_gguf_type_name(v->type), ox_gguf_type_name(type));
    *out = v;
    return OX_OK;
}

enum ox_status gguf_get_u32(const struct ox_gguf *g, const char *key, uint32_t *out) {
    const struct gguf_value *v = NULL;
    OX_TRY(get_typed(g, key, OX_GGUF_UINT32, &v));
    *out = (uint32_t)gguf_value_u64(v);
    return OX_OK;
}

enum ox_status gguf_get_i32(const struct ox_gguf *g, const char *key, int32_t *out) {
    const struct gguf_value *v = NULL;
    OX_TRY(get_typed(g, key, OX_GGUF_INT32, &v));
    *out = (int32_t)gguf_value_i64(v);
    return OX_OK;
}

enum ox_status gguf_get_u64(const struct ox_gguf *g, const char *key, uint64_t *out) {
    const struct gguf_value *v = NULL;
    OX_TRY(get_typed(g, key, OX_GGUF_UINT64, &v));
    *out = gguf_value_u64(v);
    return OX_OK;
}

enum ox_status gguf_get_f32(const struct ox_gguf *g, const char *key, float *out) {
    const struct gguf_value *v = NULL;
    OX_TRY(get_typed(g, key, OX_GGUF_FLOAT32, &v));
    *out = (float)gguf_value_f64(v);
    return OX_OK;
}

enum ox_status gguf_get_bool(const struct ox_gguf *g, const char *key, bool *out) {
    const struct gguf_value *v = NULL;
    OX_TRY(get_typed(g, key, OX_GGUF_BOOL, &v));
    *out = v->data[0] != 0;
    return OX_OK;
}

enum ox_status gguf_get_str(const struct ox_gguf *g, const char *key, const char **s,
                            uint64_t *len) {
    const struct gguf_value *v = NULL;
    OX_TRY(get_typed(g, key, OX_GGUF_STRING, &v));
    *s = (const char *)v->data;
    *len = v->n;
    return OX_OK;
}

enum ox_status gguf_get_uint(const struct ox_gguf *g, const char *key, uint64_t max,
                             uint64_t *out) {
    const struct gguf_value *v = gguf_find(g, key);
    if (!v)
        return ox_fail(OX_ERR_FORMAT, "gguf: required key '%s' is missing", key);
    bool is_signed = v->type == OX_GGUF_INT8 || v->type == OX_GGUF_INT16 ||
                     v->type == OX_GGUF_INT32 || v->type == OX_GGUF_INT64;
    bool is_unsigned = v->type == OX_GGUF_UINT8 || v->type == OX_GGUF_UINT16 ||
                       v->type == OX_GGUF_UINT32 || v->type == OX_GGUF_UINT64;
    if (!is_signed && !is_unsigned)
        return ox_fail(OX_ERR_FORMAT, "gguf: key '%s' has type %s, expected an integer", key,
                       ox_gguf_type_name(v->type));
    if (is_signed && gguf_value_i64(v) < 0)
        return ox_fail(OX_ERR_FORMAT, "gguf: key '%s' = %lld must not be negative", key,
                       (long long)gguf_value_i64(v));
    uint64_t x = is_signed ? (uint64_t)gguf_value_i64(v) : gguf_value_u64(v);
    if (x > max)
        return ox_fail(OX_ERR_FORMAT, "gguf: key '%s' = %llu exceeds the limit %llu", key,
                       (unsigned long long)x, (unsigned long long)max);
    *out = x;
    return OX_OK;
}

enum ox_status gguf_get_array(const struct ox_gguf *g, const char *key, enum ox_gguf_type elem_type,
                              const struct gguf_value **out) {
    const struct gguf_value *v = NULL;
    OX_TRY(get_typed(g, key, OX_GGUF_ARRAY, &v));
    if (v->elem_type != elem_type)
        return ox_fail(OX_ERR_FORMAT, "gguf: key '%s' is an array of %s, expected %s", key,
                       ox_gguf_type_name(v->elem_type), ox_gguf_type_name(elem_type));
    *out = v;
    return OX_OK;
}

enum ox_status gguf_array_elem(const struct gguf_value *arr, uint64_t i, struct gguf_value *out) {
    if (arr->type != OX_GGUF_ARRAY || i >= arr->n)
        return ox_fail(OX_ERR_INVALID_ARG, "gguf: array index %llu out of range (%llu elements)",
                       (unsigned long long)i, (unsigned long long)arr->n);
    if (arr->elems) {
        *out = arr->elems[i];
        return OX_OK;
    }
    size_t size = gguf_type_size(arr->elem_type);
    *out = (struct gguf_value){.type = arr->elem_type, .n = 1, .data = arr->data + i * size};
    return OX_OK;
}
