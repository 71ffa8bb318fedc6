/* test_spm.c: the SentencePiece-BPE encoder against llama.cpp's tokenizer test cases and a
 * naive reference encoder, hostile input (1 MB runs, invalid UTF-8) and concurrent use. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "gguf/gguf.h"
#include "test.h"
#include "tokenizer/tokenize.h"
#include "tokenizer/vocab.h"
#include "vocab_cases.h"

static const char *const spm_vocabs[] = {"ggml-vocab-llama-spm.gguf", "ggml-vocab-phi-3.gguf"};

static double now_s(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Does the tokenization of one case equal its expected line? Prints both when not. */
static bool case_matches(const struct vocab *v, const struct vocab_cases *c, size_t i) {
    struct tok_list got = {0};
    enum ox_status st = vocab_tokenize(v, c->text[i], c->len[i], false, false, &got);
    bool ok = st == OX_OK && vocab_case_matches(c->expect[i], got.ids, got.n);
    if (!ok) {
        fprintf(stderr, "case %zu '%.*s': expected [%s] got [", i, (int)c->len[i], c->text[i],
                c->expect[i]);
        for (size_t j = 0; j < got.n; j++)
            fprintf(stderr, " %d", got.ids[j]);
        fprintf(stderr, " ] (status %d)\n", (int)st);
    }
    tok_list_free(&got);
    return ok;
}

struct thread_job {
    const struct vocab *v;
    const struct vocab_cases *c;
    int failures;
};

static void *run_cases(void *arg) {
    struct thread_job *job = arg;
    for (int rep = 0; rep < 20; rep++) {
        for (size_t i = 0; i < job->c->n; i++)
            job->failures += !case_matches(job->v, job->c, i);
    }
    return NULL;
}

/* The same vocab from four threads at once must give the same (correct) answers. */
static void check_concurrent(const struct vocab *v, const struct vocab_cases *c) {
    pthread_t th[4];
    struct thread_job jobs[4];
    for (int t = 0; t < 4; t++) {
        jobs[t] = (struct thread_job){v, c, 0};
        CHECK(pthread_create(&th[t], NULL, run_cases, &jobs[t]) == 0);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        CHECK_EQ(jobs[t].failures, 0);
    }
}

/* Bytes the tokens stand for when decoded without the space escape: a byte token is one
 * byte, any other token its text. */
static size_t covered_bytes(const struct vocab *v, const struct tok_list *l) {
    size_t n = 0;
    for (size_t i = 0; i < l->n; i++)
        n += (v->tokens[l->ids[i]].attr & OX_TOKEN_ATTR_BYTE) ? 1 : v->tokens[l->ids[i]].len;
    return n;
}

/* Encode len bytes straight through the SPM encoder; checks success and that every input byte
 * is accounted for exactly once (times are printed; make bench measures speed). */
static void check_hostile(const struct vocab *v, const char *what, const char *text, size_t len) {
    struct tok_list out = {0};
    double t0 = now_s();
    enum ox_status st = v->ops->encode(v, text, len, &out);
    double dt = now_s() - t0;
    CHECK_MSG(st == OX_OK, "%s: %s", what, ox_last_error());
    CHECK_MSG(covered_bytes(v, &out) == len, "%s: tokens cover %zu of %zu bytes", what,
              covered_bytes(v, &out), len);
    printf("  %s: %zu bytes -> %zu tokens in %.1f ms\n", what, len, out.n, dt * 1e3);
    tok_list_free(&out);
}

static void check_hostile_inputs(const struct vocab *v) {
    size_t len = 1 << 20;
    char *buf = malloc(len);
    CHECK(buf != NULL);
    if (!buf)
        return;
    memset(buf, 'a', len);
    check_hostile(v, "1 MB of 'a'", buf, len);
    memset(buf, ' ', len);
    check_hostile(v, "1 MB of ' '", buf, len);
    for (size_t i = 0; i + 3 <= len; i += 3)
        memcpy(buf + i, "\xe2\x96\x81", 3); /* U+2581, the escaped space: merges deeply */
    check_hostile(v, "1 MB of U+2581", buf, len - len % 3);
    uint64_t x = 0x9e3779b97f4a7c15ull; /* fixed-seed xorshift: reproducible garbage */
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = (char)(x >> 32);
    }
    check_hostile(v, "1 MB of random bytes", buf, len);
    /* also through the dispatcher, which escapes spaces and splits special tokens */
    struct tok_list out = {0};
    CHECK(vocab_tokenize(v, buf, len, true, true, &out) == OX_OK);
    tok_list_free(&out);
    free(buf);
}

/* Invalid UTF-8 splits as llama.cpp splits it; pieces that are no token become byte tokens. */
static void check_byte_fallback(const struct vocab *v) {
    const char *cases[] = {"\xff", "\x80\x80", "\xe2", "\xf0\x9f", "a\xc3"};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        struct tok_list out = {0};
        CHECK(v->ops->encode(v, cases[c], strlen(cases[c]), &out) == OX_OK);
        size_t start = cases[c][0] == 'a'; /* "a" is a token by itself */
        CHECK_EQ(out.n, strlen(cases[c]));
        for (size_t i = start; i < out.n && i < strlen(cases[c]); i++) {
            char name[8];
            snprintf(name, sizeof name, "<0x%02X>", (unsigned char)cases[c][i]);
            CHECK_EQ(out.ids[i], vocab_find(v, name, strlen(name)));
        }
        tok_list_free(&out);
    }
}

/* The merge rule spelled out as plainly as possible, O(n^2): merge the adjacent pair whose
 * joined text is the highest-scoring token (leftmost on ties) until none is left; then each
 * piece is its token or, failing that, byte tokens. The oracle for the fast encoder. */
static void naive_encode(const struct vocab *v, const char *text, size_t len,
                         struct tok_list *out) {
    size_t *start = malloc((len + 1) * sizeof *start), k = 0; /* piece i: [start[i], start[i+1]) */
    for (size_t off = 0; off < len; k++) {
        unsigned char c = (unsigned char)text[off];
        size_t clen = c < 0xc0 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
        start[k] = off;
        off += clen < len - off ? clen : len - off;
    }
    start[k] = len;
    for (;;) {
        size_t best = k;
        float best_score = 0;
        for (size_t i = 0; i + 1 < k; i++) {
            int32_t id = vocab_find(v, text + start[i], start[i + 2] - start[i]);
            if (id >= 0 && (best == k || v->tokens[id].score > best_score))
                best = i, best_score = v->tokens[id].score;
        }
        if (best == k)
            break;
        memmove(&start[best + 1], &start[best + 2], (k - best - 1) * sizeof *start);
        k--;
    }
    for (size_t i = 0; i < k; i++) {
        int32_t id = vocab_find(v, text + start[i], start[i + 1] - start[i]);
        for (size_t j = start[i]; id < 0 && j < start[i + 1]; j++) {
            char name[8];
            snprintf(name, sizeof name, "<0x%02X>", (unsigned char)text[j]);
            tok_list_push(out, vocab_find(v, name, 6));
        }
        if (id >= 0)
            tok_list_push(out, id);
    }
    free(start);
}

/* Random strings made of token texts, escaped spaces and stray bytes (so merges chain and
 * compete): the fast encoder must agree with the naive one on every one. */
static void check_against_naive(const struct vocab *v) {
    uint64_t x = 0x2545f4914f6cdd1dull;
    char buf[512];
    int mismatches = 0;
    for (int iter = 0; iter < 3000; iter++) {
        size_t len = 0, want = 1 + (size_t)(iter % 200);
        while (len < want) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            const struct vocab_token *t = &v->tokens[(x >> 20) % (uint64_t)v->n_tokens];
            if ((x & 15) == 0)
                buf[len++] = (char)(x >> 8); /* any byte, often invalid UTF-8 */
            else if ((x & 15) < 4 && len + 3 <= sizeof buf)
                memcpy(buf + len, "\xe2\x96\x81", 3), len += 3;
            else if (t->len <= sizeof buf - len)
                memcpy(buf + len, t->text, t->len), len += t->len;
            else
                break;
        }
        struct tok_list fast = {0}, slow = {0};
        CHECK(v->ops->encode(v, buf, len, &fast) == OX_OK);
        naive_encode(v, buf, len, &slow);
        bool same = fast.n == slow.n && !memcmp(fast.ids, slow.ids, fast.n * sizeof *fast.ids);
        if (!same && mismatches++ < 3)
            fprintf(stderr, "naive mismatch on %zu bytes '%.*s'\n", len, (int)len, buf);
        tok_list_free(&fast);
        tok_list_free(&slow);
    }
    CHECK_EQ(mismatches, 0);
}

static void test_vocab(const char *name) {
    char base[1024];
    snprintf(base, sizeof base, "%s/vocab/%s", test_data_dir(), name);
    struct ox_gguf *g = NULL;
    struct vocab *v = NULL;
    CHECK_MSG(gguf_open(base, true, &g) == OX_OK, "%s: %s", name, ox_last_error());
    CHECK_MSG(g && vocab_load(g, &v) == OX_OK, "%s: %s", name, ox_last_error());
    struct vocab_cases c;
    bool have_cases = vocab_cases_load(base, &c);
    CHECK_MSG(have_cases, "%s: cannot read matching .inp/.out", name);
    if (v && have_cases) {
        CHECK(v->type == VOCAB_SPM);
        size_t pass = 0;
        for (size_t i = 0; i < c.n; i++)
            pass += case_matches(v, &c, i);
        CHECK_EQ(pass, c.n);
        printf("%s: %zu/%zu cases match\n", name, pass, c.n);
        check_concurrent(v, &c);
        check_byte_fallback(v);
        check_against_naive(v);
        check_hostile_inputs(v);
    }
    vocab_cases_free(&c);
    vocab_free(v);
    gguf_free(g);
}

int main(void) {
    for (size_t i = 0; i < sizeof spm_vocabs / sizeof *spm_vocabs; i++)
        test_vocab(spm_vocabs[i]);
    return test_finish("test_spm");
}
