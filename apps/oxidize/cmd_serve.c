/* cmd_serve.c: `oxidize serve -m MODEL`: the HTTP server (apps/server) with its options. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../server/server.h"
#include "cmd.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: oxidize serve -m MODEL [options]\n"
            "  -m, --model FILE         the GGUF model\n"
            "  --host ADDR              IPv4 address to listen on (default 127.0.0.1)\n"
            "  --port N                 TCP port (default 8080; 0: any free one, printed)\n"
            "  -np, --parallel N        requests generated side by side (default 4)\n"
            "  -c, --ctx-size N         KV cells shared by the slots (default 4096)\n"
            "  -b, --batch-size N       tokens per step (default 512)\n"
            "  -t, --threads N          CPU threads (default: all cores)\n"
            "  -ngl, --n-gpu-layers N   layers on the GPU (default -1: all, when there is one)\n"
            "  --api-key KEY            every route but /health wants Authorization: Bearer KEY\n"
            "  --chat-template FILE     the template chat completions are rendered with\n"
            "                           (default: the model's)\n"
            "Endpoints: GET /health, GET /v1/models, POST /v1/completions,\n"
            "POST /v1/chat/completions, POST /tokenize, POST /detokenize.\n");
}

/* An integer option in [lo, hi]; false after printing why. */
static bool int_arg(const char *opt, const char *val, int lo, int hi, int *out) {
    char *end = NULL;
    long v = val ? strtol(val, &end, 10) : 0;
    if (!val || !*val || *end || v < lo || v > hi) {
        fprintf(stderr, "oxidize serve: %s needs an integer from %d to %d\n", opt, lo, hi);
        return false;
    }
    *out = (int)v;
    return true;
}

int cmd_serve(int argc, char **argv) {
    struct server_opts o = {.host = "127.0.0.1",
                            .port = 8080,
                            .n_parallel = 4,
                            .n_ctx = 4096,
                            .n_batch = 512,
                            .n_gpu_layers = -1,
                            .max_body = 1 << 20};
    char *tmpl = NULL;                  /* --chat-template's text */
    for (int i = 1; i < argc; i += 2) { /* every option but --help takes a value */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            o.model_path = v, ok = v != NULL;
        } else if (!strcmp(a, "--api-key")) {
            o.api_key = v, ok = v && *v;
        } else if (!strcmp(a, "--host")) {
            o.host = v, ok = v != NULL;
        } else if (!strcmp(a, "--port")) {
            ok = int_arg(a, v, 0, 65535, &o.port);
        } else if (!strcmp(a, "-np") || !strcmp(a, "--parallel")) {
            ok = int_arg(a, v, 1, OX_SEQ_MAX, &o.n_parallel);
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
            ok = int_arg(a, v, 2, 1 << 24, &o.n_ctx);
        } else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) {
            ok = int_arg(a, v, 1, 1 << 16, &o.n_batch);
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            ok = int_arg(a, v, 0, 1024, &o.n_threads);
        } else if (!strcmp(a, "--chat-template")) {
            size_t len;
            free(tmpl);
            tmpl = v ? cmd_read_file("serve", v, &len) : NULL;
            o.chat_template = tmpl, ok = tmpl != NULL;
        } else if (!strcmp(a, "-ngl") || !strcmp(a, "--n-gpu-layers")) {
            ok = int_arg(a, v, -1, 1 << 20, &o.n_gpu_layers);
        } else {
            fprintf(stderr, "oxidize serve: unknown option %s\n", a);
            ok = false;
        }
        if (!ok) {
            usage(stderr);
            free(tmpl);
            return 2;
        }
    }
    if (!o.model_path) {
        usage(stderr);
        free(tmpl);
        return 2;
    }
    int rc = server_run(&o);
    free(tmpl);
    return rc;
}
