/* vk_pinned.c: the context's pinned host range (the logits, backend.h's pin) imported as device
 * memory (VK_EXT_external_memory_host), so downloads into it are one copy by the GPU: no staging
 * buffer and no memcpy after it. A decode step of 32 sequences reads 16 MB of logits, which the
 * CPU copied out of staging at a few GB/s. Where the device lacks the extension, or the import
 * fails, downloads keep the staging buffer. */
#include <stdint.h>

#include "backend/vulkan/vk_internal.h"

bool vk_pinned_usable(VkPhysicalDevice pd, VkDeviceSize *alignment) {
    if (!vk_optional_wanted(pd, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME, "OX_VK_HOST_IMPORT"))
        return false;
    VkPhysicalDeviceExternalMemoryHostPropertiesEXT host = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT};
    VkPhysicalDeviceProperties2 p = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                     .pNext = &host};
    vkGetPhysicalDeviceProperties2(pd, &p);
    VkDeviceSize a = host.minImportedHostPointerAlignment;
    *alignment = a;
    return a > 0 && (a & (a - 1)) == 0;
}

const char *vk_pinned_extension(void) {
    return VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME;
}

/* The whole pages around [host, host + bytes) as a buffer the GPU copies into; false where the
 * driver does not take them. */
static bool import(struct vk_state *s, uint8_t *start, VkDeviceSize size) {
    VkDevice dev = s->d->device;
    const VkExternalMemoryHandleTypeFlagBits kind =
        VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
    PFN_vkGetMemoryHostPointerPropertiesEXT props_of =
        (PFN_vkGetMemoryHostPointerPropertiesEXT)vkGetDeviceProcAddr(
            dev, "vkGetMemoryHostPointerPropertiesEXT");
    VkMemoryHostPointerPropertiesEXT props = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT};
    if (!props_of || props_of(dev, kind, start, &props) != VK_SUCCESS)
        return false;
    VkExternalMemoryBufferCreateInfo ext = {
        .sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO, .handleTypes = kind};
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                             .pNext = &ext,
                             .size = size,
                             .usage = VK_BUFFER_USAGE_TRANSFER_DST_BIT};
    if (vkCreateBuffer(dev, &bi, NULL, &s->pinned.buffer) != VK_SUCCESS)
        return false;
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(dev, s->pinned.buffer, &req);
    uint32_t type =
        vk_memory_type(s->d->physical, req.memoryTypeBits & props.memoryTypeBits,
                       VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT, VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    VkImportMemoryHostPointerInfoEXT from = {
        .sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT,
        .handleType = kind,
        .pHostPointer = start};
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                               .pNext = &from,
                               .allocationSize = size,
                               .memoryTypeIndex = type};
    if (type == UINT32_MAX || req.size > size ||
        vkAllocateMemory(dev, &ai, NULL, &s->pinned.memory) != VK_SUCCESS ||
        vkBindBufferMemory(dev, s->pinned.buffer, s->pinned.memory, 0) != VK_SUCCESS) {
        vk_pinned_release(s);
        return false;
    }
    return true;
}

void vk_pinned_make(struct vk_state *s, void *host, size_t bytes) {
    vk_pinned_release(s);
    VkDeviceSize a = s->d->import_alignment;
    if (!s->d->host_import || !host || bytes == 0 || !vk_flush(s))
        return;
    uintptr_t lo = (uintptr_t)host & ~(uintptr_t)(a - 1),
              hi = ((uintptr_t)host + bytes + a - 1) & ~(uintptr_t)(a - 1);
    if (!import(s, (uint8_t *)lo, hi - lo))
        return;
    s->pinned.start = (uint8_t *)lo;
    s->pinned.host = host, s->pinned.bytes = bytes;
}

void vk_pinned_release(struct vk_state *s) {
    if (s->pinned.buffer == VK_NULL_HANDLE && s->pinned.memory == VK_NULL_HANDLE)
        return;
    vk_flush(s); /* no copy into it still in flight */
    vkDestroyBuffer(s->d->device, s->pinned.buffer, NULL);
    vkFreeMemory(s->d->device, s->pinned.memory, NULL);
    s->pinned = (struct vk_pinned){0};
}

bool vk_pinned_offset(const struct vk_state *s, const void *host, size_t bytes,
                      VkDeviceSize *offset) {
    const uint8_t *h = host, *p = s->pinned.host;
    if (!p || h < p || bytes > s->pinned.bytes || (size_t)(h - p) > s->pinned.bytes - bytes)
        return false;
    *offset = (VkDeviceSize)(h - s->pinned.start);
    return true;
}
