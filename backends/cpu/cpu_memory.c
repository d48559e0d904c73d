/* Host memory of the CPU backend.
 *
 * Each allocation is preceded by a 64-byte header linking it into the backend's list,
 * which keeps the user pointer 64-byte aligned and lets destroy free leftovers.  Every
 * operation runs to completion before returning, so streams are mere tokens. */
#include "cpu_memory.h"

#include <stdlib.h>
#include <string.h>

#define CPU_ALIGN 64

struct cpu_block {
  cpu_block *prev, *next;
  uint64_t bytes;
};
_Static_assert(sizeof(cpu_block) <= CPU_ALIGN, "allocation header must fit its slot");

struct gpu_stream_s {
  int unused; /* streams only need a distinct address */
};

void cpu_heap_init(cpu_heap *heap) {
  pthread_mutex_init(&heap->lock, NULL);
  heap->head = NULL;
}

void cpu_heap_release(cpu_heap *heap) {
  cpu_block *b = heap->head;
  while (b) {
    cpu_block *next = b->next;
    free(b);
    b = next;
  }
  heap->head = NULL;
  pthread_mutex_destroy(&heap->lock);
}

static void *addr(gpu_ptr p) { return (void *)(uintptr_t)p; }

/* Large copies are split over the OpenMP threads: one core alone cannot draw the
 * machine's memory bandwidth, and a device copy should. */
#define PARALLEL_BYTES (8u << 20)
#define CHUNK_BYTES (1u << 20)

static void copy_bytes(void *dst, const void *src, size_t bytes) {
  const char *s = src;
  char *d = dst;
  int overlap = d < s + bytes && s < d + bytes;
  if (bytes < PARALLEL_BYTES || overlap) {
    memmove(d, s, bytes);
    return;
  }
  int64_t chunks = (int64_t)((bytes + CHUNK_BYTES - 1) / CHUNK_BYTES);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; c++) {
    size_t off = (size_t)c * CHUNK_BYTES;
    memcpy(d + off, s + off, bytes - off < CHUNK_BYTES ? bytes - off : CHUNK_BYTES);
  }
}

static void set_bytes(void *dst, uint8_t value, size_t bytes) {
  char *d = dst;
  if (bytes < PARALLEL_BYTES) {
    memset(d, value, bytes);
    return;
  }
  int64_t chunks = (int64_t)((bytes + CHUNK_BYTES - 1) / CHUNK_BYTES);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; c++) {
    size_t off = (size_t)c * CHUNK_BYTES;
    memset(d + off, value, bytes - off < CHUNK_BYTES ? bytes - off : CHUNK_BYTES);
  }
}

metrale_status cpu_alloc(gpu_backend *be, uint64_t bytes, gpu_ptr *out_ptr) {
  if (bytes > (uint64_t)SIZE_MAX - 2 * CPU_ALIGN)
    return METRALE_ERROR(OUT_OF_MEMORY, "cannot allocate %llu bytes of host memory",
                         (unsigned long long)bytes);
  uint64_t ram = be->caps.memory_bytes;
  if (ram && bytes > ram)
    return METRALE_ERROR(OUT_OF_MEMORY,
                         "cannot allocate %llu bytes: more than the machine's %llu bytes of memory",
                         (unsigned long long)bytes, (unsigned long long)ram);
  size_t total = CPU_ALIGN + (((size_t)bytes + CPU_ALIGN - 1) / CPU_ALIGN) * CPU_ALIGN;
  cpu_block *b = aligned_alloc(CPU_ALIGN, total); /* 0 bytes still gets a unique header */
  if (!b)
    return METRALE_ERROR(OUT_OF_MEMORY, "cannot allocate %llu bytes of host memory",
                         (unsigned long long)bytes);
  b->bytes = bytes;
  b->prev = NULL;
  cpu_heap *heap = cpu_backend_heap(be);
  pthread_mutex_lock(&heap->lock);
  b->next = heap->head;
  if (heap->head) heap->head->prev = b;
  heap->head = b;
  pthread_mutex_unlock(&heap->lock);
  *out_ptr = (gpu_ptr)(uintptr_t)((char *)b + CPU_ALIGN);
  return METRALE_OK;
}

void cpu_free(gpu_backend *be, gpu_ptr ptr) {
  if (!ptr) return;
  cpu_block *b = (cpu_block *)((char *)addr(ptr) - CPU_ALIGN);
  cpu_heap *heap = cpu_backend_heap(be);
  pthread_mutex_lock(&heap->lock);
  if (b->prev)
    b->prev->next = b->next;
  else
    heap->head = b->next;
  if (b->next) b->next->prev = b->prev;
  pthread_mutex_unlock(&heap->lock);
  free(b);
}

metrale_status cpu_memset(gpu_backend *be, gpu_ptr dst, uint8_t value, uint64_t bytes,
                          gpu_stream stream) {
  if (bytes) set_bytes(addr(dst), value, (size_t)bytes);
  return METRALE_OK;
}

metrale_status cpu_copy_h2d(gpu_backend *be, gpu_ptr dst, const void *src, uint64_t bytes,
                            gpu_stream stream) {
  if (bytes) copy_bytes(addr(dst), src, (size_t)bytes);
  return METRALE_OK;
}

metrale_status cpu_copy_d2h(gpu_backend *be, void *dst, gpu_ptr src, uint64_t bytes,
                            gpu_stream stream) {
  if (bytes) copy_bytes(dst, addr(src), (size_t)bytes);
  return METRALE_OK;
}

metrale_status cpu_copy_d2d(gpu_backend *be, gpu_ptr dst, gpu_ptr src, uint64_t bytes,
                            gpu_stream stream) {
  if (bytes) copy_bytes(addr(dst), addr(src), (size_t)bytes);
  return METRALE_OK;
}

metrale_status cpu_stream_create(gpu_backend *be, gpu_stream *out_stream) {
  gpu_stream s = calloc(1, sizeof *s);
  if (!s) return METRALE_ERROR(OUT_OF_MEMORY, "stream object");
  *out_stream = s;
  return METRALE_OK;
}

metrale_status cpu_stream_sync(gpu_backend *be, gpu_stream stream) { return METRALE_OK; }

void cpu_stream_destroy(gpu_backend *be, gpu_stream stream) { free(stream); }
