/* fuzz_sampler_state.c: libFuzzer target for ox_sampler_state_load: any bytes loaded into a
 * chain of every stateful stage (penalties, DRY, XTC, a seeded draw; mirostat; a grammar over
 * GPT-2's vocabulary from OX_TESTDATA); a load that is taken must leave a chain that samples. */
#include <stdio.h>
#include <stdlib.h>

#include "oxidize.h"

static struct ox_vocab *vocab;
static struct ox_sampler *chains[3];
static float logits[50257];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *td = getenv("OX_TESTDATA") ? getenv("OX_TESTDATA") : "../shared/testdata";
    char path[1024];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-gpt-2.gguf", td);
    if (ox_vocab_load(path, &vocab) != OX_OK) {
        fprintf(stderr, "fuzz_sampler_state: %s\n", ox_last_error());
        abort();
    }
    for (int i = 0; i < 3; i++)
        ox_sampler_create(&chains[i]);
    ox_sampler_add_penalties(chains[0], 64, 1.3f, 0.1f, 0.1f);
    ox_sampler_add_dry(chains[0], vocab, 0.8f, 1.75f, 2, 64, NULL, 0);
    ox_sampler_add_xtc(chains[0], 0.5f, 0.1f, 1, 11);
    ox_sampler_add_dist(chains[0], 42);
    ox_sampler_add_mirostat_v2(chains[1], 5, 5.0f, 0.1f);
    ox_sampler_add_grammar(chains[2], vocab, "root ::= [a-z ]+\n", 17);
    ox_sampler_add_dist(chains[2], 3);
    for (int i = 0; i < 50257; i++)
        logits[i] = (float)((i * 7919) % 1000) / 100.0f;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0)
        return 0;
    struct ox_sampler *s = chains[data[0] % 3];
    if (ox_sampler_state_load(s, data + 1, size - 1) == OX_OK && ox_sampler_sample(s, logits, 50257) < 0)
        abort(); /* a chain that took a state must still sample */
    return 0;
}
