/* cmd_hub.c: `oxidize pull REPO[:QUANT|/FILE]`, `oxidize list`, `oxidize rm REF`, and `-hf
 * REPO[:QUANT]` for the commands that load a model (turned into -m with the cached file). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "hub/hub.h"

static void pull_usage(FILE *f) {
    fprintf(f,
            "usage: oxidize pull REPO[:QUANT] | REPO/FILE [--hf-token TOKEN]\n"
            "  downloads a GGUF model from the Hugging Face Hub into the cache and prints its\n"
            "  path last (QUANT picks the file by name, e.g. Q4_K_M; default Q4_K_M, else the\n"
            "  repository's only model). Cache: OX_CACHE, else $XDG_CACHE_HOME/oxidize, else\n"
            "  ~/.cache/oxidize. HF_TOKEN (or --hf-token) for gated repositories, HF_ENDPOINT\n"
            "  for a mirror. An interrupted pull resumes where it stopped.\n"
            "       oxidize list                  what the cache holds\n"
            "       oxidize rm REPO[:QUANT|/FILE] delete a repository's (or one model's) files\n");
}

/* Options shared by pull and rm: the reference and --hf-token. */
static int parse(const char *cmd, int argc, char **argv, struct hub_opts *o, const char **ref) {
    char err[256];
    if (!hub_opts_init(o, err, sizeof err)) {
        fprintf(stderr, "oxidize %s: %s\n", cmd, err);
        return 1;
    }
    *ref = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            pull_usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--hf-token") && i + 1 < argc)
            o->token = argv[++i];
        else if (!*ref && argv[i][0] != '-')
            *ref = argv[i];
        else {
            fprintf(stderr, "oxidize %s: bad argument '%s'\n", cmd, argv[i]);
            pull_usage(stderr);
            return 2;
        }
    }
    if (!*ref) {
        pull_usage(stderr);
        return 2;
    }
    return -1;
}

int cmd_pull(int argc, char **argv) {
    struct hub_opts o;
    const char *ref;
    int rc = parse("pull", argc, argv, &o, &ref);
    if (rc >= 0)
        return rc;
    char err[2048], **paths = NULL;
    int n = hub_fetch(&o, ref, false, &paths, err, sizeof err);
    if (n < 0) {
        fprintf(stderr, "oxidize pull: %s\n", err);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        printf("%s\n", paths[i]);
        free(paths[i]);
    }
    free(paths);
    return 0;
}

int cmd_rm(int argc, char **argv) {
    struct hub_opts o;
    const char *ref;
    int rc = parse("rm", argc, argv, &o, &ref);
    if (rc >= 0)
        return rc;
    char err[2048];
    int n = hub_remove(&o, ref, err, sizeof err);
    if (n < 0) {
        fprintf(stderr, "oxidize rm: %s\n", err);
        return 1;
    }
    printf("removed %d file%s\n", n, n == 1 ? "" : "s");
    return 0;
}

int cmd_list(int argc, char **argv) {
    (void)argv;
    struct hub_opts o;
    char err[256];
    if (argc > 1) {
        pull_usage(argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) ? stdout
                                                                                      : stderr);
        return strcmp(argv[1], "-h") && strcmp(argv[1], "--help") ? 2 : 0;
    }
    if (!hub_opts_init(&o, err, sizeof err)) {
        fprintf(stderr, "oxidize list: %s\n", err);
        return 1;
    }
    if (hub_list(&o, stdout) == 0)
        fprintf(stderr, "oxidize list: the cache (%s) holds no models\n", o.cache);
    return 0;
}

int cmd_hub_args(const char *cmd, int *argc, char ***argv) {
    char **in = *argv;
    int hf = -1, token = -1;
    for (int i = 1; i + 1 < *argc; i++) {
        if (!strcmp(in[i], "-hf") || !strcmp(in[i], "--hf-repo"))
            hf = i;
        else if (!strcmp(in[i], "--hf-token"))
            token = i;
    }
    if (hf < 0)
        return -1; /* nothing to do; --hf-token alone is the command's to refuse */
    struct hub_opts o;
    char err[2048], **paths = NULL;
    if (!hub_opts_init(&o, err, sizeof err)) {
        fprintf(stderr, "oxidize %s: %s\n", cmd, err);
        return 1;
    }
    if (token > 0)
        o.token = in[token + 1];
    int n = hub_fetch(&o, in[hf + 1], true, &paths, err, sizeof err);
    if (n < 0) {
        fprintf(stderr, "oxidize %s: %s\n", cmd, err);
        return 1;
    }
    for (int i = 1; i < n; i++) /* a split model loads from its first part */
        free(paths[i]);
    /* the same arguments with -hf REF as -m PATH and without --hf-token, kept (reachable from
     * here) until the process ends */
    static char **out;
    out = calloc((size_t)*argc + 1, sizeof *out);
    if (!out)
        return 1;
    int m = 0;
    for (int i = 0; i < *argc; i++) {
        if (i == token) {
            i++;
            continue;
        }
        if (i == hf) {
            out[m++] = "-m";
            out[m++] = paths[0];
            i++;
            continue;
        }
        out[m++] = in[i];
    }
    free(paths); /* paths[0] lives on in out */
    *argc = m, *argv = out;
    return -1;
}
