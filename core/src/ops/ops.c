#include "ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CEIL_DIV(a, b) (uint32_t)(((uint64_t)(a) + (b) - 1) / (b))
/* The gemv kernels (weights streamed once per 4 rows on CUDA cores) for a decode batch's first
 * rows, then the tensor-core tiles (split K for the few tiles of a decode batch).  On the H200
 * at batch 8 in_proj took 71 us on gemv_f32in and 44 on gemm_f32in_splitk, out_proj 58 on
 * gemv_bf16 and 17 on gemm_bf16_splitk: the mixer decode step 117.7 -> 73.4 us at 8, 79.4 ->
 * 71.6 at 5, 241 -> 83 at 16 (docs/perf-decode.md section 14).  Large weights (n k >=
 * GEMV_LARGE_NK: the mixer's in_proj and out_proj) go to the tiles from 3 rows since the 64-row
 * ws tiles: the gemv's multiply-adds grow with the rows, the tiles' time hardly does (mixer
 * decode 3 / 4 53.3-53.9 / 62.4-63.1 -> 46.3-46.5 / 49.5-49.7 us; section 25).  The small ones
 * (the MoE layer's router, n k = 513 x 2048, and its shared expert's down, 2048 x 512) keep the
 * gemv to 8 rows, where the 64x64 tiles' 9 and 32 blocks, each a whole 2048 or 512 deep, cost
 * more: layer decode 5 / 6 / 8 155.4 / 170.9 / 200.3 us with the gemv to 4 rows, 146.5 / 163.4
 * / 200.0 to 8; to 16 rows, decode 12 / 14 / 16 lost 5 / 14 / 20 us (docs/perf-moe.md). */
#define GEMV_MAX_M 4u       /* large weights where the backend has no 64-row ws split tiles */
#define GEMV_MAX_M_SMALL 8u /* weights below GEMV_LARGE_NK */
#define GEMV_MAX_M_LARGE 2u
#define GEMV_MAX_M_SIMT 8u /* large weights on a GPU without matrix units */
#define GEMV_LARGE_NK (4ull << 20)

/* Whether a family names kernel id (METRALE_K_COUNT: none) and the backend has it. */
static int has_kernel(const metrale_ops *o, metrale_kernel_id id) { return id != METRALE_K_COUNT && o->k[id]; }

/* The 128x128-tile gemm kernels, where present, beat the 64x64 ones once there are about
 * as many 128x128 tiles as an H200 has SMs (132; docs/perf-gemm.md) and the output is at
 * least one tile wide (the prefill's b and a projections, 32 columns each, took 65 us on
 * 128-wide tiles).  n = 0: unknown (the path report), taken as wide. */
static int use_t128(const metrale_ops *o, metrale_kernel_id id, uint32_t m, uint32_t n) {
  const uint64_t cols = n ? CEIL_DIV(n, 128) : 128;
  return has_kernel(o, id) && (n == 0 || n >= 128) && (uint64_t)CEIL_DIV(m, 128) * cols >= 128;
}

/* Launches kernel `id` with the given grid and argument list. */
#define LAUNCH(o, st, id, gx, gy, ...)                                                    \
  do {                                                                                    \
    const gpu_arg args_[] = {__VA_ARGS__};                                                \
    gpu_dim3 grid_ = {(gx), (gy), 1};                                                     \
    return metrale_launch((o)->dev, METRALE_K_##id, (o)->k[METRALE_K_##id], grid_, (st),  \
                          args_, (uint32_t)(sizeof args_ / sizeof args_[0]));             \
  } while (0)

#define P gpu_arg_ptr
#define U gpu_arg_u32
#define F gpu_arg_f32

metrale_status metrale_ops_init(metrale_ops *ops, metrale_device *dev) {
  ops->dev = dev;
  for (int id = 0; id < METRALE_K_COUNT; id++) {
    const metrale_kernel_info *info = metrale_kernel_info_get((metrale_kernel_id)id);
    if (!info) return METRALE_ERROR(INTERNAL, "kernel manifest is malformed");
    if (info->requirement == METRALE_REQUIRED)
      METRALE_RETURN_IF_ERROR(metrale_kernel(dev, (metrale_kernel_id)id, &ops->k[id]));
    else
      ops->k[id] = metrale_try_kernel(dev, (metrale_kernel_id)id);
  }
  const char *no_wh = getenv("METRALE_NO_WHOLE_HEAD"); /* the fp16 chunked kernel instead (chunked_wh) */
  if (no_wh && *no_wh && strcmp(no_wh, "0") != 0) ops->k[METRALE_K_delta_rule_prefill_chunked_wh] = 0;
  const char *no_planes = getenv("METRALE_NO_QK_PLANES"); /* q and k in f32 from the conv (metrale_ops_qk_planes_fits) */
  if (no_planes && *no_planes && strcmp(no_planes, "0") != 0) ops->k[METRALE_K_conv1d_prefill_l2norm_qkh] = 0;
  const char *nseg = getenv("METRALE_WH_SEGMENTS"); /* force the segments (wh_segments), 0: none */
  char *end = NULL;
  const long n = nseg && *nseg ? strtol(nseg, &end, 10) : -1;
  if (nseg && *nseg && (*end != '\0' || n > METRALE_WH_NSEG_MAX || (n > 0 && n < METRALE_WH_NSEG_MIN) || n < 0))
    return METRALE_ERROR(INVALID_ARGUMENT, "METRALE_WH_SEGMENTS=%s: 0 (none) or %d to %d segments", nseg,
                         METRALE_WH_NSEG_MIN, METRALE_WH_NSEG_MAX);
  ops->wh_nseg = (int)n;
  const char *w0 = getenv("METRALE_WH_SEG0"); /* force segment 0's weight (wh_seg0), 16: equal */
  const long w = w0 && *w0 ? strtol(w0, &end, 10) : 0;
  if (w0 && *w0 && (*end != '\0' || w < METRALE_WH_W0_MIN || w > METRALE_WH_W0_MAX))
    return METRALE_ERROR(INVALID_ARGUMENT, "METRALE_WH_SEG0=%s: %d to %d (segment 0's length in sixteenths of "
                         "each other segment's)", w0, METRALE_WH_W0_MIN, METRALE_WH_W0_MAX);
  ops->wh_w0 = (int)w;
  return METRALE_OK;
}

/* One GEMM contract served by a family of kernels: a gemv for decode (M <= 2 or 4), warp-
 * specialised 128x256 or 64x256 tiles with K split over a cluster when there are few of them
 * (decode batches), whole-K 128x256 (or 128x192) or 128x128 tiles when there are enough of
 * them to fill the GPU,
 * 128x128 tiles with K split over a cluster for a few hundred rows, 64x64 tiles with K split
 * in 4 when there are few of them, and the 64x64-tile kernel. */
typedef struct gemm_family {
  metrale_kernel_id gemv, ws, t128, t128_splitk, splitk, tile; /* METRALE_K_COUNT: none */
  uint32_t t128_slices;                                        /* grid.z of t128_splitk */
  metrale_kernel_id t128_splitk4; /* t128_splitk with K in 4 slices, or METRALE_K_COUNT */
  metrale_kernel_id ws_split[2][3]; /* ws with K in 2, 4, 8 slices (WS_SLICES) on 128- and 64-row
                                      tiles (WS_ROWS), or METRALE_K_COUNT */
  metrale_kernel_id ws192;        /* ws with 128x192 tiles, or METRALE_K_COUNT */
} gemm_family;
static const uint32_t WS_SLICES[3] = {2, 4, 8}, WS_ROWS[2] = {128, 64};

/* A family member chosen for a GEMM and the tile it computes: bm x bn outputs a block (bm = 0:
 * the gemv, a block per 8 columns), K in `slices` (grid.z); walk: the kernel's blocks walk the
 * tiles (the ws rows' whole-K forms), so it is launched on at most one block an SM (ws_grid). */
typedef struct gemm_plan {
  metrale_kernel_id id;
  uint32_t bm, bn, slices, walk;
} gemm_plan;

static const gemm_family GEMM_BF16 = {METRALE_K_gemv_bf16,          METRALE_K_gemm_bf16_ws,
                                      METRALE_K_gemm_bf16_t128,     METRALE_K_gemm_bf16_t128_splitk,
                                      METRALE_K_gemm_bf16_splitk,   METRALE_K_gemm_bf16,
                                      8,                            METRALE_K_gemm_bf16_t128_splitk4,
                                      {{METRALE_K_COUNT, METRALE_K_gemm_bf16_ws_splitk4, METRALE_K_gemm_bf16_ws_splitk8},
                                       {METRALE_K_COUNT, METRALE_K_COUNT, METRALE_K_gemm_bf16_ws64_splitk8}},
                                      METRALE_K_COUNT};
static const gemm_family GEMM_BF16_F32 = {METRALE_K_gemv_bf16_f32, METRALE_K_gemm_bf16_f32_ws, METRALE_K_COUNT,
                                          METRALE_K_COUNT,         METRALE_K_COUNT, METRALE_K_gemm_bf16_f32,
                                          0,                       METRALE_K_COUNT,
                                          {{METRALE_K_COUNT, METRALE_K_COUNT, METRALE_K_COUNT},
                                           {METRALE_K_COUNT, METRALE_K_COUNT, METRALE_K_COUNT}},
                                          METRALE_K_COUNT};
static const gemm_family GEMM_F32IN = {METRALE_K_gemv_f32in,        METRALE_K_gemm_f32in_ws,
                                       METRALE_K_gemm_f32in_t128,   METRALE_K_COUNT,
                                       METRALE_K_gemm_f32in_splitk, METRALE_K_gemm_f32in,
                                       0,                           METRALE_K_COUNT,
                                       {{METRALE_K_gemm_f32in_ws_splitk2, METRALE_K_COUNT, METRALE_K_COUNT},
                                        {METRALE_K_gemm_f32in_ws64_splitk2, METRALE_K_COUNT, METRALE_K_COUNT}},
                                       METRALE_K_gemm_f32in_ws192};

/* z: the f32in family with the bf16-x ws kernel in place of gemm_f32in_ws */
static const gemm_family GEMM_F32IN_HI = {METRALE_K_gemv_f32in,        METRALE_K_gemm_f32in_hi_ws,
                                          METRALE_K_gemm_f32in_t128,   METRALE_K_COUNT,
                                          METRALE_K_gemm_f32in_splitk, METRALE_K_gemm_f32in,
                                          0,                           METRALE_K_COUNT,
                                          {{METRALE_K_COUNT, METRALE_K_COUNT, METRALE_K_COUNT},
                                           {METRALE_K_COUNT, METRALE_K_COUNT, METRALE_K_COUNT}},
                                          METRALE_K_COUNT};

/* q|k|v and z at prefill, in_proj at decode batches past the gemv's rows, on IEEE half
 * operands: the ws tile and, for up to 128 rows, its 2-slice split forms (128x192 tiles lost
 * at decode 129..256: docs/perf-gemm.md; the split forms: docs/perf-decode.md section 26) */
static const gemm_family GEMM_F16 = {METRALE_K_COUNT, METRALE_K_gemm_f16_ws,
                                     METRALE_K_COUNT, METRALE_K_COUNT,
                                     METRALE_K_COUNT, METRALE_K_COUNT,
                                     0,               METRALE_K_COUNT,
                                     {{METRALE_K_gemm_f16_ws_splitk2, METRALE_K_COUNT, METRALE_K_COUNT},
                                      {METRALE_K_gemm_f16_ws64_splitk2, METRALE_K_COUNT, METRALE_K_COUNT}},
                                     METRALE_K_COUNT};

/* The warp-specialised 128x256 tiles (one block an SM) once they fill at least half the
 * SMs: in_proj at decode batch 256 makes 98 of them on the H200's 132 SMs (docs/perf-gemm.md).
 * n = 0 (unknown) taken as wide. */
static int use_ws(const metrale_ops *o, const gemm_family *f, uint32_t m, uint32_t n) {
  if (!has_kernel(o, f->ws) || (n && n < 256)) return 0;
  const uint64_t cols = n ? CEIL_DIV(n, 256) : 64;
  return 2u * (uint64_t)CEIL_DIV(m, 128) * cols >= metrale_device_backend(o->dev)->caps.sm_count;
}

/* Split K on the 128x128 tiles for M > 64 while tiles x slices make at most three waves of
 * two blocks an SM: out_proj at decode batch 256 (32 tiles) 36.6 us on the 64x64 split, 29.7
 * on this.  f32 x has no such kernel: in_proj at batch 256 (194 tiles, 4 slices) took 94 us
 * against 77.7 on whole-K tiles (docs/perf-gemm.md). */
static int use_t128_splitk(const metrale_ops *o, const gemm_family *f, uint32_t m, uint32_t n, uint32_t k) {
  if (!has_kernel(o, f->t128_splitk) || m <= 64 || n < 128 || k < 1024) return 0;
  const uint64_t blocks = (uint64_t)CEIL_DIV(m, 128) * CEIL_DIV(n, 128) * f->t128_slices;
  return blocks <= 6u * (uint64_t)metrale_device_backend(o->dev)->caps.sm_count;
}

/* The 4-slice form where the 8-slice clusters (two blocks an SM) would not all be resident
 * at once and the 4-slice ones are: cluster placement within the GPCs leaves about 90 % of
 * the SMs' block slots usable for clusters of 8 (the H200 holds 30 of them, 240 blocks, on
 * 132 SMs), so out_proj at decode batch 256, 32 tiles, ran 256 blocks in two waves. */
static int use_t128_splitk4(const metrale_ops *o, const gemm_family *f, uint32_t m, uint32_t n) {
  if (!has_kernel(o, f->t128_splitk4)) return 0;
  const uint64_t tiles = (uint64_t)CEIL_DIV(m, 128) * CEIL_DIV(n, 128);
  const uint64_t slots = 2u * (uint64_t)metrale_device_backend(o->dev)->caps.sm_count * 9u / 10u;
  return tiles * f->t128_slices > slots && tiles * 4u <= slots;
}

#define SPLITK 4u /* kernels.def gemm_*_splitk: K slices, grid.z */
/* Split K pays while the 64x64 tiles are few, so that each walks a long K with most SMs
 * idle, and each slice keeps enough k steps to fill its pipeline.  Measured on the H200
 * (docs/perf-gemm.md): out_proj (N = 2048, K = 4096) 39 -> 17 us at M <= 64 (32 tiles),
 * 39 -> 23 us at 128, 40 -> 37 us at 256 (128 tiles), slower at 512 (256 tiles); in_proj
 * (N = 12352, K = 2048) 50 -> 45 us at M <= 64 (193 tiles), slower at 128 (386). */
#define SPLITK_MAX_TILES 200u
#define SPLITK_MIN_K 1024u

static int use_splitk(const metrale_ops *o, const gemm_family *f, uint32_t m, uint32_t n, uint32_t k) {
  return has_kernel(o, f->splitk) && n && k >= SPLITK_MIN_K &&
         (uint64_t)CEIL_DIV(m, 64) * CEIL_DIV(n, 64) <= SPLITK_MAX_TILES;
}

/* K split over a cluster of 128x256 ws tiles (one block an SM) where the tiles are few: the
 * most slices whose clusters all fit at once.  Clusters of 4 or 8 blocks must sit within a
 * GPC, and at one block an SM the H200 ran 16 clusters of 4 and 8 of 8 (64 blocks) in one
 * wave but 16 of 8 (128) in two and 98 of 4 in about six, while 49 clusters of 2 (98 blocks)
 * took one: so 2 slices while the blocks fit the SMs, 4 or 8 while they fit half of them.
 * Measured there (ncu, docs/perf-gemm.md, "Split K on the ws tiles"): in_proj (N = 12352,
 * K = 2048, f32 x) at decode 8 / 64 / 128 44 / 45 / 72 -> 39 / 31 / 31 us on 2 slices;
 * out_proj (N = 2048, K = 4096) 16.9 / 16.8 / 18.6 -> 15.9 / 16.4 / 16.2 us on 8 slices, at
 * 192 and 256 28 -> 20 us on 4.  A few tiles do not pay for the 128x256 tile's long k
 * steps: prefill 64's b|a (one tile, N = 64) took 28 us on 2 slices, 12 on the 64x64 split,
 * so the slices must also fill a third of the SMs.  Up to 64 rows, 64x256 tiles first (the
 * 128-row ones run half their MMAs on absent rows).  Only the forms that won there exist
 * (f32 x in 2 slices, bf16 x in 4 or 8; on 64-row tiles f32 x in 2, bf16 x in 8; fp16 x in 2 on
 * both, docs/perf-decode.md section 26), and only up to the 256 rows measured.  Returns the
 * plan, or one with METRALE_K_COUNT. */
static gemm_plan ws_split_pick(const metrale_ops *o, const gemm_family *f, uint32_t m, uint32_t n, uint32_t k) {
  const gemm_plan none = {METRALE_K_COUNT, 0, 0, 0, 0};
  if (k < SPLITK_MIN_K || m > 256) return none;
  const uint64_t sms = metrale_device_backend(o->dev)->caps.sm_count;
  for (int r = m <= 64 ? 1 : 0; r >= 0; r--) { /* 64-row tiles first where the rows fit them */
    const uint64_t tiles = (uint64_t)CEIL_DIV(m, WS_ROWS[r]) * CEIL_DIV(n, 256);
    for (int i = 2; i >= 0; i--) {
      if (!has_kernel(o, f->ws_split[r][i])) continue;
      const uint64_t blocks = tiles * WS_SLICES[i];
      if (blocks <= (WS_SLICES[i] == 2 ? sms : sms / 2) && 3u * blocks >= sms)
        return (gemm_plan){f->ws_split[r][i], WS_ROWS[r], 256, WS_SLICES[i], 0};
    }
  }
  return none;
}

/* 128x192 instead of 128x256 tiles where they take fewer columns of work in all: whole waves
 * of tiles times the tile's width (up to the 256 rows measured: in_proj at decode 192 / 256,
 * 98 tiles of 256 in one wave with 34 of 132 SMs idle, 130 of 192; docs/perf-gemm.md). */
static int use_ws192(const metrale_ops *o, const gemm_family *f, uint32_t m, uint32_t n) {
  if (!has_kernel(o, f->ws192) || !n || m > 256) return 0;
  const uint64_t sms = metrale_device_backend(o->dev)->caps.sm_count, rows = CEIL_DIV(m, 128);
  const uint64_t w256 = (rows * CEIL_DIV(n, 256) + sms - 1) / sms * 256u;
  const uint64_t w192 = (rows * CEIL_DIV(n, 192) + sms - 1) / sms * 192u;
  return w192 < w256;
}

/* The most rows a GEMM of n columns, k deep, takes on the gemv (the comment above): 8 for small
 * weights, 4 for large ones, 2 where the backend has the 64-row ws split tiles they then take. */
static uint32_t gemv_max_m(const metrale_ops *o, const gemm_family *f, uint32_t n, uint32_t k) {
  if ((uint64_t)n * k < GEMV_LARGE_NK) return GEMV_MAX_M_SMALL;
  const int tiles = has_kernel(o, f->ws_split[1][0]) || has_kernel(o, f->ws_split[1][1]) ||
                    has_kernel(o, f->ws_split[1][2]);
  if (tiles) return GEMV_MAX_M_LARGE;
  /* Without matrix units (Vulkan's and HIP's portable shaders) the 64x64 tile is FMAs too: at 8
   * rows it does the gemv's multiply-adds eight times over on 193 blocks each 2048 deep, while the
   * gemv streams the weights once for 8 rows. */
  const uint32_t flags = metrale_device_backend(o->dev)->caps.flags;
  if (!(flags & (GPU_CAP_F16_TENSOR | GPU_CAP_HOST_MEMORY))) return GEMV_MAX_M_SIMT;
  return GEMV_MAX_M;
}

/* The kernel a GEMM of m rows (and n columns, k deep; 0 = unknown: wide and deep, so no
 * split) runs on, and its launch shape (kernels.def): grid (ceil(N/bn), ceil(M/bm), slices);
 * bm = 0 for the gemv's grid (ceil(N/8)); walk: ws_grid's. */
static gemm_plan gemm_pick(const metrale_ops *o, const gemm_family *f, uint32_t m, uint32_t n, uint32_t k) {
  if (m <= gemv_max_m(o, f, n, k) && has_kernel(o, f->gemv)) return (gemm_plan){f->gemv, 0, 8, 1, 0};
  if (n && k) {
    const gemm_plan p = ws_split_pick(o, f, m, n, k);
    if (p.id != METRALE_K_COUNT) return p;
  }
  if (n && k && use_t128_splitk(o, f, m, n, k))
    return use_t128_splitk4(o, f, m, n) ? (gemm_plan){f->t128_splitk4, 128, 128, 4, 0}
                                        : (gemm_plan){f->t128_splitk, 128, 128, f->t128_slices, 0};
  if (use_ws(o, f, m, n))
    return use_ws192(o, f, m, n) ? (gemm_plan){f->ws192, 128, 192, 1, 1} : (gemm_plan){f->ws, 128, 256, 1, 1};
  if (use_t128(o, f->t128, m, n)) return (gemm_plan){f->t128, 128, 128, 1, 0};
  if (use_splitk(o, f, m, n, k)) return (gemm_plan){f->splitk, 64, 64, SPLITK, 0};
  return (gemm_plan){f->tile, 64, 64, 1, 0};
}

static const char *gemm_name(const metrale_ops *o, const gemm_family *f, uint32_t m, uint32_t n, uint32_t k) {
  return metrale_kernel_info_get(gemm_pick(o, f, m, n, k).id)->name;
}

const char *metrale_ops_gemm_path(const metrale_ops *o, uint32_t m, uint32_t n, uint32_t k) {
  return gemm_name(o, &GEMM_BF16, m, n, k);
}
const char *metrale_ops_gemm_f32_path(const metrale_ops *o, uint32_t m, uint32_t n, uint32_t k) {
  return gemm_name(o, &GEMM_BF16_F32, m, n, k);
}
const char *metrale_ops_gemm_f32in_path(const metrale_ops *o, uint32_t m, uint32_t n, uint32_t k) {
  return gemm_name(o, &GEMM_F32IN, m, n, k);
}
const char *metrale_ops_gemm_z_path(const metrale_ops *o, uint32_t m, uint32_t n, uint32_t k) {
  return gemm_name(o, &GEMM_F32IN_HI, m, n, k);
}
const char *metrale_ops_gemm_f16_path(const metrale_ops *o, uint32_t m, uint32_t n, uint32_t k) {
  return metrale_ops_f16_gemm_fits(o, m, n, k) ? gemm_name(o, &GEMM_F16, m, n, k) : NULL;
}

size_t metrale_ops_gemm_ws_split_kernels(const metrale_ops *o, metrale_kernel_id *ids, size_t cap) {
  static const gemm_family *const families[] = {&GEMM_BF16, &GEMM_BF16_F32, &GEMM_F32IN, &GEMM_F32IN_HI};
  unsigned char seen[METRALE_K_COUNT] = {0};
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
    for (size_t r = 0; r < 2; r++)
      for (size_t s = 0; s < 3; s++) {
        const metrale_kernel_id id = families[f]->ws_split[r][s];
        if (has_kernel(o, id)) seen[id] = 1;
      }
  size_t n = 0;
  for (size_t id = 0; id < METRALE_K_COUNT; id++)
    if (seen[id]) {
      if (n < cap) ids[n] = (metrale_kernel_id)id;
      n++;
    }
  return n;
}

const char *metrale_ops_kernel_or(const metrale_ops *o, metrale_kernel_id fast, metrale_kernel_id fallback) {
  return metrale_kernel_info_get(o->k[fast] ? fast : fallback)->name;
}

const char *metrale_ops_add_rmsnorm_path(const metrale_ops *o) {
  return o->k[METRALE_K_add_rmsnorm] ? "norm.add_rmsnorm" : "elementwise.add + norm.rmsnorm (fallback)";
}

metrale_status op_rmsnorm(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr x, gpu_ptr w,
                          uint32_t rows, uint32_t n, float eps) {
  LAUNCH(o, st, rmsnorm, rows, 1, P(y), P(x), P(w), U(rows), U(n), F(eps));
}

metrale_status op_rmsnorm_f32(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr x, gpu_ptr w,
                              uint32_t rows, uint32_t n, float eps) {
  LAUNCH(o, st, rmsnorm_f32, rows, 1, P(y), P(x), P(w), U(rows), U(n), F(eps));
}

int metrale_ops_has_rmsnorm_f16(const metrale_ops *o) { return has_kernel(o, METRALE_K_rmsnorm_f16); }

metrale_status op_rmsnorm_f16(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr x, gpu_ptr w,
                              uint32_t rows, uint32_t n, float eps) {
  LAUNCH(o, st, rmsnorm_f16, rows, 1, P(y), P(x), P(w), U(rows), U(n), F(eps));
}

metrale_status op_add_rmsnorm(const metrale_ops *o, gpu_stream st, gpu_ptr h, gpu_ptr y, gpu_ptr a,
                              gpu_ptr b, gpu_ptr w, uint32_t rows, uint32_t n, float eps) {
  if (!o->k[METRALE_K_add_rmsnorm]) {
    METRALE_RETURN_IF_ERROR(op_add(o, st, h, a, b, (uint64_t)rows * n));
    return op_rmsnorm(o, st, y, h, w, rows, n, eps);
  }
  LAUNCH(o, st, add_rmsnorm, rows, 1, P(h), P(y), P(a), P(b), P(w), U(rows), U(n), F(eps));
}

#define ROWS_PER_BLOCK 8u        /* kernels.def l2norm_qk_rows: 32 threads a row */
#define GATED_ROWS_PER_BLOCK 16u /* kernels.def gated_rmsnorm_rows: two rows a warp */

metrale_status op_gated_rmsnorm(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr x,
                                gpu_ptr z, gpu_ptr w, uint32_t rows, uint32_t n, float eps) {
  if (o->k[METRALE_K_gated_rmsnorm_rows])
    LAUNCH(o, st, gated_rmsnorm_rows, CEIL_DIV(rows, GATED_ROWS_PER_BLOCK), 1, P(y), P(x), P(z), P(w),
           U(rows), U(n), F(eps));
  LAUNCH(o, st, gated_rmsnorm, rows, 1, P(y), P(x), P(z), P(w), U(rows), U(n), F(eps));
}

metrale_status op_add(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr a, gpu_ptr b,
                      uint64_t n) {
  if (n > UINT32_MAX) return METRALE_ERROR(INVALID_ARGUMENT, "add of %llu elements", (unsigned long long)n);
  LAUNCH(o, st, add, CEIL_DIV(n, 256), 1, P(y), P(a), P(b), U((uint32_t)n));
}

/* 2048 outputs a block where rows are many (the MoE FFN at prefill: 40960 rows of 512 a
 * 4096-token chunk ran at ~1.5 TB/s a block a row); decode keeps silu_mul's row blocks */
static int silu_mul_rows_fits(const metrale_ops *o, uint32_t rows, uint32_t n) {
  return o->k[METRALE_K_silu_mul_rows] && rows >= 1024 && CEIL_DIV((uint64_t)rows * n, 2048u) <= UINT32_MAX;
}

metrale_status op_silu_mul(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr gu, uint32_t rows,
                           uint32_t n) {
  if (silu_mul_rows_fits(o, rows, n))
    LAUNCH(o, st, silu_mul_rows, (uint32_t)CEIL_DIV((uint64_t)rows * n, 2048u), 1, P(y), P(gu), U(rows), U(n));
  LAUNCH(o, st, silu_mul, rows, 1, P(y), P(gu), U(rows), U(n));
}

static metrale_status check_gemm_grid(uint32_t m) {
  if (CEIL_DIV(m, 64) > 65535)
    return METRALE_ERROR(INVALID_ARGUMENT, "gemm with %u rows exceeds the grid limit", m);
  return METRALE_OK;
}

/* The grid of kernel id, whose blocks walk its tiles (kernels.def, the ws rows): one block an
 * SM (they hold a whole SM's shared memory), fewer where there are fewer tiles.  A kernel with
 * clusters of two (METRALE_KERNEL_CLUSTER) walks pairs of tile rows a cluster; this assumes
 * every SM pair can hold a cluster at once (true of the H200's 66; a GPU whose GPCs hold fewer
 * runs the clusters that do not fit after the others, correct but slower). */
static gpu_dim3 ws_grid(const metrale_ops *o, metrale_kernel_id id, uint32_t m, uint32_t n, uint32_t bm,
                        uint32_t bn) {
  const uint32_t pair = metrale_kernel_info_get(id)->cluster_x;
  const uint64_t items = CEIL_DIV((uint64_t)CEIL_DIV(m, bm), pair) * CEIL_DIV(n, bn);
  const uint64_t slots = metrale_device_backend(o->dev)->caps.sm_count / pair;
  const uint64_t c = items < slots ? items : slots ? slots : 1u;
  return (gpu_dim3){(uint32_t)(c * pair), 1, 1};
}

static metrale_status gemm_run(const metrale_ops *o, const gemm_family *f, gpu_stream st, gpu_ptr y,
                               gpu_ptr x, gpu_ptr w, uint32_t m, uint32_t n, uint32_t k) {
  const gemm_plan p = gemm_pick(o, f, m, n, k);
  /* a family without a fallback tile (the fp16 one) picks none where no form takes the shape */
  if (!has_kernel(o, p.id))
    return METRALE_ERROR(INTERNAL, "no %s kernel takes M = %u, N = %u, K = %u",
                         metrale_kernel_info_get(f->ws)->name, m, n, k);
  if (p.bm) METRALE_RETURN_IF_ERROR(check_gemm_grid(m));
  const gpu_dim3 grid = p.walk ? ws_grid(o, p.id, m, n, p.bm, p.bn)
                               : (gpu_dim3){CEIL_DIV(n, p.bn), p.bm ? CEIL_DIV(m, p.bm) : 1u, p.slices};
  const gpu_arg args[] = {P(y), P(x), P(w), U(m), U(n), U(k)};
  return metrale_launch(o->dev, p.id, o->k[p.id], grid, st, args, 6);
}

metrale_status op_gemm(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr x, gpu_ptr w,
                       uint32_t m, uint32_t n, uint32_t k) {
  return gemm_run(o, &GEMM_BF16, st, y, x, w, m, n, k);
}

metrale_status op_gemm_f32(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr x, gpu_ptr w,
                           uint32_t m, uint32_t n, uint32_t k) {
  return gemm_run(o, &GEMM_BF16_F32, st, y, x, w, m, n, k);
}

metrale_status op_gemm_f32in(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr x, gpu_ptr w,
                             uint32_t m, uint32_t n, uint32_t k) {
  return gemm_run(o, &GEMM_F32IN, st, y, x, w, m, n, k);
}

metrale_status op_gemm_f32in_z(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr x, gpu_ptr w,
                               uint32_t m, uint32_t n, uint32_t k) {
  return gemm_run(o, &GEMM_F32IN_HI, st, y, x, w, m, n, k);
}

/* The backend says its fp16 products run at the bf16 rate (and METRALE_NO_FP16 is not set):
 * the one condition, beside the kernels, of every fp16 path. */
static int f16_fast(const metrale_ops *o) {
  return (metrale_device_backend(o->dev)->caps.flags & GPU_CAP_F16_TENSOR) != 0;
}

int metrale_ops_has_f16_proj(const metrale_ops *o) {
  return has_kernel(o, METRALE_K_f32_to_f16) && has_kernel(o, METRALE_K_gemm_f16_ws) && f16_fast(o);
}

int metrale_ops_f16_gemm_fits(const metrale_ops *o, uint32_t m, uint32_t n, uint32_t k) {
  if (!metrale_ops_has_f16_proj(o) || (uint64_t)m * k > UINT32_MAX) return 0;
  if (use_ws(o, &GEMM_F16, m, n)) return 1;
  return m > gemv_max_m(o, &GEMM_F32IN, n, k) && n && k && ws_split_pick(o, &GEMM_F16, m, n, k).id != METRALE_K_COUNT;
}

metrale_status op_f32_to_f16(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr x, uint32_t n) {
  LAUNCH(o, st, f32_to_f16, CEIL_DIV(n, 1024), 1, P(y), P(x), U(n));
}

metrale_status op_gemm_f16(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr x, gpu_ptr w, uint32_t m,
                           uint32_t n, uint32_t k) {
  return gemm_run(o, &GEMM_F16, st, y, x, w, m, n, k);
}

int metrale_ops_f16_in_proj_fits(const metrale_ops *o, uint32_t m, uint32_t n0, uint32_t n1, uint32_t n2,
                                 uint32_t k) {
  const uint64_t n = (uint64_t)n0 + n1 + n2;
  return has_kernel(o, METRALE_K_gemm_f16_ws_cols3) && has_kernel(o, METRALE_K_gates_ba) && n0 % 2 == 0 &&
         n1 % 2 == 0 && n <= UINT32_MAX && metrale_ops_f16_gemm_fits(o, m, (uint32_t)n, k);
}

metrale_status op_gemm_f16_cols3(const metrale_ops *o, gpu_stream st, gpu_ptr y0, gpu_ptr y1, gpu_ptr y2, gpu_ptr x,
                                 gpu_ptr w, uint32_t m, uint32_t n0, uint32_t n1, uint32_t n2, uint32_t k,
                                 int y0_half) {
  if (y0_half) {
    const gpu_dim3 grid = ws_grid(o, METRALE_K_gemm_f16_ws_cols3q, m, n0 + n1 + n2, 128, 256);
    LAUNCH(o, st, gemm_f16_ws_cols3q, grid.x, 1, P(y0), P(y1), P(y2), P(x), P(w), U(m), U(n0), U(n1), U(n2), U(k));
  }
  const gpu_dim3 grid = ws_grid(o, METRALE_K_gemm_f16_ws_cols3, m, n0 + n1 + n2, 128, 256);
  LAUNCH(o, st, gemm_f16_ws_cols3, grid.x, 1, P(y0), P(y1), P(y2), P(x), P(w), U(m), U(n0), U(n1), U(n2), U(k));
}

metrale_status op_split(const metrale_ops *o, gpu_stream st, gpu_ptr mixed, gpu_ptr z, gpu_ptr b,
                        gpu_ptr a, gpu_ptr p, uint32_t t, uint32_t nk, uint32_t nv, uint32_t dk,
                        uint32_t dv) {
  LAUNCH(o, st, split_qkvzba35, t, 1, P(mixed), P(z), P(b), P(a), P(p), U(t), U(nk), U(nv), U(dk), U(dv));
}

#define CONV_TILE 64u /* kernels.def conv1d_prefill_tiled: tokens per block */

/* The tiled kernel's grid has one row per 64 tokens; beyond 65535 rows, the per-sequence one. */
static int conv_tiled_fits(const metrale_ops *o, uint32_t t) {
  return o->k[METRALE_K_conv1d_prefill_tiled] && CEIL_DIV(t, CONV_TILE) <= 65535;
}

const char *metrale_ops_conv1d_prefill_path(const metrale_ops *o, int mixed_half, int v_half, int qk_planes) {
  if (mixed_half && v_half && qk_planes)
    return "conv.conv1d_prefill_l2norm_qkh (mixed in IEEE half from the one in_proj launch, q and k out in IEEE "
           "half into the whole-head core's planes, v in IEEE half; 4 channels a thread, the q/k l2norm on the way "
           "out; where the core takes gdn_chunked.delta_rule_prefill_chunked_wh_prep_qkh, else "
           "conv.conv1d_prefill_l2norm_xhv; from 1.5 blocks an SM, else mixed in f32 and "
           "conv.conv1d_prefill_tiled, then the l2norm)";
  if (mixed_half && v_half)
    return "conv.conv1d_prefill_l2norm_xhv (mixed in IEEE half from the one in_proj launch, v out in IEEE half "
           "for the fp16 core's phase 0; 4 channels a thread, the q/k l2norm on the way out; from 1.5 blocks "
           "an SM, else mixed in f32 and conv.conv1d_prefill_tiled, then the l2norm)";
  if (mixed_half)
    return "conv.conv1d_prefill_l2norm_xh (mixed in IEEE half from the one in_proj launch; 4 channels a "
           "thread, the q/k l2norm on the way out; from 1.5 blocks an SM, else mixed in f32 and "
           "conv.conv1d_prefill_tiled, then the l2norm)";
  if (o->k[METRALE_K_conv1d_prefill_l2norm])
    return "conv.conv1d_prefill_l2norm (4 channels a thread, the q/k l2norm on the way out; from 1.5 "
           "blocks an SM, else conv.conv1d_prefill_tiled, then the l2norm)";
  return o->k[METRALE_K_conv1d_prefill_tiled] ? "conv.conv1d_prefill_tiled (64 tokens a block), then the l2norm"
                                              : "conv.conv1d_prefill, then the l2norm";
}

metrale_status op_conv1d_prefill(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr x, gpu_ptr w,
                                 gpu_ptr state, gpu_ptr cu_seqlens, gpu_ptr slots, uint32_t t,
                                 uint32_t s, uint32_t c, uint32_t kw) {
  if (conv_tiled_fits(o, t))
    LAUNCH(o, st, conv1d_prefill_tiled, CEIL_DIV(c, 256), CEIL_DIV(t, CONV_TILE), P(y), P(x), P(w),
           P(state), P(cu_seqlens), P(slots), U(s), U(c), U(kw));
  if (s > 65535) return METRALE_ERROR(INVALID_ARGUMENT, "prefill of %u sequences at once (max 65535)", s);
  LAUNCH(o, st, conv1d_prefill, CEIL_DIV(c, 256), s, P(y), P(x), P(w), P(state), P(cu_seqlens),
         P(slots), U(s), U(c), U(kw));
}

/* kernels.def conv1d_prefill_l2norm: 1024 channels a block; the shapes it takes, and only
 * with at least 1.5 blocks an SM: its threads do four channels' work, so a small grid is
 * latency bound (H200, C = 8192: 45 us at 64 to 1024 tokens, 8 to 128 blocks, where the conv
 * and l2norm pair takes 19-35 us; 55 against 62 us at 2048 tokens, 256 blocks; docs/perf-prefill.md) */
#define CONV_L2_CHANNELS 1024u
static int conv_l2norm_shape_fits(const metrale_ops *o, gpu_ptr y, uint32_t t, uint32_t c, uint32_t dk) {
  const uint64_t blocks = (uint64_t)CEIL_DIV(c, CONV_L2_CHANNELS) * CEIL_DIV(t, CONV_TILE);
  return c % 4 == 0 && dk >= 4 && dk <= 128 && (dk & (dk - 1)) == 0 && y % 16 == 0 &&
         CEIL_DIV(t, CONV_TILE) <= 65535 && 2 * blocks >= 3 * (uint64_t)metrale_device_backend(o->dev)->caps.sm_count;
}
static int conv_l2norm_fits(const metrale_ops *o, gpu_ptr y, gpu_ptr x, uint32_t t, uint32_t c, uint32_t dk) {
  return o->k[METRALE_K_conv1d_prefill_l2norm] && x % 16 == 0 && conv_l2norm_shape_fits(o, y, t, c, dk);
}

int metrale_ops_mixed_half_fits(const metrale_ops *o, gpu_ptr y, gpu_ptr x, uint32_t t, uint32_t c, uint32_t dk) {
  return has_kernel(o, METRALE_K_gemm_f16_ws_cols3q) && has_kernel(o, METRALE_K_conv1d_prefill_l2norm_xh) &&
         x % 8 == 0 && conv_l2norm_shape_fits(o, y, t, c, dk);
}

/* Its blocks along the tokens (grid.y; a block takes T / grid.y tokens): as many as make
 * whole waves at three blocks an SM (its launch bounds), the waves that 64-token blocks
 * would start.  At 4096 tokens and C = 8192 on the H200: 8 x 99 blocks of ~41 tokens in two
 * waves, where 8 x 64 blocks of 64 ran 1.3 waves in the time of two (docs/perf-prefill.md). */
static uint32_t conv_l2norm_rows(const metrale_ops *o, uint32_t t, uint32_t c) {
  const uint64_t cols = CEIL_DIV(c, CONV_L2_CHANNELS), tiles = CEIL_DIV(t, CONV_TILE);
  const uint64_t slots = 3u * (uint64_t)metrale_device_backend(o->dev)->caps.sm_count;
  const uint64_t waves = CEIL_DIV(cols * tiles, slots), rows = waves * slots / cols;
  return (uint32_t)(rows < tiles ? tiles : rows > t ? t : rows);
}

metrale_status op_conv1d_prefill_l2norm(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr x, gpu_ptr w,
                                        gpu_ptr state, gpu_ptr cu_seqlens, gpu_ptr slots, uint32_t t,
                                        uint32_t s, uint32_t c, uint32_t kw, uint32_t nk, uint32_t dk, int x_half,
                                        gpu_ptr vh, gpu_ptr planes) {
  if (2 * (uint64_t)nk * dk > c)
    return METRALE_ERROR(INVALID_ARGUMENT, "conv + l2norm: 2*nk*dk = %llu q/k channels > C = %u",
                         (unsigned long long)(2 * (uint64_t)nk * dk), c);
  if (planes) { /* the caller checked metrale_ops_qk_planes_fits, which implies the shapes below */
    if (!vh || !x_half || !metrale_ops_mixed_half_fits(o, planes, x, t, c, dk) || dk != 128 ||
        !has_kernel(o, METRALE_K_conv1d_prefill_l2norm_qkh) || vh % 16 != 0)
      return METRALE_ERROR(INVALID_ARGUMENT, "conv + l2norm with q and k to the core's planes: "
                           "conv.conv1d_prefill_l2norm_qkh is missing or does not take %u tokens of %u channels "
                           "(dk = %u, x %s, vh at %#llx, planes at %#llx)", t, c, dk, x_half ? "half" : "f32",
                           (unsigned long long)vh, (unsigned long long)planes);
    LAUNCH(o, st, conv1d_prefill_l2norm_qkh, CEIL_DIV(c, CONV_L2_CHANNELS), conv_l2norm_rows(o, t, c), P(planes),
           P(vh), P(x), P(w), P(state), P(cu_seqlens), P(slots), U(s), U(c), U(kw), U(nk), U(dk));
  }
  if (vh) {
    if (!x_half || !metrale_ops_mixed_half_fits(o, y, x, t, c, dk) || !has_kernel(o, METRALE_K_conv1d_prefill_l2norm_xhv) ||
        vh % 16 != 0)
      return METRALE_ERROR(INVALID_ARGUMENT, "conv + l2norm with v to half: conv.conv1d_prefill_l2norm_xhv is "
                           "missing or does not take %u tokens of %u channels (dk = %u, x %s, vh at %#llx)", t, c, dk,
                           x_half ? "half" : "f32", (unsigned long long)vh);
    LAUNCH(o, st, conv1d_prefill_l2norm_xhv, CEIL_DIV(c, CONV_L2_CHANNELS), conv_l2norm_rows(o, t, c), P(y), P(vh),
           P(x), P(w), P(state), P(cu_seqlens), P(slots), U(s), U(c), U(kw), U(nk), U(dk));
  }
  if (x_half) {
    if (!metrale_ops_mixed_half_fits(o, y, x, t, c, dk))
      return METRALE_ERROR(INVALID_ARGUMENT, "conv + l2norm on half input: conv.conv1d_prefill_l2norm_xh is "
                           "missing or does not take %u tokens of %u channels (dk = %u)", t, c, dk);
    LAUNCH(o, st, conv1d_prefill_l2norm_xh, CEIL_DIV(c, CONV_L2_CHANNELS), conv_l2norm_rows(o, t, c), P(y), P(x),
           P(w), P(state), P(cu_seqlens), P(slots), U(s), U(c), U(kw), U(nk), U(dk));
  }
  if (conv_l2norm_fits(o, y, x, t, c, dk))
    LAUNCH(o, st, conv1d_prefill_l2norm, CEIL_DIV(c, CONV_L2_CHANNELS), conv_l2norm_rows(o, t, c), P(y), P(x), P(w),
           P(state), P(cu_seqlens), P(slots), U(s), U(c), U(kw), U(nk), U(dk));
  METRALE_RETURN_IF_ERROR(op_conv1d_prefill(o, st, y, x, w, state, cu_seqlens, slots, t, s, c, kw));
  return op_l2norm_qk(o, st, y, t, nk, dk, c);
}

metrale_status op_conv1d_update(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr x, gpu_ptr w,
                                gpu_ptr state, gpu_ptr slots, uint32_t bsz, uint32_t c, uint32_t kw) {
  if (bsz > 65535) return METRALE_ERROR(INVALID_ARGUMENT, "decode batch of %u (max 65535)", bsz);
  LAUNCH(o, st, conv1d_update, CEIL_DIV(c, 256), bsz, P(y), P(x), P(w), P(state), P(slots), U(bsz),
         U(c), U(kw));
}

metrale_status op_l2norm_qk(const metrale_ops *o, gpu_stream st, gpu_ptr x, uint32_t t, uint32_t nk,
                            uint32_t dk, uint32_t ld) {
  const uint64_t heads = (uint64_t)t * 2 * nk;
  if (heads > UINT32_MAX)
    return METRALE_ERROR(INVALID_ARGUMENT, "l2norm of %u tokens x %u key heads", t, nk);
  if (o->k[METRALE_K_l2norm_qk_rows])
    LAUNCH(o, st, l2norm_qk_rows, CEIL_DIV(heads, ROWS_PER_BLOCK), 1, P(x), U(t), U(nk), U(dk), U(ld));
  LAUNCH(o, st, l2norm_qk, (uint32_t)heads, 1, P(x), U(t), U(nk), U(dk), U(ld));
}

metrale_status op_gates(const metrale_ops *o, gpu_stream st, gpu_ptr g, gpu_ptr beta, gpu_ptr a,
                        gpu_ptr b, gpu_ptr a_log, gpu_ptr dt_bias, uint32_t n, uint32_t nv) {
  LAUNCH(o, st, gates, CEIL_DIV(n, 256), 1, P(g), P(beta), P(a), P(b), P(a_log), P(dt_bias), U(n), U(nv));
}

metrale_status op_gates_ba(const metrale_ops *o, gpu_stream st, gpu_ptr g, gpu_ptr beta, gpu_ptr ba,
                           gpu_ptr a_log, gpu_ptr dt_bias, uint32_t t, uint32_t nv) {
  const uint64_t n = (uint64_t)t * nv;
  if (n > UINT32_MAX) return METRALE_ERROR(INVALID_ARGUMENT, "gates for %llu heads", (unsigned long long)n);
  LAUNCH(o, st, gates_ba, CEIL_DIV(n, 256), 1, P(g), P(beta), P(ba), P(a_log), P(dt_bias), U((uint32_t)n), U(nv));
}

metrale_status op_ba_gates(const metrale_ops *o, gpu_stream st, gpu_ptr g, gpu_ptr beta, gpu_ptr ba,
                           gpu_ptr x, gpu_ptr w_ba, gpu_ptr a_log, gpu_ptr dt_bias, uint32_t t, uint32_t nv,
                           uint32_t h) {
  const uint64_t n = (uint64_t)t * nv;
  if (n > UINT32_MAX) return METRALE_ERROR(INVALID_ARGUMENT, "gates for %llu heads", (unsigned long long)n);
  if (o->k[METRALE_K_gates_ba]) {
    METRALE_RETURN_IF_ERROR(op_gemm_f32in(o, st, ba, x, w_ba, t, 2 * nv, h));
    return op_gates_ba(o, st, g, beta, ba, a_log, dt_bias, t, nv);
  }
  const gpu_ptr b = ba, a = ba + n * 4, w_a = w_ba + (uint64_t)nv * h * 2;
  METRALE_RETURN_IF_ERROR(op_gemm_f32in(o, st, b, x, w_ba, t, nv, h));
  METRALE_RETURN_IF_ERROR(op_gemm_f32in(o, st, a, x, w_a, t, nv, h));
  return op_gates(o, st, g, beta, a, b, a_log, dt_bias, (uint32_t)n, nv);
}

metrale_status op_delta_rule_decode(const metrale_ops *o, gpu_stream st, gpu_ptr out, gpu_ptr qkv,
                                    gpu_ptr g, gpu_ptr beta, gpu_ptr state, gpu_ptr slots,
                                    uint32_t bsz, uint32_t nk, uint32_t nv, uint32_t dk, uint32_t dv) {
  LAUNCH(o, st, delta_rule_decode, bsz * nv, 1, P(out), P(qkv), P(g), P(beta), P(state), P(slots),
         U(bsz), U(nk), U(nv), U(dk), U(dv));
}

/* kernels.def delta_rule_prefill_chunked: heads it takes, chunks it may need, and the
 * workspace record of one (chunk, value head). */
#define CHUNKED_DK_MAX 128u
#define CHUNKED_DV_MAX 128u
#define CHUNKED_REC_BYTES 147584u
/* Value columns per phase-1 block, 16 or 32 (the contract allows both): on the H200 16
 * (two blocks per SM) took 5.7 us a chunk step, 32 (one block per SM) 7.2 us.  The wgmma
 * phase 1 (delta_rule_prefill_chunked_wg) and delta_rule_prefill_chunked_f16 take 32. */
#define CHUNKED_COLS 16u
#define CHUNKED_WG_COLS 32u
/* Below this many tokens per sequence on average the sequential kernel is taken: it costs
 * ~1-3 us a token per sequence, the chunked one a launch of phase 0 plus a chunk step
 * (docs/perf-prefill.md), so short sequences are faster token by token.  64 where the fp16
 * chunked kernel does not run (measured only on Vulkan, where the crossover moves between 32
 * and past 128 tokens with the number of sequences: docs/perf-prefill.md part 22). */
#define CHUNKED_MIN_AVG_TOKENS 64
/* The same where the fp16 chunked kernel runs.  On the H200 (docs/perf-prefill.md part 22; the
 * core of 1, 8, 32 and 128 sequences of 8 to 128 tokens, both paths forced) it beat the
 * sequential kernel from ~10-12 tokens a sequence, except at 8 sequences, from ~20-30 (an H100
 * agreed); at 32 tokens it took 18.3 / 50.1 / 151.8 / 520 us against 38.7 / 57.6 / 266.4 / 1024. */
#define CHUNKED_F16_MIN_AVG_TOKENS 32
#define TEXT_OF_(x) #x
#define TEXT_OF(x) TEXT_OF_(x)

static int chunked_fits(const metrale_ops *o, uint32_t dk, uint32_t dv) {
  return o->k[METRALE_K_delta_rule_prefill_chunked] && dk > 0 && dk <= CHUNKED_DK_MAX &&
         dk % 8 == 0 && dv > 0 && dv <= CHUNKED_DV_MAX && dv % 8 == 0;
}

static int chunked_f16(const metrale_ops *o);

static int chunked_pays(const metrale_ops *o, uint32_t t, uint32_t s, uint32_t dk, uint32_t dv) {
  const uint64_t min_avg = chunked_f16(o) ? CHUNKED_F16_MIN_AVG_TOKENS : CHUNKED_MIN_AVG_TOKENS;
  return chunked_fits(o, dk, dv) && s > 0 && (uint64_t)t >= min_avg * s;
}

static uint64_t chunked_chunks(uint32_t t, uint32_t s) {
  uint64_t nc = ((uint64_t)t + 63ull * s) / 64;
  return nc < t ? nc : t;
}

static uint32_t wh_segments(const metrale_ops *o, uint32_t t, uint32_t s, uint32_t nv, uint32_t dk, uint32_t dv);

uint64_t metrale_ops_delta_rule_ws_bytes(const metrale_ops *o, uint32_t t, uint32_t s,
                                         uint32_t nv, uint32_t dk, uint32_t dv) {
  if (!chunked_pays(o, t, s, dk, dv)) return 0;
  const uint64_t nseg = wh_segments(o, t, s, nv, dk, dv); /* kernels.def: and the segments' matrices */
  return chunked_chunks(t, s) * nv * CHUNKED_REC_BYTES + (nseg ? (uint64_t)s * nv * (2 * nseg - 3) * 65536 : 0);
}

/* Both phases by delta_rule_prefill_chunked_f16 (IEEE half operands in the chunk step;
 * docs/numerics.md) where the backend has it and says its fp16 tiles are fast. */
static int chunked_f16(const metrale_ops *o) {
  return has_kernel(o, METRALE_K_delta_rule_prefill_chunked_f16) && f16_fast(o);
}

/* Both phases by the whole-head kernel (delta_rule_prefill_chunked_wh_prep, then
 * delta_rule_prefill_chunked_wh: a block a (sequence, value head) that reads a chunk's inputs
 * once and makes everything but the solve itself; docs/perf-prefill.md part 23) where the
 * backend has them, for v in half, dk = dv = 128, a 16-byte aligned o, and enough blocks: its
 * chunk step (~3 us, a block an SM) is shorter than the fp16 kernel's for a whole head, but
 * one sequence of nv = 32 heads keeps 32 SMs busy.  On an H100 at 16384 tokens (32 value
 * heads) it took 1145 us as one sequence against the fp16 kernel's 925, and 741 / 542 / 558 /
 * 621 us as 2 / 4 / 8 / 32 against 997 / 1252 / 1058 / 934; so from a third of the SMs in
 * blocks (s nv >= SMs / 3: 44 on 132 SMs; s = 0: the path report's "where it pays").
 * METRALE_NO_WHOLE_HEAD=1 takes it out (metrale_ops_init), to time one against the other. */
static int chunked_wh(const metrale_ops *o, uint32_t dk, uint32_t dv, gpu_ptr out, uint32_t s, uint32_t nv) {
  const uint64_t sms = metrale_device_backend(o->dev)->caps.sm_count;
  return has_kernel(o, METRALE_K_delta_rule_prefill_chunked_wh_prep) &&
         has_kernel(o, METRALE_K_delta_rule_prefill_chunked_wh) && chunked_f16(o) && dk == 128 && dv == 128 &&
         out % 16 == 0 && (s == 0 || 3 * (uint64_t)s * nv >= sms);
}

/* The segments the whole-head scan cuts each sequence into where too few (sequence, value head)
 * blocks would run (delta_rule_prefill_chunked_wh_seg); 0: none.  Phase 1 runs s nv (2 nseg - 3)
 * blocks, phase 3 s nv (nseg - 1), each a segment of about 1/nseg of a sequence's chunk steps,
 * one block an SM: the nseg of the fewest waves' steps, (waves(1) + waves(3)) / nseg of the whole
 * sequence's, at nv = 32 on 132 SMs 5 (3/5).  Taken where that is at most 2/3 and sequences
 * average 12 chunks a segment: on an H100 (docs/perf-prefill.md part 24), one sequence of 32 heads
 * in 5 segments took 416 / 734 / 2590 us at 8192 / 16384 / 65536 tokens against the fp16 kernel's
 * 466 / 913 / 3590, but 259 against 245 at 4096 (13 chunks a segment); since the segments' passes
 * leave out what the gates made the state forget (part 26) 188 at 4096 at the bench's gates and 238
 * at slow ones, against 245.  METRALE_WH_SEGMENTS=n forces n (0: none) where the kernel runs. */
static uint32_t wh_segments(const metrale_ops *o, uint32_t t, uint32_t s, uint32_t nv, uint32_t dk, uint32_t dv) {
  const uint64_t sms = metrale_device_backend(o->dev)->caps.sm_count;
  if (!has_kernel(o, METRALE_K_delta_rule_prefill_chunked_wh_seg) || !chunked_wh(o, dk, dv, 0, 0, 0) || s == 0 ||
      sms == 0)
    return 0;
  if (o->wh_nseg >= 0) return (uint32_t)o->wh_nseg;
  if (3 * (uint64_t)s * nv >= sms) return 0; /* the whole sequence a block fills a third of the SMs */
  uint32_t best = 0;
  uint64_t best_w = 0, best_n = 1; /* waves / segments, as a fraction */
  for (uint64_t n = METRALE_WH_NSEG_MIN; n <= METRALE_WH_NSEG_MAX; n++) {
    const uint64_t w = CEIL_DIV((uint64_t)s * nv * (2 * n - 3), sms) + CEIL_DIV((uint64_t)s * nv * (n - 1), sms);
    if ((uint64_t)t < 12 * n * 64 * s) break; /* 12 chunks a segment on average */
    if (!best || w * best_n < best_w * n) best = (uint32_t)n, best_w = w, best_n = n;
  }
  return best && 3 * best_w <= 2 * best_n ? best : 0;
}

/* Segment 0's length against each other segment's, in sixteenths (wh_seg's w0).  Segment 0 runs
 * in phase 1 with its outputs beside the F and M blocks, which have none, and phase 3 runs the
 * others.  With b = s nv blocks a kind, the 2 b (nseg - 2) F and M blocks share the SMs segment 0
 * leaves, k an SM, so phase 1 takes max(a L0, k r a L) for segments of L chunks (L0 segment 0's),
 * a a step with outputs and r a the step without: balanced at L0 = k r L.  r = 0.7 (H100, ncu at
 * 16384 tokens: 3.3 against 4.7 us, docs/perf-prefill.md part 24).  At nv = 32 on 132 SMs in 5
 * segments k = 2: w0 = 22, counted 7 % off phases 1 and 3 (part 25).  METRALE_WH_SEG0 forces it. */
static uint32_t wh_seg0(const metrale_ops *o, uint32_t s, uint32_t nv, uint32_t nseg) {
  if (o->wh_w0 > 0) return (uint32_t)o->wh_w0;
  const uint64_t sms = metrale_device_backend(o->dev)->caps.sm_count, b = (uint64_t)s * nv;
  if (sms <= b) return METRALE_WH_W0_EQUAL;
  const uint64_t k = CEIL_DIV(2 * b * (nseg - 2), sms - b), w = (k * METRALE_WH_W0_EQUAL * 7 + 5) / 10;
  return w < METRALE_WH_W0_MIN ? METRALE_WH_W0_MIN : w > METRALE_WH_W0_MAX ? METRALE_WH_W0_MAX : (uint32_t)w;
}

const char *metrale_ops_delta_rule_prefill_path(const metrale_ops *o, uint32_t dk, uint32_t dv, int v_half) {
  if (!chunked_fits(o, dk, dv)) return "gdn.delta_rule_prefill (sequential)";
/* the whole-head kernel's path, its phase 0 as named */
#define WH_PATH(phase0)                                                                                          \
  "gdn_chunked.delta_rule_prefill_chunked_wh (chunks of 64 tokens, a whole value head a block; phase 0 by " phase0 \
  ") where sequences x value heads >= SMs/3, else with each sequence cut into 3 to 8 segments "                    \
  "(gdn_chunked.delta_rule_prefill_chunked_wh_seg) where they average 12 chunks a segment, else "                  \
  "gdn_chunked.delta_rule_prefill_chunked_f16 (phase 0 by gdn_chunked.delta_rule_prefill_chunked_f16_prep_vh); "   \
  "both fp16 operands in the chunk step, the state f32 and scaled per chunk; when sequences average "               \
  TEXT_OF(CHUNKED_F16_MIN_AVG_TOKENS) "+ tokens, else gdn.delta_rule_prefill"
  if (v_half && chunked_wh(o, dk, dv, 0, 0, 0) && has_kernel(o, METRALE_K_conv1d_prefill_l2norm_qkh) &&
      has_kernel(o, METRALE_K_delta_rule_prefill_chunked_wh_prep_qkh))
    return WH_PATH("gdn_chunked.delta_rule_prefill_chunked_wh_prep_qkh on v in IEEE half and q and k in IEEE half "
                   "in the core's planes from the conv");
  if (v_half && chunked_wh(o, dk, dv, 0, 0, 0))
    return WH_PATH("gdn_chunked.delta_rule_prefill_chunked_wh_prep on v in IEEE half from the conv");
#undef WH_PATH
  if (v_half)
    return "gdn_chunked.delta_rule_prefill_chunked_f16 (chunks of 64 tokens; phase 0 by "
           "gdn_chunked.delta_rule_prefill_chunked_f16_prep_vh on v in IEEE half from the conv; fp16 operands "
           "in the chunk step, the state f32 and scaled per chunk) when sequences average "
           TEXT_OF(CHUNKED_F16_MIN_AVG_TOKENS) "+ tokens, else gdn.delta_rule_prefill";
  if (chunked_f16(o) && o->k[METRALE_K_delta_rule_prefill_chunked_f16_prep])
    return "gdn_chunked.delta_rule_prefill_chunked_f16 (chunks of 64 tokens; phase 0 by "
           "gdn_chunked.delta_rule_prefill_chunked_f16_prep; fp16 operands in the chunk step, the state f32 "
           "and scaled per chunk) when sequences average " TEXT_OF(CHUNKED_F16_MIN_AVG_TOKENS)
           "+ tokens, else gdn.delta_rule_prefill";
  if (chunked_f16(o))
    return "gdn_chunked.delta_rule_prefill_chunked_f16 (chunks of 64 tokens, both phases; fp16 operands "
           "in the chunk step, the state f32 and scaled per chunk) when sequences average "
           TEXT_OF(CHUNKED_F16_MIN_AVG_TOKENS) "+ tokens, else gdn.delta_rule_prefill";
#define AVG64 TEXT_OF(CHUNKED_MIN_AVG_TOKENS)
  static const char *const path[2][2] = {
      /* [has _prep][has _wg] */
      {"gdn_chunked.delta_rule_prefill_chunked (chunks of 64 tokens) when sequences average " AVG64
       "+ tokens, else gdn.delta_rule_prefill",
       "gdn_chunked.delta_rule_prefill_chunked (chunks of 64 tokens; phase 1 by "
       "gdn_chunked.delta_rule_prefill_chunked_wg) when sequences average " AVG64
       "+ tokens, else gdn.delta_rule_prefill"},
      {"gdn_chunked.delta_rule_prefill_chunked (chunks of 64 tokens; phase 0 by "
       "gdn_chunked.delta_rule_prefill_chunked_prep) when sequences average " AVG64
       "+ tokens, else gdn.delta_rule_prefill",
       "gdn_chunked.delta_rule_prefill_chunked (chunks of 64 tokens; phase 0 by "
       "gdn_chunked.delta_rule_prefill_chunked_prep, phase 1 by "
       "gdn_chunked.delta_rule_prefill_chunked_wg) when sequences average " AVG64
       "+ tokens, else gdn.delta_rule_prefill"}};
#undef AVG64
  return path[!!o->k[METRALE_K_delta_rule_prefill_chunked_prep]]
             [!!o->k[METRALE_K_delta_rule_prefill_chunked_wg]];
}

int metrale_ops_v_half_fits(const metrale_ops *o, gpu_ptr vh, gpu_ptr ws, uint32_t t, uint32_t s, uint32_t dk,
                            uint32_t dv) {
  return has_kernel(o, METRALE_K_conv1d_prefill_l2norm_xhv) &&
         has_kernel(o, METRALE_K_delta_rule_prefill_chunked_f16_prep_vh) && chunked_f16(o) && ws &&
         chunked_pays(o, t, s, dk, dv) && vh % 16 == 0;
}

static metrale_status launch_chunked(const metrale_ops *o, gpu_stream st, uint32_t phase,
                                     uint64_t grid, gpu_ptr out, gpu_ptr qkv, gpu_ptr g,
                                     gpu_ptr beta, gpu_ptr state, gpu_ptr cu_seqlens,
                                     gpu_ptr slots, gpu_ptr ws, uint32_t s, uint32_t nk,
                                     uint32_t nv, uint32_t dk, uint32_t dv, gpu_ptr vh) {
  if (grid > INT32_MAX)
    return METRALE_ERROR(INVALID_ARGUMENT, "chunked delta rule: %llu blocks in one launch",
                         (unsigned long long)grid);
  if (vh && phase == 0) /* the caller checked metrale_ops_v_half_fits */
    LAUNCH(o, st, delta_rule_prefill_chunked_f16_prep_vh, (uint32_t)grid, 1, P(out), P(qkv), P(g), P(beta), P(state),
           P(cu_seqlens), P(slots), P(ws), U(s), U(nk), U(nv), U(dk), U(dv), U(phase), P(vh));
  if (chunked_f16(o) && phase == 0 && o->k[METRALE_K_delta_rule_prefill_chunked_f16_prep])
    LAUNCH(o, st, delta_rule_prefill_chunked_f16_prep, (uint32_t)grid, 1, P(out), P(qkv), P(g), P(beta), P(state),
           P(cu_seqlens), P(slots), P(ws), U(s), U(nk), U(nv), U(dk), U(dv), U(phase));
  if (chunked_f16(o)) /* its records are its own: both phases (phase 0 by its _prep entry where there) */
    LAUNCH(o, st, delta_rule_prefill_chunked_f16, (uint32_t)grid, 1, P(out), P(qkv), P(g),
           P(beta), P(state), P(cu_seqlens), P(slots), P(ws), U(s), U(nk), U(nv), U(dk), U(dv),
           U(phase));
  /* kernels.def: these entries' phase 0 writes the records each of their phase 1 reads */
  if (phase == 0 && o->k[METRALE_K_delta_rule_prefill_chunked_prep])
    LAUNCH(o, st, delta_rule_prefill_chunked_prep, (uint32_t)grid, 1, P(out), P(qkv), P(g),
           P(beta), P(state), P(cu_seqlens), P(slots), P(ws), U(s), U(nk), U(nv), U(dk), U(dv),
           U(phase));
  if (phase == 1 && o->k[METRALE_K_delta_rule_prefill_chunked_wg])
    LAUNCH(o, st, delta_rule_prefill_chunked_wg, (uint32_t)grid, 1, P(out), P(qkv), P(g),
           P(beta), P(state), P(cu_seqlens), P(slots), P(ws), U(s), U(nk), U(nv), U(dk), U(dv),
           U(phase));
  LAUNCH(o, st, delta_rule_prefill_chunked, (uint32_t)grid, 1, P(out), P(qkv), P(g), P(beta),
         P(state), P(cu_seqlens), P(slots), P(ws), U(s), U(nk), U(nv), U(dk), U(dv), U(phase));
}

static metrale_status launch_wh(const metrale_ops *o, gpu_stream st, uint32_t phase, uint64_t grid, gpu_ptr out,
                                gpu_ptr qkv, gpu_ptr g, gpu_ptr beta, gpu_ptr state, gpu_ptr cu_seqlens, gpu_ptr slots,
                                gpu_ptr ws, uint32_t s, uint32_t nk, uint32_t nv, uint32_t dk, uint32_t dv, gpu_ptr vh,
                                uint32_t nseg, int qk_planes) {
  if (grid > INT32_MAX)
    return METRALE_ERROR(INVALID_ARGUMENT, "chunked delta rule: %llu blocks in one launch", (unsigned long long)grid);
  if (nseg && phase > 0)
    LAUNCH(o, st, delta_rule_prefill_chunked_wh_seg, (uint32_t)grid, 1, P(out), P(qkv), P(g), P(beta), P(state),
           P(cu_seqlens), P(slots), P(ws), U(s), U(nk), U(nv), U(dk), U(dv), U(phase), P(vh), U(nseg),
           U(wh_seg0(o, s, nv, nseg)));
  if (phase == 0 && qk_planes) /* q and k already in ws's planes (conv1d_prefill_l2norm_qkh) */
    LAUNCH(o, st, delta_rule_prefill_chunked_wh_prep_qkh, (uint32_t)grid, 1, P(out), P(qkv), P(g), P(beta), P(state),
           P(cu_seqlens), P(slots), P(ws), U(s), U(nk), U(nv), U(dk), U(dv), U(phase), P(vh));
  if (phase == 0)
    LAUNCH(o, st, delta_rule_prefill_chunked_wh_prep, (uint32_t)grid, 1, P(out), P(qkv), P(g), P(beta), P(state),
           P(cu_seqlens), P(slots), P(ws), U(s), U(nk), U(nv), U(dk), U(dv), U(phase), P(vh));
  LAUNCH(o, st, delta_rule_prefill_chunked_wh, (uint32_t)grid, 1, P(out), P(qkv), P(g), P(beta), P(state), P(cu_seqlens),
         P(slots), P(ws), U(s), U(nk), U(nv), U(dk), U(dv), U(phase), P(vh));
}

/* Whether op_delta_rule_prefill takes the whole-head kernel (in segments or not) on v in half. */
static int wh_taken(const metrale_ops *o, gpu_ptr out, gpu_ptr vh, gpu_ptr ws, uint32_t t, uint32_t s, uint32_t nv,
                    uint32_t dk, uint32_t dv) {
  return vh && metrale_ops_v_half_fits(o, vh, ws, t, s, dk, dv) &&
         ((out % 16 == 0 && wh_segments(o, t, s, nv, dk, dv)) || chunked_wh(o, dk, dv, out, s, nv));
}

int metrale_ops_qk_planes_fits(const metrale_ops *o, gpu_ptr out, gpu_ptr vh, gpu_ptr ws, uint32_t t, uint32_t s,
                               uint32_t nv, uint32_t dk, uint32_t dv) {
  return has_kernel(o, METRALE_K_conv1d_prefill_l2norm_qkh) &&
         has_kernel(o, METRALE_K_delta_rule_prefill_chunked_wh_prep_qkh) && ws % 16 == 0 &&
         wh_taken(o, out, vh, ws, t, s, nv, dk, dv);
}

metrale_status op_delta_rule_prefill(const metrale_ops *o, gpu_stream st, gpu_ptr out, gpu_ptr qkv,
                                     gpu_ptr g, gpu_ptr beta, gpu_ptr state, gpu_ptr cu_seqlens,
                                     gpu_ptr slots, gpu_ptr ws, uint32_t t, uint32_t s, uint32_t nk,
                                     uint32_t nv, uint32_t dk, uint32_t dv, gpu_ptr vh, int qk_planes) {
  if (vh && !metrale_ops_v_half_fits(o, vh, ws, t, s, dk, dv))
    return METRALE_ERROR(INVALID_ARGUMENT, "delta rule prefill with v in half: the fp16 chunked kernel and "
                         "gdn_chunked.delta_rule_prefill_chunked_f16_prep_vh do not take %u tokens in %u sequences "
                         "(dk = %u, dv = %u, workspace %s, vh at %#llx)", t, s, dk, dv, ws ? "given" : "none",
                         (unsigned long long)vh);
  if (qk_planes && !metrale_ops_qk_planes_fits(o, out, vh, ws, t, s, nv, dk, dv))
    return METRALE_ERROR(INVALID_ARGUMENT, "delta rule prefill with q and k in the workspace's planes: "
                         "gdn_chunked.delta_rule_prefill_chunked_wh_prep_qkh is missing or the whole-head kernel "
                         "does not take %u tokens in %u sequences (dk = %u, dv = %u, v %s)", t, s, dk, dv,
                         vh ? "in half" : "in f32");
  if (ws && chunked_pays(o, t, s, dk, dv)) {
    if (wh_taken(o, out, vh, ws, t, s, nv, dk, dv)) { /* the one decision metrale_ops_qk_planes_fits also takes */
      const uint32_t nseg = out % 16 == 0 ? wh_segments(o, t, s, nv, dk, dv) : 0;
      METRALE_RETURN_IF_ERROR(launch_wh(o, st, 0, chunked_chunks(t, s) * nv, out, qkv, g, beta, state, cu_seqlens,
                                        slots, ws, s, nk, nv, dk, dv, vh, 0, qk_planes));
      if (!nseg)
        return launch_wh(o, st, 1, (uint64_t)s * nv, out, qkv, g, beta, state, cu_seqlens, slots, ws, s, nk, nv, dk,
                         dv, vh, 0, 0);
      const uint64_t grid[3] = {(uint64_t)s * nv * (2 * nseg - 3), (uint64_t)s * nv * 4, (uint64_t)s * nv * (nseg - 1)};
      for (uint32_t ph = 1; ph <= 3; ph++)
        METRALE_RETURN_IF_ERROR(launch_wh(o, st, ph, grid[ph - 1], out, qkv, g, beta, state, cu_seqlens, slots, ws, s,
                                          nk, nv, dk, dv, vh, nseg, 0));
      return METRALE_OK;
    }
    METRALE_RETURN_IF_ERROR(launch_chunked(o, st, 0, chunked_chunks(t, s) * nv, out, qkv, g, beta,
                                           state, cu_seqlens, slots, ws, s, nk, nv, dk, dv, vh));
    uint32_t cols =
        o->k[METRALE_K_delta_rule_prefill_chunked_wg] || chunked_f16(o) ? CHUNKED_WG_COLS : CHUNKED_COLS;
    return launch_chunked(o, st, 1, (uint64_t)s * nv * CEIL_DIV(dv, cols), out, qkv, g, beta, state,
                          cu_seqlens, slots, ws, s, nk, nv, dk, dv, vh);
  }
  LAUNCH(o, st, delta_rule_prefill, s * nv, 1, P(out), P(qkv), P(g), P(beta), P(state),
         P(cu_seqlens), P(slots), U(s), U(nk), U(nv), U(dk), U(dv));
}

int metrale_ops_has_gdn_decode_fused(const metrale_ops *o) { return o->k[METRALE_K_gdn_decode_fused35] != 0; }

/* Up to this batch the cluster kernel (a block per 32 columns of a value head) runs the
 * decode; above it the fused kernel's block per key head streams the state faster
 * (docs/perf-decode.md, section 9). */
#define DECODE_CLUSTER_MAX_BATCH 4
/* The heads the cluster and pair kernels take: dk = dv = 128, at most two value heads a key head. */
static int heads_128_r2(uint32_t nk, uint32_t nv, uint32_t dk, uint32_t dv) {
  return dk == 128 && dv == 128 && nk != 0 && nv % nk == 0 && nv <= 2 * nk;
}

static int decode_cluster_fits(const metrale_ops *o, uint32_t bsz, uint32_t nk, uint32_t nv,
                               uint32_t dk, uint32_t dv) {
  return o->k[METRALE_K_gdn_decode_cluster35] && bsz <= (uint32_t)DECODE_CLUSTER_MAX_BATCH &&
         heads_128_r2(nk, nv, dk, dv);
}

/* Above the cluster kernel's batches the pair kernel (a block per value head, its state moved
 * by the bulk engine, three blocks an SM) runs the decode where the backend has it, except
 * where the fused kernel's blocks (two an SM) fit in one wave and the pair kernel's do not:
 * on the H200 batch 16 took 84.0 us on it against 83.1 on the fused kernel, batch 256 403 us
 * against 436 (docs/perf-decode.md, section 16). */
#define DECODE_PAIR_MIN_BATCH 5

static int decode_pair_fits(const metrale_ops *o, uint32_t bsz, uint32_t nk, uint32_t nv, uint32_t dk,
                            uint32_t dv, gpu_ptr state) {
  if (!o->k[METRALE_K_gdn_decode_pair35] || bsz < DECODE_PAIR_MIN_BATCH || !heads_128_r2(nk, nv, dk, dv) ||
      (state & 15u) != 0)
    return 0;
  const uint64_t sms = metrale_device_backend(o->dev)->caps.sm_count;
  const uint64_t pair_blocks = 2 * CEIL_DIV((uint64_t)bsz * nv, 2), fused_blocks = (uint64_t)bsz * nk;
  return !(fused_blocks <= 2 * sms && pair_blocks > 3 * sms);
}

static int heads_128_r4(uint32_t nk, uint32_t nv, uint32_t dk, uint32_t dv) {
  return dk == 128 && dv == 128 && nk != 0 && nv == 4 * nk;
}

/* At four value heads a key head (Qwen3.5-397B-A17B, -122B-A10B) the pair kernel's form in clusters
 * of 4, from the same batch and with no exception for one wave: there the fused kernel's block walks
 * four heads one after the other.  On an H100 at 397B's shape: decode 5 / 64 / 256 174.0-174.7 /
 * 371.7-372.8 / 1089-1098 us on the fused kernel, 169.3-170.2 / 342.7-344.3 / 965-978 on this
 * (docs/perf-decode.md section 36). */
static int decode_pair_r4_fits(const metrale_ops *o, uint32_t bsz, uint32_t nk, uint32_t nv, uint32_t dk,
                               uint32_t dv, gpu_ptr state) {
  return o->k[METRALE_K_gdn_decode_pair35_r4] && bsz >= DECODE_PAIR_MIN_BATCH && heads_128_r4(nk, nv, dk, dv) &&
         (state & 15u) == 0;
}

const char *metrale_ops_gdn_decode_path(const metrale_ops *o, uint32_t nk, uint32_t nv, uint32_t dk,
                                        uint32_t dv) {
  if (!metrale_ops_has_gdn_decode_fused(o)) return NULL;
  if (heads_128_r4(nk, nv, dk, dv)) {
    if (!decode_pair_r4_fits(o, DECODE_PAIR_MIN_BATCH, nk, nv, dk, dv, 0)) return "gdn_decode.gdn_decode_fused35";
    return "gdn_decode.gdn_decode_fused35 up to batch 4, gdn_decode.gdn_decode_pair35_r4 from batch "
           TEXT_OF(DECODE_PAIR_MIN_BATCH) " (the cluster kernel takes nv <= 2 nk only)";
  }
  const int cluster = decode_cluster_fits(o, 1, nk, nv, dk, dv);
  const int pair = decode_pair_fits(o, DECODE_PAIR_MIN_BATCH, nk, nv, dk, dv, 0);
  if (cluster && pair)
    return "gdn_decode.gdn_decode_cluster35 up to batch " TEXT_OF(DECODE_CLUSTER_MAX_BATCH)
           ", gdn_decode.gdn_decode_pair35 from batch " TEXT_OF(DECODE_PAIR_MIN_BATCH)
           " (gdn_decode_fused35 where only its blocks fit in one wave)";
  if (cluster)
    return "gdn_decode.gdn_decode_cluster35 up to batch " TEXT_OF(DECODE_CLUSTER_MAX_BATCH)
           ", gdn_decode.gdn_decode_fused35 above";
  if (pair)
    return "gdn_decode.gdn_decode_fused35 up to batch 4, gdn_decode.gdn_decode_pair35 above (the fused "
           "kernel where only its blocks fit in one wave)";
  if (!o->k[METRALE_K_gdn_decode_cluster35] && !o->k[METRALE_K_gdn_decode_pair35])
    return "gdn_decode.gdn_decode_fused35";
  return "gdn_decode.gdn_decode_fused35 (the cluster and pair kernels take only heads of 128 with nv <= 2 nk, the "
         "pair kernel's r = 4 form nv = 4 nk)";
}

metrale_status op_gdn_decode_fused(const metrale_ops *o, gpu_stream st, gpu_ptr y,
                                   gpu_ptr p, gpu_ptr conv_w, gpu_ptr conv_state, gpu_ptr a_log,
                                   gpu_ptr dt_bias, gpu_ptr norm_w, gpu_ptr state, gpu_ptr slots,
                                   uint32_t bsz, uint32_t nk, uint32_t nv, uint32_t dk, uint32_t dv,
                                   uint32_t kw, float eps) {
  if (!metrale_ops_has_gdn_decode_fused(o))
    return METRALE_ERROR(NOT_FOUND, "the backend has no fused decode kernel");
  if ((uint64_t)bsz * nk > UINT32_MAX)
    return METRALE_ERROR(INVALID_ARGUMENT, "decode batch of %u with %u key heads", bsz, nk);
  if (decode_pair_r4_fits(o, bsz, nk, nv, dk, dv, state))
    LAUNCH(o, st, gdn_decode_pair35_r4, (uint64_t)bsz * nv, 1, P(y), P(p), P(conv_w), P(conv_state), P(a_log),
           P(dt_bias), P(norm_w), P(state), P(slots), U(bsz), U(nk), U(nv), U(dk), U(dv), U(kw), F(eps));
  if (decode_cluster_fits(o, bsz, nk, nv, dk, dv))
    LAUNCH(o, st, gdn_decode_cluster35, 8 * CEIL_DIV((uint64_t)bsz * nv, 2), 1, P(y), P(p), P(conv_w),
           P(conv_state), P(a_log), P(dt_bias), P(norm_w), P(state), P(slots), U(bsz), U(nk), U(nv),
           U(dk), U(dv), U(kw), F(eps));
  if (decode_pair_fits(o, bsz, nk, nv, dk, dv, state))
    LAUNCH(o, st, gdn_decode_pair35, 2 * CEIL_DIV((uint64_t)bsz * nv, 2), 1, P(y), P(p), P(conv_w),
           P(conv_state), P(a_log), P(dt_bias), P(norm_w), P(state), P(slots), U(bsz), U(nk), U(nv),
           U(dk), U(dv), U(kw), F(eps));
  LAUNCH(o, st, gdn_decode_fused35, bsz * nk, 1, P(y), P(p), P(conv_w), P(conv_state), P(a_log),
         P(dt_bias), P(norm_w), P(state), P(slots), U(bsz), U(nk), U(nv), U(dk), U(dv), U(kw), F(eps));
}

/* moe_topk_rows (a warp a token) where it keeps every expert in registers (E <= 512), and from
 * half a wave of moe_topk_warp's blocks (a block a token, 8 an SM) for larger E.  On the H200 at
 * E = 512, k = 10: the layer's top-k 84 -> 26 us at 4096 tokens when it took moe_topk_rows over
 * moe_topk_warp (docs/perf-moe.md); since both store their picks once from registers, and the
 * rows' picks are two warp reductions each, it also wins at decode: 8.1-8.4 -> 5.6-5.9 us for
 * one token, 6.6-6.8 against moe_topk_warp's 7.9-8.1 for 64 (docs/bench/h200-2026-12-04-topk). */
static int moe_topk_rows_fits(const metrale_ops *o, uint32_t t, uint32_t e) {
  return has_kernel(o, METRALE_K_moe_topk_rows) &&
         (e <= 512u || (uint64_t)t >= 4u * (uint64_t)metrale_device_backend(o->dev)->caps.sm_count);
}

const char *metrale_ops_moe_topk_kernel(const metrale_ops *o, uint32_t t, uint32_t e) {
  if (moe_topk_rows_fits(o, t, e)) return "moe.moe_topk_rows";
  return has_kernel(o, METRALE_K_moe_topk_warp) ? "moe.moe_topk_warp" : "moe.moe_topk";
}

metrale_status op_moe_topk(const metrale_ops *o, gpu_stream st, gpu_ptr idx, gpu_ptr w, gpu_ptr logits,
                           uint32_t t, uint32_t e, uint32_t ld, uint32_t k, uint32_t norm) {
  if (moe_topk_rows_fits(o, t, e))
    LAUNCH(o, st, moe_topk_rows, CEIL_DIV(t, 8), 1, P(idx), P(w), P(logits), U(t), U(e), U(ld), U(k), U(norm));
  if (o->k[METRALE_K_moe_topk_warp])
    LAUNCH(o, st, moe_topk_warp, t, 1, P(idx), P(w), P(logits), U(t), U(e), U(ld), U(k), U(norm));
  LAUNCH(o, st, moe_topk, t, 1, P(idx), P(w), P(logits), U(t), U(e), U(ld), U(k), U(norm));
}

/* The router's logits and top-k in one launch (moe_router_topk_rows) for 3 to 16 tokens, where
 * its lanes hold the experts (512) and a count was given; otherwise the two ops.  On the H200
 * (layer decode, graphs, three rounds; docs/perf-moe.md) against gemv_bf16_f32 or the tiles and
 * moe_topk_rows (the router alone 28 us at 8 tokens): 4 / 8 / 9 / 12 / 16 tokens -6.4 / -12.5 /
 * -9.3 / -7.7 / -3.8 us; 1 and 2 tokens -0.2 and +0.8, so they keep the two launches. */
#define ROUTER_TOPK_MIN_M 3u
#define ROUTER_TOPK_MAX_M 16u
static int router_topk_fits(const metrale_ops *o, gpu_ptr count, uint32_t m, uint32_t n, uint32_t e) {
  return has_kernel(o, METRALE_K_moe_router_topk_rows) && count && m >= ROUTER_TOPK_MIN_M &&
         m <= ROUTER_TOPK_MAX_M && e >= 1 && e <= 512 && e <= n && CEIL_DIV(n, 8) <= 65535;
}

const char *metrale_ops_router_topk_path(const metrale_ops *o, uint32_t m, uint32_t n, uint32_t e) {
  return router_topk_fits(o, 1, m, n, e) ? "moe.moe_router_topk_rows (the router's gemv, the top-k in its last block)"
                                            : NULL;
}

metrale_status op_moe_router_topk(const metrale_ops *o, gpu_stream st, gpu_ptr logits, gpu_ptr idx, gpu_ptr w,
                                  gpu_ptr x, gpu_ptr wr, gpu_ptr count, uint32_t m, uint32_t n, uint32_t h,
                                  uint32_t e, uint32_t k, uint32_t norm) {
  if (router_topk_fits(o, count, m, n, e))
    LAUNCH(o, st, moe_router_topk_rows, CEIL_DIV(n, 8), m, P(logits), P(idx), P(w), P(x), P(wr), P(count), U(m),
           U(n), U(h), U(e), U(k), U(norm));
  METRALE_RETURN_IF_ERROR(op_gemm_f32(o, st, logits, x, wr, m, n, h));
  return op_moe_topk(o, st, idx, w, logits, m, e, n, k, norm);
}

metrale_status op_moe_gate_up(const metrale_ops *o, gpu_stream st, gpu_ptr gu, gpu_ptr x, gpu_ptr idx,
                              gpu_ptr w, uint32_t r, uint32_t k, uint32_t h, uint32_t n) {
  LAUNCH(o, st, moe_gate_up, r, CEIL_DIV(n, 64), P(gu), P(x), P(idx), P(w), U(r), U(k), U(h), U(n));
}

/* The decode rows (kernels.def moe_gate_up_silu_rows, moe_down_rows), where their grids fit:
 * gate and up of 2 i rows (i act columns), down of H. */
static int gate_up_silu_rows_fits(const metrale_ops *o, uint32_t i) {
  return has_kernel(o, METRALE_K_moe_gate_up_silu_rows) && CEIL_DIV((uint64_t)i, 8) <= 65535;
}
static int down_rows_fits(const metrale_ops *o, uint32_t h) {
  return has_kernel(o, METRALE_K_moe_down_rows) && CEIL_DIV(h, 32) <= 65535;
}

metrale_status op_moe_down(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr act, gpu_ptr idx,
                           gpu_ptr w, uint32_t r, uint32_t h, uint32_t n) {
  if (down_rows_fits(o, h))
    LAUNCH(o, st, moe_down_rows, r, CEIL_DIV(h, 32), P(y), P(act), P(idx), P(w), U(r), U(h), U(n));
  LAUNCH(o, st, moe_down, r, CEIL_DIV(h, 64), P(y), P(act), P(idx), P(w), U(r), U(h), U(n));
}

/* moe_gate_up then silu_mul of every row j < r (idx 0: expert 0 for each) in one launch */
static metrale_status gate_up_silu_rows(const metrale_ops *o, gpu_stream st, gpu_ptr act, gpu_ptr x, gpu_ptr idx,
                                        gpu_ptr w, uint32_t r, uint32_t k, uint32_t h, uint32_t n) {
  LAUNCH(o, st, moe_gate_up_silu_rows, r, CEIL_DIV(n, 16), P(act), P(x), P(idx), P(w), U(r), U(k), U(h), U(n));
}

/* Up to 12 rows: the shared expert's gate and up (4 MiB) at layer decode 5 / 6 / 8 took -5 /
 * -5 / -4.5 us on the H200 against the gemm then silu_mul, 12 -1, 16 nothing (docs/perf-moe.md).
 * A row's blocks are adjacent in the grid (x = row), so the rows read each weight row from L2
 * together rather than once a row from memory. */
#define GATE_UP_SILU_ROWS_MAX 12u

static int gate_up_silu_one(const metrale_ops *o, uint32_t t, uint32_t i) {
  return t <= GATE_UP_SILU_ROWS_MAX && gate_up_silu_rows_fits(o, i);
}

const char *metrale_ops_gate_up_silu_path(const metrale_ops *o, uint32_t t, uint32_t i, uint32_t h) {
  if (gate_up_silu_one(o, t, i)) return "moe.moe_gate_up_silu_rows (one expert, silu_mul in its stores)";
  static _Thread_local char text[160];
  snprintf(text, sizeof text, "gemm.%s, elementwise.%s", metrale_ops_gemm_path(o, t, 2 * i, h),
           silu_mul_rows_fits(o, t, i) ? "silu_mul_rows" : "silu_mul");
  return text;
}

metrale_status op_gate_up_silu(const metrale_ops *o, gpu_stream st, gpu_ptr act, gpu_ptr gu, gpu_ptr x, gpu_ptr w,
                               uint32_t t, uint32_t i, uint32_t h) {
  if (gate_up_silu_one(o, t, i)) return gate_up_silu_rows(o, st, act, x, 0, w, t, 1, h, 2 * i);
  METRALE_RETURN_IF_ERROR(op_gemm(o, st, gu, x, w, t, 2 * i, h));
  return op_silu_mul(o, st, act, gu, t, i);
}

/* The grouped projections pay off once there are about four routed rows for every five
 * experts: with every token routed elsewhere (the bench's random inputs), on the H200 at
 * E = 512, k = 10 the layer takes 552-554 / 594-596 / 634-636 / 672-673 us at decode 36 / 40 /
 * 44 / 48 on the decode rows (moe_gate_up_silu_rows, moe_down_rows) and 571-572 / 607-609 /
 * 629-632 / 656-659 on the grouped ones (docs/perf-moe.md), so they cross near 42 tokens, 420
 * rows.  (Against the earlier per-row kernels, moe_gate_up and moe_down, they crossed near 34.) */
#define MOE_SORTED_ROWS_NUM 4u /* grouped from rows >= 4/5 experts */
#define MOE_SORTED_ROWS_DEN 5u
static int moe_sorted_fits(const metrale_ops *o, uint32_t r, uint32_t k, uint32_t e, uint32_t h, uint32_t mi) {
  const uint64_t slots = metrale_moe_slots(r, e);
  return o->k[METRALE_K_moe_sort] && o->k[METRALE_K_moe_gate_up_sorted] && o->k[METRALE_K_moe_down_sorted] &&
         e > 0 && k <= e && (uint64_t)r * MOE_SORTED_ROWS_DEN >= (uint64_t)e * MOE_SORTED_ROWS_NUM &&
         slots <= 0x7fffffffu &&
         CEIL_DIV(2ull * mi, 128) <= 65535 && CEIL_DIV(h, 128) <= 65535;
}

/* The sm_90a forms take the slots as grid.y (at most 65535: a chunk of ~4 M routed rows). */
static int moe_ws_fits(const metrale_ops *o, metrale_kernel_id id, uint32_t r, uint32_t e) {
  return has_kernel(o, id) && metrale_moe_slots(r, e) <= 65535u;
}

int metrale_ops_moe_y_bf16(const metrale_ops *o, uint32_t r, uint32_t k, uint32_t e, uint32_t h, uint32_t mi) {
  return moe_sorted_fits(o, r, k, e, h, mi) && moe_ws_fits(o, METRALE_K_moe_down_sorted_ws_bf16, r, e) &&
         has_kernel(o, METRALE_K_moe_combine_wide_bf16) && CEIL_DIV(h, 512) <= 65535;
}

/* Whether op_moe_experts writes gu (gate and up, then silu_mul) for r rows, rather than act
 * directly from gate and up's launch; op_moe_experts takes its branches by this, so the scratch's
 * size (metrale_ops_moe_need) follows the same rule. */
static int moe_writes_gu(const metrale_ops *o, uint32_t r, uint32_t k, uint32_t e, uint32_t h, uint32_t mi) {
  return moe_sorted_fits(o, r, k, e, h, mi) ? !moe_ws_fits(o, METRALE_K_moe_gate_up_silu_sorted_ws, r, e)
                                            : !gate_up_silu_rows_fits(o, mi);
}

metrale_moe_bytes metrale_ops_moe_need(const metrale_ops *o, uint32_t r, uint32_t k, uint32_t e, uint32_t h,
                                       uint32_t mi) {
  const metrale_moe_bytes b = {(uint64_t)r * h * (metrale_ops_moe_y_bf16(o, r, k, e, h, mi) ? 2u : 4u),
                               moe_writes_gu(o, r, k, e, h, mi) ? (uint64_t)r * 2u * mi * 2u : 0u};
  return b;
}

/* op_moe_experts' path depends on r through the grouped path's threshold (rows from NUM/DEN of the
 * experts) and the slot limits, which hold for every r below one where they hold; a path taken
 * where a limit fails needs at least the bytes of the grouped one.  So one path serves every r
 * below the threshold and at most two from it up to rmax, and the largest need of any r <= rmax is
 * that of rmax or of the last r below the threshold (tests/layer: checked row count by row count). */
metrale_moe_bytes metrale_ops_moe_bytes(const metrale_ops *o, uint32_t rmax, uint32_t k, uint32_t e, uint32_t h,
                                        uint32_t mi) {
  metrale_moe_bytes m = metrale_ops_moe_need(o, rmax, k, e, h, mi);
  const uint64_t first = ((uint64_t)e * MOE_SORTED_ROWS_NUM + MOE_SORTED_ROWS_DEN - 1) / MOE_SORTED_ROWS_DEN;
  if (first > 1 && first - 1 < rmax) {
    const metrale_moe_bytes b = metrale_ops_moe_need(o, (uint32_t)(first - 1), k, e, h, mi);
    if (b.y > m.y) m.y = b.y;
    if (b.gu > m.gu) m.gu = b.gu;
  }
  return m;
}

/* The kernels op_moe_experts takes, in a buffer of the calling thread's that the next call
 * overwrites. */
const char *metrale_ops_moe_path(const metrale_ops *o, uint32_t r, uint32_t k, uint32_t e, uint32_t h, uint32_t mi) {
  static _Thread_local char text[320];
  if (!moe_sorted_fits(o, r, k, e, h, mi)) {
    snprintf(text, sizeof text, "%s, %s",
             gate_up_silu_rows_fits(o, mi) ? "moe.moe_gate_up_silu_rows (32 lanes a gate and up row pair)"
                                           : "moe.moe_gate_up (a block a routed row), elementwise.silu_mul",
             down_rows_fits(o, h) ? "moe.moe_down_rows (32 lanes four weight rows)" : "moe.moe_down (a block a routed row)");
    return text;
  }
  const int silu = moe_ws_fits(o, METRALE_K_moe_gate_up_silu_sorted_ws, r, e),
            gu = moe_ws_fits(o, METRALE_K_moe_gate_up_sorted_ws, r, e),
            dn = moe_ws_fits(o, METRALE_K_moe_down_sorted_ws, r, e), y16 = metrale_ops_moe_y_bf16(o, r, k, e, h, mi);
  snprintf(text, sizeof text, "moe.moe_sort, moe.%s, moe.%s (%s%s%s)",
           silu ? "moe_gate_up_silu_sorted_ws" : gu ? "moe_gate_up_sorted_ws, elementwise.silu_mul" : "moe_gate_up_sorted, elementwise.silu_mul",
           y16 ? "moe_down_sorted_ws_bf16" : dn ? "moe_down_sorted_ws" : "moe_down_sorted",
           silu || gu || dn ? "the ws kernels: two 64-row slots an expert by 256 columns, TMA + wgmma" : "64-row tiles an expert",
           silu ? "; silu_mul in gate_up's stores" : "", y16 ? "; y in bf16 for moe.moe_combine_wide_bf16" : "");
  return text;
}

static metrale_status moe_sort_rows(const metrale_ops *o, gpu_stream st, const metrale_moe_buffers *b, uint32_t r,
                                    uint32_t e) {
  LAUNCH(o, st, moe_sort, e, 1, P(b->perm), P(b->tiles), P(b->idx), U(r), U(e));
}
static metrale_status moe_gate_up_sorted(const metrale_ops *o, gpu_stream st, const metrale_moe_buffers *b, gpu_ptr x,
                                         gpu_ptr w, uint32_t r, uint32_t k, uint32_t h, uint32_t n, uint32_t e) {
  if (moe_ws_fits(o, METRALE_K_moe_gate_up_sorted_ws, r, e))
    LAUNCH(o, st, moe_gate_up_sorted_ws, CEIL_DIV(n, 256), (uint32_t)metrale_moe_slots(r, e), P(b->gu), P(x),
           P(b->perm), P(b->tiles), P(w), U(r), U(k), U(h), U(n), U(e));
  LAUNCH(o, st, moe_gate_up_sorted, (uint32_t)metrale_moe_slots(r, e), CEIL_DIV(n, 128), P(b->gu), P(x),
         P(b->perm), P(b->tiles), P(w), U(r), U(k), U(h), U(n), U(e));
}
static metrale_status moe_gate_up_silu_sorted(const metrale_ops *o, gpu_stream st, const metrale_moe_buffers *b,
                                              gpu_ptr x, gpu_ptr w, uint32_t r, uint32_t k, uint32_t h, uint32_t n,
                                              uint32_t e) {
  LAUNCH(o, st, moe_gate_up_silu_sorted_ws, CEIL_DIV(n, 256), (uint32_t)metrale_moe_slots(r, e), P(b->act), P(x),
         P(b->perm), P(b->tiles), P(w), U(r), U(k), U(h), U(n), U(e));
}
static metrale_status moe_down_sorted(const metrale_ops *o, gpu_stream st, const metrale_moe_buffers *b, gpu_ptr w,
                                      uint32_t r, uint32_t h, uint32_t n, uint32_t e, int y_bf16) {
  if (y_bf16)
    LAUNCH(o, st, moe_down_sorted_ws_bf16, CEIL_DIV(h, 256), (uint32_t)metrale_moe_slots(r, e), P(b->y), P(b->act),
           P(b->perm), P(b->tiles), P(w), U(r), U(h), U(n), U(e));
  if (moe_ws_fits(o, METRALE_K_moe_down_sorted_ws, r, e))
    LAUNCH(o, st, moe_down_sorted_ws, CEIL_DIV(h, 256), (uint32_t)metrale_moe_slots(r, e), P(b->y), P(b->act),
           P(b->perm), P(b->tiles), P(w), U(r), U(h), U(n), U(e));
  LAUNCH(o, st, moe_down_sorted, (uint32_t)metrale_moe_slots(r, e), CEIL_DIV(h, 128), P(b->y), P(b->act),
         P(b->perm), P(b->tiles), P(w), U(r), U(h), U(n), U(e));
}

metrale_status op_moe_experts(const metrale_ops *o, gpu_stream st, const metrale_moe_buffers *b, gpu_ptr x,
                              gpu_ptr w_gate_up, gpu_ptr w_down, uint32_t r, uint32_t k, uint32_t h, uint32_t mi,
                              uint32_t e) {
  const int gu = moe_writes_gu(o, r, k, e, h, mi);
  if (moe_sorted_fits(o, r, k, e, h, mi)) {
    METRALE_RETURN_IF_ERROR(moe_sort_rows(o, st, b, r, e));
    if (!gu) { /* act directly from moe_gate_up_silu_sorted_ws */
      METRALE_RETURN_IF_ERROR(moe_gate_up_silu_sorted(o, st, b, x, w_gate_up, r, k, h, 2 * mi, e));
    } else {
      METRALE_RETURN_IF_ERROR(moe_gate_up_sorted(o, st, b, x, w_gate_up, r, k, h, 2 * mi, e));
      METRALE_RETURN_IF_ERROR(op_silu_mul(o, st, b->act, b->gu, r, mi));
    }
    return moe_down_sorted(o, st, b, w_down, r, h, mi, e, metrale_ops_moe_y_bf16(o, r, k, e, h, mi));
  }
  if (!gu) { /* act directly from moe_gate_up_silu_rows */
    METRALE_RETURN_IF_ERROR(gate_up_silu_rows(o, st, b->act, x, b->idx, w_gate_up, r, k, h, 2 * mi));
  } else {
    METRALE_RETURN_IF_ERROR(op_moe_gate_up(o, st, b->gu, x, b->idx, w_gate_up, r, k, h, 2 * mi));
    METRALE_RETURN_IF_ERROR(op_silu_mul(o, st, b->act, b->gu, r, mi));
  }
  return op_moe_down(o, st, b->y, b->act, b->idx, w_down, r, h, mi);
}

metrale_status op_moe_combine(const metrale_ops *o, gpu_stream st, gpu_ptr out, gpu_ptr res, gpu_ptr y,
                              gpu_ptr w, gpu_ptr shared, gpu_ptr gate, uint32_t t, uint32_t k,
                              uint32_t h, uint32_t ld, uint32_t col, int y_bf16) {
  if (y_bf16) {
    if (!has_kernel(o, METRALE_K_moe_combine_wide_bf16) || CEIL_DIV(h, 512) > 65535)
      return METRALE_ERROR(INVALID_ARGUMENT, "moe_combine: y in bf16 needs moe.moe_combine_wide_bf16 (H = %u)", h);
    LAUNCH(o, st, moe_combine_wide_bf16, t, CEIL_DIV(h, 512), P(out), P(res), P(y), P(w), P(shared), P(gate),
           U(t), U(k), U(h), U(ld), U(col));
  }
  if (o->k[METRALE_K_moe_combine_wide] && CEIL_DIV(h, 256) <= 65535)
    LAUNCH(o, st, moe_combine_wide, t, CEIL_DIV(h, 256), P(out), P(res), P(y), P(w), P(shared), P(gate),
           U(t), U(k), U(h), U(ld), U(col));
  LAUNCH(o, st, moe_combine, t, 1, P(out), P(res), P(y), P(w), P(shared), P(gate), U(t), U(k), U(h),
         U(ld), U(col));
}
