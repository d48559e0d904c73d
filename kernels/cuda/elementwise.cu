/* elementwise module: add, silu_mul (and silu_mul_rows), f32_to_f16. */
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

/* silu_mul over the flattened [rows, n] outputs, 8 a thread: with n % 8 == 0 a thread's 8
 * lie in one row, and one 16-byte load each of gate and up and one 16-byte store move them;
 * otherwise element by element.  Same arithmetic a value as silu_mul. */
MK_KERNEL(silu_mul_rows)(bf16 *__restrict__ y, const bf16 *__restrict__ gu, unsigned rows, unsigned n) {
  const uint64_t total = (uint64_t)rows * n, i0 = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) * 8u;
  if (i0 >= total) return;
  const bool vec = n % 8u == 0 && (reinterpret_cast<uintptr_t>(gu) & 15u) == 0 &&
                   (reinterpret_cast<uintptr_t>(y) & 15u) == 0;
  if (vec) {
    const uint64_t r = i0 / n, c = i0 % n;
    const uint4 g4 = *reinterpret_cast<const uint4 *>(gu + r * 2u * n + c);
    const uint4 u4 = *reinterpret_cast<const uint4 *>(gu + r * 2u * n + n + c);
    const bf16 *g = reinterpret_cast<const bf16 *>(&g4), *u = reinterpret_cast<const bf16 *>(&u4);
    uint4 o4;
    bf16 *o = reinterpret_cast<bf16 *>(&o4);
#pragma unroll
    for (unsigned q = 0; q < 8; q++) o[q] = f32_to_bf16(silu_f(bf16_to_f32(g[q])) * bf16_to_f32(u[q]));
    *reinterpret_cast<uint4 *>(y + i0) = o4;
    return;
  }
  for (uint64_t i = i0; i < i0 + 8u && i < total; i++) {
    const uint64_t r = i / n, c = i % n;
    y[i] = f32_to_bf16(silu_f(bf16_to_f32(gu[r * 2u * n + c])) * bf16_to_f32(gu[r * 2u * n + n + c]));
  }
}
MK_CHECK(silu_mul_rows, elementwise);

/* 1024 elements a block, four consecutive a thread: one 16-byte load and one 8-byte store
 * where the four are whole and aligned (the scalar form, four 4-byte loads and 2-byte stores
 * a thread, ran at 2.5 TB/s on the H200: docs/perf-gemm.md); each value by one cvt
 * (f32_to_f16_rn, the same bits: 50-51 -> 48-49 us at 16384 x 2048 on the H200). */
MK_KERNEL(f32_to_f16)(uint16_t *__restrict__ y, const float *__restrict__ x, unsigned n) {
  const size_t i = ((size_t)blockIdx.x * 256u + threadIdx.x) * 4u;
  if (i + 4u <= n && (reinterpret_cast<uintptr_t>(x + i) & 15u) == 0 &&
      (reinterpret_cast<uintptr_t>(y + i) & 7u) == 0) {
    const float4 v = *reinterpret_cast<const float4 *>(x + i);
    uint2 r;
    r.x = (uint32_t)f32_to_f16_rn(v.x) | (uint32_t)f32_to_f16_rn(v.y) << 16;
    r.y = (uint32_t)f32_to_f16_rn(v.z) | (uint32_t)f32_to_f16_rn(v.w) << 16;
    *reinterpret_cast<uint2 *>(y + i) = r;
    return;
  }
#pragma unroll
  for (unsigned j = 0; j < 4; j++)
    if (i + j < n) y[i + j] = f32_to_f16_bits(x[i + j]);
}
MK_CHECK(f32_to_f16, elementwise);
static_assert(mk_block("f32_to_f16") == 256, "256 threads of four elements a block");
