/* norm module: rmsnorm, rmsnorm_f32, add_rmsnorm, gated_rmsnorm (one row per iteration). */
#include "cpu_kernels.h"

#include <stddef.h>

/* rsqrt(mean(x^2) + eps) of one row, accumulated in fp32. */
static float row_inv_rms(const metrale_bf16 *x, uint32_t n, float eps) {
  float ss = 0.0f;
  for (uint32_t i = 0; i < n; i++) {
    float v = cpu_bf(x[i]);
    ss += v * v;
  }
  return 1.0f / sqrtf(ss / (float)n + eps);
}

void cpu_rmsnorm(metrale_bf16 *y, const metrale_bf16 *x, const metrale_bf16 *w, uint32_t rows,
                 uint32_t n, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < (int64_t)rows; r++) {
    const metrale_bf16 *xr = x + (size_t)r * n; /* [n] */
    metrale_bf16 *yr = y + (size_t)r * n;
    float inv = row_inv_rms(xr, n, eps);
    for (uint32_t i = 0; i < n; i++) yr[i] = cpu_to_bf(cpu_bf(xr[i]) * inv * (1.0f + cpu_bf(w[i])));
  }
}

void cpu_rmsnorm_f32(float *y, const metrale_bf16 *x, const metrale_bf16 *w, uint32_t rows,
                     uint32_t n, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < (int64_t)rows; r++) {
    const metrale_bf16 *xr = x + (size_t)r * n; /* [n] */
    float *yr = y + (size_t)r * n;
    float inv = row_inv_rms(xr, n, eps);
    for (uint32_t i = 0; i < n; i++) yr[i] = cpu_bf(xr[i]) * inv * (1.0f + cpu_bf(w[i]));
  }
}

/* rmsnorm_f32, each value then rounded to IEEE half (as f32_to_f16) */
void cpu_rmsnorm_f16(uint16_t *y, const metrale_bf16 *x, const metrale_bf16 *w, uint32_t rows, uint32_t n,
                     float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < (int64_t)rows; r++) {
    const metrale_bf16 *xr = x + (size_t)r * n; /* [n] */
    uint16_t *yr = y + (size_t)r * n;
    float inv = row_inv_rms(xr, n, eps);
    for (uint32_t i = 0; i < n; i++) yr[i] = metrale_f32_to_f16(cpu_bf(xr[i]) * inv * (1.0f + cpu_bf(w[i])));
  }
}

void cpu_add_rmsnorm(metrale_bf16 *h, metrale_bf16 *y, const metrale_bf16 *a, const metrale_bf16 *b,
                     const metrale_bf16 *w, uint32_t rows, uint32_t n, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < (int64_t)rows; r++) {
    size_t off = (size_t)r * n;
    for (uint32_t i = 0; i < n; i++)
      h[off + i] = cpu_to_bf(cpu_bf(a[off + i]) + cpu_bf(b[off + i]));
    /* the norm reads the rounded sum, as the unfused add + rmsnorm would */
    float inv = row_inv_rms(h + off, n, eps);
    for (uint32_t i = 0; i < n; i++)
      y[off + i] = cpu_to_bf(cpu_bf(h[off + i]) * inv * (1.0f + cpu_bf(w[i])));
  }
}

void cpu_gated_rmsnorm(metrale_bf16 *y, const metrale_bf16 *o, const float *z,
                       const metrale_bf16 *w, uint32_t rows, uint32_t n, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < (int64_t)rows; r++) {
    size_t off = (size_t)r * n; /* row r = (token, value head), [dv] */
    float inv = row_inv_rms(o + off, n, eps);
    for (uint32_t i = 0; i < n; i++) {
      /* HF rounds the normalised value to the activation dtype before the gate */
      float normed = cpu_bf(cpu_to_bf(cpu_bf(o[off + i]) * inv));
      y[off + i] = cpu_to_bf(normed * cpu_bf(w[i]) * cpu_silu(z[off + i]));
    }
  }
}

metrale_status cpu_k_rmsnorm(const gpu_arg *args) {
  cpu_rmsnorm(cpu_arg_p(args, 0), cpu_arg_p(args, 1), cpu_arg_p(args, 2), cpu_arg_u(args, 3),
              cpu_arg_u(args, 4), cpu_arg_f(args, 5));
  return METRALE_OK;
}

metrale_status cpu_k_rmsnorm_f32(const gpu_arg *args) {
  cpu_rmsnorm_f32(cpu_arg_p(args, 0), cpu_arg_p(args, 1), cpu_arg_p(args, 2), cpu_arg_u(args, 3),
                  cpu_arg_u(args, 4), cpu_arg_f(args, 5));
  return METRALE_OK;
}

metrale_status cpu_k_rmsnorm_f16(const gpu_arg *args) {
  cpu_rmsnorm_f16(cpu_arg_p(args, 0), cpu_arg_p(args, 1), cpu_arg_p(args, 2), cpu_arg_u(args, 3),
                  cpu_arg_u(args, 4), cpu_arg_f(args, 5));
  return METRALE_OK;
}

metrale_status cpu_k_add_rmsnorm(const gpu_arg *args) {
  cpu_add_rmsnorm(cpu_arg_p(args, 0), cpu_arg_p(args, 1), cpu_arg_p(args, 2), cpu_arg_p(args, 3),
                  cpu_arg_p(args, 4), cpu_arg_u(args, 5), cpu_arg_u(args, 6), cpu_arg_f(args, 7));
  return METRALE_OK;
}

metrale_status cpu_k_gated_rmsnorm(const gpu_arg *args) {
  cpu_gated_rmsnorm(cpu_arg_p(args, 0), cpu_arg_p(args, 1), cpu_arg_p(args, 2), cpu_arg_p(args, 3),
                    cpu_arg_u(args, 4), cpu_arg_u(args, 5), cpu_arg_f(args, 6));
  return METRALE_OK;
}
