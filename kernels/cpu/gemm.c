/* gemm module: gemm_bf16, gemm_bf16_f32, gemm_f32in (their gemv and tile forms are the same ops:
 * same_op.c), gemm_f32in_hi_ws, gemm_f16_ws (and its three-output form), and the
 * routed-expert projections of moe.c, which share the loop nest.
 *
 * Decode (small M) is bound by streaming the weights, so the loop nest reads each
 * weight row [K] exactly once from memory and dots it with up to 4 activation rows
 * while it sits in L1.  Larger M walks the activation rows in groups of 4 over a block
 * of NB weight rows, which then comes from L2 instead of memory.
 *
 * The inner loops keep LANES independent fp32 partial sums so that gcc vectorises
 * them without -ffast-math (a single running sum would be a serial dependency it may
 * not reorder).  bf16 -> fp32 is a 16-bit shift, which vectorises as well.
 *
 * dot_group and dot_one add in exactly the same order (lane l sums elements l, l+LANES,
 * ...; lanes then the tail are summed in order), so an output does not depend on which
 * other rows share the call: decode, prefill and any split of a batch give bit-identical
 * f32 results.  The f32 input projection (gemv_bf16_f32) needs this: its output is no
 * longer rounded to bf16, so a last-bit difference would reach the recurrence and MoE
 * routing, and decode would drift from prefill.
 *
 * The dot products are also compiled for x86-64-v3 (AVX2) and picked at load time
 * (target_clones), so the library still runs on any x86-64 while using 8-wide vectors
 * where they exist. */
#include "cpu_kernels.h"

#include <stddef.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define LANES 8 /* partial sums per row: GROUP * LANES sums must fit the registers */
#define GROUP 4  /* activation rows sharing one pass over a weight row */
#define NB 16    /* weight rows per parallel work item */

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HOT __attribute__((noinline, target_clones("arch=x86-64-v3", "default")))
#else
#define HOT __attribute__((noinline))
#endif

static inline float hsum(const float acc[LANES]) {
  float s = 0.0f;
  for (int l = 0; l < LANES; l++) s += acc[l];
  return s;
}

/* dot_group<S>: out[g] = x[g] . w for g < GROUP, dot_one<S>: x . w; x fp32 rows [k], w [k] of
 * type WT read as float by WF.  Both add in the same order (see the top of the file).  For
 * bf16 weights (no suffix) and for IEEE half ones (_f16w, gemm_f16_ws). */
#define DEFINE_DOTS(S, WT, WF)                                                                  \
  HOT static void dot_group##S(float out[GROUP], const float *const x[GROUP], const WT *w,     \
                               uint32_t k) {                                                   \
    float acc[GROUP][LANES] = {{0}};                                                           \
    const float *x0 = x[0], *x1 = x[1], *x2 = x[2], *x3 = x[3];                                \
    uint32_t i = 0;                                                                            \
    for (; i + LANES <= k; i += LANES) {                                                       \
      for (int l = 0; l < LANES; l++) {                                                        \
        float wl = WF(w[i + l]);                                                               \
        acc[0][l] += x0[i + l] * wl;                                                           \
        acc[1][l] += x1[i + l] * wl;                                                           \
        acc[2][l] += x2[i + l] * wl;                                                           \
        acc[3][l] += x3[i + l] * wl;                                                           \
      }                                                                                        \
    }                                                                                          \
    for (int g = 0; g < GROUP; g++) {                                                          \
      float s = 0.0f;                                                                          \
      for (int l = 0; l < LANES; l++) s += acc[g][l];                                          \
      for (uint32_t j = i; j < k; j++) s += x[g][j] * WF(w[j]);                                \
      out[g] = s;                                                                              \
    }                                                                                          \
  }                                                                                            \
  HOT static float dot_one##S(const float *x, const WT *w, uint32_t k) {                       \
    float acc[LANES] = {0};                                                                    \
    uint32_t i = 0;                                                                            \
    for (; i + LANES <= k; i += LANES)                                                         \
      for (int l = 0; l < LANES; l++) acc[l] += x[i + l] * WF(w[i + l]);                       \
    float s = hsum(acc);                                                                       \
    for (; i < k; i++) s += x[i] * WF(w[i]);                                                   \
    return s;                                                                                  \
  }
/* IEEE half -> float for the dot loops: the compiler's _Float16 where it has one (the
 * x86-64-v3 clones then convert 8 at a time with F16C), else bf16.h's exact integer form. */
#if defined(__FLT16_MAX__)
static inline float half_w(uint16_t h) {
  _Float16 v;
  memcpy(&v, &h, sizeof v);
  return (float)v;
}
#else
#define half_w metrale_f16_to_f32
#endif
DEFINE_DOTS(, metrale_bf16, cpu_bf)
DEFINE_DOTS(_f16w, uint16_t, half_w)

/* A list of activation rows that share one weight matrix: entry i reads fp32 row
 * xrow[i] of [.., k] and writes output row yrow[i] of [.., n] (NULL lists: row i). */
typedef struct row_list {
  const uint32_t *xrow, *yrow;
  uint32_t count;
} row_list;

static inline uint32_t xrow_of(const row_list *rl, uint32_t i) {
  return rl->xrow ? rl->xrow[i] : i;
}
static inline uint32_t yrow_of(const row_list *rl, uint32_t i) {
  return rl->yrow ? rl->yrow[i] : i;
}

static inline void store(void *y, int y_f32, size_t at, float v) {
  if (y_f32)
    ((float *)y)[at] = v;
  else
    ((metrale_bf16 *)y)[at] = cpu_to_bf(v);
}

/* Output features [n0, n1) of every row of rl: y[row, j] = x[row] . w[j, :], w [n,k]. */
static void apply_block(void *y, int y_f32, const float *xf, const row_list *rl,
                        const metrale_bf16 *w, uint32_t n, uint32_t k, uint32_t n0, uint32_t n1) {
  uint32_t r = 0;
  for (; r + GROUP <= rl->count; r += GROUP) {
    const float *xr[GROUP];
    for (int g = 0; g < GROUP; g++) xr[g] = xf + (size_t)xrow_of(rl, r + g) * k;
    for (uint32_t j = n0; j < n1; j++) {
      float out[GROUP];
      dot_group(out, xr, w + (size_t)j * k, k);
      for (int g = 0; g < GROUP; g++) store(y, y_f32, (size_t)yrow_of(rl, r + g) * n + j, out[g]);
    }
  }
  for (; r < rl->count; r++) {
    const float *xr = xf + (size_t)xrow_of(rl, r) * k;
    for (uint32_t j = n0; j < n1; j++)
      store(y, y_f32, (size_t)yrow_of(rl, r) * n + j, dot_one(xr, w + (size_t)j * k, k));
  }
}

/* bf16 [rows, k] -> a new fp32 copy (activations are converted once, not per dot). */
static metrale_status to_f32(const metrale_bf16 *x, size_t rows, uint32_t k, float **out) {
  float *xf = malloc(rows * k * sizeof(float) + sizeof(float));
  if (!xf) return METRALE_ERROR(OUT_OF_MEMORY, "gemm: %zu x %u fp32 activation copy", rows, k);
  for (size_t i = 0; i < rows * k; i++) xf[i] = cpu_bf(x[i]);
  *out = xf;
  return METRALE_OK;
}

/* y [M,N] = xf [M,K] . w[N,K]^T with fp32 activations; y is bf16 unless y_f32. */
static void gemm_f32x(void *y, int y_f32, const float *xf, const metrale_bf16 *w, uint32_t m,
                      uint32_t n, uint32_t k) {
  row_list all = {NULL, NULL, m};
  int64_t nblocks = ((int64_t)n + NB - 1) / NB;
#pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < nblocks; blk++) {
    uint32_t n0 = (uint32_t)blk * NB, n1 = n0 + NB < n ? n0 + NB : n;
    apply_block(y, y_f32, xf, &all, w, n, k, n0, n1);
  }
}

/* y [M,N] = x [M,K] . w[N,K]^T; y is bf16 unless y_f32. */
static metrale_status gemm(void *y, int y_f32, const metrale_bf16 *x, const metrale_bf16 *w,
                           uint32_t m, uint32_t n, uint32_t k) {
  if (m == 0 || n == 0) return METRALE_OK;
  float *xf = NULL;
  METRALE_RETURN_IF_ERROR(to_f32(x, m, k, &xf));
  gemm_f32x(y, y_f32, xf, w, m, n, k);
  free(xf);
  return METRALE_OK;
}

void cpu_rows_by_expert(uint32_t *start, uint32_t *rows, const int32_t *idx, uint32_t r, uint32_t e) {
  memset(start, 0, ((size_t)e + 1) * sizeof *start);
  for (uint32_t j = 0; j < r; j++)
    if (idx[j] >= 0 && (uint32_t)idx[j] < e) start[idx[j] + 1]++;
  for (uint32_t x = 0; x < e; x++) start[x + 1] += start[x];
  for (uint32_t j = 0; j < r; j++) /* place; start[x] advances to the end of bucket x */
    if (idx[j] >= 0 && (uint32_t)idx[j] < e) rows[start[idx[j]]++] = j;
  for (uint32_t x = e; x > 0; x--) start[x] = start[x - 1]; /* back to bucket starts */
  start[0] = 0;
}

metrale_status cpu_expert_gemm(void *y, int y_f32, const metrale_bf16 *x, uint32_t x_div,
                               const int32_t *idx, uint32_t r, const metrale_bf16 *w, uint32_t n,
                               uint32_t k) {
  if (r == 0 || n == 0) return METRALE_OK;
  /* bucket the rows by expert, so that each expert's weights are streamed once for all
   * the rows routed to it */
  uint32_t experts = 0;
  for (uint32_t j = 0; j < r; j++)
    if (idx[j] >= 0 && (uint32_t)idx[j] + 1 > experts) experts = (uint32_t)idx[j] + 1;
  uint32_t *start = malloc(((size_t)experts + 1) * sizeof *start); /* [E+1] */
  uint32_t *yrow = malloc((size_t)r * sizeof *yrow), *xrow = malloc((size_t)r * sizeof *xrow);
  float *xf = NULL;
  size_t x_rows = ((size_t)r + x_div - 1) / x_div;
  metrale_status s = !start || !yrow || !xrow
                         ? METRALE_ERROR(OUT_OF_MEMORY, "expert gemm: row lists for %u rows", r)
                         : to_f32(x, x_rows, k, &xf);
  if (s) {
    free(start), free(yrow), free(xrow);
    return s;
  }
  cpu_rows_by_expert(start, yrow, idx, r, experts);
  for (uint32_t i = 0; i < start[experts]; i++) xrow[i] = yrow[i] / x_div;
  /* a negative id (no expert) gives a zero row rather than a wild read */
  for (uint32_t j = 0; j < r; j++)
    if (idx[j] < 0)
      for (uint32_t f = 0; f < n; f++) store(y, y_f32, (size_t)j * n + f, 0.0f);

  int64_t nblocks = ((int64_t)n + NB - 1) / NB, items = (int64_t)experts * nblocks;
#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t it = 0; it < items; it++) {
    uint32_t e = (uint32_t)(it / nblocks);
    uint32_t n0 = (uint32_t)(it % nblocks) * NB, n1 = n0 + NB < n ? n0 + NB : n;
    row_list rows = {xrow + start[e], yrow + start[e], start[e + 1] - start[e]};
    if (rows.count) apply_block(y, y_f32, xf, &rows, w + (size_t)e * n * k, n, k, n0, n1);
  }
  free(start), free(yrow), free(xrow), free(xf);
  return METRALE_OK;
}

metrale_status cpu_expert_gemm_sorted(void *y, int y_f32, const metrale_bf16 *x, uint32_t x_div,
                                      const int32_t *perm, const int32_t *tiles, uint32_t r, uint32_t e,
                                      const metrale_bf16 *w, uint32_t n, uint32_t k) {
  if (r == 0 || n == 0) return METRALE_OK;
  if (x_div == 0) return METRALE_ERROR(INVALID_ARGUMENT, "sorted expert gemm: %u rows a token", x_div);
  const uint64_t slots = metrale_moe_slots(r, e);
  for (uint64_t t = 0; t < slots; t++) { /* a hostile list must not make us read or write wildly */
    const int32_t ex = tiles[3 * t], p = tiles[3 * t + 1], m = tiles[3 * t + 2];
    if (ex < 0) continue;
    if ((uint32_t)ex >= e || p < 0 || m < 0 || m > 64 || (uint64_t)p + (uint64_t)m > r)
      return METRALE_ERROR(INVALID_ARGUMENT, "sorted expert gemm: slot %llu is (%d, %d, %d) for %u rows, %u experts",
                           (unsigned long long)t, ex, p, m, r, e);
    for (int32_t i = 0; i < m; i++)
      if (perm[p + i] < 0 || (uint32_t)perm[p + i] >= r)
        return METRALE_ERROR(INVALID_ARGUMENT, "sorted expert gemm: perm[%d] = %d for %u rows", p + i, perm[p + i], r);
  }
  uint32_t *yrow = malloc((size_t)r * sizeof *yrow), *xrow = malloc((size_t)r * sizeof *xrow);
  float *xf = NULL;
  metrale_status s = !yrow || !xrow ? METRALE_ERROR(OUT_OF_MEMORY, "sorted expert gemm: row lists for %u rows", r)
                                    : to_f32(x, ((size_t)r + x_div - 1) / x_div, k, &xf);
  if (s) {
    free(yrow), free(xrow);
    return s;
  }
  for (uint32_t i = 0; i < r; i++) { /* position i of perm: output row perm[i], input row perm[i] / x_div */
    yrow[i] = perm[i] < 0 ? 0u : (uint32_t)perm[i];
    xrow[i] = yrow[i] / x_div;
  }
  const int64_t nblocks = ((int64_t)n + NB - 1) / NB, items = (int64_t)slots * nblocks;
#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t it = 0; it < items; it++) {
    const int32_t *tl = tiles + 3 * (it / nblocks);
    if (tl[0] < 0 || tl[2] == 0) continue;
    const uint32_t n0 = (uint32_t)(it % nblocks) * NB, n1 = n0 + NB < n ? n0 + NB : n;
    row_list rows = {xrow + tl[1], yrow + tl[1], (uint32_t)tl[2]};
    apply_block(y, y_f32, xf, &rows, w + (size_t)tl[0] * n * k, n, k, n0, n1);
  }
  free(yrow), free(xrow), free(xf);
  return METRALE_OK;
}

metrale_status cpu_gemm_bf16(metrale_bf16 *y, const metrale_bf16 *x, const metrale_bf16 *w,
                             uint32_t m, uint32_t n, uint32_t k) {
  return gemm(y, 0, x, w, m, n, k);
}

metrale_status cpu_gemm_bf16_f32(float *y, const metrale_bf16 *x, const metrale_bf16 *w, uint32_t m,
                                 uint32_t n, uint32_t k) {
  return gemm(y, 1, x, w, m, n, k);
}

void cpu_gemm_f32in(float *y, const float *x, const metrale_bf16 *w, uint32_t m, uint32_t n,
                    uint32_t k) {
  if (m && n) gemm_f32x(y, 1, x, w, m, n, k);
}

metrale_status cpu_k_gemm_bf16(const gpu_arg *args) {
  return cpu_gemm_bf16(cpu_arg_p(args, 0), cpu_arg_p(args, 1), cpu_arg_p(args, 2),
                       cpu_arg_u(args, 3), cpu_arg_u(args, 4), cpu_arg_u(args, 5));
}

metrale_status cpu_k_gemm_bf16_f32(const gpu_arg *args) {
  return cpu_gemm_bf16_f32(cpu_arg_p(args, 0), cpu_arg_p(args, 1), cpu_arg_p(args, 2),
                           cpu_arg_u(args, 3), cpu_arg_u(args, 4), cpu_arg_u(args, 5));
}

metrale_status cpu_k_gemm_f32in(const gpu_arg *args) {
  cpu_gemm_f32in(cpu_arg_p(args, 0), cpu_arg_p(args, 1), cpu_arg_p(args, 2), cpu_arg_u(args, 3),
                 cpu_arg_u(args, 4), cpu_arg_u(args, 5));
  return METRALE_OK;
}

/* gemm_f32in_hi_ws: x rounded to bf16 first (a copy), then the bf16-x product with f32 y. */
metrale_status cpu_k_gemm_f32in_hi_ws(const gpu_arg *args) {
  const float *x = cpu_arg_p(args, 1);
  const uint32_t m = cpu_arg_u(args, 3), k = cpu_arg_u(args, 5);
  metrale_bf16 *xb = malloc((size_t)m * k * sizeof *xb + 1);
  if (!xb) return METRALE_ERROR(OUT_OF_MEMORY, "gemm_f32in_hi_ws: bf16 copy of x [%u, %u]", m, k);
  for (size_t i = 0; i < (size_t)m * k; i++) xb[i] = cpu_to_bf(x[i]);
  metrale_status s = cpu_gemm_bf16_f32(cpu_arg_p(args, 0), xb, cpu_arg_p(args, 2), m, cpu_arg_u(args, 4), k);
  free(xb);
  return s;
}

/* y f32 = x fp16 [M,K] . w fp16 [N,K]^T with column j of the product in the output of its
 * range: y[0] [M, n[0]] for j < n[0], y[1] [M, n[1]] for the next n[1] columns, y[2] [M, n[2]]
 * for the rest (gemm_f16_ws: all of them in y[0]).  x becomes f32 once; the weights are
 * converted in the dot loops (exact: bf16.h), so the products are exact and only the f32 sums
 * round.  Blocks of NB weight rows, rows in groups of GROUP, as apply_block. */
static metrale_status gemm_f16_cols(float *const y[3], const uint32_t n[3], const uint16_t *x, const uint16_t *w,
                                    uint32_t m, uint32_t k, const char *name) {
  const uint64_t nn = (uint64_t)n[0] + n[1] + n[2];
  if (m == 0 || nn == 0) return METRALE_OK;
  float *xf = malloc((size_t)m * k * sizeof *xf + sizeof *xf);
  if (!xf) return METRALE_ERROR(OUT_OF_MEMORY, "%s: f32 copy of x [%u, %u]", name, m, k);
  for (size_t i = 0; i < (size_t)m * k; i++) xf[i] = metrale_f16_to_f32(x[i]);
  const int64_t nblocks = ((int64_t)nn + NB - 1) / NB;
#pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < nblocks; blk++) {
    const uint64_t j0 = (uint64_t)blk * NB, j1 = j0 + NB < nn ? j0 + NB : nn;
    float *yc[NB]; /* column j0 + i of row 0 */
    uint64_t ld[NB];
    for (uint64_t j = j0; j < j1; j++) {
      const int part = j < n[0] ? 0 : j < (uint64_t)n[0] + n[1] ? 1 : 2;
      yc[j - j0] = y[part] + (j - (part > 0 ? n[0] : 0) - (part > 1 ? n[1] : 0));
      ld[j - j0] = n[part];
    }
    uint32_t r = 0;
    for (; r + GROUP <= m; r += GROUP) {
      const float *xr[GROUP];
      for (int g = 0; g < GROUP; g++) xr[g] = xf + (size_t)(r + g) * k;
      for (uint64_t j = j0; j < j1; j++) {
        float out[GROUP];
        dot_group_f16w(out, xr, w + (size_t)j * k, k);
        for (int g = 0; g < GROUP; g++) yc[j - j0][(size_t)(r + g) * ld[j - j0]] = out[g];
      }
    }
    for (; r < m; r++)
      for (uint64_t j = j0; j < j1; j++) yc[j - j0][(size_t)r * ld[j - j0]] = dot_one_f16w(xf + (size_t)r * k, w + (size_t)j * k, k);
  }
  free(xf);
  return METRALE_OK;
}

/* gemm_f16_ws: y f32 [M,N] = x fp16 [M,K] . w fp16 [N,K]^T */
metrale_status cpu_k_gemm_f16_ws(const gpu_arg *args) {
  float *const y[3] = {cpu_arg_p(args, 0), NULL, NULL};
  const uint32_t n[3] = {cpu_arg_u(args, 4), 0, 0};
  return gemm_f16_cols(y, n, cpu_arg_p(args, 1), cpu_arg_p(args, 2), cpu_arg_u(args, 3), cpu_arg_u(args, 5),
                       "gemm_f16_ws");
}

/* gemm_f16_ws_cols3: the product's columns in y0 [M,n0], y1 [M,n1], y2 [M,n2] */
metrale_status cpu_k_gemm_f16_ws_cols3(const gpu_arg *args) {
  float *const y[3] = {cpu_arg_p(args, 0), cpu_arg_p(args, 1), cpu_arg_p(args, 2)};
  const uint32_t n[3] = {cpu_arg_u(args, 6), cpu_arg_u(args, 7), cpu_arg_u(args, 8)};
  if (n[0] % 2 || n[1] % 2 || (((uintptr_t)y[0] | (uintptr_t)y[1] | (uintptr_t)y[2]) & 7u) ||
      (uint64_t)n[0] + n[1] + n[2] > UINT32_MAX)
    return METRALE_ERROR(INVALID_ARGUMENT, "gemm_f16_ws_cols3: needs n0 and n1 even (n0 = %u, n1 = %u), "
                         "n0 + n1 + n2 < 2^32 (n2 = %u) and 8-byte aligned y0, y1, y2", n[0], n[1], n[2]);
  return gemm_f16_cols(y, n, cpu_arg_p(args, 3), cpu_arg_p(args, 4), cpu_arg_u(args, 5), cpu_arg_u(args, 9),
                       "gemm_f16_ws_cols3");
}

/* gemm_f16_ws_cols3q: as gemm_f16_ws_cols3 with y0 IEEE half, each f32 sum rounded to nearest
 * even and saturated at +-65504 (NaN kept): the sums go to an f32 copy first. */
metrale_status cpu_k_gemm_f16_ws_cols3q(const gpu_arg *args) {
  const uint32_t m = cpu_arg_u(args, 5), n[3] = {cpu_arg_u(args, 6), cpu_arg_u(args, 7), cpu_arg_u(args, 8)};
  uint16_t *h = cpu_arg_p(args, 0);
  if (n[0] % 2 || n[1] % 2 || (((uintptr_t)h | (uintptr_t)cpu_arg_p(args, 1) | (uintptr_t)cpu_arg_p(args, 2)) & 7u) ||
      (uint64_t)n[0] + n[1] + n[2] > UINT32_MAX)
    return METRALE_ERROR(INVALID_ARGUMENT, "gemm_f16_ws_cols3q: needs n0 and n1 even (n0 = %u, n1 = %u), "
                         "n0 + n1 + n2 < 2^32 (n2 = %u) and 8-byte aligned y0, y1, y2", n[0], n[1], n[2]);
  const size_t n0 = (size_t)m * n[0];
  float *y0 = malloc(n0 * sizeof *y0 + sizeof *y0);
  if (!y0) return METRALE_ERROR(OUT_OF_MEMORY, "gemm_f16_ws_cols3q: f32 copy of y0 [%u, %u]", m, n[0]);
  float *const y[3] = {y0, cpu_arg_p(args, 1), cpu_arg_p(args, 2)};
  metrale_status s = gemm_f16_cols(y, n, cpu_arg_p(args, 3), cpu_arg_p(args, 4), m, cpu_arg_u(args, 9),
                                   "gemm_f16_ws_cols3q");
  if (s == METRALE_OK)
    for (size_t i = 0; i < n0; i++) h[i] = metrale_f32_to_f16_sat(y0[i]);
  free(y0);
  return s;
}
