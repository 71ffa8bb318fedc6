/* main.c: the oxidize command-line binary: dispatches `oxidize <command> [args]`. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "git_commit.h" /* OX_GIT_COMMIT, written at build time */
#include "oxidize.h"

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
    bool takes_hf; /* loads a model: -hf REPO[:QUANT] stands for -m, and --lora applies */
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

#ifndef OX_HAVE_HUB
/* The build had no libcurl (apps/hub/CMakeLists.txt). */
static int cmd_hub_missing(int argc, char **argv) {
    (void)argc;
    fprintf(stderr,
            "oxidize %s: this build cannot download models (libcurl was not installed "
            "when it was configured)\n",
            argv[0]);
    return 1;
}
#define cmd_pull cmd_hub_missing
#define cmd_list cmd_hub_missing
#define cmd_rm   cmd_hub_missing
int cmd_hub_args(const char *cmd, int *argc, char ***argv) {
    for (int i = 1; i < *argc; i++)
        if (!strcmp((*argv)[i], "-hf") || !strcmp((*argv)[i], "--hf-repo")) {
            fprintf(stderr, "oxidize %s: -hf: this build cannot download models (no libcurl)\n",
                    cmd);
            return 1;
        }
    return -1;
}
#endif

/* New subcommands (run, chat, serve, bench ...) are one line here plus their file. */
static const struct command commands[] = {
    {"run", cmd_run, "generate text from a prompt", true},
    {"chat", cmd_chat, "chat with a model in its chat template", true},
    {"serve", cmd_serve, "an HTTP server with OpenAI's and llama.cpp's APIs", true},
    {"bench", cmd_bench, "measure prompt and generation speed (llama-bench's method)", true},
    {"chat-template", cmd_chat_template, "render a conversation with a chat template", false},
    {"embed", cmd_embed, "print a text's embedding (pooled final hidden states) as JSON", true},
    {"info", cmd_info, "show a GGUF file's metadata, tokenizer and tensors", false},
    {"logits", cmd_logits, "write a model's logits for given tokens (for checking)", false},
    {"perplexity", cmd_perplexity, "measure perplexity on a text (llama.cpp's method)", true},
    {"quantize", cmd_quantize, "quantize a model file (Q4_K_M, Q8_0, IQ4_XS, ...)", false},
    {"export-lora", cmd_export_lora, "merge LoRA adapters into a copy of a model", false},
    {"pull", cmd_pull, "download a GGUF model from the Hugging Face Hub into the cache", false},
    {"list", cmd_list, "list the models in the cache", false},
    {"rm", cmd_rm, "delete models from the cache", false},
    {"tokenize", cmd_tokenize, "print the tokens of a text for a model's tokenizer", false},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
    fprintf(f, "usage: oxidize <command> [args]\n"
               "       oxidize --help | --version\n\n"
               "commands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nGPUs, with any command that loads a model:\n"
               "  -dev, --device cuda|vulkan[:N]|none  the GPU backend (default: OX_DEVICE's, "
               "else CUDA where built)\n"
               "  -sm, --split-mode auto|none|layer|row  auto (default): rows where the model "
               "splits so, else layers\n"
               "  -ts, --tensor-split A,B,...  the GPUs' shares     -mg, --main-gpu N  rank 0's "
               "GPU\n"
               "  --dist-addr HOST:PORT --dist-rank R --dist-world N  one process a GPU (NCCL)\n"
               "\nRun 'oxidize <command> --help' for a command's options.\n");
}

static int print_version(void) {
    char features[512], caches[128], backends[128];
    ox_cpu_features(features, sizeof features);
    ox_backends(backends, sizeof backends);
    printf("oxidize %s (commit %s)\n", OX_VERSION_STRING, OX_GIT_COMMIT);
    printf("backends: %s\n", backends);
    printf("cpu: %s\n", features[0] ? features : "(no optional features)");
    printf("isa: %s\n", ox_cpu_isa());
    ox_cpu_caches(caches, sizeof caches);
    printf("cache: %s\n", caches);
    return 0;
}

/* Edits (insertions, deletions, substitutions) between a and b, up to 31 bytes each. */
static int edit_distance(const char *a, const char *b) {
    int row[32], n = (int)strlen(b);
    if (strlen(a) > 31 || n > 31)
        return 99;
    for (int j = 0; j <= n; j++)
        row[j] = j;
    for (int i = 1; a[i - 1]; i++) {
        int diag = row[0];
        row[0] = i;
        for (int j = 1; j <= n; j++) {
            int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            best = up + 1 < best ? up + 1 : best;
            best = row[j - 1] + 1 < best ? row[j - 1] + 1 : best;
            diag = up, row[j] = best;
        }
    }
    return row[n];
}

/* The command a mistyped name most likely meant: the nearest within two edits, or one it
 * begins; NULL when none is that close. */
static const char *nearest_command(const char *name) {
    const char *best = NULL;
    int best_d = 3;
    for (size_t i = 0; i < N_COMMANDS; i++) {
        int d = edit_distance(name, commands[i].name);
        if (*name && !strncmp(commands[i].name, name, strlen(name)))
            d = d < 1 ? d : 1;
        if (d < best_d)
            best = commands[i].name, best_d = d;
    }
    return best;
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
    for (size_t i = 0; i < N_COMMANDS; i++) {
        if (strcmp(name, commands[i].name) != 0)
            continue;
        int sub_argc = argc - 1;
        char **sub_argv = argv + 1;
        int rc = commands[i].takes_hf ? cmd_hub_args(name, &sub_argc, &sub_argv) : -1;
        if (rc < 0 && (commands[i].takes_hf || commands[i].run == cmd_export_lora))
            rc = cmd_lora_args(name, &sub_argc, sub_argv); /* --lora, --lora-scaled */
        if (rc < 0 && commands[i].takes_hf)
            rc = cmd_split_args(name, &sub_argc, sub_argv); /* -sm, -ts, -mg, --dist-* */
        if (rc < 0 && commands[i].takes_hf)
            rc = cmd_split_follow(name, sub_argc, sub_argv); /* ranks 1 and up */
        return rc >= 0 ? rc : commands[i].run(sub_argc, sub_argv);
    }
    const char *guess = nearest_command(name);
    if (guess)
        fprintf(stderr, "oxidize: unknown command '%s'; did you mean '%s'?\n\n", name, guess);
    else
        fprintf(stderr, "oxidize: unknown command '%s'\n\n", name);
    usage(stderr);
    return 2;
}
