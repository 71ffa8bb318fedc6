/* gguf_write.c: builds GGUF v3 files (metadata + tensors) in the layout ggml writes. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "gguf/gguf.h"
#include "quant/dtype.h"

struct writer_tensor {
    char *name;
    enum ox_dtype type;
    int n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    uint64_t n_bytes;
    const void *data; /* borrowed */
};

struct gguf_writer {
    struct gguf_kv *kv; /* keys and values owned */
    size_t n_kv, cap_kv;
    struct writer_tensor *tensors;
    size_t n_tensors, cap_tensors;
};

/* Where serialized bytes go: a FILE, or a growing memory buffer. */
struct sink {
    FILE *f;
    uint8_t *buf;
    size_t len, cap;
    uint64_t written; /* bytes so far, for padding */
};

static enum ox_status sink_write(struct sink *s, const void *p, size_t n) {
    s->written += n;
    if (s->f) {
        if (n && fwrite(p, 1, n, s->f) != n)
            return ox_fail(OX_ERR_IO, "gguf: write failed: %s", strerror(errno));
        return OX_OK;
    }
    if (n > s->cap - s->len) {
        size_t cap = s->cap ? s->cap : 4096;
        while (cap - s->len < n) {
            if (cap > SIZE_MAX / 2)
                return ox_fail(OX_ERR_OOM, "gguf: output too large");
            cap *= 2;
        }
        uint8_t *buf = realloc(s->buf, cap);
        if (!buf)
            return ox_fail(OX_ERR_OOM, "gguf: cannot grow the output buffer to %zu bytes", cap);
        s->buf = buf;
        s->cap = cap;
    }
    if (n)
        memcpy(s->buf + s->len, p, n);
    s->len += n;
    return OX_OK;
}

static enum ox_status sink_u32(struct sink *s, uint32_t v) {
    return sink_write(s, &v, 4);
}

static enum ox_status sink_u64(struct sink *s, uint64_t v) {
    return sink_write(s, &v, 8);
}

static enum ox_status sink_zeros(struct sink *s, uint64_t n) {
    static const uint8_t zeros[64];
    for (; n > 0; n -= n < sizeof zeros ? n : sizeof zeros)
        OX_TRY(sink_write(s, zeros, n < sizeof zeros ? (size_t)n : sizeof zeros));
    return OX_OK;
}

/* ---- owned values ------------------------------------------------------------------------ */

static void free_value(struct gguf_value *v) {
    if (v->elems) {
        for (uint64_t i = 0; i < v->n; i++)
            free_value(&v->elems[i]);
        free(v->elems);
    }
    free((void *)v->data);
    memset(v, 0, sizeof *v);
}

static enum ox_status copy_bytes(const uint8_t *src, uint64_t n, const uint8_t **dst) {
    uint8_t *p = malloc(n ? (size_t)n : 1);
    if (!p)
        return ox_fail(OX_ERR_OOM, "gguf: cannot allocate %llu bytes for a value",
                       (unsigned long long)n);
    if (n)
        memcpy(p, src, (size_t)n);
    *dst = p;
    return OX_OK;
}

static enum ox_status copy_value(const struct gguf_value *src, struct gguf_value *dst) {
    *dst = (struct gguf_value){.type = src->type, .elem_type = src->elem_type, .n = src->n};
    if (src->type == OX_GGUF_ARRAY && src->elems) {
        dst->elems = calloc(src->n ? (size_t)src->n : 1, sizeof *dst->elems);
        if (!dst->elems)
            return ox_fail(OX_ERR_OOM, "gguf: cannot allocate array elements");
        for (uint64_t i = 0; i < src->n; i++)
            OX_TRY(copy_value(&src->elems[i], &dst->elems[i]));
        return OX_OK;
    }
    uint64_t bytes = src->type == OX_GGUF_STRING  ? src->n
                     : src->type == OX_GGUF_ARRAY ? src->n * gguf_type_size(src->elem_type)
                                                  : gguf_type_size(src->type);
    return copy_bytes(src->data, bytes, &dst->data);
}

/* ---- building ---------------------------------------------------------------------------- */

enum ox_status gguf_writer_create(struct gguf_writer **out) {
    *out = calloc(1, sizeof **out);
    return *out ? OX_OK : ox_fail(OX_ERR_OOM, "gguf: out of memory");
}

void gguf_writer_free(struct gguf_writer *w) {
    if (!w)
        return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free((char *)w->kv[i].key);
        free_value(&w->kv[i].value);
    }
    for (size_t i = 0; i < w->n_tensors; i++)
        free(w->tensors[i].name);
    free(w->kv);
    free(w->tensors);
    free(w);
}

static enum ox_status grow_array(void **items, size_t *cap, size_t n, size_t item_size) {
    if (n < *cap)
        return OX_OK;
    size_t cap2 = *cap ? *cap * 2 : 16;
    void *p = realloc(*items, cap2 * item_size);
    if (!p)
        return ox_fail(OX_ERR_OOM, "gguf: out of memory");
    *items = p;
    *cap = cap2;
    return OX_OK;
}

enum ox_status gguf_writer_set(struct gguf_writer *w, const char *key, const struct gguf_value *v) {
    if (!key || !*key || strlen(key) > GGUF_MAX_KEY)
        return ox_fail(OX_ERR_INVALID_ARG, "gguf: invalid key");
    if ((unsigned)v->type >= OX_GGUF_TYPE_COUNT)
        return ox_fail(OX_ERR_INVALID_ARG, "gguf: key '%s': invalid value type", key);
    struct gguf_value copy;
    enum ox_status s = copy_value(v, &copy);
    if (s != OX_OK) {
        free_value(&copy);
        return s;
    }
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, key) == 0) { /* replace in place: key order is kept */
            free_value(&w->kv[i].value);
            w->kv[i].value = copy;
            return OX_OK;
        }
    }
    char *k = strdup(key);
    if (!k || grow_array((void **)&w->kv, &w->cap_kv, w->n_kv, sizeof *w->kv) != OX_OK) {
        free(k);
        free_value(&copy);
        return ox_fail(OX_ERR_OOM, "gguf: out of memory adding key '%s'", key);
    }
    w->kv[w->n_kv++] = (struct gguf_kv){.key = k, .value = copy};
    return OX_OK;
}

static enum ox_status set_scalar(struct gguf_writer *w, const char *key, enum ox_gguf_type type,
                                 const void *p) {
    struct gguf_value v = {.type = type, .n = 1, .data = p};
    return gguf_writer_set(w, key, &v);
}

enum ox_status gguf_writer_set_u32(struct gguf_writer *w, const char *key, uint32_t v) {
    return set_scalar(w, key, OX_GGUF_UINT32, &v);
}

enum ox_status gguf_writer_set_i32(struct gguf_writer *w, const char *key, int32_t v) {
    return set_scalar(w, key, OX_GGUF_INT32, &v);
}

enum ox_status gguf_writer_set_f32(struct gguf_writer *w, const char *key, float v) {
    return set_scalar(w, key, OX_GGUF_FLOAT32, &v);
}

enum ox_status gguf_writer_set_bool(struct gguf_writer *w, const char *key, bool v) {
    uint8_t b = v;
    return set_scalar(w, key, OX_GGUF_BOOL, &b);
}

enum ox_status gguf_writer_set_str(struct gguf_writer *w, const char *key, const char *s) {
    struct gguf_value v = {.type = OX_GGUF_STRING, .n = strlen(s), .data = (const uint8_t *)s};
    return gguf_writer_set(w, key, &v);
}

enum ox_status gguf_writer_set_array(struct gguf_writer *w, const char *key,
                                     enum ox_gguf_type elem_type, const void *data, uint64_t n) {
    if (gguf_type_size(elem_type) == 0)
        return ox_fail(OX_ERR_INVALID_ARG, "gguf: key '%s': use set_str_array for strings", key);
    struct gguf_value v = {.type = OX_GGUF_ARRAY, .elem_type = elem_type, .n = n, .data = data};
    return gguf_writer_set(w, key, &v);
}

enum ox_status gguf_writer_set_str_array(struct gguf_writer *w, const char *key,
                                         const char *const *strs, uint64_t n) {
    struct gguf_value *elems = calloc(n ? (size_t)n : 1, sizeof *elems);
    if (!elems)
        return ox_fail(OX_ERR_OOM, "gguf: key '%s': out of memory", key);
    for (uint64_t i = 0; i < n; i++)
        elems[i] = (struct gguf_value){
            .type = OX_GGUF_STRING, .n = strlen(strs[i]), .data = (const uint8_t *)strs[i]};
    struct gguf_value v = {
        .type = OX_GGUF_ARRAY, .elem_type = OX_GGUF_STRING, .n = n, .elems = elems};
    enum ox_status s = gguf_writer_set(w, key, &v);
    free(elems);
    return s;
}

void gguf_writer_remove(struct gguf_writer *w, const char *key) {
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, key) == 0) {
            free((char *)w->kv[i].key);
            free_value(&w->kv[i].value);
            memmove(&w->kv[i], &w->kv[i + 1], (w->n_kv - i - 1) * sizeof *w->kv);
            w->n_kv--;
            return;
        }
    }
}

static enum ox_status check_new_tensor(const struct gguf_writer *w, const char *name,
                                       enum ox_dtype type, int n_dims, const int64_t *ne,
                                       uint64_t *n_bytes) {
    if (!name || !*name || strlen(name) >= GGUF_MAX_NAME)
        return ox_fail(OX_ERR_INVALID_ARG, "gguf: tensor name must be 1..%d bytes",
                       GGUF_MAX_NAME - 1);
    for (size_t i = 0; i < w->n_tensors; i++) {
        if (strcmp(w->tensors[i].name, name) == 0)
            return ox_fail(OX_ERR_INVALID_ARG, "gguf: duplicate tensor '%s'", name);
    }
    const struct dtype_traits *tr = dtype_get((int)type);
    if (!tr || n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return ox_fail(OX_ERR_INVALID_ARG, "gguf: tensor '%s': bad type or dimension count", name);
    uint64_t n = 1;
    for (int d = 0; d < n_dims; d++) {
        if (ne[d] <= 0 || ox_mul_overflows(n, (uint64_t)ne[d], &n) || n > (uint64_t)INT64_MAX)
            return ox_fail(OX_ERR_INVALID_ARG, "gguf: tensor '%s': bad dimension %d", name, d);
    }
    if (ne[0] % tr->block_size != 0)
        return ox_fail(OX_ERR_INVALID_ARG,
                       "gguf: tensor '%s': row %lld is not a multiple of "
                       "the block size %lld",
                       name, (long long)ne[0], (long long)tr->block_size);
    *n_bytes = n / (uint64_t)tr->block_size * tr->type_size;
    return OX_OK;
}

enum ox_status gguf_writer_add_tensor(struct gguf_writer *w, const char *name, enum ox_dtype type,
                                      int n_dims, const int64_t *ne, const void *data) {
    uint64_t n_bytes = 0;
    OX_TRY(check_new_tensor(w, name, type, n_dims, ne, &n_bytes));
    char *copy = strdup(name);
    if (!copy || grow_array((void **)&w->tensors, &w->cap_tensors, w->n_tensors,
                            sizeof *w->tensors) != OX_OK) {
        free(copy);
        return ox_fail(OX_ERR_OOM, "gguf: out of memory adding tensor '%s'", name);
    }
    struct writer_tensor *t = &w->tensors[w->n_tensors++];
    *t = (struct writer_tensor){
        .name = copy, .type = type, .n_dims = n_dims, .n_bytes = n_bytes, .data = data};
    for (int d = 0; d < GGUF_MAX_DIMS; d++)
        t->ne[d] = d < n_dims ? ne[d] : 1;
    return OX_OK;
}

/* ---- serializing ------------------------------------------------------------------------- */

static enum ox_status write_str(struct sink *s, const void *p, uint64_t n) {
    OX_TRY(sink_u64(s, n));
    return sink_write(s, p, (size_t)n);
}

/* A value's bytes after its type word (strings: length + bytes; arrays: type, count, items). */
static enum ox_status write_payload(struct sink *s, const struct gguf_value *v) {
    if (v->type == OX_GGUF_STRING)
        return write_str(s, v->data, v->n);
    if (v->type != OX_GGUF_ARRAY)
        return sink_write(s, v->data, gguf_type_size(v->type));
    OX_TRY(sink_u32(s, (uint32_t)v->elem_type));
    OX_TRY(sink_u64(s, v->n));
    if (!v->elems)
        return sink_write(s, v->data, (size_t)(v->n * gguf_type_size(v->elem_type)));
    for (uint64_t i = 0; i < v->n; i++)
        OX_TRY(write_payload(s, &v->elems[i]));
    return OX_OK;
}

static uint32_t writer_alignment(const struct gguf_writer *w) {
    for (size_t i = 0; i < w->n_kv; i++) {
        const struct gguf_value *v = &w->kv[i].value;
        if (strcmp(w->kv[i].key, "general.alignment") == 0 && v->type == OX_GGUF_UINT32) {
            uint32_t a = (uint32_t)gguf_value_u64(v);
            if (a && (a & (a - 1)) == 0)
                return a;
        }
    }
    return GGUF_DEFAULT_ALIGNMENT;
}

/* Header, metadata, tensor infos and the padding before the data section. */
static enum ox_status write_meta(const struct gguf_writer *w, struct sink *s, uint64_t align) {
    uint64_t offset = 0;
    OX_TRY(sink_write(s, GGUF_MAGIC, 4));
    OX_TRY(sink_u32(s, 3));
    OX_TRY(sink_u64(s, w->n_tensors));
    OX_TRY(sink_u64(s, w->n_kv));
    for (size_t i = 0; i < w->n_kv; i++) {
        OX_TRY(write_str(s, w->kv[i].key, strlen(w->kv[i].key)));
        OX_TRY(sink_u32(s, (uint32_t)w->kv[i].value.type));
        OX_TRY(write_payload(s, &w->kv[i].value));
    }
    for (size_t i = 0; i < w->n_tensors; i++) {
        const struct writer_tensor *t = &w->tensors[i];
        OX_TRY(write_str(s, t->name, strlen(t->name)));
        OX_TRY(sink_u32(s, (uint32_t)t->n_dims));
        for (int d = 0; d < t->n_dims; d++)
            OX_TRY(sink_u64(s, (uint64_t)t->ne[d]));
        OX_TRY(sink_u32(s, (uint32_t)t->type));
        OX_TRY(sink_u64(s, offset));
        if (ox_pad_overflows(offset + t->n_bytes, align, &offset))
            return ox_fail(OX_ERR_INVALID_ARG, "gguf: tensor data too large");
    }
    return sink_zeros(s, (align - s->written % align) % align);
}

/* One tensor's bytes and the padding after them. */
static enum ox_status write_data(struct sink *s, const void *data, uint64_t n, uint64_t align) {
    OX_TRY(sink_write(s, data, (size_t)n));
    return sink_zeros(s, (align - n % align) % align);
}

static enum ox_status write_all(const struct gguf_writer *w, struct sink *s) {
    uint64_t align = writer_alignment(w);
    OX_TRY(write_meta(w, s, align));
    for (size_t i = 0; i < w->n_tensors; i++) {
        if (!w->tensors[i].data)
            return ox_fail(OX_ERR_INVALID_ARG, "gguf: tensor '%s' has no data", w->tensors[i].name);
        OX_TRY(write_data(s, w->tensors[i].data, w->tensors[i].n_bytes, align));
    }
    return OX_OK;
}

enum ox_status gguf_writer_write_mem(struct gguf_writer *w, uint8_t **buf, size_t *size) {
    struct sink s = {0};
    enum ox_status st = write_all(w, &s);
    if (st != OX_OK) {
        free(s.buf);
        *buf = NULL;
        *size = 0;
        return st;
    }
    *buf = s.buf;
    *size = s.len;
    return OX_OK;
}

/* ---- files, written through a temporary and renamed when complete ---------------------- */

struct gguf_stream {
    const struct gguf_writer *w;
    struct sink sink;
    char *tmp, *path;
    uint64_t align;
    size_t next; /* index of the next tensor whose data is expected */
};

void gguf_stream_abort(struct gguf_stream *st) {
    if (!st)
        return;
    if (st->sink.f)
        fclose(st->sink.f);
    if (st->tmp && st->tmp[0])
        unlink(st->tmp);
    free(st->tmp);
    free(st->path);
    free(st);
}

static enum ox_status open_temp(const char *path, struct gguf_stream *st) {
    size_t n = strlen(path) + 16;
    st->tmp = malloc(n);
    st->path = strdup(path);
    if (!st->tmp || !st->path)
        return ox_fail(OX_ERR_OOM, "gguf: out of memory");
    snprintf(st->tmp, n, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(st->tmp);
    if (fd < 0) {
        st->tmp[0] = 0;
        return ox_fail(OX_ERR_IO, "gguf: cannot create a file beside '%s': %s", path,
                       strerror(errno));
    }
    fchmod(fd, 0644); /* mkstemp's 0600 would make the model private to its writer */
    st->sink.f = fdopen(fd, "wb");
    if (!st->sink.f) {
        close(fd);
        return ox_fail(OX_ERR_IO, "gguf: cannot open '%s': %s", st->tmp, strerror(errno));
    }
    return OX_OK;
}

enum ox_status gguf_writer_stream_open(const struct gguf_writer *w, const char *path,
                                       struct gguf_stream **out) {
    *out = NULL;
    struct gguf_stream *st = calloc(1, sizeof *st);
    if (!st)
        return ox_fail(OX_ERR_OOM, "gguf: out of memory");
    st->w = w;
    st->align = writer_alignment(w);
    enum ox_status s = open_temp(path, st);
    if (s == OX_OK)
        s = write_meta(w, &st->sink, st->align);
    if (s != OX_OK) {
        gguf_stream_abort(st);
        return s;
    }
    *out = st;
    return OX_OK;
}

enum ox_status gguf_stream_tensor(struct gguf_stream *st, const void *data, uint64_t n_bytes) {
    if (st->next >= st->w->n_tensors || st->w->tensors[st->next].n_bytes != n_bytes)
        return ox_fail(OX_ERR_INVALID_ARG,
                       "gguf: tensor data #%zu of %llu bytes does not match "
                       "the tensor infos",
                       st->next, (unsigned long long)n_bytes);
    OX_TRY(write_data(&st->sink, data, n_bytes, st->align));
    st->next++;
    return OX_OK;
}

enum ox_status gguf_stream_close(struct gguf_stream *st) {
    enum ox_status s = OX_OK;
    if (st->next != st->w->n_tensors)
        s = ox_fail(OX_ERR_INVALID_ARG, "gguf: %zu of %zu tensors written", st->next,
                    st->w->n_tensors);
    FILE *f = st->sink.f;
    st->sink.f = NULL;
    if (fclose(f) != 0 && s == OX_OK)
        s = ox_fail(OX_ERR_IO, "gguf: cannot write '%s': %s", st->tmp, strerror(errno));
    if (s == OX_OK && rename(st->tmp, st->path) != 0)
        s = ox_fail(OX_ERR_IO, "gguf: cannot rename '%s' to '%s': %s", st->tmp, st->path,
                    strerror(errno));
    if (s == OX_OK)
        st->tmp[0] = 0; /* renamed: nothing left to unlink */
    gguf_stream_abort(st);
    return s;
}

enum ox_status gguf_writer_write_file(struct gguf_writer *w, const char *path) {
    struct gguf_stream *st;
    OX_TRY(gguf_writer_stream_open(w, path, &st));
    for (size_t i = 0; i < w->n_tensors; i++) {
        enum ox_status s =
            w->tensors[i].data
                ? gguf_stream_tensor(st, w->tensors[i].data, w->tensors[i].n_bytes)
                : ox_fail(OX_ERR_INVALID_ARG, "gguf: tensor '%s' has no data", w->tensors[i].name);
        if (s != OX_OK) {
            gguf_stream_abort(st);
            return s;
        }
    }
    return gguf_stream_close(st);
}
