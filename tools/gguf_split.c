/* gguf_split.c: splits a GGUF model into parts as llama.cpp's llama-gguf-split does (NAME-00001-
 * of-0000N.gguf; the first part holds the metadata, every part split.no / split.count /
 * split.tensors.count and its share of the tensors, whole), so a model over what one file may
 * hold (the browser build: 2 GB per File is safe) loads from its first part. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "oxidize.h"

enum { MAX_PARTS = 9999 };

static int usage(void) {
    fprintf(stderr,
            "usage: gguf-split (--split-max-size N[M|G] | --split-max-tensors N) IN.gguf OUT\n"
            "  Writes OUT-00001-of-0000N.gguf ...: the metadata in the first part, the\n"
            "  tensors in order, each part up to N bytes of tensor data (or N tensors).\n");
    return 2;
}

/* "300M", "2G", "1000000": bytes; 0 when malformed. */
static uint64_t parse_size(const char *s) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || v == 0)
        return 0;
    uint64_t unit = !strcmp(end, "M") ? 1ull << 20 : !strcmp(end, "G") ? 1ull << 30 : !*end ? 1 : 0;
    return unit && v <= UINT64_MAX / unit ? v * unit : 0;
}

static enum ox_status set_u16(struct gguf_writer *w, const char *key, uint16_t v) {
    struct gguf_value val = {.type = OX_GGUF_UINT16, .n = 1, .data = (const uint8_t *)&v};
    return gguf_writer_set(w, key, &val);
}

/* Tensors [first, end) of src as part `part` (0-based) of n. */
static enum ox_status write_part(const struct ox_gguf *src, const char *out, int part, int n,
                                 int64_t first, int64_t end) {
    struct gguf_writer *w = NULL;
    OX_TRY(gguf_writer_create(&w));
    enum ox_status st = OX_OK;
    for (int64_t i = 0; part == 0 && i < src->n_kv && st == OX_OK; i++)
        if (strncmp(src->kv[i].key, "split.", 6) != 0)
            st = gguf_writer_set(w, src->kv[i].key, &src->kv[i].value);
    if (st == OX_OK)
        st = set_u16(w, "split.no", (uint16_t)part);
    if (st == OX_OK)
        st = set_u16(w, "split.count", (uint16_t)n);
    if (st == OX_OK)
        st = gguf_writer_set_i32(w, "split.tensors.count", (int32_t)src->n_tensors);
    for (int64_t i = first; i < end && st == OX_OK; i++) {
        const struct gguf_tensor *t = &src->tensors[i];
        st = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
    }
    char path[4096];
    if (st == OX_OK && (size_t)snprintf(path, sizeof path, "%s-%05d-of-%05d.gguf", out, part + 1,
                                        n) >= sizeof path)
        st = ox_fail(OX_ERR_INVALID_ARG, "gguf-split: the output name is too long");
    if (st == OX_OK)
        st = gguf_writer_write_file(w, path);
    if (st == OX_OK)
        printf("%s: %lld tensors\n", path, (long long)(end - first));
    gguf_writer_free(w);
    return st;
}

int main(int argc, char **argv) {
    if (argc != 5)
        return usage();
    uint64_t max_bytes = 0, max_tensors = 0;
    if (!strcmp(argv[1], "--split-max-size"))
        max_bytes = parse_size(argv[2]);
    else if (!strcmp(argv[1], "--split-max-tensors"))
        max_tensors = parse_size(argv[2]);
    if (!max_bytes && !max_tensors)
        return usage();
    struct ox_gguf *src = NULL;
    if (gguf_open(argv[3], true, &src) != OX_OK) {
        fprintf(stderr, "gguf-split: %s\n", ox_last_error());
        return 1;
    }
    if (gguf_find(src, "split.count")) { /* its other parts' tensors are not in this file */
        fprintf(stderr, "gguf-split: %s is a part of a split model already\n", argv[3]);
        gguf_free(src);
        return 1;
    }
    /* the cuts: a new part when the next tensor would pass the limit (a tensor never splits) */
    int64_t *cut = calloc(MAX_PARTS + 1, sizeof *cut);
    int n = 0;
    uint64_t bytes = 0, count = 0;
    for (int64_t i = 0; cut && i < src->n_tensors && n < MAX_PARTS; i++) {
        uint64_t b = src->tensors[i].n_bytes;
        if (count && (max_tensors ? count + 1 > max_tensors : bytes + b > max_bytes))
            cut[++n] = i, bytes = 0, count = 0;
        bytes += b, count++;
    }
    int status = 0;
    if (!cut || n >= MAX_PARTS) {
        fprintf(stderr, "gguf-split: more than %d parts\n", MAX_PARTS);
        status = 1;
    }
    if (!status) {
        cut[++n] = src->n_tensors;
        for (int p = 0; p < n && !status; p++)
            if (write_part(src, argv[4], p, n, cut[p], cut[p + 1]) != OX_OK) {
                fprintf(stderr, "gguf-split: %s\n", ox_last_error());
                status = 1;
            }
    }
    free(cut);
    gguf_free(src);
    return status;
}
