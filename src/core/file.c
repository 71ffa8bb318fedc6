/* file.c: opens a whole file read-only, mapped when possible, read into memory otherwise. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* madvise */
#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"

static atomic_uint_fast64_t n_opened;

uint64_t file_map_open_count(void) {
    return (uint64_t)atomic_load(&n_opened);
}

static enum ox_status read_all(int fd, const char *path, size_t size, struct file_map *out) {
    uint8_t *buf = ox_aligned_alloc(OX_ALIGN, size);
    if (!buf)
        return ox_fail(OX_ERR_OOM, "file: cannot allocate %zu bytes to read '%s'", size, path);
    /* in slices: in the browser (WORKERFS) each read is a JavaScript copy of its whole size */
    const size_t slice = (size_t)64 << 20;
    size_t done = 0;
    while (done < size) {
        ssize_t r = pread(fd, buf + done, size - done < slice ? size - done : slice, (off_t)done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int err = r < 0 ? errno : 0;
            ox_aligned_free(buf);
            return ox_fail(OX_ERR_IO, "file: read of '%s' failed at byte %zu: %s", path, done,
                           err ? strerror(err) : "unexpected end of file");
        }
        done += (size_t)r;
    }
    out->data = buf;
    out->mapped = false;
    return OX_OK;
}

enum ox_status file_map_open(const char *path, bool use_mmap, struct file_map *out) {
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ox_fail(OX_ERR_IO, "file: cannot open '%s': %s", path, strerror(errno));
    atomic_fetch_add(&n_opened, 1);
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return ox_fail(OX_ERR_IO, "file: '%s' is not a regular file", path);
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return ox_fail(OX_ERR_IO, "file: '%s' is too large to map", path);
    }
    out->size = (size_t)st.st_size;
    enum ox_status s = OX_OK;
    if (out->size == 0) {
        /* nothing to map: an empty file is left for the parser to reject */
    } else if (use_mmap) {
        void *p = mmap(NULL, out->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p != MAP_FAILED) {
            out->data = p;
            out->mapped = true;
        } else {
            s = read_all(fd, path, out->size, out); /* e.g. a filesystem without mmap */
        }
    } else {
        s = read_all(fd, path, out->size, out);
    }
    close(fd); /* a mapping stays valid after its descriptor is closed */
    if (s != OX_OK)
        memset(out, 0, sizeof *out);
    return s;
}

void file_map_close(struct file_map *map) {
    if (!map || !map->data)
        return;
    if (map->mapped)
        munmap((void *)map->data, map->size);
    else
        ox_aligned_free((void *)map->data);
    memset(map, 0, sizeof *map);
}

void file_map_release(const struct file_map *map, const void *p, size_t n) {
    if (!map->mapped || n == 0)
        return;
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)p + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
    uintptr_t hi = ((uintptr_t)p + n) & ~((uintptr_t)page - 1);
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
}
