/* fuzz_server.c: libFuzzer target for the bodies `oxidize serve` parses: the first byte picks a
 * route (OpenAI's, llama.cpp's, Ollama's, a slot action), the rest is its body. Each request is
 * answered as the server answers it (JSON and fields checked, sampler settings, templates
 * rendered, prompts tokenized, Ollama's requests translated) against the kjv model, without
 * running the engine: a generation that would start is released unstarted. Nothing may crash,
 * leak, hang, or read out of bounds, and every answer must be a status with a body. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"
#include "routes.h"
#include "server/server.h"
#include "state.h"

static struct server_opts opts;
static struct state *state;
static char model_path[1024], *chat_template;

static const struct {
    const char *method, *path, *action;
} routes[] = {
    {"POST", "/v1/completions", NULL}, {"POST", "/v1/chat/completions", NULL},
    {"POST", "/completion", NULL},     {"POST", "/tokenize", NULL},
    {"POST", "/detokenize", NULL},     {"POST", "/apply-template", NULL},
    {"POST", "/v1/embeddings", NULL},  {"POST", "/api/generate", NULL},
    {"POST", "/api/chat", NULL},       {"POST", "/api/show", NULL},
    {"POST", "/api/embed", NULL},      {"POST", "/api/embeddings", NULL},
    {"POST", "/slots/0", "erase"},     {"POST", "/slots/0", "save"},
    {"GET", "/api/tags", NULL},        {"POST", "/v1/rerank", NULL},
    {"POST", "/lora-adapters", NULL},
};

/* The template the chat routes render with (Qwen3's: tools, thinking), read once. */
static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    char *text = NULL;
    long n = f && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (text = malloc((size_t)n + 1)) &&
        fread(text, 1, (size_t)n, f) == (size_t)n)
        text[n] = '\0';
    if (f)
        fclose(f);
    return text;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *td = getenv("OX_TESTDATA") ? getenv("OX_TESTDATA") : "../shared/testdata";
    snprintf(model_path, sizeof model_path, "%s/models/kjv-15m-q4_k_m.gguf", td);
    char tmpl[1024];
    snprintf(tmpl, sizeof tmpl, "%s/chat/templates/Qwen-Qwen3-0.6B.jinja", td);
    chat_template = read_text(tmpl);
    opts = (struct server_opts){.model_path = model_path,
                                .host = "127.0.0.1",
                                .n_parallel = 1,
                                .n_ctx = 256,
                                .n_batch = 64,
                                .n_threads = 1,
                                .kv_type = OX_DTYPE_F16,
                                .chat_template = chat_template,
                                .max_body = 1 << 20,
                                .queue_size = 4,
                                .timeout = 10,
                                .shutdown_timeout = 1,
                                .embeddings = true,
                                .pooling = OX_POOLING_MEAN};
    state = state_create(&opts);
    if (!state || !state_start(state)) {
        fprintf(stderr, "fuzz_server: cannot load %s: %s\n", model_path, ox_last_error());
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0)
        return 0;
    size_t r = data[0] % (sizeof routes / sizeof routes[0]);
    /* embeddings run the model once per input: long bodies there cost time, not coverage */
    if (strstr(routes[r].path, "embed") && size > 512)
        return 0;
    char *body = malloc(size); /* the body without the route byte, NUL-terminated as server.c's */
    memcpy(body, data + 1, size - 1);
    body[size - 1] = '\0';
    struct reply out =
        route_request(state, routes[r].method, routes[r].path, routes[r].action, body, size - 1);
    if (out.status < 100 || out.status > 599 || (!out.gen && !out.body))
        abort();
    gen_release(out.gen); /* a generation that would have started: released unstarted */
    free(out.prompt);
    free(out.body);
    free(body);
    return 0;
}
