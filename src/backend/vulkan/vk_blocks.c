/* vk_blocks.c: a context's small constant blocks that shaders read by address (a layer's RoPE
 * block for q, k and v's products, a norm's for the products on either side of it), each
 * uploaded once and found again by its bytes through a hash of them. */
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/vk_internal.h"

enum { BLOCKS = 1024 };

struct vk_blocks {
    uint8_t *device;                      /* BLOCKS blocks of VK_BLOCK_BYTES */
    uint8_t host[BLOCKS][VK_BLOCK_BYTES]; /* as uploaded, zero-padded */
    bool used[BLOCKS];
    int count;
};

/* FNV-1a of a block's bytes: where its search starts. */
static uint32_t hash_of(const uint8_t *bytes) {
    uint32_t h = 2166136261u;
    for (int i = 0; i < VK_BLOCK_BYTES; i++)
        h = (h ^ bytes[i]) * 16777619u;
    return h;
}

uint64_t vk_block_address(struct backend *b, const void *want, size_t bytes) {
    struct vk_state *s = vk_of(b);
    struct vk_blocks *kb = s->blocks;
    if (bytes > VK_BLOCK_BYTES)
        return 0;
    if (!kb) {
        kb = s->blocks = calloc(1, sizeof *kb);
        if (!kb)
            return 0;
        kb->device = vk_mem_alloc(s->d, (size_t)BLOCKS * VK_BLOCK_BYTES);
    }
    if (!kb->device)
        return 0;
    uint8_t padded[VK_BLOCK_BYTES] = {0};
    memcpy(padded, want, bytes);
    uint32_t at = hash_of(padded) % BLOCKS;
    for (; kb->used[at]; at = (at + 1) % BLOCKS) /* never full: count stops short of BLOCKS */
        if (!memcmp(kb->host[at], padded, VK_BLOCK_BYTES))
            return vk_addr(kb->device + (size_t)at * VK_BLOCK_BYTES);
    if (kb->count == BLOCKS - 1)
        return 0;
    memcpy(kb->host[at], padded, VK_BLOCK_BYTES);
    kb->used[at] = true, kb->count++;
    vk_upload(b, kb->device + (size_t)at * VK_BLOCK_BYTES, padded, VK_BLOCK_BYTES);
    return 0;
}

void vk_blocks_release(struct vk_state *s) {
    if (!s->blocks)
        return;
    if (s->blocks->device)
        vk_mem_free(s->d, s->blocks->device);
    free(s->blocks);
    s->blocks = NULL;
}
