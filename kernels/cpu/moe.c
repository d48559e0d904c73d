/* moe module: router top-k, routed expert projections, combine. */
#include "cpu_kernels.h"

#include <stddef.h>
#include <stdlib.h>

/* Orders candidates by (p descending, expert id ascending). */
static int ranks_before(float pa, uint32_t a, float pb, uint32_t b) {
  return pa > pb || (pa == pb && a < b);
}

void cpu_moe_topk(int32_t *idx, float *w, const float *logits, uint32_t t, uint32_t e, uint32_t ld,
                  uint32_t k, uint32_t norm) {
#pragma omp parallel for schedule(static)
  for (int64_t tok = 0; tok < (int64_t)t; tok++) {
    const float *l = logits + (size_t)tok * ld; /* [E] */
    float mx = l[0];
    for (uint32_t i = 1; i < e; i++) mx = l[i] > mx ? l[i] : mx;
    float sum = 0.0f;
    for (uint32_t i = 0; i < e; i++) sum += expf(l[i] - mx);
    /* selection without scratch: each pick is the best candidate ranked strictly
     * after the previous pick */
    float prev_p = 0.0f, wsum = 0.0f;
    uint32_t prev = 0;
    int32_t *ti = idx + (size_t)tok * k;
    float *tw = w + (size_t)tok * k;
    for (uint32_t j = 0; j < k; j++) {
      int32_t best = -1;
      float best_p = 0.0f;
      for (uint32_t i = 0; i < e; i++) {
        float p = expf(l[i] - mx) / sum;
        if (j > 0 && !ranks_before(prev_p, prev, p, i)) continue;
        if (best < 0 || ranks_before(p, i, best_p, (uint32_t)best)) {
          best = (int32_t)i;
          best_p = p;
        }
      }
      if (best < 0) { /* k > E: the remaining picks are empty */
        for (; j < k; j++) {
          ti[j] = -1;
          tw[j] = 0.0f;
        }
        break;
      }
      ti[j] = best;
      tw[j] = best_p;
      wsum += best_p;
      prev = (uint32_t)best;
      prev_p = best_p;
    }
    if (norm && wsum > 0.0f)
      for (uint32_t j = 0; j < k; j++) tw[j] /= wsum;
  }
}

metrale_status cpu_moe_gate_up(metrale_bf16 *gu, const metrale_bf16 *x, const int32_t *idx,
                               const metrale_bf16 *w, uint32_t r, uint32_t k, uint32_t h,
                               uint32_t n) {
  /* row j: gu[j, :] = w[idx[j]] [N,H] . x[j / k] */
  return cpu_expert_gemm(gu, 0, x, k, idx, r, w, n, h);
}

metrale_status cpu_moe_down(float *y, const metrale_bf16 *act, const int32_t *idx,
                            const metrale_bf16 *w, uint32_t r, uint32_t h, uint32_t n) {
  /* row j: y[j, :] = w[idx[j]] [H,N] . act[j] */
  return cpu_expert_gemm(y, 1, act, 1, idx, r, w, h, n);
}

/* y: f32 [T*k, H], or bf16 when y16 (moe_combine_wide_bf16) */
static void combine(metrale_bf16 *out, const metrale_bf16 *res, const void *y, int y16, const float *w,
                    const metrale_bf16 *shared, const float *gate, uint32_t t, uint32_t k, uint32_t h, uint32_t ld,
                    uint32_t col) {
#pragma omp parallel for schedule(static)
  for (int64_t tok = 0; tok < (int64_t)t; tok++) {
    float sg = cpu_sigmoid(gate[(size_t)tok * ld + col]); /* shared expert gate */
    const float *tw = w + (size_t)tok * k;                /* [k] */
    for (uint32_t f = 0; f < h; f++) {
      size_t o = (size_t)tok * h + f;
      float acc = cpu_bf(res[o]);
      for (uint32_t j = 0; j < k; j++) {
        const size_t i = ((size_t)tok * k + j) * h + f;
        acc += tw[j] * (y16 ? cpu_bf(((const metrale_bf16 *)y)[i]) : ((const float *)y)[i]);
      }
      acc += sg * cpu_bf(shared[o]);
      out[o] = cpu_to_bf(acc);
    }
  }
}

void cpu_moe_combine(metrale_bf16 *out, const metrale_bf16 *res, const float *y, const float *w,
                     const metrale_bf16 *shared, const float *gate, uint32_t t, uint32_t k,
                     uint32_t h, uint32_t ld, uint32_t col) {
  combine(out, res, y, 0, w, shared, gate, t, k, h, ld, col);
}

metrale_status cpu_k_moe_topk(const gpu_arg *args) {
  if (cpu_arg_u(args, 4) == 0 && cpu_arg_u(args, 3) != 0)
    return METRALE_ERROR(INVALID_ARGUMENT, "moe_topk: e must be >= 1");
  cpu_moe_topk(cpu_arg_p(args, 0), cpu_arg_p(args, 1), cpu_arg_p(args, 2), cpu_arg_u(args, 3),
               cpu_arg_u(args, 4), cpu_arg_u(args, 5), cpu_arg_u(args, 6), cpu_arg_u(args, 7));
  return METRALE_OK;
}

/* The router's logits (gemm_bf16_f32's op), then moe_topk on them; count is left as it is. */
metrale_status cpu_k_moe_router_topk_rows(const gpu_arg *args) {
  const uint32_t m = cpu_arg_u(args, 6), n = cpu_arg_u(args, 7), h = cpu_arg_u(args, 8), e = cpu_arg_u(args, 9);
  if (m != 0 && (e == 0 || e > n))
    return METRALE_ERROR(INVALID_ARGUMENT, "moe_router_topk_rows: e = %u must be in [1, n = %u]", e, n);
  METRALE_RETURN_IF_ERROR(cpu_gemm_bf16_f32(cpu_arg_p(args, 0), cpu_arg_p(args, 3), cpu_arg_p(args, 4), m, n, h));
  cpu_moe_topk(cpu_arg_p(args, 1), cpu_arg_p(args, 2), cpu_arg_p(args, 0), m, e, n, cpu_arg_u(args, 10),
               cpu_arg_u(args, 11));
  return METRALE_OK;
}

metrale_status cpu_k_moe_gate_up(const gpu_arg *args) {
  if (cpu_arg_u(args, 5) == 0 && cpu_arg_u(args, 4) != 0)
    return METRALE_ERROR(INVALID_ARGUMENT, "moe_gate_up: k must be >= 1");
  return cpu_moe_gate_up(cpu_arg_p(args, 0), cpu_arg_p(args, 1), cpu_arg_p(args, 2),
                         cpu_arg_p(args, 3), cpu_arg_u(args, 4), cpu_arg_u(args, 5),
                         cpu_arg_u(args, 6), cpu_arg_u(args, 7));
}

metrale_status cpu_k_moe_down(const gpu_arg *args) {
  return cpu_moe_down(cpu_arg_p(args, 0), cpu_arg_p(args, 1), cpu_arg_p(args, 2),
                      cpu_arg_p(args, 3), cpu_arg_u(args, 4), cpu_arg_u(args, 5),
                      cpu_arg_u(args, 6));
}

/* The routed rows by expert and their 64-row tiles (kernels.def moe_sort). */
metrale_status cpu_k_moe_sort(const gpu_arg *args) {
  int32_t *perm = cpu_arg_p(args, 0), *tiles = cpu_arg_p(args, 1);
  const int32_t *idx = cpu_arg_p(args, 2);
  const uint32_t r = cpu_arg_u(args, 3), e = cpu_arg_u(args, 4);
  uint32_t *start = malloc(((size_t)e + 1) * sizeof *start); /* [E+1] */
  if (!start) return METRALE_ERROR(OUT_OF_MEMORY, "moe_sort: %u experts", e);
  cpu_rows_by_expert(start, (uint32_t *)perm, idx, r, e);
  for (uint32_t i = start[e]; i < r; i++) perm[i] = -1;
  const uint64_t slots = metrale_moe_slots(r, e);
  for (uint64_t t = 0; t < slots; t++) tiles[3 * t] = -1, tiles[3 * t + 1] = 0, tiles[3 * t + 2] = 0;
  for (uint32_t x = 0; x < e; x++) { /* expert x: rows [start[x], start[x+1]) of perm */
    const uint32_t o = start[x], c = start[x + 1] - o;
    for (uint32_t i = 0; 64 * i < c; i++) {
      int32_t *tl = tiles + 3 * ((uint64_t)o / 64 + x + i);
      tl[0] = (int32_t)x, tl[1] = (int32_t)(o + 64 * i), tl[2] = (int32_t)(c - 64 * i < 64 ? c - 64 * i : 64);
    }
  }
  free(start);
  return METRALE_OK;
}

metrale_status cpu_k_moe_gate_up_sorted(const gpu_arg *args) {
  /* gu, x, perm, tiles, w, r, k, h, n, e: gu[j] = w[e] [N,H] . x[j / k] */
  return cpu_expert_gemm_sorted(cpu_arg_p(args, 0), 0, cpu_arg_p(args, 1), cpu_arg_u(args, 6), cpu_arg_p(args, 2),
                                cpu_arg_p(args, 3), cpu_arg_u(args, 5), cpu_arg_u(args, 9), cpu_arg_p(args, 4),
                                cpu_arg_u(args, 8), cpu_arg_u(args, 7));
}

metrale_status cpu_k_moe_down_sorted(const gpu_arg *args) {
  /* y, act, perm, tiles, w, r, h, n, e: y[j] = w[e] [H,N] . act[j] */
  return cpu_expert_gemm_sorted(cpu_arg_p(args, 0), 1, cpu_arg_p(args, 1), 1, cpu_arg_p(args, 2), cpu_arg_p(args, 3),
                                cpu_arg_u(args, 5), cpu_arg_u(args, 8), cpu_arg_p(args, 4), cpu_arg_u(args, 6),
                                cpu_arg_u(args, 7));
}

/* moe_gate_up_sorted then silu_mul, the sums not rounded between (a row at a time) */
metrale_status cpu_k_moe_gate_up_silu_sorted_ws(const gpu_arg *args) {
  metrale_bf16 *act = cpu_arg_p(args, 0);
  const int32_t *perm = cpu_arg_p(args, 2);
  const uint32_t r = cpu_arg_u(args, 5), n = cpu_arg_u(args, 8), half = n / 2;
  if (n % 2 != 0) return METRALE_ERROR(INVALID_ARGUMENT, "moe_gate_up_silu_sorted_ws: n = %u is odd", n);
  float *gu = malloc((size_t)r * n * sizeof *gu);
  if (!gu && r && n) return METRALE_ERROR(OUT_OF_MEMORY, "moe_gate_up_silu_sorted_ws: f32 sums [%u, %u]", r, n);
  metrale_status s = cpu_expert_gemm_sorted(gu, 1, cpu_arg_p(args, 1), cpu_arg_u(args, 6), perm, cpu_arg_p(args, 3), r,
                                            cpu_arg_u(args, 9), cpu_arg_p(args, 4), n, cpu_arg_u(args, 7));
  for (uint32_t i = 0; i < r && !s; i++) {
    const int32_t j = perm[i];
    if (j < 0 || (uint32_t)j >= r) continue;
    const float *g = gu + (size_t)j * n;
    for (uint32_t c = 0; c < half; c++) act[(size_t)j * half + c] = cpu_to_bf(cpu_silu(g[c]) * g[half + c]);
  }
  free(gu);
  return s;
}

/* moe_gate_up then silu_mul for every row, the sums not rounded between; idx NULL: expert 0
 * for every row (the shared expert). */
metrale_status cpu_k_moe_gate_up_silu_rows(const gpu_arg *args) {
  metrale_bf16 *act = cpu_arg_p(args, 0);
  const int32_t *idx = cpu_arg_p(args, 2);
  const uint32_t r = cpu_arg_u(args, 4), k = cpu_arg_u(args, 5), n = cpu_arg_u(args, 7), half = n / 2;
  if (n % 2 != 0) return METRALE_ERROR(INVALID_ARGUMENT, "moe_gate_up_silu_rows: n = %u is odd", n);
  if (k == 0 && r != 0) return METRALE_ERROR(INVALID_ARGUMENT, "moe_gate_up_silu_rows: k must be >= 1");
  if (r == 0 || n == 0) return METRALE_OK;
  float *gu = malloc((size_t)r * n * sizeof *gu);
  int32_t *zeros = idx ? NULL : calloc(r, sizeof *zeros);
  metrale_status s = !gu || (!idx && !zeros)
                         ? METRALE_ERROR(OUT_OF_MEMORY, "moe_gate_up_silu_rows: f32 sums [%u, %u]", r, n)
                         : cpu_expert_gemm(gu, 1, cpu_arg_p(args, 1), k, idx ? idx : zeros, r, cpu_arg_p(args, 3), n,
                                           cpu_arg_u(args, 6));
  for (uint32_t j = 0; j < r && !s; j++) {
    const float *g = gu + (size_t)j * n;
    for (uint32_t c = 0; c < half; c++) act[(size_t)j * half + c] = cpu_to_bf(cpu_silu(g[c]) * g[half + c]);
  }
  free(zeros);
  free(gu);
  return s;
}

/* moe_down_sorted with y bf16 */
metrale_status cpu_k_moe_down_sorted_ws_bf16(const gpu_arg *args) {
  return cpu_expert_gemm_sorted(cpu_arg_p(args, 0), 0, cpu_arg_p(args, 1), 1, cpu_arg_p(args, 2), cpu_arg_p(args, 3),
                                cpu_arg_u(args, 5), cpu_arg_u(args, 8), cpu_arg_p(args, 4), cpu_arg_u(args, 6),
                                cpu_arg_u(args, 7));
}

metrale_status cpu_k_moe_combine_wide_bf16(const gpu_arg *args) {
  combine(cpu_arg_p(args, 0), cpu_arg_p(args, 1), cpu_arg_p(args, 2), 1, cpu_arg_p(args, 3), cpu_arg_p(args, 4),
          cpu_arg_p(args, 5), cpu_arg_u(args, 6), cpu_arg_u(args, 7), cpu_arg_u(args, 8), cpu_arg_u(args, 9),
          cpu_arg_u(args, 10));
  return METRALE_OK;
}

metrale_status cpu_k_moe_combine(const gpu_arg *args) {
  cpu_moe_combine(cpu_arg_p(args, 0), cpu_arg_p(args, 1), cpu_arg_p(args, 2), cpu_arg_p(args, 3),
                  cpu_arg_p(args, 4), cpu_arg_p(args, 5), cpu_arg_u(args, 6), cpu_arg_u(args, 7),
                  cpu_arg_u(args, 8), cpu_arg_u(args, 9), cpu_arg_u(args, 10));
  return METRALE_OK;
}
