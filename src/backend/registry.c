/* registry.c: the backends this build has. A new backend registers here, and only here. */
#include "backend/backend.h"
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
