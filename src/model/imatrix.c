/* imatrix.c: reads llama.cpp importance-matrix files (GGUF and the legacy .dat format). */
#define _POSIX_C_SOURCE 200809L
#include "model/imatrix.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file.h"
#include "gguf/gguf.h"

static enum ox_status add_entry(struct imatrix *im, const char *name, size_t name_len, int64_t n,
                                struct imatrix_entry **out) {
    struct imatrix_entry *grown = realloc(im->entries, (im->n_entries + 1) * sizeof *grown);
    if (!grown)
        return ox_fail(OX_ERR_OOM, "imatrix: out of memory");
    im->entries = grown;
    struct imatrix_entry *e = &im->entries[im->n_entries];
    e->name = malloc(name_len + 1);
    e->values = malloc((size_t)n * sizeof(float));
    e->n = n;
    im->n_entries++; /* owned from here, even if an allocation failed */
    if (!e->name || !e->values)
        return ox_fail(OX_ERR_OOM, "imatrix: out of memory for %lld values", (long long)n);
    memcpy(e->name, name, name_len);
    e->name[name_len] = 0;
    *out = e;
    return OX_OK;
}

/* The quantizer uses these as weights: they must be finite (llama.cpp refuses them too). */
static enum ox_status check_finite(const struct imatrix_entry *e) {
    for (int64_t i = 0; i < e->n; i++)
        if (!isfinite(e->values[i]))
            return ox_fail(OX_ERR_FORMAT, "imatrix: entry '%s' has a non-finite value at %lld",
                           e->name, (long long)i);
    return OX_OK;
}

/* ---- GGUF format --------------------------------------------------------------------------- */

static const struct gguf_tensor *f32_tensor(const struct ox_gguf *g, const char *name) {
    const struct gguf_tensor *t = gguf_find_tensor(g, name);
    return t && t->type == OX_DTYPE_F32 ? t : NULL;
}

/* values = in_sum2 / count per expert row (1 where an expert never ran), as llama-quantize. */
static enum ox_status gguf_entry(struct imatrix *im, const struct ox_gguf *g, const char *base,
                                 size_t base_len) {
    char name[GGUF_MAX_NAME + 16];
    snprintf(name, sizeof name, "%.*s.counts", (int)base_len, base);
    const struct gguf_tensor *counts = f32_tensor(g, name);
    snprintf(name, sizeof name, "%.*s.in_sum2", (int)base_len, base);
    const struct gguf_tensor *sums = f32_tensor(g, name);
    int64_t n_counts = counts ? (int64_t)(counts->n_bytes / 4) : 0;
    int64_t n = sums ? (int64_t)(sums->n_bytes / 4) : 0;
    if (!sums || !counts || n_counts < 1 || n % n_counts != 0)
        return ox_fail(OX_ERR_FORMAT,
                       "imatrix: entry '%.*s' needs f32 tensors .in_sum2 and "
                       ".counts with matching sizes",
                       (int)base_len, base);
    struct imatrix_entry *e;
    OX_TRY(add_entry(im, base, base_len, n, &e));
    int64_t ne0 = n / n_counts;
    for (int64_t j = 0; j < n_counts; j++) {
        float c;
        memcpy(&c, counts->data + 4 * j, 4);
        if (!isfinite(c) || fabsf(c) > 0x1p62f)
            return ox_fail(OX_ERR_FORMAT, "imatrix: entry '%s' has a bad count", e->name);
        float count = (float)lroundf(c); /* counts are integers stored as floats */
        for (int64_t i = 0; i < ne0; i++) {
            float s;
            memcpy(&s, sums->data + 4 * (j * ne0 + i), 4);
            e->values[j * ne0 + i] = count > 0.0f ? s / count : 1.0f;
        }
    }
    return check_finite(e);
}

static enum ox_status gguf_metadata(struct imatrix *im, const struct ox_gguf *g) {
    const struct gguf_value *datasets = NULL;
    uint32_t chunk_count, chunk_size;
    /* llama-quantize requires the metadata: a file without it is not an imatrix file */
    OX_TRY(gguf_get_array(g, "imatrix.datasets", OX_GGUF_STRING, &datasets));
    OX_TRY(gguf_get_u32(g, "imatrix.chunk_count", &chunk_count));
    OX_TRY(gguf_get_u32(g, "imatrix.chunk_size", &chunk_size));
    im->chunk_count = chunk_count > INT32_MAX ? INT32_MAX : (int32_t)chunk_count;
    if (datasets->n > 0) {
        const struct gguf_value *d = &datasets->elems[0];
        im->dataset = strndup((const char *)d->data, (size_t)d->n);
        if (!im->dataset)
            return ox_fail(OX_ERR_OOM, "imatrix: out of memory");
    }
    return OX_OK;
}

static enum ox_status load_gguf(struct imatrix *im, const struct file_map *map) {
    struct ox_gguf *g;
    OX_TRY(gguf_parse(map->data, map->size, &g));
    enum ox_status s = gguf_metadata(im, g);
    const char *suffix = ".in_sum2";
    for (int64_t i = 0; s == OX_OK && i < g->n_tensors; i++) {
        const char *name = g->tensors[i].name;
        size_t len = strlen(name), k = strlen(suffix);
        if (len > k && strcmp(name + len - k, suffix) == 0)
            s = gguf_entry(im, g, name, len - k);
    }
    if (s == OX_OK && im->n_entries == 0)
        s = ox_fail(OX_ERR_FORMAT, "imatrix: the file has no entries");
    gguf_free(g);
    return s;
}

/* ---- legacy format: i32 n; n x {i32 len, name, i32 ncall, i32 nval, f32[nval]};
 *      optionally i32 chunk_count, i32 len, dataset ------------------------------------------ */

struct reader {
    const uint8_t *p;
    size_t left;
};

static bool read_i32(struct reader *r, int32_t *v) {
    if (r->left < 4)
        return false;
    memcpy(v, r->p, 4);
    r->p += 4;
    r->left -= 4;
    return true;
}

static enum ox_status legacy_entry(struct imatrix *im, struct reader *r, int32_t i) {
    int32_t len, ncall, nval;
    if (!read_i32(r, &len) || len < 1 || (size_t)len > r->left || len >= GGUF_MAX_NAME + 16)
        return ox_fail(OX_ERR_FORMAT, "imatrix: entry %d has a bad name length", i);
    const char *name = (const char *)r->p;
    if (memchr(name, 0, (size_t)len))
        return ox_fail(OX_ERR_FORMAT, "imatrix: entry %d name contains a NUL byte", i);
    r->p += len;
    r->left -= (size_t)len;
    if (!read_i32(r, &ncall) || !read_i32(r, &nval) || nval < 1 || (size_t)nval > r->left / 4)
        return ox_fail(OX_ERR_FORMAT, "imatrix: entry %d has a bad value count", i);
    struct imatrix_entry *e;
    OX_TRY(add_entry(im, name, (size_t)len, nval, &e));
    for (int32_t k = 0; k < nval; k++) {
        float s;
        memcpy(&s, r->p + 4 * (size_t)k, 4);
        /* stored as a running mean times the call count */
        e->values[k] = ncall > 0 ? s / (float)ncall : s;
    }
    r->p += 4 * (size_t)nval;
    r->left -= 4 * (size_t)nval;
    return check_finite(e);
}

static enum ox_status load_legacy(struct imatrix *im, const struct file_map *map) {
    struct reader r = {map->data, map->size};
    int32_t n;
    if (!read_i32(&r, &n) || n < 1 || (size_t)n > r.left / 13)
        return ox_fail(OX_ERR_FORMAT, "imatrix: no entries (neither GGUF nor the legacy format)");
    for (int32_t i = 0; i < n; i++)
        OX_TRY(legacy_entry(im, &r, i));
    int32_t chunks, len;
    if (read_i32(&r, &chunks)) {
        im->chunk_count = chunks;
        if (read_i32(&r, &len) && len > 0 && (size_t)len <= r.left) {
            im->dataset = strndup((const char *)r.p, (size_t)len);
            if (!im->dataset)
                return ox_fail(OX_ERR_OOM, "imatrix: out of memory");
        }
    }
    return OX_OK;
}

static enum ox_status build_index(struct imatrix *im) {
    for (size_t i = 0; i < im->n_entries; i++) {
        int64_t dup;
        const char *name = im->entries[i].name;
        OX_TRY(strmap_insert(&im->index, name, strlen(name), (int64_t)i, &dup));
        if (dup >= 0)
            return ox_fail(OX_ERR_FORMAT, "imatrix: duplicate entry '%s'", name);
    }
    return OX_OK;
}

enum ox_status imatrix_load(const char *path, struct imatrix *out) {
    memset(out, 0, sizeof *out);
    struct file_map map;
    OX_TRY(file_map_open(path, true, &map));
    bool is_gguf = map.size >= 4 && memcmp(map.data, GGUF_MAGIC, 4) == 0;
    enum ox_status s = is_gguf ? load_gguf(out, &map) : load_legacy(out, &map);
    file_map_close(&map);
    if (s == OX_OK)
        s = build_index(out);
    if (s != OX_OK)
        imatrix_free(out);
    return s;
}

void imatrix_free(struct imatrix *im) {
    for (size_t i = 0; i < im->n_entries; i++) {
        free(im->entries[i].name);
        free(im->entries[i].values);
    }
    free(im->entries);
    free(im->dataset);
    strmap_free(&im->index);
    memset(im, 0, sizeof *im);
}

const struct imatrix_entry *imatrix_find(const struct imatrix *im, const char *name) {
    int64_t i = strmap_find(&im->index, name, strlen(name));
    return i < 0 ? NULL : &im->entries[i];
}
