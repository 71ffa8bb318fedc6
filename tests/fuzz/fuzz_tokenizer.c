/* fuzz_tokenizer.c: libFuzzer target for tokenize -> detokenize on every shared vocabulary
 * (SPM, BPE with several pre-tokenizers, WordPiece), special-token parsing on and off. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oxidize.h"

static const char *const vocab_files[] = {
    "ggml-vocab-llama-spm.gguf", "ggml-vocab-phi-3.gguf",     "ggml-vocab-llama-bpe.gguf",
    "ggml-vocab-qwen2.gguf",     "ggml-vocab-gpt-2.gguf",     "ggml-vocab-falcon.gguf",
    "ggml-vocab-deepseek-coder.gguf", "ggml-vocab-deepseek-llm.gguf", "ggml-vocab-mpt.gguf",
    "ggml-vocab-starcoder.gguf", "ggml-vocab-refact.gguf",    "ggml-vocab-bert-bge.gguf",
};
#define N_VOCABS (sizeof vocab_files / sizeof vocab_files[0])
static struct ox_vocab *vocabs[N_VOCABS];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *dir = getenv("OX_TESTDATA");
    char path[4096];
    for (size_t i = 0; i < N_VOCABS; i++) {
        snprintf(path, sizeof path, "%s/vocab/%s", dir ? dir : "../shared/testdata",
                 vocab_files[i]);
        if (ox_vocab_load(path, &vocabs[i]) != OX_OK)
            abort(); /* a setup problem, not a finding */
    }
    return 0;
}

/* byte 0 picks the vocabulary and the flags; the rest is the text */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    const struct ox_vocab *v = vocabs[(data[0] & 0x0f) % N_VOCABS];
    bool add_special = data[0] & 0x10, parse_special = data[0] & 0x20;
    const char *text = (const char *)data + 1;
    size_t len = size - 1, n = 0;
    if (ox_tokenize(v, text, len, NULL, 0, &n, add_special, parse_special) != OX_OK)
        abort();
    ox_token *ids = malloc((n ? n : 1) * sizeof *ids);
    size_t n2 = 0;
    if (ox_tokenize(v, text, len, ids, n, &n2, add_special, parse_special) != OX_OK || n2 != n)
        abort();
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= ox_vocab_n_tokens(v))
            abort();
    int64_t need = ox_detokenize(v, ids, n, NULL, 0, data[0] & 0x40, data[0] & 0x80);
    char *out = malloc(need > 0 ? (size_t)need : 1);
    if (need < 0 || ox_detokenize(v, ids, n, out, (size_t)need, data[0] & 0x40,
                                  data[0] & 0x80) != need)
        abort();
    struct ox_detok_stream *st = NULL;
    const char *piece;
    size_t plen, total = 0;
    ox_detok_stream_create(v, false, &st);
    for (size_t i = 0; i < n; i++)
        if (ox_detok_stream_push(st, ids[i], &piece, &plen) == OX_OK)
            total += plen;
    ox_detok_stream_flush(st, &piece, &plen);
    ox_detok_stream_free(st);
    free(out);
    free(ids);
    return (int)(total & 0);
}
