/* test_imatrix.c: importance matrices in both llama.cpp formats, and their use by
 * ox_model_quantize (each tensor quantized with exactly its own normalised entry). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "model/imatrix.h"
#include "test.h"

#define COUNT 10.0f /* tokens each entry was collected over */

static char dir[256], f32_path[1024];

static uint32_t rng = 12345;
static float rnd(void) {
    rng = rng * 1664525u + 1013904223u;
    return (float)(rng >> 8) / 16777216.0f;
}

/* Writes an imatrix for every matrix of llama-f32 except token_embd (which llama.cpp's imatrix
 * never records: it is looked up, not multiplied). Sums are count x mean, as collected. */
static void write_imatrix(const char *gguf_path, const char *dat_path) {
    struct ox_gguf *m = NULL;
    CHECK_EQ(gguf_open(f32_path, true, &m), OX_OK);
    struct gguf_writer *w = NULL;
    CHECK_EQ(gguf_writer_create(&w), OX_OK);
    const char *ds[] = {"kjv-genesis.txt"};
    gguf_writer_set_str_array(w, "imatrix.datasets", ds, 1);
    gguf_writer_set_u32(w, "imatrix.chunk_count", 7);
    gguf_writer_set_u32(w, "imatrix.chunk_size", 512);
    FILE *dat = fopen(dat_path, "wb");
    int32_t n_entries = 0;
    fwrite(&n_entries, 4, 1, dat); /* patched below */
    static float sums[16][4096];
    static const float count = COUNT;
    int k = 0;
    for (int64_t i = 0; i < m->n_tensors && k < 16; i++) {
        const struct gguf_tensor *t = &m->tensors[i];
        if (t->n_dims != 2 || !strcmp(t->name, "token_embd.weight"))
            continue;
        for (int64_t c = 0; c < t->ne[0]; c++)
            sums[k][c] = COUNT * (0.05f + rnd() * rnd() * 4.0f);
        char name[128];
        int64_t ne_s[1] = {t->ne[0]}, ne_c[1] = {1};
        snprintf(name, sizeof name, "%s.in_sum2", t->name);
        CHECK_EQ(gguf_writer_add_tensor(w, name, OX_DTYPE_F32, 1, ne_s, sums[k]), OX_OK);
        snprintf(name, sizeof name, "%s.counts", t->name);
        CHECK_EQ(gguf_writer_add_tensor(w, name, OX_DTYPE_F32, 1, ne_c, &count), OX_OK);
        int32_t len = (int32_t)strlen(t->name), ncall = 10, nval = (int32_t)t->ne[0];
        fwrite(&len, 4, 1, dat), fwrite(t->name, 1, (size_t)len, dat);
        fwrite(&ncall, 4, 1, dat), fwrite(&nval, 4, 1, dat), fwrite(sums[k], 4, (size_t)nval, dat);
        n_entries++, k++;
    }
    int32_t chunks = 7, dlen = 15;
    fwrite(&chunks, 4, 1, dat), fwrite(&dlen, 4, 1, dat), fwrite(ds[0], 1, 15, dat);
    fseek(dat, 0, SEEK_SET);
    fwrite(&n_entries, 4, 1, dat);
    fclose(dat);
    CHECK_MSG(gguf_writer_write_file(w, gguf_path) == OX_OK, "%s", ox_last_error());
    gguf_writer_free(w);
    gguf_free(m);
}

/* Both formats load to the same normalised values and metadata. */
static void check_formats(const char *gguf_path, const char *dat_path) {
    struct imatrix a, b;
    CHECK_MSG(imatrix_load(gguf_path, &a) == OX_OK, "%s", ox_last_error());
    CHECK_MSG(imatrix_load(dat_path, &b) == OX_OK, "%s", ox_last_error());
    CHECK_EQ(a.n_entries, 15);
    CHECK_EQ(b.n_entries, a.n_entries);
    CHECK(a.chunk_count == 7 && b.chunk_count == 7);
    CHECK(a.dataset && b.dataset && !strcmp(a.dataset, "kjv-genesis.txt") &&
          !strcmp(b.dataset, a.dataset));
    int same = 0;
    for (size_t i = 0; i < a.n_entries; i++) {
        const struct imatrix_entry *e = imatrix_find(&b, a.entries[i].name);
        same += e && e->n == a.entries[i].n &&
                !memcmp(e->values, a.entries[i].values, (size_t)e->n * sizeof(float));
    }
    CHECK_EQ(same, (long long)a.n_entries);
    imatrix_free(&a);
    imatrix_free(&b);
}

/* Each quantized tensor must equal ox_quantize with its own entry; some must differ from the
 * plain quantization, or the imatrix was ignored. */
static void check_quantize_with(const char *imatrix_path) {
    char out[1024], plain[1024];
    snprintf(out, sizeof out, "%s/imx.gguf", dir);
    snprintf(plain, sizeof plain, "%s/plain.gguf", dir);
    struct ox_quantize_params p = ox_quantize_params_default();
    p.imatrix_path = imatrix_path;
    struct ox_quantize_result r;
    CHECK_MSG(ox_model_quantize(f32_path, out, &p, &r) == OX_OK, "%s", ox_last_error());
    CHECK_EQ(r.n_imatrix_entries, 15);
    p.imatrix_path = NULL;
    CHECK(ox_model_quantize(f32_path, plain, &p, NULL) == OX_OK);
    struct ox_gguf *in = NULL, *q = NULL, *pq = NULL;
    struct imatrix im;
    CHECK_EQ(imatrix_load(imatrix_path, &im), OX_OK);
    CHECK_EQ(gguf_open(f32_path, true, &in), OX_OK);
    CHECK_EQ(gguf_open(out, true, &q), OX_OK);
    CHECK_EQ(gguf_open(plain, true, &pq), OX_OK);
    const char *s;
    uint64_t len;
    uint32_t n = 0;
    CHECK(gguf_get_str(q, "quantize.imatrix.file", &s, &len) == OX_OK &&
          len == strlen(imatrix_path) && !memcmp(s, imatrix_path, len));
    CHECK(gguf_get_str(q, "quantize.imatrix.dataset", &s, &len) == OX_OK && len == 15);
    CHECK(gguf_get_u32(q, "quantize.imatrix.entries_count", &n) == OX_OK && n == 15);
    CHECK(gguf_get_u32(q, "quantize.imatrix.chunks_count", &n) == OX_OK && n == 7);
    int matched = 0, differ = 0;
    static uint8_t buf[1 << 20];
    for (int64_t i = 0; i < q->n_tensors; i++) {
        const struct gguf_tensor *t = &q->tensors[i], *src = gguf_find_tensor(in, t->name);
        const struct imatrix_entry *e = imatrix_find(&im, t->name);
        if (!e || t->type == OX_DTYPE_F32 || t->n_bytes > sizeof buf)
            continue;
        CHECK_EQ(ox_quantize(t->type, (const float *)src->data, buf, t->ne[1], t->ne[0],
                             e->values), OX_OK);
        matched += memcmp(buf, t->data, t->n_bytes) == 0;
        differ += memcmp(t->data, gguf_find_tensor(pq, t->name)->data, t->n_bytes) != 0;
    }
    CHECK_EQ(matched, 15);
    CHECK(differ >= 10);
    imatrix_free(&im);
    gguf_free(in), gguf_free(q), gguf_free(pq);
    unlink(out), unlink(plain);
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    fwrite(p, 1, n, f);
    fclose(f);
}

static void check_malformed(void) {
    char bad[1024];
    snprintf(bad, sizeof bad, "%s/bad.imatrix", dir);
    struct imatrix im;
    const int32_t trunc[] = {3, 5}; /* 3 entries promised, a name length, then nothing */
    write_bytes(bad, trunc, sizeof trunc);
    CHECK_EQ(imatrix_load(bad, &im), OX_ERR_FORMAT);
    const int32_t nval0[] = {1, 1, 0x41, 1, 0}; /* an entry of zero values */
    write_bytes(bad, nval0, sizeof nval0);
    CHECK_EQ(imatrix_load(bad, &im), OX_ERR_FORMAT);
    /* one entry "A" with one value, NaN */
    const int32_t one = 1;
    const float nan_value = NAN;
    uint8_t legacy[4 + 4 + 1 + 4 + 4 + 4];
    memcpy(legacy, &one, 4), memcpy(legacy + 4, &one, 4), legacy[8] = 'A';
    memcpy(legacy + 9, &one, 4), memcpy(legacy + 13, &one, 4), memcpy(legacy + 17, &nan_value, 4);
    write_bytes(bad, legacy, sizeof legacy);
    CHECK_EQ(imatrix_load(bad, &im), OX_ERR_FORMAT);
    CHECK(strstr(ox_last_error(), "non-finite") != NULL);
    /* a GGUF without the imatrix keys is not an imatrix */
    char model[1024];
    snprintf(model, sizeof model, "%s/models/llama-q4_0.gguf", test_data_dir());
    CHECK_EQ(imatrix_load(model, &im), OX_ERR_FORMAT);
    CHECK(strstr(ox_last_error(), "imatrix.datasets") != NULL);
    CHECK_EQ(imatrix_load("/nonexistent.imatrix", &im), OX_ERR_IO);
}

/* An entry whose length does not fit its tensor is an error, not a silent skip. */
static void check_wrong_size(void) {
    char path[1024], out[1024];
    snprintf(path, sizeof path, "%s/wrong.dat", dir);
    snprintf(out, sizeof out, "%s/wrong.gguf", dir);
    const char *name = "blk.0.attn_q.weight";
    int32_t n = 1, len = (int32_t)strlen(name), ncall = 1, nval = 100;
    float vals[100];
    for (int i = 0; i < 100; i++)
        vals[i] = 1.0f;
    FILE *f = fopen(path, "wb");
    fwrite(&n, 4, 1, f), fwrite(&len, 4, 1, f), fwrite(name, 1, (size_t)len, f);
    fwrite(&ncall, 4, 1, f), fwrite(&nval, 4, 1, f), fwrite(vals, 4, 100, f);
    fclose(f);
    struct ox_quantize_params p = ox_quantize_params_default();
    p.imatrix_path = path;
    CHECK_EQ(ox_model_quantize(f32_path, out, &p, NULL), OX_ERR_FORMAT);
    CHECK(strstr(ox_last_error(), "has 100 values, the tensor needs 256") != NULL);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/ox_test_imatrix_%d", (int)getpid());
    mkdir(dir, 0755);
    snprintf(f32_path, sizeof f32_path, "%s/models/llama-f32.gguf", test_data_dir());
    char gguf_path[1024], dat_path[1024];
    snprintf(gguf_path, sizeof gguf_path, "%s/model.imatrix.gguf", dir);
    snprintf(dat_path, sizeof dat_path, "%s/model.imatrix.dat", dir);
    write_imatrix(gguf_path, dat_path);
    check_formats(gguf_path, dat_path);
    check_quantize_with(gguf_path);
    check_quantize_with(dat_path);
    check_malformed();
    check_wrong_size();
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    return test_finish("test_imatrix");
}
