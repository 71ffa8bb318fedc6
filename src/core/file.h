/* file.h: read-only whole-file access through mmap, with a read() fallback. */
#ifndef OX_CORE_FILE_H
#define OX_CORE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

struct file_map {
    const uint8_t *data; /* NULL for an empty file */
    size_t size;
    bool mapped;         /* true: munmap on close; false: heap copy */
};

/* Map path read-only (use_mmap) or read it into memory; errors are OX_ERR_IO naming path. */
enum ox_status file_map_open(const char *path, bool use_mmap, struct file_map *out);
void file_map_close(struct file_map *map);
/* Files file_map_open has opened so far in this process (whether or not it then failed): a
 * test counts them to check that loading a model opens its file once. */
uint64_t file_map_open_count(void);

/* Tell the OS that the whole pages inside [p, p + n) of a mapping will not be read again
 * soon, so they need not stay resident (a later read brings them back from the file). */
void file_map_release(const struct file_map *map, const void *p, size_t n);

#endif
