/* Device memory: allocations tracked in a set (so destroy frees what is left and a
 * foreign pointer is never handed to hipFree), memset and the three copies. */
#include <stdlib.h>

#include "hip_backend.h"
#include "metrale/addr_set.h"

/* alloc(0) still gets distinct memory; 256 bytes keeps every allocation 256-aligned. */
#define HIP_MIN_ALLOC 256u

static hip_deviceptr dptr(gpu_ptr p) { return (hip_deviceptr)(uintptr_t)p; }

metrale_status hip_alloc(gpu_backend *base, uint64_t bytes, gpu_ptr *out_ptr) {
  hip_backend *be = hip_of(base);
  METRALE_RETURN_IF_ERROR(hip_bind(be));
#if SIZE_MAX < UINT64_MAX
  if (bytes > SIZE_MAX)
    return METRALE_ERROR(OUT_OF_MEMORY, "hip allocation of %llu bytes", (unsigned long long)bytes);
#endif
  size_t n = bytes < HIP_MIN_ALLOC ? HIP_MIN_ALLOC : (size_t)bytes;
  void *p = NULL;
  hip_error e = be->api->Malloc(&p, n);
  if (e != HIP_API_SUCCESS)
    return hip_error_status(be->api, e, __FILE__, __LINE__, "hipMalloc(%zu bytes) on %s", n,
                            be->base.caps.device_name);
  pthread_mutex_lock(&be->lock);
  metrale_status s = metrale_addr_set_insert(&be->allocs, (uint64_t)(uintptr_t)p);
  pthread_mutex_unlock(&be->lock);
  if (s) {
    be->api->Free(p);
    return s;
  }
  *out_ptr = (gpu_ptr)(uintptr_t)p;
  return METRALE_OK;
}

void hip_free(gpu_backend *base, gpu_ptr ptr) {
  hip_backend *be = hip_of(base);
  if (!ptr) return;
  metrale_status s = hip_bind(be);
  if (s) {
    metrale_status_free(s);
    return;
  }
  pthread_mutex_lock(&be->lock);
  int ours = metrale_addr_set_remove(&be->allocs, ptr);
  pthread_mutex_unlock(&be->lock);
  if (!ours) return; /* not from alloc (or freed twice): not ours to release */
  /* Kernels still queued on any stream may use the memory: let them finish first. */
  be->api->DeviceSynchronize();
  be->api->Free(dptr(ptr));
}

static void free_one(void *ctx, uint64_t p) { ((hip_backend *)ctx)->api->Free(dptr(p)); }

void hip_free_all(hip_backend *be) { metrale_addr_set_drain(&be->allocs, free_one, be); }

metrale_status hip_memset(gpu_backend *base, gpu_ptr dst, uint8_t value, uint64_t bytes,
                          gpu_stream stream) {
  hip_backend *be = hip_of(base);
  if (bytes == 0) return METRALE_OK;
  METRALE_RETURN_IF_ERROR(hip_bind(be));
  HIP_CHECK(be->api, be->api->MemsetD8Async(dptr(dst), value, (size_t)bytes, hip_stream_of(be, stream)),
            "hipMemsetD8Async(0x%llx, %u, %llu bytes)", (unsigned long long)dst, value,
            (unsigned long long)bytes);
  return METRALE_OK;
}

metrale_status hip_copy_h2d(gpu_backend *base, gpu_ptr dst, const void *src, uint64_t bytes,
                            gpu_stream stream) {
  hip_backend *be = hip_of(base);
  if (bytes == 0) return METRALE_OK;
  METRALE_RETURN_IF_ERROR(hip_bind(be));
  HIP_CHECK(be->api, be->api->MemcpyHtoDAsync(dptr(dst), src, (size_t)bytes, hip_stream_of(be, stream)),
            "hipMemcpyHtoDAsync(0x%llx, %llu bytes)", (unsigned long long)dst,
            (unsigned long long)bytes);
  return METRALE_OK;
}

metrale_status hip_copy_d2h(gpu_backend *base, void *dst, gpu_ptr src, uint64_t bytes,
                            gpu_stream stream) {
  hip_backend *be = hip_of(base);
  if (bytes == 0) return METRALE_OK;
  METRALE_RETURN_IF_ERROR(hip_bind(be));
  HIP_CHECK(be->api, be->api->MemcpyDtoHAsync(dst, dptr(src), (size_t)bytes, hip_stream_of(be, stream)),
            "hipMemcpyDtoHAsync(0x%llx, %llu bytes)", (unsigned long long)src,
            (unsigned long long)bytes);
  return METRALE_OK;
}

metrale_status hip_copy_d2d(gpu_backend *base, gpu_ptr dst, gpu_ptr src, uint64_t bytes,
                            gpu_stream stream) {
  hip_backend *be = hip_of(base);
  if (bytes == 0) return METRALE_OK;
  METRALE_RETURN_IF_ERROR(hip_bind(be));
  HIP_CHECK(be->api, be->api->MemcpyDtoDAsync(dptr(dst), dptr(src), (size_t)bytes, hip_stream_of(be, stream)),
            "hipMemcpyDtoDAsync(0x%llx <- 0x%llx, %llu bytes)", (unsigned long long)dst,
            (unsigned long long)src, (unsigned long long)bytes);
  return METRALE_OK;
}
