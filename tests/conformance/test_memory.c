/* The memory entries of the vtable: alloc/free, copies in every direction, memset,
 * offsets into allocations, streams. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define CHECK_OK(ctx, expr)                                                        \
  do {                                                                             \
    metrale_status s_ = (expr);                                                    \
    CF_EXPECT(ctx, s_ == METRALE_OK, "%s: %s", #expr, metrale_status_message(s_)); \
    if (s_) {                                                                      \
      metrale_status_free(s_);                                                     \
      cf_close(ctx);                                                               \
      return;                                                                      \
    }                                                                              \
  } while (0)

Test(memory, alloc_and_free) {
  cf_ctx ctx;
  cf_open(&ctx);
  gpu_backend *be = metrale_device_backend(ctx.dev);
  gpu_ptr z1 = 0, z2 = 0, p = 0;
  CHECK_OK(&ctx, be->vt->alloc(be, 0, &z1));
  CHECK_OK(&ctx, be->vt->alloc(be, 0, &z2));
  CF_EXPECT(&ctx, z1 != 0 && z2 != 0 && z1 != z2,
            "alloc(0) must give unique non-zero pointers (%llx %llx)", (unsigned long long)z1,
            (unsigned long long)z2);
  CHECK_OK(&ctx, be->vt->alloc(be, 1000003, &p));
  CF_EXPECT(&ctx, p % 16 == 0, "allocation not 16-byte aligned: %llx", (unsigned long long)p);
  be->vt->free(be, z1);
  be->vt->free(be, z2);
  be->vt->free(be, p);
  be->vt->free(be, 0); /* does nothing */

  gpu_ptr huge = 0;
  metrale_status s = be->vt->alloc(be, (uint64_t)1 << 62, &huge);
  CF_EXPECT(&ctx, metrale_status_code(s) == METRALE_CODE_OUT_OF_MEMORY,
            "alloc(2^62) gave %s instead of OUT_OF_MEMORY",
            metrale_code_name(metrale_status_code(s)));
  CF_EXPECT(&ctx, huge == 0, "%s", "out_ptr written on failure");
  metrale_status_free(s);
  /* leaked on purpose: destroy must free what was not freed */
  gpu_ptr leak = 0;
  CHECK_OK(&ctx, be->vt->alloc(be, 4096, &leak));
  cf_close(&ctx);
}

Test(memory, copies_memset_and_offsets) {
  cf_ctx ctx;
  cf_open(&ctx);
  gpu_backend *be = metrale_device_backend(ctx.dev);
  enum { N = 1 << 16 };
  uint8_t *src = cf_alloc(N, 1), *back = cf_alloc(N, 1), *want = cf_alloc(N, 1);
  for (size_t i = 0; i < N; i++) src[i] = (uint8_t)mt_next(&ctx.rng);
  gpu_ptr a = 0, b = 0;
  CHECK_OK(&ctx, be->vt->alloc(be, N, &a));
  CHECK_OK(&ctx, be->vt->alloc(be, N, &b));

  /* h2d / d2h round trip */
  CHECK_OK(&ctx, be->vt->copy_h2d(be, a, src, N, NULL));
  CHECK_OK(&ctx, be->vt->sync(be));
  CHECK_OK(&ctx, be->vt->copy_d2h(be, back, a, N, NULL));
  CHECK_OK(&ctx, be->vt->sync(be));
  cf_check_exact(&ctx, "h2d + d2h", back, src, 1, N);

  /* everything at odd offsets: b = 0x11, then pieces of a copied in */
  memcpy(want, src, N);
  CHECK_OK(&ctx, be->vt->memset(be, b, 0x11, N, NULL));
  memset(want, 0x11, N);
  CHECK_OK(&ctx, be->vt->copy_d2d(be, b + 3, a + 1001, 5000, NULL));
  memcpy(want + 3, src + 1001, 5000);
  CHECK_OK(&ctx, be->vt->memset(be, b + 7001, 0xee, 333, NULL));
  memset(want + 7001, 0xee, 333);
  CHECK_OK(&ctx, be->vt->copy_h2d(be, b + 9999, src + 77, 1234, NULL));
  memcpy(want + 9999, src + 77, 1234);
  CHECK_OK(&ctx, be->vt->copy_d2d(be, b + N - 1, a, 1, NULL)); /* last byte */
  want[N - 1] = src[0];
  CHECK_OK(&ctx, be->vt->copy_d2d(be, b + 100, a, 0, NULL)); /* zero bytes: nothing */
  CHECK_OK(&ctx, be->vt->memset(be, b + 200, 0x55, 0, NULL));
  CHECK_OK(&ctx, be->vt->sync(be));
  CHECK_OK(&ctx, be->vt->copy_d2h(be, back, b, N, NULL));
  CHECK_OK(&ctx, be->vt->sync(be));
  cf_check_exact(&ctx, "after copies and memsets at offsets", back, want, 1, N);

  /* d2h of a middle piece */
  memset(back, 0, N);
  CHECK_OK(&ctx, be->vt->copy_d2h(be, back + 10, b + 7000, 400, NULL));
  CHECK_OK(&ctx, be->vt->sync(be));
  cf_check_exact(&ctx, "d2h at an offset", back + 10, want + 7000, 1, 400);

  be->vt->free(be, a);
  be->vt->free(be, b);
  free(src), free(back), free(want);
  cf_close(&ctx);
}

Test(memory, streams) {
  cf_ctx ctx;
  cf_open(&ctx);
  gpu_backend *be = metrale_device_backend(ctx.dev);
  gpu_stream s1 = NULL, s2 = NULL;
  CHECK_OK(&ctx, be->vt->stream_create(be, &s1));
  CHECK_OK(&ctx, be->vt->stream_create(be, &s2));
  CF_EXPECT(&ctx, s1 != NULL && s2 != NULL && s1 != s2, "%s", "streams must be distinct objects");
  enum { N = 4096 };
  uint8_t src[N], back[N];
  for (size_t i = 0; i < N; i++) src[i] = (uint8_t)(i * 7 + 1);
  gpu_ptr a = 0, b = 0;
  CHECK_OK(&ctx, be->vt->alloc(be, N, &a));
  CHECK_OK(&ctx, be->vt->alloc(be, N, &b));
  /* in order on one stream: h2d, d2d, d2h, then one sync */
  CHECK_OK(&ctx, be->vt->copy_h2d(be, a, src, N, s1));
  CHECK_OK(&ctx, be->vt->copy_d2d(be, b, a, N, s1));
  CHECK_OK(&ctx, be->vt->copy_d2h(be, back, b, N, s1));
  CHECK_OK(&ctx, be->vt->stream_sync(be, s1));
  cf_check_exact(&ctx, "in-order stream copies", back, src, 1, N);
  CHECK_OK(&ctx, be->vt->memset(be, a, 0, N, s2));
  CHECK_OK(&ctx, be->vt->stream_sync(be, s2));
  CHECK_OK(&ctx, be->vt->copy_d2h(be, back, a, N, NULL));
  CHECK_OK(&ctx, be->vt->stream_sync(be, NULL));
  uint8_t zero[N] = {0};
  cf_check_exact(&ctx, "memset on a second stream", back, zero, 1, N);
  be->vt->stream_destroy(be, s1);
  be->vt->stream_destroy(be, s2);
  be->vt->free(be, a);
  be->vt->free(be, b);
  cf_close(&ctx);
}

/* Host-to-device copies queue in stream order with device work, with no sync between: the same
 * four bytes of a are written from the host 64 times, each time copied on into b by copy_d2d
 * before the next write (a layer's slot list, written again for every decode step, is read so
 * by the step's kernels).  A copy that ran out of order, or read its host bytes late, leaves b
 * with repeated or missing values.  The host buffers stay valid until the sync, as the contract
 * asks; the small copies are the ones a backend may record instead of waiting for the stream. */
Test(memory, host_copies_queue_in_order_with_device_copies) {
  cf_ctx ctx;
  cf_open(&ctx);
  gpu_backend *be = metrale_device_backend(ctx.dev);
  enum { R = 64, W = 4 }; /* rounds, 32-bit words a round */
  uint32_t vals[R][W], back[R][W];
  for (unsigned r = 0; r < R; r++)
    for (unsigned w = 0; w < W; w++) vals[r][w] = 0x5a000000u + 16u * r + w;
  gpu_stream st = NULL;
  CHECK_OK(&ctx, be->vt->stream_create(be, &st));
  gpu_ptr a = 0, b = 0;
  CHECK_OK(&ctx, be->vt->alloc(be, sizeof vals[0], &a));
  CHECK_OK(&ctx, be->vt->alloc(be, sizeof vals, &b));
  for (gpu_stream on = NULL;; on = st) {
    CHECK_OK(&ctx, be->vt->memset(be, b, 0, sizeof vals, on));
    for (unsigned r = 0; r < R; r++) {
      CHECK_OK(&ctx, be->vt->copy_h2d(be, a, vals[r], sizeof vals[r], on));
      CHECK_OK(&ctx, be->vt->copy_d2d(be, b + r * sizeof vals[r], a, sizeof vals[r], on));
    }
    CHECK_OK(&ctx, be->vt->copy_d2h(be, back, b, sizeof back, on));
    CHECK_OK(&ctx, be->vt->stream_sync(be, on));
    cf_check_exact(&ctx, on ? "h2d then d2d, 64 rounds on a created stream" : "h2d then d2d, 64 rounds on the default stream",
                   (const uint8_t *)back, (const uint8_t *)vals, 1, sizeof vals);
    if (on) break;
  }
  be->vt->stream_destroy(be, st);
  be->vt->free(be, a);
  be->vt->free(be, b);
  cf_close(&ctx);
}

/* Small host copies of every size and alignment a slot list takes, and around the sizes where a
 * backend may write them otherwise than by a transfer (CUDA: stream write operations up to 255
 * of 4 or 8 bytes; Vulkan: recorded updates up to 64 KiB): each lands exactly in place, and the
 * bytes either side stay as they were. */
Test(memory, small_host_copies_at_every_alignment) {
  cf_ctx ctx;
  cf_open(&ctx);
  gpu_backend *be = metrale_device_backend(ctx.dev);
  enum { N = 4096 + 64 };
  static const uint32_t sizes[] = {1, 3, 4, 8, 12, 16, 20, 1016, 1020, 1024, 1028, 2036, 2040, 2044, 2048, 2052, 4096};
  static const uint32_t offsets[] = {0, 1, 4, 8, 12, 28};
  uint8_t *src = cf_alloc(N, 1), *back = cf_alloc(N, 1), *want = cf_alloc(N, 1);
  gpu_ptr b = 0;
  CHECK_OK(&ctx, be->vt->alloc(be, N, &b));
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
    for (size_t oi = 0; oi < sizeof offsets / sizeof offsets[0]; oi++) {
      const uint32_t n = sizes[si], off = offsets[oi];
      if (off + n > N) continue;
      for (size_t i = 0; i < N; i++) src[i] = (uint8_t)mt_next(&ctx.rng);
      CHECK_OK(&ctx, be->vt->memset(be, b, 0x11, N, NULL));
      CHECK_OK(&ctx, be->vt->copy_h2d(be, b + off, src, n, NULL));
      CHECK_OK(&ctx, be->vt->copy_d2h(be, back, b, N, NULL));
      CHECK_OK(&ctx, be->vt->sync(be));
      memset(want, 0x11, N);
      memcpy(want + off, src, n);
      char what[64];
      snprintf(what, sizeof what, "%u bytes copied from the host to offset %u", n, off);
      cf_check_exact(&ctx, what, back, want, 1, N);
    }
  be->vt->free(be, b);
  free(src), free(back), free(want);
  cf_close(&ctx);
}

/* stream_wait (optional): a copy on one stream after a wait for a long memset on another must
 * see the memset's bytes, both ways round and with the backend's own stream (NULL) as either
 * side.  The bytes read are the last the memset writes, so a wait that did not hold would
 * most likely read the round before's. */
Test(memory, stream_wait) {
  cf_ctx ctx;
  cf_open(&ctx);
  gpu_backend *be = metrale_device_backend(ctx.dev);
  if (!be->vt->stream_wait) {
    fprintf(stderr, "%s: no stream_wait (optional): the layer keeps its work on one stream\n", ctx.backend);
    cf_close(&ctx);
    return;
  }
  gpu_stream s1 = NULL, s2 = NULL;
  CHECK_OK(&ctx, be->vt->stream_create(be, &s1));
  CHECK_OK(&ctx, be->vt->stream_create(be, &s2));
  enum { N = 4096 };
  const uint64_t big = 64ull << 20;
  gpu_ptr a = 0;
  CHECK_OK(&ctx, be->vt->alloc(be, big, &a));
  uint8_t back[N], want[N];
  const gpu_stream pairs[4][2] = {{s2, s1}, {s1, s2}, {NULL, s1}, {s2, NULL}}; /* waiter, signaler */
  for (unsigned r = 0; r < 8; r++) {
    const gpu_stream waiter = pairs[r % 4][0], signaler = pairs[r % 4][1];
    const uint8_t v = (uint8_t)(0x11u * (r + 1u));
    CHECK_OK(&ctx, be->vt->memset(be, a, v, big, signaler));
    CHECK_OK(&ctx, be->vt->stream_wait(be, waiter, signaler));
    CHECK_OK(&ctx, be->vt->copy_d2h(be, back, a + big - N, N, waiter));
    CHECK_OK(&ctx, be->vt->stream_sync(be, waiter));
    memset(want, v, N);
    snprintf(ctx.shape, sizeof ctx.shape, "round %u", r);
    cf_check_exact(&ctx, "bytes after the wait", back, want, 1, N);
    CHECK_OK(&ctx, be->vt->sync(be));
  }
  be->vt->free(be, a);
  be->vt->stream_destroy(be, s1);
  be->vt->stream_destroy(be, s2);
  cf_close(&ctx);
}

Test(device, caps_are_filled_in) {
  cf_ctx ctx;
  cf_open(&ctx);
  gpu_backend *be = metrale_device_backend(ctx.dev);
  const gpu_caps *c = &be->caps;
  CF_EXPECT(&ctx, be->name && strcmp(be->name, ctx.backend) == 0, "backend name '%s'",
            be->name ? be->name : "(null)");
  CF_EXPECT(&ctx, c->device_name[0] != '\0', "%s", "empty device name");
  CF_EXPECT(&ctx, c->arch[0] != '\0', "%s", "empty arch");
  CF_EXPECT(&ctx, c->sm_count >= 1, "sm_count %u", c->sm_count);
  CF_EXPECT(&ctx, c->subgroup_size >= 1, "subgroup_size %u", c->subgroup_size);
  CF_EXPECT(&ctx, c->memory_bytes > 0, "memory_bytes %llu", (unsigned long long)c->memory_bytes);
  if (strcmp(ctx.backend, "cpu") == 0)
    CF_EXPECT(&ctx, (c->flags & GPU_CAP_HOST_MEMORY) != 0, "%s",
              "cpu backend without GPU_CAP_HOST_MEMORY");
  cf_close(&ctx);
}
