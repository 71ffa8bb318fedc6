/* cmd_quantize.c: `oxidize quantize IN.gguf OUT.gguf TYPE`: llama-quantize's job and options. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cmd.h"
#include "oxidize.h"

#define MAX_OVERRIDES 256

struct quantize_cli {
    const char *in, *out, *type;
    struct ox_quantize_params params;
    struct ox_tensor_type_override overrides[MAX_OVERRIDES];
    char *override_text[MAX_OVERRIDES]; /* owned copies the patterns point into */
    bool progress_bar;
};

static void usage(FILE *f) {
    fprintf(
        f, "usage: oxidize quantize [options] IN.gguf OUT.gguf TYPE [THREADS]\n"
           "  Quantize a model file; tensor types follow llama.cpp's rules for TYPE, so the\n"
           "  output matches llama-quantize's byte for byte.\n"
           "  TYPE: a file type (Q4_K_M, Q5_K_S, Q8_0, IQ4_XS, ...; Q4_K = Q4_K_M), its number,\n"
           "        or COPY (tensors unchanged). See docs/quantization.md.\n"
           "options:\n"
           "  -t, --threads N              worker threads (default: all CPUs)\n"
           "  --imatrix FILE               importance matrix (llama.cpp imatrix, GGUF or .dat)\n"
           "  --allow-requantize           accept inputs that are already quantized\n"
           "  --leave-output-tensor        keep output.weight as it is\n"
           "  --pure                       every tensor in TYPE's base type, no mixing\n"
           "  --output-tensor-type T       tensor type for output.weight (q8_0, f16, ...)\n"
           "  --token-embedding-type T     tensor type for token_embd.weight\n"
           "  --tensor-type PATTERN=T      tensors whose name matches PATTERN (a POSIX extended\n"
           "                               regular expression) become T; repeatable, first wins\n");
}

/* A ggml tensor type by name, any case ("q4_k", "Q8_0", "f16"). */
static bool parse_dtype(const char *s, enum ox_dtype *out) {
    for (int id = 0; id < OX_DTYPE_COUNT; id++) {
        const char *name = ox_dtype_valid(id) ? ox_dtype_name((enum ox_dtype)id) : NULL;
        if (name && strcasecmp(name, s) == 0 && ox_dtype_can_quantize((enum ox_dtype)id)) {
            *out = (enum ox_dtype)id;
            return true;
        }
    }
    fprintf(stderr, "oxidize quantize: '%s' is not a tensor type a model can be quantized to\n", s);
    return false;
}

static bool add_override(struct quantize_cli *c, const char *arg) {
    const char *eq = strrchr(arg, '=');
    size_t n = c->params.n_overrides;
    if (!eq || eq == arg || !eq[1] || n == MAX_OVERRIDES) {
        fprintf(stderr, "oxidize quantize: --tensor-type wants PATTERN=TYPE, got '%s'\n", arg);
        return false;
    }
    enum ox_dtype t;
    if (!parse_dtype(eq + 1, &t))
        return false;
    c->override_text[n] = strndup(arg, (size_t)(eq - arg));
    c->overrides[n] = (struct ox_tensor_type_override){c->override_text[n], t};
    c->params.n_overrides = n + 1;
    return true;
}

/* An option with a value; returns 1 when consumed, 0 when not this option, -1 on error. */
static int value_option(struct quantize_cli *c, const char *opt, const char *val) {
    enum ox_dtype t;
    if (!strcmp(opt, "-t") || !strcmp(opt, "--threads")) {
        char *end;
        long n = strtol(val, &end, 10);
        if (*end || n < 1 || n > 1024)
            return fprintf(stderr, "oxidize quantize: bad thread count '%s'\n", val), -1;
        c->params.n_threads = (int)n;
    } else if (!strcmp(opt, "--imatrix")) {
        c->params.imatrix_path = val;
    } else if (!strcmp(opt, "--output-tensor-type")) {
        if (!parse_dtype(val, &t))
            return -1;
        c->params.output_tensor_type = (int)t;
    } else if (!strcmp(opt, "--token-embedding-type")) {
        if (!parse_dtype(val, &t))
            return -1;
        c->params.token_embedding_type = (int)t;
    } else if (!strcmp(opt, "--tensor-type")) {
        return add_override(c, val) ? 1 : -1;
    } else {
        return 0;
    }
    return 1;
}

static bool flag_option(struct quantize_cli *c, const char *opt) {
    if (!strcmp(opt, "--allow-requantize"))
        c->params.allow_requantize = true;
    else if (!strcmp(opt, "--leave-output-tensor"))
        c->params.leave_output_tensor = true;
    else if (!strcmp(opt, "--pure"))
        c->params.pure = true;
    else
        return false;
    return true;
}

/* Positional arguments: IN OUT TYPE [THREADS]. */
static int positional(struct quantize_cli *c, int *n_pos, const char *a) {
    const char **slots[] = {&c->in, &c->out, &c->type};
    if (*n_pos < 3) {
        *slots[(*n_pos)++] = a;
        return 0;
    }
    if (*n_pos == 3 && value_option(c, "-t", a) == 1) {
        (*n_pos)++;
        return 0;
    }
    fprintf(stderr, "oxidize quantize: unexpected argument '%s'\n", a);
    return 2;
}

/* Returns -1 to go on, else an exit status. */
static int parse_args(struct quantize_cli *c, int argc, char **argv) {
    int n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (a[0] == '-' && a[1] && !flag_option(c, a)) {
            int r = i + 1 < argc ? value_option(c, a, argv[i + 1]) : 0;
            if (r < 0)
                return 2;
            if (r == 0) {
                fprintf(stderr, "oxidize quantize: unknown option or missing value: '%s'\n", a);
                usage(stderr);
                return 2;
            }
            i++;
        } else if (a[0] != '-' || !a[1]) {
            int r = positional(c, &n_pos, a);
            if (r)
                return r;
        }
    }
    if (n_pos < 3) {
        usage(stderr);
        return 2;
    }
    return -1;
}

static bool resolve_type(struct quantize_cli *c) {
    if (strcasecmp(c->type, "COPY") == 0) {
        c->params.only_copy = true;
        return true;
    }
    if (ox_ftype_parse(c->type, &c->params.ftype) == OX_OK)
        return true;
    fprintf(stderr, "oxidize quantize: %s\n", ox_last_error());
    return false;
}

static bool show_progress(const struct ox_quantize_progress *p, void *user) {
    (void)user;
    const int width = 30;
    int done = (int)(p->i_tensor * width / (p->n_tensors ? p->n_tensors : 1));
    fprintf(stderr, "\r[%.*s%*s] %4lld/%-4lld %-32.32s %-7s -> %-7s", done,
            "==============================", width - done, "", (long long)p->i_tensor,
            (long long)p->n_tensors, p->name, ox_dtype_name(p->type_in),
            ox_dtype_name(p->type_out));
    if (p->i_tensor == p->n_tensors)
        fputc('\n', stderr);
    return true;
}

static void print_summary(const struct quantize_cli *c, const struct ox_quantize_result *r,
                          double secs) {
    double params = r->n_params ? (double)r->n_params : 1.0;
    printf("%s -> %s (%s)\n", c->in, c->out,
           c->params.only_copy ? "COPY" : ox_ftype_name(c->params.ftype));
    printf("  model size: %10.2f MiB  %6.2f bits/weight\n", (double)r->bytes_in / 1048576.0,
           8.0 * (double)r->bytes_in / params);
    printf("  quant size: %10.2f MiB  %6.2f bits/weight\n", (double)r->bytes_out / 1048576.0,
           8.0 * (double)r->bytes_out / params);
    printf("  %llu parameters, %.2f s, %.1f MB/s of input", (unsigned long long)r->n_params, secs,
           (double)r->bytes_in / 1e6 / (secs > 0 ? secs : 1e-9));
    if (r->n_imatrix_entries)
        printf(", imatrix with %d entries", r->n_imatrix_entries);
    if (r->n_fallback)
        printf(", %d tensors fell back to another type (row size)", r->n_fallback);
    printf("\n");
}

int cmd_quantize(int argc, char **argv) {
    struct quantize_cli c = {.params = ox_quantize_params_default()};
    c.params.overrides = c.overrides;
    int rc = parse_args(&c, argc, argv);
    if (rc < 0 && !resolve_type(&c))
        rc = 2;
    if (rc < 0) {
        if (isatty(STDERR_FILENO))
            c.params.progress = show_progress;
        struct ox_quantize_result r;
        double t0 = cmd_now_s();
        if (ox_model_quantize(c.in, c.out, &c.params, &r) != OX_OK) {
            fprintf(stderr, "%soxidize quantize: %s\n", c.params.progress ? "\n" : "",
                    ox_last_error());
            rc = 1;
        } else {
            print_summary(&c, &r, cmd_now_s() - t0);
            rc = 0;
        }
    }
    for (size_t i = 0; i < c.params.n_overrides; i++)
        free(c.override_text[i]);
    return rc;
}
