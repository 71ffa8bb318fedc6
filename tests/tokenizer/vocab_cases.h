/* vocab_cases.h: reads llama.cpp's test-tokenizer-0 files (<vocab>.inp / <vocab>.out) and
 * compares a tokenization with the expected ids. */
#ifndef OX_TEST_VOCAB_CASES_H
#define OX_TEST_VOCAB_CASES_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#define VOCAB_CASE_SEP  "\n__ggml_vocab_test__\n"
#define VOCAB_MAX_CASES 512

/* Inputs are separated by VOCAB_CASE_SEP (the file ends with one); the .out file has one line
 * of space-separated ids per input. */
struct vocab_cases {
    char *inp, *out;
    const char *text[VOCAB_MAX_CASES];
    size_t len[VOCAB_MAX_CASES];
    const char *expect[VOCAB_MAX_CASES];
    size_t n;
};

static inline bool vocab_cases_load(const char *base, struct vocab_cases *c) {
    char path[4096 + 8];
    size_t inp_len = 0, out_len = 0;
    memset(c, 0, sizeof *c);
    snprintf(path, sizeof path, "%s.inp", base);
    c->inp = test_read_file(path, &inp_len);
    snprintf(path, sizeof path, "%s.out", base);
    c->out = test_read_file(path, &out_len);
    if (!c->inp || !c->out)
        return false;
    for (size_t pos = 0; pos < inp_len && c->n < VOCAB_MAX_CASES; c->n++) {
        char *next = strstr(c->inp + pos, VOCAB_CASE_SEP);
        size_t end = next ? (size_t)(next - c->inp) : inp_len;
        c->text[c->n] = c->inp + pos;
        c->len[c->n] = end - pos;
        pos = next ? end + strlen(VOCAB_CASE_SEP) : inp_len;
    }
    size_t lines = 0;
    char *line = c->out;
    while (lines < c->n && *line) {
        char *nl = strchr(line, '\n');
        c->expect[lines++] = line;
        if (!nl)
            break;
        *nl = 0;
        line = nl + 1;
    }
    return lines == c->n;
}

static inline void vocab_cases_free(struct vocab_cases *c) {
    free(c->inp);
    free(c->out);
}

/* ids[0..n) equal the space-separated ids of line? */
static inline bool vocab_case_matches(const char *line, const int32_t *ids, size_t n) {
    const char *p = line;
    for (size_t i = 0; i < n; i++) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v != ids[i])
            return false;
        p = end;
    }
    while (*p == ' ' || *p == '\r')
        p++;
    return *p == 0;
}

#endif
