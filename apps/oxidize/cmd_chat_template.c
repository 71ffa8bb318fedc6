/* cmd_chat_template.c: `oxidize chat-template`: render a conversation (JSON) with a chat
 * template, as Hugging Face transformers would, and print exactly the result. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "oxidize.h"

struct ct_opts {
    const char *model, *template_file, *messages_file, *tools_file, *bos, *eos;
    bool generation_prompt;
    long long now;
};

static void usage(FILE *f) {
    fprintf(f, "usage: oxidize chat-template (--template FILE.jinja | -m MODEL.gguf) --messages "
               "FILE.json [options]\n"
               "  --messages F            a JSON array of messages ({\"role\", \"content\", ...})\n"
               "  --tools F               a JSON array of tool definitions\n"
               "  --no-generation-prompt  do not open the assistant's turn at the end\n"
               "  --bos S, --eos S        the token texts (default: the model's, else empty)\n"
               "  --now UNIX_TIME         what strftime_now() reports (default: the clock)\n"
               "Prints the rendering; a template that raises exits 1 with its message.\n");
}

/* Returns -1 to go on, else an exit status. */
static int parse_args(int argc, char **argv, struct ct_opts *o) {
    *o = (struct ct_opts){.generation_prompt = true};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--now") && v) {
            char *end;
            o->now = strtoll(v, &end, 10);
            if (*v == 0 || *end != 0 || o->now <= 0) {
                fprintf(stderr, "oxidize chat-template: bad --now '%s'\n", v);
                return 2;
            }
            i++;
            continue;
        }
        if (!strcmp(a, "--no-generation-prompt")) {
            o->generation_prompt = false;
            continue;
        }
        const char **slot = !strcmp(a, "-m")           ? &o->model
                            : !strcmp(a, "--template") ? &o->template_file
                            : !strcmp(a, "--messages") ? &o->messages_file
                            : !strcmp(a, "--tools")    ? &o->tools_file
                            : !strcmp(a, "--bos")      ? &o->bos
                            : !strcmp(a, "--eos")      ? &o->eos
                                                       : NULL;
        if (!slot || !v) {
            fprintf(stderr, "oxidize chat-template: bad option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        *slot = v, i++;
    }
    if (!o->messages_file || !o->template_file == !o->model) {
        fprintf(stderr, "oxidize chat-template: need --messages and one of --template / -m\n");
        return 2;
    }
    return -1;
}

/* A token's text with control tokens rendered, or "" (malloc'd). */
static char *token_text(const struct ox_vocab *v, ox_token t) {
    int32_t n = t >= 0 ? ox_token_to_piece(v, t, NULL, 0, 0, true) : 0;
    char *s = malloc(n > 0 ? (size_t)n + 1 : 1);
    if (s)
        s[n > 0 ? ox_token_to_piece(v, t, s, (size_t)n, 0, true) : 0] = '\0';
    return s;
}

int cmd_chat_template(int argc, char **argv) {
    struct ct_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    size_t len;
    char *tmpl = NULL, *messages = NULL, *tools = NULL, *bos = NULL, *eos = NULL, *out = NULL;
    struct ox_model *model = NULL;
    rc = 1;
    messages = cmd_read_file("chat-template", o.messages_file, &len);
    if (!messages ||
        (o.tools_file && !(tools = cmd_read_file("chat-template", o.tools_file, &len))))
        goto done;
    if (o.template_file) {
        if (!(tmpl = cmd_read_file("chat-template", o.template_file, &len)))
            goto done;
    } else {
        struct ox_model_params mp = ox_model_params_default();
        if (ox_model_load(o.model, &mp, &model) != OX_OK) {
            fprintf(stderr, "oxidize chat-template: %s\n", ox_last_error());
            goto done;
        }
        const char *t = ox_model_chat_template(model, NULL);
        if (!t) {
            fprintf(stderr, "oxidize chat-template: the model has no chat template\n");
            goto done;
        }
        tmpl = strdup(t);
        const struct ox_vocab *v = ox_model_vocab(model);
        bos = token_text(v, ox_vocab_bos(v)), eos = token_text(v, ox_vocab_eos(v));
    }
    if (ox_chat_render_json(tmpl, messages, tools, o.generation_prompt, o.bos ? o.bos : bos,
                            o.eos ? o.eos : eos, o.now, &out, &len) != OX_OK) {
        fprintf(stderr, "oxidize chat-template: %s\n", ox_last_error());
        goto done;
    }
    fwrite(out, 1, len, stdout);
    rc = 0;
done:
    free(out), free(tmpl), free(messages), free(tools), free(bos), free(eos);
    ox_model_free(model);
    return rc;
}
