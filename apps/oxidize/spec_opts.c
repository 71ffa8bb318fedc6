/* spec_opts.c: --spec ngram, -md / --model-draft, -ngld, --draft-max, --draft-min,
 * --draft-p-min, --spec-ngram-min/max: the drafter they ask for, and the step run and chat
 * generate with. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "spec_opts.h"

void spec_opts_default(struct spec_opts *o) {
    *o = (struct spec_opts){.draft_gpu_layers = -1, .p = ox_spec_params_default()};
}

int spec_opts_set(struct spec_opts *o, const char *name, const char *value) {
    double x;
    if (!strcmp(name, "--spec"))
        return strcmp(value, "ngram") ? -1 : (o->ngram = true, 1);
    if (!strcmp(name, "-md") || !strcmp(name, "--model-draft"))
        return (o->draft_path = value) != NULL;
    int *ints[] = {&o->draft_gpu_layers, &o->p.draft_max, &o->p.draft_min, &o->p.ngram_min,
                   &o->p.ngram_max};
    const char *int_names[] = {"-ngld", "--draft-max", "--draft-min", "--spec-ngram-min",
                               "--spec-ngram-max"};
    const double lo[] = {-1, 1, 0, 1, 1}, hi[] = {1 << 20, 256, 256, 64, 64};
    for (int i = 0; i < 5; i++)
        if (!strcmp(name, int_names[i]) || (i == 0 && !strcmp(name, "--gpu-layers-draft")) ||
            (i == 1 && (!strcmp(name, "--draft") || !strcmp(name, "--draft-n"))))
            return cmd_parse_number(value, lo[i], hi[i], &x) ? (*ints[i] = (int)x, 1) : -1;
    if (!strcmp(name, "--draft-p-min"))
        return cmd_parse_number(value, 0, 1, &x) ? (o->p.draft_p_min = (float)x, 1) : -1;
    return 0;
}

const char *spec_opts_usage(void) {
    return "speculative decoding (the output is plain decoding's, in fewer steps):\n"
           "  --spec ngram          draft by prompt lookup: what followed the last tokens\n"
           "                        where they appeared before\n"
           "  -md, --model-draft F  draft with a small model of the same vocabulary\n"
           "  -ngld N               the draft model's layers on the GPU (default -1: all)\n"
           "  --draft-max N         most tokens drafted a step (default 16)\n"
           "  --draft-min N         shorter drafts are not checked (default 0)\n"
           "  --draft-p-min P       the draft model stops below this probability (0.75)\n"
           "  --spec-ngram-min N, --spec-ngram-max N\n"
           "                        prompt lookup's suffix lengths (default 1..3)\n";
}

enum ox_status spec_opts_start(struct spec_opts *o, struct ox_context *ctx, const ox_token *tokens,
                               size_t n, struct ox_spec **out) {
    *out = NULL;
    if (!o->ngram && !o->draft_path)
        return OX_OK;
    if (o->draft_path && !o->draft) {
        struct ox_model_params mp = ox_model_params_default();
        mp.n_gpu_layers = o->draft_gpu_layers, mp.split_mode = OX_SPLIT_NONE; /* one GPU */
        enum ox_status st = ox_model_load(o->draft_path, &mp, &o->draft);
        if (st != OX_OK)
            return st;
    }
    o->p.draft_model = o->draft;
    enum ox_status st = ox_spec_create(ctx, 0, &o->p, out);
    if (st == OX_OK && (st = ox_spec_begin(*out, tokens, n)) != OX_OK) {
        ox_spec_free(*out);
        *out = NULL;
    }
    return st;
}

void spec_opts_report(const struct ox_spec *spec) {
    if (!spec)
        return;
    struct ox_spec_stats s;
    ox_spec_stats(spec, &s);
    fprintf(stderr,
            "speculative: %llu steps, %llu tokens drafted, %llu accepted (%.1f%%), %.2f "
            "tokens a step\n",
            (unsigned long long)s.steps, (unsigned long long)s.drafted,
            (unsigned long long)s.accepted,
            s.drafted ? 100.0 * (double)s.accepted / (double)s.drafted : 0.0,
            s.steps ? (double)(s.steps + s.accepted) / (double)s.steps : 0.0);
}

void spec_opts_free(struct spec_opts *o) {
    ox_model_free(o->draft);
    o->draft = NULL;
}

enum ox_status gen_step(struct ox_context *ctx, struct ox_sampler *smp, struct ox_spec *spec,
                        ox_token t, ox_token *out, int max, int *n_out) {
    if (spec)
        return ox_spec_step(spec, smp, t, out, max, n_out);
    *n_out = 0;
    struct ox_batch b = {.n_tokens = 1, .token = &t};
    enum ox_status st = ox_decode(ctx, &b);
    if (st != OX_OK)
        return st;
    const struct ox_model *m = ox_context_model(ctx);
    ox_token next = ox_sampler_sample(smp, ox_get_logits(ctx, 0), ox_model_n_vocab(m));
    out[(*n_out)++] = next;
    if (next >= 0 && !ox_vocab_is_eog(ox_model_vocab(m), next))
        return ox_sampler_accept(smp, next);
    return OX_OK;
}
