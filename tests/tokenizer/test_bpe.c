/* test_bpe.c: byte-level BPE beyond the shared test cases (test_vocab_files runs those): every
 * pre-tokenizer compiling and splitting, known splits, llama.cpp's reading of invalid UTF-8,
 * large inputs, and concurrent encoding. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <time.h>

#include "gguf/gguf.h"
#include "test.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/pretok.h"
#include "tokenizer/tokenize.h"
#include "tokenizer/vocab.h"
#include "vocab_cases.h"

static const char *const bpe_vocabs[] = {"deepseek-coder", "deepseek-llm", "falcon",
                                         "gpt-2",          "llama-bpe",    "mpt",
                                         "qwen2",          "refact",       "starcoder"};
#define N_VOCABS (sizeof bpe_vocabs / sizeof bpe_vocabs[0])

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static struct vocab *load_vocab(const char *name, struct ox_gguf **g) {
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", test_data_dir(), name);
    struct vocab *v = NULL;
    *g = NULL;
    enum ox_status s = gguf_open(path, true, g);
    CHECK_MSG(s == OX_OK, "%s: %s", path, ox_last_error());
    if (s == OX_OK) {
        s = vocab_load(*g, &v);
        CHECK_MSG(s == OX_OK, "%s: %s", path, ox_last_error());
    }
    return v;
}

/* Tokenize text; NULL-safe comparison helper for the tests below. */
static struct tok_list tokenize(const struct vocab *v, const char *text, size_t len) {
    struct tok_list out = {0};
    enum ox_status s = vocab_tokenize(v, text, len, false, false, &out);
    CHECK_MSG(s == OX_OK, "tokenize: %s", ox_last_error());
    return out;
}

static bool same_ids(const struct tok_list *a, const struct tok_list *b) {
    return a->n == b->n && (a->n == 0 || memcmp(a->ids, b->ids, a->n * sizeof *a->ids) == 0);
}

/* ---- large inputs ------------------------------------------------------------------------- */

/* 1 MB of one repeated unit, or of random bytes (unit NULL). */
static char *make_big(const char *unit, size_t size, size_t *len) {
    char *buf = malloc(size);
    size_t n = 0;
    if (!unit) {
        uint64_t x = 0x9E3779B97F4A7C15ull;
        for (; n < size; n++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            buf[n] = (char)(x >> 24);
        }
    } else {
        size_t u = strlen(unit);
        for (; n + u <= size; n += u)
            memcpy(buf + n, unit, u);
    }
    *len = n;
    return buf;
}

/* Hostile sizes: 1 MB on three vocabularies that cover the main regex families, 128 KB on the
 * rest (times are printed, not asserted: make bench measures speed; a blowup trips the ctest
 * timeout). */
static void test_large_inputs(const char *name, double *worst) {
    bool full = !strcmp(name, "llama-bpe") || !strcmp(name, "qwen2") ||
                !strcmp(name, "deepseek-llm");
    struct ox_gguf *g;
    struct vocab *v = load_vocab(name, &g);
    if (!v) {
        gguf_free(g);
        return;
    }
    const char *units[] = {"a", " ", "1", "\n", "\xe4\xb8\x80" /* U+4E00 */, "ab ", NULL};
    const char *labels[] = {"'a'", "' '", "'1'", "'\\n'", "U+4E00", "'ab '", "random"};
    printf("  %-16s", name);
    for (size_t k = 0; k < sizeof labels / sizeof labels[0]; k++) {
        size_t len;
        char *text = make_big(units[k], full ? 1u << 20 : 1u << 17, &len);
        double t0 = now_s();
        struct tok_list out = tokenize(v, text, len);
        double dt = now_s() - t0;
        CHECK_MSG(out.n > 0, "%s: %zu bytes of %s gave no tokens", name, len, labels[k]);
        *worst = dt > *worst ? dt : *worst;
        printf(" %s %.2fs", labels[k], dt);
        tok_list_free(&out);
        free(text);
    }
    printf("\n");
    vocab_free(v);
    gguf_free(g);
}

/* ---- pre-tokenizers ----------------------------------------------------------------------- */

static const char sample[] =
    "Hello World! It's 2024: we'RE testing 1234567 pieces... \t\n\n  x  \r\n"
    "\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c \xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5"
    "\xd1\x82 cafe\xcc\x81 \xf0\x9f\x98\x80\xe2\x80\x8d\xf0\x9f\x91\x8d <sentinel:12> "
    "IMGIMGABZ camelCaseWord \xe1\xa0\x8e \xc2\xa0"
    "end   ";

/* Every pre value compiles, and its pieces tile the text exactly, in order. */
static void test_all_pretokenizers(void) {
    size_t n = pretok_n_names();
    CHECK(n >= 86);
    struct pretok_split_result res = {0};
    for (size_t i = 0; i < n; i++) {
        struct pretok_config cfg;
        struct pretok *p = NULL;
        CHECK_EQ(pretok_config_for(pretok_name(i), &cfg), OX_OK);
        enum ox_status s = pretok_create(&cfg, &p);
        CHECK_MSG(s == OX_OK, "%s: %s", pretok_name(i), ox_last_error());
        if (s != OX_OK)
            continue;
        s = pretok_split(p, sample, sizeof sample - 1, &res);
        CHECK_MSG(s == OX_OK, "%s: %s", pretok_name(i), ox_last_error());
        size_t pos = 0;
        bool tiled = s == OX_OK;
        for (size_t k = 0; tiled && k < res.n_spans; k++) {
            tiled = res.spans[k].off == pos && res.spans[k].len > 0;
            pos += res.spans[k].len;
        }
        CHECK_MSG(tiled && pos == res.text_len, "%s: pieces do not tile the text", cfg.name);
        pretok_free(p);
    }
    pretok_split_result_free(&res);
    struct pretok_config cfg;
    CHECK_EQ(pretok_config_for("no-such-pre", &cfg), OX_ERR_UNSUPPORTED);
    CHECK(strstr(ox_last_error(), "no-such-pre") != NULL);
    CHECK_EQ(pretok_config_for("", &cfg), OX_OK); /* llama.cpp: missing means default */
    CHECK_STR(cfg.kind, "default");
}

/* Split text with one pre value and compare with pieces joined by '|'. */
static void check_split(const char *pre, const char *text, const char *want) {
    struct pretok_config cfg;
    struct pretok *p = NULL;
    struct pretok_split_result res = {0};
    char got[1024] = "";
    if (pretok_config_for(pre, &cfg) == OX_OK && pretok_create(&cfg, &p) == OX_OK &&
        pretok_split(p, text, strlen(text), &res) == OX_OK) {
        size_t m = 0;
        for (size_t k = 0; k < res.n_spans && m + res.spans[k].len + 2 < sizeof got; k++) {
            if (k)
                got[m++] = '|';
            memcpy(got + m, res.text + res.spans[k].off, res.spans[k].len);
            m += res.spans[k].len;
        }
        got[m] = 0;
    }
    CHECK_MSG(strcmp(got, want) == 0, "%s: '%s' -> '%s', want '%s'", pre, text, got, want);
    pretok_split_result_free(&res);
    pretok_free(p);
}

static void test_known_splits(void) {
    check_split("gpt-2", "Hello world's  123", "Hello| world|'s| | 123");
    check_split("llama-bpe", "I'VE 12345 \n\n x", "I|'VE| |123|45| \n\n| x");
    check_split("qwen2", "ab12 ", "ab|1|2| ");
    /* U+180E is not white space for Hugging Face's regexes (PCRE2's \s says it is) */
    check_split("llama-bpe", "a\xe1\xa0\x8e b", "a|\xe1\xa0\x8e| b");
    /* zero-width matches split digit runs into groups of three from the right */
    check_split("superbpe", "x1234567y", "x|1|234|567|y");
    check_split("afmoe", "1234567", "1|234|567");
    /* several regexes in sequence, unmatched text kept */
    check_split("deepseek-coder", "ab\ncd 12", "ab|\n|cd| |1|2");
    check_split("gpt-4o", "camelCaseWord's", "camel|Case|Word's");
    check_split("kimi-k2",
                "\xe4\xbd\xa0\xe5\xa5\xbd"
                "abc",
                "\xe4\xbd\xa0\xe5\xa5\xbd|abc");
}

/* The one-pass digit splitters give the regexes' pieces (random strings over a pool of
 * digits of several kinds, letters, marks, '_' and separators). */
static void test_digit_splitters(void) {
    static const char *const pool[] = {"1",
                                       "2",
                                       "3",
                                       "9",
                                       "0",
                                       "\xd9\xa1" /* Arabic-Indic 1 */,
                                       "\xc2\xbd" /* 1/2: No, not Nd */,
                                       "\xe2\x85\xa3" /* IV */,
                                       "a",
                                       "Z",
                                       "_",
                                       "\xcc\x81" /* combining acute */,
                                       " ",
                                       ",",
                                       ".",
                                       "\n",
                                       "\xe4\xb8\x80"};
    static const char *const pres[] = {"afmoe", "tiny_aya", "superbpe"};
    uint64_t x = 0x2545F4914F6CDD1Dull;
    size_t mismatches = 0, total = 0;
    struct pretok_split_result a = {0}, b = {0};
    for (size_t k = 0; k < 3; k++) {
        struct pretok_config fast, slow;
        struct pretok *pf = NULL, *ps = NULL;
        pretok_config_for(pres[k], &fast);
        slow = fast;
        slow.regex_only = true;
        CHECK_EQ(pretok_create(&fast, &pf), OX_OK);
        CHECK_EQ(pretok_create(&slow, &ps), OX_OK);
        for (int t = 0; pf && ps && t < 4000; t++) {
            char text[256];
            size_t n = 0, parts = 1 + (size_t)(t % 24);
            for (size_t i = 0; i < parts; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                const char *u = pool[x % (sizeof pool / sizeof pool[0])];
                memcpy(text + n, u, strlen(u));
                n += strlen(u);
            }
            bool ok = pretok_split(pf, text, n, &a) == OX_OK &&
                      pretok_split(ps, text, n, &b) == OX_OK && a.n_spans == b.n_spans &&
                      memcmp(a.spans, b.spans, a.n_spans * sizeof *a.spans) == 0;
            mismatches += !ok;
            total++;
            if (!ok && mismatches < 5)
                fprintf(stderr, "%s: digit splitter differs on '%.*s'\n", pres[k], (int)n, text);
        }
        pretok_free(pf);
        pretok_free(ps);
    }
    CHECK_MSG(mismatches == 0, "%zu of %zu strings split differently", mismatches, total);
    pretok_split_result_free(&a);
    pretok_split_result_free(&b);
}

/* Every pre-tokenizer splits 256 KB of one repeated unit (or random bytes) quickly: no
 * pattern goes quadratic on long runs. */
static void test_pretok_long_runs(void) {
    static const char *const units[] = {"a",  "A",         " ",  "1",   "\n",       "\xe4\xb8\x80",
                                        "aA", "e\xcc\x81", "'s", " \n", "\xc2\xa0", "!",
                                        NULL};
    size_t size = 256 << 10;
    struct pretok_split_result res = {0};
    double worst = 0;
    const char *worst_pre = "", *last_kind = "";
    for (size_t i = 0; i < pretok_n_names(); i++) {
        struct pretok_config cfg;
        struct pretok *p = NULL;
        pretok_config_for(pretok_name(i), &cfg);
        if (strcmp(cfg.kind, last_kind) == 0 || pretok_create(&cfg, &p) != OX_OK)
            continue;
        last_kind = cfg.kind;
        for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
            size_t n;
            char *text = make_big(units[u], size, &n);
            double t0 = now_s();
            CHECK_EQ(pretok_split(p, text, n, &res), OX_OK);
            double dt = now_s() - t0;
            if (dt > worst)
                worst = dt, worst_pre = cfg.kind;
            free(text);
        }
        pretok_free(p);
    }
    printf("pre-tokenizers on 256 KB runs: slowest %.2f s (%s)\n", worst, worst_pre);
    pretok_split_result_free(&res);
}

/* ---- invalid UTF-8 -------------------------------------------------------------------------- */

/* llama.cpp reads a bad byte as U+FFFD, an overlong form as its code point, and keeps a
 * surrogate's three bytes. */
static void test_invalid_utf8(void) {
    struct ox_gguf *g;
    struct vocab *v = load_vocab("gpt-2", &g);
    if (!v) {
        gguf_free(g);
        return;
    }
    static const struct {
        const char *bad, *same;
        size_t bad_len, same_len;
    } cases[] = {
        {"a\x80z", "a\xef\xbf\xbdz", 3, 5},
        {"\xe4\xb8", "\xef\xbf\xbd\xef\xbf\xbd", 2, 6}, /* truncated: each byte */
        {"x\xc1\x81y", "xAy", 4, 3},                    /* overlong 'A' */
        {"\xc0\xa0hi", " hi", 4, 3},                    /* overlong space joins the word */
        {"\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", 4, 12},
        {"\xff\xfe", "\xef\xbf\xbd\xef\xbf\xbd", 2, 6},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct tok_list a = tokenize(v, cases[i].bad, cases[i].bad_len);
        struct tok_list b = tokenize(v, cases[i].same, cases[i].same_len);
        CHECK_MSG(same_ids(&a, &b), "invalid UTF-8 case %zu", i);
        tok_list_free(&a);
        tok_list_free(&b);
    }
    /* a surrogate stays its three bytes: with GPT-2's vocab "\xed" "\xa0" "\x80" are the
     * byte tokens 169 (ED: "í"), 254 (A0) and 222 (80) */
    struct tok_list s = tokenize(v, "\xed\xa0\x80", 3);
    int32_t want[3] = {vocab_find(v, "\xc3\xad", 2), vocab_find(v, "\xc5\x82", 2),
                       vocab_find(v, "\xc4\xa2", 2)};
    CHECK_EQ(s.n, 3);
    if (s.n == 3)
        CHECK(memcmp(s.ids, want, sizeof want) == 0);
    tok_list_free(&s);
    vocab_free(v);
    gguf_free(g);
}

/* ---- unknown pre value at load -------------------------------------------------------------- */

static void test_unknown_pre(void) {
    struct gguf_writer *w = NULL;
    CHECK_EQ(gguf_writer_create(&w), OX_OK);
    const char *tokens[] = {"a", "b", "ab"};
    const char *merges[] = {"a b"};
    gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_writer_set_str(w, "tokenizer.ggml.pre", "gpt-neox-imaginary");
    gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", tokens, 3);
    gguf_writer_set_str_array(w, "tokenizer.ggml.merges", merges, 1);
    uint8_t *buf = NULL;
    size_t size = 0;
    CHECK_EQ(gguf_writer_write_mem(w, &buf, &size), OX_OK);
    struct ox_gguf *g = NULL;
    struct vocab *v = NULL;
    CHECK_EQ(gguf_parse(buf, size, &g), OX_OK);
    CHECK_EQ(vocab_load(g, &v), OX_ERR_UNSUPPORTED);
    CHECK(v == NULL);
    CHECK(strstr(ox_last_error(), "gpt-neox-imaginary") != NULL);
    gguf_free(g);
    /* the same vocabulary with a known pre value merges "a" "b" */
    gguf_writer_set_str(w, "tokenizer.ggml.pre", "gpt-2");
    free(buf);
    CHECK_EQ(gguf_writer_write_mem(w, &buf, &size), OX_OK);
    CHECK_EQ(gguf_parse(buf, size, &g), OX_OK);
    CHECK_EQ(vocab_load(g, &v), OX_OK);
    if (v) {
        struct tok_list out = tokenize(v, "abba", 4);
        int32_t want[] = {2, 1, 0}; /* ab b a */
        CHECK(out.n == 3 && memcmp(out.ids, want, sizeof want) == 0);
        tok_list_free(&out);
    }
    vocab_free(v);
    gguf_free(g);
    free(buf);
    gguf_writer_free(w);
}

/* ---- the byte map ------------------------------------------------------------------------ */

static void test_byte_map(void) {
    CHECK_EQ(byte_unicode_cpt(' '), 0x120);
    CHECK_EQ(byte_unicode_cpt('\n'), 0x10A);
    CHECK_EQ(byte_unicode_cpt('A'), 'A');
    CHECK_EQ(byte_unicode_cpt(0xAD), 0x143);
    CHECK_EQ(byte_unicode_cpt(0xFF), 0xFF);
    bool seen[0x144] = {false}, ok = true;
    for (int b = 0; b < 256; b++) {
        char enc[2];
        size_t n = byte_unicode_encode((uint8_t)b, enc), used = 0;
        uint32_t c = byte_unicode_cpt((uint8_t)b);
        ok &= c < 0x144 && !seen[c] && byte_unicode_decode(enc, n, &used) == b && used == n;
        if (c < 0x144)
            seen[c] = true;
    }
    CHECK(ok);
    size_t used;
    CHECK_EQ(byte_unicode_decode("\xc5\x84", 2, &used), -1); /* U+0144: outside the map */
    CHECK_EQ(byte_unicode_decode(" ", 1, &used), -1);        /* a raw space is not mapped */
}

/* ---- threads ------------------------------------------------------------------------------ */

struct thread_job {
    const struct vocab *v;
    const char *text;
    size_t len;
    struct tok_list out;
    enum ox_status status;
};

static void *thread_main(void *arg) {
    struct thread_job *j = arg;
    for (int rep = 0; rep < 20 && j->status == OX_OK; rep++) {
        tok_list_free(&j->out);
        j->status = vocab_tokenize(j->v, j->text, j->len, false, false, &j->out);
    }
    return NULL;
}

static void test_threads(void) {
    struct ox_gguf *g;
    struct vocab *v = load_vocab("llama-bpe", &g);
    if (!v) {
        gguf_free(g);
        return;
    }
    struct tok_list ref = tokenize(v, sample, sizeof sample - 1);
    struct thread_job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (struct thread_job){v, sample, sizeof sample - 1, {0}, OX_OK};
        pthread_create(&th[i], NULL, thread_main, &jobs[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(jobs[i].status == OX_OK && same_ids(&jobs[i].out, &ref));
        tok_list_free(&jobs[i].out);
    }
    tok_list_free(&ref);
    vocab_free(v);
    gguf_free(g);
}

int main(void) {
    test_byte_map();
    test_all_pretokenizers();
    test_known_splits();
    test_digit_splitters();
    test_pretok_long_runs();
    test_invalid_utf8();
    test_unknown_pre();
    test_threads();
    printf("large inputs (1 MB or 128 KB):\n");
    double worst = 0;
    for (size_t i = 0; i < N_VOCABS; i++)
        test_large_inputs(bpe_vocabs[i], &worst);
    printf("slowest large input: %.2f s\n", worst);
    return test_finish("test_bpe");
}
