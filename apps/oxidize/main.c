/* main.c: the oxidize command-line binary: dispatches `oxidize <command> [args]`. */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "oxidize.h"

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

#ifndef OX_HAVE_SERVER
/* The build had no libmicrohttpd (apps/server/CMakeLists.txt). */
static int cmd_serve_missing(int argc, char **argv) {
    (void)argc, (void)argv;
    fprintf(stderr, "oxidize serve: this build has no HTTP server (libmicrohttpd was not "
                    "installed when it was configured)\n");
    return 1;
}
#define cmd_serve cmd_serve_missing
#endif

/* New subcommands (run, chat, serve, bench ...) are one line here plus their file. */
static const struct command commands[] = {
    {"run", cmd_run, "generate text from a prompt"},
    {"chat", cmd_chat, "chat with a model in its chat template"},
    {"serve", cmd_serve, "an HTTP server with OpenAI's and llama.cpp's APIs"},
    {"bench", cmd_bench, "measure prompt and generation speed (llama-bench's method)"},
    {"chat-template", cmd_chat_template, "render a conversation with a chat template"},
    {"embed", cmd_embed, "print a text's embedding (pooled final hidden states) as JSON"},
    {"info", cmd_info, "show a GGUF file's metadata, tokenizer and tensors"},
    {"logits", cmd_logits, "write a model's logits for given tokens (for checking)"},
    {"perplexity", cmd_perplexity, "measure perplexity on a text (llama.cpp's method)"},
    {"quantize", cmd_quantize, "quantize a model file (Q4_K_M, Q8_0, IQ4_XS, ...)"},
    {"tokenize", cmd_tokenize, "print the tokens of a text for a model's tokenizer"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
    fprintf(f, "usage: oxidize <command> [args]\n"
               "       oxidize --help | --version\n\n"
               "commands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nRun 'oxidize <command> --help' for a command's options.\n");
}

static int print_version(void) {
    char features[512], caches[128];
    ox_cpu_features(features, sizeof features);
    printf("oxidize %s\n", OX_VERSION_STRING);
    printf("cpu: %s\n", features[0] ? features : "(no optional features)");
    printf("isa: %s\n", ox_cpu_isa());
    ox_cpu_caches(caches, sizeof caches);
    printf("cache: %s\n", caches);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (!strcmp(name, "--help") || !strcmp(name, "-h") || !strcmp(name, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(name, "--version") || !strcmp(name, "-V"))
        return print_version();
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(name, commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "oxidize: unknown command '%s'\n\n", name);
    usage(stderr);
    return 2;
}
