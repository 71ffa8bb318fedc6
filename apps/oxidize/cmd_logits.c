/* cmd_logits.c: `oxidize logits -m MODEL --tokens 1,2,3 --out F.f32`: raw logits for checking a
 * model against a reference (llama.cpp's), plus optional greedy continuation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "oxidize.h"

#define MAX_TOKENS 65536

struct logits_opts {
    const char *model, *tokens, *out, *greedy_out, *greedy_logits;
    int n_greedy, n_threads;
};

static void usage(FILE *f) {
    fprintf(
        f, "usage: oxidize logits -m MODEL.gguf --tokens ID,ID,... --out FILE.f32\n"
           "                      [--greedy N --greedy-out FILE.json [--greedy-logits F.f32]]\n"
           "                      [-t THREADS]\n"
           "  Decodes the tokens as one batch and writes every position's logits (n_tokens x\n"
           "  n_vocab little-endian float32). With --greedy, then generates N tokens greedily\n"
           "  one at a time, writing {\"tokens\":[...]} and optionally the logits of each step.\n");
}

static int parse_args(int argc, char **argv, struct logits_opts *o) {
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i += 2) { /* every option takes a value */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return usage(stdout), 0;
        if (!v)
            return fprintf(stderr, "oxidize logits: '%s' needs a value\n", a), 2;
        if (!strcmp(a, "-m"))
            o->model = v;
        else if (!strcmp(a, "--tokens"))
            o->tokens = v;
        else if (!strcmp(a, "--out"))
            o->out = v;
        else if (!strcmp(a, "--greedy-out"))
            o->greedy_out = v;
        else if (!strcmp(a, "--greedy-logits"))
            o->greedy_logits = v;
        else if (!strcmp(a, "--greedy"))
            o->n_greedy = atoi(v);
        else if (!strcmp(a, "-t"))
            o->n_threads = atoi(v);
        else
            return fprintf(stderr, "oxidize logits: unknown option '%s'\n", a), usage(stderr), 2;
    }
    if (!o->model || !o->tokens || !o->out || o->n_greedy < 0 || o->n_greedy > MAX_TOKENS ||
        (o->n_greedy > 0 && !o->greedy_out))
        return usage(stderr), 2;
    return -1;
}

/* "1,2,3" -> ids; -1 on a malformed list. */
static int parse_tokens(const char *s, ox_token *ids, int cap) {
    int n = 0;
    while (*s && n < cap) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > 0x7fffffff || (*end && *end != ','))
            return -1;
        ids[n++] = (ox_token)v;
        s = *end ? end + 1 : end;
    }
    return *s ? -1 : n;
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        best = x[i] > x[best] ? i : best;
    return best;
}

static enum ox_status run_greedy(const struct logits_opts *o, struct ox_context *c, int nv,
                                 const float *logits, FILE *jf, FILE *lf) {
    fprintf(jf, "{\"tokens\":[");
    for (int g = 0; g < o->n_greedy; g++) {
        if (lf)
            fwrite(logits, sizeof(float), (size_t)nv, lf);
        ox_token t = argmax(logits, nv);
        fprintf(jf, "%s%d", g ? "," : "", (int)t);
        struct ox_batch b = {.n_tokens = 1, .token = &t};
        enum ox_status s = ox_decode(c, &b);
        if (s != OX_OK)
            return s;
        logits = ox_get_logits(c, 0);
    }
    fprintf(jf, "]}\n");
    return OX_OK;
}

static enum ox_status cleanup(struct ox_context *c, struct ox_model *m, bool *want,
                              enum ox_status s) {
    free(want);
    ox_context_free(c);
    ox_model_free(m);
    return s;
}

/* The logits of every position, then the greedy steps; a failure is reported here. */
static enum ox_status run(const struct logits_opts *o, const ox_token *ids, int n) {
    struct ox_model *m = NULL;
    struct ox_context *c = NULL;
    enum ox_status s = ox_model_load(o->model, NULL, &m);
    struct ox_context_params cp = ox_context_params_default();
    cp.n_ctx = (uint32_t)(n + o->n_greedy + 1);
    cp.n_batch = (uint32_t)n;
    cp.n_threads = o->n_threads;
    if (s == OX_OK)
        s = ox_context_create(m, &cp, &c);
    bool *want = calloc((size_t)n, sizeof *want);
    for (int i = 0; want && i < n; i++)
        want[i] = true;
    struct ox_batch b = {.n_tokens = n, .token = ids, .logits = want};
    if (s == OX_OK)
        s = want ? ox_decode(c, &b) : OX_ERR_OOM;
    FILE *f = s == OX_OK ? fopen(o->out, "wb") : NULL;
    int nv = m ? ox_model_n_vocab(m) : 0;
    for (int i = 0; f && i < n; i++)
        fwrite(ox_get_logits(c, i), sizeof(float), (size_t)nv, f);
    if (s == OX_OK && (!f || fclose(f) != 0)) {
        fprintf(stderr, "oxidize logits: cannot write %s\n", o->out);
        return cleanup(c, m, want, OX_ERR_IO);
    }
    if (s == OX_OK && o->n_greedy > 0) {
        FILE *jf = fopen(o->greedy_out, "w"),
             *lf = o->greedy_logits ? fopen(o->greedy_logits, "wb") : NULL;
        if (!jf || (o->greedy_logits && !lf))
            fprintf(stderr, "oxidize logits: cannot write %s\n",
                    !jf ? o->greedy_out : o->greedy_logits);
        s = jf && (!o->greedy_logits || lf) ? run_greedy(o, c, nv, ox_get_logits(c, n - 1), jf, lf)
                                            : OX_ERR_IO;
        if (jf)
            fclose(jf);
        if (lf)
            fclose(lf);
        if (s == OX_ERR_IO)
            return cleanup(c, m, want, s);
    }
    if (s != OX_OK)
        fprintf(stderr, "oxidize logits: %s\n", ox_last_error());
    return cleanup(c, m, want, s);
}

int cmd_logits(int argc, char **argv) {
    struct logits_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    static ox_token ids[MAX_TOKENS];
    int n = parse_tokens(o.tokens, ids, MAX_TOKENS);
    if (n <= 0) {
        fprintf(stderr, "oxidize logits: --tokens wants a comma-separated list of ids\n");
        return 2;
    }
    return run(&o, ids, n) == OX_OK ? 0 : 1;
}
