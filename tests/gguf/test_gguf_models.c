/* test_gguf_models.c: every shared GGUF parses, round-trips through the writer byte for byte,
 * and a file with every value type survives write -> read. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "test.h"

/* Copy every key and tensor of g into a writer: the writer must reproduce the file exactly. */
static void check_roundtrip(const struct ox_gguf *g, const char *name) {
    struct gguf_writer *w = NULL;
    CHECK_EQ(gguf_writer_create(&w), OX_OK);
    for (int64_t i = 0; i < g->n_kv; i++)
        CHECK_EQ(gguf_writer_set(w, g->kv[i].key, &g->kv[i].value), OX_OK);
    for (int64_t i = 0; i < g->n_tensors; i++) {
        const struct gguf_tensor *t = &g->tensors[i];
        CHECK_EQ(gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data), OX_OK);
    }
    uint8_t *out = NULL;
    size_t n = 0;
    CHECK_EQ(gguf_writer_write_mem(w, &out, &n), OX_OK);
    /* vocab-only files may end before the padding of an empty data section */
    size_t expect = g->n_tensors ? g->size : (n < g->size ? n : g->size);
    CHECK_MSG(n >= expect && memcmp(out, g->buf, expect) == 0 && (g->n_tensors == 0 || n == g->size),
              "%s: round trip differs (%zu vs %zu bytes)", name, n, g->size);
    free(out);
    gguf_writer_free(w);
}

static int check_dir(const char *sub) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", test_data_dir(), sub);
    DIR *d = opendir(dir);
    CHECK_MSG(d != NULL, "cannot open %s", dir);
    if (!d)
        return 0;
    int n_files = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".gguf") != 0)
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct ox_gguf *g = NULL;
        enum ox_status s = gguf_open(path, n_files % 2 == 0, &g); /* mmap and read() paths */
        CHECK_MSG(s == OX_OK, "%s: %s", e->d_name, ox_last_error());
        if (s != OX_OK)
            continue;
        n_files++;
        CHECK(g->version == 3);
        const char *arch;
        uint64_t len_arch;
        CHECK_MSG(gguf_get_str(g, "general.architecture", &arch, &len_arch) == OX_OK ||
                      !strcmp(sub, "vocab"), "%s: %s", e->d_name, ox_last_error());
        check_roundtrip(g, e->d_name);
        gguf_free(g);
    }
    closedir(d);
    return n_files;
}

/* Typed accessors on a real model: right types succeed, wrong types fail with a message. */
static void check_accessors(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/llama-q4_k_m.gguf", test_data_dir());
    struct ox_gguf *g = NULL;
    CHECK_EQ(gguf_open(path, true, &g), OX_OK);
    if (!g)
        return;
    uint32_t u32 = 0;
    uint64_t u64 = 0;
    CHECK_EQ(gguf_get_u32(g, "llama.block_count", &u32), OX_OK);
    CHECK_EQ(u32, 2);
    CHECK_EQ(gguf_get_uint(g, "llama.embedding_length", 1u << 20, &u64), OX_OK);
    CHECK_EQ(u64, 256);
    CHECK_EQ(gguf_get_uint(g, "llama.embedding_length", 100, &u64), OX_ERR_FORMAT);
    float f;
    CHECK_EQ(gguf_get_f32(g, "llama.block_count", &f), OX_ERR_FORMAT);
    CHECK(strstr(ox_last_error(), "has type u32, expected f32") != NULL);
    CHECK_EQ(gguf_get_u32(g, "no.such.key", &u32), OX_ERR_FORMAT);
    CHECK(strstr(ox_last_error(), "missing") != NULL);
    const struct gguf_value *arr = NULL;
    CHECK_EQ(gguf_get_array(g, "tokenizer.ggml.scores", OX_GGUF_FLOAT32, &arr), OX_OK);
    CHECK(arr && arr->n == 2048);
    CHECK_EQ(gguf_get_array(g, "tokenizer.ggml.scores", OX_GGUF_UINT8, &arr), OX_ERR_FORMAT);
    CHECK(strstr(ox_last_error(), "array of f32, expected u8") != NULL);
    CHECK_EQ(gguf_get_array(g, "tokenizer.ggml.tokens", OX_GGUF_STRING, &arr), OX_OK);
    struct gguf_value tok;
    CHECK_EQ(gguf_array_elem(arr, 1, &tok), OX_OK);
    CHECK(tok.type == OX_GGUF_STRING && tok.n == 3 && memcmp(tok.data, "<s>", 3) == 0);
    CHECK_EQ(gguf_array_elem(arr, arr->n, &tok), OX_ERR_INVALID_ARG);
    const struct gguf_tensor *t = gguf_find_tensor(g, "blk.1.ffn_down.weight");
    CHECK(t && t->ne[0] == 768 && t->ne[1] == 256);
    CHECK(gguf_find_tensor(g, "blk.9.ffn_down.weight") == NULL);
    gguf_free(g);
}

/* The public API reads nested arrays through handles that stay valid after each call. */
static void check_public_nested(const uint8_t *buf, size_t n) {
    struct ox_gguf *g = NULL;
    CHECK_EQ(ox_gguf_open_buffer(buf, n, &g), OX_OK);
    struct ox_gguf_value nested, row, x, s;
    CHECK_EQ(ox_gguf_value(g, ox_gguf_find_key(g, "t.nested"), &nested), OX_OK);
    CHECK(nested.type == OX_GGUF_ARRAY && nested.elem_type == OX_GGUF_ARRAY && nested.n == 2);
    CHECK_EQ(ox_gguf_array_get(&nested, 0, &row), OX_OK);
    CHECK(row.type == OX_GGUF_ARRAY && row.elem_type == OX_GGUF_UINT32 && row.n == 2);
    CHECK_EQ(ox_gguf_array_get(&row, 1, &x), OX_OK);
    CHECK(x.type == OX_GGUF_UINT32 && x.v.u == 2);
    CHECK_EQ(ox_gguf_array_get(&row, 2, &x), OX_ERR_INVALID_ARG);
    CHECK_EQ(ox_gguf_array_get(&x, 0, &x), OX_ERR_INVALID_ARG); /* not an array */
    CHECK_EQ(ox_gguf_value(g, ox_gguf_find_key(g, "t.arr_str"), &row), OX_OK);
    CHECK_EQ(ox_gguf_array_get(&row, 2, &s), OX_OK);
    CHECK(s.type == OX_GGUF_STRING && s.n == 3 && memcmp(s.v.s, "ccc", 3) == 0);
    CHECK_EQ(ox_gguf_value(g, ox_gguf_find_key(g, "t.i64"), &x), OX_OK);
    CHECK(x.v.i == INT64_MIN);
    CHECK_EQ(ox_gguf_value(g, ox_gguf_find_key(g, "t.f32"), &x), OX_OK);
    CHECK(x.v.f == 0.25);
    CHECK(ox_gguf_key(g, 99) == NULL && ox_gguf_find_key(g, "nope") == -1);
    CHECK_EQ(ox_gguf_value(g, -1, &x), OX_ERR_INVALID_ARG);
    ox_gguf_free(g);
}

/* Every value type, nested arrays included, written and read back. */
static void check_all_value_types(void) {
    struct gguf_writer *w = NULL;
    CHECK_EQ(gguf_writer_create(&w), OX_OK);
    int8_t i8 = -5;
    uint16_t u16 = 65535;
    int16_t i16 = -32768;
    uint64_t u64 = UINT64_MAX;
    int64_t i64 = INT64_MIN;
    double f64 = 1e300;
    uint8_t u8 = 200;
    struct gguf_value v = {.type = OX_GGUF_UINT8, .n = 1, .data = &u8};
    CHECK_EQ(gguf_writer_set(w, "t.u8", &v), OX_OK);
    v = (struct gguf_value){.type = OX_GGUF_INT8, .n = 1, .data = (const uint8_t *)&i8};
    CHECK_EQ(gguf_writer_set(w, "t.i8", &v), OX_OK);
    v = (struct gguf_value){.type = OX_GGUF_UINT16, .n = 1, .data = (const uint8_t *)&u16};
    CHECK_EQ(gguf_writer_set(w, "t.u16", &v), OX_OK);
    v = (struct gguf_value){.type = OX_GGUF_INT16, .n = 1, .data = (const uint8_t *)&i16};
    CHECK_EQ(gguf_writer_set(w, "t.i16", &v), OX_OK);
    CHECK_EQ(gguf_writer_set_u32(w, "t.u32", 4000000000u), OX_OK);
    CHECK_EQ(gguf_writer_set_i32(w, "t.i32", -7), OX_OK);
    CHECK_EQ(gguf_writer_set_f32(w, "t.f32", 0.25f), OX_OK);
    CHECK_EQ(gguf_writer_set_bool(w, "t.bool", true), OX_OK);
    CHECK_EQ(gguf_writer_set_str(w, "t.str", "héllo"), OX_OK);
    v = (struct gguf_value){.type = OX_GGUF_UINT64, .n = 1, .data = (const uint8_t *)&u64};
    CHECK_EQ(gguf_writer_set(w, "t.u64", &v), OX_OK);
    v = (struct gguf_value){.type = OX_GGUF_INT64, .n = 1, .data = (const uint8_t *)&i64};
    CHECK_EQ(gguf_writer_set(w, "t.i64", &v), OX_OK);
    v = (struct gguf_value){.type = OX_GGUF_FLOAT64, .n = 1, .data = (const uint8_t *)&f64};
    CHECK_EQ(gguf_writer_set(w, "t.f64", &v), OX_OK);
    const float floats[3] = {1, 2, 3};
    CHECK_EQ(gguf_writer_set_array(w, "t.arr_f32", OX_GGUF_FLOAT32, floats, 3), OX_OK);
    const char *strs[] = {"a", "", "ccc"};
    CHECK_EQ(gguf_writer_set_str_array(w, "t.arr_str", strs, 3), OX_OK);
    /* [[1, 2], [3]]: an array of two u32 arrays */
    const uint32_t xs[] = {1, 2, 3};
    struct gguf_value inner[2] = {
        {.type = OX_GGUF_ARRAY, .elem_type = OX_GGUF_UINT32, .n = 2, .data = (const uint8_t *)xs},
        {.type = OX_GGUF_ARRAY, .elem_type = OX_GGUF_UINT32, .n = 1, .data = (const uint8_t *)(xs + 2)},
    };
    v = (struct gguf_value){.type = OX_GGUF_ARRAY, .elem_type = OX_GGUF_ARRAY, .n = 2, .elems = inner};
    CHECK_EQ(gguf_writer_set(w, "t.nested", &v), OX_OK);
    CHECK_EQ(gguf_writer_set_u32(w, "t.u32", 5), OX_OK); /* replace keeps the key's place */
    float data[64];
    for (int i = 0; i < 64; i++)
        data[i] = (float)i;
    const int64_t ne[2] = {16, 4};
    CHECK_EQ(gguf_writer_add_tensor(w, "w", OX_DTYPE_F32, 2, ne, data), OX_OK);
    CHECK_EQ(gguf_writer_add_tensor(w, "w", OX_DTYPE_F32, 2, ne, data), OX_ERR_INVALID_ARG);
    const int64_t bad[1] = {33};
    CHECK_EQ(gguf_writer_add_tensor(w, "q", OX_DTYPE_Q4_0, 1, bad, data), OX_ERR_INVALID_ARG);
    uint8_t *buf = NULL;
    size_t n = 0;
    CHECK_EQ(gguf_writer_write_mem(w, &buf, &n), OX_OK);
    gguf_writer_free(w);

    struct ox_gguf *g = NULL;
    CHECK_MSG(gguf_parse(buf, n, &g) == OX_OK, "%s", ox_last_error());
    if (g) {
        CHECK_EQ(g->n_kv, 15);
        CHECK_STR(g->kv[4].key, "t.u32");
        uint32_t u32 = 0;
        CHECK_EQ(gguf_get_u32(g, "t.u32", &u32), OX_OK);
        CHECK_EQ(u32, 5);
        CHECK_EQ(gguf_value_u64(gguf_find(g, "t.u64")), UINT64_MAX);
        CHECK(gguf_value_i64(gguf_find(g, "t.i64")) == INT64_MIN);
        CHECK(gguf_value_i64(gguf_find(g, "t.i8")) == -5);
        CHECK(gguf_value_f64(gguf_find(g, "t.f64")) == 1e300);
        const struct gguf_value *nested = gguf_find(g, "t.nested");
        struct gguf_value row, x;
        CHECK(nested && nested->n == 2);
        CHECK_EQ(gguf_array_elem(nested, 1, &row), OX_OK);
        CHECK_EQ(gguf_array_elem(&row, 0, &x), OX_OK);
        CHECK_EQ(gguf_value_u64(&x), 3);
        const struct gguf_tensor *t = gguf_find_tensor(g, "w");
        CHECK(t && t->n_bytes == 256 && memcmp(t->data, data, 256) == 0);
        gguf_free(g);
    }
    check_public_nested(buf, n);
    free(buf);
}

/* write_file goes through a temporary and a rename; a bad directory is a clean OX_ERR_IO. */
static void check_write_file(void) {
    struct gguf_writer *w = NULL;
    CHECK_EQ(gguf_writer_create(&w), OX_OK);
    CHECK_EQ(gguf_writer_set_str(w, "general.architecture", "llama"), OX_OK);
    CHECK_EQ(gguf_writer_set_u32(w, "general.alignment", 64), OX_OK);
    const float x[32] = {1, 2, 3};
    const int64_t ne[1] = {32};
    CHECK_EQ(gguf_writer_add_tensor(w, "x", OX_DTYPE_F32, 1, ne, x), OX_OK);
    char path[256];
    snprintf(path, sizeof path, "/tmp/ox_test_write_%d.gguf", (int)getpid());
    CHECK_MSG(gguf_writer_write_file(w, path) == OX_OK, "%s", ox_last_error());
    CHECK_EQ(gguf_writer_write_file(w, "/nonexistent-dir/x.gguf"), OX_ERR_IO);
    CHECK(strstr(ox_last_error(), "/nonexistent-dir/") != NULL);
    gguf_writer_free(w);
    struct ox_gguf *g = NULL;
    CHECK_MSG(gguf_open(path, true, &g) == OX_OK, "%s", ox_last_error());
    CHECK(g && g->alignment == 64 && g->data_offset % 64 == 0 && g->size % 64 == 0);
    CHECK(g && g->n_tensors == 1 && memcmp(g->tensors[0].data, x, sizeof x) == 0);
    gguf_free(g);
    unlink(path);
}

int main(void) {
    int n_models = check_dir("models");
    int n_vocab = check_dir("vocab");
    printf("parsed and round-tripped %d models and %d vocab files\n", n_models, n_vocab);
    CHECK(n_models >= 36);
    CHECK(n_vocab >= 10);
    check_accessors();
    check_all_value_types();
    check_write_file();
    return test_finish("test_gguf_models");
}
