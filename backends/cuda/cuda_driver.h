/* The slice of the CUDA driver API this backend uses, opened with dlopen.
 *
 * The types and constants are declared here rather than taken from cuda.h so that the
 * host side compiles (and the module loads and reports "unavailable") on a machine
 * without the CUDA toolkit headers; the prefixes keep them from clashing with cuda.h,
 * and cuda_abi_check.c compares every value with cuda.h wherever the toolkit is
 * present.  Functions are bound by the versioned names cuda.h maps its API to
 * (cuMemAlloc -> cuMemAlloc_v2, ...), the ABI every driver since CUDA 4 exports. */
#ifndef METRALE_CUDA_DRIVER_H
#define METRALE_CUDA_DRIVER_H

#include <stddef.h>

#include "metrale/status.h"

typedef int cuda_result;                   /* CUresult */
typedef int cuda_device;                   /* CUdevice */
typedef unsigned long long cuda_deviceptr; /* CUdeviceptr (64-bit) */
typedef struct CUctx_st *cuda_context;     /* the same opaque tags as cuda.h */
typedef struct CUmod_st *cuda_module;
typedef struct CUfunc_st *cuda_function;
typedef struct CUstream_st *cuda_stream;
typedef struct CUgraph_st *cuda_graph;
typedef struct CUgraphExec_st *cuda_graph_exec;
typedef struct CUevent_st *cuda_event;

enum {
  CUDA_DRV_SUCCESS = 0,
  CUDA_DRV_ERROR_INVALID_VALUE = 1,
  CUDA_DRV_ERROR_OUT_OF_MEMORY = 2,
  CUDA_DRV_ERROR_NOT_INITIALIZED = 3,
  CUDA_DRV_ERROR_STUB_LIBRARY = 34,
  CUDA_DRV_ERROR_DEVICE_UNAVAILABLE = 46,
  CUDA_DRV_ERROR_NO_DEVICE = 100,
  CUDA_DRV_ERROR_INVALID_DEVICE = 101,
  CUDA_DRV_ERROR_NO_BINARY_FOR_GPU = 209,
  CUDA_DRV_ERROR_UNSUPPORTED_PTX_VERSION = 222,
  CUDA_DRV_ERROR_NOT_FOUND = 500,
  CUDA_DRV_ERROR_SYSTEM_DRIVER_MISMATCH = 803,
  CUDA_DRV_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804,
};

enum { /* CUdevice_attribute */
  CUDA_DRV_ATTR_MAX_THREADS_PER_BLOCK = 1,
  CUDA_DRV_ATTR_MAX_GRID_DIM_X = 5,
  CUDA_DRV_ATTR_MAX_GRID_DIM_Y = 6,
  CUDA_DRV_ATTR_MAX_GRID_DIM_Z = 7,
  CUDA_DRV_ATTR_WARP_SIZE = 10,
  CUDA_DRV_ATTR_MULTIPROCESSOR_COUNT = 16,
  CUDA_DRV_ATTR_UNIFIED_ADDRESSING = 41,
  CUDA_DRV_ATTR_COMPUTE_CAPABILITY_MAJOR = 75,
  CUDA_DRV_ATTR_COMPUTE_CAPABILITY_MINOR = 76,
  CUDA_DRV_ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
};

enum { CUDA_DRV_STREAM_NON_BLOCKING = 1 };                  /* CUstream_flags */
enum { CUDA_DRV_EVENT_DISABLE_TIMING = 2 };                 /* CUevent_flags */
enum { CUDA_DRV_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1 };     /* CUstreamCaptureMode */
enum { CUDA_DRV_LAUNCH_ATTR_PROGRAMMATIC_STREAM_SERIALIZATION = 6 }; /* CUlaunchAttributeID */

/* CUlaunchAttribute: an id, then a 64-byte value union (8-byte aligned). */
typedef struct cuda_launch_attr {
  int id;
  char pad[4];
  union {
    unsigned long long align_;
    char bytes[64];
    int programmatic_serialization; /* CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION */
  } value;
} cuda_launch_attr;

/* CUlaunchConfig */
typedef struct cuda_launch_config {
  unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
  cuda_stream stream;
  cuda_launch_attr *attrs;
  unsigned num_attrs;
} cuda_launch_config;
enum { CUDA_DRV_FUNC_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8 }; /* CUfunction_attribute */

/* CUtensorMap (128 bytes, 64-byte aligned) and the cuTensorMapEncodeTiled values the
 * backend uses (TMA templates: kernels/cuda/tma_templates.h). */
typedef struct cuda_tensor_map {
  _Alignas(64) unsigned long long opaque[16];
} cuda_tensor_map;
enum { CUDA_DRV_TMAP_FLOAT32 = 7, CUDA_DRV_TMAP_BFLOAT16 = 9 };             /* CUtensorMapDataType */
enum { CUDA_DRV_TMAP_INTERLEAVE_NONE = 0 };                               /* CUtensorMapInterleave */
enum { CUDA_DRV_TMAP_SWIZZLE_64B = 2, CUDA_DRV_TMAP_SWIZZLE_128B = 3 };    /* CUtensorMapSwizzle */
enum { CUDA_DRV_TMAP_L2_PROMOTION_128B = 2 };                             /* CUtensorMapL2promotion */
enum { CUDA_DRV_TMAP_OOB_FILL_ZERO = 0 };                                 /* CUtensorMapFloatOOBfill */

/* X(field, symbol, parameters): one row per driver entry point. */
#define CUDA_DRIVER_FUNCTIONS(X)                                                          \
  X(Init, "cuInit", (unsigned flags))                                                     \
  X(DriverGetVersion, "cuDriverGetVersion", (int *version))                              \
  X(GetErrorName, "cuGetErrorName", (cuda_result error, const char **str))                \
  X(GetErrorString, "cuGetErrorString", (cuda_result error, const char **str))            \
  X(DeviceGetCount, "cuDeviceGetCount", (int *count))                                     \
  X(DeviceGet, "cuDeviceGet", (cuda_device * device, int ordinal))                        \
  X(DeviceGetName, "cuDeviceGetName", (char *name, int len, cuda_device dev))             \
  X(DeviceGetAttribute, "cuDeviceGetAttribute", (int *value, int attrib, cuda_device dev)) \
  X(DeviceTotalMem, "cuDeviceTotalMem_v2", (size_t * bytes, cuda_device dev))             \
  X(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (cuda_context * ctx, cuda_device dev)) \
  X(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", (cuda_device dev))           \
  X(CtxSetCurrent, "cuCtxSetCurrent", (cuda_context ctx))                                 \
  X(CtxSynchronize, "cuCtxSynchronize", (void))                                           \
  X(ModuleLoadData, "cuModuleLoadData", (cuda_module * module, const void *image))        \
  X(ModuleUnload, "cuModuleUnload", (cuda_module module))                                 \
  X(ModuleGetFunction, "cuModuleGetFunction",                                             \
    (cuda_function * fn, cuda_module module, const char *name))                           \
  X(FuncSetAttribute, "cuFuncSetAttribute", (cuda_function fn, int attrib, int value))    \
  X(ModuleGetGlobal, "cuModuleGetGlobal_v2",                                              \
    (cuda_deviceptr * ptr, size_t * bytes, cuda_module module, const char *name))         \
  X(TensorMapEncodeTiled, "cuTensorMapEncodeTiled",                                       \
    (cuda_tensor_map * map, int dtype, unsigned rank, void *address,                      \
     const unsigned long long *dims, const unsigned long long *strides,                   \
     const unsigned *box, const unsigned *element_strides, int interleave, int swizzle,   \
     int l2_promotion, int oob_fill))                                                     \
  X(LaunchKernelEx, "cuLaunchKernelEx",                                                   \
    (const cuda_launch_config *config, cuda_function fn, void **params, void **extra))    \
  X(MemAlloc, "cuMemAlloc_v2", (cuda_deviceptr * ptr, size_t bytes))                      \
  X(MemFree, "cuMemFree_v2", (cuda_deviceptr ptr))                                        \
  X(MemsetD8Async, "cuMemsetD8Async",                                                     \
    (cuda_deviceptr dst, unsigned char value, size_t n, cuda_stream stream))              \
  X(MemcpyHtoD, "cuMemcpyHtoD_v2", (cuda_deviceptr dst, const void *src, size_t bytes))  \
  X(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2",                                              \
    (cuda_deviceptr dst, const void *src, size_t bytes, cuda_stream stream))              \
  X(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2",                                              \
    (void *dst, cuda_deviceptr src, size_t bytes, cuda_stream stream))                    \
  X(MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2",                                              \
    (cuda_deviceptr dst, cuda_deviceptr src, size_t bytes, cuda_stream stream))           \
  X(StreamCreate, "cuStreamCreate", (cuda_stream * stream, unsigned flags))               \
  X(StreamSynchronize, "cuStreamSynchronize", (cuda_stream stream))                       \
  X(StreamDestroy, "cuStreamDestroy_v2", (cuda_stream stream))                           \
  X(StreamWaitEvent, "cuStreamWaitEvent", (cuda_stream stream, cuda_event event, unsigned flags)) \
  X(EventCreate, "cuEventCreate", (cuda_event * event, unsigned flags))                   \
  X(EventRecord, "cuEventRecord", (cuda_event event, cuda_stream stream))                 \
  X(EventDestroy, "cuEventDestroy_v2", (cuda_event event))                                \
  X(StreamBeginCapture, "cuStreamBeginCapture_v2", (cuda_stream stream, int mode))        \
  X(StreamEndCapture, "cuStreamEndCapture", (cuda_stream stream, cuda_graph * graph))     \
  X(GraphInstantiate, "cuGraphInstantiateWithFlags",                                      \
    (cuda_graph_exec * exec, cuda_graph graph, unsigned long long flags))                 \
  X(GraphLaunch, "cuGraphLaunch", (cuda_graph_exec exec, cuda_stream stream))             \
  X(GraphExecDestroy, "cuGraphExecDestroy", (cuda_graph_exec exec))                       \
  X(GraphDestroy, "cuGraphDestroy", (cuda_graph graph))

typedef struct cuda_driver {
#define CUDA_DRIVER_FIELD(field, symbol, params) cuda_result(*field) params;
  CUDA_DRIVER_FUNCTIONS(CUDA_DRIVER_FIELD)
#undef CUDA_DRIVER_FIELD
  int version; /* cuDriverGetVersion: 1000 * major + 10 * minor */
} cuda_driver;

/* Opens libcuda.so.1, binds the table and runs cuInit, once per process.  On failure
 * (no library, a symbol missing, cuInit failing) every call returns UNAVAILABLE with
 * the reason. */
metrale_status cuda_driver_get(const cuda_driver **out_driver);

/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for a CUresult. */
void cuda_result_text(const cuda_driver *drv, cuda_result r, char *buf, size_t cap);

/* Converts a failed CUresult into a status at file:line: "<what>: CUDA_ERROR_... (text)",
 * with the code that fits (OUT_OF_MEMORY, NOT_FOUND, UNAVAILABLE, INVALID_ARGUMENT,
 * else INTERNAL). */
metrale_status cuda_error(const cuda_driver *drv, cuda_result r, const char *file, int line,
                          const char *what_fmt, ...) __attribute__((format(printf, 5, 6)));

/* Returns the converted status from the enclosing function when call fails. */
#define CUDA_CHECK(drv, call, ...)                                                 \
  do {                                                                             \
    cuda_result cuda_r_ = (call);                                                  \
    if (cuda_r_ != CUDA_DRV_SUCCESS)                                               \
      return cuda_error((drv), cuda_r_, __FILE__, __LINE__, __VA_ARGS__);          \
  } while (0)

#endif
