/* test_gguf_malformed.c: hostile GGUF files, built here byte by byte, must be rejected cleanly. */
#include "gguf/gguf.h"
#include "gguf_builder.h"
#include "test.h"

static const uint64_t NE_8[] = {8};
static const uint64_t NE_32x2[] = {32, 2};

/* A valid file: 3 keys (one a string array), tensors "a" f32[8] and "b" q4_0[32,2]. */
static void valid_file(struct buf *b) {
    put_header(b, 3, 2, 3);
    kv_str(b, "general.architecture", "llama");
    kv_u32(b, "llama.block_count", 2);
    put_str(b, "tokenizer.ggml.tokens");
    put_u32(b, T_ARR);
    put_u32(b, T_STR);
    put_u64(b, 2);
    put_str(b, "hello");
    put_str(b, "world");
    tensor_info(b, "a", 1, NE_8, 0, 0);
    tensor_info(b, "b", 2, NE_32x2, 2, 32);
    pad_to(b, 32);
    put_zeros(b, 32 + 36);
    pad_to(b, 32);
}

/* Header + one tensor info with the given fields, then matching data. */
static void one_tensor(struct buf *b, const char *name, uint32_t n_dims, const uint64_t *ne,
                       uint32_t type, uint64_t offset, size_t data) {
    put_header(b, 3, 1, 0);
    tensor_info(b, name, n_dims, ne, type, offset);
    pad_to(b, 32);
    put_zeros(b, data);
}

#define CASE(fn) static void fn(struct buf *b)

CASE(empty_file) { (void)b; }
CASE(short_magic) { put(b, "GG", 2); }
CASE(bad_magic) { put(b, "GGUX", 4); put_u32(b, 3); put_u64(b, 0); put_u64(b, 0); }
CASE(version_0) { put_header(b, 0, 0, 0); }
CASE(version_1) { put_header(b, 1, 0, 0); }
CASE(version_4) { put_header(b, 4, 0, 0); }
CASE(version_swapped) { put_header(b, 0x03000000u, 0, 0); }
CASE(truncated_counts) { put(b, "GGUF", 4); put_u32(b, 3); put_u64(b, 0); put_u32(b, 0); }
CASE(huge_n_tensors) { put_header(b, 3, 1ull << 63, 0); }
CASE(huge_n_kv) { put_header(b, 3, 0, 1ull << 62); }
CASE(key_len_huge) { put_header(b, 3, 0, 1); put_u64(b, 1ull << 40); put_zeros(b, 32); }
CASE(key_len_past_eof) { put_header(b, 3, 0, 1); put_u64(b, 100); put(b, "general.x", 9); }
CASE(empty_key) { put_header(b, 3, 0, 1); kv_u32(b, "", 1); }
CASE(key_with_nul) { put_header(b, 3, 0, 1); put_u64(b, 3); put(b, "a\0b", 3); put_u32(b, T_U8); put(b, "x", 1); }
CASE(duplicate_key) { put_header(b, 3, 0, 2); kv_u32(b, "k", 1); kv_u32(b, "k", 2); }
CASE(value_type_99) { put_header(b, 3, 0, 1); put_str(b, "k"); put_u32(b, 99); put_u32(b, 0); }
CASE(value_type_neg) { put_header(b, 3, 0, 1); put_str(b, "k"); put_u32(b, 0xffffffffu); put_u32(b, 0); }
CASE(value_truncated) { put_header(b, 3, 0, 1); put_str(b, "k"); put_u32(b, T_U64); put_u32(b, 0); }
CASE(bool_value_2) { put_header(b, 3, 0, 1); put_str(b, "k"); put_u32(b, T_BOOL); put(b, "\2", 1); }
CASE(string_past_eof) { put_header(b, 3, 0, 1); put_str(b, "k"); put_u32(b, T_STR); put_u64(b, 1ull << 62); }
CASE(array_count_huge) {
    put_header(b, 3, 0, 1); put_str(b, "k"); put_u32(b, T_ARR); put_u32(b, T_U32);
    put_u64(b, 1ull << 40); put_u32(b, 0);
}
CASE(array_count_overflow) {
    put_header(b, 3, 0, 1); put_str(b, "k"); put_u32(b, T_ARR); put_u32(b, T_U64);
    put_u64(b, (1ull << 61) + 1); put_u64(b, 0);
}
CASE(str_array_past_eof) {
    put_header(b, 3, 0, 1); put_str(b, "k"); put_u32(b, T_ARR); put_u32(b, T_STR);
    put_u64(b, 1000); put_str(b, "only one");
}
CASE(array_bad_elem_type) {
    put_header(b, 3, 0, 1); put_str(b, "k"); put_u32(b, T_ARR); put_u32(b, 13); put_u64(b, 0);
}
CASE(arrays_nested_too_deep) {
    put_header(b, 3, 0, 1); put_str(b, "k"); put_u32(b, T_ARR);
    for (int i = 0; i < 40; i++) { put_u32(b, T_ARR); put_u64(b, 1); }
}
CASE(alignment_zero) { put_header(b, 3, 0, 1); kv_u32(b, "general.alignment", 0); }
CASE(alignment_48) { put_header(b, 3, 0, 1); kv_u32(b, "general.alignment", 48); }
CASE(alignment_i32) {
    put_header(b, 3, 0, 1); put_str(b, "general.alignment"); put_u32(b, T_I32); put_u32(b, 32);
}
CASE(alignment_2g_data_outside) {
    put_header(b, 3, 1, 1); kv_u32(b, "general.alignment", 1u << 31);
    tensor_info(b, "a", 1, NE_8, 0, 0); put_zeros(b, 64);
}
CASE(tensor_name_64) {
    one_tensor(b, "0123456789012345678901234567890123456789012345678901234567890123", 1, NE_8, 0, 0, 32);
}
CASE(tensor_name_empty) { one_tensor(b, "", 1, NE_8, 0, 0, 32); }
CASE(duplicate_tensor) {
    put_header(b, 3, 2, 0);
    tensor_info(b, "a", 1, NE_8, 0, 0);
    tensor_info(b, "a", 1, NE_8, 0, 32);
    pad_to(b, 32); put_zeros(b, 64);
}
CASE(n_dims_5) {
    static const uint64_t ne[] = {1, 1, 1, 1, 8};
    one_tensor(b, "a", 5, ne, 0, 0, 32);
}
CASE(n_dims_0) { one_tensor(b, "a", 0, NE_8, 0, 0, 32); }
CASE(dim_zero) { static const uint64_t ne[] = {4, 0}; one_tensor(b, "a", 2, ne, 0, 0, 32); }
CASE(dim_negative) { static const uint64_t ne[] = {UINT64_MAX}; one_tensor(b, "a", 1, ne, 0, 0, 32); }
CASE(elements_overflow) {
    static const uint64_t ne[] = {1ull << 32, 1ull << 32};
    one_tensor(b, "a", 2, ne, 0, 0, 32);
}
CASE(bytes_overflow) { static const uint64_t ne[] = {1ull << 62}; one_tensor(b, "a", 1, ne, 0, 0, 32); }
CASE(type_999) { one_tensor(b, "a", 1, NE_8, 999, 0, 32); }
CASE(type_removed_4) { one_tensor(b, "a", 1, NE_8, 4, 0, 32); }
CASE(type_negative) { one_tensor(b, "a", 1, NE_8, 0xffffffffu, 0, 32); }
CASE(q4_0_row_33) { static const uint64_t ne[] = {33}; one_tensor(b, "a", 1, ne, 2, 0, 64); }
CASE(first_offset_64) { one_tensor(b, "a", 1, NE_8, 0, 64, 128); }
CASE(offset_unaligned) { one_tensor(b, "a", 1, NE_8, 0, 1, 64); }
CASE(offset_overflow) { one_tensor(b, "a", 1, NE_8, 0, UINT64_MAX - 7, 64); }
CASE(same_offset_twice) {
    put_header(b, 3, 2, 0);
    tensor_info(b, "a", 1, NE_8, 0, 0);
    tensor_info(b, "b", 1, NE_8, 0, 0);
    pad_to(b, 32); put_zeros(b, 64);
}
CASE(data_past_eof) {
    static const uint64_t ne[] = {1024, 1024};
    one_tensor(b, "big", 2, ne, 0, 0, 0); /* 4 MiB tensor, the file ends at the header */
}
CASE(data_short_by_one) {
    one_tensor(b, "a", 1, NE_8, 0, 0, 31);
}
CASE(tensor_info_truncated) {
    /* enough bytes for the minimum tensor info, but 4 dimensions promised and 3 given */
    put_header(b, 3, 1, 0); put_str(b, "a"); put_u32(b, 4);
    put_u64(b, 8); put_u64(b, 1); put_u64(b, 1);
}

static const struct {
    const char *name;
    void (*build)(struct buf *b);
    const char *expect; /* a substring the error message must contain */
} cases[] = {
    {"empty file", empty_file, "magic"},
    {"short magic", short_magic, "magic"},
    {"bad magic", bad_magic, "bad magic"},
    {"version 0", version_0, "version 0"},
    {"version 1", version_1, "version 1"},
    {"version 4", version_4, "version 4"},
    {"byte-swapped version", version_swapped, "byte-swapped"},
    {"truncated counts", truncated_counts, "metadata count"},
    {"n_tensors 2^63", huge_n_tensors, "tensor count"},
    {"n_kv 2^62", huge_n_kv, "metadata count"},
    {"key length 2^40", key_len_huge, "key"},
    {"key past eof", key_len_past_eof, "key"},
    {"empty key", empty_key, "length 0"},
    {"key with NUL", key_with_nul, "NUL"},
    {"duplicate key", duplicate_key, "duplicate key 'k'"},
    {"value type 99", value_type_99, "99"},
    {"value type -1", value_type_neg, "4294967295"},
    {"value truncated", value_truncated, "scalar value"},
    {"bool 2", bool_value_2, "bool"},
    {"string past eof", string_past_eof, "string value"},
    {"array count 2^40", array_count_huge, "array of 1099511627776"},
    {"array bytes overflow", array_count_overflow, "past the end"},
    {"string array past eof", str_array_past_eof, "cannot fit"},
    {"array element type 13", array_bad_elem_type, "array element type 13"},
    {"arrays nested 40 deep", arrays_nested_too_deep, "nested"},
    {"alignment 0", alignment_zero, "power of two"},
    {"alignment 48", alignment_48, "power of two"},
    {"alignment as i32", alignment_i32, "expected u32"},
    {"alignment 2^31", alignment_2g_data_outside, "past the end"},
    {"tensor name 64 bytes", tensor_name_64, "name has length 64"},
    {"tensor name empty", tensor_name_empty, "name has length 0"},
    {"duplicate tensor", duplicate_tensor, "duplicate tensor name 'a'"},
    {"n_dims 5", n_dims_5, "5 dimensions"},
    {"n_dims 0", n_dims_0, "0 dimensions"},
    {"dimension 0", dim_zero, "dimension 1 is 0"},
    {"dimension -1", dim_negative, "dimension 0 is -1"},
    {"element count overflow", elements_overflow, "element count overflows"},
    {"byte size overflow", bytes_overflow, "byte size overflows"},
    {"type 999", type_999, "unknown type 999"},
    {"removed type 4", type_removed_4, "unknown type 4"},
    {"type -1", type_negative, "unknown type 4294967295"},
    {"q4_0 row of 33", q4_0_row_33, "block size 32"},
    {"first offset 64", first_offset_64, "offset 64, expected 0"},
    {"unaligned offset", offset_unaligned, "offset 1, expected 0"},
    {"offset near 2^64", offset_overflow, "expected 0"},
    {"two tensors at one offset", same_offset_twice, "offset 0, expected 32"},
    {"4 MiB tensor past eof", data_past_eof, "past the end"},
    {"data one byte short", data_short_by_one, "past the end"},
    {"tensor info truncated", tensor_info_truncated, "tensor dimension"},
};

static void check_rejected(const uint8_t *data, size_t n, const char *name, const char *expect) {
    struct ox_gguf *g = (struct ox_gguf *)1;
    enum ox_status s = gguf_parse(data, n, &g);
    CHECK_MSG(s == OX_ERR_FORMAT, "%s: status %s (%s)", name, ox_status_name(s), ox_last_error());
    CHECK_MSG(g == NULL, "%s: out not cleared", name);
    if (expect)
        CHECK_MSG(strstr(ox_last_error(), expect) != NULL, "%s: message '%s' lacks '%s'", name,
                  ox_last_error(), expect);
    if (s == OX_OK)
        gguf_free(g);
}

/* Every prefix of a valid file that cuts into its header or tensor data must fail, whichever
 * field the cut lands in; only the trailing padding after the last tensor may be missing. */
static void check_every_truncation(void) {
    struct buf b = {0};
    valid_file(&b);
    struct ox_gguf *g = NULL;
    CHECK_EQ(gguf_parse(b.d, b.n, &g), OX_OK);
    CHECK(g && g->n_tensors == 2 && g->n_kv == 3);
    size_t data_end = g ? (size_t)(g->data_offset + g->tensors[1].offset + g->tensors[1].n_bytes) : 0;
    gguf_free(g);
    int rejected = 0;
    for (size_t n = 0; n < b.n; n++) {
        /* a malloc'd copy of exactly n bytes, so ASan sees any read past the end */
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, b.d, n);
        g = NULL;
        enum ox_status s = gguf_parse(copy, n, &g);
        if (n < data_end)
            rejected += s == OX_ERR_FORMAT && g == NULL;
        else
            CHECK_MSG(s == OX_OK, "prefix %zu of %zu: %s", n, b.n, ox_last_error());
        gguf_free(g);
        free(copy);
    }
    CHECK_EQ(rejected, (long long)data_end);
    free(b.d);
}

/* Version 2 has the same layout as version 3 (v3 only added big-endian files): accepted. */
static void check_version_2(void) {
    struct buf b = {0};
    valid_file(&b);
    b.d[4] = 2;
    struct ox_gguf *g = NULL;
    CHECK_MSG(gguf_parse(b.d, b.n, &g) == OX_OK, "%s", ox_last_error());
    CHECK(g && g->version == 2 && g->n_tensors == 2);
    gguf_free(g);
    free(b.d);
}

int main(void) {
    size_t n_cases = sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < n_cases; i++) {
        struct buf b = {0};
        cases[i].build(&b);
        /* exact-size heap copy: reads past the end are ASan errors */
        uint8_t *copy = malloc(b.n ? b.n : 1);
        memcpy(copy, b.d ? b.d : (const uint8_t *)"", b.n);
        check_rejected(copy, b.n, cases[i].name, cases[i].expect);
        free(copy);
        free(b.d);
    }
    printf("%zu malformed cases\n", n_cases);
    check_every_truncation();
    check_version_2();
    return test_finish("test_gguf_malformed");
}
