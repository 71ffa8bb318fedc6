/* vk_profile.c: OX_VK_PROFILE=1: every dispatch's GPU time from timestamps written around it,
 * summed by shader and printed to stderr when the context is released: where a step's time goes,
 * which is what to make faster first. Off (no queries written) unless asked for. */
#include <stdio.h>
#include <stdlib.h>

#include "backend/vulkan/vk_internal.h"

enum { PROFILE_SLOTS = 8192 }; /* dispatches timed per submission; later ones are not */

struct vk_profile {
    VkQueryPool pool;
    uint32_t used;                        /* dispatches timed in the recording */
    enum vk_shader shader[PROFILE_SLOTS]; /* which shader each was */
    double ns[VK_SHADER_COUNT];           /* summed time by shader */
    uint64_t calls[VK_SHADER_COUNT];
    double period;                     /* nanoseconds a timestamp tick */
    uint64_t mask;                     /* the bits a timestamp has: differences wrap there */
    uint64_t ticks[2 * PROFILE_SLOTS]; /* the last submission's, read back */
};

/* The bits of the timestamps the device's queue writes (0: none). */
static uint32_t timestamp_bits(struct vk_device *d) {
    VkQueueFamilyProperties q[32];
    uint32_t n = 32;
    vkGetPhysicalDeviceQueueFamilyProperties(d->physical, &n, q);
    return d->family < n ? q[d->family].timestampValidBits : 0;
}

struct vk_profile *vk_profile_make(struct vk_device *d) {
    const char *env = getenv("OX_VK_PROFILE");
    if (!env || !*env || *env == '0')
        return NULL;
    uint32_t bits = timestamp_bits(d);
    if (bits == 0 || d->props.limits.timestampPeriod <= 0.0f) {
        fprintf(stderr, "vulkan profile: %s writes no timestamps on its compute queue\n",
                d->props.deviceName);
        return NULL;
    }
    struct vk_profile *p = calloc(1, sizeof *p);
    VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                .queryCount = 2 * PROFILE_SLOTS};
    if (p && vkCreateQueryPool(d->device, &qi, NULL, &p->pool) != VK_SUCCESS) {
        free(p);
        return NULL;
    }
    if (p) {
        p->period = d->props.limits.timestampPeriod;
        p->mask = bits >= 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
    }
    return p;
}

void vk_profile_begin(struct vk_state *s) {
    if (s->prof) {
        vkCmdResetQueryPool(s->cmd, s->prof->pool, 0, 2 * PROFILE_SLOTS);
        s->prof->used = 0;
    }
}

void vk_profile_dispatch(struct vk_state *s, enum vk_shader sh, bool after) {
    struct vk_profile *p = s->prof;
    if (!p || p->used >= PROFILE_SLOTS)
        return;
    vkCmdWriteTimestamp(
        s->cmd, after ? VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT : VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT,
        p->pool, 2 * p->used + after);
    if (after)
        p->shader[p->used++] = sh;
}

void vk_profile_collect(struct vk_state *s) {
    struct vk_profile *p = s->prof;
    if (!p || !p->used)
        return;
    uint64_t *t = p->ticks;
    if (vkGetQueryPoolResults(s->d->device, p->pool, 0, 2 * p->used, 2 * p->used * sizeof *t, t,
                              sizeof *t,
                              VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) == VK_SUCCESS)
        for (uint32_t i = 0; i < p->used; i++) {
            p->ns[p->shader[i]] += (double)((t[2 * i + 1] - t[2 * i]) & p->mask) * p->period;
            p->calls[p->shader[i]]++;
        }
    p->used = 0;
}

void vk_profile_release(struct vk_state *s) {
    struct vk_profile *p = s->prof;
    if (!p)
        return;
    double all = 0.0;
    for (int i = 0; i < VK_SHADER_COUNT; i++)
        all += p->ns[i];
    if (all > 0.0)
        fprintf(stderr, "vulkan profile: %.3f ms of GPU time in dispatches\n", all * 1e-6);
    for (int shown = 0; shown < 24; shown++) { /* the largest first */
        int top = -1;
        for (int i = 0; i < VK_SHADER_COUNT; i++)
            if (p->calls[i] && (top < 0 || p->ns[i] > p->ns[top]))
                top = i;
        if (top < 0)
            break;
        fprintf(stderr, "  %-20s %10.3f ms %5.1f%% %8llu calls %9.2f us each\n",
                vk_shader_names[top], p->ns[top] * 1e-6, 100.0 * p->ns[top] / all,
                (unsigned long long)p->calls[top], p->ns[top] * 1e-3 / (double)p->calls[top]);
        p->calls[top] = 0;
    }
    vkDestroyQueryPool(s->d->device, p->pool, NULL);
    free(p);
    s->prof = NULL;
}
