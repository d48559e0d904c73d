/* norm module: rmsnorm, rmsnorm_f32, add_rmsnorm, gated_rmsnorm.  One block per row; each thread
 * strides the row, so any n works.  The second pass re-reads the row, which by then
 * sits in L1/L2 (the row is not cached in shared memory: n is unbounded). */
#include "common.cuh"

namespace {
constexpr unsigned kBlock = mk_block("rmsnorm");
static_assert(kBlock == mk_block("rmsnorm_f32") && kBlock == mk_block("add_rmsnorm") &&
                  kBlock == mk_block("gated_rmsnorm"),
              "the norm kernels share one block size");

/* 1 / sqrt(mean(v^2) + eps) from this thread's partial sum of squares. */
__device__ __forceinline__ float inv_rms(float ss, unsigned n, float eps, float *red) {
  float total = block_sum<kBlock>(ss, red);
  return 1.0f / sqrtf(total / (float)n + eps);
}
}  // namespace

namespace {
/* rmsnorm with (1 + w); Y is bf16 (rounded) or float (the mixer's f32 input). */
template <typename Y>
__device__ __forceinline__ void rmsnorm_row(Y *__restrict__ y, const bf16 *__restrict__ x,
                                            const bf16 *__restrict__ w, unsigned rows, unsigned n,
                                            float eps) {
  __shared__ float red[kBlock];
  if (blockIdx.x >= rows) return; /* uniform per block: no barrier is skipped by part of it */
  const size_t off = (size_t)blockIdx.x * n; /* row [n] */
  float ss = 0.0f;
  for (unsigned i = threadIdx.x; i < n; i += kBlock) {
    float v = bf16_to_f32(x[off + i]);
    ss += v * v;
  }
  float inv = inv_rms(ss, n, eps, red);
  for (unsigned i = threadIdx.x; i < n; i += kBlock) {
    const float v = bf16_to_f32(x[off + i]) * inv * (1.0f + bf16_to_f32(w[i]));
    if constexpr (sizeof(Y) == sizeof(float))
      y[off + i] = v;
    else
      y[off + i] = f32_to_bf16(v);
  }
}
}  // namespace

MK_KERNEL(rmsnorm)(bf16 *y, const bf16 *x, const bf16 *w, unsigned rows, unsigned n, float eps) {
  rmsnorm_row(y, x, w, rows, n, eps);
}
MK_CHECK(rmsnorm, norm);

MK_KERNEL(rmsnorm_f32)(float *y, const bf16 *x, const bf16 *w, unsigned rows, unsigned n,
                       float eps) {
  rmsnorm_row(y, x, w, rows, n, eps);
}
MK_CHECK(rmsnorm_f32, norm);

MK_KERNEL(add_rmsnorm)(bf16 *__restrict__ h, bf16 *__restrict__ y, const bf16 *__restrict__ a,
                       const bf16 *__restrict__ b, const bf16 *__restrict__ w, unsigned rows,
                       unsigned n, float eps) {
  __shared__ float red[kBlock];
  if (blockIdx.x >= rows) return; /* uniform per block: no barrier is skipped by part of it */
  const size_t off = (size_t)blockIdx.x * n;
  float ss = 0.0f;
  for (unsigned i = threadIdx.x; i < n; i += kBlock) {
    /* the norm reads the rounded sum, exactly as add followed by rmsnorm would */
    float v = round_bf16(bf16_to_f32(a[off + i]) + bf16_to_f32(b[off + i]));
    h[off + i] = f32_to_bf16(v);
    ss += v * v;
  }
  float inv = inv_rms(ss, n, eps, red);
  for (unsigned i = threadIdx.x; i < n; i += kBlock) {
    float v = round_bf16(bf16_to_f32(a[off + i]) + bf16_to_f32(b[off + i]));
    y[off + i] = f32_to_bf16(v * inv * (1.0f + bf16_to_f32(w[i])));
  }
}
MK_CHECK(add_rmsnorm, norm);

MK_KERNEL(gated_rmsnorm)(bf16 *__restrict__ y, const bf16 *__restrict__ o,
                         const float *__restrict__ z, const bf16 *__restrict__ w, unsigned rows,
                         unsigned n, float eps) {
  __shared__ float red[kBlock];
  if (blockIdx.x >= rows) return; /* uniform per block: no barrier is skipped by part of it */
  const size_t off = (size_t)blockIdx.x * n; /* row = (token, value head), [dv] */
  /* The thread's first element of o, z and w is loaded before the reduction (n = dv <= 256:
   * all of them), so the gate's loads do not wait for it. */
  const unsigned i0 = threadIdx.x;
  const float o0 = i0 < n ? bf16_to_f32(o[off + i0]) : 0.0f, z0 = i0 < n ? z[off + i0] : 0.0f,
              w0 = i0 < n ? bf16_to_f32(w[i0]) : 0.0f;
  float ss = o0 * o0;
  for (unsigned i = i0 + kBlock; i < n; i += kBlock) {
    float v = bf16_to_f32(o[off + i]);
    ss += v * v;
  }
  float inv = inv_rms(ss, n, eps, red);
  if (i0 < n) y[off + i0] = f32_to_bf16(round_bf16(o0 * inv) * w0 * silu_f(z0));
  for (unsigned i = i0 + kBlock; i < n; i += kBlock) {
    /* HF rounds the normalised value to the activation dtype before the gate; the
     * weight is used as is (no 1 + w here) */
    float normed = round_bf16(bf16_to_f32(o[off + i]) * inv);
    y[off + i] = f32_to_bf16(normed * bf16_to_f32(w[i]) * silu_f(z[off + i])); /* z is f32 */
  }
}
MK_CHECK(gated_rmsnorm, norm);
