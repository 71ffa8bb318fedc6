/* vk_stream.c: a context's command stream: ops recorded in order (a barrier after each but
 * those joined to the next; a few held back until the next command, which may change them:
 * vk_dispatch_later) into a ring of command buffers, each submitted once it holds 32 dispatches
 * (or into a decode step's recording: vk_graph.c), uploads through a staging ring, and downloads
 * that submit the rest, wait for all of it and report the first failure. */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/vulkan/vk_backend.h"
#include "backend/vulkan/vk_internal.h"
#include "backend/vulkan/vk_ops.h"
#include "core/status.h"

/* The download buffer starts at DOWN_BYTES and grows to what one download asks for, up to
 * DOWN_MOST: a decode step of 32 sequences reads 16 MB of logits at once, not in 4 MB round trips
 * (each a submit and a wait). */
enum { UP_BYTES = 4 << 20, DOWN_BYTES = 4 << 20, DOWN_MOST = 64 << 20 };

void vk_note(struct vk_state *s, VkResult r, const char *what) {
    if (r == VK_SUCCESS || s->err != OX_OK)
        return;
    s->err = OX_ERR_DEVICE;
    snprintf(s->msg, sizeof s->msg, "vulkan: %s (VkResult %d)", what, (int)r);
}

/* Whether f signaled (or the device failed) within ns nanoseconds of polling it. */
static bool polled(VkDevice device, VkFence f, int64_t ns) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        for (int i = 0; i < 64; i++)
            if (vkGetFenceStatus(device, f) != VK_NOT_READY)
                return true;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000000LL + (t.tv_nsec - t0.tv_nsec) < ns);
    return false;
}

void vk_settle(struct vk_state *s, VkFence f, bool *in_flight) {
    if (!*in_flight)
        return;
    if (s->d->spin_ns > 0)
        polled(s->d->device, f, s->d->spin_ns);
    vk_note(s, vkWaitForFences(s->d->device, 1, &f, VK_TRUE, UINT64_MAX), "vkWaitForFences");
    vkResetFences(s->d->device, 1, &f);
    *in_flight = false;
}

static void begin(struct vk_state *s) {
    if (s->recording)
        return;
    vk_settle(s, s->fence[s->at], &s->in_flight[s->at]);
    s->cmd = s->ring[s->at];
    vkResetCommandBuffer(s->cmd, 0);
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    vk_note(s, vkBeginCommandBuffer(s->cmd, &bi), "vkBeginCommandBuffer");
    s->recording = true, s->dispatches = 0;
    vk_profile_begin(s);
}

bool vk_queue_submit(struct vk_state *s, VkCommandBuffer cb, VkFence f, bool end) {
    VkResult r = end ? vkEndCommandBuffer(cb) : VK_SUCCESS;
    vk_note(s, r, "vkEndCommandBuffer");
    if (r != VK_SUCCESS)
        return false;
    VkSubmitInfo si = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cb};
    r = vkQueueSubmit(s->d->queue, 1, &si, f);
    vk_note(s, r, "vkQueueSubmit");
    return r == VK_SUCCESS;
}

/* What is being recorded, ended and submitted without waiting; the ring moves on. */
static void submit(struct vk_state *s) {
    s->recording = false;
    s->in_flight[s->at] = vk_queue_submit(s, s->cmd, s->fence[s->at], true);
    s->at = (s->at + 1) % VK_RING;
}

void vk_submit_recorded(struct vk_state *s) {
    vk_record_waiting(s);
    if (s->recording && s->pending)
        submit(s);
    else if (s->recording) /* nothing recorded: nothing to run */
        s->recording = false, vkEndCommandBuffer(s->cmd);
    s->pending = false;
}

bool vk_flush(struct vk_state *s) {
    if (s->capture) /* a recording cut short runs as it is */
        vk_graph_abort(s);
    vk_submit_recorded(s);
    bool waited = false;
    for (int i = 0; i < VK_RING; i++) /* in submission order: the last waits for the others */
        waited |= s->in_flight[i], vk_settle(s, s->fence[i], &s->in_flight[i]);
    vk_graphs_settle(s);
    if (waited)
        vk_profile_collect(s);
    s->up_used = 0;
    return s->err == OX_OK;
}

/* Later commands see what the ones before wrote: shaders and copies alike. */
static void barrier(struct vk_state *s) {
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                         VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
    const VkPipelineStageFlags st =
        VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    vkCmdPipelineBarrier(s->cmd, st, st, 0, 1, &mb, 0, NULL, 0, NULL);
}

uint32_t vk_groups(size_t n) {
    size_t g = (n + 255) / 256;
    return g == 0 ? 1 : g > 65535 ? 65535 : (uint32_t)g;
}

/* One dispatch recorded, a barrier after it unless joined to the next. */
static void record(struct vk_state *s, enum vk_shader sh, VkPipeline pipeline, const void *args,
                   size_t bytes, const uint32_t grid[3], bool joined) {
    begin(s);
    vkCmdBindPipeline(s->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
    vkCmdPushConstants(s->cmd, s->d->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, (uint32_t)bytes, args);
    vk_profile_dispatch(s, sh, grid, false);
    vkCmdDispatch(s->cmd, grid[0], grid[1], grid[2]);
    vk_profile_dispatch(s, sh, grid, true);
    if (!joined)
        barrier(s);
    s->pending = true;
    /* a long batch (a decode step: hundreds) goes to the GPU in parts, so it runs while the rest
     * is recorded; the profiler's timestamps stay in one buffer, a recording in its own */
    if (++s->dispatches >= 32 && !joined && !s->prof && !s->capture)
        submit(s);
}

/* The barriers joined dispatches left out (vk_backend_joins_taken), over every context. */
static _Atomic uint64_t joins_taken;

uint64_t vk_backend_joins_taken(void) {
    return joins_taken;
}

void vk_record_waiting(struct vk_state *s) {
    int count = s->n_waiting;
    s->n_waiting = 0;
    for (int i = 0; i < count; i++) {
        const struct vk_waiting *w = &s->waiting[i];
        bool joined = w->joined && i + 1 < count;
        record(s, w->shader, vk_pipeline(s->d, w->shader), w->args, w->bytes, w->grid, joined);
        joins_taken += joined;
    }
}

void vk_join_waiting(struct vk_state *s) {
    if (s->n_waiting > 0)
        s->waiting[s->n_waiting - 1].joined = s->d->joins;
}

/* Whether sh's pipeline is there and its arguments fit the push constants (noted where not). */
static bool dispatchable(struct vk_state *s, enum vk_shader sh, size_t bytes) {
    if (bytes > VK_PUSH_BYTES) {
        vk_note(s, VK_ERROR_UNKNOWN, "a shader's arguments past the push constants' 128 bytes");
        return false;
    }
    if (!vk_pipeline(s->d, sh)) {
        vk_note(s, VK_ERROR_INITIALIZATION_FAILED, "a shader's pipeline");
        return false;
    }
    return true;
}

/* One dispatch on pipeline (shader sh's), after the ones held back. */
static void dispatch_on(struct vk_state *s, enum vk_shader sh, VkPipeline pipeline,
                        const void *args, size_t bytes, const uint32_t grid[3]) {
    vk_record_waiting(s);
    record(s, sh, pipeline, args, bytes, grid, false);
    s->serial++;
}

void vk_dispatch(struct vk_state *s, enum vk_shader sh, const void *args, size_t bytes, uint32_t gx,
                 uint32_t gy, uint32_t gz) {
    const uint32_t grid[3] = {gx, gy, gz};
    if (dispatchable(s, sh, bytes))
        dispatch_on(s, sh, vk_pipeline(s->d, sh), args, bytes, grid);
}

void vk_dispatch_special(struct vk_state *s, enum vk_shader sh, const uint32_t spec[VK_SPEC],
                         const void *args, size_t bytes, uint32_t gx, uint32_t gy, uint32_t gz) {
    const uint32_t grid[3] = {gx, gy, gz};
    VkPipeline pipeline = vk_pipeline_special(s->d, sh, spec);
    if (!pipeline || bytes > VK_PUSH_BYTES)
        vk_note(s, VK_ERROR_INITIALIZATION_FAILED, "a specialized shader's pipeline");
    else
        dispatch_on(s, sh, pipeline, args, bytes, grid);
}

void vk_dispatch_later(struct vk_state *s, enum vk_shader sh, const void *args, size_t bytes,
                       uint32_t gx, uint32_t gy, uint32_t gz) {
    if (!dispatchable(s, sh, bytes))
        return;
    if (s->n_waiting == VK_WAITING)
        vk_record_waiting(s);
    struct vk_waiting *w = &s->waiting[s->n_waiting++];
    w->shader = sh, w->bytes = bytes;
    memcpy(w->args, args, bytes);
    w->grid[0] = gx, w->grid[1] = gy, w->grid[2] = gz;
    w->joined = false;
    s->serial++;
}

void *vk_waiting_args(struct vk_state *s, int i, size_t bytes) {
    return i < s->n_waiting && s->waiting[i].bytes == bytes ? s->waiting[i].args : NULL;
}

bool vk_waiting_redirect(struct vk_state *s, int i, enum vk_shader sh, uint32_t gx, uint32_t gy) {
    if (i >= s->n_waiting || !vk_pipeline(s->d, sh))
        return false;
    struct vk_waiting *w = &s->waiting[i];
    w->shader = sh, w->grid[0] = gx, w->grid[1] = gy, w->grid[2] = 1;
    return true;
}

void *vk_alloc(struct backend *b, size_t bytes) {
    return vk_mem_alloc(vk_of(b)->d, bytes);
}

void vk_free(struct backend *b, void *p) {
    vk_mem_free(vk_of(b)->d, p);
}

/* One copy between a buffer of ours and a staging one, in stream order. */
static void copy(struct vk_state *s, VkBuffer from, VkDeviceSize from_off, VkBuffer to,
                 VkDeviceSize to_off, size_t bytes) {
    vk_record_waiting(s);
    begin(s);
    VkBufferCopy region = {from_off, to_off, bytes};
    vkCmdCopyBuffer(s->cmd, from, to, 1, &region);
    barrier(s);
    s->pending = true, s->serial++;
}

void vk_upload(struct backend *b, void *dst, const void *host, size_t bytes) {
    struct vk_state *s = vk_of(b);
    s->capture_spoiled |= s->capture != NULL; /* a replay would copy what staging holds then */
    for (size_t done = 0; done < bytes;) {
        if (s->up_used == s->up_size && !vk_flush(s))
            return;
        size_t piece =
            bytes - done < s->up_size - s->up_used ? bytes - done : s->up_size - s->up_used;
        VkDeviceSize off;
        VkBuffer to = vk_mem_find((const uint8_t *)dst + done, &off);
        if (!to) {
            vk_note(s, VK_ERROR_MEMORY_MAP_FAILED, "upload to memory that is not the device's");
            return;
        }
        memcpy(s->up_map + s->up_used, (const uint8_t *)host + done, piece);
        copy(s, s->up, s->up_used, to, off, piece);
        size_t step = (piece + 15) / 16 * 16; /* the next piece 16-byte aligned */
        s->up_used = step < s->up_size - s->up_used ? s->up_used + step : s->up_size;
        done += piece;
    }
}

/* A download buffer of at least bytes (up to DOWN_MOST), once nothing is in flight; the old one
 * stays where a new one cannot be made. */
static void grow_download(struct vk_state *s, size_t bytes) {
    if (bytes <= s->down_size || s->down_size >= DOWN_MOST || !vk_flush(s))
        return;
    size_t want = bytes < DOWN_MOST ? (bytes + (1 << 20) - 1) / (1 << 20) << 20 : DOWN_MOST;
    VkDeviceMemory mem;
    uint8_t *map;
    VkBuffer buf = vk_host_buffer(s->d, want, s->d->read_type, &mem, (void **)&map);
    if (buf == VK_NULL_HANDLE)
        return;
    vkDestroyBuffer(s->d->device, s->down, NULL), vkFreeMemory(s->d->device, s->down_mem, NULL);
    s->down = buf, s->down_mem = mem, s->down_map = map, s->down_size = want;
}

/* A download into the pinned range: one copy straight into it; false where host is not in it. */
static bool download_pinned(struct vk_state *s, void *host, const void *src, size_t bytes) {
    VkDeviceSize to, from_off;
    if (!vk_pinned_offset(s, host, bytes, &to))
        return false;
    VkBuffer from = vk_mem_find(src, &from_off);
    if (!from)
        vk_note(s, VK_ERROR_MEMORY_MAP_FAILED, "download from memory that is not the device's");
    else
        copy(s, from, from_off, s->pinned.buffer, to, bytes);
    return true;
}

enum ox_status vk_download(struct backend *b, void *host, const void *src, size_t bytes) {
    struct vk_state *s = vk_of(b);
    bool pinned = host && bytes && download_pinned(s, host, src, bytes);
    if (!pinned)
        grow_download(s, bytes);
    for (size_t done = 0; done < bytes && host && !pinned;) {
        size_t piece = bytes - done < s->down_size ? bytes - done : s->down_size;
        VkDeviceSize off;
        VkBuffer from = vk_mem_find((const uint8_t *)src + done, &off);
        if (!from) {
            vk_note(s, VK_ERROR_MEMORY_MAP_FAILED, "download from memory that is not the device's");
            break;
        }
        copy(s, from, off, s->down, 0, piece);
        if (!vk_flush(s))
            break;
        memcpy((uint8_t *)host + done, s->down_map, piece);
        done += piece;
    }
    vk_flush(s);
    enum ox_status st = s->err;
    s->err = OX_OK;
    return st == OX_OK ? OX_OK : ox_fail(st, "%s", s->msg);
}

enum ox_status vk_init(struct backend *b, const struct backend_sizes *z) {
    (void)z;
    struct vk_device *d = vk_device_get();
    if (!d)
        return OX_ERR_DEVICE;
    struct vk_state *s = calloc(1, sizeof *s);
    if (!s)
        return ox_fail(OX_ERR_OOM, "vulkan: out of host memory");
    b->impl = s;
    s->d = d;
    VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                  .queueFamilyIndex = d->family};
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    bool ok = vkCreateCommandPool(d->device, &pi, NULL, &s->pool) == VK_SUCCESS;
    for (int i = 0; i < VK_RING; i++)
        ok = ok && vkCreateFence(d->device, &fi, NULL, &s->fence[i]) == VK_SUCCESS;
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = s->pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = VK_RING};
    ok = ok && vkAllocateCommandBuffers(d->device, &ai, s->ring) == VK_SUCCESS;
    s->up_size = UP_BYTES, s->down_size = DOWN_BYTES;
    ok = ok && (s->up = vk_host_buffer(d, s->up_size, d->host_type, &s->up_mem,
                                       (void **)&s->up_map)) != VK_NULL_HANDLE;
    ok = ok && (s->down = vk_host_buffer(d, s->down_size, d->read_type, &s->down_mem,
                                         (void **)&s->down_map)) != VK_NULL_HANDLE;
    b->own_bytes = 0;
    s->prof = vk_profile_make(d);
    if (!ok) {
        vk_release(b); /* nothing half made stays behind in b */
        return ox_fail(OX_ERR_DEVICE, "vulkan: cannot set up a context's command stream");
    }
    enum ox_status st = vk_tables_ready(b);
    if (st != OX_OK)
        vk_release(b);
    else
        vk_attention_parts_ready(b);
    return st;
}

void vk_release(struct backend *b) {
    struct vk_state *s = vk_of(b);
    if (!s)
        return;
    VkDevice dev = s->d->device;
    vk_flush(s);
    vk_pinned_release(s);
    vk_graphs_release(s);
    vk_profile_release(s);
    if (s->scratch)
        vk_mem_free(s->d, s->scratch);
    if (s->wide)
        vk_mem_free(s->d, s->wide);
    if (s->fold)
        vk_mem_free(s->d, s->fold);
    if (s->attn_parts)
        vk_mem_free(s->d, s->attn_parts);
    vk_blocks_release(s);
    if (s->up)
        vkDestroyBuffer(dev, s->up, NULL), vkFreeMemory(dev, s->up_mem, NULL);
    if (s->down)
        vkDestroyBuffer(dev, s->down, NULL), vkFreeMemory(dev, s->down_mem, NULL);
    for (int i = 0; i < VK_RING; i++)
        if (s->fence[i])
            vkDestroyFence(dev, s->fence[i], NULL);
    if (s->pool)
        vkDestroyCommandPool(dev, s->pool, NULL);
    free(s);
    b->impl = NULL;
}
