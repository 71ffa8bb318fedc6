/* hub.h: models from the Hugging Face Hub (or a mirror) into a local cache: `oxidize pull`,
 * `-hf REPO[:QUANT]`, `oxidize list` and `oxidize rm`. */
#ifndef OX_APP_HUB_H
#define OX_APP_HUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct hub_opts {
    char endpoint[512]; /* HF_ENDPOINT, else https://huggingface.co (no trailing '/') */
    char cache[1024];   /* OX_CACHE, else $XDG_CACHE_HOME/oxidize, else ~/.cache/oxidize */
    const char *token;  /* HF_TOKEN or --hf-token: sent as a bearer token, or NULL */
    bool progress_bar;  /* a bar redrawn in place (a terminal), else a line per 10% */
};

/* The defaults from the environment; false (err says why) when no cache directory is known. */
bool hub_opts_init(struct hub_opts *o, char *err, size_t err_len);

/* The local paths of the model ref names (REPO[:QUANT] or REPO/FILE; a split model's parts in
 * order), downloaded and checked where they are not cached yet; with offline_ok, a model pulled
 * before is taken from the cache without asking the Hub. Returns the number of paths (each
 * malloc'd, as is *paths), or -1 with the reason in err. */
int hub_fetch(const struct hub_opts *o, const char *ref, bool offline_ok, char ***paths, char *err,
              size_t err_len);

/* What the cache holds: one line per file (repository, file, size; incomplete downloads
 * marked). Returns the number of files. */
int hub_list(const struct hub_opts *o, FILE *out);

/* Deletes the cached files of ref (a whole repository, or one model of it); returns how many,
 * or -1 with the reason in err. */
int hub_remove(const struct hub_opts *o, const char *ref, char *err, size_t err_len);

#endif
