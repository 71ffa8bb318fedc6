/* test_open_once.c: loading a model opens its file once (the vocabulary comes from the model's
 * own parsed GGUF, not a second open), and that borrowed vocabulary tokenizes as one loaded on
 * its own does, mapped or read into memory. */
#include <stdint.h>

#include "core/file.h"
#include "oxidize.h"
#include "test.h"

/* Tokens of text, or 0 (failed) tokens. */
static size_t tokens(const struct ox_vocab *v, const char *text, ox_token *out, size_t cap) {
    size_t n = 0;
    if (ox_tokenize(v, text, strlen(text), out, cap, &n, true, false) != OX_OK || n > cap)
        return 0;
    return n;
}

static void check_model(const char *name, bool use_mmap) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/%s", test_data_dir(), name);
    struct ox_model_params p = test_model_params();
    p.use_mmap = use_mmap;
    struct ox_model *m = NULL;
    uint64_t before = file_map_open_count();
    CHECK_MSG(ox_model_load(path, &p, &m) == OX_OK, "%s: %s", name, ox_last_error());
    if (!m)
        return;
    uint64_t opened = file_map_open_count() - before;
    CHECK_MSG(opened == 1, "%s (mmap %d): the model file was opened %llu times", name, use_mmap,
              (unsigned long long)opened);

    struct ox_vocab *own = NULL;
    before = file_map_open_count();
    CHECK_MSG(ox_vocab_load(path, &own) == OX_OK, "%s: %s", name, ox_last_error());
    CHECK_EQ(file_map_open_count() - before, 1);
    const char *text = "In the beginning God created the heaven and the earth.\n  Hello, world!";
    ox_token a[128], b[128];
    size_t na = tokens(ox_model_vocab(m), text, a, 128), nb = own ? tokens(own, text, b, 128) : 0;
    CHECK_MSG(na > 0 && na == nb && !memcmp(a, b, na * sizeof *a),
              "%s: %zu tokens through the model, %zu through ox_vocab_load", name, na, nb);
    CHECK_EQ(ox_vocab_n_tokens(ox_model_vocab(m)), own ? ox_vocab_n_tokens(own) : -1);
    ox_vocab_free(own);
    ox_model_free(m);
}

int main(void) {
    /* SPM (kjv) and byte-level BPE (gpt2): BPE's merges are read from the GGUF's metadata */
    const char *models[] = {"kjv-15m-q4_k_m.gguf", "gpt2-f16.gguf"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        check_model(models[i], true);
        check_model(models[i], false);
    }
    return test_finish("test_open_once");
}
