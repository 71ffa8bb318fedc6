/* test_split.c: a model split across files as llama.cpp's gguf-split writes them (the first part
 * all the metadata, each part its share of the tensors, split.no / split.count /
 * split.tensors.count in every part, named NAME-0000i-of-0000N.gguf) loads from its first part
 * as one model with the same logits, bit for bit, as the file it was split from; and a split
 * with a part missing, mislabelled, overlapping or miscounted, or opened at another part, is
 * refused with a message naming what is wrong. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "oxidize.h"
#include "test.h"

#define PARTS 3

static char dir[256];

static void set_u16(struct gguf_writer *w, const char *key, uint16_t v) {
    struct gguf_value val = {.type = OX_GGUF_UINT16, .n = 1, .data = (const uint8_t *)&v};
    CHECK_EQ(gguf_writer_set(w, key, &val), OX_OK);
}

/* Part `part` (0-based) of src split in PARTS at the tensor indices cut[], as NAME-...gguf in dir;
 * no_shift / count_shift / total_shift mislabel it, extra copies the next part's first tensor. */
static void write_part(const struct ox_gguf *src, const char *name, int part, const int64_t *cut,
                       int no_shift, int64_t total_shift, bool extra) {
    struct gguf_writer *w = NULL;
    CHECK_EQ(gguf_writer_create(&w), OX_OK);
    for (int64_t i = 0; part == 0 && i < src->n_kv; i++)
        CHECK_EQ(gguf_writer_set(w, src->kv[i].key, &src->kv[i].value), OX_OK);
    set_u16(w, "split.no", (uint16_t)(part + no_shift));
    set_u16(w, "split.count", PARTS);
    CHECK_EQ(gguf_writer_set_i32(w, "split.tensors.count", (int32_t)(src->n_tensors + total_shift)),
             OX_OK);
    int64_t end = cut[part + 1] + (extra && part + 1 < PARTS ? 1 : 0);
    for (int64_t i = cut[part]; i < end; i++) {
        const struct gguf_tensor *t = &src->tensors[i];
        CHECK_EQ(gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data), OX_OK);
    }
    char path[512];
    snprintf(path, sizeof path, "%s/%s-%05d-of-%05d.gguf", dir, name, part + 1, PARTS);
    CHECK_MSG(gguf_writer_write_file(w, path) == OX_OK, "%s", ox_last_error());
    gguf_writer_free(w);
}

static void write_split(const struct ox_gguf *src, const char *name, int bad_part, int no_shift,
                        int64_t total_shift, bool extra) {
    int64_t cut[PARTS + 1] = {0, src->n_tensors / 3, 2 * src->n_tensors / 3, src->n_tensors};
    for (int p = 0; p < PARTS; p++)
        write_part(src, name, p, cut, p == bad_part ? no_shift : 0, p == bad_part ? total_shift : 0,
                   p == bad_part && extra);
}

/* The last-position logits of a few tokens. */
static float *logits(struct ox_model *m, int *n_vocab) {
    struct ox_context_params p = ox_context_params_default();
    p.n_ctx = 64, p.n_threads = 2;
    struct ox_context *c = NULL;
    CHECK_MSG(ox_context_create(m, &p, &c) == OX_OK, "%s", ox_last_error());
    ox_token t[8];
    for (int i = 0; i < 8; i++)
        t[i] = (ox_token)((3 + 37 * i) % ox_model_n_vocab(m));
    bool want[8] = {false, false, false, false, false, false, false, true};
    struct ox_batch b = {.n_tokens = 8, .token = t, .logits = want};
    CHECK_EQ(ox_decode(c, &b), OX_OK);
    *n_vocab = ox_model_n_vocab(m);
    float *out = calloc((size_t)*n_vocab, sizeof *out);
    const float *l = ox_get_logits(c, 7);
    CHECK(l != NULL);
    if (l)
        memcpy(out, l, (size_t)*n_vocab * sizeof *out);
    ox_context_free(c);
    return out;
}

static void expect_refused(const char *path, const char *what) {
    struct ox_model_params mp = test_model_params();
    struct ox_model *m = NULL;
    enum ox_status s = ox_model_load(path, &mp, &m);
    CHECK_MSG(s != OX_OK && strstr(ox_last_error(), what), "%s: %d '%s' (wanted '%s')", path, s,
              ox_last_error(), what);
    ox_model_free(m);
}

int main(void) {
    char src_path[1024];
    snprintf(src_path, sizeof src_path, "%s/models/llama-q8_0.gguf", test_data_dir());
    snprintf(dir, sizeof dir, "/tmp/ox-split-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    struct ox_gguf *src = NULL;
    CHECK_MSG(gguf_open(src_path, true, &src) == OX_OK, "%s", ox_last_error());
    if (!src)
        return test_finish("test_split");

    /* the split model: the same logits as its source, bit for bit, mapped or read */
    write_split(src, "good", -1, 0, 0, false);
    char path[512];
    snprintf(path, sizeof path, "%s/good-00001-of-00003.gguf", dir);
    struct ox_model_params mp = test_model_params();
    struct ox_model *whole = NULL, *split = NULL;
    CHECK_MSG(ox_model_load(src_path, &mp, &whole) == OX_OK, "%s", ox_last_error());
    for (int mapped = 0; mapped < 2 && whole; mapped++) {
        mp.use_mmap = mapped;
        CHECK_MSG(ox_model_load(path, &mp, &split) == OX_OK, "%s", ox_last_error());
        if (!split)
            break;
        int nv = 0, nv2 = 0;
        float *a = logits(whole, &nv), *b = logits(split, &nv2);
        CHECK_MSG(nv == nv2 && !memcmp(a, b, (size_t)nv * sizeof *a),
                  "split logits differ from the whole file's (mmap %d)", mapped);
        CHECK_EQ(ox_model_n_params(split), ox_model_n_params(whole));
        free(a), free(b);
        ox_model_free(split), split = NULL;
    }
    ox_model_free(whole);

    /* opened at part 2; a part missing; mislabelled; overlapping; miscounted; misnamed */
    snprintf(path, sizeof path, "%s/good-00002-of-00003.gguf", dir);
    expect_refused(path, "open part 1");
    write_split(src, "missing", -1, 0, 0, false);
    snprintf(path, sizeof path, "%s/missing-00003-of-00003.gguf", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/missing-00001-of-00003.gguf", dir);
    expect_refused(path, "part 3 of 3");
    write_split(src, "label", 2, -1, 0, false);
    snprintf(path, sizeof path, "%s/label-00001-of-00003.gguf", dir);
    expect_refused(path, "says it is part 2 of 3, not 3 of 3");
    write_split(src, "overlap", 1, 0, 0, true);
    snprintf(path, sizeof path, "%s/overlap-00001-of-00003.gguf", dir);
    expect_refused(path, "is in two parts");
    write_split(src, "count", 0, 0, 5, false);
    snprintf(path, sizeof path, "%s/count-00001-of-00003.gguf", dir);
    expect_refused(path, "split.tensors.count");
    snprintf(path, sizeof path, "%s/count-00001-of-00003.gguf", dir);
    char renamed[600];
    snprintf(renamed, sizeof renamed, "%s/renamed.gguf", dir);
    CHECK_EQ(rename(path, renamed), 0);
    expect_refused(renamed, "not named");

    gguf_free(src);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK_EQ(system(cmd), 0);
    return test_finish("test_split");
}
