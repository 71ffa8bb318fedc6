/* vk_pipeline_stats.c: OX_VK_PIPELINE_STATS=1: what the driver made of each shader, printed to
 * stderr as its pipeline is made (VK_KHR_pipeline_executable_properties: on NVIDIA's driver the
 * registers a thread, shared memory, spills): whether a shader runs one workgroup or several a
 * multiprocessor is read off these, not guessed from its timings. NVIDIA's 580 driver's "Local
 * Memory Size" reads 2^36 (68719476736) plus the bytes a thread spills. Off unless asked for. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/vulkan/vk_internal.h"

#define STATS_EXTENSION "VK_KHR_pipeline_executable_properties"

bool vk_pipeline_stats_wanted(VkPhysicalDevice pd) {
    const char *env = getenv("OX_VK_PIPELINE_STATS");
    if (!env || !*env || *env == '0')
        return false;
    if (!vk_has_extension(pd, STATS_EXTENSION)) {
        fprintf(stderr, "vulkan: OX_VK_PIPELINE_STATS: the device has no %s\n", STATS_EXTENSION);
        return false;
    }
    return true;
}

const char *vk_pipeline_stats_extension(void) {
    return STATS_EXTENSION;
}

void *vk_pipeline_stats_enable(VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR *f,
                               void *next) {
    *f = (VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR){
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR,
        .pNext = next,
        .pipelineExecutableInfo = VK_TRUE};
    return f;
}

/* One statistic as "name=value". */
static void print_statistic(const VkPipelineExecutableStatisticKHR *s) {
    switch (s->format) {
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
        fprintf(stderr, " %s=%s", s->name, s->value.b32 ? "yes" : "no");
        break;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
        fprintf(stderr, " %s=%" PRId64, s->name, s->value.i64);
        break;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
        fprintf(stderr, " %s=%" PRIu64, s->name, s->value.u64);
        break;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR:
        fprintf(stderr, " %s=%g", s->name, s->value.f64);
        break;
    default: break;
    }
}

void vk_pipeline_stats_print(VkDevice dev, VkPipeline pipeline, const char *name) {
    PFN_vkGetPipelineExecutableStatisticsKHR statistics =
        (PFN_vkGetPipelineExecutableStatisticsKHR)vkGetDeviceProcAddr(
            dev, "vkGetPipelineExecutableStatisticsKHR");
    if (!statistics)
        return;
    /* a compute pipeline has one executable: its shader */
    VkPipelineExecutableInfoKHR exe = {.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR,
                                       .pipeline = pipeline,
                                       .executableIndex = 0};
    uint32_t n = 0;
    if (statistics(dev, &exe, &n, NULL) != VK_SUCCESS || n == 0)
        return;
    VkPipelineExecutableStatisticKHR *all = calloc(n, sizeof *all);
    if (!all)
        return;
    for (uint32_t i = 0; i < n; i++)
        all[i].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR;
    if (statistics(dev, &exe, &n, all) == VK_SUCCESS) {
        fprintf(stderr, "vulkan pipeline %s:", name);
        for (uint32_t i = 0; i < n; i++)
            print_statistic(&all[i]);
        fprintf(stderr, "\n");
    }
    free(all);
}
