/* vk_weights.c: a model's weights copied to the device as it loads, through the loader's own
 * command stream, and freed with it. */
#include <pthread.h>

#include "backend/vulkan/vk_backend.h"
#include "backend/vulkan/vk_ops.h"
#include "core/status.h"

/* The loader's stream: weights go up through it, one at a time (a model loads on one thread,
 * but two models may load at once). */
static struct backend loader;
static pthread_mutex_t loader_lock = PTHREAD_MUTEX_INITIALIZER;

struct backend *vk_loader_begin(enum ox_status *st) {
    pthread_mutex_lock(&loader_lock);
    *st = loader.impl ? OX_OK : vk_init(&loader, NULL);
    return &loader;
}

void vk_loader_end(void) {
    pthread_mutex_unlock(&loader_lock);
}

enum ox_status vk_prepare_weight(struct backend_weights *bw, const struct backend_tensor *t,
                                 const void **copy) {
    *copy = NULL;
    struct vk_device *d = vk_device_get();
    if (!d)
        return OX_ERR_DEVICE;
    void *p = vk_mem_alloc(d, t->n_bytes);
    if (!p)
        return ox_fail(OX_ERR_OOM, "vulkan: no device memory for a weight of %zu bytes",
                       t->n_bytes);
    enum ox_status st;
    struct backend *up = vk_loader_begin(&st);
    if (st == OX_OK) {
        vk_upload(up, p, t->data, t->n_bytes);
        st = vk_download(up, NULL, NULL, 0);
    }
    vk_loader_end();
    if (st != OX_OK) {
        vk_mem_free(d, p);
        return st;
    }
    bw->bytes += t->n_bytes;
    *copy = p;
    return OX_OK;
}

void vk_release_weight(const void *copy) {
    struct vk_device *d = copy ? vk_device_get() : NULL;
    if (d)
        vk_mem_free(d, copy);
}
