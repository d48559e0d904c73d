/* Device memory: allocations tracked in a set (so destroy frees what is left and a
 * foreign pointer is never handed to hipFree), memset and the three copies. */
#include <stdlib.h>

#include "hip_backend.h"

/* alloc(0) still gets distinct memory; 256 bytes keeps every allocation 256-aligned. */
#define HIP_MIN_ALLOC 256u

static size_t slot_of(uint64_t p, size_t cap) {
  p ^= p >> 33; /* device pointers are aligned: mix the high bits down */
  p *= 0xff51afd7ed558ccdull;
  p ^= p >> 33;
  return (size_t)p & (cap - 1);
}

static void set_put(hip_alloc_set *set, uint64_t p) {
  for (size_t i = slot_of(p, set->cap);; i = (i + 1) & (set->cap - 1)) {
    if (set->slots[i] == 0) {
      set->slots[i] = p;
      set->used++;
      return;
    }
    if (set->slots[i] == 1) { /* reuse a removed slot */
      set->slots[i] = p;
      return;
    }
  }
}

static metrale_status set_insert(hip_alloc_set *set, uint64_t p) {
  if (2 * (set->used + 1) > set->cap) { /* keep at least half the slots empty */
    size_t cap = set->cap ? 2 * set->cap : 64;
    uint64_t *grown = calloc(cap, sizeof *grown);
    if (!grown) return METRALE_ERROR(OUT_OF_MEMORY, "hip allocation table");
    uint64_t *old = set->slots;
    size_t old_cap = set->cap;
    set->slots = grown;
    set->cap = cap;
    set->used = 0;
    for (size_t i = 0; i < old_cap; i++)
      if (old[i] > 1) set_put(set, old[i]);
    free(old);
  }
  set_put(set, p);
  return METRALE_OK;
}

static int set_remove(hip_alloc_set *set, uint64_t p) {
  if (!set->cap) return 0;
  for (size_t i = slot_of(p, set->cap);; i = (i + 1) & (set->cap - 1)) {
    if (set->slots[i] == 0) return 0;
    if (set->slots[i] == p) {
      set->slots[i] = 1;
      return 1;
    }
  }
}

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
  metrale_status s = set_insert(&be->allocs, (uint64_t)(uintptr_t)p);
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
  int ours = set_remove(&be->allocs, ptr);
  pthread_mutex_unlock(&be->lock);
  if (!ours) return; /* not from alloc (or freed twice): not ours to release */
  /* Kernels still queued on any stream may use the memory: let them finish first. */
  be->api->DeviceSynchronize();
  be->api->Free(dptr(ptr));
}

void hip_free_all(hip_backend *be) {
  for (size_t i = 0; i < be->allocs.cap; i++) {
    if (be->allocs.slots[i] > 1) be->api->Free(dptr(be->allocs.slots[i]));
    be->allocs.slots[i] = 0;
  }
  be->allocs.used = 0;
}

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
