/* elementwise module: add, silu_mul, f32_to_f16. */
#include "cpu_kernels.h"

#include <stddef.h>

void cpu_add(metrale_bf16 *y, const metrale_bf16 *a, const metrale_bf16 *b, uint32_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < (int64_t)n; i++) y[i] = cpu_to_bf(cpu_bf(a[i]) + cpu_bf(b[i]));
}

void cpu_silu_mul(metrale_bf16 *y, const metrale_bf16 *gu, uint32_t rows, uint32_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < (int64_t)rows; r++) {
    const metrale_bf16 *gate = gu + (size_t)r * 2 * n; /* [n] */
    const metrale_bf16 *up = gate + n;                 /* [n] */
    metrale_bf16 *yr = y + (size_t)r * n;
    for (uint32_t i = 0; i < n; i++) yr[i] = cpu_to_bf(cpu_silu(cpu_bf(gate[i])) * cpu_bf(up[i]));
  }
}

metrale_status cpu_k_add(const gpu_arg *args) {
  cpu_add(cpu_arg_p(args, 0), cpu_arg_p(args, 1), cpu_arg_p(args, 2), cpu_arg_u(args, 3));
  return METRALE_OK;
}

metrale_status cpu_k_silu_mul(const gpu_arg *args) {
  cpu_silu_mul(cpu_arg_p(args, 0), cpu_arg_p(args, 1), cpu_arg_u(args, 2), cpu_arg_u(args, 3));
  return METRALE_OK;
}

metrale_status cpu_k_f32_to_f16(const gpu_arg *args) {
  uint16_t *y = cpu_arg_p(args, 0);
  const float *x = cpu_arg_p(args, 1);
  const uint32_t n = cpu_arg_u(args, 2);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < (int64_t)n; i++) y[i] = metrale_f32_to_f16(x[i]);
  return METRALE_OK;
}
