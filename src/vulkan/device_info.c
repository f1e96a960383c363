/* `vkgraph devices`: every Vulkan device with the limits and features that shape a plan. */
#include "vulkan/context.h"

#include "base/error.h"

#include <stdlib.h>
#include <string.h>

#define MIB (1024.0 * 1024.0)

static int has_extension(const VkExtensionProperties *ext, uint32_t n, const char *name) {
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(ext[i].extensionName, name) == 0) return 1;
    return 0;
}

static void print_bytes(FILE *f, const char *label, uint64_t bytes) {
    if (bytes >= (1ull << 30)) fprintf(f, "    %-34s %.2f GiB\n", label, (double)bytes / (MIB * 1024.0));
    else if (bytes >= (1ull << 20)) fprintf(f, "    %-34s %.1f MiB\n", label, (double)bytes / MIB);
    else if (bytes >= 1024 && bytes % 1024 == 0) fprintf(f, "    %-34s %llu KiB\n", label, (unsigned long long)(bytes / 1024));
    else fprintf(f, "    %-34s %llu bytes\n", label, (unsigned long long)bytes);
}

static void print_device(FILE *f, int index, VkPhysicalDevice pd, int is_best) {
    VkPhysicalDeviceProperties base;
    vkGetPhysicalDeviceProperties(pd, &base);
    int v12 = base.apiVersion >= VK_API_VERSION_1_2;

    VkPhysicalDeviceDriverProperties drv = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceSubgroupProperties sg = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES,
                                             .pNext = v12 ? &drv : NULL};
    VkPhysicalDeviceMaintenance3Properties m3 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES,
                                                 .pNext = &sg};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &m3};
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, .pNext = &f12};
    VkPhysicalDeviceFeatures2 feats = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f11};
    if (base.apiVersion >= VK_API_VERSION_1_1) {
        vkGetPhysicalDeviceProperties2(pd, &p2);
        if (v12) vkGetPhysicalDeviceFeatures2(pd, &feats);
    }
    const VkPhysicalDeviceLimits *l = &base.limits;

    uint32_t n_ext = 0;
    vkEnumerateDeviceExtensionProperties(pd, NULL, &n_ext, NULL);
    VkExtensionProperties *ext = calloc(n_ext + 1, sizeof *ext);
    if (ext && vkEnumerateDeviceExtensionProperties(pd, NULL, &n_ext, ext) != VK_SUCCESS) n_ext = 0;
    if (!ext) n_ext = 0;

    fprintf(f, "vulkan:%d  %s%s\n", index, base.deviceName, is_best ? "   (default)" : "");
    fprintf(f, "    %-34s %s\n", "type", vkg_vk_device_type_name(base.deviceType));
    if (v12) fprintf(f, "    %-34s %s (%s)\n", "driver", drv.driverName, drv.driverInfo);
    fprintf(f, "    %-34s %u.%u.%u\n", "Vulkan API version", VK_API_VERSION_MAJOR(base.apiVersion),
            VK_API_VERSION_MINOR(base.apiVersion), VK_API_VERSION_PATCH(base.apiVersion));
    fprintf(f, "    %-34s %04x:%04x\n", "vendor:device id", base.vendorID, base.deviceID);
    if (base.apiVersion >= VK_API_VERSION_1_1) {
        fprintf(f, "    %-34s %u\n", "subgroup size", sg.subgroupSize);
        fprintf(f, "    %-34s %s\n", "subgroup arithmetic in compute",
                (sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                        (sg.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) ? "yes" : "no");
    }
    print_bytes(f, "max shared memory per workgroup", l->maxComputeSharedMemorySize);
    print_bytes(f, "maxStorageBufferRange", l->maxStorageBufferRange);
    fprintf(f, "    %-34s %llu bytes\n", "minStorageBufferOffsetAlignment",
            (unsigned long long)l->minStorageBufferOffsetAlignment);
    fprintf(f, "    %-34s %u\n", "maxTexelBufferElements", l->maxTexelBufferElements);
    fprintf(f, "    %-34s %u\n", "maxComputeWorkGroupInvocations", l->maxComputeWorkGroupInvocations);
    fprintf(f, "    %-34s %u x %u x %u\n", "maxComputeWorkGroupCount", l->maxComputeWorkGroupCount[0],
            l->maxComputeWorkGroupCount[1], l->maxComputeWorkGroupCount[2]);
    fprintf(f, "    %-34s %u bytes\n", "maxPushConstantsSize", l->maxPushConstantsSize);
    if (base.apiVersion >= VK_API_VERSION_1_1) print_bytes(f, "maxMemoryAllocationSize", m3.maxMemoryAllocationSize);

    VkPhysicalDeviceMemoryProperties mem;
    vkGetPhysicalDeviceMemoryProperties(pd, &mem);
    for (uint32_t h = 0; h < mem.memoryHeapCount; h++) {
        int host_visible = 0;
        for (uint32_t t = 0; t < mem.memoryTypeCount; t++)
            if (mem.memoryTypes[t].heapIndex == h &&
                (mem.memoryTypes[t].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT))
                host_visible = 1;
        char label[48];
        snprintf(label, sizeof label, "memory heap %u", h);
        fprintf(f, "    %-34s %.2f GiB%s%s\n", label, (double)mem.memoryHeaps[h].size / (MIB * 1024.0),
                (mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) ? ", device-local" : "",
                host_visible ? ", host-visible" : "");
    }
    if (v12) {
        fprintf(f, "    %-34s %s\n", "fp16 arithmetic (shaderFloat16)", f12.shaderFloat16 ? "yes" : "no");
        fprintf(f, "    %-34s %s\n", "16-bit storage", f11.storageBuffer16BitAccess ? "yes" : "no");
        fprintf(f, "    %-34s %s\n", "f16/bf16 weights",
                f11.storageBuffer16BitAccess ? "read as stored (16 bits each)" : "widened to f32 at upload (no 16-bit storage)");
    }
    int coop_khr = has_extension(ext, n_ext, "VK_KHR_cooperative_matrix");
    int coop_nv = has_extension(ext, n_ext, "VK_NV_cooperative_matrix");
    fprintf(f, "    %-34s %s\n", "cooperative matrix",
            coop_khr && coop_nv ? "yes (VK_KHR_cooperative_matrix, VK_NV_cooperative_matrix)"
            : coop_khr         ? "yes (VK_KHR_cooperative_matrix)"
            : coop_nv          ? "yes (VK_NV_cooperative_matrix)"
                               : "no");
    const char *why = vkg_vk_unusable_reason(pd);
    fprintf(f, "    %-34s %s%s\n", "usable by vkgraph", why ? "no: " : "yes", why ? why : "");
    free(ext);
}

/* which: -2 every device, -1 the default one, else vulkan:which alone. */
static vkg_status print_devices(FILE *f, int which, vkg_error *err) {
    VkInstance instance;
    vkg_status st = vkg_vk_instance_create(0, 0, NULL, &instance, NULL, err);
    if (st != VKG_OK) return st;
    uint32_t n = 0;
    VkResult r = vkEnumeratePhysicalDevices(instance, &n, NULL);
    VkPhysicalDevice *pds = NULL;
    if (r == VK_SUCCESS && n > 0) {
        pds = calloc(n, sizeof *pds);
        if (!pds) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory listing devices");
        else r = vkEnumeratePhysicalDevices(instance, &n, pds);
    }
    if (st == VKG_OK && r != VK_SUCCESS && r != VK_INCOMPLETE) st = vkg_vk_fail(err, r, "vkEnumeratePhysicalDevices");
    if (st == VKG_OK && n == 0) st = vkg_error_set(err, VKG_ERR_NO_DEVICE, "the Vulkan loader reports no device");
    if (st == VKG_OK) {
        int best = -1, best_rank = -1;
        for (uint32_t i = 0; i < n; i++) {
            VkPhysicalDeviceProperties props;
            vkGetPhysicalDeviceProperties(pds[i], &props);
            int rank = vkg_vk_device_rank(props.deviceType);
            if (!vkg_vk_unusable_reason(pds[i]) && rank > best_rank) best = (int)i, best_rank = rank;
        }
        if (which == -1 && best < 0)
            st = vkg_error_set(err, VKG_ERR_NO_DEVICE, "no Vulkan device is usable by vkgraph (see vkgraph devices)");
        else if (which >= 0 && (uint32_t)which >= n)
            st = vkg_error_set(err, VKG_ERR_NO_DEVICE, "vulkan:%d requested but there %s only %u device%s "
                               "(vulkan:0 to vulkan:%u)", which, n == 1 ? "is" : "are", n, n == 1 ? "" : "s", n - 1);
        for (uint32_t i = 0; st == VKG_OK && i < n; i++) {
            if (which == -2 || (which == -1 && (int)i == best) || (int)i == which) {
                if (which == -2 && i) fprintf(f, "\n");
                print_device(f, (int)i, pds[i], (int)i == best);
            }
        }
    }
    free(pds);
    vkg_vk_instance_free(instance, VK_NULL_HANDLE);
    return st;
}

vkg_status vkg_devices_print(FILE *f, vkg_error *err) { return print_devices(f, -2, err); }

vkg_status vkg_devices_print_one(FILE *f, int index, vkg_error *err) {
    return print_devices(f, index < 0 ? -1 : index, err);
}
