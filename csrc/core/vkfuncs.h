/* vkfuncs.h — the Vulkan entry points the core calls, resolved at run time from
 * the loader (vkload.c) instead of linked: the extension imports without a
 * Vulkan loader installed and says which package to install. Every core 1.0-1.3
 * function is exported by libvulkan.so.1; extension functions are still looked
 * up per instance/device with vkGet*ProcAddr where they are used. */
#ifndef HELIOS_VKFUNCS_H
#define HELIOS_VKFUNCS_H

// clang-format off: one entry point a line
#define HL_VK_FUNCS(X) \
    X(vkGetInstanceProcAddr) \
    X(vkGetDeviceProcAddr) \
    X(vkCreateInstance) \
    X(vkDestroyInstance) \
    X(vkEnumeratePhysicalDevices) \
    X(vkGetPhysicalDeviceProperties) \
    X(vkGetPhysicalDeviceProperties2) \
    X(vkGetPhysicalDeviceFeatures2) \
    X(vkGetPhysicalDeviceMemoryProperties) \
    X(vkGetPhysicalDeviceQueueFamilyProperties) \
    X(vkGetPhysicalDeviceExternalSemaphoreProperties) \
    X(vkEnumerateDeviceExtensionProperties) \
    X(vkCreateDevice) \
    X(vkDestroyDevice) \
    X(vkDeviceWaitIdle) \
    X(vkGetDeviceQueue) \
    X(vkQueueSubmit) \
    X(vkCreateBuffer) \
    X(vkDestroyBuffer) \
    X(vkGetBufferMemoryRequirements) \
    X(vkAllocateMemory) \
    X(vkFreeMemory) \
    X(vkBindBufferMemory) \
    X(vkMapMemory) \
    X(vkUnmapMemory) \
    X(vkCreateShaderModule) \
    X(vkDestroyShaderModule) \
    X(vkCreateComputePipelines) \
    X(vkDestroyPipeline) \
    X(vkCreatePipelineLayout) \
    X(vkDestroyPipelineLayout) \
    X(vkCreateDescriptorSetLayout) \
    X(vkDestroyDescriptorSetLayout) \
    X(vkCreateDescriptorPool) \
    X(vkDestroyDescriptorPool) \
    X(vkResetDescriptorPool) \
    X(vkAllocateDescriptorSets) \
    X(vkUpdateDescriptorSets) \
    X(vkCreateCommandPool) \
    X(vkDestroyCommandPool) \
    X(vkAllocateCommandBuffers) \
    X(vkResetCommandBuffer) \
    X(vkBeginCommandBuffer) \
    X(vkEndCommandBuffer) \
    X(vkCreateFence) \
    X(vkCreateSemaphore) \
    X(vkDestroySemaphore) \
    X(vkFreeCommandBuffers) \
    X(vkDestroyFence) \
    X(vkResetFences) \
    X(vkWaitForFences) \
    X(vkGetFenceStatus) \
    X(vkCreateQueryPool) \
    X(vkDestroyQueryPool) \
    X(vkGetQueryPoolResults) \
    X(vkCmdResetQueryPool) \
    X(vkCmdWriteTimestamp) \
    X(vkCmdCopyBuffer) \
    X(vkCmdFillBuffer) \
    X(vkCmdUpdateBuffer) \
    X(vkCmdPipelineBarrier) \
    X(vkCmdBindPipeline) \
    X(vkCmdBindDescriptorSets) \
    X(vkCmdPushConstants) \
    X(vkCmdDispatch) \
    X(vkCmdDispatchIndirect) \
    X(vkCreatePipelineCache) \
    X(vkDestroyPipelineCache) \
    X(vkGetPipelineCacheData)
// clang-format on

#define HL_VK_DECLARE(name) extern PFN_##name name;
HL_VK_FUNCS(HL_VK_DECLARE)
#undef HL_VK_DECLARE

#endif
