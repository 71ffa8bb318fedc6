/* vk_backend.h: the Vulkan backend as the rest of the library sees it: its op table (registry.c
 * registers it). Built only with -DOX_VULKAN=ON (OX_HAVE_VULKAN). */
#ifndef OX_BACKEND_VK_BACKEND_H
#define OX_BACKEND_VK_BACKEND_H

#include "backend/backend.h"

extern const struct backend_ops backend_vulkan_ops;

#endif
