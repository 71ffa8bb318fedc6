/* test_tokenizer_api.c: special-token parsing, BOS/EOS, token_to_piece, detokenize options, the
 * streaming decoder, and malformed vocabularies, through the public and loader APIs. */
#define _POSIX_C_SOURCE 200809L
#include <unistd.h>

#include "gguf/gguf.h"
#include "oxidize.h"
#include "test.h"
#include "tokenizer/vocab.h"

static struct ox_vocab *load(const char *name) {
    char path[2048];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", test_data_dir(), name);
    struct ox_vocab *v = NULL;
    CHECK_MSG(ox_vocab_load(path, &v) == OX_OK, "%s: %s", name, ox_last_error());
    return v;
}

static size_t tokenize(const struct ox_vocab *v, const char *text, ox_token *ids, size_t cap,
                       bool add_special, bool parse_special) {
    size_t n = 0;
    CHECK_EQ(ox_tokenize(v, text, strlen(text), ids, cap, &n, add_special, parse_special), OX_OK);
    return n;
}

static void check_spm(void) {
    struct ox_vocab *v = load("llama-spm");
    if (!v)
        return;
    ox_token ids[64];
    CHECK(!strcmp(ox_vocab_kind(v), "spm") && ox_vocab_bos(v) == 1 && ox_vocab_eos(v) == 2);
    CHECK(ox_vocab_add_bos(v) && !ox_vocab_add_eos(v) && ox_vocab_is_eog(v, 2));
    CHECK_EQ(ox_vocab_nl(v), 13); /* <0x0A> */
    size_t n = tokenize(v, "Hello world", ids, 64, true, false);
    CHECK(n == 3 && ids[0] == 1);
    /* control tokens in the text: plain text without parse_special, a token with it */
    n = tokenize(v, "a</s>b", ids, 64, false, true);
    CHECK(n >= 3 && ids[1] == 2);
    size_t n_plain = tokenize(v, "a</s>b", ids, 64, false, false);
    CHECK(n_plain > 3);
    for (size_t i = 0; i < n_plain; i++)
        CHECK(ids[i] != 2);
    /* the count is reported even when the buffer is too small */
    size_t need = 0;
    CHECK_EQ(ox_tokenize(v, "Hello world", 11, ids, 1, &need, true, false), OX_OK);
    CHECK_EQ(need, 3);
    /* pieces */
    char buf[64];
    CHECK_EQ(ox_token_to_piece(v, 13, buf, sizeof buf, 0, false), 1);
    CHECK(buf[0] == '\n');
    CHECK_EQ(ox_token_to_piece(v, 1, buf, sizeof buf, 0, false), 0); /* control, hidden */
    CHECK_EQ(ox_token_to_piece(v, 1, buf, sizeof buf, 0, true), 3);
    CHECK_EQ(ox_token_to_piece(v, -1, buf, sizeof buf, 0, true), -1);
    CHECK_EQ(ox_token_to_piece(v, ox_vocab_n_tokens(v), buf, sizeof buf, 0, true), -1);
    n = tokenize(v, "Hello world", ids, 64, true, false);
    /* as llama.cpp: the prefix space is dropped only from a first token that is text */
    int64_t m = ox_detokenize(v, ids, n, buf, sizeof buf, true, false);
    CHECK(m == 12 && !memcmp(buf, " Hello world", 12));
    m = ox_detokenize(v, ids, n, buf, sizeof buf, false, true);
    CHECK(m == 15 && !memcmp(buf, "<s> Hello world", 15));
    m = ox_detokenize(v, ids + 1, n - 1, buf, sizeof buf, false, false);
    CHECK(m == 11 && !memcmp(buf, "Hello world", 11));
    CHECK_EQ(ox_detokenize(v, ids, n, buf, 2, true, false), 12); /* snprintf rule */
    ox_vocab_free(v);
}

/* Multi-byte characters split over byte tokens come out whole, never in halves. */
static void check_stream(void) {
    struct ox_vocab *v = load("llama-spm");
    if (!v)
        return;
    const char *text = "\xf0\x9f\x9a\x80 rocket \xe4\xb8\xad\xe6\x96\x87";
    ox_token ids[64];
    size_t n = tokenize(v, text, ids, 64, false, false);
    struct ox_detok_stream *st = NULL;
    CHECK_EQ(ox_detok_stream_create(v, false, &st), OX_OK);
    char out[256];
    size_t total = 0;
    int held = 0;
    for (size_t i = 0; i < n; i++) {
        const char *piece;
        size_t len;
        CHECK_EQ(ox_detok_stream_push(st, ids[i], &piece, &len), OX_OK);
        /* every chunk handed out must itself be valid UTF-8 */
        for (size_t k = 0; k < len;) {
            unsigned char c = (unsigned char)piece[k];
            size_t need = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
            CHECK(k + need <= len);
            k += need;
        }
        held += len == 0;
        memcpy(out + total, piece, len);
        total += len;
    }
    const char *rest;
    size_t rest_len;
    CHECK_EQ(ox_detok_stream_flush(st, &rest, &rest_len), OX_OK);
    CHECK_EQ(rest_len, 0);
    CHECK(held > 0); /* the rocket is 4 byte tokens: the first three are held back */
    CHECK(total == strlen(text) + 1 && out[0] == ' ' && !memcmp(out + 1, text, strlen(text)));
    CHECK_EQ(ox_detok_stream_push(st, -5, &rest, &rest_len), OX_ERR_INVALID_ARG);
    ox_detok_stream_free(st);
    ox_vocab_free(v);
}

/* Rewrite a vocabulary file with one key replaced, to see the loader refuse it. */
static enum ox_status load_modified(const char *key, const struct gguf_value *value) {
    char path[2048], out[256];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-llama-spm.gguf", test_data_dir());
    snprintf(out, sizeof out, "/tmp/ox_test_vocab_%d.gguf", (int)getpid());
    struct ox_gguf *g = NULL;
    struct gguf_writer *w = NULL;
    CHECK_EQ(gguf_open(path, true, &g), OX_OK);
    CHECK_EQ(gguf_writer_create(&w), OX_OK);
    for (int64_t i = 0; g && i < g->n_kv; i++)
        gguf_writer_set(w, g->kv[i].key, &g->kv[i].value);
    gguf_writer_set(w, key, value);
    CHECK_EQ(gguf_writer_write_file(w, out), OX_OK);
    gguf_writer_free(w);
    gguf_free(g);
    struct ox_vocab *v = NULL;
    enum ox_status s = ox_vocab_load(out, &v);
    CHECK(s == OX_OK || v == NULL);
    ox_vocab_free(v);
    unlink(out);
    return s;
}

static void check_malformed(void) {
    uint8_t small[3] = {1, 2, 3};
    struct gguf_value u8_scores = {.type = OX_GGUF_ARRAY, .elem_type = OX_GGUF_UINT8, .n = 3,
                                   .data = small};
    CHECK_EQ(load_modified("tokenizer.ggml.scores", &u8_scores), OX_ERR_FORMAT);
    CHECK(strstr(ox_last_error(), "tokenizer.ggml.scores") != NULL);
    float f[2] = {0, 0};
    struct gguf_value short_scores = {.type = OX_GGUF_ARRAY, .elem_type = OX_GGUF_FLOAT32,
                                      .n = 2, .data = (const uint8_t *)f};
    CHECK_EQ(load_modified("tokenizer.ggml.scores", &short_scores), OX_ERR_FORMAT);
    CHECK_EQ(load_modified("tokenizer.ggml.token_type", &u8_scores), OX_ERR_FORMAT);
    struct gguf_value model = {.type = OX_GGUF_STRING, .n = 7, .data = (const uint8_t *)"unigram"};
    CHECK_EQ(load_modified("tokenizer.ggml.model", &model), OX_ERR_UNSUPPORTED);
    struct gguf_value tokens = {.type = OX_GGUF_ARRAY, .elem_type = OX_GGUF_INT32, .n = 2,
                                .data = (const uint8_t *)f};
    CHECK_EQ(load_modified("tokenizer.ggml.tokens", &tokens), OX_ERR_FORMAT);
    /* an out-of-range special id is ignored, not used (llama.cpp keeps the default) */
    uint32_t huge = 1u << 30;
    struct gguf_value bos = {.type = OX_GGUF_UINT32, .n = 1, .data = (const uint8_t *)&huge};
    CHECK_EQ(load_modified("tokenizer.ggml.bos_token_id", &bos), OX_OK);
    struct gguf_value add = {.type = OX_GGUF_UINT32, .n = 1, .data = (const uint8_t *)&huge};
    CHECK_EQ(load_modified("tokenizer.ggml.add_bos_token", &add), OX_ERR_FORMAT);
}

int main(void) {
    check_spm();
    check_stream();
    check_malformed();
    return test_finish("test_tokenizer_api");
}
