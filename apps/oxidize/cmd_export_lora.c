/* cmd_export_lora.c: `oxidize export-lora -m BASE --lora FILE ... -o OUT`: LoRA adapters merged
 * into a copy of their model (ox_lora_export; llama.cpp's export-lora). */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "oxidize.h"

static void usage(FILE *f) {
    fprintf(f, "usage: oxidize export-lora -m BASE.gguf --lora FILE [--lora-scaled FILE SCALE ...]"
               " -o OUT.gguf\n"
               "  Merge LoRA adapters into a copy of their base model: each weight they target\n"
               "  becomes W + scale * alpha / rank * B A (F16, or F32 where the base's is F32);\n"
               "  the rest is copied as it is. The result runs without --lora.\n");
}

int cmd_export_lora(int argc, char **argv) {
    const char *model = NULL, *out = NULL;
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v && !strcmp(argv[i], "-m"))
            model = v;
        else if (v && (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")))
            out = v;
        else {
            fprintf(stderr, "oxidize export-lora: bad option or value: '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!model || !out || cmd_lora_count() == 0) {
        fprintf(stderr, "oxidize export-lora: need -m BASE, -o OUT and at least one --lora\n");
        return 2;
    }
    struct ox_model_params mp = ox_model_params_default();
    mp.n_gpu_layers = 0; /* the merge reads the file's own bytes */
    struct ox_model *m = NULL;
    struct ox_lora *loras[CMD_LORA_MAX];
    float scales[CMD_LORA_MAX];
    enum ox_status st = ox_model_load(model, &mp, &m);
    if (st == OX_OK)
        st = cmd_lora_load(m);
    int n = st == OX_OK ? cmd_lora_loaded(loras, scales) : 0;
    if (st == OX_OK)
        st = ox_lora_export(m, loras, scales, n, out);
    if (st == OX_OK)
        printf("oxidize export-lora: wrote %s (%d adapter%s merged)\n", out, n, n == 1 ? "" : "s");
    else
        fprintf(stderr, "oxidize export-lora: %s\n", ox_last_error());
    ox_model_free(m);
    return st == OX_OK ? 0 : 1;
}
