/* vk_device.c: the process's Vulkan device: the instance, the GPU picked (vulkan:N as the model's
 * device or OX_DEVICE, else the first discrete GPU, else the first device), a compute queue, the
 * features the shaders need (buffer device addresses, 16-bit floats, 64-bit integers; cooperative
 * matrices where vk_coopmat.c finds them usable, integer dot products where the device has them)
 * and the shaders' pipelines. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/vk_internal.h"
#include "core/status.h"

static struct vk_device device;
static enum ox_status made = OX_ERR_DEVICE; /* OX_OK once made */
static char why[384];
static long picked = -1; /* the index of the device made */
static pthread_mutex_t make_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t pipeline_lock = PTHREAD_MUTEX_INITIALIZER;

static bool fail(const char *what, VkResult r) {
    snprintf(why, sizeof why, "vulkan: %s (VkResult %d)", what, (int)r);
    return false;
}

static bool make_instance(void) {
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "oxidize",
                             .pEngineName = "oxidize",
                             .apiVersion = VK_API_VERSION_1_3}; /* gemm_cm2.comp's SPIR-V 1.6 */
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                               .pApplicationInfo = &app};
    VkResult r = vkCreateInstance(&ci, NULL, &device.instance);
    if (r != VK_SUCCESS)
        device.instance = VK_NULL_HANDLE;
    return r == VK_SUCCESS || fail("no Vulkan driver (vkCreateInstance)", r);
}

/* The device index asked for ("vulkan:N"), or -1 where none is named. */
static long wanted(void) {
    char spec[16];
    backend_device_spec(spec, sizeof spec);
    return strncmp(spec, "vulkan:", 7) == 0 ? strtol(spec + 7, NULL, 10) : -1;
}

/* Which device: "vulkan:N" picks the N-th; else a discrete GPU first. */
static bool pick_physical(void) {
    uint32_t n = 0;
    VkResult r = vkEnumeratePhysicalDevices(device.instance, &n, NULL);
    if (r != VK_SUCCESS || n == 0)
        return fail("no Vulkan device", r);
    VkPhysicalDevice *all = calloc(n, sizeof *all);
    if (!all)
        return fail("out of memory", VK_ERROR_OUT_OF_HOST_MEMORY);
    vkEnumeratePhysicalDevices(device.instance, &n, all);
    long want = wanted();
    if (want >= (long)n) {
        free(all);
        snprintf(why, sizeof why, "vulkan: device vulkan:%ld asked for, but there are %u", want, n);
        return false;
    }
    uint32_t pick = want >= 0 ? (uint32_t)want : 0;
    for (uint32_t i = 0; want < 0 && i < n; i++) {
        VkPhysicalDeviceProperties pr;
        vkGetPhysicalDeviceProperties(all[i], &pr);
        if (pr.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU) {
            pick = i;
            break;
        }
    }
    device.physical = all[pick];
    picked = pick;
    free(all);
    vkGetPhysicalDeviceProperties(device.physical, &device.props);
    return true;
}

/* A queue family with compute, and memory types: device-local, host-visible coherent, and the
 * same cached where there is one (downloads). */
static bool pick_queue_and_memory(void) {
    uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(device.physical, &n, NULL);
    VkQueueFamilyProperties q[32];
    n = n < 32 ? n : 32;
    vkGetPhysicalDeviceQueueFamilyProperties(device.physical, &n, q);
    device.family = UINT32_MAX;
    for (uint32_t i = 0; i < n && device.family == UINT32_MAX; i++)
        if (q[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
            device.family = i;
    const VkMemoryPropertyFlags host =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    device.memory_type =
        vk_memory_type(device.physical, UINT32_MAX, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
    device.host_type = vk_memory_type(device.physical, UINT32_MAX, host, 0);
    /* the CPU reads downloads: uncached (write-combined) memory reads them word by word */
    device.read_type =
        vk_memory_type(device.physical, UINT32_MAX, host, VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    if (device.family == UINT32_MAX || device.memory_type == UINT32_MAX ||
        device.host_type == UINT32_MAX)
        return fail("the device has no compute queue or no usable memory",
                    VK_ERROR_FEATURE_NOT_PRESENT);
    return true;
}

bool vk_has_extension(VkPhysicalDevice pd, const char *name) {
    uint32_t n = 0;
    if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS || n == 0)
        return false;
    VkExtensionProperties *all = calloc(n, sizeof *all);
    bool found = false;
    if (all && vkEnumerateDeviceExtensionProperties(pd, NULL, &n, all) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(all[i].extensionName, name) == 0;
    free(all);
    return found;
}

typedef VkResult(VKAPI_PTR *list_records_fn)(VkPhysicalDevice, uint32_t *, void *);

void *vk_list_records(VkInstance inst, VkPhysicalDevice pd, const char *fn, size_t size,
                      VkStructureType type, uint32_t *n) {
    list_records_fn list = (list_records_fn)vkGetInstanceProcAddr(inst, fn);
    uint32_t count = 0;
    *n = 0;
    if (!list || list(pd, &count, NULL) != VK_SUCCESS || count == 0)
        return NULL;
    unsigned char *all = calloc(count, size);
    if (!all)
        return NULL;
    for (uint32_t i = 0; i < count; i++)
        ((VkBaseOutStructure *)(all + (size_t)i * size))->sType = type;
    if (list(pd, &count, all) != VK_SUCCESS) {
        free(all);
        return NULL;
    }
    *n = count;
    return all;
}

bool vk_turned_off(const char *env) {
    const char *off = getenv(env);
    return off && strcmp(off, "0") == 0;
}

bool vk_optional_wanted(VkPhysicalDevice pd, const char *extension, const char *off_env) {
    return !vk_turned_off(off_env) && vk_has_extension(pd, extension);
}

/* Whether decode's products can take integer dot products of packed bytes (matvec.comp's X_Q8:
 * VK_KHR_shader_integer_dot_product, core in Vulkan 1.3); OX_VK_Q8=0 says no, to compare. */
static bool dot8_usable(VkPhysicalDevice pd) {
    if (!vk_optional_wanted(pd, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME, "OX_VK_Q8"))
        return false;
    VkPhysicalDeviceShaderIntegerDotProductFeatures dot = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
    VkPhysicalDeviceFeatures2 f = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                   .pNext = &dot};
    vkGetPhysicalDeviceFeatures2(pd, &f);
    return dot.shaderIntegerDotProduct;
}

/* The tokens from which a product's quantized weights are made f16 first and multiplied on the
 * f16 tiles (vk_matmul.c's weights_as_halves): OX_VK_DEQUANT_TOKENS where set to a number (0:
 * never), else 256 where the f16 tiles are gemm_cm2.comp's, none elsewhere (not measured there).
 * On an H200 (session 32), against gemm_cm.comp's quantized tiles: the 1B Q8_0 at 41130 t/s
 * against 25370 for pp512, 28900 against 24700 for pp256, even at pp128 and 8950 against 16400
 * at pp64; the 8B Q5_K_M at 8150 against 4851, 6018 against 4354, 3522 against 3673 and 2038
 * against 2422. */
static uint32_t dequant_tokens(bool coopmat2) {
    const char *env = getenv("OX_VK_DEQUANT_TOKENS");
    char *end;
    unsigned long v = env && *env ? strtoul(env, &end, 10) : 0;
    if (env && *env && !*end && v <= UINT32_MAX)
        return (uint32_t)v;
    return coopmat2 ? 256 : 0;
}

/* Whether the device has the features every shader uses (false, saying which it lacks, where
 * not); *has12 its Vulkan 1.2 features. */
static bool has_required(VkPhysicalDeviceVulkan12Features *has12) {
    *has12 = (VkPhysicalDeviceVulkan12Features){
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceVulkan11Features f11 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, .pNext = has12};
    VkPhysicalDeviceFeatures2 f = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                   .pNext = &f11};
    vkGetPhysicalDeviceFeatures2(device.physical, &f);
    /* reduce.glsl's sums and maxima, rows.comp's and matvec.comp's exchanges between threads */
    VkPhysicalDeviceVulkan11Properties p11 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES};
    VkPhysicalDeviceProperties2 p = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                     .pNext = &p11};
    vkGetPhysicalDeviceProperties2(device.physical, &p);
    VkSubgroupFeatureFlags ops =
        VK_SUBGROUP_FEATURE_ARITHMETIC_BIT | VK_SUBGROUP_FEATURE_SHUFFLE_BIT;
    device.subgroup_size = p11.subgroupSize;
    bool subgroups = (p11.subgroupSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                     (p11.subgroupSupportedOperations & ops) == ops && p11.subgroupSize >= 4;
    const char *missing = !has12->bufferDeviceAddress       ? "buffer device addresses"
                          : !has12->shaderFloat16           ? "16-bit float arithmetic"
                          : !f11.storageBuffer16BitAccess   ? "16-bit storage"
                          : !has12->storageBuffer8BitAccess ? "8-bit storage"
                          : !f.features.shaderInt64         ? "64-bit integers"
                          : !subgroups ? "subgroup sums and shuffles (of 4 threads or more)"
                                       : NULL;
    if (missing)
        snprintf(why, sizeof why, "vulkan: %s has no %s", device.props.deviceName, missing);
    return !missing;
}

/* The optional extensions the device is opened with (at most 5), as make_device chose them. */
static uint32_t optional_extensions(const char *names[5]) {
    uint32_t n = 0;
    if (device.coopmat)
        names[n++] = vk_coopmat_extension();
    if (device.coopmat2)
        names[n++] = vk_coopmat2_extension();
    if (device.dot8)
        names[n++] = VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME;
    if (device.pipeline_stats)
        names[n++] = vk_pipeline_stats_extension();
    if (device.host_import)
        names[n++] = vk_pinned_extension();
    return n;
}

/* How long a wait for the device polls its fence before it blocks, in ns: OX_VK_SPIN_US
 * microseconds (up to a second; 0: never), else 2 ms, as CUDA's synchronize spins before it
 * yields; never on a CPU device (lavapipe), whose shaders run on the cores a poll would take. On
 * an H200 (session 37) a blocking wait's wake-up cost a decode step tens of microseconds: the 1B
 * Q4_K_M's tg128 went from 1012 t/s (824 with a slow run) to 1074 / 1079 with it, the 1B F16's
 * from 807 / 806 to 881 / 878, the 8B's stayed at 349-354. */
static int64_t spin_ns(VkPhysicalDeviceType type) {
    const char *env = getenv("OX_VK_SPIN_US");
    long long us = env && *env ? strtoll(env, NULL, 10) : 2000;
    if (type == VK_PHYSICAL_DEVICE_TYPE_CPU || us <= 0)
        return 0;
    return (us < 1000000 ? us : 1000000) * 1000;
}

/* The device with the features every shader uses, and the optional ones it has; a device
 * without the first is refused, saying which. */
static bool make_device(void) {
    VkPhysicalDeviceVulkan12Features f12;
    if (!has_required(&f12))
        return false;
    device.coopmat = vk_coopmat_usable(device.instance, device.physical, f12.vulkanMemoryModel);
    device.coopmat2 = vk_coopmat2_usable(device.instance, device.physical, device.coopmat);
    device.attention_cm2 =
        vk_coopmat2_attention_usable(device.instance, device.physical, device.coopmat2);
    device.dot8 = dot8_usable(device.physical);
    device.dequant_tokens = dequant_tokens(device.coopmat2);
    device.folds = !vk_turned_off("OX_VK_FOLDS");
    device.group_folds = device.dot8 && !vk_turned_off("OX_VK_GROUP_FOLDS");
    device.norm_in = !vk_turned_off("OX_VK_NORM_IN");
    device.joins = !vk_turned_off("OX_VK_JOIN");
    device.decode_attention = !vk_turned_off("OX_VK_DECODE_ATTN");
    device.decode_split = !vk_turned_off("OX_VK_DECODE_SPLIT");
    device.spin_ns = spin_ns(device.props.deviceType);
    const char *cols = getenv("OX_VK_GROUP_COLS");
    device.group_cols = cols && *cols ? strtoll(cols, NULL, 10) : 4096;
    device.cm2_shapes = !vk_turned_off("OX_VK_CM2_SHAPES");
    device.cm2_slices = !vk_turned_off("OX_VK_CM2_SLICES");
    const char *unroll = getenv("OX_VK_CM2_UNROLL");
    device.cm2_unroll = unroll && atoi(unroll) >= 1 && atoi(unroll) <= 8 ? atoi(unroll) : 8;
    device.pipeline_stats = vk_pipeline_stats_wanted(device.physical);
    device.host_import = vk_pinned_usable(device.physical, &device.import_alignment);
    struct vk_coopmat_features cm;
    struct vk_coopmat2_features cm2;
    void *matrices = device.coopmat2 ? vk_coopmat2_enable(&cm2, NULL, device.attention_cm2) : NULL;
    VkPhysicalDeviceShaderIntegerDotProductFeatures dot = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES,
        .pNext = device.coopmat ? vk_coopmat_enable(&cm, matrices) : NULL,
        .shaderIntegerDotProduct = VK_TRUE};
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR stats;
    void *chain = device.dot8 ? (void *)&dot : dot.pNext;
    if (device.pipeline_stats)
        chain = vk_pipeline_stats_enable(&stats, chain);
    const char *names[5];
    uint32_t n_names = optional_extensions(names);
    VkPhysicalDeviceVulkan12Features on12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
        .pNext = chain,
        .bufferDeviceAddress = VK_TRUE,
        .shaderFloat16 = VK_TRUE,
        .shaderInt8 = f12.shaderInt8,
        .storageBuffer8BitAccess = VK_TRUE,
        .vulkanMemoryModel = device.coopmat};
    VkPhysicalDeviceVulkan11Features on11 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
        .pNext = &on12,
        .storageBuffer16BitAccess = VK_TRUE};
    VkPhysicalDeviceFeatures2 on = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                    .pNext = &on11,
                                    .features = {.shaderInt64 = VK_TRUE}};
    float priority = 1.0f;
    VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                  .queueFamilyIndex = device.family,
                                  .queueCount = 1,
                                  .pQueuePriorities = &priority};
    VkDeviceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                             .pNext = &on,
                             .queueCreateInfoCount = 1,
                             .pQueueCreateInfos = &qi,
                             .enabledExtensionCount = n_names,
                             .ppEnabledExtensionNames = names};
    VkResult r = vkCreateDevice(device.physical, &ci, NULL, &device.device);
    if (r != VK_SUCCESS)
        return fail("cannot open the device (vkCreateDevice)", r);
    vkGetDeviceQueue(device.device, device.family, 0, &device.queue);
    return true;
}

/* The one pipeline layout: the push constants alone. */
static bool make_layout(void) {
    VkPushConstantRange range = {VK_SHADER_STAGE_COMPUTE_BIT, 0, VK_PUSH_BYTES};
    VkPipelineLayoutCreateInfo li = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                     .pushConstantRangeCount = 1,
                                     .pPushConstantRanges = &range};
    VkResult r = vkCreatePipelineLayout(device.device, &li, NULL, &device.layout);
    return r == VK_SUCCESS || fail("vkCreatePipelineLayout", r);
}

/* Made at the first use (false, the reason set as the error, where it cannot be); a failure (no
 * driver, an index past the last) is tried again at the next, so a bad choice does not leave the
 * process without its device. The instance stays once made: destroying it unloads the driver, which
 * then leaves what it allocated behind. */
static bool make(void) {
    pthread_mutex_lock(&make_lock);
    if (made != OX_OK) {
        if ((device.instance || make_instance()) && pick_physical() && pick_queue_and_memory() &&
            make_device() && make_layout())
            made = OX_OK;
        else if (device.device) {
            vkDestroyDevice(device.device, NULL);
            device.device = VK_NULL_HANDLE;
        }
    }
    bool ok = made == OX_OK;
    if (!ok) /* the reason read under the lock: another thread's failed try writes it */
        ox_fail(OX_ERR_DEVICE, "%s", why);
    pthread_mutex_unlock(&make_lock);
    return ok;
}

struct vk_device *vk_device_get(void) {
    return make() ? &device : NULL;
}

struct vk_device *vk_device_for_load(void) {
    struct vk_device *d = vk_device_get();
    long want = wanted();
    if (d && want >= 0 && want != picked) {
        ox_fail(OX_ERR_DEVICE,
                "vulkan: vulkan:%ld asked for, but this process uses vulkan:%ld "
                "(one Vulkan device a process)",
                want, picked);
        return NULL;
    }
    return d;
}

/* Shader s's pipeline, its specialization constants set where si is given (NULL where the
 * driver fails to make it). */
static VkPipeline make_pipeline(struct vk_device *d, enum vk_shader s,
                                const VkSpecializationInfo *si) {
    VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                   .codeSize = vk_shader_code[s].bytes,
                                   .pCode = vk_shader_code[s].words};
    VkShaderModule m = VK_NULL_HANDLE;
    VkPipeline made_one = VK_NULL_HANDLE;
    if (vkCreateShaderModule(d->device, &mi, NULL, &m) != VK_SUCCESS)
        return VK_NULL_HANDLE;
    VkComputePipelineCreateInfo pi = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = m,
                  .pName = "main",
                  .pSpecializationInfo = si},
        .layout = d->layout,
        .flags = d->pipeline_stats ? VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR : 0};
    if (vkCreateComputePipelines(d->device, VK_NULL_HANDLE, 1, &pi, NULL, &made_one) != VK_SUCCESS)
        made_one = VK_NULL_HANDLE;
    else if (d->pipeline_stats)
        vk_pipeline_stats_print(d->device, made_one, vk_shader_names[s]);
    vkDestroyShaderModule(d->device, m, NULL);
    return made_one;
}

VkPipeline vk_pipeline(struct vk_device *d, enum vk_shader s) {
    pthread_mutex_lock(&pipeline_lock);
    if (!d->pipeline[s])
        d->pipeline[s] = make_pipeline(d, s, NULL);
    VkPipeline p = d->pipeline[s];
    pthread_mutex_unlock(&pipeline_lock);
    return p;
}

VkPipeline vk_pipeline_special(struct vk_device *d, enum vk_shader s,
                               const uint32_t spec[VK_SPEC]) {
    pthread_mutex_lock(&pipeline_lock);
    VkPipeline p = VK_NULL_HANDLE;
    for (int i = 0; i < d->n_special && !p; i++)
        if (d->special[i].shader == s && !memcmp(d->special[i].spec, spec, sizeof *spec * VK_SPEC))
            p = d->special[i].pipeline;
    if (!p && d->n_special == d->cap_special) {
        int cap = d->cap_special ? 2 * d->cap_special : 16;
        struct vk_special *more = realloc(d->special, (size_t)cap * sizeof *more);
        if (more)
            d->special = more, d->cap_special = cap;
    }
    if (!p && d->n_special < d->cap_special) {
        VkSpecializationMapEntry entries[VK_SPEC];
        for (uint32_t i = 0; i < VK_SPEC; i++)
            entries[i] = (VkSpecializationMapEntry){i, i * sizeof *spec, sizeof *spec};
        VkSpecializationInfo si = {VK_SPEC, entries, sizeof *spec * VK_SPEC, spec};
        p = make_pipeline(d, s, &si);
        if (p) {
            struct vk_special *e = &d->special[d->n_special++];
            e->shader = s, e->pipeline = p;
            memcpy(e->spec, spec, sizeof *spec * VK_SPEC);
        }
    }
    pthread_mutex_unlock(&pipeline_lock);
    return p;
}
