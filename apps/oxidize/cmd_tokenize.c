/* cmd_tokenize.c: `oxidize tokenize -m MODEL (-p TEXT | -f FILE)`: a model's tokens for a text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "oxidize.h"

struct tokenize_opts {
    const char *model, *prompt, *file;
    bool no_bos, parse_special, ids_only;
};

static void usage(FILE *f) {
    fprintf(f, "usage: oxidize tokenize -m MODEL.gguf [--no-bos] [--parse-special] [--ids]\n"
               "                        (-p TEXT | -f FILE)\n"
               "  Print the tokens of TEXT (or of FILE's contents), one 'id -> piece' per line.\n"
               "  --no-bos         do not add the BOS/EOS tokens the model asks for\n"
               "  --parse-special  control tokens written in the text (<|im_end|>) become tokens\n"
               "  --ids            print only the ids, as one JSON array on one line\n");
}

/* Returns -1 to go on, else an exit status. */
static int parse_args(int argc, char **argv, struct tokenize_opts *o) {
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **value = !strcmp(a, "-m") || !strcmp(a, "--model")    ? &o->model
                             : !strcmp(a, "-p") || !strcmp(a, "--prompt") ? &o->prompt
                             : !strcmp(a, "-f") || !strcmp(a, "--file")   ? &o->file
                                                                          : NULL;
        if (value && i + 1 < argc)
            *value = argv[++i];
        else if (!strcmp(a, "--no-bos"))
            o->no_bos = true;
        else if (!strcmp(a, "--parse-special"))
            o->parse_special = true;
        else if (!strcmp(a, "--ids"))
            o->ids_only = true;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "oxidize tokenize: unknown option or missing value: '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!o->model || (!o->prompt == !o->file)) {
        fprintf(stderr, "oxidize tokenize: need -m MODEL and exactly one of -p TEXT / -f FILE\n");
        usage(stderr);
        return 2;
    }
    return -1;
}

/* A piece between quotes, with control bytes escaped so each token stays on one line. */
static void print_piece(const char *p, int32_t n) {
    putchar('\'');
    for (int32_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '\n')
            fputs("\\n", stdout);
        else if (c == '\t')
            fputs("\\t", stdout);
        else if (c < 0x20 || c == 0x7f)
            printf("\\x%02x", c);
        else
            putchar(c);
    }
    putchar('\'');
}

static void print_tokens(const struct ox_vocab *v, const ox_token *ids, size_t n, bool ids_only) {
    if (ids_only) {
        putchar('[');
        for (size_t i = 0; i < n; i++)
            printf("%s%d", i ? ", " : "", (int)ids[i]);
        puts("]");
        return;
    }
    char piece[4096];
    for (size_t i = 0; i < n; i++) {
        int32_t len = ox_token_to_piece(v, ids[i], piece, sizeof piece, 0, true);
        printf("%6d -> ", (int)ids[i]);
        print_piece(piece, len < (int32_t)sizeof piece ? len : (int32_t)sizeof piece);
        putchar('\n');
    }
}

int cmd_tokenize(int argc, char **argv) {
    struct tokenize_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    size_t len = o.prompt ? strlen(o.prompt) : 0;
    char *text = o.file ? cmd_read_file("tokenize", o.file, &len) : NULL;
    if (o.file && !text)
        return 1;
    struct ox_vocab *v = NULL;
    ox_token *ids = NULL;
    size_t n = 0;
    enum ox_status s = ox_vocab_load(o.model, &v);
    const char *t = o.prompt ? o.prompt : text;
    if (s == OX_OK)
        s = ox_tokenize(v, t, len, NULL, 0, &n, !o.no_bos, o.parse_special);
    if (s == OX_OK && !(ids = malloc((n ? n : 1) * sizeof *ids)))
        s = OX_ERR_OOM;
    if (s == OX_OK)
        s = ox_tokenize(v, t, len, ids, n, &n, !o.no_bos, o.parse_special);
    if (s == OX_OK)
        print_tokens(v, ids, n, o.ids_only);
    else
        fprintf(stderr, "oxidize tokenize: %s\n", ox_last_error());
    free(ids);
    free(text);
    ox_vocab_free(v);
    return s == OX_OK ? 0 : 1;
}
