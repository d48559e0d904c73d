/* The HIP backend object and the internal interfaces between its files:
 *   hip_api.c       libamdhip64 symbol table, hipError_t -> metrale_status
 *   hip_device.c    create/destroy, device attributes, streams, sync
 *   hip_memory.c    allocations (tracked, so destroy frees them) and copies
 *   hip_kernels.c   lazily loaded modules, kernel handles, launch
 *   (launch shape rules: kernels/cuda/launch_rules.c, shared with the other backend)
 *   hip_module.c    the plugin entry point and describe()
 *
 * Streams: a NULL gpu_stream means the backend's own stream, created non-blocking at
 * init; HIP's legacy NULL stream is never used.  HIP's current device is per thread, so
 * every entry point selects the backend's device first and a backend may be used from
 * any thread. */
#ifndef METRALE_HIP_BACKEND_H
#define METRALE_HIP_BACKEND_H

#include <pthread.h>
#include <stdint.h>

#include "hip_api.h"
#include "metrale/addr_set.h"
#include "metrale/gpu_backend.h"
#include "metrale/manifest.h"

/* What a gpu_kernel handle points to. */
typedef struct hip_kernel {
  hip_function fn;
  const metrale_kernel_info *info;
} hip_kernel;

/* Device pointers this backend handed out: an open-addressing set (0 = empty slot,
 * 1 = removed), so free() can ignore foreign pointers and destroy() can free the rest. */
typedef struct hip_backend {
  gpu_backend base; /* first: the vtable hands us gpu_backend * */
  const hip_api *api;
  int device;
  int device_selected; /* hipSetDevice succeeded once: teardown may talk to the device */
  char target[32];     /* "gfx90a": the code-object target the device loads */
  hip_stream stream;
  uint32_t max_grid[3];
  uint32_t max_shared;

  pthread_mutex_t lock; /* modules, kernels, allocations, streams */
  hip_module *modules;  /* [hip_image_count], loaded on first use */
  hip_error *module_error; /* [hip_image_count], the load failure, or 0 */
  hip_kernel *kernels[METRALE_K_COUNT];
  metrale_addr_set allocs; /* what alloc handed out */
  hip_stream *streams; /* created by stream_create and not destroyed yet */
  size_t nstreams, streams_cap;
} hip_backend;

static inline hip_backend *hip_of(gpu_backend *be) { return (hip_backend *)be; }

/* Makes the backend's device current on this thread (cheap; done by every entry). */
metrale_status hip_bind(hip_backend *be);
/* The hipStream_t for a gpu_stream (NULL = the backend's stream). */
static inline hip_stream hip_stream_of(hip_backend *be, gpu_stream s) {
  return s ? (hip_stream)(void *)s : be->stream;
}

/* hip_memory.c */
metrale_status hip_alloc(gpu_backend *be, uint64_t bytes, gpu_ptr *out_ptr);
void hip_free(gpu_backend *be, gpu_ptr ptr);
metrale_status hip_memset(gpu_backend *be, gpu_ptr dst, uint8_t value, uint64_t bytes,
                          gpu_stream stream);
metrale_status hip_copy_h2d(gpu_backend *be, gpu_ptr dst, const void *src, uint64_t bytes,
                            gpu_stream stream);
metrale_status hip_copy_d2h(gpu_backend *be, void *dst, gpu_ptr src, uint64_t bytes,
                            gpu_stream stream);
metrale_status hip_copy_d2d(gpu_backend *be, gpu_ptr dst, gpu_ptr src, uint64_t bytes,
                            gpu_stream stream);
/* Frees every allocation still live (destroy). */
void hip_free_all(hip_backend *be);

/* hip_kernels.c */
metrale_status hip_kernel_lookup(gpu_backend *be, const char *module, const char *name,
                                 gpu_kernel *out_kernel);
metrale_status hip_launch(gpu_backend *be, gpu_kernel kernel, gpu_dim3 grid, gpu_dim3 block,
                          uint32_t shared_bytes, gpu_stream stream, const gpu_arg *args,
                          uint32_t nargs);
/* Unloads modules and frees kernel handles (destroy). */
void hip_kernels_release(hip_backend *be);
/* 1 when the module carries code objects for this target ("gfx90a"). */
int hip_target_built(const char *target);
/* "gfx90a gfx940 gfx1030" */
void hip_built_targets(char *buf, size_t cap);


/* hip_device.c */
metrale_status hip_create(const gpu_backend_options *options, gpu_backend **out_backend);

#endif
