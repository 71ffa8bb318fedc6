/* file_text.c: reading a whole text file for the commands that take -f FILE. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"

char *cmd_read_file(const char *cmd, const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "oxidize %s: cannot open %s: %s\n", cmd, path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t n = 0, cap = 0, got;
    do {
        if (cap - n < 65536) { /* grow by doubling: pipes and /proc files have no size */
            char *bigger = realloc(buf, (cap = cap * 2 + 65536) + 1);
            if (!bigger) {
                free(buf);
                fclose(f);
                fprintf(stderr, "oxidize %s: out of memory reading %s\n", cmd, path);
                return NULL;
            }
            buf = bigger;
        }
        n += got = fread(buf + n, 1, cap - n, f);
    } while (got > 0);
    fclose(f);
    buf[n] = 0;
    *len = n;
    return buf;
}
