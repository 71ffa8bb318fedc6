/* lora_args.c: --lora FILE and --lora-scaled FILE SCALE (several, as llama.cpp's) among a model
 * command's arguments: taken out before the command parses the rest, then the adapters loaded
 * for its model and applied to each context it makes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"

static struct {
    const char *path[CMD_LORA_MAX];
    float scale[CMD_LORA_MAX];
    int n;
    const struct ox_model *model;       /* the model they were loaded for, */
    struct ox_lora *lora[CMD_LORA_MAX]; /* and theirs (freed with it) */
} named;

static int bad(const char *cmd, const char *what, const char *arg) {
    fprintf(stderr, "oxidize %s: %s '%s'\n", cmd, what, arg ? arg : "");
    return 2;
}

int cmd_lora_args(const char *cmd, int *argc, char **argv) {
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        bool plain = !strcmp(argv[i], "--lora"), scaled = !strcmp(argv[i], "--lora-scaled");
        if (!plain && !scaled) {
            argv[out++] = argv[i];
            continue;
        }
        int values = plain ? 1 : 2;
        if (i + values >= *argc)
            return bad(cmd, "missing value after", argv[i]);
        if (named.n == CMD_LORA_MAX)
            return bad(cmd, "at most 8 adapters, one too many:", argv[i + 1]);
        float scale = 1.0f;
        if (scaled) {
            char *end;
            scale = strtof(argv[i + 2], &end);
            if (!*argv[i + 2] || *end || !(scale >= -100.0f && scale <= 100.0f))
                return bad(cmd, "--lora-scaled: bad scale", argv[i + 2]);
        }
        named.path[named.n] = argv[i + 1], named.scale[named.n++] = scale;
        i += values;
    }
    argv[out] = NULL;
    *argc = out;
    return -1;
}

int cmd_lora_count(void) {
    return named.n;
}

enum ox_status cmd_lora_load(struct ox_model *m) {
    for (int i = 0; i < named.n; i++) {
        enum ox_status st = ox_lora_load(m, named.path[i], &named.lora[i]);
        if (st != OX_OK) /* the command prints ox_last_error(), which names the file */
            return st;
    }
    named.model = m;
    return OX_OK;
}

enum ox_status cmd_lora_apply(struct ox_context *ctx) {
    for (int i = 0; i < named.n && named.model; i++) {
        enum ox_status st = ox_context_set_lora(ctx, named.lora[i], named.scale[i]);
        if (st != OX_OK)
            return st;
    }
    return OX_OK;
}

void cmd_lora_named(int i, const char **path, float *scale) {
    *path = i >= 0 && i < named.n ? named.path[i] : NULL;
    *scale = i >= 0 && i < named.n ? named.scale[i] : 0.0f;
}

int cmd_lora_loaded(struct ox_lora **loras, float *scales) {
    for (int i = 0; i < named.n && named.model; i++)
        loras[i] = named.lora[i], scales[i] = named.scale[i];
    return named.model ? named.n : 0;
}
