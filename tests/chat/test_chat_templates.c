/* test_chat_templates.c: renders every reference chat template case and compares byte for byte
 * with the output of Hugging Face's Jinja setup (or checks that rendering fails where it did). */
#define _POSIX_C_SOURCE 200809L /* strdup, dirent */
#include <dirent.h>
#include <stdint.h>

#include "chat/jinja_int.h"
#include "test.h"

/* strftime_now() is pinned to 2026-01-15 10:30:00 UTC, as when the references were made. */
#define FIXED_NOW 1768473000

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Show where two renders part ways, escaped, so a failure is readable in the log. */
static void show_diff(const char *want, const char *got) {
    size_t i = 0;
    while (want[i] && want[i] == got[i])
        i++;
    size_t from = i > 40 ? i - 40 : 0;
    fprintf(stderr, "      differ at byte %zu\n      want: ", i);
    for (size_t k = from; want[k] && k < i + 60; k++)
        fprintf(stderr, want[k] == '\n' ? "\\n" : "%c", want[k]);
    fprintf(stderr, "\n      got:  ");
    for (size_t k = from; got[k] && k < i + 60; k++)
        fprintf(stderr, got[k] == '\n' ? "\\n" : "%c", got[k]);
    fprintf(stderr, "\n");
}

static void run_case(struct jtemplate *t, const char *parse_err, struct jv ctx, struct jv input,
                     struct jv expect, const char *tname, const char *cname, int *passed) {
    struct jbuf js = {0};
    struct jv merged = {.kind = JV_DICT};
    struct jdict d = {0};
    struct jarena *a = jarena_new((size_t)64 << 20);
    merged.u.d = &d;
    for (size_t i = 0; i < ctx.u.d->n; i++)
        jv_dict_set(a, &d, ctx.u.d->keys[i], ctx.u.d->vals[i]);
    for (size_t i = 0; input.kind == JV_DICT && i < input.u.d->n; i++)
        jv_dict_set(a, &d, input.u.d->keys[i], input.u.d->vals[i]);
    jv_to_json(&js, merged, -1, 0, 0);
    struct jv *want = jv_dict_gets(expect.u.d, "output");
    struct jv *want_err = jv_dict_gets(expect.u.d, "error");
    char *out = NULL;
    size_t out_len = 0;
    struct jinja_opts opts = jinja_opts_default();
    opts.now = FIXED_NOW;
    opts.jinja2_only = true; /* the references are plain Jinja2's ({% generation %}: jinja_diff) */
    enum ox_status st =
        t ? jinja_render_json(t, js.p, js.len, &opts, &out, &out_len) : OX_ERR_FORMAT;
    const char *err = t ? ox_last_error() : parse_err;
    int ok;
    if (want_err) {
        ok = st != OX_OK;
        if (!ok)
            fprintf(stderr, "  FAIL %s/%s: expected %s, rendered fine\n", tname, cname,
                    want_err->kind == JV_STR ? want_err->u.s->p : "an error");
    } else if (st != OX_OK) {
        ok = 0;
        fprintf(stderr, "  FAIL %s/%s: %s\n", tname, cname, err);
    } else {
        ok = want && want->kind == JV_STR && want->u.s->len == out_len &&
             !memcmp(want->u.s->p, out, out_len);
        if (!ok) {
            fprintf(stderr, "  FAIL %s/%s: output differs\n", tname, cname);
            if (want && want->kind == JV_STR)
                show_diff(want->u.s->p, out);
        }
    }
    *passed += ok;
    free(out);
    free(js.p);
    jarena_free(a);
}

static void run_file(const char *dir, const char *fname, int *total, int *passed) {
    char path[1024];
    size_t len, tlen;
    snprintf(path, sizeof path, "%s/chat/expected/%s", dir, fname);
    char *text = test_read_file(path, &len);
    CHECK_MSG(text != NULL, "cannot read %s", path);
    if (!text)
        return;
    struct jarena *a = jarena_new((size_t)256 << 20);
    struct jv root;
    enum ox_status st = jjson_parse(a, text, len, &root);
    CHECK_MSG(st == OX_OK && root.kind == JV_DICT, "%s: %s", fname, ox_last_error());
    if (st != OX_OK || root.kind != JV_DICT)
        goto done;
    struct jv *tname = jv_dict_gets(root.u.d, "template"), *ctx = jv_dict_gets(root.u.d, "context"),
              *cases = jv_dict_gets(root.u.d, "cases");
    CHECK(tname && tname->kind == JV_STR && ctx && ctx->kind == JV_DICT && cases &&
          cases->kind == JV_DICT);
    if (!tname || tname->kind != JV_STR || !ctx || !cases || cases->kind != JV_DICT)
        goto done;
    snprintf(path, sizeof path, "%s/chat/templates/%s", dir, tname->u.s->p);
    if (!strstr(path + strlen(dir), ".jinja"))
        strncat(path, ".jinja", sizeof path - strlen(path) - 1);
    char *src = test_read_file(path, &tlen);
    CHECK_MSG(src != NULL, "cannot read %s", path);
    if (!src)
        goto done;
    struct jtemplate *t = NULL;
    char parse_err[512] = "";
    if (jinja_parse(src, tlen, &t) != OX_OK)
        snprintf(parse_err, sizeof parse_err, "%s", ox_last_error());
    int file_passed = 0;
    for (size_t i = 0; i < cases->u.d->n; i++) {
        struct jv *in = jv_dict_gets(cases->u.d->vals[i].u.d, "input");
        run_case(t, parse_err, *ctx, in ? *in : jv_dict(a), cases->u.d->vals[i], tname->u.s->p,
                 cases->u.d->keys[i].u.s->p, &file_passed);
    }
    printf("%-55s %d/%zu\n", tname->u.s->p, file_passed, cases->u.d->n);
    *total += (int)cases->u.d->n;
    *passed += file_passed;
    jinja_free(t);
    free(src);
done:
    jarena_free(a);
    free(text);
}

int main(void) {
    const char *dir = test_data_dir();
    char path[1024];
    snprintf(path, sizeof path, "%s/chat/expected", dir);
    DIR *d = opendir(path);
    CHECK_MSG(d != NULL, "cannot open %s", path);
    if (!d)
        return test_finish("test_chat_templates");
    char *names[1024];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 1024;) {
        size_t l = strlen(e->d_name);
        if (l > 5 && !strcmp(e->d_name + l - 5, ".json"))
            names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_names);
    int total = 0, passed = 0;
    for (int i = 0; i < n; i++) {
        run_file(dir, names[i], &total, &passed);
        free(names[i]);
    }
    printf("chat templates: %d/%d cases pass\n", passed, total);
    CHECK(total > 0);
    CHECK_MSG(passed == total, "%d of %d cases pass (failures listed above)", passed, total);
    return test_finish("test_chat_templates");
}
