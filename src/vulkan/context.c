/* Opening a Vulkan device: loader (volk), instance with optional validation, device choice, a
 * logical device with one compute queue. */
#include "vulkan/context.h"

#include "base/error.h"
#include "base/keep.h"
#include "vulkan/pipelines.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VALIDATION_LAYER "VK_LAYER_KHRONOS_validation"

const char *vkg_vk_result_name(VkResult r) {
    switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_INCOMPLETE: return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FORMAT_NOT_SUPPORTED: return "VK_ERROR_FORMAT_NOT_SUPPORTED";
    case VK_ERROR_FRAGMENTED_POOL: return "VK_ERROR_FRAGMENTED_POOL";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    case VK_ERROR_INVALID_SHADER_NV: return "VK_ERROR_INVALID_SHADER_NV";
    default: return "VkResult error";
    }
}

vkg_status vkg_vk_fail(vkg_error *err, VkResult r, const char *what) {
    switch (r) {
    case VK_ERROR_DEVICE_LOST:
        return vkg_error_set(err, VKG_ERR_DEVICE_LOST,
                             "%s: the Vulkan device was lost (VK_ERROR_DEVICE_LOST): the driver reset "
                             "the GPU, often after a kernel ran too long; the device must be reopened",
                             what);
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
        return vkg_error_set(err, VKG_ERR_OUT_OF_DEVICE_MEMORY, "%s: out of device memory", what);
    case VK_ERROR_OUT_OF_HOST_MEMORY:
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "%s: the Vulkan driver ran out of host memory", what);
    default:
        return vkg_error_set(err, VKG_ERR_DEVICE, "%s failed: %s (%d)", what, vkg_vk_result_name(r), (int)r);
    }
}

const char *vkg_vk_device_type_name(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU (software)";
    default: return "other";
    }
}

int vkg_vk_device_rank(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 4;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 3;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 1;
    default: return 0;
    }
}

int vkg_vk_memory_type(const vkg_vk_context *c, uint32_t type_bits, VkMemoryPropertyFlags want) {
    for (uint32_t i = 0; i < c->memory.memoryTypeCount; i++)
        if ((type_bits & (1u << i)) && (c->memory.memoryTypes[i].propertyFlags & want) == want) return (int)i;
    return -1;
}

/* Validation messages: printed as they come and counted on the owning device, so a test can
 * assert that a run produced none. */
static VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
    const VkDebugUtilsMessengerCallbackDataEXT *data, void *user) {
    (void)types;
    uint64_t *counter = user;
    int error = (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) != 0;
    fprintf(stderr, "vkgraph: Vulkan validation %s: %s\n", error ? "error" : "warning",
            data && data->pMessage ? data->pMessage : "(no message)");
    if (counter) (*counter)++;
    return VK_FALSE;
}

static int layer_present(const char *name) {
    uint32_t n = 0;
    if (vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0) return 0;
    VkLayerProperties *layers = calloc(n, sizeof *layers);
    if (!layers) return 0;
    int found = 0;
    if (vkEnumerateInstanceLayerProperties(&n, layers) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++) found = strcmp(layers[i].layerName, name) == 0;
    free(layers);
    return found;
}

static int instance_extension_present(const char *layer, const char *name) {
    uint32_t n = 0;
    if (vkEnumerateInstanceExtensionProperties(layer, &n, NULL) != VK_SUCCESS || n == 0) return 0;
    VkExtensionProperties *ext = calloc(n, sizeof *ext);
    if (!ext) return 0;
    int found = 0;
    if (vkEnumerateInstanceExtensionProperties(layer, &n, ext) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++) found = strcmp(ext[i].extensionName, name) == 0;
    free(ext);
    return found;
}

vkg_status vkg_vk_instance_create(int validation, int sync_validation, uint64_t *counter, VkInstance *out,
                                  VkDebugUtilsMessengerEXT *messenger, vkg_error *err) {
    *out = VK_NULL_HANDLE;
    if (messenger) *messenger = VK_NULL_HANDLE;
    if (volkInitialize() != VK_SUCCESS)
        return vkg_error_set(err, VKG_ERR_NO_DEVICE, "no Vulkan loader (libvulkan.so.1) found");
    uint32_t version = volkGetInstanceVersion();
    if (version < VK_API_VERSION_1_2)
        return vkg_error_set(err, VKG_ERR_NO_DEVICE,
                             "the Vulkan loader supports version %u.%u; vkgraph needs 1.2 or newer",
                             VK_API_VERSION_MAJOR(version), VK_API_VERSION_MINOR(version));

    const char *extensions[4];
    uint32_t n_ext = 0;
    const char *layers[1];
    uint32_t n_layers = 0;
    VkInstanceCreateFlags flags = 0;
    if (instance_extension_present(NULL, VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
        extensions[n_ext++] = VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME;
        flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
    }
    int with_features = 0;
    if (validation) {
        if (!layer_present(VALIDATION_LAYER)) {
            fprintf(stderr, "vkgraph: validation requested but %s is not installed "
                            "(Debian: apt install vulkan-validationlayers); continuing without\n",
                    VALIDATION_LAYER);
            validation = 0;
        } else {
            layers[n_layers++] = VALIDATION_LAYER;
            extensions[n_ext++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
            if (sync_validation &&
                instance_extension_present(VALIDATION_LAYER, VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME)) {
                extensions[n_ext++] = VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME;
                with_features = 1;
            }
        }
    }

    /* Synchronization validation checks the barriers between steps as well as API usage
     * (vkg_device_options.no_sync_validation leaves it off). */
    VkValidationFeatureEnableEXT enables[] = {VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
    VkValidationFeaturesEXT features = {
        .sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT,
        .enabledValidationFeatureCount = 1,
        .pEnabledValidationFeatures = enables,
    };
    VkDebugUtilsMessengerCreateInfoEXT mci = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .pNext = with_features ? &features : NULL,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = on_validation_message,
        .pUserData = counter,
    };
    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "vkgraph",
        .applicationVersion = VK_MAKE_API_VERSION(0, 0, 1, 0),
        .pEngineName = "vkgraph",
        .engineVersion = VK_MAKE_API_VERSION(0, 0, 1, 0),
        .apiVersion = VK_API_VERSION_1_2,
    };
    VkInstanceCreateInfo ici = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pNext = validation ? &mci : NULL,
        .flags = flags,
        .pApplicationInfo = &app,
        .enabledLayerCount = n_layers,
        .ppEnabledLayerNames = layers,
        .enabledExtensionCount = n_ext,
        .ppEnabledExtensionNames = extensions,
    };
    VkInstance instance;
    VkResult r = vkCreateInstance(&ici, NULL, &instance);
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
        return vkg_error_set(err, VKG_ERR_NO_DEVICE, "no Vulkan driver is installed (vkCreateInstance: "
                                                     "VK_ERROR_INCOMPATIBLE_DRIVER)");
    if (r != VK_SUCCESS) return vkg_vk_fail(err, r, "vkCreateInstance");
    volkLoadInstance(instance);

    if (validation && messenger) {
        mci.pNext = NULL;
        r = vkCreateDebugUtilsMessengerEXT(instance, &mci, NULL, messenger);
        if (r != VK_SUCCESS) {
            vkDestroyInstance(instance, NULL);
            return vkg_vk_fail(err, r, "vkCreateDebugUtilsMessengerEXT");
        }
    }
    *out = instance;
    return VKG_OK;
}

void vkg_vk_instance_free(VkInstance instance, VkDebugUtilsMessengerEXT messenger) {
    if (!instance) return;
    if (messenger) vkDestroyDebugUtilsMessengerEXT(instance, messenger, NULL);
    vkDestroyInstance(instance, NULL);
}

static int device_extension_present(VkPhysicalDevice pd, const char *name) {
    uint32_t n = 0;
    if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS || n == 0) return 0;
    VkExtensionProperties *ext = calloc(n, sizeof *ext);
    if (!ext) return 0;
    int found = 0;
    if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, ext) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++) found = strcmp(ext[i].extensionName, name) == 0;
    free(ext);
    return found;
}

/* The queue family to use: compute-capable, preferring one that can write timestamps.  -1 when
 * the device has no compute queue. */
static int pick_queue_family(VkPhysicalDevice pd, uint32_t *timestamp_bits) {
    uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, NULL);
    VkQueueFamilyProperties *q = calloc(n ? n : 1, sizeof *q);
    if (!q) return -1;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q);
    int best = -1;
    for (uint32_t i = 0; i < n; i++) {
        if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) || q[i].queueCount == 0) continue;
        if (best < 0 || (q[best].timestampValidBits == 0 && q[i].timestampValidBits > 0)) best = (int)i;
    }
    if (best >= 0) *timestamp_bits = q[best].timestampValidBits;
    free(q);
    return best;
}

/* Why a device cannot run vkgraph's shaders, or NULL when it can. */
const char *vkg_vk_unusable_reason(VkPhysicalDevice pd) {
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(pd, &props);
    if (props.apiVersion < VK_API_VERSION_1_2) return "it supports Vulkan < 1.2";
    VkPhysicalDeviceSubgroupProperties sg = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sg};
    vkGetPhysicalDeviceProperties2(pd, &p2);
    VkSubgroupFeatureFlags need = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;
    if (!(sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) || (sg.supportedOperations & need) != need)
        return "its compute shaders lack subgroup arithmetic";
    uint32_t bits;
    if (pick_queue_family(pd, &bits) < 0) return "it has no compute queue";
    return NULL;
}

static vkg_status choose_device(vkg_vk_context *c, int index, vkg_error *err) {
    uint32_t n = 0;
    VkResult r = vkEnumeratePhysicalDevices(c->instance, &n, NULL);
    if (r != VK_SUCCESS) return vkg_vk_fail(err, r, "vkEnumeratePhysicalDevices");
    if (n == 0) return vkg_error_set(err, VKG_ERR_NO_DEVICE, "the Vulkan loader reports no device");
    VkPhysicalDevice *pds = calloc(n, sizeof *pds);
    if (!pds) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory listing devices");
    r = vkEnumeratePhysicalDevices(c->instance, &n, pds);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        free(pds);
        return vkg_vk_fail(err, r, "vkEnumeratePhysicalDevices");
    }
    vkg_status st = VKG_OK;
    if (index >= 0) {
        const char *why = (uint32_t)index < n ? vkg_vk_unusable_reason(pds[index]) : NULL;
        if ((uint32_t)index >= n)
            st = vkg_error_set(err, VKG_ERR_NO_DEVICE, "vulkan:%d requested but there %s only %u device%s "
                               "(see vkgraph devices)", index, n == 1 ? "is" : "are", n, n == 1 ? "" : "s");
        else if (why)
            st = vkg_error_set(err, VKG_ERR_UNSUPPORTED, "vulkan:%d cannot be used: %s", index, why);
        else
            c->phys = pds[index], c->device_index = index;
    } else {
        int best = -1, best_rank = -1;
        for (uint32_t i = 0; i < n; i++) {
            if (vkg_vk_unusable_reason(pds[i])) continue;
            VkPhysicalDeviceProperties props;
            vkGetPhysicalDeviceProperties(pds[i], &props);
            int rank = vkg_vk_device_rank(props.deviceType);
            if (rank > best_rank) best = (int)i, best_rank = rank;
        }
        if (best < 0)
            st = vkg_error_set(err, VKG_ERR_NO_DEVICE, "none of the %u Vulkan devices supports Vulkan 1.2 "
                               "compute with subgroup arithmetic (see vkgraph devices)", n);
        else
            c->phys = pds[best], c->device_index = best;
    }
    free(pds);
    return st;
}

/* Whether the profile can map GPU timestamps onto the host clock (see vk_backend.c). */
static int calibrateable(VkPhysicalDevice pd) {
    if (!device_extension_present(pd, VK_EXT_CALIBRATED_TIMESTAMPS_EXTENSION_NAME) ||
        !vkGetPhysicalDeviceCalibrateableTimeDomainsEXT)
        return 0;
    VkTimeDomainEXT domains[8];
    uint32_t n = 8;
    VkResult r = vkGetPhysicalDeviceCalibrateableTimeDomainsEXT(pd, &n, domains);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) return 0;
    int device = 0, monotonic = 0;
    for (uint32_t i = 0; i < n; i++) {
        device |= domains[i] == VK_TIME_DOMAIN_DEVICE_EXT;
        monotonic |= domains[i] == VK_TIME_DOMAIN_CLOCK_MONOTONIC_EXT;
    }
    return device && monotonic;
}

static vkg_status create_device(vkg_vk_context *c, vkg_error *err) {
    int family = pick_queue_family(c->phys, &c->timestamp_valid_bits);
    c->queue_family = (uint32_t)family;

    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                            .pNext = &f12};
    VkPhysicalDeviceFeatures2 have = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f11};
    vkGetPhysicalDeviceFeatures2(c->phys, &have);

    /* Only what the shaders may use; f16 for weights stored at half precision later on. */
    VkPhysicalDeviceVulkan12Features e12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                            .shaderFloat16 = f12.shaderFloat16};
    VkPhysicalDeviceVulkan11Features e11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                            .pNext = &e12,
                                            .storageBuffer16BitAccess = f11.storageBuffer16BitAccess};
    VkPhysicalDeviceFeatures2 enable = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &e11};
    c->has_f16 = f12.shaderFloat16 != 0;
    c->has_16bit_storage = f11.storageBuffer16BitAccess != 0;

    const char *extensions[3];
    uint32_t n_ext = 0;
    if (device_extension_present(c->phys, "VK_KHR_portability_subset")) extensions[n_ext++] = "VK_KHR_portability_subset";
    /* Where device memory is host memory, constants are imported where they lie rather than
     * copied (host_import.c); no_host_import copies them as on a discrete GPU. */
    VkPhysicalDeviceType type = c->props.deviceType;
    if ((type == VK_PHYSICAL_DEVICE_TYPE_CPU || type == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU) &&
        !c->opts.no_host_import &&
        device_extension_present(c->phys, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME)) {
        VkPhysicalDeviceExternalMemoryHostPropertiesEXT hp = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT};
        VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &hp};
        vkGetPhysicalDeviceProperties2(c->phys, &p2);
        c->host_import_alignment = hp.minImportedHostPointerAlignment;
        if (c->host_import_alignment) extensions[n_ext++] = VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME;
    }
    if (c->timestamp_valid_bits && (c->calibrated = calibrateable(c->phys)))
        extensions[n_ext++] = VK_EXT_CALIBRATED_TIMESTAMPS_EXTENSION_NAME;

    float priority = 1.0f;
    VkDeviceQueueCreateInfo qci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = c->queue_family,
        .queueCount = 1,
        .pQueuePriorities = &priority,
    };
    VkDeviceCreateInfo dci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .pNext = &enable,
        .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &qci,
        .enabledExtensionCount = n_ext,
        .ppEnabledExtensionNames = extensions,
    };
    VkResult r = vkCreateDevice(c->phys, &dci, NULL, &c->device);
    if (r != VK_SUCCESS) {
        c->device = VK_NULL_HANDLE;
        return vkg_vk_fail(err, r, "vkCreateDevice");
    }
    vkGetDeviceQueue(c->device, c->queue_family, 0, &c->queue);

    VkCommandPoolCreateInfo pci = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = c->queue_family,
    };
    r = vkCreateCommandPool(c->device, &pci, NULL, &c->pool);
    if (r != VK_SUCCESS) {
        c->pool = VK_NULL_HANDLE;
        return vkg_vk_fail(err, r, "vkCreateCommandPool");
    }
    return VKG_OK;
}

static void read_properties(vkg_vk_context *c) {
    VkPhysicalDeviceMaintenance3Properties m3 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
    c->subgroup = (VkPhysicalDeviceSubgroupProperties){.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES,
                                                       .pNext = &m3};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &c->subgroup};
    vkGetPhysicalDeviceProperties2(c->phys, &p2);
    c->subgroup.pNext = NULL;
    c->props = p2.properties;
    c->max_allocation = m3.maxMemoryAllocationSize;
    vkGetPhysicalDeviceMemoryProperties(c->phys, &c->memory);
}

vkg_status vkg_vk_context_create(int index, const vkg_device_options *opts, uint64_t *counter,
                                 vkg_vk_context **out, vkg_error *err) {
    *out = NULL;
    vkg_vk_context *c = calloc(1, sizeof *c);
    if (!c) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory opening a Vulkan device");
    c->opts = *opts;
    c->quiet = opts->quiet;
    c->validation_counter = counter;
    c->timeout_ns = (opts->timeout_ms ? (uint64_t)opts->timeout_ms : 60000u) * 1000000ull;
    vkg_status st = vkg_vk_instance_create(opts->validation, !opts->no_sync_validation, counter, &c->instance,
                                           &c->messenger, err);
    c->validation = c->messenger != VK_NULL_HANDLE;
    if (st == VKG_OK) st = choose_device(c, index, err);
    if (st == VKG_OK) {
        read_properties(c);
        st = create_device(c, err);
    }
    if (st == VKG_OK) {
        vkg_vk_tuning_default(c, &c->tuning);
        st = vkg_vk_pipelines_new(c, &c->pipelines, err);
    }
    if (st != VKG_OK) {
        vkg_vk_context_free(c);
        return st;
    }
    *out = c;
    return VKG_OK;
}

void vkg_vk_context_free(vkg_vk_context *c) {
    if (!c) return;
    if (c->abandoned) { /* work still running on it: destroying the device under it is undefined */
        vkg_keep_forever(c);
        return;
    }
    if (c->device) {
        if (c->lost != VKG_VK_HUNG) vkDeviceWaitIdle(c->device); /* a hung queue may never be idle */
        vkg_vk_pipelines_free(c, c->pipelines);
        if (c->pool) vkDestroyCommandPool(c->device, c->pool, NULL);
        vkDestroyDevice(c->device, NULL);
    }
    vkg_vk_instance_free(c->instance, c->messenger);
    free(c);
}

vkg_status vkg_vk_submit_wait(vkg_vk_context *c, VkCommandBuffer cmd, VkFence fence, const char *what,
                              vkg_error *err) {
    VkSubmitInfo si = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
        .commandBufferCount = 1,
        .pCommandBuffers = &cmd,
    };
    if (c->lost)
        return vkg_error_set(err, VKG_ERR_DEVICE_LOST, "%s: the Vulkan device %s was lost earlier (%s); reopen the device",
                             what, c->props.deviceName,
                             c->lost == VKG_VK_HUNG ? "a submission did not finish in time" : "the driver reported it");
    VkResult r = vkQueueSubmit(c->queue, 1, &si, fence);
    if (r == VK_ERROR_DEVICE_LOST) c->lost = VKG_VK_LOST;
    if (r != VK_SUCCESS) return vkg_vk_fail(err, r, what);
    uint64_t timeout = c->timeout_ns;
    r = vkWaitForFences(c->device, 1, &fence, VK_TRUE, timeout);
    if (r == VK_TIMEOUT) {
        c->lost = VKG_VK_HUNG; /* its work may never finish: nothing may wait for it again unbounded */
        return vkg_error_set(err, VKG_ERR_TIMEOUT,
                             "%s: the device did not finish within %llu ms (raise vkg_device_options.timeout_ms, "
                             "VKG_TIMEOUT_MS for the vkgraph tool, to wait longer); it counts as lost until that "
                             "work is seen to finish", what, (unsigned long long)(timeout / 1000000ull));
    }
    if (r == VK_ERROR_DEVICE_LOST) c->lost = VKG_VK_LOST;
    if (r != VK_SUCCESS) return vkg_vk_fail(err, r, what);
    r = vkResetFences(c->device, 1, &fence);
    if (r != VK_SUCCESS) return vkg_vk_fail(err, r, "vkResetFences");
    return VKG_OK;
}

vkg_status vkg_vk_late_fence(vkg_vk_context *c, VkFence fence, const char *what, vkg_error *err) {
    if (c->lost == VKG_VK_LOST)
        return vkg_error_set(err, VKG_ERR_DEVICE_LOST, "%s: the Vulkan device %s was lost; reopen the device", what,
                             c->props.deviceName);
    const uint64_t timeout = c->timeout_ns;
    VkResult r = vkWaitForFences(c->device, 1, &fence, VK_TRUE, timeout);
    if (r == VK_SUCCESS) {
        if (c->lost == VKG_VK_HUNG) c->lost = 0; /* late, but finished: the device works */
        r = vkResetFences(c->device, 1, &fence);
        return r == VK_SUCCESS ? VKG_OK : vkg_vk_fail(err, r, "vkResetFences");
    }
    c->lost = r == VK_TIMEOUT ? VKG_VK_HUNG : VKG_VK_LOST; /* for good: nothing clears it now */
    if (r == VK_TIMEOUT) /* lost, not a timeout: waiting again cannot help */
        return vkg_error_set(err, VKG_ERR_DEVICE_LOST,
                             "%s: work submitted earlier is still running after another %llu ms; the device counts "
                             "as lost: reopen it", what, (unsigned long long)(timeout / 1000000ull));
    return vkg_vk_fail(err, r, what);
}
