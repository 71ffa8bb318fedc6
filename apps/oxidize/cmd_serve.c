/* cmd_serve.c: `oxidize serve -m MODEL`: the HTTP server (apps/server) with its options. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"
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
            CMD_SPLIT_USAGE
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
            "  --log-requests           a line on stderr per request: time, method, path,\n"
            "                           status, prompt+generated tokens, milliseconds\n"
            "  --slot-save-path DIR     POST /slots/N?action=save|restore keep slots' states\n"
            "                           in DIR (file names only)\n"
            "  --context-shift          a generation that fills its slot's context drops half\n"
            "                           of what follows the request's n_keep tokens and goes\n"
            "                           on (default: it ends there, finish_reason \"length\")\n"
            "  --embeddings             serve POST /v1/embeddings (a context of its own;\n"
            "                           always on for an embedding model such as BERT)\n"
            "  --pooling P              how embeddings pool the tokens: mean, cls, last, or\n"
            "                           rank (default: the model's pooling_type, else mean)\n"
            "  --reranking, --rerank    serve POST /v1/rerank with a reranker (--embeddings\n"
            "                           --pooling rank)\n"
            "  --lora FILE              apply a LoRA adapter (--lora-scaled FILE SCALE: at\n"
            "                           that scale); GET/POST /lora-adapters list and rescale\n"
            "  --spec ngram             speculative decoding by prompt lookup in every slot:\n"
            "                           the text is plain decoding's, in fewer steps (a\n"
            "                           request's \"speculative.n_max\": its own most, 0 none)\n"
            "  -md, --model-draft FILE  speculative decoding with a draft model of the same\n"
            "                           vocabulary (-ngld N: its layers on the GPU, default all;\n"
            "                           --draft-p-min P: it stops below P, default 0.75)\n"
            "  --draft-max N, --draft-min N, --spec-ngram-min N, --spec-ngram-max N\n"
            "                           drafts of at most / at least N tokens (default 16 / 0),\n"
            "                           the suffix lengths looked up (default 1..3)\n"
            "  --spec-max-slots N       draft only while at most N slots generate (default 4:\n"
            "                           a full step gains nothing from drafts)\n"
            "Endpoints: OpenAI's POST /v1/completions, /v1/chat/completions, /v1/embeddings\n"
            "(with --embeddings), GET /v1/models; llama.cpp's POST /completion, /tokenize,\n"
            "/detokenize, /apply-template, /v1/rerank (with --reranking; Jina's, Cohere's and\n"
            "TEI's forms), GET /health, /props, /slots, /metrics, GET and POST\n"
            "/lora-adapters.\n");
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

/* The integer options: two spellings, the range, and the field. */
struct int_option {
    const char *name, *alias;
    int lo, hi;
    size_t offset;
};
#define IO(name, alias, lo, hi, field)                                                             \
    { name, alias, lo, hi, offsetof(struct server_opts, field) }
static const struct int_option int_options[] = {
    IO("--port", "--port", 0, 65535, port),
    IO("-np", "--parallel", 1, OX_SEQ_MAX, n_parallel),
    IO("-c", "--ctx-size", 2, 1 << 24, n_ctx),
    IO("-b", "--batch-size", 1, 1 << 16, n_batch),
    IO("-ub", "--ubatch-size", 1, 1 << 16, n_ubatch),
    IO("-t", "--threads", 0, 1024, n_threads),
    IO("-ngl", "--n-gpu-layers", -1, 1 << 20, n_gpu_layers),
    IO("-ngld", "--gpu-layers-draft", -1, 1 << 20, draft_gpu_layers),
    IO("--queue-size", "--queue-size", 0, 1 << 20, queue_size),
    IO("--http-threads", "--http-threads", 1, 256, http_threads),
};
#undef IO

/* The options that take no value: each sets a flag. */
static const struct {
    const char *name;
    size_t offset;
} flag_options[] = {
    {"--log-requests", offsetof(struct server_opts, log_requests)},
    {"--context-shift", offsetof(struct server_opts, context_shift)},
    {"--embeddings", offsetof(struct server_opts, embeddings)},
};

/* The files options name, read into memory the options point at. */
struct serve_files {
    char *tmpl, *keys; /* --chat-template's and --api-key-file's text */
};

/* Option a with its value v (NULL: none left); false after printing why. *takes: whether it
 * took v. */
static bool set_option(struct server_opts *o, struct serve_files *f, const char *a, const char *v,
                       bool *takes) {
    *takes = true;
    for (size_t k = 0; k < sizeof int_options / sizeof int_options[0]; k++)
        if (!strcmp(a, int_options[k].name) || !strcmp(a, int_options[k].alias))
            return int_arg(a, v, int_options[k].lo, int_options[k].hi,
                           (int *)((char *)o + int_options[k].offset));
    size_t len;
    int max_body = 0;
    if (!strcmp(a, "-m") || !strcmp(a, "--model"))
        return (o->model_path = v) != NULL;
    if (!strcmp(a, "--host"))
        return (o->host = v) != NULL;
    if (!strcmp(a, "--slot-save-path"))
        return (o->slot_save_path = v) != NULL && *v;
    for (size_t k = 0; k < sizeof flag_options / sizeof flag_options[0]; k++)
        if (!strcmp(a, flag_options[k].name)) {
            *takes = false;
            *(bool *)((char *)o + flag_options[k].offset) = true;
            return true;
        }
    if (!strcmp(a, "--api-key")) {
        if (!v || !*v || o->n_api_keys == SERVER_MAX_KEYS)
            return false;
        o->api_keys[o->n_api_keys++] = v;
        return true;
    }
    if (!strcmp(a, "--api-key-file"))
        return !f->keys && v && (f->keys = cmd_read_file("serve", v, &len)) &&
               read_keys(o, f->keys);
    if (!strcmp(a, "--chat-template")) {
        free(f->tmpl);
        f->tmpl = v ? cmd_read_file("serve", v, &len) : NULL;
        return (o->chat_template = f->tmpl) != NULL;
    }
    if (!strcmp(a, "-ctk") || !strcmp(a, "--cache-type")) {
        bool ok = v && (!strcmp(v, "f16") || !strcmp(v, "f32") || !strcmp(v, "q8_0"));
        o->kv_type = !ok || !strcmp(v, "f16") ? OX_DTYPE_F16
                     : !strcmp(v, "f32")      ? OX_DTYPE_F32
                                              : OX_DTYPE_Q8_0;
        return ok;
    }
    if (!strcmp(a, "--reranking") || !strcmp(a, "--rerank")) { /* takes no value */
        *takes = false, o->embeddings = true, o->pooling = OX_POOLING_RANK;
        return true;
    }
    if (!strcmp(a, "--pooling")) {
        static const char *const names[] = {"none", "mean", "cls", "last", "rank"};
        for (int i = OX_POOLING_MEAN; v && i <= OX_POOLING_RANK; i++)
            if (!strcmp(v, names[i]))
                return (o->pooling = (enum ox_pooling)i), true;
        return false;
    }
    if (!strcmp(a, "--spec")) {
        o->spec = v && !strcmp(v, "ngram");
        if (!o->spec)
            fprintf(stderr, "oxidize serve: --spec takes ngram\n");
        return o->spec;
    }
    if (!strcmp(a, "-md") || !strcmp(a, "--model-draft"))
        return (o->draft_path = v) != NULL;
    if (!strcmp(a, "--draft-p-min")) {
        double p;
        bool ok = num_arg(a, v, 0, 1, &p);
        o->spec_p.draft_p_min = (float)p;
        return ok;
    }
    static const struct {
        const char *name;
        int lo, hi;
        size_t offset;
    } spec_ints[] = {
        {"--draft-max", 1, 256, offsetof(struct ox_spec_params, draft_max)},
        {"--draft-min", 0, 256, offsetof(struct ox_spec_params, draft_min)},
        {"--spec-ngram-min", 1, 64, offsetof(struct ox_spec_params, ngram_min)},
        {"--spec-ngram-max", 1, 64, offsetof(struct ox_spec_params, ngram_max)},
        {"--spec-max-slots", 0, OX_SEQ_MAX, offsetof(struct ox_spec_params, max_slots)}};
    for (size_t k = 0; k < sizeof spec_ints / sizeof spec_ints[0]; k++)
        if (!strcmp(a, spec_ints[k].name))
            return int_arg(a, v, spec_ints[k].lo, spec_ints[k].hi,
                           (int32_t *)((char *)&o->spec_p + spec_ints[k].offset));
    if (!strcmp(a, "--timeout"))
        return num_arg(a, v, 0.001, 1e6, &o->timeout);
    if (!strcmp(a, "--shutdown-timeout"))
        return num_arg(a, v, 0, 1e6, &o->shutdown_timeout);
    if (!strcmp(a, "--max-body")) {
        bool ok = int_arg(a, v, 1024, 1 << 30, &max_body);
        o->max_body = (size_t)max_body;
        return ok;
    }
    fprintf(stderr, "oxidize serve: unknown option %s\n", a);
    return false;
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
                            .pooling = OX_POOLING_NONE, /* the model's, else mean */
                            .draft_gpu_layers = -1,
                            .spec_p = ox_spec_params_default()};
    struct serve_files f = {0};
    bool ok = true, takes = false;
    for (int i = 1; ok && i < argc; i += 1 + takes) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
        ok = set_option(&o, &f, argv[i], i + 1 < argc ? argv[i + 1] : NULL, &takes);
    }
    o.placement = ox_model_params_default();
    cmd_split_apply(&o.placement); /* -sm, -ts, -mg, taken out by main.c */
    for (int i = 0; i < cmd_lora_count() && i < 8; i++) /* --lora, taken out by main.c */
        cmd_lora_named(i, &o.lora_path[i], &o.lora_scale[i]), o.n_lora = i + 1;
    if (ok && !o.model_path)
        ok = false;
    else if (ok && f.keys && o.n_api_keys == 0)
        fprintf(stderr, "oxidize serve: the --api-key-file has no keys\n"), ok = false;
    int rc = ok ? server_run(&o) : 2;
    if (!ok)
        usage(stderr);
    free(f.tmpl), free(f.keys);
    return rc;
}
