/* reference_files.h: the shared llama.cpp reference files (reference/<model>.json), each handed
 * to a check with its model's name. */
#ifndef OX_TEST_REFERENCE_FILES_H
#define OX_TEST_REFERENCE_FILES_H

#include <dirent.h>
#include <jansson.h>

#include "test.h"

/* Calls check(name, ref) for every reference/<name>.json; returns how many were read. */
static inline int for_each_reference(void (*check)(const char *name, json_t *ref)) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/reference", test_data_dir());
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    struct dirent *e;
    int n_models = 0;
    while (d && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json"))
            continue;
        char path[2048], name[256];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        snprintf(name, sizeof name, "%.*s", (int)(len - 5), e->d_name);
        json_error_t err;
        json_t *ref = json_load_file(path, 0, &err);
        CHECK_MSG(ref != NULL, "%s: %s", path, err.text);
        if (ref)
            check(name, ref), n_models++;
        json_decref(ref);
    }
    if (d)
        closedir(d);
    return n_models;
}

#endif
