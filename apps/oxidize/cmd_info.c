/* cmd_info.c: `oxidize info [--json] MODEL.gguf`: a GGUF file's metadata and tensors. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "json_out.h"
#include "oxidize.h"

/* Arrays up to this many elements are shown in full; longer ones (vocabularies, merges) only as
 * their element type and count, which is what a reader wants from them anyway. */
#define INFO_MAX_ARRAY 16
/* Display widths, in bytes, of strings in text mode: one terminal line at top level, shorter
 * inside arrays so a 16-element array of strings stays readable. */
#define INFO_TEXT_STR 80
#define INFO_TEXT_STR_IN_ARRAY 32
/* GGUF allows arrays of arrays; a validated file cannot nest deeper than its size allows, but a
 * fixed bound keeps the recursion safe whatever the library accepts. */
#define INFO_MAX_DEPTH 64

struct info_opts {
    const char *path;
    bool json;
    bool architectures; /* list the general.architecture values oxidize runs, and stop */
};

/* Totals over the tensor table. */
struct info_totals {
    uint64_t n_params; /* sum of element counts */
    uint64_t n_bytes;  /* sum of tensor data sizes */
};

static void info_usage(FILE *f) {
    fprintf(f, "usage: oxidize info [--json] MODEL.gguf\n"
               "       oxidize info --architectures\n"
               "  Show a GGUF file's header, architecture hyper-parameters, tokenizer,\n"
               "  metadata and tensor table.\n"
               "  --json            print one JSON object instead of text\n"
               "  --architectures   print every general.architecture value oxidize runs, one\n"
               "                    per line\n");
}

/* Returns -1 to go on, else the exit status (0 after --help, 2 for bad usage). */
static int parse_args(int argc, char **argv, struct info_opts *o) {
    bool only_paths = false;
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_paths && !strcmp(a, "--")) {
            only_paths = true;
        } else if (!only_paths && !strcmp(a, "--json")) {
            o->json = true;
        } else if (!only_paths && !strcmp(a, "--architectures")) {
            o->architectures = true;
        } else if (!only_paths && (!strcmp(a, "--help") || !strcmp(a, "-h"))) {
            info_usage(stdout);
            return 0;
        } else if (!only_paths && a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "oxidize info: unknown option '%s'\n", a);
            info_usage(stderr);
            return 2;
        } else if (o->path) {
            fprintf(stderr, "oxidize info: more than one file given ('%s', '%s')\n", o->path, a);
            info_usage(stderr);
            return 2;
        } else {
            o->path = a;
        }
    }
    if (o->architectures && !o->path && !o->json)
        return -1;
    if (!o->path || o->architectures) {
        info_usage(stderr);
        return 2;
    }
    return -1;
}

static uint64_t tensor_elements(const struct ox_tensor_info *t) {
    uint64_t n = 1;
    for (int d = 0; d < t->n_dims; d++)
        n *= (uint64_t)t->ne[d];
    return n;
}

static enum ox_status compute_totals(const struct ox_gguf *g, struct info_totals *tot) {
    memset(tot, 0, sizeof *tot);
    for (int64_t i = 0; i < ox_gguf_n_tensors(g); i++) {
        struct ox_tensor_info t;
        enum ox_status st = ox_gguf_tensor(g, i, &t);
        if (st != OX_OK)
            return st;
        tot->n_params += tensor_elements(&t);
        tot->n_bytes += t.n_bytes;
    }
    return OX_OK;
}

static const char *type_name(enum ox_gguf_type type) {
    const char *s = ox_gguf_type_name(type);
    return s ? s : "?";
}

/* ---- JSON mode ------------------------------------------------------------------------- */

static enum ox_status json_value(FILE *f, const struct ox_gguf_value *v, int depth);

static enum ox_status json_array(FILE *f, const struct ox_gguf_value *v, int depth) {
    if (v->n > INFO_MAX_ARRAY) {
        fprintf(f, "{\"type\":\"%s\",\"count\":%" PRIu64 "}", type_name(v->elem_type), v->n);
        return OX_OK;
    }
    putc('[', f);
    for (uint64_t i = 0; i < v->n; i++) {
        struct ox_gguf_value e;
        enum ox_status st = ox_gguf_array_get(v, i, &e);
        if (st != OX_OK)
            return st;
        if (i)
            putc(',', f);
        st = json_value(f, &e, depth + 1);
        if (st != OX_OK)
            return st;
    }
    putc(']', f);
    return OX_OK;
}

static enum ox_status json_value(FILE *f, const struct ox_gguf_value *v, int depth) {
    switch (v->type) {
    case OX_GGUF_UINT8: case OX_GGUF_UINT16: case OX_GGUF_UINT32: case OX_GGUF_UINT64:
        fprintf(f, "%" PRIu64, v->v.u);
        return OX_OK;
    case OX_GGUF_INT8: case OX_GGUF_INT16: case OX_GGUF_INT32: case OX_GGUF_INT64:
        fprintf(f, "%" PRId64, v->v.i);
        return OX_OK;
    case OX_GGUF_FLOAT32:
        json_write_f32(f, (float)v->v.f);
        return OX_OK;
    case OX_GGUF_FLOAT64:
        json_write_f64(f, v->v.f);
        return OX_OK;
    case OX_GGUF_BOOL:
        fputs(v->v.b ? "true" : "false", f);
        return OX_OK;
    case OX_GGUF_STRING:
        json_write_string(f, v->v.s, (size_t)v->n);
        return OX_OK;
    case OX_GGUF_ARRAY:
        if (depth >= INFO_MAX_DEPTH)
            break;
        return json_array(f, v, depth);
    default:
        break;
    }
    /* Only reachable if the library hands out a value it should have rejected. */
    fputs("null", f);
    return OX_OK;
}

static enum ox_status json_metadata(FILE *f, const struct ox_gguf *g) {
    fputs("\"metadata\":{", f);
    for (int64_t i = 0; i < ox_gguf_n_kv(g); i++) {
        struct ox_gguf_value v;
        enum ox_status st = ox_gguf_value(g, i, &v);
        if (st != OX_OK)
            return st;
        const char *key = ox_gguf_key(g, i);
        if (i)
            putc(',', f);
        fputs("\n ", f);
        json_write_string(f, key ? key : "", key ? strlen(key) : 0);
        putc(':', f);
        st = json_value(f, &v, 0);
        if (st != OX_OK)
            return st;
    }
    fputs("\n}", f);
    return OX_OK;
}

static enum ox_status json_tensors(FILE *f, const struct ox_gguf *g) {
    fputs("\"tensors\":[", f);
    for (int64_t i = 0; i < ox_gguf_n_tensors(g); i++) {
        struct ox_tensor_info t;
        enum ox_status st = ox_gguf_tensor(g, i, &t);
        if (st != OX_OK)
            return st;
        const char *tname = ox_dtype_name(t.type);
        fputs(i ? ",\n {\"name\":" : "\n {\"name\":", f);
        json_write_string(f, t.name, strlen(t.name));
        fprintf(f, ",\"type\":\"%s\",\"shape\":[", tname ? tname : "?");
        for (int d = 0; d < t.n_dims; d++)
            fprintf(f, d ? ",%" PRId64 : "%" PRId64, t.ne[d]);
        fprintf(f, "],\"offset\":%" PRIu64 ",\"bytes\":%" PRIu64 "}", t.offset, t.n_bytes);
    }
    fputs("\n]", f);
    return OX_OK;
}

static enum ox_status print_json(FILE *f, const struct ox_gguf *g) {
    struct info_totals tot;
    enum ox_status st = compute_totals(g, &tot);
    if (st != OX_OK)
        return st;
    fprintf(f, "{\"version\":%" PRIu32 ",\"alignment\":%" PRIu32 ",\"data_offset\":%" PRIu64
               ",\"file_size\":%" PRIu64 ",\n",
            ox_gguf_version(g), ox_gguf_alignment(g), ox_gguf_data_offset(g),
            ox_gguf_file_size(g));
    if ((st = json_metadata(f, g)) != OX_OK)
        return st;
    fputs(",\n", f);
    if ((st = json_tensors(f, g)) != OX_OK)
        return st;
    fprintf(f, ",\n\"n_params\":%" PRIu64 ",\"n_bytes\":%" PRIu64 "}\n", tot.n_params,
            tot.n_bytes);
    return OX_OK;
}

/* ---- Text mode ------------------------------------------------------------------------- */

/* A string on one line: escaped, cut at max bytes on a character boundary, with its full
 * length when it was cut so the reader knows what is hidden. */
static void text_string(FILE *f, const char *s, uint64_t n, size_t max) {
    size_t shown = json_utf8_prefix(s, (size_t)n, max);
    putc('"', f);
    json_write_escaped(f, s, shown);
    putc('"', f);
    if (shown < n)
        fprintf(f, "... (%" PRIu64 " bytes)", n);
}

static enum ox_status text_value(FILE *f, const struct ox_gguf_value *v, int depth) {
    switch (v->type) {
    case OX_GGUF_UINT8: case OX_GGUF_UINT16: case OX_GGUF_UINT32: case OX_GGUF_UINT64:
        fprintf(f, "%" PRIu64, v->v.u);
        return OX_OK;
    case OX_GGUF_INT8: case OX_GGUF_INT16: case OX_GGUF_INT32: case OX_GGUF_INT64:
        fprintf(f, "%" PRId64, v->v.i);
        return OX_OK;
    case OX_GGUF_FLOAT32: fprintf(f, "%.9g", (double)(float)v->v.f); return OX_OK;
    case OX_GGUF_FLOAT64: fprintf(f, "%.17g", v->v.f); return OX_OK;
    case OX_GGUF_BOOL: fputs(v->v.b ? "true" : "false", f); return OX_OK;
    case OX_GGUF_STRING:
        text_string(f, v->v.s, v->n, depth ? INFO_TEXT_STR_IN_ARRAY : INFO_TEXT_STR);
        return OX_OK;
    case OX_GGUF_ARRAY:
        if (v->n > INFO_MAX_ARRAY || depth >= INFO_MAX_DEPTH) {
            fprintf(f, "[%s x %" PRIu64 "]", type_name(v->elem_type), v->n);
            return OX_OK;
        }
        putc('[', f);
        for (uint64_t i = 0; i < v->n; i++) {
            struct ox_gguf_value e;
            enum ox_status st = ox_gguf_array_get(v, i, &e);
            if (st != OX_OK)
                return st;
            fputs(i ? ", " : "", f);
            if ((st = text_value(f, &e, depth + 1)) != OX_OK)
                return st;
        }
        putc(']', f);
        return OX_OK;
    default:
        fputs("?", f);
        return OX_OK;
    }
}

/* One "  label = value" line for entry i. */
static enum ox_status text_kv_line(FILE *f, const struct ox_gguf *g, int64_t i, const char *label,
                                   int width) {
    struct ox_gguf_value v;
    enum ox_status st = ox_gguf_value(g, i, &v);
    if (st != OX_OK)
        return st;
    fprintf(f, "  %-*s = ", width, label);
    st = text_value(f, &v, 0);
    putc('\n', f);
    return st;
}

static void text_summary(FILE *f, const struct ox_gguf *g, const char *path) {
    uint64_t size = ox_gguf_file_size(g);
    fprintf(f, "file: %s\n", path);
    fprintf(f, "  GGUF version   %" PRIu32 "\n", ox_gguf_version(g));
    fprintf(f, "  alignment      %" PRIu32 "\n", ox_gguf_alignment(g));
    fprintf(f, "  data offset    %" PRIu64 "\n", ox_gguf_data_offset(g));
    fprintf(f, "  file size      %" PRIu64 " (%.2f MiB)\n", size, (double)size / 1048576.0);
    fprintf(f, "  metadata kv    %" PRId64 "\n", ox_gguf_n_kv(g));
    fprintf(f, "  tensors        %" PRId64 "\n", ox_gguf_n_tensors(g));
}

/* The architecture name as a NUL-terminated copy (NULL when absent or not a string): keys are
 * NUL-terminated but string values are not, and the arch is matched as a key prefix. */
static char *arch_name(const struct ox_gguf *g) {
    struct ox_gguf_value v;
    int64_t i = ox_gguf_find_key(g, "general.architecture");
    if (i < 0 || ox_gguf_value(g, i, &v) != OX_OK || v.type != OX_GGUF_STRING)
        return NULL;
    char *s = malloc((size_t)v.n + 1);
    if (!s)
        return NULL;
    memcpy(s, v.v.s, (size_t)v.n);
    s[v.n] = '\0';
    return s;
}

/* True when key is "<prefix>.<something>". */
static bool has_prefix(const char *key, const char *prefix) {
    size_t n = strlen(prefix);
    return prefix[0] && !strncmp(key, prefix, n) && key[n] == '.';
}

static enum ox_status text_arch(FILE *f, const struct ox_gguf *g, const char *arch) {
    if (!arch) {
        fprintf(f, "\narchitecture: (none: no general.architecture string)\n");
        return OX_OK;
    }
    fprintf(f, "\narchitecture: ");
    json_write_escaped(f, arch, json_utf8_prefix(arch, strlen(arch), INFO_TEXT_STR));
    fputc('\n', f);
    char traits[512];
    if (ox_arch_traits(arch, traits, sizeof traits))
        fprintf(f, "  oxidize runs it with %s\n", traits);
    else
        fprintf(f, "  oxidize does not support it (supported: %s)\n", ox_arch_supported());
    size_t skip = strlen(arch) + 1;
    for (int64_t i = 0; i < ox_gguf_n_kv(g); i++) {
        const char *key = ox_gguf_key(g, i);
        if (!key || !has_prefix(key, arch))
            continue;
        enum ox_status st = text_kv_line(f, g, i, key + skip, 36);
        if (st != OX_OK)
            return st;
    }
    return OX_OK;
}

/* Tokenizer keys that the summary shows in its own form (counts, presence) rather than by value. */
static const char *const tok_summarized[] = {
    "tokenizer.ggml.model", "tokenizer.ggml.pre",    "tokenizer.ggml.tokens",
    "tokenizer.ggml.scores", "tokenizer.ggml.merges", "tokenizer.ggml.token_type",
    "tokenizer.chat_template",
};

static bool tok_is_summarized(const char *key) {
    for (size_t i = 0; i < sizeof tok_summarized / sizeof tok_summarized[0]; i++)
        if (!strcmp(key, tok_summarized[i]))
            return true;
    return false;
}

/* "label = N" for an array key, or "label = no" when absent. */
static enum ox_status text_count(FILE *f, const struct ox_gguf *g, const char *key,
                                 const char *label) {
    struct ox_gguf_value v;
    int64_t i = ox_gguf_find_key(g, key);
    if (i < 0) {
        fprintf(f, "  %-24s = no\n", label);
        return OX_OK;
    }
    enum ox_status st = ox_gguf_value(g, i, &v);
    if (st != OX_OK)
        return st;
    if (v.type == OX_GGUF_ARRAY)
        fprintf(f, "  %-24s = %" PRIu64 " (%s)\n", label, v.n, type_name(v.elem_type));
    else
        fprintf(f, "  %-24s = yes (%s, not an array)\n", label, type_name(v.type));
    return OX_OK;
}

/* "label = N bytes" for a string key (chat templates are too long to show). */
static enum ox_status text_template(FILE *f, const struct ox_gguf *g, int64_t i,
                                    const char *label) {
    struct ox_gguf_value v;
    if (i < 0) {
        fprintf(f, "  %-24s = no\n", label);
        return OX_OK;
    }
    enum ox_status st = ox_gguf_value(g, i, &v);
    if (st != OX_OK)
        return st;
    if (v.type == OX_GGUF_STRING)
        fprintf(f, "  %-24s = yes (%" PRIu64 " bytes)\n", label, v.n);
    else
        fprintf(f, "  %-24s = yes (%s, not a string)\n", label, type_name(v.type));
    return OX_OK;
}

static enum ox_status text_tokenizer_head(FILE *f, const struct ox_gguf *g) {
    enum ox_status st = OX_OK;
    int64_t i;
    if ((i = ox_gguf_find_key(g, "tokenizer.ggml.model")) >= 0)
        st = text_kv_line(f, g, i, "model", 24);
    if (st == OX_OK && (i = ox_gguf_find_key(g, "tokenizer.ggml.pre")) >= 0)
        st = text_kv_line(f, g, i, "pre", 24);
    if (st == OX_OK)
        st = text_count(f, g, "tokenizer.ggml.tokens", "tokens");
    if (st == OX_OK)
        st = text_count(f, g, "tokenizer.ggml.token_type", "token types");
    if (st == OX_OK)
        st = text_count(f, g, "tokenizer.ggml.scores", "scores");
    if (st == OX_OK)
        st = text_count(f, g, "tokenizer.ggml.merges", "merges");
    if (st == OX_OK)
        st = text_template(f, g, ox_gguf_find_key(g, "tokenizer.chat_template"), "chat template");
    return st;
}

/* Summary lines first, then every other tokenizer.* key (bos/eos/... ids, add_bos_token,
 * named chat templates) in file order, so nothing under tokenizer.* goes unshown. */
static enum ox_status text_tokenizer(FILE *f, const struct ox_gguf *g) {
    bool any = false;
    for (int64_t i = 0; i < ox_gguf_n_kv(g) && !any; i++)
        any = ox_gguf_key(g, i) && has_prefix(ox_gguf_key(g, i), "tokenizer");
    fprintf(f, "\ntokenizer:%s\n", any ? "" : " (none)");
    if (!any)
        return OX_OK;
    enum ox_status st = text_tokenizer_head(f, g);
    for (int64_t i = 0; st == OX_OK && i < ox_gguf_n_kv(g); i++) {
        const char *key = ox_gguf_key(g, i);
        if (!key || !has_prefix(key, "tokenizer") || tok_is_summarized(key))
            continue;
        if (has_prefix(key, "tokenizer.chat_template"))
            st = text_template(f, g, i, key + strlen("tokenizer."));
        else if (has_prefix(key, "tokenizer.ggml"))
            st = text_kv_line(f, g, i, key + strlen("tokenizer.ggml."), 24);
        else
            st = text_kv_line(f, g, i, key + strlen("tokenizer."), 24);
    }
    return st;
}

/* Every key that neither the architecture nor the tokenizer section showed. */
static enum ox_status text_other(FILE *f, const struct ox_gguf *g, const char *arch) {
    fprintf(f, "\nmetadata:\n");
    for (int64_t i = 0; i < ox_gguf_n_kv(g); i++) {
        struct ox_gguf_value v;
        const char *key = ox_gguf_key(g, i);
        if (!key || (arch && has_prefix(key, arch)) || has_prefix(key, "tokenizer"))
            continue;
        enum ox_status st = ox_gguf_value(g, i, &v);
        if (st != OX_OK)
            return st;
        fprintf(f, "  %-40s %-4s = ", key, type_name(v.type));
        st = text_value(f, &v, 0);
        putc('\n', f);
        if (st != OX_OK)
            return st;
    }
    return OX_OK;
}

static void shape_string(const struct ox_tensor_info *t, char *buf, size_t cap) {
    size_t len = 0;
    buf[0] = '\0';
    for (int d = 0; d < t->n_dims && len < cap; d++)
        len += (size_t)snprintf(buf + len, cap - len, d ? " x %" PRId64 : "%" PRId64, t->ne[d]);
}

static enum ox_status text_tensors(FILE *f, const struct ox_gguf *g) {
    fprintf(f, "\ntensors:\n  %5s  %-8s %-24s %12s  %s\n", "index", "type", "shape", "bytes",
            "name");
    for (int64_t i = 0; i < ox_gguf_n_tensors(g); i++) {
        struct ox_tensor_info t;
        char shape[96];
        enum ox_status st = ox_gguf_tensor(g, i, &t);
        if (st != OX_OK)
            return st;
        const char *tname = ox_dtype_name(t.type);
        shape_string(&t, shape, sizeof shape);
        fprintf(f, "  %5" PRId64 "  %-8s %-24s %12" PRIu64 "  %s\n", i, tname ? tname : "?",
                shape, t.n_bytes, t.name);
    }
    return OX_OK;
}

static enum ox_status text_totals(FILE *f, const struct ox_gguf *g) {
    struct info_totals tot;
    enum ox_status st = compute_totals(g, &tot);
    if (st != OX_OK)
        return st;
    fprintf(f, "\ntotals:\n");
    fprintf(f, "  parameters     %" PRIu64 " (%.2f M)\n", tot.n_params,
            (double)tot.n_params / 1e6);
    fprintf(f, "  tensor bytes   %" PRIu64 " (%.2f MiB)\n", tot.n_bytes,
            (double)tot.n_bytes / 1048576.0);
    if (tot.n_params)
        fprintf(f, "  bits/weight    %.4f\n", 8.0 * (double)tot.n_bytes / (double)tot.n_params);
    else
        fprintf(f, "  bits/weight    -\n");
    return OX_OK;
}

static enum ox_status print_text(FILE *f, const struct ox_gguf *g, const char *path) {
    char *arch = arch_name(g);
    enum ox_status st;
    text_summary(f, g, path);
    st = text_arch(f, g, arch);
    if (st == OX_OK)
        st = text_tokenizer(f, g);
    if (st == OX_OK)
        st = text_other(f, g, arch);
    if (st == OX_OK)
        st = text_tensors(f, g);
    if (st == OX_OK)
        st = text_totals(f, g);
    free(arch);
    return st;
}

/* ---- Entry point ----------------------------------------------------------------------- */

int cmd_info(int argc, char **argv) {
    struct info_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (o.architectures) { /* "llama, mistral3, ...": one name a line */
        for (const char *p = ox_arch_supported(); *p;) {
            size_t len = strcspn(p, ",");
            printf("%.*s\n", (int)len, p);
            p += len;
            p += strspn(p, ", ");
        }
        return fflush(stdout) != 0 || ferror(stdout) ? 1 : 0;
    }
    struct ox_gguf *g = NULL;
    enum ox_status st = ox_gguf_open(o.path, &g);
    if (st == OX_OK) {
        st = o.json ? print_json(stdout, g) : print_text(stdout, g, o.path);
        ox_gguf_free(g);
    }
    if (st != OX_OK) {
        fflush(stdout);
        const char *msg = ox_last_error();
        fprintf(stderr, "oxidize info: %s: %s\n", o.path,
                msg && msg[0] ? msg : ox_status_name(st));
        return 1;
    }
    /* A full disk or closed pipe shows up only here; say so instead of exiting 0. */
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "oxidize info: error writing output\n");
        return 1;
    }
    return 0;
}
