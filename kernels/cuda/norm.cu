/* norm module: rmsnorm, rmsnorm_f32, add_rmsnorm, gated_rmsnorm.  One block per row; each thread
 * strides the row, so any n works.  The second pass re-reads the row, which by then
 * sits in L1/L2 (the row is not cached in shared memory: n is unbounded). */
#include "common.cuh"

namespace {
constexpr unsigned kBlock = mk_block("rmsnorm");
static_assert(kBlock == mk_block("rmsnorm_f32") && kBlock == mk_block("rmsnorm_f16") && kBlock == mk_block("add_rmsnorm") &&
                  kBlock == mk_block("gated_rmsnorm"),
              "the norm kernels share one block size");

/* 1 / sqrt(mean(v^2) + eps) from this thread's partial sum of squares. */
__device__ __forceinline__ float inv_rms(float ss, unsigned n, float eps, float *red) {
  float total = block_sum<kBlock>(ss, red);
  return 1.0f / sqrtf(total / (float)n + eps);
}
}  // namespace

namespace {
/* Rows of up to kHeld * kBlock elements (the layer's hidden sizes) are read once into
 * registers, every load of a thread issued before the sum uses any: a decode step's norms are
 * one or a few rows, so a block's strided loop of dependent round trips was the whole kernel
 * (7-9 us for one row of 2048 on the H200, docs/perf-decode.md).  Each thread still sums its
 * elements i, i + kBlock, ... in that order, as the loop below does, so both give the same
 * bits. */
constexpr unsigned kHeld = 8;

/* One row of an rmsnorm with (1 + w): v = load(i) for i < n, keep(i, v) once each (before
 * the sum), then store(i, v * inv * (1 + w[i])) with inv = 1 / rms(v). */
template <typename Load, typename Keep, typename Store>
__device__ __forceinline__ void rms_row(const bf16 *__restrict__ w, unsigned n, float eps, float *red, Load load,
                                        Keep keep, Store store) {
  float ss = 0.0f;
  if (n <= kHeld * kBlock) {
    float v[kHeld], g[kHeld]; /* the row and its weights (1 + w), all loads issued first */
#pragma unroll
    for (unsigned j = 0; j < kHeld; j++) {
      const unsigned i = threadIdx.x + j * kBlock;
      v[j] = i < n ? load(i) : 0.0f;
      g[j] = i < n ? 1.0f + bf16_to_f32(w[i]) : 0.0f;
    }
#pragma unroll
    for (unsigned j = 0; j < kHeld; j++) {
      const unsigned i = threadIdx.x + j * kBlock;
      if (i < n) keep(i, v[j]);
      ss += v[j] * v[j]; /* + 0 past n: the same bits */
    }
    const float inv = inv_rms(ss, n, eps, red);
#pragma unroll
    for (unsigned j = 0; j < kHeld; j++) {
      const unsigned i = threadIdx.x + j * kBlock;
      if (i < n) store(i, v[j] * inv * g[j]);
    }
    return;
  }
  for (unsigned i = threadIdx.x; i < n; i += kBlock) {
    const float v = load(i);
    keep(i, v);
    ss += v * v;
  }
  const float inv = inv_rms(ss, n, eps, red);
  for (unsigned i = threadIdx.x; i < n; i += kBlock) store(i, load(i) * inv * (1.0f + bf16_to_f32(w[i])));
}

/* rmsnorm with (1 + w); Y is bf16 (rounded) or float (the mixer's f32 input); F16: Y is IEEE
 * half (that input rounded as f32_to_f16 rounds it; bf16 and half are both uint16_t here). */
template <typename Y, bool F16 = false>
__device__ __forceinline__ void rmsnorm_row(Y *__restrict__ y, const bf16 *__restrict__ x,
                                            const bf16 *__restrict__ w, unsigned rows, unsigned n,
                                            float eps) {
  __shared__ float red[kBlock];
  mk_allow_next(); /* the early-start kernel after the layer's norms (the in_proj gemv, the router)
                    * loads its weights into L2 while the norm runs: layer decode 1 / 2 -1.6 /
                    * -1.8 us on the H200 (docs/perf-decode.md section 29) */
  if (blockIdx.x >= rows) return; /* uniform per block: no barrier is skipped by part of it */
  const size_t off = (size_t)blockIdx.x * n; /* row [n] */
  rms_row(
      w, n, eps, red, [&](unsigned i) { return bf16_to_f32(x[off + i]); }, [](unsigned, float) {},
      [&](unsigned i, float v) {
        if constexpr (sizeof(Y) == sizeof(float))
          y[off + i] = v;
        else if constexpr (F16)
          y[off + i] = f32_to_f16_rn(v);
        else
          y[off + i] = f32_to_bf16(v);
      });
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

/* rmsnorm_f32 with the values stored as IEEE half: the layer's input norm where the mixer reads x
 * only as fp16, in place of rmsnorm_f32 and f32_to_f16 (half the norm's writes, and no pass over
 * the f32 row). */
MK_KERNEL(rmsnorm_f16)(uint16_t *y, const bf16 *x, const bf16 *w, unsigned rows, unsigned n, float eps) {
  rmsnorm_row<uint16_t, true>(y, x, w, rows, n, eps);
}
MK_CHECK(rmsnorm_f16, norm);

MK_KERNEL(add_rmsnorm)(bf16 *__restrict__ h, bf16 *__restrict__ y, const bf16 *__restrict__ a,
                       const bf16 *__restrict__ b, const bf16 *__restrict__ w, unsigned rows,
                       unsigned n, float eps) {
  __shared__ float red[kBlock];
  mk_allow_next(); /* as rmsnorm_row's */
  if (blockIdx.x >= rows) return; /* uniform per block: no barrier is skipped by part of it */
  const size_t off = (size_t)blockIdx.x * n;
  /* the norm reads the rounded sum h, exactly as add followed by rmsnorm would */
  rms_row(
      w, n, eps, red,
      [&](unsigned i) { return round_bf16(bf16_to_f32(a[off + i]) + bf16_to_f32(b[off + i])); },
      [&](unsigned i, float v) { h[off + i] = f32_to_bf16(v); },
      [&](unsigned i, float v) { y[off + i] = f32_to_bf16(v); });
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

namespace {
constexpr unsigned kRowsBlock = mk_block("gated_rmsnorm_rows");
constexpr unsigned kGroup = 32;                         /* threads per row (kernels.def) */
constexpr unsigned kRowsWarp = 2;                                   /* rows a group of 32 threads */
constexpr unsigned kRowsPerBlock = kRowsBlock / kGroup * kRowsWarp; /* 16 */
static_assert(kRowsBlock % kGroup == 0, "whole row groups per block");
static_assert(kRowsPerBlock == 16, "kernels.def gated_rmsnorm_rows: block b takes rows [16b, 16b+16)");

/* Sum over an aligned group of 32 threads.  The xor offsets 16..1 stay inside the group,
 * so on a 64-lane wavefront each half reduces its own row. */
__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
  for (unsigned off = kGroup / 2; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off, kGroup);
  return v;
}

__device__ __forceinline__ bool aligned8(const void *p) { return ((uintptr_t)p & 7u) == 0; }

/* 4 bf16 from an 8-byte word pair, and back. */
__device__ __forceinline__ void unpack4(uint2 v, float f[4]) {
  f[0] = bf16_lo(v.x); f[1] = bf16_hi(v.x);
  f[2] = bf16_lo(v.y); f[3] = bf16_hi(v.y);
}
__device__ __forceinline__ uint2 pack4(const float f[4]) { return make_uint2(bf16x2_rn(f[0], f[1]), bf16x2_rn(f[2], f[3])); }
/* round_bf16 of four values, two a cvt (bf16x2_rn) */
__device__ __forceinline__ void round4(float f[4]) {
  const uint32_t a = bf16x2_rn(f[0], f[1]), b = bf16x2_rn(f[2], f[3]);
  f[0] = bf16_lo(a), f[1] = bf16_hi(a), f[2] = bf16_lo(b), f[3] = bf16_hi(b);
}
}  // namespace

/* gated_rmsnorm with 32 threads a row: the contract kernel's 256-thread block per row of
 * dv = 128 leaves half its threads idle and spends its time in block barriers; here a
 * row is one warp's work with no barrier, and 4 elements a thread move as vectors.  A warp
 * takes two adjacent rows and loads both before either sum, so that twice the bytes are
 * in flight (H200, 16384 tokens: 175 -> 167 us; docs/perf-prefill.md, part 5).
 * Numerics as gated_rmsnorm but for the order of the sum of squares and, on rows of a multiple
 * of 4, silu_fast for silu_f (a few ulp before the bf16 rounding; 44 -> 38 us at 4096 tokens,
 * 171 -> 146 at 16384, docs/perf-prefill.md part 8).  The kernel is bound by its instructions,
 * not its bytes (H200: 79 % of issue slots busy at 54 % of DRAM bandwidth), so those rows
 * round to bf16 by one cvt a pair (bf16x2_rn, same bits): 29.9M -> 22.9M instructions, 37.6 ->
 * 32.8 us at 4096 tokens, 146 -> 126 at 16384 (part 15). */
MK_KERNEL(gated_rmsnorm_rows)(bf16 *__restrict__ y, const bf16 *__restrict__ o,
                              const float *__restrict__ z, const bf16 *__restrict__ w,
                              unsigned rows, unsigned n, float eps) {
  const unsigned lane = threadIdx.x % kGroup;
  const size_t r1 = ((size_t)blockIdx.x * kRowsPerBlock / kRowsWarp + threadIdx.x / kGroup) * kRowsWarp;
  const bool vec = n % 4 == 0 && aligned8(o) && aligned8(y) && aligned16(z) && aligned8(w);
  if (vec) {
    /* The first 4-vector of o and z of each of the group's rows, and of w, are loaded before
     * any reduction (n <= 128: all of them), so that every load is in flight at once. */
    const unsigned i0 = 4 * lane;
    float o0[kRowsWarp][4], w0[4] = {0, 0, 0, 0};
    float4 z0[kRowsWarp];
    if (r1 < rows && i0 < n) unpack4(*(const uint2 *)(w + i0), w0);
#pragma unroll
    for (unsigned j = 0; j < kRowsWarp; j++) {
      const size_t r = r1 + j;
      o0[j][0] = o0[j][1] = o0[j][2] = o0[j][3] = 0.0f;
      z0[j] = make_float4(0, 0, 0, 0);
      if (r < rows && i0 < n) {
        unpack4(*(const uint2 *)(o + r * n + i0), o0[j]);
        z0[j] = *(const float4 *)(z + r * n + i0);
      }
    }
#pragma unroll
    for (unsigned j = 0; j < kRowsWarp; j++) {
      /* A group past the last row still takes part in the shuffles; it only skips memory. */
      const size_t r = r1 + j;
      const bool live = r < rows, has0 = live && i0 < n;
      const size_t off = live ? r * n : 0; /* row = (token, value head), [dv] */
      float ss = o0[j][0] * o0[j][0] + o0[j][1] * o0[j][1] + o0[j][2] * o0[j][2] + o0[j][3] * o0[j][3];
      for (unsigned i = i0 + 4 * kGroup; live && i < n; i += 4 * kGroup) {
        float v[4];
        unpack4(*(const uint2 *)(o + off + i), v);
        ss += v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3];
      }
      const float inv = 1.0f / sqrtf(group_sum(ss) / (float)n + eps);
      if (has0) {
        const float zz[4] = {z0[j].x, z0[j].y, z0[j].z, z0[j].w};
        float out[4] = {o0[j][0] * inv, o0[j][1] * inv, o0[j][2] * inv, o0[j][3] * inv};
        round4(out);
#pragma unroll
        for (unsigned u = 0; u < 4; u++) out[u] = out[u] * w0[u] * silu_fast(zz[u]); /* the CPU reference's order */
        *(uint2 *)(y + off + i0) = pack4(out);
      }
      for (unsigned i = i0 + 4 * kGroup; live && i < n; i += 4 * kGroup) {
        float v[4], ww[4], out[4];
        unpack4(*(const uint2 *)(o + off + i), v);
        unpack4(*(const uint2 *)(w + i), ww);
        const float4 zv = *(const float4 *)(z + off + i);
        const float zz[4] = {zv.x, zv.y, zv.z, zv.w};
#pragma unroll
        for (unsigned u = 0; u < 4; u++) out[u] = v[u] * inv;
        round4(out);
#pragma unroll
        for (unsigned u = 0; u < 4; u++) out[u] = out[u] * ww[u] * silu_fast(zz[u]);
        *(uint2 *)(y + off + i) = pack4(out);
      }
    }
    return;
  }
  for (unsigned j = 0; j < kRowsWarp; j++) {
    const size_t r = r1 + j;
    const bool live = r < rows;
    const size_t off = live ? r * n : 0;
    float ss = 0.0f;
    for (unsigned i = lane; live && i < n; i += kGroup) {
      const float v = bf16_to_f32(o[off + i]);
      ss += v * v;
    }
    const float inv = 1.0f / sqrtf(group_sum(ss) / (float)n + eps);
    for (unsigned i = lane; live && i < n; i += kGroup) {
      const float normed = round_bf16(bf16_to_f32(o[off + i]) * inv);
      y[off + i] = f32_to_bf16(normed * bf16_to_f32(w[i]) * silu_f(z[off + i]));
    }
  }
}
MK_CHECK(gated_rmsnorm_rows, norm);
