/* registry.c: the backends this build has. A new backend registers here, and only here. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/status.h"
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

/* The device a model being loaded asked for (ox_model_params.device); empty: OX_DEVICE's. */
static char chosen[16];
static pthread_mutex_t chosen_lock = PTHREAD_MUTEX_INITIALIZER;

static bool is_vulkan(const char *spec) {
    if (strncmp(spec, "vulkan", 6) != 0)
        return false;
    if (spec[6] == '\0')
        return true;
    if (spec[6] != ':' || !spec[7] || strlen(spec + 7) > 4)
        return false;
    return strspn(spec + 7, "0123456789") == strlen(spec + 7);
}

/* Whether this build can run the device name (what names it when it came from OX_DEVICE). */
static enum ox_status check_name(const char *name, const char *from) {
    bool vulkan = is_vulkan(name), cuda = !strcmp(name, "cuda");
    if (!vulkan && !cuda && strcmp(name, "none") != 0)
        return ox_fail(OX_ERR_INVALID_ARG,
                       "%s '%s': not cuda, vulkan, vulkan:N (the N-th Vulkan device) or none", from,
                       name);
#ifndef OX_HAVE_VULKAN
    if (vulkan)
        return ox_fail(OX_ERR_UNSUPPORTED,
                       "%s '%s': this build has no Vulkan backend (build with make VULKAN=1)", from,
                       name);
#endif
#ifndef OX_HAVE_CUDA
    if (cuda)
        return ox_fail(OX_ERR_UNSUPPORTED,
                       "%s 'cuda': this build has no CUDA backend (build with make CUDA=1)", from);
#endif
    return OX_OK;
}

enum ox_status backend_choose_device(const char *spec) {
    const char *env = getenv("OX_DEVICE");
    if (spec)
        OX_TRY(check_name(spec, "device"));
    else if (env && *env)
        OX_TRY(check_name(env, "OX_DEVICE"));
    pthread_mutex_lock(&chosen_lock);
    snprintf(chosen, sizeof chosen, "%s", spec ? spec : "");
    pthread_mutex_unlock(&chosen_lock);
    return OX_OK;
}

const char *backend_device_spec(char *buf, size_t cap) {
    pthread_mutex_lock(&chosen_lock);
    const char *env = getenv("OX_DEVICE");
    snprintf(buf, cap, "%s", chosen[0] ? chosen : env ? env : "");
    pthread_mutex_unlock(&chosen_lock);
    return buf;
}

/* The device backend a model's offloaded layers run on: Vulkan where the device asked for
 * names it (vulkan[:N]: it is never picked unasked, lavapipe being a device too), none where it
 * is "none", else CUDA where it is compiled in, else none. */
const struct backend_ops *backend_device(void) {
    char spec[16];
    backend_device_spec(spec, sizeof spec);
    if (!strcmp(spec, "none"))
        return NULL;
#ifdef OX_HAVE_VULKAN
    if (is_vulkan(spec))
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
