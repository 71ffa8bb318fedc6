/* gguf_api.c: the public read-only GGUF inspection API over the internal reader. */
#include <string.h>

#include "gguf/gguf.h"

static const char *const type_names[] = {
#define X(name, id, str, size) [id] = str,
    OX_GGUF_TYPE_LIST(X)
#undef X
};
_Static_assert(sizeof type_names / sizeof type_names[0] == OX_GGUF_TYPE_COUNT,
               "GGUF type ids must be dense");

const char *ox_gguf_type_name(enum ox_gguf_type type) {
    return (unsigned)type < OX_GGUF_TYPE_COUNT ? type_names[type] : NULL;
}

enum ox_status ox_gguf_open(const char *path, struct ox_gguf **out) {
    if (!out)
        return ox_fail(OX_ERR_INVALID_ARG, "ox_gguf_open: out is NULL");
    *out = NULL;
    if (!path)
        return ox_fail(OX_ERR_INVALID_ARG, "ox_gguf_open: path is NULL");
    return gguf_open(path, true, out);
}

enum ox_status ox_gguf_open_buffer(const void *data, size_t size, struct ox_gguf **out) {
    if (!out)
        return ox_fail(OX_ERR_INVALID_ARG, "ox_gguf_open_buffer: out is NULL");
    return gguf_parse(data, size, out);
}

void ox_gguf_free(struct ox_gguf *gguf) {
    gguf_free(gguf);
}

uint32_t ox_gguf_version(const struct ox_gguf *g) {
    return g ? g->version : 0;
}

uint32_t ox_gguf_alignment(const struct ox_gguf *g) {
    return g ? g->alignment : 0;
}

uint64_t ox_gguf_data_offset(const struct ox_gguf *g) {
    return g ? g->data_offset : 0;
}

uint64_t ox_gguf_file_size(const struct ox_gguf *g) {
    return g ? g->size : 0;
}

int64_t ox_gguf_n_kv(const struct ox_gguf *g) {
    return g ? g->n_kv : 0;
}

const char *ox_gguf_key(const struct ox_gguf *g, int64_t i) {
    return g && i >= 0 && i < g->n_kv ? g->kv[i].key : NULL;
}

int64_t ox_gguf_find_key(const struct ox_gguf *g, const char *key) {
    return g && key ? strmap_find(&g->key_index, key, strlen(key)) : -1;
}

/* Internal value -> public value: scalars widened, arrays keep a handle for element access. */
static void export_value(const struct gguf_value *v, struct ox_gguf_value *out) {
    memset(out, 0, sizeof *out);
    out->type = v->type;
    out->n = v->n;
    switch (v->type) {
    case OX_GGUF_UINT8:
    case OX_GGUF_UINT16:
    case OX_GGUF_UINT32:
    case OX_GGUF_UINT64: out->v.u = gguf_value_u64(v); break;
    case OX_GGUF_INT8:
    case OX_GGUF_INT16:
    case OX_GGUF_INT32:
    case OX_GGUF_INT64: out->v.i = gguf_value_i64(v); break;
    case OX_GGUF_FLOAT32:
    case OX_GGUF_FLOAT64: out->v.f = gguf_value_f64(v); break;
    case OX_GGUF_BOOL: out->v.b = v->data[0] != 0; break;
    case OX_GGUF_STRING: out->v.s = (const char *)v->data; break;
    default: /* ARRAY */
        out->elem_type = v->elem_type;
        out->internal_ = v;
        break;
    }
}

enum ox_status ox_gguf_value(const struct ox_gguf *g, int64_t i, struct ox_gguf_value *out) {
    if (!g || !out || i < 0 || i >= g->n_kv)
        return ox_fail(OX_ERR_INVALID_ARG, "ox_gguf_value: index %lld out of range", (long long)i);
    export_value(&g->kv[i].value, out);
    return OX_OK;
}

enum ox_status ox_gguf_array_get(const struct ox_gguf_value *array, uint64_t i,
                                 struct ox_gguf_value *out) {
    if (!array || !out || array->type != OX_GGUF_ARRAY || !array->internal_)
        return ox_fail(OX_ERR_INVALID_ARG, "ox_gguf_array_get: not an array value");
    const struct gguf_value *arr = array->internal_;
    if (i < arr->n && arr->elems) { /* export the stored element: its handle must outlive us */
        export_value(&arr->elems[i], out);
        return OX_OK;
    }
    struct gguf_value elem;
    OX_TRY(gguf_array_elem(arr, i, &elem));
    export_value(&elem, out); /* a fixed-size scalar: nothing keeps pointing at elem */
    return OX_OK;
}

int64_t ox_gguf_n_tensors(const struct ox_gguf *g) {
    return g ? g->n_tensors : 0;
}

int64_t ox_gguf_find_tensor(const struct ox_gguf *g, const char *name) {
    return g && name ? strmap_find(&g->tensor_index, name, strlen(name)) : -1;
}

enum ox_status ox_gguf_tensor(const struct ox_gguf *g, int64_t i, struct ox_tensor_info *out) {
    if (!g || !out || i < 0 || i >= g->n_tensors)
        return ox_fail(OX_ERR_INVALID_ARG, "ox_gguf_tensor: index %lld out of range", (long long)i);
    const struct gguf_tensor *t = &g->tensors[i];
    *out = (struct ox_tensor_info){.name = t->name,
                                   .type = t->type,
                                   .n_dims = t->n_dims,
                                   .offset = t->offset,
                                   .n_bytes = t->n_bytes,
                                   .data = t->data};
    memcpy(out->ne, t->ne, sizeof out->ne);
    return OX_OK;
}
