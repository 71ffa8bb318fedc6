/* reference.c: llama.cpp's logits with LoRA adapters, for tests/model/test_lora.c (make.sh
 * builds it against a llama.cpp build and writes the .f32 files beside it).
 *
 *   reference MODEL.gguf OUT.f32 PROMPT_IDS (comma-separated) LORA.gguf SCALE [LORA SCALE ...]
 *
 * The prompt decoded as one batch, the logits of every position (n_prompt x n_vocab floats),
 * 2 threads, n_ctx 512, the default (f16) KV cache: as ../shared/testdata/reference's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

int main(int argc, char **argv) {
    if (argc < 6 || (argc - 4) % 2) {
        fprintf(stderr, "usage: reference MODEL OUT PROMPT_IDS LORA SCALE [LORA SCALE ...]\n");
        return 2;
    }
    llama_backend_init();
    struct llama_model *model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (!model)
        return 1;
    struct llama_adapter_lora *ad[8];
    float scales[8];
    int n_ad = 0;
    for (int i = 4; i + 1 < argc && n_ad < 8; i += 2, n_ad++) {
        ad[n_ad] = llama_adapter_lora_init(model, argv[i]);
        scales[n_ad] = strtof(argv[i + 1], NULL);
        if (!ad[n_ad])
            return 1;
    }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 512, cp.n_batch = 512, cp.n_threads = cp.n_threads_batch = 2;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx || llama_set_adapters_lora(ctx, ad, (size_t)n_ad, scales))
        return 1;
    llama_token ids[512];
    int n = 0;
    for (char *t = strtok(argv[3], ","); t && n < 512; t = strtok(NULL, ","))
        ids[n++] = atoi(t);
    struct llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = ids[i], b.pos[i] = i, b.n_seq_id[i] = 1, b.seq_id[i][0] = 0, b.logits[i] = 1;
    }
    b.n_tokens = n;
    if (llama_decode(ctx, b))
        return 1;
    int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    FILE *f = fopen(argv[2], "wb");
    for (int i = 0; i < n; i++)
        fwrite(llama_get_logits_ith(ctx, i), sizeof(float), (size_t)n_vocab, f);
    fclose(f);
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
