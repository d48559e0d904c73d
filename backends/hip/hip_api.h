/* The slice of the HIP runtime API this backend uses, opened with dlopen.
 *
 * The types and constants are declared here rather than taken from hip_runtime_api.h so
 * that the host side compiles (and the module loads and reports "unavailable") on a
 * machine without ROCm; the prefixes keep them from clashing with the HIP headers, and
 * hip_abi_check.c compares every value with them wherever the headers are present.  The
 * values used are the same in HIP 5 and 6 (ROCm 6 renamed the attributes it dropped
 * instead of renumbering the rest). */
#ifndef METRALE_HIP_API_H
#define METRALE_HIP_API_H

#include <stddef.h>

#include "metrale/status.h"

typedef int hip_error;                  /* hipError_t */
typedef void *hip_deviceptr;            /* hipDeviceptr_t */
typedef struct ihipModule_t *hip_module; /* the same opaque tags as the HIP headers */
typedef struct ihipModuleSymbol_t *hip_function;
typedef struct ihipStream_t *hip_stream;
typedef struct ihipEvent_t *hip_event;

enum {
  HIP_API_SUCCESS = 0,
  HIP_API_ERROR_INVALID_VALUE = 1,
  HIP_API_ERROR_OUT_OF_MEMORY = 2,
  HIP_API_ERROR_NOT_INITIALIZED = 3,
  HIP_API_ERROR_INSUFFICIENT_DRIVER = 35,
  HIP_API_ERROR_NO_DEVICE = 100,
  HIP_API_ERROR_INVALID_DEVICE = 101,
  HIP_API_ERROR_INVALID_IMAGE = 200,
  HIP_API_ERROR_NO_BINARY_FOR_GPU = 209,
  HIP_API_ERROR_INVALID_KERNEL_FILE = 218,
  HIP_API_ERROR_SHARED_OBJECT_INIT_FAILED = 303,
  HIP_API_ERROR_NOT_FOUND = 500,
  HIP_API_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
};

enum { /* hipDeviceAttribute_t */
  HIP_API_ATTR_MAX_GRID_DIM_X = 29,
  HIP_API_ATTR_MAX_GRID_DIM_Y = 30,
  HIP_API_ATTR_MAX_GRID_DIM_Z = 31,
  HIP_API_ATTR_MAX_THREADS_PER_BLOCK = 56,
  HIP_API_ATTR_MULTIPROCESSOR_COUNT = 63,
  HIP_API_ATTR_MAX_SHARED_MEMORY_PER_BLOCK = 74,
  HIP_API_ATTR_UNIFIED_ADDRESSING = 85,
  HIP_API_ATTR_WARP_SIZE = 87,
};

enum { HIP_API_STREAM_NON_BLOCKING = 1 }; /* hipStreamNonBlocking */
enum { HIP_API_EVENT_DISABLE_TIMING = 2 }; /* hipEventDisableTiming */

/* hipGetDeviceProperties writes a struct whose layout changed in ROCm 6.  Only
 * gcnArchName is read, at its offset in the layout of the entry point that was found:
 * hipGetDevicePropertiesR0600 (ROCm 6+) or the ROCm 5 hipGetDeviceProperties.  The
 * buffer is far larger than either struct, so a longer future layout cannot overrun. */
#define HIP_API_PROPS_R0000_ARCH_OFFSET 396u
#define HIP_API_PROPS_R0600_ARCH_OFFSET 1160u
#define HIP_API_PROPS_ARCH_SIZE 256u
#define HIP_API_PROPS_BUFFER 8192u

/* X(field, symbol, parameters): one row per runtime entry point. */
#define HIP_API_FUNCTIONS(X)                                                               \
  X(GetErrorName, "hipGetErrorName", const char *, (hip_error error))                       \
  X(GetErrorString, "hipGetErrorString", const char *, (hip_error error))                   \
  X(DriverGetVersion, "hipDriverGetVersion", hip_error, (int *version))                     \
  X(RuntimeGetVersion, "hipRuntimeGetVersion", hip_error, (int *version))                   \
  X(GetDeviceCount, "hipGetDeviceCount", hip_error, (int *count))                           \
  X(SetDevice, "hipSetDevice", hip_error, (int device))                                     \
  X(DeviceGetName, "hipDeviceGetName", hip_error, (char *name, int len, int device))        \
  X(DeviceGetAttribute, "hipDeviceGetAttribute", hip_error, (int *value, int attr, int device)) \
  X(DeviceTotalMem, "hipDeviceTotalMem", hip_error, (size_t * bytes, int device))           \
  X(DeviceSynchronize, "hipDeviceSynchronize", hip_error, (void))                           \
  X(ModuleLoadData, "hipModuleLoadData", hip_error, (hip_module * module, const void *image)) \
  X(ModuleUnload, "hipModuleUnload", hip_error, (hip_module module))                        \
  X(ModuleGetFunction, "hipModuleGetFunction", hip_error,                                   \
    (hip_function * fn, hip_module module, const char *name))                               \
  X(ModuleLaunchKernel, "hipModuleLaunchKernel", hip_error,                                 \
    (hip_function fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,      \
     unsigned bz, unsigned shared_bytes, hip_stream stream, void **params, void **extra))   \
  X(Malloc, "hipMalloc", hip_error, (void **ptr, size_t bytes))                             \
  X(Free, "hipFree", hip_error, (void *ptr))                                                \
  X(MemsetD8Async, "hipMemsetD8Async", hip_error,                                           \
    (hip_deviceptr dst, unsigned char value, size_t n, hip_stream stream))                  \
  /* HIP declares src as void *; it is only read */                                         \
  X(MemcpyHtoDAsync, "hipMemcpyHtoDAsync", hip_error,                                       \
    (hip_deviceptr dst, const void *src, size_t bytes, hip_stream stream))                  \
  X(MemcpyDtoHAsync, "hipMemcpyDtoHAsync", hip_error,                                       \
    (void *dst, hip_deviceptr src, size_t bytes, hip_stream stream))                        \
  X(MemcpyDtoDAsync, "hipMemcpyDtoDAsync", hip_error,                                       \
    (hip_deviceptr dst, hip_deviceptr src, size_t bytes, hip_stream stream))                \
  X(StreamCreateWithFlags, "hipStreamCreateWithFlags", hip_error,                           \
    (hip_stream * stream, unsigned flags))                                                  \
  X(StreamSynchronize, "hipStreamSynchronize", hip_error, (hip_stream stream))              \
  X(StreamDestroy, "hipStreamDestroy", hip_error, (hip_stream stream))                    \
  X(StreamWaitEvent, "hipStreamWaitEvent", hip_error,                                       \
    (hip_stream stream, hip_event event, unsigned flags))                                   \
  X(EventCreateWithFlags, "hipEventCreateWithFlags", hip_error,                             \
    (hip_event * event, unsigned flags))                                                    \
  X(EventRecord, "hipEventRecord", hip_error, (hip_event event, hip_stream stream))         \
  X(EventDestroy, "hipEventDestroy", hip_error, (hip_event event))

typedef struct hip_api {
#define HIP_API_FIELD(field, symbol, ret, params) ret(*field) params;
  HIP_API_FUNCTIONS(HIP_API_FIELD)
#undef HIP_API_FIELD
  /* hipGetDeviceProperties in whichever layout the library has (see above) */
  hip_error (*GetDeviceProperties)(void *props, int device);
  unsigned props_arch_offset;
  int runtime_version; /* hipRuntimeGetVersion: 10000000 * major + 100000 * minor + patch */
  char library[64];    /* the file that was opened */
} hip_api;

/* Opens the HIP runtime (libamdhip64) and binds the table, once per process.  On failure
 * (no library, a symbol missing) every call returns UNAVAILABLE with the reason. */
metrale_status hip_api_get(const hip_api **out_api);

/* "hipErrorOutOfMemory (out of memory)" for a hipError_t. */
void hip_error_text(const hip_api *api, hip_error e, char *buf, size_t cap);

/* Converts a failed hipError_t into a status at file:line: "<what>: hipError... (text)",
 * with the code that fits (OUT_OF_MEMORY, NOT_FOUND, UNAVAILABLE, INVALID_ARGUMENT,
 * else INTERNAL). */
metrale_status hip_error_status(const hip_api *api, hip_error e, const char *file, int line,
                                const char *what_fmt, ...) __attribute__((format(printf, 5, 6)));

/* Returns the converted status from the enclosing function when call fails. */
#define HIP_CHECK(api, call, ...)                                              \
  do {                                                                         \
    hip_error hip_e_ = (call);                                                 \
    if (hip_e_ != HIP_API_SUCCESS)                                             \
      return hip_error_status((api), hip_e_, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

#endif
