/* gemm module: gemm_bf16, gemm_bf16_f32, gemm_f32in and the gemv forms (y = x . w^T, HF Linear
 * layout). */
#include <math.h>
#include <stdlib.h>

#include "harness.h"

typedef struct {
  uint32_t m, n, k;
} mnk;

static const mnk gemm_shapes[] = {{1, 1, 1},     {1, 7, 129},   {3, 64, 1000}, {5, 129, 7},
                                  {16, 33, 256}, {17, 70, 130}, {64, 65, 64},  {70, 5, 33},
                                  {600, 70, 36}};
/* 128x128 tiles: partial tiles, several tile rows and columns, more tile rows than one
 * group of the block walk (8), unaligned K. */
static const mnk t128_shapes[] = {{1, 1, 1},     {5, 129, 7},     {64, 65, 64},  {129, 3, 33},
                                  {130, 257, 96}, {200, 130, 1000}, {1100, 130, 40}};
/* 128x256 warp-specialised tiles (a ring of 6-8 stages of 32 k): K of fewer steps than the
 * ring, odd step counts (the f32 loop runs steps in pairs), unaligned K (the producer's
 * element path), partial tiles in M and N, more tile rows than one group of the block walk,
 * out_proj's long K. */
static const mnk ws_shapes[] = {{1, 1, 1},        {5, 257, 7},       {129, 300, 33},  {130, 513, 96},
                                {200, 260, 1000}, {1100, 130, 40},   {150, 600, 4097}, {256, 2048, 64}};
/* split K (4 slices of the k steps of 32): K of fewer steps than slices (empty slices), odd
 * and unaligned K, partial tiles, a long K as out_proj's. */
static const mnk splitk_shapes[] = {{1, 1, 1},       {5, 129, 7},      {17, 70, 130},  {64, 65, 64},
                                    {70, 5, 33},     {130, 257, 1000}, {33, 64, 4097}, {256, 200, 4096}};
/* split K on 128x128 tiles (8 slices): K of fewer steps than slices, odd and unaligned K,
 * partial tiles in M and N, out_proj at decode batch 256 */
static const mnk t128_splitk_shapes[] = {{1, 1, 1},       {5, 129, 7},      {130, 257, 1000}, {129, 3, 33},
                                         {200, 130, 4097}, {256, 2048, 4096}, {256, 300, 2048}};
/* split K on the 128x256 ws tiles (2, 4 or 8 slices of the k steps of 32): K of fewer steps
 * than slices (empty slices), a slice of fewer steps than the ring, odd and unaligned K (the
 * element path), partial tiles in M and N, out_proj at decode batch 256 */
static const mnk ws_splitk_shapes[] = {{1, 1, 1},        {5, 257, 7},       {129, 300, 33},   {130, 513, 1000},
                                       {200, 260, 4097}, {256, 2048, 4096}, {256, 1100, 2048}, {64, 600, 520}};
/* including long rows at M = 1 (K = 4104, 6152: the 8-load path and its tail) and M = 4 at
 * out_proj's K */
static const mnk gemv_shapes[] = {{1, 1, 1},    {1, 7, 129},   {2, 8, 1000},   {3, 129, 64},
                                  {8, 9, 17},   {16, 33, 256}, {1, 300, 2048}, {1, 9, 4104},
                                  {1, 17, 6152}, {4, 5, 4096}};
/* gemv_bf16_f32 (the decode input projection): every M of 1..16, odd N and K. */
static const mnk gemv_f32_shapes[] = {
    {1, 1, 1},     {1, 301, 2049}, {2, 9, 1001},  {3, 129, 65},  {4, 17, 33},   {5, 31, 255},
    {6, 15, 7},    {7, 63, 129},   {8, 9, 17},    {9, 5, 513},   {10, 65, 31},  {11, 3, 97},
    {12, 33, 15},  {13, 11, 259},  {14, 129, 63}, {15, 7, 1025}, {16, 33, 257}, {16, 1, 1}};

/* gemm_f32in may round x to tf32 (10-bit mantissa): NMSE ~ (2^-11)^2 / 3 */
#define TOL_TF32 1e-6

/* y [M,N] = x [M,K] . w [N,K]^T in double; x is bf16, or f32 when xf is given (rounded to
 * bf16 first when round_x). */
static void ref_gemm(double *y, const metrale_bf16 *x, const float *xf, int round_x, const metrale_bf16 *w,
                     const mnk *s) {
  for (uint32_t i = 0; i < s->m; i++)
    for (uint32_t j = 0; j < s->n; j++) {
      double acc = 0.0;
      for (uint32_t q = 0; q < s->k; q++)
        acc += (xf ? (round_x ? mt_bf(metrale_f32_to_bf16(xf[(size_t)i * s->k + q]))
                              : (double)xf[(size_t)i * s->k + q])
                   : mt_bf(x[(size_t)i * s->k + q])) *
               mt_bf(w[(size_t)j * s->k + q]);
      y[(size_t)i * s->n + j] = acc;
    }
}

/* The grid that gives every block (or cluster: kernels.def METRALE_KERNEL_CLUSTER) one tile
 * (pair of tile rows) of tile x tile_n outputs, K in gz slices; tile 0: the gemv's. */
static gpu_dim3 tile_grid(metrale_kernel_id id, const mnk *s, uint32_t tile, uint32_t tile_n, uint32_t gz) {
  if (tile == 0) return (gpu_dim3){(s->n + 7) / 8, 1, 1};
  const uint32_t cx = metrale_kernel_info_get(id)->cluster_x, rows = (s->m + tile - 1) / tile;
  if (cx > 1) return (gpu_dim3){cx * ((rows + cx - 1) / cx) * ((s->n + tile_n - 1) / tile_n), 1, gz};
  return (gpu_dim3){(s->n + tile_n - 1) / tile_n, rows, gz};
}

/* out_f32: y is f32.  in_f32: x is f32 (gemm_f32in; 2: gemm_f32in_hi_ws, x taken as
 * bf16(x)).  tile: 0 for the gemv grid
 * (ceil(N/8)), else the output tile's rows; tile_n its columns: tile_grid, or `walk` where
 * walk.x > 0 (the ws rows, whose blocks walk the tiles). */
static void run_gemm_walk(metrale_kernel_id id, const mnk *shapes, size_t nshapes, int out_f32, int in_f32,
                          uint32_t tile, uint32_t tile_n, uint32_t gz, gpu_dim3 walk) {
  CF_BEGIN(ctx, kern, id);
  for (size_t si = 0; si < nshapes; si++) {
    const mnk *s = &shapes[si];
    snprintf(ctx.shape, sizeof ctx.shape, "M=%u N=%u K=%u", s->m, s->n, s->k);
    size_t nx = (size_t)s->m * s->k, nw = (size_t)s->n * s->k, ny = (size_t)s->m * s->n;
    metrale_bf16 *x = cf_alloc(nx, 2), *w = cf_alloc(nw, 2);
    float *xf = in_f32 ? cf_alloc(nx, 4) : NULL;
    mt_fill_bf16(&ctx.rng, x, nx, -1, 1);
    if (xf) mt_fill_f32(&ctx.rng, xf, nx, -1, 1); /* not bf16-exact: rounding x fails */
    mt_fill_bf16(&ctx.rng, w, nw, -1, 1);
    double *ref = cf_alloc(ny, sizeof(double));
    ref_gemm(ref, x, xf, in_f32 == 2, w, s);

    const gpu_dim3 grid = walk.x ? walk : tile_grid(id, s, tile, tile_n, gz);
    double tol = in_f32 == 1 ? TOL_TF32 : out_f32 ? CF_TOL_F32 : CF_TOL_BF16;
    cf_launch l;
    cf_launch_init(&l, id, grid);
    int by = cf_buf_add(&l, "y", out_f32 ? CF_F32 : CF_BF16, CF_OUT, ny, NULL, tol);
    int bx = in_f32 ? cf_buf_add(&l, "x", CF_F32, CF_IN, nx, xf, 0)
                    : cf_buf_add(&l, "x", CF_BF16, CF_IN, nx, x, 0);
    int bw = cf_buf_add(&l, "w", CF_BF16, CF_IN, nw, w, 0);
    cf_arg_buf(&l, by);
    cf_arg_buf(&l, bx);
    cf_arg_buf(&l, bw);
    cf_arg_u32(&l, s->m);
    cf_arg_u32(&l, s->n);
    cf_arg_u32(&l, s->k);
    if (cf_run(&ctx, &l, kern)) {
      if (out_f32)
        cf_check_f32(&ctx, "y", cf_f32(&l, by), ref, ny, tol);
      else
        cf_check_bf16(&ctx, "y", cf_bf16(&l, by), ref, ny, tol);
    }
    cf_launch_free(&l);
    free(x), free(xf), free(w), free(ref);
  }
  cf_close(&ctx);
}

static void run_gemm_grid(metrale_kernel_id id, const mnk *shapes, size_t nshapes, int out_f32, int in_f32,
                          uint32_t tile, uint32_t tile_n, uint32_t gz) {
  run_gemm_walk(id, shapes, nshapes, out_f32, in_f32, tile, tile_n, gz, (gpu_dim3){0, 0, 0});
}

/* The whole-K ws rows on grids smaller than their tile grids: one block walking every tile
 * (the ring's stage phases running on across tiles of odd step counts), three blocks, and a
 * 2 x 2 grid (blocks numbered y * gx + x); ws_shapes have up to 9 tiles.  The forms whose
 * clusters of two blocks share w (METRALE_KERNEL_CLUSTER) walk pairs of tile rows: one
 * cluster, three, and four in a 4 x 2 grid, over up to 5 pairs, some with a second row past M. */
static const gpu_dim3 WALKS[] = {{1, 1, 1}, {3, 1, 1}, {2, 2, 1}};
static gpu_dim3 walk_grid(metrale_kernel_id id, size_t i) {
  return (gpu_dim3){WALKS[i].x * metrale_kernel_info_get(id)->cluster_x, WALKS[i].y, 1};
}
static void run_ws_walks(metrale_kernel_id id, int out_f32, int in_f32, uint32_t tile_n) {
  for (size_t i = 0; i < sizeof WALKS / sizeof WALKS[0]; i++)
    run_gemm_walk(id, ws_shapes, sizeof ws_shapes / sizeof ws_shapes[0], out_f32, in_f32, 128, tile_n, 1,
                  walk_grid(id, i));
}

static void run_gemm_xz(metrale_kernel_id id, const mnk *shapes, size_t nshapes, int out_f32,
                        int in_f32, uint32_t tile, uint32_t gz) {
  run_gemm_grid(id, shapes, nshapes, out_f32, in_f32, tile, tile, gz);
}

static void run_gemm_x(metrale_kernel_id id, const mnk *shapes, size_t nshapes, int out_f32,
                       int in_f32, uint32_t tile) {
  run_gemm_xz(id, shapes, nshapes, out_f32, in_f32, tile, 1);
}

/* the ws split-K forms: BM x 256 tiles, K in `slices`; f32: x (and y) f32 */
static void run_ws_split(metrale_kernel_id id, int f32, uint32_t rows, uint32_t slices) {
  run_gemm_grid(id, ws_splitk_shapes, sizeof ws_splitk_shapes / sizeof ws_splitk_shapes[0], f32, f32, rows, 256, slices);
}

static void run_gemm(metrale_kernel_id id, const mnk *shapes, size_t nshapes, int out_f32, int gemv) {
  run_gemm_x(id, shapes, nshapes, out_f32, 0, gemv ? 0u : 64u);
}

Test(gemm, gemm_bf16) {
  run_gemm(METRALE_K_gemm_bf16, gemm_shapes, sizeof gemm_shapes / sizeof gemm_shapes[0], 0, 0);
}

Test(gemm, gemm_bf16_f32) {
  run_gemm(METRALE_K_gemm_bf16_f32, gemm_shapes, sizeof gemm_shapes / sizeof gemm_shapes[0], 1, 0);
}

Test(gemm, gemv_bf16) {
  run_gemm(METRALE_K_gemv_bf16, gemv_shapes, sizeof gemv_shapes / sizeof gemv_shapes[0], 0, 1);
}

Test(gemm, gemv_bf16_f32) {
  run_gemm(METRALE_K_gemv_bf16_f32, gemv_f32_shapes,
           sizeof gemv_f32_shapes / sizeof gemv_f32_shapes[0], 1, 1);
}

Test(gemm, gemm_f32in) {
  run_gemm_x(METRALE_K_gemm_f32in, gemm_shapes, sizeof gemm_shapes / sizeof gemm_shapes[0], 1, 1, 64);
}

Test(gemm, gemv_f32in) {
  run_gemm_x(METRALE_K_gemv_f32in, gemv_f32_shapes, sizeof gemv_f32_shapes / sizeof gemv_f32_shapes[0],
             1, 1, 0);
}

Test(gemm, gemm_bf16_t128) {
  run_gemm_x(METRALE_K_gemm_bf16_t128, t128_shapes, sizeof t128_shapes / sizeof t128_shapes[0], 0, 0, 128);
}

Test(gemm, gemm_f32in_t128) {
  run_gemm_x(METRALE_K_gemm_f32in_t128, t128_shapes, sizeof t128_shapes / sizeof t128_shapes[0], 1, 1, 128);
}

Test(gemm, gemm_bf16_ws) {
  run_gemm_grid(METRALE_K_gemm_bf16_ws, ws_shapes, sizeof ws_shapes / sizeof ws_shapes[0], 0, 0, 128, 256, 1);
}

Test(gemm, gemm_bf16_ws_walk) { run_ws_walks(METRALE_K_gemm_bf16_ws, 0, 0, 256); }

Test(gemm, gemm_bf16_f32_ws) {
  run_gemm_grid(METRALE_K_gemm_bf16_f32_ws, ws_shapes, sizeof ws_shapes / sizeof ws_shapes[0], 1, 0, 128, 256, 1);
  run_ws_walks(METRALE_K_gemm_bf16_f32_ws, 1, 0, 256);
}

Test(gemm, gemm_f32in_ws) {
  run_gemm_grid(METRALE_K_gemm_f32in_ws, ws_shapes, sizeof ws_shapes / sizeof ws_shapes[0], 1, 1, 128, 256, 1);
}

Test(gemm, gemm_f32in_ws_walk) { run_ws_walks(METRALE_K_gemm_f32in_ws, 1, 1, 256); }

/* against the product of bf16(x): a kernel that kept x's low part would fail (its
 * difference from that reference is ~2^-9 relative, far above CF_TOL_F32) */
Test(gemm, gemm_f32in_hi_ws) {
  run_gemm_grid(METRALE_K_gemm_f32in_hi_ws, ws_shapes, sizeof ws_shapes / sizeof ws_shapes[0], 1, 2, 128, 256, 1);
}

Test(gemm, gemm_f32in_hi_ws_walk) { run_ws_walks(METRALE_K_gemm_f32in_hi_ws, 1, 2, 256); }

Test(gemm, gemm_bf16_t128_splitk) {
  run_gemm_xz(METRALE_K_gemm_bf16_t128_splitk, t128_splitk_shapes,
              sizeof t128_splitk_shapes / sizeof t128_splitk_shapes[0], 0, 0, 128, 8);
}

Test(gemm, gemm_bf16_t128_splitk4) {
  run_gemm_xz(METRALE_K_gemm_bf16_t128_splitk4, t128_splitk_shapes,
              sizeof t128_splitk_shapes / sizeof t128_splitk_shapes[0], 0, 0, 128, 4);
}

Test(gemm, gemm_f32in_ws192) {
  run_gemm_grid(METRALE_K_gemm_f32in_ws192, ws_shapes, sizeof ws_shapes / sizeof ws_shapes[0], 1, 1, 128, 192, 1);
}

Test(gemm, gemm_f32in_ws192_walk) { run_ws_walks(METRALE_K_gemm_f32in_ws192, 1, 1, 192); }

Test(gemm, gemm_bf16_ws_splitk4) { run_ws_split(METRALE_K_gemm_bf16_ws_splitk4, 0, 128, 4); }

Test(gemm, gemm_bf16_ws_splitk8) { run_ws_split(METRALE_K_gemm_bf16_ws_splitk8, 0, 128, 8); }

Test(gemm, gemm_f32in_ws_splitk2) { run_ws_split(METRALE_K_gemm_f32in_ws_splitk2, 1, 128, 2); }

Test(gemm, gemm_bf16_ws64_splitk8) { run_ws_split(METRALE_K_gemm_bf16_ws64_splitk8, 0, 64, 8); }

Test(gemm, gemm_f32in_ws64_splitk2) { run_ws_split(METRALE_K_gemm_f32in_ws64_splitk2, 1, 64, 2); }

Test(gemm, gemm_bf16_splitk) {
  run_gemm_xz(METRALE_K_gemm_bf16_splitk, splitk_shapes, sizeof splitk_shapes / sizeof splitk_shapes[0], 0, 0,
              64, 4);
}

Test(gemm, gemm_f32in_splitk) {
  run_gemm_xz(METRALE_K_gemm_f32in_splitk, splitk_shapes, sizeof splitk_shapes / sizeof splitk_shapes[0], 1,
              1, 64, 4);
}

/* gemm_f16_ws: x and w IEEE half values that bf16 cannot hold (10-bit mantissas, some
 * subnormal), so that a kernel taking them as bf16, or rounding them to bf16, fails; the
 * products are exact in f32, so the f32 tolerance applies. */
static void run_gemm_f16_on(metrale_kernel_id id, const mnk *shapes, size_t nshapes, uint32_t tile, uint32_t gz,
                            gpu_dim3 walk) {
  CF_BEGIN(ctx, kern, id);
  for (size_t si = 0; si < nshapes; si++) {
    const mnk *s = &shapes[si];
    snprintf(ctx.shape, sizeof ctx.shape, "M=%u N=%u K=%u", s->m, s->n, s->k);
    const size_t nx = (size_t)s->m * s->k, nw = (size_t)s->n * s->k, ny = (size_t)s->m * s->n;
    uint16_t *x = cf_alloc(nx, 2), *w = cf_alloc(nw, 2);
    for (size_t i = 0; i < nx; i++)
      x[i] = metrale_f32_to_f16((float)mt_uniform(&ctx.rng, -1, 1) * (i % 97 == 3 ? 1e-5f : 4.0f));
    for (size_t i = 0; i < nw; i++) w[i] = metrale_f32_to_f16((float)mt_uniform(&ctx.rng, -1, 1));
    double *ref = cf_alloc(ny, sizeof(double));
    for (uint32_t i = 0; i < s->m; i++)
      for (uint32_t j = 0; j < s->n; j++) {
        double acc = 0.0;
        for (uint32_t q = 0; q < s->k; q++)
          acc += (double)metrale_f16_to_f32(x[(size_t)i * s->k + q]) * metrale_f16_to_f32(w[(size_t)j * s->k + q]);
        ref[(size_t)i * s->n + j] = acc;
      }
    cf_launch l;
    cf_launch_init(&l, id, walk.x ? walk : tile_grid(id, s, tile, 256, gz));
    int by = cf_buf_add(&l, "y", CF_F32, CF_OUT, ny, NULL, CF_TOL_F32);
    int bx = cf_buf_add(&l, "x", CF_BF16, CF_IN, nx, x, 0); /* 16-bit words holding halves */
    int bw = cf_buf_add(&l, "w", CF_BF16, CF_IN, nw, w, 0);
    cf_arg_buf(&l, by);
    cf_arg_buf(&l, bx);
    cf_arg_buf(&l, bw);
    cf_arg_u32(&l, s->m);
    cf_arg_u32(&l, s->n);
    cf_arg_u32(&l, s->k);
    if (cf_run(&ctx, &l, kern)) cf_check_f32(&ctx, "y", cf_f32(&l, by), ref, ny, CF_TOL_F32);
    cf_launch_free(&l);
    free(x), free(w), free(ref);
  }
  cf_close(&ctx);
}

static void run_gemm_f16_ws(gpu_dim3 walk) {
  run_gemm_f16_on(METRALE_K_gemm_f16_ws, ws_shapes, sizeof ws_shapes / sizeof ws_shapes[0], 128, 1, walk);
}

Test(gemm, gemm_f16_ws) { run_gemm_f16_ws((gpu_dim3){0, 0, 0}); }

/* the split forms (in_proj at decode batches below the 128-row pairs): the split shapes */
Test(gemm, gemm_f16_ws_splitk2) {
  run_gemm_f16_on(METRALE_K_gemm_f16_ws_splitk2, ws_splitk_shapes, sizeof ws_splitk_shapes / sizeof ws_splitk_shapes[0],
                  128, 2, (gpu_dim3){0, 0, 0});
}

Test(gemm, gemm_f16_ws64_splitk2) {
  run_gemm_f16_on(METRALE_K_gemm_f16_ws64_splitk2, ws_splitk_shapes,
                  sizeof ws_splitk_shapes / sizeof ws_splitk_shapes[0], 64, 2, (gpu_dim3){0, 0, 0});
}

Test(gemm, gemm_f16_ws_walk) {
  for (size_t i = 0; i < sizeof WALKS / sizeof WALKS[0]; i++) run_gemm_f16_ws(walk_grid(METRALE_K_gemm_f16_ws, i));
}

/* gemm_f16_ws_cols3: gemm_f16_ws's product with its columns in three outputs.  Ranges that
 * meet at tile edges (as the layer's q|k|v, z and b|a) and inside tiles, an odd last range
 * (its last column alone), empty first, middle and last ranges, unaligned K; each output in
 * its own guarded buffer, so a column sent to the wrong one, or past one, fails.  Where n0
 * and n1 are multiples of 32 and every non-empty n a multiple of 4, CUDA's sm_90a kernel
 * writes by TMA boxes of 16 rows x 32 columns (gemm_ws.cuh, out_boxes): those shapes include
 * boxes cut by M and by the last output's end, empty outputs, and a walk over several tiles. */
typedef struct {
  uint32_t m, n[3], k;
} cols3_shape;
static const cols3_shape cols3_shapes[] = {{1, {2, 0, 1}, 1},         {5, {256, 256, 64}, 7},
                                           {129, {130, 100, 33}, 33}, {130, {8, 514, 0}, 96},
                                           {200, {0, 260, 6}, 1000},  {1100, {64, 66, 2}, 40},
                                           {150, {300, 0, 301}, 4097}, {256, {2048, 1024, 64}, 64},
                                           {300, {0, 96, 36}, 40},    {70, {32, 0, 0}, 17},
                                           {517, {320, 224, 4}, 72}};

/* NMSE tolerances for y0 in IEEE half (gemm_f16_ws_cols3q).  Against the exact sums: each
 * value rounded once to 11 significant bits, relative error at most 2^-11 (NMSE at most 2^-22
 * = 2.4e-7, reached with few values), plus the f32 sums' own.  Against the cpu oracle: where
 * the two f32 sums fall on either side of a rounding midpoint the halves differ by one step,
 * 2^-10 relative (9.5e-7 for a value alone). */
#define TOL_HALF 3e-7
#define TOL_HALF_ORACLE 1e-6

/* Run on kernel id: gemm_f16_ws_cols3, or gemm_f16_ws_cols3q (y0 in IEEE half, checked against
 * the reference rounded to half's range: the last shape's y0 sums pass +-65504 and must come
 * back saturated, finite). */
static void run_gemm_f16_ws_cols3(gpu_dim3 walk, metrale_kernel_id id) {
  CF_BEGIN(ctx, kern, id);
  const int half0 = id == METRALE_K_gemm_f16_ws_cols3q;
  const size_t nshapes = sizeof cols3_shapes / sizeof cols3_shapes[0];
  for (size_t si = 0; si < nshapes + (size_t)half0; si++) {
    static const cols3_shape big = {140, {64, 32, 4}, 4100}; /* y0 beyond half's range (TMA boxes) */
    const int sat = si == nshapes;
    const cols3_shape *c = sat ? &big : &cols3_shapes[si];
    const mnk s = {c->m, c->n[0] + c->n[1] + c->n[2], c->k};
    snprintf(ctx.shape, sizeof ctx.shape, "M=%u N=%u+%u+%u K=%u", s.m, c->n[0], c->n[1], c->n[2], s.k);
    const size_t nx = (size_t)s.m * s.k, nw = (size_t)s.n * s.k;
    uint16_t *x = cf_alloc(nx, 2), *w = cf_alloc(nw, 2);
    for (size_t i = 0; i < nx; i++)
      x[i] = metrale_f32_to_f16(sat ? (float)mt_uniform(&ctx.rng, 20, 60)
                                    : (float)mt_uniform(&ctx.rng, -1, 1) * (i % 97 == 3 ? 1e-5f : 4.0f));
    for (size_t i = 0; i < nw; i++)
      w[i] = metrale_f32_to_f16(sat ? (float)mt_uniform(&ctx.rng, 0.5, 1.0) * ((i / s.k) % 2 ? -1.0f : 1.0f)
                                    : (float)mt_uniform(&ctx.rng, -1, 1));
    double *ref[3];
    for (int p = 0, j0 = 0; p < 3; j0 += (int)c->n[p], p++) {
      ref[p] = cf_alloc((size_t)s.m * c->n[p] + 1, sizeof(double));
      for (uint32_t i = 0; i < s.m; i++)
        for (uint32_t j = 0; j < c->n[p]; j++) {
          double acc = 0.0;
          for (uint32_t q = 0; q < s.k; q++)
            acc += (double)metrale_f16_to_f32(x[(size_t)i * s.k + q]) *
                   metrale_f16_to_f32(w[(size_t)(j0 + j) * s.k + q]);
          if (p == 0 && half0) acc = acc > 65504.0 ? 65504.0 : acc < -65504.0 ? -65504.0 : acc;
          ref[p][(size_t)i * c->n[p] + j] = acc;
        }
    }
    cf_launch l;
    cf_launch_init(&l, id, walk.x ? walk : tile_grid(id, &s, 128, 256, 1));
    static const char *names[3] = {"y0", "y1", "y2"};
    int by[3];
    /* the saturating shape's f32 sums add 4100 terms of one sign and ~30: the tensor cores'
     * accumulation (not rounded to nearest at each add) drifts by ~2^-15 of them (H200: NMSE
     * 5.8e-10 against the exact sums and the cpu's) */
    const double tol32 = sat ? 1e-8 : CF_TOL_F32;
    for (int p = 0; p < 3; p++)
      by[p] = p == 0 && half0 ? cf_buf_add(&l, names[p], CF_F16, CF_OUT, (size_t)s.m * c->n[p], NULL, TOL_HALF_ORACLE)
                              : cf_buf_add(&l, names[p], CF_F32, CF_OUT, (size_t)s.m * c->n[p], NULL, tol32);
    int bx = cf_buf_add(&l, "x", CF_BF16, CF_IN, nx, x, 0); /* 16-bit words holding halves */
    int bw = cf_buf_add(&l, "w", CF_BF16, CF_IN, nw, w, 0);
    for (int p = 0; p < 3; p++) cf_arg_buf(&l, by[p]);
    cf_arg_buf(&l, bx);
    cf_arg_buf(&l, bw);
    cf_arg_u32(&l, s.m);
    for (int p = 0; p < 3; p++) cf_arg_u32(&l, c->n[p]);
    cf_arg_u32(&l, s.k);
    if (cf_run(&ctx, &l, kern)) {
      for (int p = 0; p < 3; p++) {
        const size_t n = (size_t)s.m * c->n[p];
        if (p == 0 && half0) {
          cf_check_f16(&ctx, names[p], cf_f16(&l, by[p]), ref[p], n, TOL_HALF);
          size_t clamped = 0; /* the saturating shape: those sums are exactly +-65504 */
          for (size_t i = 0; i < n; i++)
            if (fabs(ref[p][i]) == 65504.0) {
              clamped++;
              CF_EXPECT(&ctx, metrale_f16_to_f32(cf_f16(&l, by[p])[i]) == (float)ref[p][i],
                        "y0[%zu] = %g, not saturated to %g", i, metrale_f16_to_f32(cf_f16(&l, by[p])[i]), ref[p][i]);
            }
          CF_EXPECT(&ctx, !sat || clamped > n / 4, "only %zu of %zu sums past half's range", clamped, n);
        } else {
          cf_check_f32(&ctx, names[p], cf_f32(&l, by[p]), ref[p], n, tol32);
        }
      }
    }
    cf_launch_free(&l);
    free(x), free(w);
    for (int p = 0; p < 3; p++) free(ref[p]);
  }
  cf_close(&ctx);
}

Test(gemm, gemm_f16_ws_cols3) { run_gemm_f16_ws_cols3((gpu_dim3){0, 0, 0}, METRALE_K_gemm_f16_ws_cols3); }

Test(gemm, gemm_f16_ws_cols3_walk) {
  for (size_t i = 0; i < sizeof WALKS / sizeof WALKS[0]; i++)
    run_gemm_f16_ws_cols3(walk_grid(METRALE_K_gemm_f16_ws_cols3, i), METRALE_K_gemm_f16_ws_cols3);
}

/* The same shapes with y0 in IEEE half (gemm_f16_ws_cols3q, the prefill's mixed for the half
 * conv), and one whose y0 sums saturate (|p| up to ~2.5e5, +-65504 written) */
Test(gemm, gemm_f16_ws_cols3q) { run_gemm_f16_ws_cols3((gpu_dim3){0, 0, 0}, METRALE_K_gemm_f16_ws_cols3q); }

Test(gemm, gemm_f16_ws_cols3q_walk) {
  for (size_t i = 0; i < sizeof WALKS / sizeof WALKS[0]; i++)
    run_gemm_f16_ws_cols3(walk_grid(METRALE_K_gemm_f16_ws_cols3q, i), METRALE_K_gemm_f16_ws_cols3q);
}

/* An odd n0 or n1 (a thread's column pair would straddle two outputs) and an output off 8-byte
 * alignment are refused, on every backend that has the kernel (both forms: y0 in f32 or half) */
static void refuses_odd_ranges(metrale_kernel_id id) {
  CF_BEGIN(ctx, kern, id);
  const uint32_t bad[4][4] = {{3, 2, 2, 0}, {2, 3, 2, 0}, {2, 2, 2, 4}, {2, 2, 2, 2}}; /* n0, n1, n2, byte offset */
  for (int i = 0; i < 4; i++) { /* the offset moves y1, the last case y0 */
    const gpu_arg args[] = {gpu_arg_ptr(4096 + (i == 3 ? bad[i][3] : 0)), gpu_arg_ptr(8192 + (i == 3 ? 0 : bad[i][3])),
                            gpu_arg_ptr(12288), gpu_arg_ptr(16384), gpu_arg_ptr(20480), gpu_arg_u32(1),
                            gpu_arg_u32(bad[i][0]), gpu_arg_u32(bad[i][1]), gpu_arg_u32(bad[i][2]), gpu_arg_u32(1)};
    metrale_status st = metrale_launch(ctx.dev, id, kern, (gpu_dim3){2, 1, 1}, NULL, args, sizeof args / sizeof args[0]);
    CF_EXPECT(&ctx, metrale_status_code(st) == METRALE_CODE_INVALID_ARGUMENT, "n = %u + %u + %u, y%d + %u gave %s: %s",
              bad[i][0], bad[i][1], bad[i][2], i == 3 ? 0 : 1, bad[i][3], metrale_code_name(metrale_status_code(st)),
              metrale_status_message(st));
    metrale_status_free(st);
  }
  cf_close(&ctx);
}
Test(gemm, gemm_f16_ws_cols3_refuses_odd_ranges) { refuses_odd_ranges(METRALE_K_gemm_f16_ws_cols3); }
Test(gemm, gemm_f16_ws_cols3q_refuses_odd_ranges) { refuses_odd_ranges(METRALE_K_gemm_f16_ws_cols3q); }
