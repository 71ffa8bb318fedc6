/* fuzz_hub.c: libFuzzer target for what `oxidize pull` reads from users and from the network:
 * the input is a reference (REPO[:QUANT] or REPO/FILE), a NUL, then lines that are both HTTP
 * header lines (X-Linked-Etag, X-Linked-Size) and a repository's file names to pick from. The
 * parsers must stay within their bounds, and whatever they accept must be safe: a reference's
 * repository and file, and every picked name, are paths that stay inside the cache. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hub/hub_ref.h"

enum { MAX_NAMES = 64 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t rlen = nul ? (size_t)(nul - data) : size;
    char *ref_text = malloc(rlen + 1);
    memcpy(ref_text, data, rlen);
    ref_text[rlen] = 0;
    char err[512];
    struct hub_ref ref;
    bool ok = hub_ref_parse(ref_text, &ref, err, sizeof err);
    if (ok && ((ref.file[0] && !hub_path_safe(ref.file)) || !hub_path_safe(ref.repo)))
        abort(); /* accepted something that would leave the cache */
    const char *rest = nul ? (const char *)nul + 1 : "";
    size_t left = nul ? size - rlen - 1 : 0;
    char *names[MAX_NAMES];
    int n = 0;
    while (left > 0 && n < MAX_NAMES) {
        const char *eol = memchr(rest, '\n', left);
        size_t len = eol ? (size_t)(eol - rest) + 1 : left;
        char sha[65];
        long long v;
        if (hub_header_sha256(rest, len, sha) && strlen(sha) != 64)
            abort();
        hub_header_size(rest, len, "X-Linked-Size", &v);
        size_t name_len = eol ? len - 1 : len;
        names[n] = malloc(name_len + 1);
        memcpy(names[n], rest, name_len);
        names[n][name_len] = 0;
        if (strlen(names[n]) == name_len && hub_path_safe(names[n]))
            n++; /* as hub.c keeps the Hub's names: safe ones only */
        else
            free(names[n]);
        rest += len, left -= len;
    }
    for (int i = 0; i < n; i++) {
        int idx, cnt;
        if (hub_split_part(names[i], &idx, &cnt) && !(idx >= 1 && idx <= cnt))
            abort();
    }
    if (ok) {
        int picked[16];
        int k = hub_pick(&ref, (const char *const *)names, n, picked, 16, err, sizeof err);
        for (int i = 0; i < k; i++)
            if (picked[i] < 0 || picked[i] >= n)
                abort();
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(ref_text);
    return 0;
}
