/* sampling_opts.c: the sampling options of run (and chat) and the grammar or JSON schema that
 * constrains the output; the settings' defaults and their chain are apps/common/sampling.c. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "sampling_opts.h"

/* The options that constrain the output; only one may be given. */
static const char *const grammar_opts[] = {"--grammar-file", "--grammar", "--json-schema",
                                           "--json-schema-file"};

static int set_grammar(struct sampling_opts *o, const char *name, const char *value) {
    if (o->grammar_opt) {
        fprintf(stderr,
                "oxidize: %s: only one of --grammar-file, --grammar, --json-schema and "
                "--json-schema-file may be given (%s was)\n",
                name, o->grammar_opt);
        return -1;
    }
    o->grammar_opt = name, o->grammar_arg = value;
    return 1;
}

int sampling_opts_set(struct sampling_opts *o, const char *name, const char *value) {
    double x;
    if (!strcmp(name, "-j")) /* llama.cpp's short form */
        return set_grammar(o, "--json-schema", value);
    for (size_t i = 0; i < sizeof grammar_opts / sizeof grammar_opts[0]; i++)
        if (!strcmp(name, grammar_opts[i]))
            return set_grammar(o, grammar_opts[i], value);
    if (!strcmp(name, "--seed")) {
        if (!cmd_parse_number(value, 0, 4294967295.0, &x))
            return -1;
        o->seed = (uint32_t)x;
        return 1;
    }
    for (size_t i = 0; i < n_sampling_fields; i++) {
        const struct sampling_field *f = &sampling_fields[i];
        if (strcmp(name, f->option))
            continue;
        if (!cmd_parse_number(value, f->lo, f->hi, &x))
            return -1;
        sampling_field_set(o, f, x);
        return 1;
    }
    return 0;
}

enum ox_status sampling_opts_load(struct sampling_opts *o) {
    const char *opt = o->grammar_opt, *arg = o->grammar_arg;
    if (!opt || o->grammar)
        return OX_OK;
    bool is_file = !strcmp(opt, "--grammar-file") || !strcmp(opt, "--json-schema-file");
    bool is_schema = !strcmp(opt, "--json-schema") || !strcmp(opt, "--json-schema-file");
    size_t len = strlen(arg);
    char *text = is_file ? cmd_read_file(opt, arg, &len) : strdup(arg);
    if (!text) {
        if (!is_file)
            fprintf(stderr, "oxidize %s: out of memory\n", opt);
        return is_file ? OX_ERR_IO : OX_ERR_OOM;
    }
    if (!is_schema) {
        o->grammar = text, o->grammar_len = len;
        return OX_OK;
    }
    enum ox_status st = ox_json_schema_to_grammar(text, len, &o->grammar, &o->grammar_len);
    if (st != OX_OK)
        fprintf(stderr, "oxidize %s: %s%s%s\n", opt, is_file ? arg : "", is_file ? ": " : "",
                ox_last_error());
    free(text);
    return st;
}

void sampling_opts_free(struct sampling_opts *o) {
    free(o->grammar);
    o->grammar = NULL;
    o->grammar_len = 0;
}

const char *sampling_opts_usage(void) {
    return "  --temp T              temperature (default 0.8; 0 = greedy)\n"
           "  --top-k K             keep the K most likely tokens (default 40; 0 = all)\n"
           "  --top-p P             smallest set with probability P (default 0.95)\n"
           "  --min-p P             drop tokens below P x the best one's probability (0.05)\n"
           "  --typical P           locally typical sampling (default 1 = off)\n"
           "  --top-n-sigma N       drop logits below max - N stddev (default -1 = off)\n"
           "  --repeat-penalty R    over the last --repeat-last-n tokens (default 1 = off, 64;\n"
           "                        -1: the whole context)\n"
           "  --presence-penalty P, --frequency-penalty F   (default 0)\n"
           "  --dry-multiplier M    DRY repetition penalty (default 0 = off); --dry-base B\n"
           "                        (1.75), --dry-allowed-length N (2), --dry-penalty-last-n N\n"
           "                        (-1 = the context)\n"
           "  --xtc-probability P, --xtc-threshold T   exclude top choices (default 0, 0.1)\n"
           "  --mirostat N          1 or 2 (default 0 = off); --mirostat-lr (0.1),\n"
           "                        --mirostat-ent (5.0)\n"
           "  --seed S              random seed (default 1234)\n"
           "  --grammar-file F      constrain the output to a GBNF grammar (llama.cpp's format)\n"
           "  --grammar GBNF        the same, with the grammar given inline\n"
           "  -j, --json-schema SCHEMA   constrain the output to JSON matching a JSON Schema\n"
           "  --json-schema-file F  the same, with the schema read from a file\n"
           "                        (one of the four at most)\n";
}
