/* fuzz_lora.c: libFuzzer target for LoRA adapters: any bytes parsed as GGUF and checked as an
 * adapter of the shared llama-f16 model (OX_TESTDATA); one that is accepted is set on a context
 * and a token decoded through it, then taken off and freed. */
#include <stdio.h>
#include <stdlib.h>

#include "gguf/gguf.h"
#include "model/lora.h"

static struct ox_model *model;
static struct ox_context *ctx;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *td = getenv("OX_TESTDATA") ? getenv("OX_TESTDATA") : "../shared/testdata";
    char path[1024];
    snprintf(path, sizeof path, "%s/models/llama-f16.gguf", td);
    struct ox_model_params mp = ox_model_params_default();
    mp.n_gpu_layers = 0;
    struct ox_context_params cp = ox_context_params_default();
    cp.n_ctx = 64, cp.n_batch = 8, cp.n_threads = 1;
    if (ox_model_load(path, &mp, &model) != OX_OK || ox_context_create(model, &cp, &ctx) != OX_OK) {
        fprintf(stderr, "fuzz_lora: cannot load %s: %s\n", path, ox_last_error());
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct ox_gguf *g = NULL;
    struct ox_lora *l = NULL;
    if (gguf_parse(data, size, &g) != OX_OK)
        return 0;
    if (lora_from_gguf(model, g, &l) == OX_OK) {
        gguf_free(g), g = NULL; /* the adapter keeps nothing of the file */
        if (ox_context_set_lora(ctx, l, 0.5f) != OX_OK)
            abort(); /* an accepted adapter fits the model */
        ox_token t = 1;
        int32_t pos = 0, seq = 0;
        bool want = true;
        struct ox_batch b = {
            .n_tokens = 1, .token = &t, .pos = &pos, .seq_id = &seq, .logits = &want};
        ox_kv_clear(ctx);
        if (ox_decode(ctx, &b) != OX_OK)
            abort();
        ox_context_clear_lora(ctx);
        ox_lora_free(l);
    }
    gguf_free(g);
    return 0;
}
