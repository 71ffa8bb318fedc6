/* gguf_builder.h: writes GGUF bytes field by field, so tests can build broken files on purpose. */
#ifndef OX_TEST_GGUF_BUILDER_H
#define OX_TEST_GGUF_BUILDER_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct buf {
    uint8_t *d;
    size_t n, cap;
};

static void put(struct buf *b, const void *p, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->d = realloc(b->d, b->cap);
        if (!b->d)
            abort(); /* test harness only */
    }
    memcpy(b->d + b->n, p, n);
    b->n += n;
}

static void put_u32(struct buf *b, uint32_t v) {
    put(b, &v, 4);
}

static void put_u64(struct buf *b, uint64_t v) {
    put(b, &v, 8);
}

static void put_str(struct buf *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}

static void put_header(struct buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    put(b, "GGUF", 4);
    put_u32(b, version);
    put_u64(b, n_tensors);
    put_u64(b, n_kv);
}

/* GGUF value type ids */
enum { T_U8 = 0, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 };

static void kv_u32(struct buf *b, const char *key, uint32_t v) {
    put_str(b, key);
    put_u32(b, T_U32);
    put_u32(b, v);
}

static void kv_str(struct buf *b, const char *key, const char *v) {
    put_str(b, key);
    put_u32(b, T_STR);
    put_str(b, v);
}

static void tensor_info(struct buf *b, const char *name, uint32_t n_dims, const uint64_t *ne,
                        uint32_t type, uint64_t offset) {
    put_str(b, name);
    put_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++)
        put_u64(b, ne[d]);
    put_u32(b, type);
    put_u64(b, offset);
}

static void pad_to(struct buf *b, size_t align) {
    static const uint8_t zero[64];
    while (b->n % align)
        put(b, zero, 1);
}

static void put_zeros(struct buf *b, size_t n) {
    static const uint8_t zero[256];
    while (n) {
        size_t k = n < sizeof zero ? n : sizeof zero;
        put(b, zero, k);
        n -= k;
    }
}

#endif
