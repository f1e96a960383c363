/* Included at the end of vulkan/context.h in the fault-injection library: each Vulkan call that
 * returns a VkResult first asks fault.c whether it is the one to fail.  (A function-like macro
 * does not expand inside its own body, so each still reaches volk's pointer of that name.) */
#ifndef VKG_FAULT_VK_WRAP_H
#define VKG_FAULT_VK_WRAP_H

#include "fault/fault.h"

#define VKG_FAULT_CALL(kind, failure, call) (vkg_fault_hit(kind) ? (failure) : (call))

#define vkAllocateMemory(...) VKG_FAULT_CALL(VKG_FAULT_DEVICE_ALLOC, VK_ERROR_OUT_OF_DEVICE_MEMORY, vkAllocateMemory(__VA_ARGS__))
#define vkMapMemory(...) VKG_FAULT_CALL(VKG_FAULT_MAP, VK_ERROR_MEMORY_MAP_FAILED, vkMapMemory(__VA_ARGS__))
/* A faked fence timeout waits for the fence first, as long as the real call would: the work it
 * reports as late has in fact finished.  Returning at once left lavapipe still running the
 * submission while the test went on to free the device and the model's imported weights, and
 * lavapipe's queue thread crashed on them (1 run in 6). */
#define vkWaitForFences(...) \
    (vkg_fault_hit(VKG_FAULT_FENCE) ? ((void)vkWaitForFences(__VA_ARGS__), VK_TIMEOUT) : vkWaitForFences(__VA_ARGS__))
#define vkAllocateCommandBuffers(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkAllocateCommandBuffers(__VA_ARGS__))
#define vkAllocateDescriptorSets(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkAllocateDescriptorSets(__VA_ARGS__))
#define vkBeginCommandBuffer(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkBeginCommandBuffer(__VA_ARGS__))
#define vkBindBufferMemory(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkBindBufferMemory(__VA_ARGS__))
#define vkCreateBuffer(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkCreateBuffer(__VA_ARGS__))
#define vkCreateBufferView(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkCreateBufferView(__VA_ARGS__))
#define vkCreateCommandPool(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkCreateCommandPool(__VA_ARGS__))
#define vkCreateComputePipelines(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkCreateComputePipelines(__VA_ARGS__))
#define vkCreateDebugUtilsMessengerEXT(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkCreateDebugUtilsMessengerEXT(__VA_ARGS__))
#define vkCreateDescriptorPool(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkCreateDescriptorPool(__VA_ARGS__))
#define vkCreateDescriptorSetLayout(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkCreateDescriptorSetLayout(__VA_ARGS__))
#define vkCreateDevice(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkCreateDevice(__VA_ARGS__))
#define vkCreateFence(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkCreateFence(__VA_ARGS__))
#define vkCreateInstance(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkCreateInstance(__VA_ARGS__))
#define vkCreatePipelineCache(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkCreatePipelineCache(__VA_ARGS__))
#define vkCreatePipelineLayout(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkCreatePipelineLayout(__VA_ARGS__))
#define vkCreateQueryPool(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkCreateQueryPool(__VA_ARGS__))
#define vkCreateShaderModule(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkCreateShaderModule(__VA_ARGS__))
#define vkEndCommandBuffer(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkEndCommandBuffer(__VA_ARGS__))
#define vkEnumerateDeviceExtensionProperties(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkEnumerateDeviceExtensionProperties(__VA_ARGS__))
#define vkEnumerateInstanceExtensionProperties(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkEnumerateInstanceExtensionProperties(__VA_ARGS__))
#define vkEnumerateInstanceLayerProperties(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkEnumerateInstanceLayerProperties(__VA_ARGS__))
#define vkEnumeratePhysicalDevices(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkEnumeratePhysicalDevices(__VA_ARGS__))
#define vkGetCalibratedTimestampsEXT(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkGetCalibratedTimestampsEXT(__VA_ARGS__))
#define vkGetPhysicalDeviceCalibrateableTimeDomainsEXT(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkGetPhysicalDeviceCalibrateableTimeDomainsEXT(__VA_ARGS__))
#define vkGetPipelineCacheData(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkGetPipelineCacheData(__VA_ARGS__))
#define vkGetQueryPoolResults(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkGetQueryPoolResults(__VA_ARGS__))
#define vkQueueSubmit(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkQueueSubmit(__VA_ARGS__))
#define vkResetCommandBuffer(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkResetCommandBuffer(__VA_ARGS__))
#define vkResetFences(...) VKG_FAULT_CALL(VKG_FAULT_VULKAN, VK_ERROR_OUT_OF_HOST_MEMORY, vkResetFences(__VA_ARGS__))

#endif
