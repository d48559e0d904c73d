/* Device memory: allocations tracked in a set (so destroy frees what is left and a
 * foreign pointer is never handed to cuMemFree), memset and the three copies. */
#include <stdlib.h>

#include "cuda_backend.h"

/* alloc(0) still gets distinct memory; 256 bytes is the driver's own alignment. */
#define CUDA_MIN_ALLOC 256u

static size_t slot_of(uint64_t p, size_t cap) {
  p ^= p >> 33; /* device pointers are 256-byte aligned: mix the high bits down */
  p *= 0xff51afd7ed558ccdull;
  p ^= p >> 33;
  return (size_t)p & (cap - 1);
}

static int set_insert_nogrow(cuda_alloc_set *set, uint64_t p) {
  for (size_t i = slot_of(p, set->cap);; i = (i + 1) & (set->cap - 1)) {
    if (set->slots[i] == 0) {
      set->slots[i] = p;
      set->used++;
      return 1;
    }
    if (set->slots[i] == 1) { /* reuse a removed slot */
      set->slots[i] = p;
      return 1;
    }
  }
}

static metrale_status set_insert(cuda_alloc_set *set, uint64_t p) {
  if (2 * (set->used + 1) > set->cap) { /* keep at least half the slots empty */
    size_t cap = set->cap ? 2 * set->cap : 64;
    uint64_t *old = set->slots;
    size_t old_cap = set->cap;
    set->slots = calloc(cap, sizeof *set->slots);
    if (!set->slots) {
      set->slots = old;
      return METRALE_ERROR(OUT_OF_MEMORY, "cuda allocation table");
    }
    set->cap = cap;
    set->used = 0;
    for (size_t i = 0; i < old_cap; i++)
      if (old[i] > 1) set_insert_nogrow(set, old[i]);
    free(old);
  }
  set_insert_nogrow(set, p);
  return METRALE_OK;
}

static int set_remove(cuda_alloc_set *set, uint64_t p) {
  if (!set->cap) return 0;
  for (size_t i = slot_of(p, set->cap);; i = (i + 1) & (set->cap - 1)) {
    if (set->slots[i] == 0) return 0;
    if (set->slots[i] == p) {
      set->slots[i] = 1;
      return 1;
    }
  }
}

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
  metrale_status s = set_insert(&be->allocs, p);
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
  int ours = set_remove(&be->allocs, ptr);
  pthread_mutex_unlock(&be->lock);
  if (!ours) return; /* not from alloc (or freed twice): not ours to release */
  /* Kernels still queued on any stream may use the memory: let them finish first. */
  be->drv->CtxSynchronize();
  be->drv->MemFree(ptr);
}

void cuda_free_all(cuda_backend *be) {
  for (size_t i = 0; i < be->allocs.cap; i++) {
    if (be->allocs.slots[i] > 1) be->drv->MemFree(be->allocs.slots[i]);
    be->allocs.slots[i] = 0;
  }
  be->allocs.used = 0;
}

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
