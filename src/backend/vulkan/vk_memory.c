/* vk_memory.c: device memory as the op table's pointers: large buffers (chunks) with buffer
 * device addresses, cut into blocks first-fit; a pointer is the block's device address, so the
 * model's pointer arithmetic works as it does on CUDA, and copies find the chunk it falls in. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/vk_internal.h"
#include "core/status.h"

enum { CHUNK_MIN = 256 << 20, ALIGN = 256, CHUNKS_MAX = 4096 };

/* A chunk and its blocks in address order: used or free, covering it. */
struct block {
    VkDeviceSize offset, size;
    bool used;
};
struct chunk {
    VkBuffer buffer;
    VkDeviceMemory memory;
    uint64_t base; /* its device address */
    VkDeviceSize size;
    struct block *blocks;
    int n_blocks, cap_blocks;
};

static struct chunk chunks[CHUNKS_MAX];
static int n_chunks;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* A device-local buffer of bytes whose address shaders can take. */
static bool new_chunk(struct vk_device *d, VkDeviceSize bytes, struct chunk *c) {
    VkBufferCreateInfo bi = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = bytes,
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                 VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT};
    memset(c, 0, sizeof *c);
    if (vkCreateBuffer(d->device, &bi, NULL, &c->buffer) != VK_SUCCESS)
        return false;
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(d->device, c->buffer, &req);
    VkMemoryAllocateFlagsInfo flags = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
                                       .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT};
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                               .pNext = &flags,
                               .allocationSize = req.size,
                               .memoryTypeIndex = d->memory_type};
    if (!(req.memoryTypeBits >> d->memory_type & 1) ||
        vkAllocateMemory(d->device, &ai, NULL, &c->memory) != VK_SUCCESS ||
        vkBindBufferMemory(d->device, c->buffer, c->memory, 0) != VK_SUCCESS) {
        if (c->memory)
            vkFreeMemory(d->device, c->memory, NULL);
        vkDestroyBuffer(d->device, c->buffer, NULL);
        return false;
    }
    VkBufferDeviceAddressInfo at = {.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO,
                                    .buffer = c->buffer};
    c->base = vkGetBufferDeviceAddress(d->device, &at);
    c->size = bytes;
    c->blocks = malloc(8 * sizeof *c->blocks);
    if (!c->blocks) {
        vkDestroyBuffer(d->device, c->buffer, NULL);
        vkFreeMemory(d->device, c->memory, NULL);
        return false;
    }
    c->cap_blocks = 8, c->n_blocks = 1;
    c->blocks[0] = (struct block){0, bytes, false};
    return true;
}

/* The first free block of c that holds bytes, split: its address, or 0. */
static uint64_t take(struct chunk *c, VkDeviceSize bytes) {
    for (int i = 0; i < c->n_blocks; i++) {
        struct block *b = &c->blocks[i];
        if (b->used || b->size < bytes)
            continue;
        if (b->size > bytes) { /* the rest stays free after it */
            if (c->n_blocks == c->cap_blocks) {
                struct block *more = realloc(c->blocks, 2 * (size_t)c->cap_blocks * sizeof *more);
                if (!more)
                    return 0;
                c->blocks = more, c->cap_blocks *= 2, b = &c->blocks[i];
            }
            memmove(b + 2, b + 1, (size_t)(c->n_blocks - i - 1) * sizeof *b);
            b[1] = (struct block){b->offset + bytes, b->size - bytes, false};
            b->size = bytes, c->n_blocks++;
        }
        b->used = true;
        return c->base + b->offset;
    }
    return 0;
}

void *vk_mem_alloc(struct vk_device *d, size_t bytes) {
    VkDeviceSize size = ((VkDeviceSize)(bytes ? bytes : 1) + ALIGN - 1) / ALIGN * ALIGN;
    pthread_mutex_lock(&lock);
    uint64_t at = 0;
    for (int i = 0; i < n_chunks && !at; i++)
        at = take(&chunks[i], size);
    if (!at && n_chunks < CHUNKS_MAX &&
        new_chunk(d, size > CHUNK_MIN ? size : CHUNK_MIN, &chunks[n_chunks]))
        at = take(&chunks[n_chunks++], size);
    pthread_mutex_unlock(&lock);
    return (void *)(uintptr_t)at;
}

/* The chunk holding address a, or NULL. */
static struct chunk *chunk_of(uint64_t a) {
    for (int i = 0; i < n_chunks; i++)
        if (a >= chunks[i].base && a < chunks[i].base + chunks[i].size)
            return &chunks[i];
    return NULL;
}

void vk_mem_free(struct vk_device *d, const void *p) {
    (void)d;
    uint64_t a = vk_addr(p);
    pthread_mutex_lock(&lock);
    struct chunk *c = a ? chunk_of(a) : NULL;
    for (int i = 0; c && i < c->n_blocks; i++) {
        struct block *b = &c->blocks[i];
        if (c->base + b->offset != a || !b->used)
            continue;
        b->used = false;
        if (i + 1 < c->n_blocks && !b[1].used) { /* merge with the free neighbours */
            b->size += b[1].size;
            memmove(b + 1, b + 2, (size_t)(c->n_blocks - i - 2) * sizeof *b);
            c->n_blocks--;
        }
        if (i > 0 && !b[-1].used) {
            b[-1].size += b->size;
            memmove(b, b + 1, (size_t)(c->n_blocks - i - 1) * sizeof *b);
            c->n_blocks--;
        }
        break;
    }
    pthread_mutex_unlock(&lock);
}

VkBuffer vk_mem_find(const void *p, VkDeviceSize *offset) {
    pthread_mutex_lock(&lock);
    struct chunk *c = chunk_of(vk_addr(p));
    VkBuffer buf = c ? c->buffer : VK_NULL_HANDLE;
    *offset = c ? vk_addr(p) - c->base : 0;
    pthread_mutex_unlock(&lock);
    return buf;
}

uint32_t vk_memory_type(VkPhysicalDevice pd, uint32_t bits, VkMemoryPropertyFlags need,
                        VkMemoryPropertyFlags prefer) {
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    uint32_t found = UINT32_MAX;
    for (uint32_t i = 0; i < mp.memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = mp.memoryTypes[i].propertyFlags;
        if (!(bits >> i & 1) || (f & need) != need)
            continue;
        if ((f & prefer) == prefer)
            return i;
        if (found == UINT32_MAX)
            found = i;
    }
    return found;
}

VkBuffer vk_host_buffer(struct vk_device *d, size_t bytes, uint32_t type, VkDeviceMemory *mem,
                        void **map) {
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                             .size = bytes,
                             .usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_DST_BIT};
    VkBuffer buf = VK_NULL_HANDLE;
    *mem = VK_NULL_HANDLE, *map = NULL;
    if (vkCreateBuffer(d->device, &bi, NULL, &buf) != VK_SUCCESS)
        return VK_NULL_HANDLE;
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(d->device, buf, &req);
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                               .allocationSize = req.size,
                               .memoryTypeIndex = type};
    if (!(req.memoryTypeBits >> type & 1) ||
        vkAllocateMemory(d->device, &ai, NULL, mem) != VK_SUCCESS ||
        vkBindBufferMemory(d->device, buf, *mem, 0) != VK_SUCCESS ||
        vkMapMemory(d->device, *mem, 0, VK_WHOLE_SIZE, 0, map) != VK_SUCCESS) {
        if (*mem)
            vkFreeMemory(d->device, *mem, NULL);
        vkDestroyBuffer(d->device, buf, NULL);
        *mem = VK_NULL_HANDLE, *map = NULL;
        return VK_NULL_HANDLE;
    }
    return buf;
}
