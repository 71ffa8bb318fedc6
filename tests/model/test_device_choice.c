/* test_device_choice.c: ox_model_params.device picks the GPU backend a model's layers go to
 * ("cuda", "vulkan", "vulkan:N", "none"): names this build cannot run and devices that are not
 * there are refused with a message, never a silent fall back to the CPU; "none" keeps the CPU;
 * a model loaded on a device gives the CPU's greedy tokens. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "oxidize.h"
#include "test.h"

static char path[1024];

/* The status loading with device gives, the model freed; the text after it in *out. */
static enum ox_status load(const char *device, struct ox_model **out) {
    struct ox_model_params p = ox_model_params_default();
    p.device = device;
    struct ox_model *m = NULL;
    enum ox_status st = ox_model_load(path, &p, &m);
    if (out)
        *out = m;
    else
        ox_model_free(m);
    return st;
}

/* The greedy continuation of a prompt, 12 tokens, into out; false where a step failed. */
static bool greedy(struct ox_model *m, ox_token *out) {
    struct ox_context_params cp = ox_context_params_default();
    cp.n_ctx = 64, cp.n_threads = 2;
    struct ox_context *ctx = NULL;
    if (ox_context_create(m, &cp, &ctx) != OX_OK)
        return false;
    const char *text = "Once upon a time, in a land far away,";
    ox_token t[32];
    size_t n = 0;
    bool ok = ox_tokenize(ox_model_vocab(m), text, strlen(text), t, 32, &n, true, false) == OX_OK;
    struct ox_batch b = {.n_tokens = (int32_t)n, .token = t};
    ok = ok && n > 0 && n <= 32 && ox_decode(ctx, &b) == OX_OK;
    for (int i = 0; ok && i < 12; i++) {
        const float *lg = ox_get_logits(ctx, i == 0 ? (int32_t)n - 1 : 0);
        int best = 0;
        for (int v = 1; lg && v < ox_model_n_vocab(m); v++)
            best = lg[v] > lg[best] ? v : best;
        out[i] = (ox_token)best;
        struct ox_batch one = {.n_tokens = 1, .token = &out[i]};
        ok = lg && ox_decode(ctx, &one) == OX_OK;
    }
    ox_context_free(ctx);
    return ok;
}

int main(void) {
    snprintf(path, sizeof path, "%s/models/llama-q4_k_m.gguf", test_data_dir());
    CHECK_EQ(load("metal", NULL), OX_ERR_INVALID_ARG);
    CHECK(strstr(ox_last_error(), "metal") != NULL);
    CHECK_EQ(load("vulkan:x", NULL), OX_ERR_INVALID_ARG);
    CHECK_EQ(load("vulkan:", NULL), OX_ERR_INVALID_ARG);
    setenv("OX_DEVICE", "Vulkan", 1); /* the environment's name is checked the same way */
    CHECK_MSG(load(NULL, NULL) == OX_ERR_INVALID_ARG && strstr(ox_last_error(), "OX_DEVICE"),
              "OX_DEVICE=Vulkan: %s", ox_last_error());
    unsetenv("OX_DEVICE");
    /* a backend named: run there, refused as not built (saying how to build it), or refused
     * as not usable here; never the CPU instead */
    enum ox_status cuda = load("cuda", NULL);
    CHECK_MSG(cuda == OX_OK || cuda == OX_ERR_DEVICE ||
                  (cuda == OX_ERR_UNSUPPORTED && strstr(ox_last_error(), "CUDA=1")),
              "cuda: %s", ox_last_error());
    /* an index past the last is refused with the count, though n_gpu_layers is -1 */
    enum ox_status far = load("vulkan:9999", NULL);
    CHECK_MSG((far == OX_ERR_DEVICE && strstr(ox_last_error(), "vulkan:9999")) ||
                  (far == OX_ERR_UNSUPPORTED && strstr(ox_last_error(), "VULKAN=1")),
              "vulkan:9999: %s", ox_last_error());
    ox_token cpu[12], dev[12];
    struct ox_model *m = NULL;
    CHECK_MSG(load("none", &m) == OX_OK, "none: %s", ox_last_error());
    CHECK(m && greedy(m, cpu));
    CHECK(m && !strcmp(ox_model_backend(m), "CPU"));
    ox_model_free(m);
    m = NULL;
    enum ox_status vulkan = load("vulkan", &m); /* after the bad index, the device still opens */
    CHECK_MSG(vulkan == OX_OK || far == vulkan, "vulkan: %s", ox_last_error());
    if (vulkan == OX_OK) {
        CHECK(m && greedy(m, dev));
        CHECK_MSG(!memcmp(cpu, dev, sizeof cpu), "vulkan's greedy tokens differ from the CPU's");
        printf("vulkan: %s, the CPU's greedy tokens\n", ox_model_backend(m));
    }
    ox_model_free(m);
    return test_finish("test_device_choice");
}
