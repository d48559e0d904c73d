/* The CUDA backend object and the internal interfaces between its files:
 *   cuda_driver.c   libcuda symbol table, CUresult -> metrale_status
 *   cuda_device.c   create/destroy, capabilities, streams, sync
 *   cuda_memory.c   allocations (tracked, so destroy frees them) and copies
 *   cuda_kernels.c  lazily loaded modules, kernel handles, launch
 *   (launch shape rules: kernels/cuda/launch_rules.c, shared with the other backend)
 *   cuda_module.c   the plugin entry point and describe()
 *
 * Streams: a NULL gpu_stream means the backend's own stream, created non-blocking at
 * init; the legacy NULL stream of CUDA is never used, so work of this backend neither
 * waits for nor blocks other CUDA users in the process.  Every entry point makes the
 * device's primary context current on the calling thread first, so a backend may be
 * used from any thread. */
#ifndef METRALE_CUDA_BACKEND_H
#define METRALE_CUDA_BACKEND_H

#include <pthread.h>
#include <stdint.h>

#include "cuda_driver.h"
#include "metrale/addr_set.h"
#include "metrale/gpu_backend.h"
#include "metrale/manifest.h"

/* What a gpu_kernel handle points to. */
typedef struct cuda_kernel {
  cuda_function fn;
  const metrale_kernel_info *info;
  uint32_t dynamic_shared; /* the dynamic shared memory limit set on fn so far */
} cuda_kernel;

/* Device pointers this backend handed out: an open-addressing set (0 = empty slot,
 * 1 = removed), so free() can ignore foreign pointers and destroy() can free the rest. */
typedef struct cuda_backend {
  gpu_backend base; /* first: the vtable hands us gpu_backend * */
  const cuda_driver *drv;
  cuda_device dev;
  cuda_context ctx; /* the device's primary context, retained */
  cuda_stream stream;
  uint32_t max_grid[3];
  uint32_t max_shared_optin;

  pthread_mutex_t lock; /* modules, kernels, allocations, streams */
  cuda_module *modules; /* [cuda_image_count], loaded on first use */
  cuda_result *module_error; /* [cuda_image_count], the load failure, or 0 */
  unsigned char *module_tma_failed; /* [cuda_image_count], 1: the failure was the TMA templates' */
  cuda_kernel *kernels[METRALE_K_COUNT];
  metrale_addr_set allocs; /* what alloc handed out */
  cuda_stream *streams; /* created by stream_create and not destroyed yet */
  size_t nstreams, streams_cap;
} cuda_backend;

static inline cuda_backend *cuda_of(gpu_backend *be) { return (cuda_backend *)be; }

/* Makes the backend's context current on this thread (cheap; done by every entry). */
metrale_status cuda_bind(cuda_backend *be);
/* The CUstream for a gpu_stream (NULL = the backend's stream). */
static inline cuda_stream cuda_stream_of(cuda_backend *be, gpu_stream s) {
  return s ? (cuda_stream)(void *)s : be->stream;
}

/* cuda_memory.c */
metrale_status cuda_alloc(gpu_backend *be, uint64_t bytes, gpu_ptr *out_ptr);
void cuda_free(gpu_backend *be, gpu_ptr ptr);
metrale_status cuda_memset(gpu_backend *be, gpu_ptr dst, uint8_t value, uint64_t bytes,
                           gpu_stream stream);
metrale_status cuda_copy_h2d(gpu_backend *be, gpu_ptr dst, const void *src, uint64_t bytes,
                             gpu_stream stream);
metrale_status cuda_copy_d2h(gpu_backend *be, void *dst, gpu_ptr src, uint64_t bytes,
                             gpu_stream stream);
metrale_status cuda_copy_d2d(gpu_backend *be, gpu_ptr dst, gpu_ptr src, uint64_t bytes,
                             gpu_stream stream);
/* Frees every allocation still live (destroy). */
void cuda_free_all(cuda_backend *be);

/* cuda_kernels.c */
metrale_status cuda_kernel_lookup(gpu_backend *be, const char *module, const char *name,
                                  gpu_kernel *out_kernel);
metrale_status cuda_launch(gpu_backend *be, gpu_kernel kernel, gpu_dim3 grid, gpu_dim3 block,
                           uint32_t shared_bytes, gpu_stream stream, const gpu_arg *args,
                           uint32_t nargs);
/* Unloads modules and frees kernel handles (destroy). */
void cuda_kernels_release(cuda_backend *be);
/* The target whose image the driver loads on a device of this compute capability. */
const char *cuda_target_for(uint32_t cc_major, uint32_t cc_minor);


/* cuda_graph.c: the vtable's graph entries */
metrale_status cuda_graph_begin(gpu_backend *be, gpu_stream stream);
metrale_status cuda_graph_end(gpu_backend *be, gpu_stream stream, gpu_graph *out_graph);
metrale_status cuda_graph_launch(gpu_backend *be, gpu_graph graph, gpu_stream stream);
void cuda_graph_destroy(gpu_backend *be, gpu_graph graph);

/* cuda_device.c */
metrale_status cuda_create(const gpu_backend_options *options, gpu_backend **out_backend);

#endif
