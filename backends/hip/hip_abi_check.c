/* Compile-time proof that hip_api.h agrees with the HIP headers, built only where
 * hip/hip_runtime_api.h is found (backends/hip/CMakeLists.txt).  hip_api.h declares its
 * own copies so the module builds and loads without ROCm; a value that drifts from the
 * headers fails the build here instead of misbehaving on an AMD GPU. */
#include <hip/hip_runtime_api.h>
#if __has_include(<hip/hip_deprecated.h>)
#include <hip/hip_deprecated.h>
#endif
#include <stddef.h>

#include "hip_api.h"

#define SAME(ours, theirs) _Static_assert((int)(ours) == (int)(theirs), #ours " != " #theirs)

SAME(HIP_API_SUCCESS, hipSuccess);
SAME(HIP_API_ERROR_INVALID_VALUE, hipErrorInvalidValue);
SAME(HIP_API_ERROR_OUT_OF_MEMORY, hipErrorOutOfMemory);
SAME(HIP_API_ERROR_NOT_INITIALIZED, hipErrorNotInitialized);
SAME(HIP_API_ERROR_INSUFFICIENT_DRIVER, hipErrorInsufficientDriver);
SAME(HIP_API_ERROR_NO_DEVICE, hipErrorNoDevice);
SAME(HIP_API_ERROR_INVALID_DEVICE, hipErrorInvalidDevice);
SAME(HIP_API_ERROR_INVALID_IMAGE, hipErrorInvalidImage);
SAME(HIP_API_ERROR_NO_BINARY_FOR_GPU, hipErrorNoBinaryForGpu);
SAME(HIP_API_ERROR_INVALID_KERNEL_FILE, hipErrorInvalidKernelFile);
SAME(HIP_API_ERROR_SHARED_OBJECT_INIT_FAILED, hipErrorSharedObjectInitFailed);
SAME(HIP_API_ERROR_NOT_FOUND, hipErrorNotFound);
SAME(HIP_API_ERROR_LAUNCH_OUT_OF_RESOURCES, hipErrorLaunchOutOfResources);

SAME(HIP_API_ATTR_MAX_GRID_DIM_X, hipDeviceAttributeMaxGridDimX);
SAME(HIP_API_ATTR_MAX_GRID_DIM_Y, hipDeviceAttributeMaxGridDimY);
SAME(HIP_API_ATTR_MAX_GRID_DIM_Z, hipDeviceAttributeMaxGridDimZ);
SAME(HIP_API_ATTR_MAX_THREADS_PER_BLOCK, hipDeviceAttributeMaxThreadsPerBlock);
SAME(HIP_API_ATTR_MULTIPROCESSOR_COUNT, hipDeviceAttributeMultiprocessorCount);
SAME(HIP_API_ATTR_MAX_SHARED_MEMORY_PER_BLOCK, hipDeviceAttributeMaxSharedMemoryPerBlock);
SAME(HIP_API_ATTR_UNIFIED_ADDRESSING, hipDeviceAttributeUnifiedAddressing);
SAME(HIP_API_ATTR_WARP_SIZE, hipDeviceAttributeWarpSize);
SAME(HIP_API_STREAM_NON_BLOCKING, hipStreamNonBlocking);
SAME(HIP_API_EVENT_DISABLE_TIMING, hipEventDisableTiming);

_Static_assert(sizeof(hip_deviceptr) == sizeof(hipDeviceptr_t), "hipDeviceptr_t size");
_Static_assert(sizeof(hip_error) == sizeof(hipError_t), "hipError_t size");

/* gcnArchName where hip_device.c reads it, in the layout of these headers */
#if HIP_VERSION_MAJOR >= 6
_Static_assert(offsetof(hipDeviceProp_t, gcnArchName) == HIP_API_PROPS_R0600_ARCH_OFFSET,
               "gcnArchName offset (hipGetDevicePropertiesR0600)");
_Static_assert(offsetof(hipDeviceProp_tR0000, gcnArchName) == HIP_API_PROPS_R0000_ARCH_OFFSET,
               "gcnArchName offset (hipGetDeviceProperties, ROCm 5 layout)");
_Static_assert(sizeof(hipDeviceProp_tR0000) <= HIP_API_PROPS_BUFFER, "hipDeviceProp_tR0000 size");
#else
_Static_assert(offsetof(hipDeviceProp_t, gcnArchName) == HIP_API_PROPS_R0000_ARCH_OFFSET,
               "gcnArchName offset (hipGetDeviceProperties)");
#endif
_Static_assert(sizeof(hipDeviceProp_t) <= HIP_API_PROPS_BUFFER, "hipDeviceProp_t size");
_Static_assert(sizeof(((hipDeviceProp_t *)0)->gcnArchName) == HIP_API_PROPS_ARCH_SIZE,
               "gcnArchName size");
