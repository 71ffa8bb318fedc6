/* hub.c: the Hub's file list, downloads into the cache (resumed, checked, renamed when whole),
 * and the cache's bookkeeping. HTTP through libcurl; the Hub's JSON through jansson. */
#define _POSIX_C_SOURCE 200809L
#include "hub/hub.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hub/hub_ref.h"
#include "common/sha256.h"

enum { MAX_PARTS = 256, MAX_FILES = 4096, ATTEMPTS = 5 };

/* a, b and c joined into out; false (out empty) where they do not fit. */
static bool cat3(char *out, size_t len, const char *a, const char *b, const char *c) {
    size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
    if (la + lb + lc + 1 > len) {
        out[0] = 0;
        return false;
    }
    memcpy(out, a, la);
    memcpy(out + la, b, lb);
    memcpy(out + la + lb, c, lc + 1);
    return true;
}

bool hub_opts_init(struct hub_opts *o, char *err, size_t err_len) {
    memset(o, 0, sizeof *o);
    const char *ep = getenv("HF_ENDPOINT");
    snprintf(o->endpoint, sizeof o->endpoint, "%s", ep && *ep ? ep : "https://huggingface.co");
    for (size_t n = strlen(o->endpoint); n > 0 && o->endpoint[n - 1] == '/'; n--)
        o->endpoint[n - 1] = 0;
    const char *tok = getenv("HF_TOKEN");
    o->token = tok && *tok ? tok : NULL;
    o->progress_bar = isatty(2);
    const char *c = getenv("OX_CACHE"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    int w = c && *c   ? snprintf(o->cache, sizeof o->cache, "%s", c)
            : x && *x ? snprintf(o->cache, sizeof o->cache, "%s/oxidize", x)
            : h && *h ? snprintf(o->cache, sizeof o->cache, "%s/.cache/oxidize", h)
                      : -1;
    if (w < 0 || (size_t)w >= sizeof o->cache) {
        snprintf(err, err_len, "no cache directory: set OX_CACHE (or HOME)");
        return false;
    }
    return true;
}

/* Every directory above the file at path. */
static bool make_parents(const char *path) {
    char buf[2048];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return false;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return false;
        *p = '/';
    }
    return true;
}

static bool file_size(const char *path, long long *size) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return false;
    *size = (long long)st.st_size;
    return true;
}

/* A small text file's first line (a digest, a list), or false. */
static bool read_small(const char *path, char *buf, size_t len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = 0;
    return true;
}

static bool write_small(const char *path, const char *text) {
    char tmp[2200];
    FILE *f = cat3(tmp, sizeof tmp, path, ".tmp", "") ? fopen(tmp, "wb") : NULL;
    if (!f)
        return false;
    bool ok = fputs(text, f) >= 0;
    ok = (fclose(f) == 0) && ok && rename(tmp, path) == 0;
    if (!ok)
        remove(tmp);
    return ok;
}

/* ---- HTTP ---- */

/* One request's state: the body into a buffer (JSON, error bodies) or a file, the Hub's digest
 * and size from any response on the way (the redirect carries them), progress. */
struct xfer {
    char *buf;
    size_t len, cap;
    FILE *file;           /* downloads: where the body goes now (the .part, or NULL) */
    FILE *part;           /* downloads: the .part file, appended from offset */
    int status;           /* the last response's status */
    struct sha256 *sha;   /* downloads: the digest of the .part so far */
    long long offset;     /* downloads: bytes the .part held when this request began */
    long long got, total; /* bytes written in this request; the whole file's size, or -1 */
    bool restart;         /* the server sent the whole file where a range was asked for */
    bool failed_write;
    char sha256[65];
    long long linked_size;
    const char *label;
    bool bar;
    int last_tenth;
    double last_draw;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Each response's status line comes before its headers and body: for a download, a 200 where
 * a range was asked for starts the file over, and an error's body goes to the buffer. */
static void on_status(struct xfer *x, int code) {
    x->status = code;
    if (!x->part)
        return;
    if (code >= 400) {
        x->file = NULL;
    } else if (code == 200 && x->offset > 0) {
        x->file = x->part;
        if (fflush(x->file) != 0 || ftruncate(fileno(x->file), 0) != 0 ||
            fseek(x->file, 0, SEEK_SET) != 0)
            x->failed_write = true;
        sha256_init(x->sha);
        x->offset = 0, x->got = 0;
    } else if (code >= 200 && code < 300) {
        x->file = x->part;
    }
}

static size_t on_header(char *line, size_t size, size_t n, void *user) {
    struct xfer *x = user;
    size_t len = size * n;
    char sha[65];
    long long v;
    if (len > 9 && !strncmp(line, "HTTP/", 5)) {
        const char *sp = memchr(line, ' ', len);
        if (sp && sp + 4 <= line + len)
            on_status(x, atoi(sp + 1));
    } else if (hub_header_sha256(line, len, sha))
        memcpy(x->sha256, sha, sizeof sha);
    else if (hub_header_size(line, len, "X-Linked-Size", &v))
        x->linked_size = v;
    return len;
}

static void progress(struct xfer *x, bool done) {
    if (x->total <= 0)
        return;
    long long have = x->offset + x->got;
    double t = now_s();
    if (x->bar) {
        if (!done && t - x->last_draw < 0.1)
            return;
        x->last_draw = t;
        int width = 30, fill = (int)((double)have / (double)x->total * width);
        char bar[32];
        for (int i = 0; i < width; i++)
            bar[i] = i < fill ? '=' : ' ';
        bar[width] = 0;
        fprintf(stderr, "\r%s [%s] %3d%% %.1f / %.1f MiB%s", x->label, bar,
                (int)(100.0 * (double)have / (double)x->total), (double)have / 1048576.0,
                (double)x->total / 1048576.0, done ? "\n" : "");
    } else {
        int tenth = (int)(10 * have / x->total);
        if (tenth > x->last_tenth || done) {
            x->last_tenth = tenth;
            fprintf(stderr, "%s: %d%% (%.1f of %.1f MiB)\n", x->label, 10 * tenth,
                    (double)have / 1048576.0, (double)x->total / 1048576.0);
        }
    }
}

static size_t on_body(char *data, size_t size, size_t n, void *user) {
    struct xfer *x = user;
    size_t len = size * n;
    if (x->file) {
        if (fwrite(data, 1, len, x->file) != len) {
            x->failed_write = true;
            return 0;
        }
        sha256_update(x->sha, data, len);
        x->got += (long long)len;
        progress(x, false);
        return len;
    }
    if (x->len + len > (size_t)64 << 20)
        return 0; /* a listing this large is not the Hub's */
    if (x->len + len + 1 > x->cap) {
        size_t cap = (x->len + len + 1) * 2;
        char *b = realloc(x->buf, cap);
        if (!b)
            return 0;
        x->buf = b, x->cap = cap;
    }
    memcpy(x->buf + x->len, data, len);
    x->len += len;
    x->buf[x->len] = 0;
    return len;
}

/* A handle with the settings every request shares. */
static CURL *new_handle(const struct hub_opts *o, struct curl_slist **hdrs) {
    CURL *c = curl_easy_init();
    if (!c)
        return NULL;
    *hdrs = curl_slist_append(NULL, "User-Agent: oxidize");
    if (o->token) {
        char auth[1100];
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", o->token);
        *hdrs = curl_slist_append(*hdrs, auth); /* curl keeps it to this host on redirects */
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, *hdrs);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#endif
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
    /* a transfer that stalls (under 1 byte a second for a minute) fails, and is resumed */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    return c;
}

/* The Hub's message in an error body ({"error": "..."}), or the status. */
static void http_error(const char *what, long code, const char *body, char *err, size_t err_len) {
    json_t *j = body ? json_loads(body, 0, NULL) : NULL;
    const char *msg = j && json_is_string(json_object_get(j, "error"))
                          ? json_string_value(json_object_get(j, "error"))
                          : NULL;
    const char *hint = code == 401 || code == 403
                           ? " (a gated or private repository: set HF_TOKEN or pass --hf-token)"
                       : code == 404 ? " (no such repository or file)"
                                     : "";
    snprintf(err, err_len, "%s: HTTP %ld%s%s%s", what, code, hint, msg ? ": " : "", msg ? msg : "");
    json_decref(j);
}

/* GET url into x->buf (or, with head, HEAD: the headers alone), redirects followed; the last
 * response's status in *code, its Content-Length in *length (-1 if none). */
static bool http_request(const struct hub_opts *o, const char *url, struct xfer *x, bool head,
                         long *code, long long *length, char *err, size_t err_len) {
    struct curl_slist *h = NULL;
    CURL *c = new_handle(o, &h);
    if (!c) {
        snprintf(err, err_len, "libcurl: cannot start");
        return false;
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    if (head) {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else {
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
    }
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    CURLcode r = curl_easy_perform(c);
    curl_off_t len = -1;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, code);
    curl_easy_getinfo(c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len);
    *length = (long long)len;
    curl_easy_cleanup(c);
    curl_slist_free_all(h);
    if (r != CURLE_OK) {
        snprintf(err, err_len, "%s: %s", url, curl_easy_strerror(r));
        return false;
    }
    return true;
}

/* HEAD of a file's resolve URL: its digest and size (x->sha256, x->total). */
static bool http_head(const struct hub_opts *o, const char *url, struct xfer *x, char *err,
                      size_t err_len) {
    long code = 0;
    long long len = -1;
    if (!http_request(o, url, x, true, &code, &len, err, err_len))
        return false;
    if (code >= 400) {
        http_error(url, code, NULL, err, err_len);
        return false;
    }
    x->total = x->linked_size > 0 ? x->linked_size : len;
    return true;
}

/* One attempt at the rest of a file: GET from the .part's length on. 1: complete; 0: the
 * transfer broke off (*have says how far it got; try again); -1: failed (err). */
static int download_once(const struct hub_opts *o, const char *url, FILE *f, struct sha256 *sha,
                         long long *have, long long total, const char *label, char *err,
                         size_t err_len) {
    struct xfer x = {.part = f,
                     .sha = sha,
                     .offset = *have,
                     .total = total,
                     .label = label,
                     .bar = o->progress_bar,
                     .last_tenth = -1};
    struct curl_slist *h = NULL;
    CURL *c = new_handle(o, &h);
    if (!c) {
        snprintf(err, err_len, "libcurl: cannot start");
        return -1;
    }
    char range[48];
    snprintf(range, sizeof range, "%lld-", *have);
    curl_easy_setopt(c, CURLOPT_URL, url);
    if (*have > 0)
        curl_easy_setopt(c, CURLOPT_RANGE, range);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &x);
    CURLcode r = curl_easy_perform(c);
    curl_easy_cleanup(c);
    curl_slist_free_all(h);
    int rc = 1;
    if (fflush(f) != 0 || x.failed_write) {
        snprintf(err, err_len, "%s: cannot write: %s", label, strerror(errno));
        rc = -1;
    } else if (x.status >= 400) {
        http_error(url, x.status, x.buf, err, err_len);
        rc = -1;
    } else if (r != CURLE_OK || (total > 0 && x.offset + x.got < total)) {
        snprintf(err, err_len, "%s: %s", label,
                 r != CURLE_OK ? curl_easy_strerror(r) : "the transfer ended early");
        rc = 0;
    }
    *have = x.offset + x.got;
    if (rc == 1)
        progress(&x, true); /* the bar's last state and its newline, or the 100% line */
    else if (x.bar && x.total > 0 && x.got > 0)
        fputc('\n', stderr); /* a broken transfer's bar line ends before its message */
    free(x.buf);
    return rc;
}

/* The digest of a file's first bytes into sha (a resumed .part's). */
static bool hash_prefix(const char *path, long long bytes, struct sha256 *sha) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    enum { CHUNK = 1 << 16 };
    char *buf = malloc(CHUNK);
    long long left = buf ? bytes : -1;
    while (left > 0) {
        size_t want = left < CHUNK ? (size_t)left : CHUNK;
        size_t got = fread(buf, 1, want, f);
        if (got == 0)
            break;
        sha256_update(sha, buf, got);
        left -= (long long)got;
    }
    free(buf);
    fclose(f);
    return left == 0;
}

/* The resolve URL of a file: each component of its path escaped. */
static bool resolve_url(const struct hub_opts *o, const char *repo, const char *file, char *url,
                        size_t len) {
    int w = snprintf(url, len, "%s/%s/resolve/main", o->endpoint, repo);
    for (const char *p = file; w > 0 && (size_t)w < len && *p;) {
        size_t n = strcspn(p, "/");
        char *e = curl_easy_escape(NULL, p, (int)n);
        if (!e)
            return false;
        w += snprintf(url + w, len - (size_t)w, "/%s", e);
        curl_free(e);
        p += n + (p[n] == '/');
    }
    return w > 0 && (size_t)w < len;
}

/* What a download of one file goes by: its URL, its files beside dest (the .part, the digest
 * the .part was started for, the digest of dest), a label for messages, and what the Hub says
 * of it (sha256 and size, from a HEAD). */
struct fetch {
    char url[3072], part[2100], part_sha[2100], dest_sha[2100], label[600];
    const char *dest;
    struct xfer head;
};

/* The bytes of an earlier try's .part to go on from (hashed into sha): 0 when there is none,
 * or it was for another version of the file. */
static long long resume_from(const struct fetch *x, struct sha256 *sha) {
    long long have = 0;
    char started[80] = "";
    sha256_init(sha);
    if (!file_size(x->part, &have) || !x->head.sha256[0] ||
        !read_small(x->part_sha, started, sizeof started) ||
        strncmp(started, x->head.sha256, 64) != 0)
        return 0;
    if (have > 0 && !hash_prefix(x->part, have, sha)) {
        sha256_init(sha);
        return 0;
    }
    return have;
}

/* The rest of the file into f, resumed after each broken transfer (up to ATTEMPTS tries, a
 * moment apart): 1 done, 0 still broken, -1 failed (err). */
static int download(const struct hub_opts *o, const struct fetch *x, FILE *f, struct sha256 *sha,
                    long long *have, char *err, size_t err_len) {
    int rc = 0;
    for (int attempt = 1; attempt <= ATTEMPTS && rc == 0; attempt++) {
        rc = download_once(o, x->url, f, sha, have, x->head.total, x->label, err, err_len);
        if (rc == 0 && attempt < ATTEMPTS) {
            fprintf(stderr, "%s; resuming at %.1f MiB (try %d of %d)\n", err,
                    (double)*have / 1048576.0, attempt + 1, ATTEMPTS);
            struct timespec ts = {attempt / 4, 250000000L * (attempt % 4)}; /* 0.25 s, ... */
            nanosleep(&ts, NULL);
        }
    }
    return rc;
}

/* The whole .part checked against the Hub's size and sha256, then renamed to dest with its
 * digest beside it; a corrupt one is deleted. */
static bool put_in_place(const struct fetch *x, struct sha256 *sha, char *err, size_t err_len) {
    char digest[65];
    sha256_hex(sha, digest);
    long long got = -1;
    file_size(x->part, &got);
    if ((x->head.total >= 0 && got != x->head.total) ||
        (x->head.sha256[0] && strcmp(digest, x->head.sha256) != 0)) {
        snprintf(err, err_len,
                 "%s: the download is corrupt (%lld bytes, sha256 %s; the Hub says "
                 "%lld bytes, sha256 %s): deleted",
                 x->label, got, digest, x->head.total,
                 x->head.sha256[0] ? x->head.sha256 : "unknown");
        remove(x->part);
        remove(x->part_sha);
        return false;
    }
    if (rename(x->part, x->dest) != 0 || !write_small(x->dest_sha, digest)) {
        snprintf(err, err_len, "%s: cannot rename into place: %s", x->dest, strerror(errno));
        return false;
    }
    remove(x->part_sha);
    return true;
}

/* A file of repo into dest: skipped when dest is the Hub's current file (its recorded digest),
 * else downloaded to dest.part (resumed from what an earlier try left, if it was for the same
 * digest), checked against the Hub's sha256 and size, and renamed to dest only when whole. */
static bool fetch_file(const struct hub_opts *o, const char *repo, const char *file,
                       const char *dest, char *err, size_t err_len) {
    struct fetch x = {.dest = dest, .head = {.total = -1, .linked_size = -1}};
    if (!resolve_url(o, repo, file, x.url, sizeof x.url) ||
        !cat3(x.part, sizeof x.part, dest, ".part", "") ||
        !cat3(x.part_sha, sizeof x.part_sha, dest, ".part.sha256", "") ||
        !cat3(x.dest_sha, sizeof x.dest_sha, dest, ".sha256", "") ||
        !cat3(x.label, sizeof x.label, repo, "/", file)) {
        snprintf(err, err_len, "%s/%s: name too long", repo, file);
        return false;
    }
    if (!http_head(o, x.url, &x.head, err, err_len))
        return false;
    char known[80] = "";
    long long size = -1;
    if (file_size(dest, &size) && read_small(x.dest_sha, known, sizeof known) &&
        (x.head.sha256[0] ? !strncmp(known, x.head.sha256, 64) : size == x.head.total)) {
        fprintf(stderr, "%s: up to date\n", x.label);
        return true;
    }
    if (!make_parents(dest)) {
        snprintf(err, err_len, "%s: cannot create its directory: %s", dest, strerror(errno));
        return false;
    }
    struct sha256 sha;
    long long have = resume_from(&x, &sha);
    if (x.head.sha256[0] && !write_small(x.part_sha, x.head.sha256)) {
        snprintf(err, err_len, "%s: cannot write: %s", x.part_sha, strerror(errno));
        return false;
    }
    FILE *f = fopen(x.part, have > 0 ? "r+b" : "wb");
    if (!f || fseek(f, 0, SEEK_END) != 0) {
        snprintf(err, err_len, "%s: cannot open: %s", x.part, strerror(errno));
        if (f)
            fclose(f);
        return false;
    }
    if (have > 0)
        fprintf(stderr, "%s: resuming at %.1f MiB\n", x.label, (double)have / 1048576.0);
    int rc = download(o, &x, f, &sha, &have, err, err_len);
    if (fclose(f) != 0 && rc == 1) {
        snprintf(err, err_len, "%s: cannot write: %s", x.part, strerror(errno));
        rc = -1;
    }
    /* otherwise the .part stays, for the next try to resume */
    return rc == 1 && put_in_place(&x, &sha, err, err_len);
}

/* ---- the cache: <cache>/hub/OWNER/NAME/<file>, beside each file its .sha256, and in .refs/
 * one list per model pulled (the files a reference resolved to, for using them offline) ---- */

static void repo_dir(const struct hub_opts *o, const char *repo, char *out, size_t len) {
    snprintf(out, len, "%s/hub/%s", o->cache, repo);
}

/* The .refs entry of a reference: its quant (upper case), its file, or "default". */
static void ref_key_path(const struct hub_opts *o, const struct hub_ref *r, char *out, size_t len) {
    char key[600];
    if (r->file[0]) {
        snprintf(key, sizeof key, "file-%s", r->file);
        for (char *p = key; *p; p++)
            if (*p == '/')
                *p = '%';
    } else if (r->quant[0]) {
        snprintf(key, sizeof key, "quant-%s", r->quant);
        for (char *p = key; *p; p++)
            *p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
    } else {
        snprintf(key, sizeof key, "default");
    }
    char dir[1400];
    repo_dir(o, r->repo, dir, sizeof dir);
    snprintf(out, len, "%s/.refs/%s", dir, key);
}

static void free_paths(char **paths, int n) {
    for (int i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
}

/* The cached files of a reference pulled before, if all are still there. */
static int from_cache(const struct hub_opts *o, const struct hub_ref *r, char ***paths) {
    char refs[2100], list[1 << 14], dir[1400];
    ref_key_path(o, r, refs, sizeof refs);
    if (!read_small(refs, list, sizeof list))
        return -1;
    repo_dir(o, r->repo, dir, sizeof dir);
    char **out = calloc(MAX_PARTS, sizeof *out);
    int n = 0;
    for (char *line = strtok(list, "\n"); line && out; line = strtok(NULL, "\n")) {
        long long size;
        char path[2100];
        snprintf(path, sizeof path, "%s/%s", dir, line);
        if (n == MAX_PARTS || !hub_path_safe(line) || !file_size(path, &size)) {
            free_paths(out, n);
            return -1;
        }
        out[n++] = strdup(path);
    }
    if (!out || n == 0) {
        free_paths(out, n);
        return -1;
    }
    *paths = out;
    return n;
}

/* The repository's file names from /api/models/REPO/revision/main (each malloc'd). */
static int list_repo(const struct hub_opts *o, const char *repo, char **names, char *err,
                     size_t err_len) {
    char url[1200];
    snprintf(url, sizeof url, "%s/api/models/%s/revision/main", o->endpoint, repo);
    struct xfer x = {0};
    long code = 0;
    long long len;
    if (!http_request(o, url, &x, false, &code, &len, err, err_len)) {
        free(x.buf);
        return -1;
    }
    if (code != 200) {
        http_error(repo, code, x.buf, err, err_len);
        free(x.buf);
        return -1;
    }
    json_error_t je;
    json_t *j = x.buf ? json_loads(x.buf, 0, &je) : NULL;
    free(x.buf);
    json_t *sib = json_object_get(j, "siblings");
    if (!json_is_array(sib)) {
        snprintf(err, err_len, "%s: the Hub's answer has no file list", repo);
        json_decref(j);
        return -1;
    }
    int n = 0;
    for (size_t i = 0; i < json_array_size(sib) && n < MAX_FILES; i++) {
        const char *f = json_string_value(json_object_get(json_array_get(sib, i), "rfilename"));
        if (f && hub_path_safe(f)) /* names from the network go under the cache: checked */
            names[n++] = strdup(f);
    }
    json_decref(j);
    return n;
}

int hub_fetch(const struct hub_opts *o, const char *ref_text, bool offline_ok, char ***paths,
              char *err, size_t err_len) {
    struct hub_ref r;
    if (!hub_ref_parse(ref_text, &r, err, err_len))
        return -1;
    if (offline_ok) {
        int n = from_cache(o, &r, paths);
        if (n > 0)
            return n;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char **names = calloc(MAX_FILES, sizeof *names);
    int picked[MAX_PARTS];
    int n_names = names ? list_repo(o, r.repo, names, err, err_len) : -1;
    int n = n_names < 0 ? -1
                        : hub_pick(&r, (const char *const *)names, n_names, picked, MAX_PARTS, err,
                                   err_len);
    char dir[1400], list[1 << 14] = "";
    repo_dir(o, r.repo, dir, sizeof dir);
    char **out = n > 0 ? calloc((size_t)n, sizeof *out) : NULL;
    size_t used = 0;
    for (int i = 0; out && i < n; i++) {
        char dest[2100];
        snprintf(dest, sizeof dest, "%s/%s", dir, names[picked[i]]);
        if (!fetch_file(o, r.repo, names[picked[i]], dest, err, err_len)) {
            free_paths(out, i);
            out = NULL;
            n = -1;
            break;
        }
        out[i] = strdup(dest);
        int w = snprintf(list + used, sizeof list - used, "%s\n", names[picked[i]]);
        used += w > 0 ? (size_t)w : 0;
    }
    for (int i = 0; i < (n_names > 0 ? n_names : 0); i++)
        free(names[i]);
    free(names);
    if (n > 0 && !out)
        n = -1, snprintf(err, err_len, "out of memory");
    if (n > 0) {
        char refs[2100];
        ref_key_path(o, &r, refs, sizeof refs);
        if (!make_parents(refs) || !write_small(refs, list))
            fprintf(stderr, "oxidize: could not record %s in the cache (%s)\n", ref_text, refs);
        *paths = out;
    }
    return n;
}

/* Calls fn for every regular file under dir (rel: its path below root). */
static void walk(const char *dir, const char *rel, void (*fn)(const char *, const char *, void *),
                 void *user) {
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue; /* ., .., and .refs */
        char path[2100], sub[1200];
        struct stat st;
        if (!cat3(path, sizeof path, dir, "/", e->d_name) ||
            !cat3(sub, sizeof sub, rel, *rel ? "/" : "", e->d_name) || lstat(path, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode))
            walk(path, sub, fn, user);
        else if (S_ISREG(st.st_mode))
            fn(path, sub, user);
    }
    closedir(d);
}

static bool ends_with(const char *s, const char *tail) {
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && !strcmp(s + a - b, tail);
}

struct list_state {
    FILE *out;
    int count;
};

/* rel is OWNER/NAME/FILE... */
static void list_one(const char *path, const char *rel, void *user) {
    struct list_state *s = user;
    if (ends_with(rel, ".sha256") || ends_with(rel, ".tmp"))
        return;
    const char *a = strchr(rel, '/'), *b = a ? strchr(a + 1, '/') : NULL;
    if (!b)
        return;
    long long size = 0;
    file_size(path, &size);
    bool partial = ends_with(rel, ".part");
    fprintf(s->out, "%-40.*s %-50.*s %10.1f MiB%s\n", (int)(b - rel), rel,
            (int)(strlen(b + 1) - (partial ? 5 : 0)), b + 1, (double)size / 1048576.0,
            partial ? "  (incomplete)" : "");
    s->count++;
}

int hub_list(const struct hub_opts *o, FILE *out) {
    char root[1100];
    snprintf(root, sizeof root, "%s/hub", o->cache);
    struct list_state s = {out, 0};
    walk(root, "", list_one, &s);
    return s.count;
}

struct remove_state {
    char **names;
    int n;
};

static void collect(const char *path, const char *rel, void *user) {
    (void)path;
    struct remove_state *s = user;
    if (s->n < MAX_FILES && !ends_with(rel, ".sha256") && !ends_with(rel, ".part") &&
        !ends_with(rel, ".tmp"))
        s->names[s->n++] = strdup(rel);
}

static void remove_file(const char *path, const char *rel, void *user) {
    (void)rel;
    int *count = user;
    if (remove(path) == 0 && !ends_with(path, ".sha256"))
        (*count)++;
}

/* Removes the empty directories under dir, and dir if it ends up empty. */
static void prune(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char path[2100];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
            prune(path);
    }
    closedir(d);
    rmdir(dir);
}

int hub_remove(const struct hub_opts *o, const char *ref_text, char *err, size_t err_len) {
    struct hub_ref r;
    if (!hub_ref_parse(ref_text, &r, err, err_len))
        return -1;
    char dir[1400];
    repo_dir(o, r.repo, dir, sizeof dir);
    struct stat st;
    if (stat(dir, &st) != 0) {
        snprintf(err, err_len, "%s is not in the cache (%s)", r.repo, dir);
        return -1;
    }
    int count = 0;
    if (!r.quant[0] && !r.file[0]) { /* the whole repository, .refs too */
        char refs[1500];
        snprintf(refs, sizeof refs, "%s/.refs", dir);
        walk(refs, "", remove_file, &(int){0});
        walk(dir, "", remove_file, &count);
        prune(dir);
        return count;
    }
    struct remove_state s = {calloc(MAX_FILES, sizeof(char *)), 0};
    if (!s.names) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    walk(dir, "", collect, &s);
    int picked[MAX_PARTS];
    int n = hub_pick(&r, (const char *const *)s.names, s.n, picked, MAX_PARTS, err, err_len);
    for (int i = 0; i < n; i++) {
        static const char *const tails[] = {"", ".sha256", ".part", ".part.sha256"};
        for (size_t t = 0; t < sizeof tails / sizeof tails[0]; t++) {
            char path[2200];
            snprintf(path, sizeof path, "%s/%s%s", dir, s.names[picked[i]], tails[t]);
            if (remove(path) == 0 && t == 0)
                count++;
        }
    }
    if (n > 0) {
        char refs[2100];
        ref_key_path(o, &r, refs, sizeof refs);
        remove(refs);
        prune(dir);
    }
    for (int i = 0; i < s.n; i++)
        free(s.names[i]);
    free(s.names);
    return n < 0 ? -1 : count;
}
