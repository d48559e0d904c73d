/* elementwise module: add, silu_mul, f32_to_f16. */
#include "common.cuh"

MK_KERNEL(add)(bf16 *__restrict__ y, const bf16 *__restrict__ a, const bf16 *__restrict__ b,
               unsigned n) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = f32_to_bf16(bf16_to_f32(a[i]) + bf16_to_f32(b[i]));
}
MK_CHECK(add, elementwise);

MK_KERNEL(silu_mul)(bf16 *__restrict__ y, const bf16 *__restrict__ gu, unsigned rows, unsigned n) {
  if (blockIdx.x >= rows) return;
  const bf16 *gate = gu + (size_t)blockIdx.x * 2 * n; /* [n] */
  const bf16 *up = gate + n;                          /* [n] */
  bf16 *yr = y + (size_t)blockIdx.x * n;
  for (unsigned i = threadIdx.x; i < n; i += blockDim.x)
    yr[i] = f32_to_bf16(silu_f(bf16_to_f32(gate[i])) * bf16_to_f32(up[i]));
}
MK_CHECK(silu_mul, elementwise);

/* 1024 elements a block, four a thread, each group of 256 consecutive. */
MK_KERNEL(f32_to_f16)(uint16_t *__restrict__ y, const float *__restrict__ x, unsigned n) {
  const size_t base = (size_t)blockIdx.x * 1024u + threadIdx.x;
#pragma unroll
  for (unsigned j = 0; j < 4; j++) {
    const size_t i = base + 256u * j;
    if (i < n) y[i] = f32_to_f16_bits(x[i]);
  }
}
MK_CHECK(f32_to_f16, elementwise);
static_assert(mk_block("f32_to_f16") == 256, "four groups of 256 elements a block");
