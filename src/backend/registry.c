/* registry.c: the backends this build has. A new backend registers here, and only here. */
#include <stdio.h>

#include "backend/backend.h"
#include "oxidize.h"
#ifdef OX_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

const struct backend_ops *backend_host(void) {
    return &backend_cpu_ops;
}

/* The first device backend compiled in: a model's offloaded layers run there. */
const struct backend_ops *backend_device(void) {
#ifdef OX_HAVE_CUDA
    return &backend_cuda_ops;
#else
    return NULL;
#endif
}

size_t ox_backends(char *buf, size_t cap) {
    const struct backend_ops *dev = backend_device();
    int n = dev ? snprintf(buf, cap, "%s, %s (%s)", backend_host()->name, dev->name,
                           dev->available() ? "device found" : "no device")
                : snprintf(buf, cap, "%s", backend_host()->name);
    return n < 0 ? 0 : (size_t)n;
}
