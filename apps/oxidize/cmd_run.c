/* cmd_run.c: `oxidize run -m MODEL -p PROMPT`: generate text, streamed as it is produced. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat_session.h"
#include "cmd.h"
#include "oxidize.h"
#include "sampling_opts.h"
#include "spec_opts.h"
#include "common/stop_filter.h"

struct run_opts {
    const char *model, *prompt, *file, *system, *chat_template;
    const char *prompt_cache; /* a saved prompt's state, reused and (unless ro) rewritten */
    bool chat, prompt_cache_ro, context_shift;
    int n_keep; /* tokens of the prompt a context shift keeps (-1: all) */
    int n_predict, n_ctx, n_threads, n_gpu_layers;
    struct sampling_opts sampling;
    struct spec_opts spec;
    const char *stop[STOP_MAX];
    int n_stop;
};

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: oxidize run -m MODEL.gguf (-p PROMPT | -f FILE) [options]\n"
        "  -n N                  tokens to generate (default 128; stops at end of text)\n"
        "  -c CTX                context size in tokens (default 2048, at most the model's)\n"
        "  -t THREADS            threads (default: the physical cores)\n"
        "  -ngl N                layers on the GPU (default -1: all when there is one; 0: CPU)\n"
        CMD_SPLIT_USAGE
        "  --prompt-cache FILE   reuse the state of a prompt that began as this one, saved there\n"
        "                        by an earlier run, and save this prompt's (made when missing)\n"
        "  --prompt-cache-ro     read the prompt cache, do not rewrite it\n"
        "  --context-shift       when the context is full, drop half of what follows the\n"
        "                        --keep N first prompt tokens (-1: all) and go on\n"
        "  --lora FILE           apply a LoRA adapter (GGUF); --lora-scaled FILE SCALE at a\n"
        "                        scale of its own; several may be given\n"
        "%s%s",
        sampling_opts_usage(), spec_opts_usage());
}

/* One option with a value; returns false for an unknown option or a bad value. */
static bool set_option(struct run_opts *o, const char *a, const char *v) {
    double x;
    int sampling = sampling_opts_set(&o->sampling, a, v);
    if (sampling != 0)
        return sampling > 0;
    int spec = spec_opts_set(&o->spec, a, v);
    if (spec != 0)
        return spec > 0;
    if (!strcmp(a, "-m"))
        return (o->model = v) != NULL;
    if (!strcmp(a, "-p"))
        return (o->prompt = v) != NULL;
    if (!strcmp(a, "-f"))
        return (o->file = v) != NULL;
    if (!strcmp(a, "-sys") || !strcmp(a, "--system"))
        return (o->system = v) != NULL;
    if (!strcmp(a, "--chat-template"))
        return (o->chat_template = v) != NULL;
    if (!strcmp(a, "--prompt-cache"))
        return (o->prompt_cache = v) != NULL;
    if (!strcmp(a, "--stop") && o->n_stop < STOP_MAX && *v)
        return (o->stop[o->n_stop++] = v) != NULL;
    if (!strcmp(a, "-n") && cmd_parse_number(v, 0, 1 << 24, &x))
        return (o->n_predict = (int)x), true;
    if (!strcmp(a, "-c") && cmd_parse_number(v, 8, 1 << 24, &x))
        return (o->n_ctx = (int)x), true;
    if (!strcmp(a, "--keep") && cmd_parse_number(v, -1, 1 << 24, &x))
        return (o->n_keep = (int)x), true;
    if (!strcmp(a, "-t") && cmd_parse_number(v, 1, 1024, &x))
        return (o->n_threads = (int)x), true;
    if ((!strcmp(a, "-ngl") || !strcmp(a, "--n-gpu-layers")) &&
        cmd_parse_number(v, -1, 1 << 20, &x))
        return (o->n_gpu_layers = (int)x), true;
    return false;
}

/* Returns -1 to go on, else an exit status. */
static int parse_args(int argc, char **argv, struct run_opts *o) {
    *o = (struct run_opts){.n_predict = 128, .n_ctx = 2048, .n_gpu_layers = -1};
    sampling_opts_default(&o->sampling);
    spec_opts_default(&o->spec);
    for (int i = 1; i < argc; i += 2) { /* every option but --chat takes a value */
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--chat") || !strcmp(argv[i], "--prompt-cache-ro") ||
            !strcmp(argv[i], "--context-shift")) {
            *(!strcmp(argv[i], "--chat")            ? &o->chat
              : !strcmp(argv[i], "--context-shift") ? &o->context_shift
                                                    : &o->prompt_cache_ro) = true;
            i--;
            continue;
        }
        if (i + 1 >= argc || !set_option(o, argv[i], argv[i + 1])) {
            fprintf(stderr, "oxidize run: bad option or value: '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!o->model || !o->prompt == !o->file) {
        fprintf(stderr, "oxidize run: need -m MODEL and exactly one of -p PROMPT / -f FILE\n");
        return 2;
    }
    return -1;
}

struct session {
    struct ox_model *model;
    struct ox_context *ctx;
    struct ox_sampler *sampler;
    struct ox_spec *spec; /* a drafter (--spec ngram, -md), or NULL */
    struct ox_detok_stream *stream;
    ox_token *prompt;
    size_t n_prompt;
    char *chat_text; /* --chat: the rendered conversation */
};

/* --chat: the prompt as a user message (after an optional system one) in the chat template. */
static enum ox_status chat_prompt(struct session *s, const struct run_opts *o, const char *text) {
    size_t tlen;
    char *tmpl = o->chat_template ? cmd_read_file("run", o->chat_template, &tlen) : NULL;
    if (o->chat_template && !tmpl)
        return OX_ERR_IO;
    struct ox_chat_message msgs[2] = {{"system", o->system}, {"user", text}};
    int first = o->system ? 0 : 1;
    enum ox_status st =
        chat_render(s->model, tmpl, msgs + first, (size_t)(2 - first), true, &s->chat_text, &tlen);
    free(tmpl);
    return st;
}

static enum ox_status setup(struct session *s, const struct run_opts *o, const char *text) {
    struct ox_model_params mp = ox_model_params_default();
    cmd_split_apply(&mp);
    mp.n_gpu_layers = o->n_gpu_layers;
    CMD_TRY(ox_model_load(o->model, &mp, &s->model));
    CMD_TRY(cmd_lora_load(s->model));
    const struct ox_vocab *v = ox_model_vocab(s->model);
    CMD_TRY(cmd_context_create(s->model, o->n_ctx, o->n_threads, &s->ctx));
    CMD_TRY(cmd_lora_apply(s->ctx));
    uint32_t n_ctx = ox_context_n_ctx(s->ctx);
    CMD_TRY(sampling_opts_chain(&o->sampling, s->model, (int32_t)n_ctx, &s->sampler));
    CMD_TRY(ox_detok_stream_create(v, false, &s->stream));
    bool special = false, add_bos = true;
    if (o->chat) { /* the template's rendering, whose special tokens are parsed as such */
        CMD_TRY(chat_prompt(s, o, text));
        text = s->chat_text, special = true;
        add_bos = !chat_starts_with_bos(v, text);
    }
    size_t len = strlen(text), n = 0;
    CMD_TRY(ox_tokenize(v, text, len, NULL, 0, &n, add_bos, special));
    s->prompt = malloc((n ? n : 1) * sizeof *s->prompt);
    if (!s->prompt)
        return OX_ERR_OOM;
    CMD_TRY(ox_tokenize(v, text, len, s->prompt, n, &s->n_prompt, add_bos, special));
    for (size_t i = 0; i < s->n_prompt; i++) /* penalties count the prompt, as llama.cpp's */
        CMD_TRY(ox_sampler_accept_prompt(s->sampler, s->prompt[i]));
    if (s->n_prompt == 0 || s->n_prompt >= n_ctx) {
        fprintf(stderr, "oxidize run: the prompt is %zu tokens; the context holds %u\n",
                s->n_prompt, n_ctx);
        return OX_ERR_CONTEXT_FULL;
    }
    return OX_OK;
}

/* --prompt-cache: the tokens at the front of the prompt whose state the file holds, loaded
 * into the context (the rest of the cached state dropped); at least the prompt's last token is
 * decoded again, for its logits. 0 when there is no usable cache (a warning says why). */
static size_t prompt_cache_load(struct session *s, const struct run_opts *o) {
    if (!o->prompt_cache || access(o->prompt_cache, F_OK) != 0)
        return 0;
    size_t cap = ox_context_n_ctx(s->ctx), n = 0, same = 0;
    ox_token *cached = malloc(cap * sizeof *cached);
    if (!cached || ox_state_seq_load_file(s->ctx, 0, o->prompt_cache, cached, cap, &n) != OX_OK) {
        fprintf(stderr, "oxidize run: prompt cache %s not used: %s\n", o->prompt_cache,
                cached ? ox_last_error() : "out of memory");
        ox_kv_seq_rm(s->ctx, 0, -1, -1);
        free(cached);
        return 0;
    }
    while (same < n && same < s->n_prompt && cached[same] == s->prompt[same])
        same++;
    if (same == s->n_prompt)
        same--;
    ox_kv_seq_rm(s->ctx, 0, (int32_t)same, -1);
    free(cached);
    return same;
}

/* --context-shift: the sequence keeps its first --keep prompt tokens (and a leading BOS), loses
 * half of the rest, and what follows moves down (the keys rotated to their new positions), as
 * llama-cli does. False when nothing can go (or the model's recurrent state went with it). */
static bool context_shift(struct session *s, const struct run_opts *o) {
    int32_t keep =
        o->n_keep < 0 || (size_t)o->n_keep > s->n_prompt ? (int32_t)s->n_prompt : o->n_keep;
    if (keep == 0 && s->prompt[0] == ox_vocab_bos(ox_model_vocab(s->model)))
        keep = 1;
    return ox_kv_seq_shift(s->ctx, 0, keep) > 0;
}

/* The prompt, then a token (or a checked draft) at a time until EOS or the budget; text
 * streamed. */
/* The prompt in batches after what the prompt cache holds (*reused tokens), its state saved
 * back to the cache; *last: the batch row of its last token. */
static enum ox_status read_prompt(struct session *s, const struct run_opts *o, size_t *reused,
                                  size_t *last) {
    uint32_t n_batch = ox_context_n_ctx(s->ctx) < 512 ? ox_context_n_ctx(s->ctx) : 512;
    *reused = prompt_cache_load(s, o), *last = 0;
    for (size_t i = *reused; i < s->n_prompt; i += n_batch) {
        size_t n = s->n_prompt - i < n_batch ? s->n_prompt - i : n_batch;
        struct ox_batch b = {.n_tokens = (int32_t)n, .token = s->prompt + i};
        CMD_TRY(ox_decode(s->ctx, &b));
        *last = n - 1;
    }
    if (o->prompt_cache && !o->prompt_cache_ro &&
        ox_state_seq_save_file(s->ctx, 0, o->prompt_cache, s->prompt, s->n_prompt) != OX_OK)
        fprintf(stderr, "oxidize run: prompt cache not saved: %s\n", ox_last_error());
    return OX_OK;
}

static enum ox_status generate(struct session *s, struct run_opts *o) {
    double t0 = cmd_now_s();
    size_t reused, last;
    CMD_TRY(read_prompt(s, o, &reused, &last));
    CMD_TRY(spec_opts_start(&o->spec, s->ctx, s->prompt, s->n_prompt, &s->spec));
    double t1 = cmd_now_s();
    const struct ox_vocab *v = ox_model_vocab(s->model);
    int n_gen = 0;
    struct stop_filter stops = {.n_stop = o->n_stop};
    memcpy(stops.stop, o->stop, sizeof o->stop);
    /* the tokens sampled and not yet shown; the last of them is not yet decoded (a step gives
     * at most a draft of 256 and one more) */
    ox_token next[257];
    int n_next = 1;
    next[0] = ox_sampler_sample(s->sampler, ox_get_logits(s->ctx, (int32_t)last),
                                ox_model_n_vocab(s->model));
    if (next[0] >= 0 && !ox_vocab_is_eog(v, next[0]))
        CMD_TRY(ox_sampler_accept(s->sampler, next[0]));
    for (bool done = o->n_predict == 0; !done;) {
        for (int i = 0; i < n_next && !done; i++) {
            ox_token t = next[i];
            if (t < 0 || ox_vocab_is_eog(v, t))
                break;
            const char *piece;
            size_t len;
            if (ox_detok_stream_push(s->stream, t, &piece, &len) == OX_OK)
                done = stop_filter_push(&stops, piece, len, stdout), fflush(stdout);
            done |= ++n_gen == o->n_predict;
        }
        ox_token t = next[n_next - 1];
        if (done || t < 0 || ox_vocab_is_eog(v, t))
            break;
        enum ox_status st =
            gen_step(s->ctx, s->sampler, s->spec, t, next, o->n_predict - n_gen, &n_next);
        if (st == OX_ERR_CONTEXT_FULL && o->context_shift && context_shift(s, o))
            st = gen_step(s->ctx, s->sampler, s->spec, t, next, o->n_predict - n_gen, &n_next);
        if (st == OX_ERR_CONTEXT_FULL) {
            fprintf(stderr, "\noxidize run: the context is full (%u tokens)\n",
                    ox_context_n_ctx(s->ctx));
            break;
        }
        CMD_TRY(st);
    }
    const char *rest;
    size_t len;
    ox_detok_stream_flush(s->stream, &rest, &len);
    stop_filter_push(&stops, rest, len, stdout);
    stop_filter_finish(&stops, stdout);
    double t2 = cmd_now_s();
    printf("\n");
    fflush(stdout); /* the text's last line out before the stats (stderr is not buffered) */
    if (o->prompt_cache)
        fprintf(stderr, "prompt cache: %zu of %zu tokens reused\n", reused, s->n_prompt);
    fprintf(stderr, "prompt: %zu tokens, %.1f tokens/s; generation: %d tokens, %.1f tokens/s\n",
            s->n_prompt - reused, (double)(s->n_prompt - reused) / (t1 - t0), n_gen,
            n_gen / (t2 - t1 > 0 ? t2 - t1 : 1e-9));
    spec_opts_report(s->spec);
    return OX_OK;
}

int cmd_run(int argc, char **argv) {
    struct run_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    size_t text_len;
    char *text = o.file ? cmd_read_file("run", o.file, &text_len) : NULL;
    if (o.file && !text)
        return 1;
    if (sampling_opts_load(&o.sampling) != OX_OK) {
        free(text);
        return 1;
    }
    struct session s = {0};
    double t0 = cmd_now_s();
    enum ox_status st = setup(&s, &o, o.prompt ? o.prompt : text);
    if (st == OX_OK) {
        char desc[128];
        ox_model_desc(s.model, desc, sizeof desc);
        fprintf(stderr, "loaded %s in %.2f s (%s)\n", desc, cmd_now_s() - t0,
                ox_model_backend(s.model));
        if (!o.chat) /* the continuation reads on from the prompt; a chat answer stands alone */
            fputs(o.prompt ? o.prompt : text, stdout);
        st = generate(&s, &o);
    }
    if (st != OX_OK && st != OX_ERR_CONTEXT_FULL)
        fprintf(stderr, "oxidize run: %s\n", ox_last_error());
    free(s.prompt);
    free(s.chat_text);
    ox_detok_stream_free(s.stream);
    ox_spec_free(s.spec);
    spec_opts_free(&o.spec);
    ox_sampler_free(s.sampler);
    ox_context_free(s.ctx);
    ox_model_free(s.model);
    free(text);
    sampling_opts_free(&o.sampling);
    return st == OX_OK ? 0 : 1;
}
