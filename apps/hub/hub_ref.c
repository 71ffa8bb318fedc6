/* hub_ref.c: REPO[:QUANT] and REPO/FILE references, and picking a model's files by them. */
#include "hub/hub_ref.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <strings.h>

static bool name_char(char c) {
    return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.';
}

/* One component of owner/name: 1-96 name characters, not starting with '.' or '-', not "..". */
static bool repo_part_ok(const char *s, size_t len) {
    if (len == 0 || len > 96 || s[0] == '.' || s[0] == '-')
        return false;
    for (size_t i = 0; i < len; i++)
        if (!name_char(s[i]) || (s[i] == '.' && i + 1 < len && s[i + 1] == '.'))
            return false;
    return true;
}

bool hub_path_safe(const char *path) {
    if (!*path || *path == '/' || strlen(path) >= 512)
        return false;
    for (const char *p = path; *p;) {
        size_t len = strcspn(p, "/");
        if (len == 0 || (len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
            return false;
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)p[i] < 0x20 || p[i] == '\\' || p[i] == 0x7f)
                return false;
        p += len;
        if (*p == '/')
            p++;
        if (!*p && p[-1] == '/')
            return false; /* a trailing slash names no file */
    }
    return true;
}

bool hub_ref_parse(const char *text, struct hub_ref *ref, char *err, size_t err_len) {
    memset(ref, 0, sizeof *ref);
    const char *slash = strchr(text, '/');
    if (!slash) {
        snprintf(err, err_len, "'%s' is not a repository: expected OWNER/NAME[:QUANT]", text);
        return false;
    }
    size_t owner = (size_t)(slash - text), name = strcspn(slash + 1, ":/");
    if (!repo_part_ok(text, owner) || !repo_part_ok(slash + 1, name)) {
        snprintf(err, err_len,
                 "'%s' is not a repository name (OWNER/NAME: letters, digits, "
                 "'-', '_', '.')",
                 text);
        return false;
    }
    memcpy(ref->repo, text, owner + 1 + name);
    const char *rest = slash + 1 + name;
    if (*rest == ':') {
        size_t len = strlen(rest + 1);
        bool ok = len > 0 && len < sizeof ref->quant;
        for (size_t i = 0; ok && i < len; i++)
            ok = name_char(rest[1 + i]);
        if (!ok) {
            snprintf(err, err_len, "'%s': a quantization name after ':' (such as Q4_K_M)", text);
            return false;
        }
        memcpy(ref->quant, rest + 1, len + 1);
    } else if (*rest == '/') {
        if (!hub_path_safe(rest + 1)) {
            snprintf(err, err_len, "'%s': not a file path inside the repository", text);
            return false;
        }
        snprintf(ref->file, sizeof ref->file, "%s", rest + 1);
    }
    return true;
}

bool hub_split_part(const char *file, int *index, int *count) {
    size_t len = strlen(file);
    /* "-00001-of-00003.gguf": 5 + 4 + 5 + 5 characters from the end */
    if (len < 20 || strcmp(file + len - 5, ".gguf") != 0)
        return false;
    const char *p = file + len - 20;
    if (p[0] != '-' || strncmp(p + 6, "-of-", 4) != 0)
        return false;
    for (int i = 0; i < 5; i++)
        if (!isdigit((unsigned char)p[1 + i]) || !isdigit((unsigned char)p[10 + i]))
            return false;
    *index = atoi(p + 1), *count = atoi(p + 10);
    return *index >= 1 && *count >= 1 && *index <= *count;
}

static bool ends_with_gguf(const char *s) {
    size_t len = strlen(s);
    return len > 5 && strcmp(s + len - 5, ".gguf") == 0;
}

/* Case-insensitive substring search. */
static bool contains_ci(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] &&
               tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n)
            return true;
    }
    return n == 0;
}

/* The file's name without the split suffix (or the whole name), for grouping parts. */
static size_t stem_len(const char *file) {
    int idx, cnt;
    return hub_split_part(file, &idx, &cnt) ? strlen(file) - 20 : strlen(file);
}

/* A file that is a model, counted once: a .gguf, not a vision projector (mmproj), and of a
 * split model its first part only. */
static bool is_model(const char *name) {
    int idx, cnt;
    return ends_with_gguf(name) && !contains_ci(name, "mmproj") &&
           !(hub_split_part(name, &idx, &cnt) && idx != 1);
}

/* How many models' names hold quant (NULL: any model); *first gets the first one's index. */
static int count_models(const char *const *names, int n, const char *quant, int *first) {
    int count = 0;
    for (int i = 0; i < n; i++)
        if (is_model(names[i]) && (!quant || contains_ci(names[i], quant)) && count++ == 0)
            *first = i;
    return count;
}

/* "the repository has: a.gguf, b.gguf" into err (its models only; first 20). */
static void list_models(const char *const *names, int n, char *err, size_t err_len) {
    size_t used = strlen(err);
    int shown = 0;
    for (int i = 0; i < n && used + 1 < err_len; i++) {
        if (!is_model(names[i]))
            continue;
        if (shown == 20) {
            snprintf(err + used, err_len - used, ", ...");
            break;
        }
        int w = snprintf(err + used, err_len - used, "%s%s",
                         shown ? ", " : "; the repository has: ", names[i]);
        used += w > 0 ? (size_t)w : 0;
        shown++;
    }
    if (!shown && used + 1 < err_len)
        snprintf(err + used, err_len - used, "; the repository has no .gguf files");
}

/* The file ref names (by path, or the one model its quant picks), or -1 with err set. */
static int pick_first(const struct hub_ref *ref, const char *const *names, int n, char *err,
                      size_t err_len) {
    int first = -1;
    if (ref->file[0]) {
        for (int i = 0; i < n && first < 0; i++)
            if (!strcmp(names[i], ref->file))
                first = i;
        if (first < 0)
            snprintf(err, err_len, "%s has no file %s", ref->repo, ref->file);
    } else {
        const char *quant = ref->quant[0] ? ref->quant : "Q4_K_M";
        int count = count_models(names, n, quant, &first);
        if (count == 0 && !ref->quant[0] && (count = count_models(names, n, NULL, &first)) > 1) {
            /* no Q4_K_M and no quant asked: the only model, if there is one */
            snprintf(err, err_len, "%s has several models: name one as %s:QUANT", ref->repo,
                     ref->repo);
            first = -1;
        } else if (count != 1) {
            snprintf(err, err_len, "%s: %s quantization '%s'", ref->repo,
                     count ? "more than one model matches" : "no model matches", quant);
            first = -1;
        }
    }
    if (first < 0)
        list_models(names, n, err, err_len);
    return first;
}

int hub_pick(const struct hub_ref *ref, const char *const *names, int n, int *picked, int max,
             char *err, size_t err_len) {
    err[0] = 0;
    int first = pick_first(ref, names, n, err, err_len), idx, cnt;
    if (first < 0 || max < 1)
        return -1;
    if (!hub_split_part(names[first], &idx, &cnt)) {
        picked[0] = first;
        return 1;
    }
    /* every part of the split model, in order, all of which the repository must have */
    if (cnt > max) {
        snprintf(err, err_len, "%s: %s has %d parts, more than %d", ref->repo, names[first], cnt,
                 max);
        return -1;
    }
    size_t stem = stem_len(names[first]);
    for (int part = 1; part <= cnt; part++) {
        picked[part - 1] = -1;
        for (int i = 0; i < n; i++) {
            int pi, pc;
            if (stem_len(names[i]) == stem && !strncmp(names[i], names[first], stem) &&
                hub_split_part(names[i], &pi, &pc) && pi == part && pc == cnt)
                picked[part - 1] = i;
        }
        if (picked[part - 1] < 0) {
            snprintf(err, err_len, "%s: part %d of %d of %.*s is missing", ref->repo, part, cnt,
                     (int)stem, names[first]);
            return -1;
        }
    }
    return cnt;
}

/* The value of header `name` in line (case-insensitive name, blanks around the value trimmed),
 * copied NUL-terminated into v; false if the line is another header or the value is too long. */
static bool header_value(const char *line, size_t len, const char *name, char *v, size_t v_len) {
    size_t n = strlen(name);
    if (len <= n || strncasecmp(line, name, n) != 0 || line[n] != ':')
        return false;
    size_t a = n + 1, b = len;
    while (a < b && (line[a] == ' ' || line[a] == '\t'))
        a++;
    while (b > a && (line[b - 1] == '\r' || line[b - 1] == '\n' || line[b - 1] == ' ' ||
                     line[b - 1] == '\t'))
        b--;
    if (b - a >= v_len)
        return false;
    memcpy(v, line + a, b - a);
    v[b - a] = 0;
    return true;
}

bool hub_header_sha256(const char *line, size_t len, char out[65]) {
    char v[128];
    if (!header_value(line, len, "X-Linked-Etag", v, sizeof v))
        return false;
    const char *p = v;
    if (!strncmp(p, "W/", 2))
        p += 2;
    size_t n = strlen(p);
    if (n >= 2 && p[0] == '"' && p[n - 1] == '"')
        p++, n -= 2;
    if (n != 64)
        return false;
    for (size_t i = 0; i < 64; i++) {
        if (!isxdigit((unsigned char)p[i]))
            return false;
        out[i] = (char)tolower((unsigned char)p[i]);
    }
    out[64] = 0;
    return true;
}

bool hub_header_size(const char *line, size_t len, const char *name, long long *out) {
    char v[32];
    if (!header_value(line, len, name, v, sizeof v) || !v[0])
        return false;
    long long x = 0;
    for (const char *p = v; *p; p++) {
        if (!isdigit((unsigned char)*p) || x > (LLONG_MAX - 9) / 10)
            return false;
        x = 10 * x + (*p - '0');
    }
    *out = x;
    return true;
}
