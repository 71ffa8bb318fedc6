/* vk_profile.c: OX_VK_PROFILE=1: every dispatch's GPU time from timestamps written around it,
 * summed by shader and printed to stderr when the context is released: where a step's time goes,
 * which is what to make faster first; OX_VK_PROFILE=grid: by shader and workgroup grid, so one
 * shader's shapes (a model's products of each size) come apart. Off (no queries written) unless
 * asked for. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/vk_internal.h"

enum {
    PROFILE_SLOTS = 8192, /* dispatches timed per submission; later ones are not */
    PROFILE_ROWS = 1024   /* shaders (and grids) told apart; the rest share the last row */
};

struct profile_row {
    enum vk_shader shader;
    uint32_t grid[3]; /* the workgroups (0 0 0 unless by grid) */
    double ns;        /* summed time */
    uint64_t calls;
};

struct vk_profile {
    VkQueryPool pool;
    bool by_grid;
    uint32_t used;                  /* dispatches timed in the recording */
    uint32_t row_of[PROFILE_SLOTS]; /* which row each adds to */
    struct profile_row rows[PROFILE_ROWS];
    uint32_t n_rows;
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
        p->by_grid = !strcmp(env, "grid");
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

/* The row of shader sh over grid g (made on first sight). */
static uint32_t profile_row(struct vk_profile *p, enum vk_shader sh, const uint32_t g[3]) {
    uint32_t key[3] = {0, 0, 0};
    if (p->by_grid)
        key[0] = g[0], key[1] = g[1], key[2] = g[2];
    for (uint32_t i = 0; i < p->n_rows; i++)
        if (p->rows[i].shader == sh && !memcmp(p->rows[i].grid, key, sizeof key))
            return i;
    if (p->n_rows >= PROFILE_ROWS - 1) { /* full: the rest in the last row, under no one name */
        struct profile_row *rest = &p->rows[PROFILE_ROWS - 1];
        rest->shader = VK_SHADER_COUNT, memset(rest->grid, 0, sizeof rest->grid);
        p->n_rows = PROFILE_ROWS;
        return PROFILE_ROWS - 1;
    }
    struct profile_row *r = &p->rows[p->n_rows];
    r->shader = sh, memcpy(r->grid, key, sizeof key);
    return p->n_rows++;
}

void vk_profile_dispatch(struct vk_state *s, enum vk_shader sh, const uint32_t grid[3],
                         bool after) {
    struct vk_profile *p = s->prof;
    if (!p || p->used >= PROFILE_SLOTS)
        return;
    vkCmdWriteTimestamp(
        s->cmd, after ? VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT : VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT,
        p->pool, 2 * p->used + after);
    if (after)
        p->row_of[p->used++] = profile_row(p, sh, grid);
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
            p->rows[p->row_of[i]].ns += (double)((t[2 * i + 1] - t[2 * i]) & p->mask) * p->period;
            p->rows[p->row_of[i]].calls++;
        }
    p->used = 0;
}

void vk_profile_release(struct vk_state *s) {
    struct vk_profile *p = s->prof;
    if (!p)
        return;
    double all = 0.0;
    for (uint32_t i = 0; i < p->n_rows; i++)
        all += p->rows[i].ns;
    if (all > 0.0)
        fprintf(stderr, "vulkan profile: %.3f ms of GPU time in dispatches\n", all * 1e-6);
    for (int shown = 0; shown < (p->by_grid ? 48 : 24); shown++) { /* the largest first */
        struct profile_row *top = NULL;
        for (uint32_t i = 0; i < p->n_rows; i++)
            if (p->rows[i].calls && (!top || p->rows[i].ns > top->ns))
                top = &p->rows[i];
        if (!top)
            break;
        char name[96];
        snprintf(name, sizeof name, "%s",
                 top->shader == VK_SHADER_COUNT ? "(the rest)" : vk_shader_names[top->shader]);
        if (p->by_grid && top->shader != VK_SHADER_COUNT)
            snprintf(name, sizeof name, "%s %ux%ux%u", vk_shader_names[top->shader], top->grid[0],
                     top->grid[1], top->grid[2]);
        fprintf(stderr, "  %-*s %10.3f ms %5.1f%% %8llu calls %9.2f us each\n",
                p->by_grid ? 36 : 20, name, top->ns * 1e-6, 100.0 * top->ns / all,
                (unsigned long long)top->calls, top->ns * 1e-3 / (double)top->calls);
        top->calls = 0;
    }
    vkDestroyQueryPool(s->d->device, p->pool, NULL);
    free(p);
    s->prof = NULL;
}
