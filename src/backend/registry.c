/* registry.c: the backends this build has. A new backend registers here, and only here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "oxidize.h"
#ifdef OX_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#ifdef OX_HAVE_VULKAN
#include "backend/vulkan/vk_backend.h"
#endif

const struct backend_ops *backend_host(void) {
    return &backend_cpu_ops;
}

/* The device backend a model's offloaded layers run on: Vulkan where OX_DEVICE names it
 * (vulkan[:N]: it is never picked unasked, lavapipe being a device too), else CUDA where it is
 * compiled in, else none. */
const struct backend_ops *backend_device(void) {
#ifdef OX_HAVE_VULKAN
    const char *want = getenv("OX_DEVICE");
    if (want && strncmp(want, "vulkan", 6) == 0)
        return &backend_vulkan_ops;
#endif
#ifdef OX_HAVE_CUDA
    return &backend_cuda_ops;
#else
    return NULL;
#endif
}

/* The first op a model's layers call that b has not, or NULL: a backend still being built (the
 * Vulkan one) is refused at load, naming it, rather than called through a NULL entry. */
const char *backend_missing_op(const struct backend_ops *b) {
    const struct {
        bool has;
        const char *name;
    } need[] = {{b->matmul != NULL, "matmul"},
                {b->get_rows != NULL, "get_rows"},
                {b->rms_norm != NULL, "rms_norm"},
                {b->layer_norm != NULL, "layer_norm"},
                {b->rope != NULL, "rope"},
                {b->glu != NULL, "glu"},
                {b->gelu != NULL, "gelu"},
                {b->add != NULL, "add"},
                {b->add_row != NULL, "add_row"},
                {b->scale != NULL, "scale"},
                {b->softmax != NULL, "softmax"},
                {b->softcap != NULL, "softcap"},
                {b->attention != NULL, "attention"},
                {b->copy_rows != NULL, "copy_rows"},
                {b->axpy != NULL, "axpy"},
                {b->zero != NULL, "zero"},
                {b->cache_store != NULL, "cache_store"},
                {b->cache_load != NULL, "cache_load"}};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (!need[i].has)
            return need[i].name;
    return NULL;
}

size_t ox_backends(char *buf, size_t cap) {
    const struct backend_ops *dev = backend_device();
    int n = dev ? snprintf(buf, cap, "%s, %s (%s)", backend_host()->name, dev->name,
                           dev->available() ? "device found" : "no device")
                : snprintf(buf, cap, "%s", backend_host()->name);
    return n < 0 ? 0 : (size_t)n;
}
