/* test_quantize_model.c: ox_model_quantize reproduces llama-quantize's files byte for byte, and
 * its options, importance matrices and error paths behave. */
#define _POSIX_C_SOURCE 200809L
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "test.h"

static char tmp_dir[256];

static void path_in(char *out, size_t cap, const char *dir, const char *name) {
    snprintf(out, cap, "%s/%s", dir, name);
}

static void model_path(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "%s/models/%s", test_data_dir(), name);
}

static uint8_t *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(*n ? *n : 1);
    if (fread(buf, 1, *n, f) != *n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

/* The reference file's own general.file_type: the pure k-quant files were made with _S/_M. */
static enum ox_ftype file_type_of(const char *path) {
    struct ox_gguf *g = NULL;
    uint32_t ft = 0;
    if (gguf_open(path, true, &g) == OX_OK)
        gguf_get_u32(g, "general.file_type", &ft);
    gguf_free(g);
    return (enum ox_ftype)ft;
}

/* Quantize llama-f32 as llama.cpp made llama-<name>.gguf and compare the whole files. */
static void check_identical(const char *name, bool pure) {
    char ref[1024], in[1024], out[1024], file[64];
    snprintf(file, sizeof file, "llama-%s.gguf", name);
    model_path(ref, sizeof ref, file);
    model_path(in, sizeof in, "llama-f32.gguf");
    path_in(out, sizeof out, tmp_dir, file);
    struct ox_quantize_params p = ox_quantize_params_default();
    p.ftype = file_type_of(ref);
    p.pure = pure;
    p.n_threads = 2;
    struct ox_quantize_result r;
    enum ox_status s = ox_model_quantize(in, out, &p, &r);
    CHECK_MSG(s == OX_OK, "%s: %s", name, ox_last_error());
    size_t na = 0, nb = 0;
    uint8_t *a = read_all(out, &na), *b = read_all(ref, &nb);
    bool same = a && b && na == nb && memcmp(a, b, na) == 0;
    CHECK_MSG(same, "%s: output differs from llama.cpp's file (%zu vs %zu bytes)", name, na, nb);
    printf("  %-10s %s  %.3f bits/weight\n", name, same ? "identical" : "DIFFERENT",
           8.0 * (double)r.bytes_out / (double)r.n_params);
    free(a);
    free(b);
    unlink(out);
}

static void check_reference_files(void) {
    static const char *const pure[] = {"q4_0",  "q4_1",  "q5_0",  "q5_1",      "q8_0",   "q2_k",
                                       "q3_k",  "q4_k",  "q5_k",  "q6_k",      "iq4_nl", "iq4_xs",
                                       "iq3_s", "tq1_0", "tq2_0", "mxfp4_moe", "q1_0",   "q2_0"};
    static const char *const mixed[] = {"q4_k_m", "q3_k_m", "q5_k_m", "f16", "bf16"};
    printf("byte identity with llama-quantize (from llama-f32.gguf):\n");
    for (size_t i = 0; i < sizeof pure / sizeof pure[0]; i++)
        check_identical(pure[i], true);
    for (size_t i = 0; i < sizeof mixed / sizeof mixed[0]; i++)
        check_identical(mixed[i], false);
    /* the repository's architecture references are quantized by test_reference, which checks
     * each file's hash against llama-quantize's (tests/model/reference_files.h) */
}

/* Types chosen for each tensor of a quantized file, for the option tests. */
static enum ox_dtype type_of(const char *path, const char *tensor) {
    struct ox_gguf *g = NULL;
    enum ox_dtype t = OX_DTYPE_COUNT;
    if (gguf_open(path, true, &g) == OX_OK && gguf_find_tensor(g, tensor))
        t = gguf_find_tensor(g, tensor)->type;
    gguf_free(g);
    return t;
}

static enum ox_status quantize_to(const char *in_name, struct ox_quantize_params *p, char *out,
                                  size_t cap) {
    char in[1024];
    model_path(in, sizeof in, in_name);
    path_in(out, cap, tmp_dir, "options.gguf");
    return ox_model_quantize(in, out, p, NULL);
}

static void check_options(void) {
    char out[1024];
    struct ox_quantize_params p = ox_quantize_params_default();
    p.ftype = OX_FTYPE_MOSTLY_Q4_0;
    p.output_tensor_type = OX_DTYPE_Q8_0;
    p.token_embedding_type = OX_DTYPE_Q5_1;
    const struct ox_tensor_type_override ov[] = {{"attn_(q|k)\\.weight$", OX_DTYPE_Q6_K},
                                                 {"blk\\.1\\.ffn_up", OX_DTYPE_IQ4_NL}};
    p.overrides = ov;
    p.n_overrides = 2;
    CHECK_MSG(quantize_to("llama-f32.gguf", &p, out, sizeof out) == OX_OK, "%s", ox_last_error());
    CHECK_EQ(type_of(out, "output.weight"), OX_DTYPE_Q8_0);
    CHECK_EQ(type_of(out, "token_embd.weight"), OX_DTYPE_Q5_1);
    CHECK_EQ(type_of(out, "blk.0.attn_q.weight"), OX_DTYPE_Q6_K);
    CHECK_EQ(type_of(out, "blk.1.attn_k.weight"), OX_DTYPE_Q6_K);
    CHECK_EQ(type_of(out, "blk.1.ffn_up.weight"), OX_DTYPE_IQ4_NL);
    CHECK_EQ(type_of(out, "blk.0.ffn_up.weight"), OX_DTYPE_Q4_0);
    CHECK_EQ(type_of(out, "blk.0.attn_norm.weight"), OX_DTYPE_F32);

    p = ox_quantize_params_default();
    p.ftype = OX_FTYPE_MOSTLY_Q8_0;
    p.leave_output_tensor = true;
    CHECK(quantize_to("llama-f16.gguf", &p, out, sizeof out) == OX_OK);
    CHECK_EQ(type_of(out, "output.weight"), OX_DTYPE_F16);
    CHECK_EQ(type_of(out, "blk.0.ffn_down.weight"), OX_DTYPE_Q8_0);

    /* MoE: expert tensors are 3-D, MXFP4_MOE puts them in mxfp4 and the rest in q8_0 */
    p = ox_quantize_params_default();
    p.ftype = OX_FTYPE_MOSTLY_MXFP4_MOE;
    CHECK_MSG(quantize_to("llama-moe-f16.gguf", &p, out, sizeof out) == OX_OK, "%s",
              ox_last_error());
    CHECK_EQ(type_of(out, "blk.0.ffn_up_exps.weight"), OX_DTYPE_MXFP4);
    CHECK_EQ(type_of(out, "blk.0.attn_q.weight"), OX_DTYPE_Q8_0);
    CHECK_EQ(type_of(out, "blk.0.ffn_gate_inp.weight"), OX_DTYPE_F32); /* the router stays */

    p = ox_quantize_params_default();
    p.only_copy = true;
    CHECK(quantize_to("llama-q4_k_m.gguf", &p, out, sizeof out) == OX_OK);
    CHECK_EQ(type_of(out, "blk.1.ffn_down.weight"), OX_DTYPE_Q6_K);
    unlink(out);
}

static void check_errors(void) {
    char in[1024], out[1024], link_path[1024];
    model_path(in, sizeof in, "llama-f32.gguf");
    struct ox_quantize_params p = ox_quantize_params_default();
    CHECK_EQ(ox_model_quantize(in, in, &p, NULL), OX_ERR_INVALID_ARG);
    CHECK(strstr(ox_last_error(), "refusing to overwrite") != NULL);
    /* another name for the same file is the same file */
    path_in(link_path, sizeof link_path, tmp_dir, "link.gguf");
    unlink(link_path);
    if (symlink(in, link_path) == 0) {
        CHECK_EQ(ox_model_quantize(in, link_path, &p, NULL), OX_ERR_INVALID_ARG);
        unlink(link_path);
    }
    /* already quantized input */
    p.ftype = OX_FTYPE_MOSTLY_Q8_0;
    CHECK_EQ(quantize_to("llama-q4_0.gguf", &p, out, sizeof out), OX_ERR_UNSUPPORTED);
    CHECK(strstr(ox_last_error(), "--allow-requantize") != NULL);
    p.allow_requantize = true;
    CHECK_MSG(quantize_to("llama-q4_0.gguf", &p, out, sizeof out) == OX_OK, "%s", ox_last_error());
    CHECK_EQ(type_of(out, "blk.0.attn_q.weight"), OX_DTYPE_Q8_0);
    /* the lowest-bit types need an importance matrix */
    p = ox_quantize_params_default();
    p.ftype = OX_FTYPE_MOSTLY_IQ2_XXS;
    CHECK_EQ(quantize_to("llama-f32.gguf", &p, out, sizeof out), OX_ERR_INVALID_ARG);
    CHECK(strstr(ox_last_error(), "importance matrix") != NULL);
    p = ox_quantize_params_default();
    p.ftype = (enum ox_ftype)4; /* a removed file type */
    CHECK_EQ(quantize_to("llama-f32.gguf", &p, out, sizeof out), OX_ERR_INVALID_ARG);
    p = ox_quantize_params_default();
    const struct ox_tensor_type_override bad[] = {{"attn_(q", OX_DTYPE_Q8_0}};
    p.overrides = bad;
    p.n_overrides = 1;
    CHECK_EQ(quantize_to("llama-f32.gguf", &p, out, sizeof out), OX_ERR_INVALID_ARG);
    CHECK(strstr(ox_last_error(), "bad tensor pattern") != NULL);
    p = ox_quantize_params_default();
    CHECK_EQ(ox_model_quantize("/nonexistent.gguf", out, &p, NULL), OX_ERR_IO);
}

static bool stop_after_three(const struct ox_quantize_progress *pr, void *user) {
    (*(int *)user)++;
    return pr->i_tensor < 3;
}

/* An aborted run leaves neither the output nor its temporary behind. */
static void check_abort(void) {
    char out[1024];
    int calls = 0;
    struct ox_quantize_params p = ox_quantize_params_default();
    p.progress = stop_after_three;
    p.progress_user = &calls;
    path_in(out, sizeof out, tmp_dir, "options.gguf");
    unlink(out); /* left by earlier tests */
    CHECK_EQ(quantize_to("llama-f32.gguf", &p, out, sizeof out), OX_ERR_ABORTED);
    CHECK_EQ(calls, 3);
    struct stat st;
    CHECK(stat(out, &st) != 0);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ls %s | grep -q tmp", tmp_dir);
    CHECK(system(cmd) != 0);
}

int main(void) {
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/ox_test_quantize_%d", (int)getpid());
    mkdir(tmp_dir, 0755);
    check_reference_files();
    check_options();
    check_errors();
    check_abort();
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp_dir);
    CHECK(system(cmd) == 0);
    return test_finish("test_quantize_model");
}
