/* vk_coopmat2.c: whether f16, q4_K and q6_K weights' prompt products run on workgroup-wide
 * cooperative matrices (VK_NV_cooperative_matrix2: gemm_cm2.comp), as that shader asks for them:
 * matrices of a workgroup of 256, f16 blocks summed in f32 in tiles of 64 to 256, tensor loads,
 * SPIR-V 1.6 (Vulkan 1.3); and whether prompts' attention does (attention_cm2.comp: a workgroup
 * of 128, row reductions, conversions between uses, per-element functions, subgroup sums). */
#include <stdlib.h>

#include "backend/vulkan/vk_internal.h"

/* The extension's name, structure types, component types and scope as vulkan_core.h defines
 * them (Debian 13's 1.4.309 has them), for older headers (Debian 12's 1.3.239). */
#define COOPMAT2_EXTENSION "VK_NV_cooperative_matrix2"
enum {
    FEATURES_TYPE = 1000593000,
    SHAPES_TYPE = 1000593001,
    PROPERTIES_TYPE = 1000593002,
    COMPONENT_FLOAT16 = 0,
    COMPONENT_FLOAT32 = 1,
    SCOPE_WORKGROUP = 2,
    WORKGROUP = 256,           /* gemm_cm2.comp's local_size_x */
    ATTENTION_WORKGROUP = 128, /* attention_cm2.comp's */
    SMALLEST_TILE = 64,
    LARGEST_DIMENSION = 256, /* its tiles' longest side (q4_K's 64 x 256) */
    OWN_SHARED = 16 * 68 * 4 /* cm2_q6_k.glsl's scales: 16 floats a row of 64 padded by 4 (q4_K's
                              * 8 (scale, min) pairs a row padded by 2 take less) */
};
struct coopmat2_properties { /* VkPhysicalDeviceCooperativeMatrix2PropertiesNV */
    VkStructureType type;
    void *next;
    uint32_t max_workgroup, max_dimension, reserved_shared;
};
struct flexible_shape { /* VkCooperativeMatrixFlexibleDimensionsPropertiesNV */
    VkStructureType type;
    void *next;
    uint32_t m_step, n_step, k_step;
    int32_t a_type, b_type, c_type, result_type; /* VkComponentTypeKHR */
    VkBool32 saturating;
    int32_t scope; /* VkScopeKHR */
    uint32_t invocations;
};

/* Whether the device lists workgroup matrices of f16 blocks summed in f32 for a workgroup of
 * that many invocations, whose steps divide the shaders' tiles. */
static bool has_shapes(VkInstance inst, VkPhysicalDevice pd, uint32_t invocations) {
    uint32_t n;
    struct flexible_shape *all = vk_list_records(
        inst, pd, "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV", sizeof *all,
        (VkStructureType)SHAPES_TYPE, &n);
    bool found = false;
    for (uint32_t i = 0; i < n && !found; i++) {
        const struct flexible_shape *s = &all[i];
        found = s->scope == SCOPE_WORKGROUP && s->invocations == invocations &&
                s->a_type == COMPONENT_FLOAT16 && s->b_type == COMPONENT_FLOAT16 &&
                s->c_type == COMPONENT_FLOAT32 && s->result_type == COMPONENT_FLOAT32 &&
                s->m_step && SMALLEST_TILE % s->m_step == 0 && s->n_step &&
                SMALLEST_TILE % s->n_step == 0 && s->k_step && SMALLEST_TILE % s->k_step == 0;
    }
    free(all);
    return found;
}

#ifdef OX_VK_COOPMAT2
enum { BUILT = 1 };
#else
enum { BUILT = 0 };
#endif

/* The extension's features on this device. */
static struct vk_coopmat2_features features_of(VkPhysicalDevice pd) {
    struct vk_coopmat2_features f = {.type = (VkStructureType)FEATURES_TYPE};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                    .pNext = &f};
    vkGetPhysicalDeviceFeatures2(pd, &f2);
    f.next = NULL;
    return f;
}

bool vk_coopmat2_usable(VkInstance inst, VkPhysicalDevice pd, bool coopmat) {
    if (!BUILT || !coopmat || !vk_optional_wanted(pd, COOPMAT2_EXTENSION, "OX_VK_COOPMAT2"))
        return false;
    struct vk_coopmat2_features f = features_of(pd);
    struct coopmat2_properties p = {(VkStructureType)PROPERTIES_TYPE, NULL, 0, 0, 0};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                      .pNext = &p};
    vkGetPhysicalDeviceProperties2(pd, &p2);
    /* the driver stages tensor loads through what it reserves; the decode's scales come on top */
    uint32_t shared = p2.properties.limits.maxComputeSharedMemorySize;
    /* block loads: q4_K's and q6_K's tensor loads through decode functions */
    return p2.properties.apiVersion >= VK_API_VERSION_1_3 && f.workgroup_scope &&
           f.flexible_dimensions && f.tensor_addressing && f.block_loads &&
           p.max_workgroup >= WORKGROUP && p.max_dimension >= LARGEST_DIMENSION &&
           shared >= p.reserved_shared + OWN_SHARED && has_shapes(inst, pd, WORKGROUP);
}

bool vk_coopmat2_attention_usable(VkInstance inst, VkPhysicalDevice pd, bool coopmat2) {
    if (!coopmat2 || vk_turned_off("OX_VK_ATTENTION_CM2"))
        return false;
    struct vk_coopmat2_features f = features_of(pd);
    VkPhysicalDeviceSubgroupProperties sub = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                      .pNext = &sub};
    vkGetPhysicalDeviceProperties2(pd, &p2);
    /* the tiles' and queries' ranges are subgroup minima and maxima */
    return f.reductions && f.conversions && f.per_element &&
           (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
           (sub.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) &&
           has_shapes(inst, pd, ATTENTION_WORKGROUP);
}

void *vk_coopmat2_enable(struct vk_coopmat2_features *f, void *next, bool attention) {
    *f = (struct vk_coopmat2_features){.type = (VkStructureType)FEATURES_TYPE,
                                       .next = next,
                                       .workgroup_scope = VK_TRUE,
                                       .flexible_dimensions = VK_TRUE,
                                       .reductions = attention,
                                       .conversions = attention,
                                       .per_element = attention,
                                       .tensor_addressing = VK_TRUE,
                                       .block_loads = VK_TRUE};
    return f;
}

const char *vk_coopmat2_extension(void) {
    return COOPMAT2_EXTENSION;
}
