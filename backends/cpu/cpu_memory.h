/* Host memory of the CPU backend: tracked allocations, synchronous copies, streams. */
#ifndef METRALE_CPU_MEMORY_H
#define METRALE_CPU_MEMORY_H

#include <pthread.h>

#include "metrale/gpu_backend.h"

/* Doubly linked list of live allocations, so destroy can free what was not freed. */
typedef struct cpu_block cpu_block;
typedef struct cpu_heap {
  pthread_mutex_t lock;
  cpu_block *head;
} cpu_heap;

void cpu_heap_init(cpu_heap *heap);
void cpu_heap_release(cpu_heap *heap); /* frees every live allocation */

metrale_status cpu_alloc(gpu_backend *be, uint64_t bytes, gpu_ptr *out_ptr);
void cpu_free(gpu_backend *be, gpu_ptr ptr);
metrale_status cpu_memset(gpu_backend *be, gpu_ptr dst, uint8_t value, uint64_t bytes,
                          gpu_stream stream);
metrale_status cpu_copy_h2d(gpu_backend *be, gpu_ptr dst, const void *src, uint64_t bytes,
                            gpu_stream stream);
metrale_status cpu_copy_d2h(gpu_backend *be, void *dst, gpu_ptr src, uint64_t bytes,
                            gpu_stream stream);
metrale_status cpu_copy_d2d(gpu_backend *be, gpu_ptr dst, gpu_ptr src, uint64_t bytes,
                            gpu_stream stream);
metrale_status cpu_stream_create(gpu_backend *be, gpu_stream *out_stream);
metrale_status cpu_stream_sync(gpu_backend *be, gpu_stream stream);
void cpu_stream_destroy(gpu_backend *be, gpu_stream stream);

/* The heap of a CPU backend object (defined in cpu_backend.c). */
cpu_heap *cpu_backend_heap(gpu_backend *be);

#endif
