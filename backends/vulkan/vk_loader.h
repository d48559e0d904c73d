/* The Vulkan entry points the backend uses, resolved at run time from libvulkan.so.1
 * (opened with dlopen: the module never links against libvulkan). */
#ifndef VK_LOADER_H
#define VK_LOADER_H

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <vulkan/vulkan.h>

#include "metrale/status.h"

/* Resolved with vkGetInstanceProcAddr(NULL, ...). */
#define VK_GLOBAL_FNS(X)                   \
  X(vkCreateInstance)                      \
  X(vkEnumerateInstanceVersion)            \
  X(vkEnumerateInstanceLayerProperties)    \
  X(vkEnumerateInstanceExtensionProperties)

/* Resolved with vkGetInstanceProcAddr(instance, ...). */
#define VK_INSTANCE_FNS(X)                 \
  X(vkDestroyInstance)                     \
  X(vkEnumeratePhysicalDevices)            \
  X(vkEnumerateDeviceExtensionProperties)  \
  X(vkGetPhysicalDeviceProperties)         \
  X(vkGetPhysicalDeviceProperties2)        \
  X(vkGetPhysicalDeviceFeatures2)          \
  X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkGetPhysicalDeviceMemoryProperties)   \
  X(vkCreateDevice)                        \
  X(vkGetDeviceProcAddr)

/* Resolved with vkGetDeviceProcAddr(device, ...). */
#define VK_DEVICE_FNS(X)                   \
  X(vkDestroyDevice)                       \
  X(vkGetDeviceQueue)                      \
  X(vkDeviceWaitIdle)                      \
  X(vkQueueSubmit)                         \
  X(vkCreateBuffer)                        \
  X(vkDestroyBuffer)                       \
  X(vkGetBufferMemoryRequirements)         \
  X(vkAllocateMemory)                      \
  X(vkFreeMemory)                          \
  X(vkBindBufferMemory)                    \
  X(vkMapMemory)                           \
  X(vkUnmapMemory)                         \
  X(vkFlushMappedMemoryRanges)             \
  X(vkInvalidateMappedMemoryRanges)        \
  X(vkGetBufferDeviceAddress)              \
  X(vkCreateShaderModule)                  \
  X(vkDestroyShaderModule)                 \
  X(vkCreatePipelineLayout)                \
  X(vkDestroyPipelineLayout)               \
  X(vkCreateComputePipelines)              \
  X(vkDestroyPipeline)                     \
  X(vkCreateCommandPool)                   \
  X(vkDestroyCommandPool)                  \
  X(vkAllocateCommandBuffers)              \
  X(vkResetCommandBuffer)                  \
  X(vkBeginCommandBuffer)                  \
  X(vkEndCommandBuffer)                    \
  X(vkCmdBindPipeline)                     \
  X(vkCmdPushConstants)                    \
  X(vkCmdDispatchBase)                     \
  X(vkCmdPipelineBarrier)                  \
  X(vkCmdCopyBuffer)                       \
  X(vkCmdFillBuffer)                       \
  X(vkCmdUpdateBuffer)                     \
  X(vkCreateSemaphore)                     \
  X(vkDestroySemaphore)                    \
  X(vkWaitSemaphores)                      \
  X(vkCreateQueryPool)                     \
  X(vkDestroyQueryPool)                    \
  X(vkResetQueryPool)                      \
  X(vkGetQueryPoolResults)                 \
  X(vkCmdWriteTimestamp)

typedef struct vk_fns {
  void *library; /* dlopen handle of the loader */
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
#define VK_FN_MEMBER(name) PFN_##name name;
  VK_GLOBAL_FNS(VK_FN_MEMBER)
  VK_INSTANCE_FNS(VK_FN_MEMBER)
  VK_DEVICE_FNS(VK_FN_MEMBER)
#undef VK_FN_MEMBER
  /* VK_EXT_debug_utils, present only with METRALE_VULKAN_VALIDATION=1 */
  PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT;
  PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT;
  /* VK_KHR_pipeline_executable_properties, present only with METRALE_VULKAN_PROFILE=1 where
   * the driver has it (vk_profile.c prints each profiled pipeline's statistics) */
  PFN_vkGetPipelineExecutablePropertiesKHR vkGetPipelineExecutablePropertiesKHR;
  PFN_vkGetPipelineExecutableStatisticsKHR vkGetPipelineExecutableStatisticsKHR;
} vk_fns;

/* Opens the loader (METRALE_VULKAN_LOADER overrides the file name, for tests) and
 * resolves the global entry points.  No loader: UNAVAILABLE with the reason. */
metrale_status vk_load_global(vk_fns *fns);
metrale_status vk_load_instance(vk_fns *fns, VkInstance instance, int with_debug_utils);
metrale_status vk_load_device(vk_fns *fns, VkDevice device);
void vk_unload(vk_fns *fns);

#endif
