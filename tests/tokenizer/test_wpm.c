/* test_wpm.c: the WordPiece encoder on pinned edge cases (llama.cpp's answers), its normalizer
 * defaults, hostile input and threads (the shared test cases run in test_vocab_files). */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "test.h"
#include "tokenizer/tokenize.h"
#include "tokenizer/vocab.h"
#include "vocab_cases.h"

#define VOCAB_FILE "ggml-vocab-bert-bge.gguf"
#define MiB        (1u << 20)
#define N_THREADS  4

static void print_ids(const char *label, const struct tok_list *out) {
    fprintf(stderr, "  %s:", label);
    for (size_t i = 0; i < out->n; i++)
        fprintf(stderr, " %d", out->ids[i]);
    fputc('\n', stderr);
}

/* Inputs beyond the reference files, with the ids llama.cpp's own WPM code gives (computed
 * from llama.cpp's algorithm over its Unicode tables): its quirks are part of the contract,
 * except where Hugging Face's tokenizers gives otherwise (test_hf_gold.c), and input
 * llama.cpp throws on. */
struct pinned {
    const char *what;
    const char *text;
    size_t len;
    bool lowercase, strip_accents;
    int32_t ids[12];
    size_t n;
};
#define PIN(what, lit, lc, sa, ...)                                                                \
    {                                                                                              \
        what, lit, sizeof(lit) - 1, lc, sa, {__VA_ARGS__},                                         \
            sizeof((int32_t[]){__VA_ARGS__}) / sizeof(int32_t)                                     \
    }

static const struct pinned pinned[] = {
    /* NFD makes a Hangul syllable its jamo, as BertNormalizer's does (tokenizers: these ids;
     * llama.cpp kept the leading consonant alone: 1469 29991 29999) */
    PIN("hangul", "\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4", true, true, 1469, 30006, 30021, 29991,
        30014, 30020, 29999, 30008),
    PIN("hangul unstripped", "\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4", true, false, 100),
    PIN("accents stripped", "Na\xc3\xafve CAF\xc3\x89 \xc3\x85ngstr\xc3\xb6m", true, true, 15743,
        7668, 17076, 15687),
    PIN("accents kept", "Na\xc3\xafve CAF\xc3\x89 \xc3\x85ngstr\xc3\xb6m", true, false, 100, 100,
        100),
    PIN("no lowercase", "Hello CAFE", false, true, 100, 100),
    /* bad bytes become U+FFFD (one byte each) and vanish; words around them survive */
    PIN("invalid utf-8",
        "\xff\xfe"
        "abc\xc3 d\xe2\x82",
        true, true, 5925, 1040),
    /* overlong forms decode to what they spell (C1 81 = 'A'; C0 A0 = a space) */
    PIN("overlong",
        "\xc1\x81\xc1\x82"
        "c \xed\xa0\x80x\xc0\xa0y",
        true, true, 5925, 1060, 1061),
    /* llama.cpp throws re-encoding these; here they drop like any invalid byte */
    PIN("past U+10FFFF",
        "a\xf4\x90\x80\x80"
        "b\xf7\xbf\xbf\xbf",
        true, true, 11113),
    /* NUL, format characters (ZWSP, BOM) drop; NEL (U+0085) is a space */
    PIN("controls",
        "\0a\0b\xc2\x85"
        "c\xe2\x80\x8b"
        "d\xef\xbb\xbf"
        "e",
        true, true, 11113, 3729, 2063),
    /* a U+2581 in the text acts as a word-start marker inside the word, as in llama.cpp */
    PIN("marker in text",
        "foo\xe2\x96\x81"
        "bar",
        true, true, 29379, 3347),
    PIN("brackets split", "unaffable [UNK] ##ing", true, true, 14477, 20961, 3468, 1031, 4895, 2243,
        1033, 1001, 1001, 13749),
};

static void check_pinned(struct vocab *v) {
    const bool lc = v->normalizer_lowercase, sa = v->normalizer_strip_accents;
    for (size_t i = 0; i < sizeof pinned / sizeof pinned[0]; i++) {
        const struct pinned *p = &pinned[i];
        struct tok_list out = {0};
        v->normalizer_lowercase = p->lowercase;
        v->normalizer_strip_accents = p->strip_accents;
        enum ox_status st = vocab_tokenize(v, p->text, p->len, false, false, &out);
        bool ok =
            st == OX_OK && out.n == p->n && memcmp(out.ids, p->ids, p->n * sizeof(int32_t)) == 0;
        CHECK_MSG(ok, "pinned case '%s'", p->what);
        if (!ok)
            print_ids("got", &out);
        tok_list_free(&out);
    }
    v->normalizer_lowercase = lc;
    v->normalizer_strip_accents = sa;

    struct tok_list out = {0};
    CHECK_EQ(vocab_tokenize(v, "", 0, false, false, &out), OX_OK);
    CHECK_EQ(out.n, 0);
    CHECK_EQ(vocab_tokenize(v, "hello", 5, true, false, &out), OX_OK); /* [CLS] hello [SEP] */
    CHECK(out.n == 3 && out.ids[0] == 101 && out.ids[1] == 7592 && out.ids[2] == 102);
    tok_list_free(&out);
}

/* With no unknown token, an unmatchable word is an error, not a bogus id. */
static void check_no_unk(struct vocab *v) {
    const int32_t unk = v->unk;
    struct tok_list out = {0};
    v->unk = -1;
    CHECK_EQ(vocab_tokenize(v, "\xf0\x9f\x9a\x80", 4, false, false, &out), OX_ERR_UNSUPPORTED);
    v->unk = unk;
    tok_list_free(&out);
}

/* 1 MiB of one character repeated (one enormous word, or a million one-character words)
 * and 1 MiB of random bytes: must finish quickly and in bounds (ASan run in CI). */
static void check_hostile(const struct vocab *v) {
    static const char *const units[] = {"a", "\xc3\xa9", "!", "\xe4\xb8\xad", " ", "\xcc\x81"};
    char *buf = malloc(MiB);
    CHECK(buf != NULL);
    if (!buf)
        return;
    for (size_t u = 0; u <= sizeof units / sizeof units[0]; u++) {
        uint64_t x = 0x9E3779B97F4A7C15u;
        for (size_t i = 0; i < MiB; i++) {
            if (u == sizeof units / sizeof units[0]) { /* the last run: xorshift bytes */
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                buf[i] = (char)(x >> 32);
            } else {
                buf[i] = units[u][i % strlen(units[u])];
            }
        }
        size_t len = u < sizeof units / sizeof units[0] ? MiB - MiB % strlen(units[u]) : MiB;
        struct tok_list out = {0};
        CHECK_EQ(vocab_tokenize(v, buf, len, false, false, &out), OX_OK);
        if (u == 2) /* every '!' is its own word */
            CHECK(out.n == MiB && out.ids[0] == 999 && out.ids[MiB - 1] == 999);
        if (u == 4 || u == 5) /* only spaces / only stripped accents: nothing */
            CHECK_EQ(out.n, 0);
        printf("wpm: 1 MiB hostile run %zu: %zu tokens\n", u, out.n);
        tok_list_free(&out);
    }
    free(buf);
}

/* Threads share one vocab; each tokenizes the same text and must get the serial answer. */
struct job {
    const struct vocab *v;
    const char *text;
    size_t len;
    const struct tok_list *want;
    bool same;
};

static void *run_job(void *arg) {
    struct job *j = arg;
    j->same = true;
    for (int rep = 0; rep < 4 && j->same; rep++) {
        struct tok_list out = {0};
        j->same = vocab_tokenize(j->v, j->text, j->len, false, false, &out) == OX_OK &&
                  out.n == j->want->n &&
                  memcmp(out.ids, j->want->ids, out.n * sizeof(int32_t)) == 0;
        tok_list_free(&out);
    }
    return NULL;
}

static void check_threads(const struct vocab *v, const char *text, size_t len) {
    struct tok_list want = {0};
    CHECK_EQ(vocab_tokenize(v, text, len, false, false, &want), OX_OK);
    struct job jobs[N_THREADS];
    pthread_t th[N_THREADS];
    for (int t = 0; t < N_THREADS; t++) {
        jobs[t] = (struct job){v, text, len, &want, false};
        CHECK(pthread_create(&th[t], NULL, run_job, &jobs[t]) == 0);
    }
    for (int t = 0; t < N_THREADS; t++) {
        pthread_join(th[t], NULL);
        CHECK_MSG(jobs[t].same, "thread %d differs from the serial result", t);
    }
    tok_list_free(&want);
}

int main(void) {
    const char *dir = test_data_dir();
    char path[1200];
    snprintf(path, sizeof path, "%s/vocab/%s", dir, VOCAB_FILE);
    struct ox_gguf *g = NULL;
    struct vocab *v = NULL;
    CHECK_MSG(gguf_open(path, true, &g) == OX_OK, "%s", ox_last_error());
    if (g)
        CHECK_MSG(vocab_load(g, &v) == OX_OK, "%s", ox_last_error());
    if (!v)
        return test_finish("test_wpm");
    CHECK(v->type == VOCAB_WPM && v->ops == &vocab_wpm_ops && v->unk == 100);
    /* the file has no normalizer keys: llama.cpp then lowercases and strips accents */
    CHECK_MSG(v->normalizer_lowercase && v->normalizer_strip_accents,
              "normalizer flags must default to true (llama.cpp's normalizer_options)");

    check_pinned(v);
    check_no_unk(v);
    check_hostile(v);

    size_t text_len = 0;
    snprintf(path, sizeof path, "%s/text/kjv-revelation.txt", dir);
    char *text = test_read_file(path, &text_len);
    CHECK_MSG(text != NULL && text_len > 0, "missing %s", path);
    if (text) {
        check_threads(v, text, text_len);
    }
    free(text);
    vocab_free(v);
    gguf_free(g);
    return test_finish("test_wpm");
}
