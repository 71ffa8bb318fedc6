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
            "  -ub, --ubatch-size N     tokens per forward pass (default: the batch size)\n"
            "  -t, --threads N          CPU threads (default: all cores)\n"
            "  -ctk, --cache-type T     the KV cache: f16 (default), f32 or q8_0\n"
            "  -ngl, --n-gpu-layers N   layers on the GPU (default -1: all, when there is one)\n"
            "  --api-key KEY            every route but /health wants Authorization: Bearer KEY\n"
            "                           (may be given several times)\n"
            "  --api-key-file FILE      the keys, one per line\n"
            "  --chat-template FILE     the template chat completions are rendered with\n"
            "                           (default: the model's)\n"
            "  --queue-size N           requests that may wait for a slot (default 64; past\n"
            "                           them: 429)\n"
            "  --timeout S              seconds a request may take and a connection may idle\n"
            "                           (default 600)\n"
            "  --shutdown-timeout S     seconds requests in flight get to finish at SIGINT or\n"
            "                           SIGTERM before they are cancelled (default 10)\n"
            "  --http-threads N         threads serving connections (default 4)\n"
            "  --max-body N             request bodies over N bytes get 413 (default 1 MiB)\n"
            "  --embeddings             serve POST /v1/embeddings (a context of its own)\n"
            "  --pooling P              how embeddings pool the tokens: mean (default), cls,\n"
            "                           last\n"
            "Endpoints: OpenAI's POST /v1/completions, /v1/chat/completions, /v1/embeddings\n"
            "(with --embeddings), GET /v1/models; llama.cpp's POST /completion, /tokenize,\n"
            "/detokenize, /apply-template, GET /health, /props, /slots, /metrics.\n");
}

/* A number option in [lo, hi]; false after printing why. */
static bool num_arg(const char *opt, const char *val, double lo, double hi, double *out) {
    char *end = NULL;
    double v = val ? strtod(val, &end) : 0;
    if (!val || !*val || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "oxidize serve: %s needs a number from %g to %g\n", opt, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

/* --api-key-file: one key per line (blank lines skipped); the text keeps the keys. */
static bool read_keys(struct server_opts *o, char *text) {
    for (char *line = strtok(text, "\r\n"); line; line = strtok(NULL, "\r\n")) {
        if (o->n_api_keys == SERVER_MAX_KEYS) {
            fprintf(stderr, "oxidize serve: at most %d API keys\n", SERVER_MAX_KEYS);
            return false;
        }
        o->api_keys[o->n_api_keys++] = line;
    }
    return true;
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
                            .kv_type = OX_DTYPE_F16,
                            .max_body = 1 << 20,
                            .queue_size = 64,
                            .timeout = 600,
                            .shutdown_timeout = 10,
                            .http_threads = 4,
                            .pooling = OX_POOLING_MEAN};
    char *tmpl = NULL, *keys = NULL; /* --chat-template's and --api-key-file's text */
    int max_body = 1 << 20;
    for (int i = 1; i < argc; i += 2) { /* every option but --help and --embeddings takes a value */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            o.model_path = v, ok = v != NULL;
        } else if (!strcmp(a, "--api-key")) {
            ok = v && *v && o.n_api_keys < SERVER_MAX_KEYS;
            if (ok)
                o.api_keys[o.n_api_keys++] = v;
        } else if (!strcmp(a, "--api-key-file")) {
            size_t len;
            ok = !keys && v && (keys = cmd_read_file("serve", v, &len)) && read_keys(&o, keys);
        } else if (!strcmp(a, "-ctk") || !strcmp(a, "--cache-type")) {
            ok = v && (!strcmp(v, "f16") || !strcmp(v, "f32") || !strcmp(v, "q8_0"));
            o.kv_type = !ok || !strcmp(v, "f16") ? OX_DTYPE_F16
                        : !strcmp(v, "f32")      ? OX_DTYPE_F32
                                                 : OX_DTYPE_Q8_0;
        } else if (!strcmp(a, "--embeddings")) {
            o.embeddings = true, i--; /* takes no value */
        } else if (!strcmp(a, "--pooling")) {
            ok = v && (!strcmp(v, "mean") || !strcmp(v, "cls") || !strcmp(v, "last"));
            o.pooling = !ok || !strcmp(v, "mean") ? OX_POOLING_MEAN
                        : !strcmp(v, "cls")       ? OX_POOLING_CLS
                                                  : OX_POOLING_LAST;
        } else if (!strcmp(a, "--queue-size")) {
            ok = int_arg(a, v, 0, 1 << 20, &o.queue_size);
        } else if (!strcmp(a, "--timeout")) {
            ok = num_arg(a, v, 0.001, 1e6, &o.timeout);
        } else if (!strcmp(a, "--shutdown-timeout")) {
            ok = num_arg(a, v, 0, 1e6, &o.shutdown_timeout);
        } else if (!strcmp(a, "--http-threads")) {
            ok = int_arg(a, v, 1, 256, &o.http_threads);
        } else if (!strcmp(a, "--max-body")) {
            ok = int_arg(a, v, 1024, 1 << 30, &max_body);
            o.max_body = (size_t)max_body;
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
        } else if (!strcmp(a, "-ub") || !strcmp(a, "--ubatch-size")) {
            ok = int_arg(a, v, 1, 1 << 16, &o.n_ubatch);
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
            free(tmpl), free(keys);
            return 2;
        }
    }
    if (!o.model_path) {
        usage(stderr);
        free(tmpl), free(keys);
        return 2;
    }
    if (keys && o.n_api_keys == 0) {
        fprintf(stderr, "oxidize serve: the --api-key-file has no keys\n");
        free(tmpl), free(keys);
        return 2;
    }
    int rc = server_run(&o);
    free(tmpl), free(keys);
    return rc;
}
