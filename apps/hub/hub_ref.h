/* hub_ref.h: what `oxidize pull` and `-hf` are given, REPO[:QUANT] or REPO/FILE, taken apart and
 * checked, and how a repository's file list is narrowed to the files of one model. */
#ifndef OX_APP_HUB_REF_H
#define OX_APP_HUB_REF_H

#include <stdbool.h>
#include <stddef.h>

/* owner/name as the Hub spells repositories (letters, digits, '-', '_', '.'; no ".." and no
 * leading '.' or '-'), then either a quantization name (":Q4_K_M") or a file in the repository
 * ("/sub/dir/model.gguf"), or neither. */
struct hub_ref {
    char repo[200]; /* owner/name */
    char quant[64]; /* "" or the name after ':' */
    char file[512]; /* "" or the path after the repository */
};

/* Parses text into *ref; false (with a reason in err) for anything else. */
bool hub_ref_parse(const char *text, struct hub_ref *ref, char *err, size_t err_len);

/* Whether a path inside a repository is safe to join to a local directory: relative, no "..",
 * "." or empty components, no backslashes or control characters. */
bool hub_path_safe(const char *path);

/* The parts of a split GGUF (NAME-00001-of-00003.gguf): its index and count, or false. */
bool hub_split_part(const char *file, int *index, int *count);

/* From a repository's n files, those of the model ref names (indices into names, in order: a
 * split model's parts 1..N), or -1 with a message in err listing what the repository has. With
 * no quant and no file: the repository's Q4_K_M if it has one, else its only model. Files whose
 * names say mmproj (vision projectors) are not models. Returns the count picked. */
int hub_pick(const struct hub_ref *ref, const char *const *names, int n, int *picked, int max,
             char *err, size_t err_len);

/* An HTTP response header line (name: value, CRLF or not) as the Hub sends them: the sha256 of
 * X-Linked-Etag ("..." or W/"...", 64 hex digits, lowercased into out) and the byte count of
 * X-Linked-Size or Content-Length. False where the line is another header or malformed. */
bool hub_header_sha256(const char *line, size_t len, char out[65]);
bool hub_header_size(const char *line, size_t len, const char *name, long long *out);

#endif
