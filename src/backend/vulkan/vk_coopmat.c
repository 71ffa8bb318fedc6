/* vk_coopmat.c: whether prompts' products run on cooperative matrices (VK_KHR_cooperative_matrix,
 * the tensor cores) as gemm_cm.comp asks for them: 16x16x16 blocks of f16 summed in f32 by a
 * subgroup of 32 (with shuffles: attention_cm.comp), its shared memory, the Vulkan memory model
 * (the extension's shaders declare it). */
#include <stdlib.h>

#include "backend/vulkan/vk_internal.h"

/* The extension's name, structure types, component types and scope as vulkan_core.h (1.3.255
 * and later) defines them, for headers older than the extension (Debian 12's 1.3.239). */
#define COOPMAT_EXTENSION "VK_KHR_cooperative_matrix"
enum {
    COOPMAT_FEATURES_TYPE = 1000506000,
    COOPMAT_PROPERTIES_TYPE = 1000506001,
    COMPONENT_FLOAT16 = 0,
    COMPONENT_FLOAT32 = 1,
    SCOPE_SUBGROUP = 3
};
/* gemm_cm.comp's shared memory: 64 weight rows and 64 tokens by 128 (+8) f16 columns, and eight
 * 16x16 f32 staging blocks. */
enum { GEMM_CM_SHARED_BYTES = (64 + 64) * 136 * 2 + 8 * 256 * 4 };
struct coopmat_properties { /* VkCooperativeMatrixPropertiesKHR */
    VkStructureType type;
    void *next;
    uint32_t m, n, k;
    int32_t a_type, b_type, c_type, result_type; /* VkComponentTypeKHR */
    VkBool32 saturating;
    int32_t scope; /* VkScopeKHR */
};

/* Whether the device lists gemm_cm.comp's block shape. */
static bool has_shape(VkInstance inst, VkPhysicalDevice pd) {
    uint32_t n;
    struct coopmat_properties *all =
        vk_list_records(inst, pd, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR", sizeof *all,
                        (VkStructureType)COOPMAT_PROPERTIES_TYPE, &n);
    bool found = false;
    for (uint32_t i = 0; i < n && !found; i++) {
        const struct coopmat_properties *c = &all[i];
        found = c->m == 16 && c->n == 16 && c->k == 16 && c->a_type == COMPONENT_FLOAT16 &&
                c->b_type == COMPONENT_FLOAT16 && c->c_type == COMPONENT_FLOAT32 &&
                c->result_type == COMPONENT_FLOAT32 && c->scope == SCOPE_SUBGROUP;
    }
    free(all);
    return found;
}

/* Whether this build has gemm_cm.comp (its glslc could compile it). */
#ifdef OX_VK_COOPMAT
enum { BUILT = 1 };
#else
enum { BUILT = 0 };
#endif

bool vk_coopmat_usable(VkInstance inst, VkPhysicalDevice pd, bool memory_model) {
    if (!BUILT || !memory_model || !vk_optional_wanted(pd, COOPMAT_EXTENSION, "OX_VK_COOPMAT"))
        return false;
    VkPhysicalDeviceSubgroupProperties sub = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 pr = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                      .pNext = &sub};
    vkGetPhysicalDeviceProperties2(pd, &pr);
    /* attention_cm.comp shares a query's max and sum between its two threads by shuffles */
    return sub.subgroupSize == 32 && (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
           (sub.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT) &&
           pr.properties.limits.maxComputeSharedMemorySize >= GEMM_CM_SHARED_BYTES &&
           has_shape(inst, pd);
}

void *vk_coopmat_enable(struct vk_coopmat_features *f, void *next) {
    *f = (struct vk_coopmat_features){(VkStructureType)COOPMAT_FEATURES_TYPE, next, VK_TRUE,
                                      VK_FALSE};
    return f;
}

const char *vk_coopmat_extension(void) {
    return COOPMAT_EXTENSION;
}
