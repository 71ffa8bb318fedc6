/* fuzz_gguf.c: libFuzzer target for the GGUF reader, its accessors, dequantization and writer. */
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "quant/dtype.h"

/* Walk a value the way `oxidize info --json` does, through the public API. */
static void walk(const struct ox_gguf_value *v, int depth) {
    if (v->type != OX_GGUF_ARRAY || depth > 16)
        return;
    for (uint64_t i = 0; i < v->n && i < 64; i++) {
        struct ox_gguf_value e;
        if (ox_gguf_array_get(v, i, &e) != OX_OK)
            abort(); /* an in-range element of a parsed array must be readable */
        walk(&e, depth + 1);
    }
}

/* A file that parsed must survive writer -> reader unchanged in shape. */
static void roundtrip(const struct ox_gguf *g) {
    struct gguf_writer *w = NULL;
    if (gguf_writer_create(&w) != OX_OK)
        return;
    for (int64_t i = 0; i < g->n_kv; i++)
        if (gguf_writer_set(w, g->kv[i].key, &g->kv[i].value) != OX_OK)
            abort();
    for (int64_t i = 0; i < g->n_tensors; i++) {
        const struct gguf_tensor *t = &g->tensors[i];
        if (gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data) != OX_OK)
            abort();
    }
    uint8_t *buf = NULL;
    size_t n = 0;
    struct ox_gguf *g2 = NULL;
    if (gguf_writer_write_mem(w, &buf, &n) != OX_OK || gguf_parse(buf, n, &g2) != OX_OK ||
        g2->n_kv != g->n_kv || g2->n_tensors != g->n_tensors)
        abort();
    gguf_free(g2);
    free(buf);
    gguf_writer_free(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct ox_gguf *g = NULL;
    if (ox_gguf_open_buffer(data, size, &g) != OX_OK)
        return 0;
    for (int64_t i = 0; i < ox_gguf_n_kv(g); i++) {
        struct ox_gguf_value v;
        if (ox_gguf_value(g, i, &v) != OX_OK || ox_gguf_find_key(g, ox_gguf_key(g, i)) != i)
            abort();
        walk(&v, 0);
    }
    float out[512];
    for (int64_t i = 0; i < ox_gguf_n_tensors(g); i++) {
        struct ox_tensor_info t;
        if (ox_gguf_tensor(g, i, &t) != OX_OK)
            abort();
        /* dequantize the first blocks: hostile bytes must never crash a dequantizer */
        int64_t bs = ox_dtype_block_size(t.type);
        int64_t n = t.ne[0] < 512 / bs * bs ? t.ne[0] : 512 / bs * bs;
        if (n > 0 && ox_dequantize(t.type, t.data, out, n) != OX_OK)
            abort();
    }
    /* A valid file may ask for any power-of-two alignment; writing one padded to a 1 GiB
     * boundary is correct but takes seconds under ASan, which libFuzzer calls a hang. */
    if (ox_gguf_alignment(g) <= (1u << 20))
        roundtrip(g);
    ox_gguf_free(g);
    return 0;
}
