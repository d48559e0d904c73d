/* Device memory: allocations tracked in a set (so destroy frees what is left and a
 * foreign pointer is never handed to cuMemFree), memset and the three copies. */
#include <stdlib.h>

#include "cuda_backend.h"
#include "metrale/addr_set.h"

/* alloc(0) still gets distinct memory; 256 bytes is the driver's own alignment. */
#define CUDA_MIN_ALLOC 256u

metrale_status cuda_alloc(gpu_backend *base, uint64_t bytes, gpu_ptr *out_ptr) {
  cuda_backend *be = cuda_of(base);
  METRALE_RETURN_IF_ERROR(cuda_bind(be));
#if SIZE_MAX < UINT64_MAX
  if (bytes > SIZE_MAX)
    return METRALE_ERROR(OUT_OF_MEMORY, "cuda allocation of %llu bytes", (unsigned long long)bytes);
#endif
  size_t n = bytes < CUDA_MIN_ALLOC ? CUDA_MIN_ALLOC : (size_t)bytes;
  cuda_deviceptr p = 0;
  cuda_result r = be->drv->MemAlloc(&p, n);
  if (r != CUDA_DRV_SUCCESS)
    return cuda_error(be->drv, r, __FILE__, __LINE__, "cuMemAlloc(%zu bytes) on %s", n,
                      be->base.caps.device_name);
  pthread_mutex_lock(&be->lock);
  metrale_status s = metrale_addr_set_insert(&be->allocs, p);
  pthread_mutex_unlock(&be->lock);
  if (s) {
    be->drv->MemFree(p);
    return s;
  }
  *out_ptr = p;
  return METRALE_OK;
}

void cuda_free(gpu_backend *base, gpu_ptr ptr) {
  cuda_backend *be = cuda_of(base);
  if (!ptr) return;
  metrale_status s = cuda_bind(be);
  if (s) {
    metrale_status_free(s);
    return;
  }
  pthread_mutex_lock(&be->lock);
  int ours = metrale_addr_set_remove(&be->allocs, ptr);
  pthread_mutex_unlock(&be->lock);
  if (!ours) return; /* not from alloc (or freed twice): not ours to release */
  /* Kernels still queued on any stream may use the memory: let them finish first. */
  be->drv->CtxSynchronize();
  be->drv->MemFree(ptr);
}

static void free_one(void *ctx, uint64_t p) { ((cuda_backend *)ctx)->drv->MemFree(p); }

void cuda_free_all(cuda_backend *be) { metrale_addr_set_drain(&be->allocs, free_one, be); }

metrale_status cuda_memset(gpu_backend *base, gpu_ptr dst, uint8_t value, uint64_t bytes,
                           gpu_stream stream) {
  cuda_backend *be = cuda_of(base);
  if (bytes == 0) return METRALE_OK;
  METRALE_RETURN_IF_ERROR(cuda_bind(be));
  CUDA_CHECK(be->drv, be->drv->MemsetD8Async(dst, value, (size_t)bytes, cuda_stream_of(be, stream)),
             "cuMemsetD8Async(0x%llx, %u, %llu bytes)", (unsigned long long)dst, value,
             (unsigned long long)bytes);
  return METRALE_OK;
}

metrale_status cuda_copy_h2d(gpu_backend *base, gpu_ptr dst, const void *src, uint64_t bytes,
                             gpu_stream stream) {
  cuda_backend *be = cuda_of(base);
  if (bytes == 0) return METRALE_OK;
  METRALE_RETURN_IF_ERROR(cuda_bind(be));
  CUDA_CHECK(be->drv, be->drv->MemcpyHtoDAsync(dst, src, (size_t)bytes, cuda_stream_of(be, stream)),
             "cuMemcpyHtoDAsync(0x%llx, %llu bytes)", (unsigned long long)dst,
             (unsigned long long)bytes);
  return METRALE_OK;
}

metrale_status cuda_copy_d2h(gpu_backend *base, void *dst, gpu_ptr src, uint64_t bytes,
                             gpu_stream stream) {
  cuda_backend *be = cuda_of(base);
  if (bytes == 0) return METRALE_OK;
  METRALE_RETURN_IF_ERROR(cuda_bind(be));
  CUDA_CHECK(be->drv, be->drv->MemcpyDtoHAsync(dst, src, (size_t)bytes, cuda_stream_of(be, stream)),
             "cuMemcpyDtoHAsync(0x%llx, %llu bytes)", (unsigned long long)src,
             (unsigned long long)bytes);
  return METRALE_OK;
}

metrale_status cuda_copy_d2d(gpu_backend *base, gpu_ptr dst, gpu_ptr src, uint64_t bytes,
                             gpu_stream stream) {
  cuda_backend *be = cuda_of(base);
  if (bytes == 0) return METRALE_OK;
  METRALE_RETURN_IF_ERROR(cuda_bind(be));
  CUDA_CHECK(be->drv, be->drv->MemcpyDtoDAsync(dst, src, (size_t)bytes, cuda_stream_of(be, stream)),
             "cuMemcpyDtoDAsync(0x%llx <- 0x%llx, %llu bytes)", (unsigned long long)dst,
             (unsigned long long)src, (unsigned long long)bytes);
  return METRALE_OK;
}
