/* gguf_split.c: a model split across files as llama.cpp's gguf-split writes them
 * (NAME-00001-of-00003.gguf, ...: the first part holds the metadata, each part its share of the
 * tensors, and every part split.no (from 0), split.count and split.tensors.count), opened as
 * one: the other parts' tensors are appended to the first's list, each pointing into its own
 * part's mapping, which stays open as long as the first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"

enum { MAX_SPLITS = 999 };

/* An integer key every part carries, or -1 when absent. */
static enum ox_status split_key(const struct ox_gguf *g, const char *key, int64_t *out) {
    *out = -1;
    if (!gguf_find(g, key))
        return OX_OK;
    uint64_t v;
    OX_TRY(gguf_get_uint(g, key, INT32_MAX, &v));
    *out = (int64_t)v;
    return OX_OK;
}

/* Part index (1-based) of count, named as the first part's path is. */
static enum ox_status part_path(const char *first, int index, int count, char *out, size_t cap) {
    size_t len = strlen(first);
    char tail[32];
    snprintf(tail, sizeof tail, "-%05d-of-%05d.gguf", 1, count);
    if (len < strlen(tail) || strcmp(first + len - strlen(tail), tail) != 0)
        return ox_fail(OX_ERR_FORMAT,
                       "gguf: %s is part 1 of a model split in %d files, but not named "
                       "NAME%s as the parts must be",
                       first, count, tail);
    if (len + 1 > cap)
        return ox_fail(OX_ERR_INVALID_ARG, "gguf: path too long");
    memcpy(out, first, len + 1);
    snprintf(out + len - strlen(tail), cap - (len - strlen(tail)), "-%05d-of-%05d.gguf", index,
             count);
    return OX_OK;
}

/* Part p (opened from path) checked against the split and its tensors appended to g's. */
static enum ox_status add_part(struct ox_gguf *g, struct ox_gguf *p, const char *path, int index,
                               int count) {
    int64_t no, n;
    OX_TRY(split_key(p, "split.no", &no));
    OX_TRY(split_key(p, "split.count", &n));
    if (no != index - 1 || n != count)
        return ox_fail(OX_ERR_FORMAT, "gguf: %s says it is part %lld of %lld, not %d of %d", path,
                       (long long)no + 1, (long long)n, index, count);
    struct gguf_tensor *t =
        realloc(g->tensors, (size_t)(g->n_tensors + p->n_tensors) * sizeof *t + 1);
    if (!t)
        return ox_fail(OX_ERR_OOM, "gguf: out of memory");
    g->tensors = t;
    for (int64_t i = 0; i < p->n_tensors; i++) {
        struct gguf_tensor *x = &p->tensors[i];
        int64_t existing;
        OX_TRY(strmap_insert(&g->tensor_index, x->name, strlen(x->name), g->n_tensors, &existing));
        if (existing >= 0)
            return ox_fail(OX_ERR_FORMAT, "gguf: tensor '%s' is in two parts of the split (%s)",
                           x->name, path);
        g->tensors[g->n_tensors++] = *x;
        x->name = NULL; /* the names move to g, which frees them */
    }
    p->n_tensors = 0;
    return OX_OK;
}

static enum ox_status open_parts(struct ox_gguf *g, const char *path, bool use_mmap) {
    int64_t no, count, total;
    OX_TRY(split_key(g, "split.no", &no));
    OX_TRY(split_key(g, "split.count", &count));
    OX_TRY(split_key(g, "split.tensors.count", &total));
    if (count <= 1)
        return OX_OK;
    if (no != 0)
        return ox_fail(OX_ERR_FORMAT,
                       "gguf: %s is part %lld of a split model: open part 1, which holds the "
                       "metadata",
                       path, (long long)no + 1);
    if (count > MAX_SPLITS)
        return ox_fail(OX_ERR_FORMAT, "gguf: split.count %lld is over %d", (long long)count,
                       MAX_SPLITS);
    g->parts = calloc((size_t)count - 1, sizeof *g->parts);
    if (!g->parts)
        return ox_fail(OX_ERR_OOM, "gguf: out of memory");
    for (int i = 2; i <= (int)count; i++) {
        char part[4096];
        OX_TRY(part_path(path, i, (int)count, part, sizeof part));
        struct ox_gguf *p = NULL;
        enum ox_status s = gguf_open(part, use_mmap, &p);
        if (s != OX_OK) {
            char why[512]; /* ox_fail writes where ox_last_error() reads */
            snprintf(why, sizeof why, "%s", ox_last_error());
            return ox_fail(s, "gguf: part %d of %lld of the split model: %s", i, (long long)count,
                           why);
        }
        g->parts[g->n_parts++] = p;
        OX_TRY(add_part(g, p, part, i, (int)count));
    }
    if (total >= 0 && total != g->n_tensors)
        return ox_fail(OX_ERR_FORMAT,
                       "gguf: the split model's parts hold %lld tensors, not the "
                       "%lld split.tensors.count says",
                       (long long)g->n_tensors, (long long)total);
    return OX_OK;
}

enum ox_status gguf_open_model(const char *path, bool use_mmap, struct ox_gguf **out) {
    OX_TRY(gguf_open(path, use_mmap, out));
    enum ox_status s = open_parts(*out, path, use_mmap);
    if (s != OX_OK) {
        gguf_free(*out);
        *out = NULL;
    }
    return s;
}
