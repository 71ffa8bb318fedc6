/* cmd_chat.c: `oxidize chat -m MODEL`: an interactive conversation in the model's chat template,
 * keeping the KV cache across turns; Ctrl-C stops an answer, Ctrl-D exits. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat_file.h"
#include "chat_session.h"
#include "cmd.h"
#include "oxidize.h"
#include "sampling_opts.h"
#include "spec_opts.h"

struct chat_opts {
    const char *model, *system, *chat_template;
    int n_predict, n_ctx, n_threads, n_gpu_layers;
    struct sampling_opts sampling;
    struct spec_opts spec;
    const char *stop[STOP_MAX];
    int n_stop;
};

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: oxidize chat -m MODEL.gguf [options]\n"
        "  -sys, --system TEXT   system prompt\n"
        "  --chat-template F     a Jinja chat template file instead of the model's own\n"
        "  --stop S              end an answer before S (repeatable)\n"
        "  -n N                  most tokens per answer (default -1: until end of turn)\n"
        "  -c CTX                context size in tokens (default 4096, at most the model's)\n"
        "  -t THREADS            threads (default: the physical cores)\n"
        "  -ngl N                layers on the GPU (default -1: all when there is one; 0: CPU)\n"
        CMD_SPLIT_USAGE
        "%s%s"
        "In the chat: end a line with \\ to continue it, or wrap lines in \"\"\" for a\n"
        "multi-line message; /help lists the commands.\n",
        sampling_opts_usage(), spec_opts_usage());
}

static bool parse_int(const char *s, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end != 0 || errno || v < lo || v > hi)
        return false;
    *out = (int)v;
    return true;
}

static bool set_option(struct chat_opts *o, const char *a, const char *v) {
    int sampling = sampling_opts_set(&o->sampling, a, v);
    if (sampling != 0)
        return sampling > 0;
    int spec = spec_opts_set(&o->spec, a, v);
    if (spec != 0)
        return spec > 0;
    if (!strcmp(a, "-m"))
        return (o->model = v) != NULL;
    if (!strcmp(a, "-sys") || !strcmp(a, "--system"))
        return (o->system = v) != NULL;
    if (!strcmp(a, "--chat-template"))
        return (o->chat_template = v) != NULL;
    if (!strcmp(a, "--stop") && o->n_stop < STOP_MAX && *v)
        return (o->stop[o->n_stop++] = v) != NULL;
    if (!strcmp(a, "-n"))
        return parse_int(v, -1, 1 << 24, &o->n_predict);
    if (!strcmp(a, "-c"))
        return parse_int(v, 8, 1 << 24, &o->n_ctx);
    if (!strcmp(a, "-t"))
        return parse_int(v, 1, 1024, &o->n_threads);
    if (!strcmp(a, "-ngl") || !strcmp(a, "--n-gpu-layers"))
        return parse_int(v, -1, 1 << 20, &o->n_gpu_layers);
    return false;
}

/* Returns -1 to go on, else an exit status. */
static int parse_args(int argc, char **argv, struct chat_opts *o) {
    *o = (struct chat_opts){.n_predict = -1, .n_ctx = 4096, .n_gpu_layers = -1};
    sampling_opts_default(&o->sampling);
    spec_opts_default(&o->spec);
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc || !set_option(o, argv[i], argv[i + 1])) {
            fprintf(stderr, "oxidize chat: bad option or value: '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!o->model) {
        fprintf(stderr, "oxidize chat: need -m MODEL\n");
        return 2;
    }
    return -1;
}

/* Set by Ctrl-C; read between tokens, and it interrupts a blocked read of the next line. */
static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

enum line_status { LINE_OK, LINE_EOF, LINE_INTERRUPTED };

/* One line without its newline (*line malloc'd). Ctrl-C during the read gives
 * LINE_INTERRUPTED: the message being typed is dropped and a new prompt starts. */
static enum line_status read_line(char **line, size_t *cap) {
    errno = 0;
    ssize_t n = getline(line, cap, stdin);
    if (n < 0) {
        if (errno == EINTR && interrupted) {
            clearerr(stdin);
            interrupted = 0;
            fputs("\n(Ctrl-D or /exit to quit)\n", stdout);
            return LINE_INTERRUPTED;
        }
        return LINE_EOF;
    }
    while (n > 0 && ((*line)[n - 1] == '\n' || (*line)[n - 1] == '\r'))
        (*line)[--n] = '\0';
    return LINE_OK;
}

static bool append(char **msg, size_t *len, const char *s, size_t n) {
    char *bigger = realloc(*msg, *len + n + 1);
    if (!bigger)
        return false;
    memcpy(bigger + *len, s, n);
    bigger[ *len += n] = '\0';
    *msg = bigger;
    return true;
}

/* The next message: a line; lines ending in '\' joined with newlines; or everything between a
 * line starting with """ and one ending with """. NULL at end of input; "" after Ctrl-C. */
static char *read_message(bool tty) {
    static char *line;
    static size_t cap;
    if (tty)
        fputs("> ", stdout), fflush(stdout);
    enum line_status ls = read_line(&line, &cap);
    if (ls == LINE_EOF) {
        free(line), line = NULL, cap = 0;
        return NULL;
    }
    char *msg = NULL;
    size_t len = 0;
    bool ok = append(&msg, &len, "", 0);
    if (ls == LINE_INTERRUPTED)
        return ok ? msg : NULL;
    if (!strncmp(line, "\"\"\"", 3)) {
        const char *text = line + 3; /* the opening line may close too: """a line""" */
        for (bool sep = false;;) {
            size_t n = strlen(text);
            bool closing = n >= 3 && !strcmp(text + n - 3, "\"\"\"");
            n -= closing ? 3 : 0;
            if (sep && (n > 0 || !closing)) /* a bare closing """ adds no newline */
                ok = ok && append(&msg, &len, "\n", 1);
            ok = ok && append(&msg, &len, text, n);
            sep = sep || n > 0;
            if (closing || !ok)
                break;
            if (tty)
                fputs("... ", stdout), fflush(stdout);
            if ((ls = read_line(&line, &cap)) != LINE_OK)
                break;
            text = line;
        }
    } else {
        for (;;) {
            size_t n = strlen(line);
            bool more = n > 0 && line[n - 1] == '\\';
            ok = ok && append(&msg, &len, line, more ? n - 1 : n);
            if (!more || !ok)
                break;
            ok = append(&msg, &len, "\n", 1);
            if (tty)
                fputs("... ", stdout), fflush(stdout);
            if ((ls = read_line(&line, &cap)) != LINE_OK)
                break;
        }
    }
    if (ls == LINE_INTERRUPTED && ok) /* Ctrl-C drops the half-typed message */
        msg[len = 0] = '\0';
    if (!ok) {
        free(msg);
        fprintf(stderr, "oxidize chat: out of memory\n");
        return NULL;
    }
    return msg;
}

static void print_help(void) {
    fputs("  /reset       forget the conversation (the system prompt stays)\n"
          "  /save FILE   write the conversation as JSON messages\n"
          "  /load FILE   continue a saved conversation\n"
          "  /save-state FILE  the conversation and its KV cache (FILE, FILE.kv, FILE.kvtext)\n"
          "  /load-state FILE  continue from them, processing only what is new\n"
          "  /exit        quit (or Ctrl-D); Ctrl-C stops an answer\n",
          stdout);
}

/* A /command; false to exit. */
static bool command(struct chat_session *s, const char *msg) {
    const char *arg = strchr(msg, ' ');
    size_t name_len = arg ? (size_t)(arg - msg) : strlen(msg);
    while (arg && *arg == ' ')
        arg++;
#define IS(name) (name_len == strlen(name) && !strncmp(msg, name, name_len))
    if (IS("/exit") || IS("/quit") || IS("/bye"))
        return false;
    if (IS("/reset")) {
        chat_session_reset(s);
        fputs("(conversation reset)\n", stdout);
    } else if ((IS("/save") || IS("/load") || IS("/save-state") || IS("/load-state")) &&
               (!arg || !*arg)) {
        fprintf(stdout, "(%.*s needs a file name)\n", (int)name_len, msg);
    } else if (IS("/save")) {
        if (chat_file_save(arg, s->msgs, s->n_msgs))
            fprintf(stdout, "(saved %zu messages to %s)\n", s->n_msgs, arg);
    } else if (IS("/load")) {
        size_t n;
        struct ox_chat_message *msgs = chat_file_load(arg, &n);
        if (msgs && chat_session_replace(s, msgs, n) == OX_OK)
            fprintf(stdout, "(loaded %zu messages from %s)\n", n, arg);
        chat_file_free(msgs, n);
    } else if (IS("/save-state")) {
        if (chat_session_save_state(s, arg) == OX_OK)
            fprintf(stdout, "(saved %zu messages and %zu cached tokens to %s and %s.kv)\n",
                    s->n_msgs, s->n_kv, arg, arg);
        else
            fprintf(stdout, "(could not save the state: %s)\n", ox_last_error());
    } else if (IS("/load-state")) {
        size_t n = 0;
        if (chat_session_load_state(s, arg, &n) == OX_OK)
            fprintf(stdout, "(loaded %zu messages and %zu cached tokens from %s)\n", s->n_msgs, n,
                    arg);
        else
            fprintf(stdout, "(the state was not loaded: %s)\n", ox_last_error());
    } else if (IS("/help") || IS("/?")) {
        print_help();
    } else {
        fprintf(stdout, "(unknown command %.*s; /help lists them)\n", (int)name_len, msg);
    }
#undef IS
    return true;
}

static void print_stats(const struct chat_stats *st) {
    if (st->interrupted)
        fputs("[interrupted]\n", stderr);
    if (st->context_full)
        fputs("[the context is full: older messages will be dropped, or /reset]\n", stderr);
    if (st->n_dropped)
        fprintf(stderr, "[dropped the %zu oldest messages to make room]\n", st->n_dropped);
    fprintf(stderr,
            "[%d tokens, %.1f tokens/s | prompt: %zu new tokens, %.1f tokens/s, %zu reused]\n",
            st->n_gen, st->n_gen / (st->t_gen > 0 ? st->t_gen : 1e-9), st->n_prompt,
            (double)st->n_prompt / (st->t_prompt > 0 ? st->t_prompt : 1e-9), st->n_reused);
}

/* Read messages and answer them until end of input or /exit. */
static enum ox_status repl(struct chat_session *s) {
    bool tty = isatty(STDIN_FILENO);
    for (char *msg; (msg = read_message(tty)) != NULL; free(msg)) {
        interrupted = 0;
        if (!*msg)
            continue;
        if (msg[0] == '/') {
            if (!command(s, msg)) {
                free(msg);
                break;
            }
            continue;
        }
        enum ox_status st = chat_session_add(s, "user", msg);
        struct chat_stats stats = {0};
        if (st == OX_OK)
            st = chat_session_answer(s, stdout, &interrupted, &stats);
        fputs("\n", stdout);
        fflush(stdout);
        if (st == OX_ERR_CONTEXT_FULL) { /* a message too long was explained; decode's own
                                          * refusal is printed here */
            if (!stats.refused)
                fprintf(stderr, "oxidize chat: %s\n", ox_last_error());
            continue;
        }
        if (st != OX_OK) {
            free(msg);
            return st;
        }
        print_stats(&stats);
    }
    return OX_OK;
}

/* The greeting, Ctrl-C for stopping an answer, then the conversation. */
static enum ox_status talk(struct chat_session *s) {
    char desc[128];
    ox_model_desc(s->model, desc, sizeof desc);
    fprintf(stderr,
            "oxidize chat: %s, context %u tokens. /help for commands, Ctrl-C stops "
            "an answer, Ctrl-D exits.\n",
            desc, ox_context_n_ctx(s->ctx));
    struct sigaction sa = {.sa_handler = on_sigint}; /* no SA_RESTART: reads return EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    return repl(s);
}

int cmd_chat(int argc, char **argv) {
    struct chat_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    size_t len;
    char *tmpl = o.chat_template ? cmd_read_file("chat", o.chat_template, &len) : NULL;
    if (o.chat_template && !tmpl)
        return 1;
    if (sampling_opts_load(&o.sampling) != OX_OK) {
        free(tmpl);
        return 1;
    }
    struct ox_model *model = NULL;
    struct ox_context *ctx = NULL;
    struct ox_sampler *sampler = NULL;
    struct chat_session s;
    chat_session_init(&s);
    bool said = false; /* the error was already printed */
    struct ox_model_params mp = ox_model_params_default();
    cmd_split_apply(&mp);
    mp.n_gpu_layers = o.n_gpu_layers;
    enum ox_status st = ox_model_load(o.model, &mp, &model);
    if (st == OX_OK && !tmpl && !ox_model_chat_template(model, NULL)) {
        fprintf(stderr, "oxidize chat: %s has no chat template; give one with --chat-template\n",
                o.model);
        st = OX_ERR_UNSUPPORTED, said = true;
    }
    if (st == OX_OK)
        st = cmd_lora_load(model);
    if (st == OX_OK)
        st = cmd_context_create(model, o.n_ctx, o.n_threads, &ctx);
    if (st == OX_OK)
        st = cmd_lora_apply(ctx);
    if (st == OX_OK)
        st = sampling_opts_chain(&o.sampling, model, (int32_t)ox_context_n_ctx(ctx), &sampler);
    struct ox_spec *spec = NULL; /* each answer begins it with the conversation */
    if (st == OX_OK)
        st = spec_opts_start(&o.spec, ctx, NULL, 0, &spec);
    if (st == OX_OK) {
        s.model = model, s.ctx = ctx, s.sampler = sampler, s.tmpl = tmpl, s.spec = spec;
        s.n_predict = o.n_predict, s.n_stop = o.n_stop;
        memcpy(s.stop, o.stop, sizeof o.stop);
        if (o.system)
            st = chat_session_add(&s, "system", o.system);
    }
    if (st == OX_OK)
        st = talk(&s);
    if (st != OX_OK && !said)
        fprintf(stderr, "oxidize chat: %s\n", ox_last_error());
    chat_session_free(&s);
    spec_opts_report(spec);
    ox_spec_free(spec);
    spec_opts_free(&o.spec);
    ox_sampler_free(sampler);
    ox_context_free(ctx);
    ox_model_free(model);
    free(tmpl);
    sampling_opts_free(&o.sampling);
    return st == OX_OK ? 0 : 1;
}
