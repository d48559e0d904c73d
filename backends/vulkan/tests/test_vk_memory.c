/* The Vulkan backend's memory side: the sub-allocator (alignment, blocks, dedicated
 * buffers, reuse), range checks, the staging path of discrete GPUs, command-buffer
 * rollover, streams, and free() waiting for queued work. */
#include <stdlib.h>
#include <string.h>

#include "metrale/bf16.h"
#include "vk_test_util.h"

#define MiB (1ull << 20)

static void fill(uint8_t *p, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = (uint8_t)(seed >> 24);
  }
}

Test(vulkan_memory, allocations_are_aligned_and_disjoint) {
  metrale_device *dev = vkt_open();
  gpu_backend *be = metrale_device_backend(dev);
  static const uint64_t sizes[] = {0, 1, 255, 256, 257, 4096, 1000003, 0, 3};
  enum { N = sizeof sizes / sizeof sizes[0] };
  gpu_ptr p[N];
  for (int i = 0; i < N; i++) {
    VKT_OK(be->vt->alloc(be, sizes[i], &p[i]));
    cr_expect(p[i] != 0 && p[i] % 256 == 0, "alloc(%llu) = 0x%llx", (unsigned long long)sizes[i],
              (unsigned long long)p[i]);
  }
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      uint64_t si = sizes[i] ? sizes[i] : 1;
      if (i != j) cr_expect(p[i] + si <= p[j] || p[j] >= p[i] + si || p[j] + 1 <= p[i],
                            "allocations %d and %d overlap", i, j);
    }
  /* a freed range is handed out again */
  be->vt->free(be, p[6]);
  gpu_ptr again = 0;
  VKT_OK(be->vt->alloc(be, 1000003, &again));
  cr_expect_eq(again, p[6], "first fit should reuse the freed range");
  be->vt->free(be, 0x1234); /* not an allocation: ignored */
  for (int i = 0; i < N; i++)
    if (i != 6) be->vt->free(be, p[i]);
  be->vt->free(be, again);
  metrale_device_destroy(dev);
}

/* 60 MiB requests fill one 256 MiB block and open a second; 100 MiB gets its own
 * buffer.  Every one keeps its own contents. */
Test(vulkan_memory, blocks_and_dedicated_buffers, .timeout = 600) {
  metrale_device *dev = vkt_open();
  gpu_backend *be = metrale_device_backend(dev);
  static const uint64_t sizes[] = {60 * MiB, 60 * MiB, 60 * MiB, 60 * MiB, 60 * MiB, 100 * MiB + 5};
  enum { N = sizeof sizes / sizeof sizes[0] };
  gpu_ptr p[N];
  for (int i = 0; i < N; i++) {
    VKT_OK(be->vt->alloc(be, sizes[i], &p[i]));
    VKT_OK(be->vt->memset(be, p[i], (uint8_t)(0x10 + i), sizes[i], NULL));
  }
  for (int i = 0; i < N; i++) {
    uint8_t ends[2] = {0, 0};
    VKT_OK(be->vt->copy_d2h(be, &ends[0], p[i], 1, NULL));
    VKT_OK(be->vt->copy_d2h(be, &ends[1], p[i] + sizes[i] - 1, 1, NULL));
    VKT_OK(be->vt->sync(be));
    cr_expect(ends[0] == 0x10 + i && ends[1] == 0x10 + i, "allocation %d holds %02x..%02x", i,
              ends[0], ends[1]);
  }
  /* one byte past the end of an allocation is not part of it */
  uint8_t x;
  VKT_FAILS(be->vt->copy_d2h(be, &x, p[5] + sizes[5], 1, NULL), INVALID_ARGUMENT);
  for (int i = 0; i < N; i++) be->vt->free(be, p[i]);
  /* the dedicated buffer is gone with its allocation */
  VKT_FAILS(be->vt->memset(be, p[5], 0, 1, NULL), INVALID_ARGUMENT);
  gpu_ptr big = 0;
  VKT_FAILS(be->vt->alloc(be, 1ull << 44, &big), OUT_OF_MEMORY);
  cr_expect_eq(big, 0);
  metrale_device_destroy(dev);
}

Test(vulkan_memory, ranges_outside_allocations_are_refused) {
  metrale_device *dev = vkt_open();
  gpu_backend *be = metrale_device_backend(dev);
  gpu_ptr a = 0, b = 0;
  VKT_OK(be->vt->alloc(be, 1000, &a));
  VKT_OK(be->vt->alloc(be, 1000, &b));
  uint8_t buf[2048] = {0};
  VKT_FAILS(be->vt->copy_h2d(be, a + 900, buf, 200, NULL), INVALID_ARGUMENT); /* past the end */
  VKT_FAILS(be->vt->copy_d2h(be, buf, 0x10, 16, NULL), INVALID_ARGUMENT);     /* unknown */
  VKT_FAILS(be->vt->copy_d2d(be, a + 10, a, 100, NULL), INVALID_ARGUMENT);    /* overlap */
  VKT_FAILS(be->vt->copy_d2d(be, b, a, 2000, NULL), INVALID_ARGUMENT);
  VKT_FAILS(be->vt->copy_h2d(be, a, NULL, 16, NULL), INVALID_ARGUMENT);
  VKT_OK(be->vt->copy_d2d(be, a, a, 100, NULL)); /* to itself: nothing to do */
  be->vt->free(be, b);
  VKT_FAILS(be->vt->memset(be, b, 1, 16, NULL), INVALID_ARGUMENT); /* freed */
  VKT_OK(be->vt->sync(be));
  be->vt->free(be, a);
  metrale_device_destroy(dev);
}

/* Discrete GPUs copy through a 32 MiB host-visible staging buffer; force that path
 * (lavapipe otherwise maps device memory) with a copy of several chunks. */
Test(vulkan_memory, staging_path_in_chunks, .timeout = 600) {
  setenv("METRALE_VULKAN_STAGING", "1", 1);
  metrale_device *dev = vkt_open();
  gpu_backend *be = metrale_device_backend(dev);
  const size_t n = 70 * MiB + 3;
  uint8_t *src = malloc(n), *back = malloc(n);
  cr_assert(src && back);
  fill(src, n, 7);
  gpu_ptr a = 0, b = 0;
  VKT_OK(be->vt->alloc(be, n + 64, &a));
  VKT_OK(be->vt->alloc(be, n + 64, &b));
  VKT_OK(be->vt->copy_h2d(be, a + 5, src, n, NULL));
  VKT_OK(be->vt->copy_d2d(be, b + 1, a + 5, n, NULL));
  VKT_OK(be->vt->memset(be, b + 1 + 1000, 0xab, 3333, NULL));
  memset(src + 1000, 0xab, 3333);
  VKT_OK(be->vt->copy_d2h(be, back, b + 1, n, NULL));
  VKT_OK(be->vt->sync(be));
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += back[i] != src[i];
  cr_expect_eq(bad, 0, "%zu of %zu bytes differ", bad, n);
  be->vt->free(be, a);
  be->vt->free(be, b);
  free(src), free(back);
  metrale_device_destroy(dev);
}

/* More commands than fit one command buffer (4096) on one stream: the stream submits
 * and carries on in the next buffer of its ring; order must hold across them.  Each
 * round adds 1 to x and bounces it through y and back 10 times. */
Test(vulkan_memory, command_buffer_rollover, .timeout = 600) {
  metrale_device *dev = vkt_open();
  gpu_backend *be = metrale_device_backend(dev);
  gpu_kernel add = 0;
  VKT_OK(be->vt->kernel(be, "elementwise", "add", &add));
  enum { N = 300, ROUNDS = 250 };
  gpu_ptr x = 0, y = 0, one = 0;
  VKT_OK(be->vt->alloc(be, N * 2, &x));
  VKT_OK(be->vt->alloc(be, N * 2, &y));
  VKT_OK(be->vt->alloc(be, N * 2, &one));
  gpu_stream st = NULL;
  VKT_OK(be->vt->stream_create(be, &st));
  metrale_bf16 h[N];
  for (int i = 0; i < N; i++) h[i] = metrale_f32_to_bf16(1.0f);
  VKT_OK(be->vt->copy_h2d(be, one, h, sizeof h, st));
  VKT_OK(be->vt->memset(be, x, 0, N * 2, st));
  gpu_arg args[4] = {gpu_arg_ptr(x), gpu_arg_ptr(x), gpu_arg_ptr(one), gpu_arg_u32(N)};
  for (int r = 0; r < ROUNDS; r++) {
    VKT_OK(be->vt->launch(be, add, (gpu_dim3){2, 1, 1}, (gpu_dim3){256, 1, 1}, 0, st, args, 4));
    for (int c = 0; c < 10; c++) {
      VKT_OK(be->vt->copy_d2d(be, y, x, N * 2, st));
      VKT_OK(be->vt->copy_d2d(be, x, y, N * 2, st));
    }
  }
  VKT_OK(be->vt->copy_d2h(be, h, x, sizeof h, st));
  VKT_OK(be->vt->stream_sync(be, st));
  for (int i = 0; i < N; i++)
    cr_expect_eq(h[i], metrale_f32_to_bf16((float)ROUNDS), "x[%d] = %g", i,
                 (double)metrale_bf16_to_f32(h[i]));
  be->vt->stream_destroy(be, st);
  be->vt->free(be, x);
  be->vt->free(be, y);
  be->vt->free(be, one);
  metrale_device_destroy(dev);
}

/* free() of memory a queued kernel still reads waits for it (like cudaFree); a stream
 * destroyed with queued work finishes it; a stream never destroyed dies with the
 * backend. */
Test(vulkan_memory, streams_and_free_wait_for_work) {
  metrale_device *dev = vkt_open();
  gpu_backend *be = metrale_device_backend(dev);
  gpu_kernel add = 0;
  VKT_OK(be->vt->kernel(be, "elementwise", "add", &add));
  enum { N = 4096 };
  metrale_bf16 h[N];
  for (int i = 0; i < N; i++) h[i] = metrale_f32_to_bf16((float)(i % 100));
  gpu_ptr a = 0, y = 0, z = 0;
  VKT_OK(be->vt->alloc(be, N * 2, &a));
  VKT_OK(be->vt->alloc(be, N * 2, &y));
  VKT_OK(be->vt->alloc(be, N * 2, &z));
  gpu_stream s1 = NULL, s2 = NULL, s3 = NULL;
  VKT_OK(be->vt->stream_create(be, &s1));
  VKT_OK(be->vt->stream_create(be, &s2));
  VKT_OK(be->vt->stream_create(be, &s3));
  VKT_OK(be->vt->copy_h2d(be, a, h, sizeof h, s1));
  gpu_arg args[4] = {gpu_arg_ptr(y), gpu_arg_ptr(a), gpu_arg_ptr(a), gpu_arg_u32(N)};
  VKT_OK(be->vt->launch(be, add, (gpu_dim3){N / 256, 1, 1}, (gpu_dim3){256, 1, 1}, 0, s1, args, 4));
  be->vt->free(be, a); /* y = a + a is still queued */
  VKT_OK(be->vt->memset(be, z, 0x3f, N * 2, s2));
  be->vt->stream_destroy(be, s2); /* queued memset must still happen */
  VKT_OK(be->vt->stream_sync(be, s1));
  metrale_bf16 back[N];
  VKT_OK(be->vt->copy_d2h(be, back, y, sizeof back, NULL));
  VKT_OK(be->vt->sync(be));
  for (int i = 0; i < N; i++)
    cr_expect_eq(back[i], metrale_f32_to_bf16(2.0f * (float)(i % 100)), "y[%d]", i);
  VKT_OK(be->vt->copy_d2h(be, back, z, sizeof back, NULL));
  VKT_OK(be->vt->sync(be));
  for (int i = 0; i < N; i++) cr_expect_eq(back[i], 0x3f3f, "z[%d]", i);
  VKT_OK(be->vt->memset(be, y, 0, N * 2, s3)); /* s3 is left to the backend's destroy */
  be->vt->stream_destroy(be, s1);
  be->vt->stream_destroy(be, NULL); /* the default stream is not destroyable: no-op */
  metrale_device_destroy(dev);
}
