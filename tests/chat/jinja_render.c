/* jinja_render.c: renders template cases for jinja_diff.py. Reads cases from stdin, each as
 * "<bytes>\n<template>" then "<bytes>\n<context JSON>"; writes each result as "<bytes>\n" and
 * "OK:<output>" or "ERR:<message>". The engine's clock is fixed (jinja_diff.py's Jinja2 gets the
 * same time). */
#include <stdio.h>
#include <stdlib.h>

#include "chat/jinja_int.h"

/* The next length-prefixed chunk of stdin (malloc'd, NUL-terminated), or NULL at the end. */
static char *read_chunk(size_t *len) {
    unsigned long n = 0;
    if (scanf("%lu", &n) != 1 || getchar() != '\n' || n > (64ul << 20))
        return NULL;
    char *p = malloc(n + 1);
    if (!p || fread(p, 1, n, stdin) != n) {
        free(p);
        return NULL;
    }
    p[n] = '\0';
    *len = n;
    return p;
}

static void put_result(const char *tag, const char *text, size_t len) {
    printf("%zu\n%s", strlen(tag) + len, tag);
    fwrite(text, 1, len, stdout);
}

int main(void) {
    struct jinja_opts o = jinja_opts_default();
    o.now = 1768473000; /* 2026-01-15 10:30:00 UTC */
    size_t tlen = 0, clen = 0;
    char *tmpl;
    while ((tmpl = read_chunk(&tlen)) != NULL) {
        char *ctx = read_chunk(&clen);
        if (!ctx) {
            free(tmpl);
            return 1;
        }
        struct jtemplate *t = NULL;
        char *out = NULL;
        size_t out_len = 0;
        if (jinja_parse(tmpl, tlen, &t) != OX_OK ||
            jinja_render_json(t, ctx, clen, &o, &out, &out_len) != OX_OK) {
            const char *msg = ox_last_error();
            put_result("ERR:", msg, strlen(msg));
        } else {
            put_result("OK:", out, out_len);
        }
        free(out);
        jinja_free(t);
        free(tmpl);
        free(ctx);
    }
    return 0;
}
